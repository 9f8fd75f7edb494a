"""Quality-aware hard-label consensus: votes weighted by sharpened per-example certainty.

In a pathological non-iid federation each client holds a few classes and confidently votes
for one of them on every public example, including examples of classes it never saw; a plain
(or FedAUX certainty-weighted) vote is then dominated by clients that know nothing about the
example. `quality_vote` lets the clients that *recognise* an example decide it:

- ``s_i(x)`` — client ``i``'s certainty that ``x`` looks like its own data (a FedAUX scorer,
  :func:`cotrain.privacy.fedaux.fedaux_weights`; it is a separate model, so it works for the
  hard votes of any learner);
- ``q_i`` — an optional scalar the client knows about itself, e.g. its out-of-fold accuracy on
  its own private data (NaN where not sent);
- the vote weight is ``w_i(x) = (s_i(x) / max_j s_j(x))^power · q_i^quality_power``, optionally
  kept only for the ``top_k`` largest weights of each example; the consensus is the weighted
  plurality (ties to the smallest class code).

A large ``power`` approaches "the most certain client decides"; ``power`` near 1 is FedAUX's
weighted vote. The per-example normalisation changes no winner (a weighted vote is invariant
to scaling one example's weights); it keeps ``s^power`` from underflowing.

Examples
--------
>>> import numpy as np
>>> from consensus.quality import quality_vote
>>> votes = np.array([[3, 3], [5, 5], [5, 5]])  # client 0 knows example 0, the others guess
>>> certainty = np.array([[0.9, 0.3], [0.5, 0.6], [0.5, 0.6]])
>>> quality_vote(votes, n_classes=10, certainty=certainty, power=1.0)
array([5, 5])
>>> quality_vote(votes, n_classes=10, certainty=certainty, power=4.0)
array([3, 5])
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_client_accuracy, check_inputs, check_nonnegative_finite
from .certainty import CertaintyWeighted
from .hard import plurality_winners

__all__ = ["QualityVote", "quality_vote", "quality_weights"]


def _check_power(value: Any, name: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a finite real number, got {type(value).__name__}")
    number = float(value)
    if not np.isfinite(number) or number < 0 or (positive and number == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite real number {bound}, got {number!r}")
    return number


def _check_top_k(top_k: Any) -> int | None:
    if top_k is None:
        return None
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1:
        raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")
    return int(top_k)


def quality_weights(
    certainty: ArrayLike | None,
    n_public: int,
    quality: ArrayLike | None = None,
    *,
    power: float = 16.0,
    quality_power: float = 1.0,
    top_k: int | None = None,
    n_clients: int | None = None,
) -> NDArray[np.float64]:
    """Vote weights ``(s_i(x) / max_j s_j(x))^power · q_i^quality_power``, top-k masked.

    Parameters
    ----------
    certainty : array-like of shape (m, n_public) or (m,), or None
        Non-negative certainty of each client (per example, or one per client). None: every
        client equally certain (then only ``quality`` and ``top_k`` act).
    n_public : int
        Number of public examples ``n``.
    quality : array-like of shape (m,), optional
        Each client's own quality in [0, 1] (e.g. out-of-fold accuracy), NaN where not sent.
        Missing values count as the mean of the sent ones; all missing (or None): ignored.
    power : float, default=16.0
        Sharpening exponent > 0 of the certainty.
    quality_power : float, default=1.0
        Exponent >= 0 of the quality (0 ignores it).
    top_k : int, optional
        Keep only the ``top_k`` largest weights of each example (ties by client order).
    n_clients : int, optional
        ``m``, required when ``certainty`` is None.

    Returns
    -------
    ndarray of float64, shape (m, n_public)
        Weights in [0, 1]; the largest of each example is ``max_i q_i^quality_power`` up to
        the certainty's ties, 0 where every client has certainty 0.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus.quality import quality_weights
    >>> quality_weights([[0.8, 0.1], [0.4, 0.2]], n_public=2, power=1.0)
    array([[1. , 0.5],
           [0.5, 1. ]])
    >>> quality_weights([[0.8, 0.1], [0.4, 0.2]], n_public=2, power=1.0, top_k=1)
    array([[1., 0.],
           [0., 1.]])
    >>> quality_weights(None, 2, quality=[0.5, np.nan], n_clients=2)
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """
    power = _check_power(power, "power", positive=True)
    quality_power = _check_power(quality_power, "quality_power", positive=False)
    top_k = _check_top_k(top_k)
    if isinstance(n_public, bool) or not isinstance(n_public, numbers.Integral) or n_public < 0:
        raise ValueError(f"n_public must be an integer >= 0, got {n_public!r}")
    if certainty is None:
        if n_clients is None:
            raise ValueError("n_clients is required when certainty is None")
        s = np.ones((int(n_clients), int(n_public)))
    else:
        s = check_nonnegative_finite(certainty, "certainty")
        if s.ndim == 1:
            s = np.repeat(s[:, None], n_public, axis=1)
        if s.ndim != 2 or s.shape[1] != n_public:
            raise ValueError(
                f"certainty must have shape (m,) or (m, n_public={n_public}); got {s.shape}"
            )
        if n_clients is not None and s.shape[0] != n_clients:
            raise ValueError(f"certainty has {s.shape[0]} rows but n_clients={n_clients}")
    m = s.shape[0]
    top = s.max(axis=0, initial=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(top > 0, s / np.where(top > 0, top, 1.0), 0.0) ** power
    q = check_client_accuracy(quality, m, "quality")
    if q is not None and quality_power > 0:
        w *= (q**quality_power)[:, None]
    if top_k is not None and top_k < m:
        drop = np.argsort(-w, axis=0, kind="stable")[top_k:]
        np.put_along_axis(w, drop, 0.0, axis=0)
    return w


def quality_vote(
    labels: ArrayLike,
    n_classes: int,
    certainty: ArrayLike | None = None,
    quality: ArrayLike | None = None,
    *,
    power: float = 16.0,
    quality_power: float = 1.0,
    top_k: int | None = None,
) -> NDArray[np.int64]:
    """Hard-label plurality vote weighted by sharpened certainty and client quality.

    Parameters
    ----------
    labels : array-like
        Hard votes ``(m, n)`` (-1 = did not vote), or probabilities ``(m, n, n_classes)``
        reduced to each client's argmax (all-NaN row = did not vote).
    n_classes : int
        Number of classes C.
    certainty : array-like of shape (m, n) or (m,), optional
        Non-negative certainty ``s_i(x)`` of each client; None = equal.
    quality : array-like of shape (m,), optional
        Scalar quality of each client in [0, 1], NaN where not sent.
    power, quality_power, top_k
        See `quality_weights`.

    Returns
    -------
    ndarray of int64, shape (n,)
        The weighted plurality class (ties to the smallest code), -1 where nobody voted with
        positive weight.

    Raises
    ------
    ValueError, TypeError
        Naming the argument: bad shapes, negative or non-finite certainty, quality outside
        [0, 1], ``power <= 0``, ``top_k < 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus.quality import quality_vote
    >>> votes = np.array([[0, 1], [2, 1], [2, 2]])
    >>> quality_vote(votes, n_classes=3)
    array([2, 1])
    >>> quality_vote(votes, n_classes=3, quality=[1.0, 0.3, 0.3])
    array([0, 1])
    >>> quality_vote(votes, n_classes=3, quality=[np.nan, np.nan, np.nan])
    array([2, 1])
    """
    checked = check_inputs(labels, n_classes, None)
    m, n = checked.votes.shape
    w = quality_weights(
        certainty,
        n,
        quality,
        power=power,
        quality_power=quality_power,
        top_k=top_k,
        n_clients=m,
    )
    return plurality_winners(checked.votes, checked.n_classes, w, None)


class QualityVote(CertaintyWeighted):
    """Quality-aware hard-label consensus; see `quality_vote`.

    A `CertaintyWeighted` whose certainty is sharpened per example (``power``, ``top_k``) and
    combined with each client's scalar quality when the server passes one.

    Parameters
    ----------
    scores : array-like of shape (n_clients_total, n_public) or (n_clients_total,), optional
        Certainty scores of every client (row ``i`` = client id ``i``), e.g.
        ``cotrain.privacy.fedaux_weights(...)``. None: all clients equally certain (only
        quality acts).
    power : float, default=16.0
        Sharpening exponent of the certainty (> 0).
    quality_power : float, default=1.0
        Exponent of the client quality (>= 0; 0 ignores it).
    top_k : int, optional
        Only the ``top_k`` most heavily weighted clients vote on each example.
    scorer_epsilon, scorer_delta : float, optional
        (ε, δ) of the scores' one release, record-level against the server, as in
        `CertaintyWeighted`: the trainer's privacy ledger adds them to every client's ε.

    Attributes
    ----------
    uses_quality : True
        The server passes ``quality=`` (each client's own accuracy, NaN where not sent) to
        `weights_for`.

    Notes
    -----
    `weights_for` folds the quality into the certainty as ``s_i(x) · q_i^(quality_power /
    power)``; ``__call__`` then treats ``weights`` as certainty and sharpens it, so the
    vote weight is ``(s_i(x) / max_j s_j(x))^power · q_i^quality_power`` up to a factor per
    example (which changes no winner). With all quality NaN (e.g. under privacy, where a
    client does not send it) the rule uses the certainty alone. The client quality is a
    number computed from private data: under a privacy mechanism it must be sent noised and
    accounted, or not at all.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus.quality import QualityVote
    >>> rule = QualityVote(scores=np.array([[0.9, 0.2], [0.5, 0.6], [0.5, 0.6]]), power=4.0)
    >>> votes = np.array([[3, 3], [5, 5], [5, 5]])
    >>> w = rule.weights_for([0, 1, 2], n_public=2, quality=np.array([np.nan] * 3))
    >>> rule(votes, n_classes=10, weights=w)
    array([3, 5])
    >>> QualityVote(power=8.0, top_k=2).get_params()["top_k"]
    2
    """

    output: ClassVar[Literal["hard", "soft"]] = "hard"
    uses_quality: ClassVar[bool] = True

    def __init__(
        self,
        scores: ArrayLike | None = None,
        *,
        power: float = 16.0,
        quality_power: float = 1.0,
        top_k: int | None = None,
        scorer_epsilon: float | None = None,
        scorer_delta: float | None = None,
    ) -> None:
        super().__init__(scores, scorer_epsilon=scorer_epsilon, scorer_delta=scorer_delta)
        self.power = power
        self.quality_power = quality_power
        self.top_k = top_k

    def weights_for(
        self, client_ids: ArrayLike, n_public: int, quality: ArrayLike | None = None
    ) -> NDArray[np.float64] | None:
        """Certainty of the given clients times ``quality^(quality_power / power)``.

        Parameters
        ----------
        client_ids : array-like of int, shape (m,)
        n_public : int
        quality : array-like of shape (m,), optional
            The clients' own quality in [0, 1], NaN where not sent.

        Returns
        -------
        ndarray of shape (m,) or (m, n_public), or None
            None when there are neither scores nor quality.

        Examples
        --------
        >>> import numpy as np
        >>> from consensus.quality import QualityVote
        >>> rule = QualityVote(scores=[0.5, 1.0], power=2.0, quality_power=2.0)
        >>> rule.weights_for([1, 0], n_public=3, quality=[0.25, np.nan])
        array([0.25 , 0.125])
        """
        base = super().weights_for(client_ids, n_public)
        m = len(np.atleast_1d(np.asarray(client_ids)))
        q = check_client_accuracy(quality, m, "quality")
        quality_power = _check_power(self.quality_power, "quality_power", positive=False)
        power = _check_power(self.power, "power", positive=True)
        if q is None or quality_power == 0:
            return base
        factor = q ** (quality_power / power)
        if base is None:
            return factor
        return base * (factor if base.ndim == 1 else factor[:, None])

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[np.int64]:
        if weights is not None:  # the caller's weights: refused as every rule refuses them
            check_inputs(labels, n_classes, weights)
        elif self.scores is not None:
            weights = self._scores_for_rows(labels)
        return quality_vote(
            labels,
            n_classes,
            certainty=weights,
            power=self.power,
            quality_power=self.quality_power,
            top_k=self.top_k,
        )
