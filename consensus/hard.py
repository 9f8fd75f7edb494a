"""Hard-label consensus: (weighted) majority vote and qualified majority (FedCT)."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._base import Consensus
from ._kernels import count_votes, iter_vote_counts
from ._validation import check_inputs, check_quorum

__all__ = [
    "MajorityVote",
    "QualifiedMajority",
    "majority_vote",
    "plurality_winners",
    "qualified_majority",
    "vote_counts",
]

#: Relative slack when comparing a vote share with the quorum, so that e.g. 3 of 5 votes pass
#: quorum 0.6 although ``0.6 * 5 == 3.0000000000000004`` in floating point.
_QUORUM_RTOL = 1e-10


def plurality_winners(
    votes: np.ndarray,
    n_classes: int,
    weights: NDArray[np.float64] | None = None,
    quorum: float | None = None,
) -> NDArray[np.int64]:
    """The class with the most (weighted) votes on each example: the kernel of the hard rules.

    Unlike `majority_vote` it checks nothing: `votes` must already be validated (integer
    ``(m, n)`` with values in ``[-1, n_classes - 1]``) and `weights` be None, ``(m,)`` or
    ``(m, n)`` float64, as ``consensus._validation.check_inputs`` returns them.

    Parameters
    ----------
    votes : ndarray of int, shape (m, n)
        Hard votes, -1 for "did not vote".
    n_classes : int
        Number of classes.
    weights : ndarray of float64, shape (m,) or (m, n), optional
        Non-negative vote weights; None counts every vote once.
    quorum : float, optional
        If given, an example whose winner holds less than this share of the (weighted)
        votes cast gets -1.

    Returns
    -------
    ndarray of int64, shape (n,)
        The winning class (ties to the smallest), -1 where no vote with positive weight was
        cast or the quorum was not met.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus.hard import plurality_winners
    >>> votes = np.array([[0, 1, -1], [1, 1, -1], [1, 0, -1]])
    >>> plurality_winners(votes, 2)
    array([ 1,  1, -1])
    >>> plurality_winners(votes, 2, quorum=0.9)
    array([-1, -1, -1])
    """
    n = votes.shape[1]
    out = np.empty(n, dtype=np.int64)
    for start, stop, counts in iter_vote_counts(votes, n_classes, weights):
        # column 0 (abstentions) set to 0: argmax picks the first (= smallest) class with the
        # largest positive count, or column 0 when no class got any weight -> -1 after the shift
        counts[:, 0] = 0
        winner = counts.argmax(axis=1)
        if quorum is not None:
            top = counts[np.arange(stop - start), winner]
            # the share itself is compared (not ``top < total * quorum``): with subnormal
            # weights the product would be rounded to the subnormal grid and pass 8 of 9 at 0.9
            with np.errstate(divide="ignore", invalid="ignore"):  # nobody voted: winner is 0
                share = top / counts.sum(axis=1)
            winner[share < quorum - _QUORUM_RTOL] = 0
        out[start:stop] = winner
    out -= 1
    return out


def vote_counts(
    labels: ArrayLike, n_classes: int, weights: ArrayLike | None = None
) -> NDArray[np.float64]:
    """Count the (weighted) votes each class gets on each example.

    Parameters
    ----------
    labels : array-like
        Hard votes, integer ``(m, n)`` with class codes ``0..n_classes-1`` and -1 for "did not
        vote" (ignored); or probabilities ``(m, n, n_classes)``, which are first reduced to each
        client's argmax (an all-NaN row means "did not vote"). Use `soft_mean` to add up
        probability mass instead.
    n_classes : int
        Number of classes C.
    weights : array-like of shape (m,) or (m, n), optional
        Non-negative weight of each client's vote, per client or per client per example.
        None counts every vote as 1.

    Returns
    -------
    counts : ndarray of float64, shape (n, n_classes)
        ``counts[j, c]`` is the summed weight of the clients voting ``c`` on example ``j``.

    Notes
    -----
    One ``np.bincount`` per block of examples over ``example * (C + 1) + vote + 1``; no Python
    loop over examples or clients. Small integer vote dtypes (int8, int16) are read as they are,
    without upcasting the whole matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import vote_counts
    >>> votes = np.array([[0, 1, -1],
    ...                   [0, 2, -1],
    ...                   [1, 2, -1]])
    >>> vote_counts(votes, n_classes=3)
    array([[2., 1., 0.],
           [0., 1., 2.],
           [0., 0., 0.]])
    >>> vote_counts(votes, n_classes=3, weights=[3.0, 1.0, 1.0])
    array([[4., 1., 0.],
           [0., 3., 2.],
           [0., 0., 0.]])
    """
    checked = check_inputs(labels, n_classes, weights)
    return count_votes(checked.votes, checked.n_classes, checked.weights)


def majority_vote(
    labels: ArrayLike, n_classes: int, weights: ArrayLike | None = None
) -> NDArray[np.int64]:
    """Plurality (majority) vote per example, optionally weighted.

    Parameters
    ----------
    labels : array-like
        Hard votes, integer ``(m, n)`` with -1 for "did not vote"; or probabilities
        ``(m, n, n_classes)``, reduced first to each client's argmax (all-NaN row = absent).
        Any integer dtype is accepted as is; int8 (C <= 127) or int16 saves memory and time.
    n_classes : int
        Number of classes C.
    weights : array-like of shape (m,) or (m, n), optional
        Non-negative vote weights, per client or per client per example.

    Returns
    -------
    labels : ndarray of int64, shape (n,)
        The class with the largest (weighted) vote count. **Ties break to the smallest class
        code.** Examples on which nobody voted (or every voter has weight 0) get -1.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import majority_vote
    >>> votes = np.array([[0, 1, 2, -1],
    ...                   [0, 2, 1, -1],
    ...                   [1, 2, -1, -1]])
    >>> majority_vote(votes, n_classes=3)
    array([ 0,  2,  1, -1])

    A heavy client can outvote the others:

    >>> majority_vote(votes, n_classes=3, weights=[1.0, 1.0, 5.0])
    array([ 1,  2,  1, -1])
    """
    checked = check_inputs(labels, n_classes, weights)
    return plurality_winners(checked.votes, checked.n_classes, checked.weights, None)


def qualified_majority(
    labels: ArrayLike,
    n_classes: int,
    quorum: float = 0.9,
    weights: ArrayLike | None = None,
) -> NDArray[np.int64]:
    """Qualified majority (FedCT's QM): the majority label only where it has a quorum.

    Parameters
    ----------
    labels : array-like
        Hard votes ``(m, n)`` (-1 = did not vote) or probabilities ``(m, n, n_classes)``
        (reduced to each client's argmax; all-NaN row = absent).
    n_classes : int
        Number of classes C.
    quorum : float, default=0.9
        Share of the votes, in (0, 1], that the winning class needs. The share is taken among
        the clients that voted on that example (weighted if ``weights``), and ``share >=
        quorum`` passes (with a 1e-10 relative slack for floating-point error, so 9 of 10
        votes pass 0.9). ``quorum=1.0`` asks for unanimity.
    weights : array-like of shape (m,) or (m, n), optional
        Non-negative vote weights, per client or per client per example.

    Returns
    -------
    labels : ndarray of int64, shape (n,)
        The majority label (ties to the smallest code), or -1 where the quorum is not met or
        nobody voted; such examples are left out of the pseudo-labelled set that round.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import qualified_majority
    >>> votes = np.array([[0, 1, 2],
    ...                   [0, 1, 1],
    ...                   [0, 1, 1],
    ...                   [0, 2, 1],
    ...                   [0, 1, 1]])
    >>> qualified_majority(votes, n_classes=3, quorum=0.8)
    array([0, 1, 1])
    >>> qualified_majority(votes, n_classes=3, quorum=1.0)
    array([ 0, -1, -1])
    """
    quorum = check_quorum(quorum)
    checked = check_inputs(labels, n_classes, weights)
    return plurality_winners(checked.votes, checked.n_classes, checked.weights, quorum)


class MajorityVote(Consensus):
    """Majority vote consensus (FedCT's default); see `majority_vote`.

    Hard output: ``(n,)`` int64 labels, ties to the smallest class code, -1 where nobody
    voted.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import MajorityVote
    >>> rule = MajorityVote()
    >>> rule(np.array([[0, 1], [1, 1], [0, -1]]), n_classes=2)
    array([0, 1])
    >>> rule.output
    'hard'
    """

    output: ClassVar[Literal["hard", "soft"]] = "hard"

    def __init__(self) -> None:
        pass

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[np.int64]:
        return majority_vote(labels, n_classes, weights)


class QualifiedMajority(Consensus):
    """Qualified majority consensus (FedCT's QM); see `qualified_majority`.

    Parameters
    ----------
    quorum : float, default=0.9
        Share of the votes in (0, 1] the winner needs; validated when called.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import QualifiedMajority
    >>> rule = QualifiedMajority(quorum=0.75)
    >>> rule
    QualifiedMajority(quorum=0.75)
    >>> rule(np.array([[0, 1], [0, 1], [0, 0], [0, 1]]), n_classes=2)
    array([0, 1])
    >>> QualifiedMajority(quorum=1.0)(np.array([[0, 1], [0, 1], [0, 0], [0, 1]]), n_classes=2)
    array([ 0, -1])
    """

    output: ClassVar[Literal["hard", "soft"]] = "hard"

    def __init__(self, *, quorum: float = 0.9) -> None:
        self.quorum = quorum

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[np.int64]:
        return qualified_majority(labels, n_classes, quorum=self.quorum, weights=weights)
