"""Reliability-weighted vote: each client's vote counts by the log-odds of its accuracy.

When clients are unequal, a plain majority lets weak clients outvote a strong one, and the
consensus can be worse than its best member. If client ``i`` is right with probability
``q_i`` and wrong uniformly over the other ``C - 1`` classes, independently of the others,
the most probable label of an example is the weighted plurality with weights

``w_i = log((C - 1) · q_i / (1 - q_i))``

(Nitzan & Paroush, 1982): a client at chance level (``q_i = 1/C``) gets weight 0, and a
client much better than the others can outvote several weak ones. ``q_i`` is the client's
*reliability*: in the trainer, its out-of-fold accuracy on its own rows, which it sends as
``quality`` when it has no privacy mechanism (a private client sends none, and the rule then
falls back to the plain majority).

Examples
--------
>>> import numpy as np
>>> from consensus.reliability import reliability_vote, reliability_weights
>>> votes = np.array([[1, 1], [0, 1], [0, 0]])  # a strong client and two weak ones
>>> reliability_vote(votes, n_classes=2).tolist()  # no reliability: plain majority
[0, 1]
>>> reliability_vote(votes, n_classes=2, reliability=[0.95, 0.7, 0.7]).tolist()
[1, 1]
>>> np.round(reliability_weights([0.95, 0.7, 0.7], n_classes=2), 3).tolist()
[2.944, 0.847, 0.847]
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._base import Consensus
from ._validation import check_client_accuracy, check_inputs, check_n_classes
from .hard import plurality_winners

__all__ = ["ReliabilityVote", "reliability_vote", "reliability_weights"]

#: reliabilities are clipped below this, so that one client cannot get an infinite weight
MAX_RELIABILITY = 0.99


def reliability_weights(reliability: ArrayLike, n_classes: int) -> NDArray[np.float64]:
    """Vote weights ``log((C - 1) · q / (1 - q))`` of reliabilities ``q``.

    ``q`` is clipped to ``[1/C, 0.99]``: a client at or below chance level gets weight 0
    and none gets an infinite weight. NaN (not sent) counts as the mean of the sent values.

    Parameters
    ----------
    reliability : array-like of shape (m,)
        Each client's accuracy in [0, 1], NaN where unknown.
    n_classes : int
        Number of classes C.

    Returns
    -------
    ndarray of float64, shape (m,)
        Non-negative weights; all ones when no client sent a reliability, or when every
        client is at chance level (then the vote is the plain majority).

    Examples
    --------
    >>> import numpy as np
    >>> reliability_weights([0.5, 0.75, np.nan], n_classes=2).round(4).tolist()
    [0.0, 1.0986, 0.5108]
    >>> reliability_weights([np.nan, np.nan], n_classes=3).tolist()
    [1.0, 1.0]
    """
    n_classes = check_n_classes(n_classes)
    m = len(np.atleast_1d(np.asarray(reliability)))
    r = check_client_accuracy(reliability, m, "reliability")
    if r is None or n_classes < 2:
        return np.ones(m)
    q = np.clip(r, 1.0 / n_classes, MAX_RELIABILITY)
    w = np.log((n_classes - 1) * q / (1.0 - q))
    w = np.maximum(w, 0.0)  # exactly 0 at chance level (rounding aside)
    return w if w.max() > 0 else np.ones_like(w)


def reliability_vote(
    labels: ArrayLike, n_classes: int, reliability: ArrayLike | None = None
) -> NDArray[np.int64]:
    """Plurality vote weighted by the log-odds of each client's reliability.

    Parameters
    ----------
    labels : array-like
        Hard votes ``(m, n)`` (-1 = did not vote), or probabilities ``(m, n, n_classes)``
        reduced to each client's argmax (all-NaN row = did not vote).
    n_classes : int
        Number of classes C.
    reliability : array-like of shape (m,), optional
        Each client's accuracy in [0, 1], NaN where not sent; None: the plain majority.

    Returns
    -------
    ndarray of int64, shape (n,)
        The weighted plurality (ties to the smallest class code), -1 where nobody voted.

    Examples
    --------
    >>> import numpy as np
    >>> votes = np.array([[2, 0], [1, 0], [1, 1]])
    >>> reliability_vote(votes, 3, reliability=[0.9, 0.6, 0.6]).tolist()  # 2.89 vs 2 x 1.10
    [2, 0]
    """
    checked = check_inputs(labels, n_classes, None)
    m = checked.votes.shape[0]
    weights = None if reliability is None else reliability_weights(reliability, checked.n_classes)
    if weights is not None and weights.shape != (m,):
        raise ValueError(f"reliability must have shape ({m},), got {weights.shape}")
    return plurality_winners(checked.votes, checked.n_classes, weights, None)


class ReliabilityVote(Consensus):
    """Hard-label vote weighted by each client's reliability; see `reliability_vote`.

    The trainer's default consensus without a privacy mechanism (``consensus="auto"``).
    The server passes each client's ``quality`` (its out-of-fold accuracy on its own rows,
    NaN where not sent) and the number of classes to `weights_for`, which turns them into
    log-odds vote weights (`reliability_weights`); ``__call__`` is then a weighted
    plurality, with ``weights`` per client ``(m,)`` or per client and example ``(m, n)``
    like every rule's.

    Attributes
    ----------
    uses_quality : True
    predicts_with_quality : True
        A federation's prediction rule weighs each model by its client's reliability too.
    weights_need_n_classes : True
        The server passes ``n_classes=`` to `weights_for`.

    Examples
    --------
    >>> import numpy as np
    >>> rule = ReliabilityVote()
    >>> votes = np.array([[1, 1], [0, 1], [0, 0]])
    >>> w = rule.weights_for([0, 1, 2], 2, quality=np.array([0.95, 0.7, 0.7]), n_classes=2)
    >>> rule(votes, n_classes=2, weights=w).tolist()
    [1, 1]
    >>> rule(votes, n_classes=2).tolist()  # nobody sent a quality: the majority
    [0, 1]
    """

    output: ClassVar[Literal["hard", "soft"]] = "hard"
    uses_quality: ClassVar[bool] = True
    predicts_with_quality: ClassVar[bool] = True
    weights_need_n_classes: ClassVar[bool] = True

    def weights_for(
        self,
        client_ids: ArrayLike,
        n_public: int,
        quality: ArrayLike | None = None,
        n_classes: int | None = None,
    ) -> NDArray[np.float64] | None:
        """Log-odds vote weights of the clients' reliabilities (``quality``), or None when
        nobody sent one (or ``n_classes`` is not given).

        Examples
        --------
        >>> import numpy as np
        >>> ReliabilityVote().weights_for([0, 1], 5, quality=[np.nan, 0.8], n_classes=2).round(3)
        array([1.386, 1.386])
        """
        if quality is None or n_classes is None:
            return None
        m = len(np.atleast_1d(np.asarray(client_ids)))
        if check_client_accuracy(quality, m, "quality") is None:
            return None
        return reliability_weights(quality, n_classes)

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[Any]:
        checked = check_inputs(labels, n_classes, weights)
        return plurality_winners(checked.votes, checked.n_classes, checked.weights, None)
