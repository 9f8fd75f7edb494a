"""Robust hard-label consensus against hostile clients: trimmed vote and reputation vote.

Both rules work on hard votes (probabilities are reduced to each client's argmax first) and
return hard pseudo-labels ``(n,)`` with -1 where nobody (with positive weight) voted.

- `TrimmedVote` forgets nothing between rounds: in every round it drops the clients that
  agree least with a preliminary majority, then votes again without them.
- `ReputationVote` remembers: after each round the server tells it how well every client
  agreed with the consensus (:meth:`ReputationVote.observe`), and a client's vote weight is
  an exponential moving average of that agreement.
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Self, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._base import Consensus
from ._validation import check_client_ids, check_inputs
from .hard import plurality_winners
from .registry import get_consensus

__all__ = ["ReputationVote", "TrimmedVote", "client_agreement", "trimmed_vote"]


def _check_fraction(value: Any, name: str, *, upper_open: bool = True) -> float:
    """Return ``value`` as a float in [0, 1) (or [0, 1] if not ``upper_open``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in [0, 1], got {type(value).__name__}")
    number = float(value)
    ok = 0.0 <= number < 1.0 if upper_open else 0.0 <= number <= 1.0
    if not ok:  # also rejects NaN
        interval = "[0, 1)" if upper_open else "[0, 1]"
        raise ValueError(f"{name} must be in {interval}, got {number!r}")
    return number


def _hard(labels: ArrayLike) -> NDArray[np.int64]:
    """Hard codes of votes ``(m, n)`` / pseudo-labels ``(n,)``, or argmax of probabilities
    (``(m, n, C)`` / ``(n, C)``) with -1 for all-NaN rows."""
    arr = np.asarray(labels)
    if np.issubdtype(arr.dtype, np.integer):
        return arr.astype(np.int64, copy=False)
    absent = np.isnan(arr).any(axis=-1)
    codes: NDArray[np.int64] = np.where(
        absent, -1, np.argmax(np.nan_to_num(arr, nan=-1.0), axis=-1)
    ).astype(np.int64, copy=False)
    return codes


def _row_keys(votes: np.ndarray, weights: np.ndarray | None) -> list[bytes]:
    """One digest per client of its votes and its weights relative to the largest weight:
    a tie-break that does not depend on the order of the clients (or on the scale of the
    weights). Clients with equal digests vote identically, so either may be dropped."""
    if weights is None:
        rel = None
    else:
        top = weights.max() if weights.size else 0.0
        rel = weights / top if top > 0 else np.zeros_like(weights)
    keys = []
    for i in range(votes.shape[0]):  # one pass per client, vectorised over examples
        digest = hashlib.blake2b(np.ascontiguousarray(votes[i]).data, digest_size=16)
        if rel is not None:
            digest.update(np.ascontiguousarray(rel[i]).data)
        keys.append(digest.digest())
    return keys


def client_agreement(votes: ArrayLike, reference: ArrayLike) -> NDArray[np.float64]:
    """Share of each client's votes that equal a reference labelling.

    Parameters
    ----------
    votes : array-like of int, shape (m, n)
        Hard votes, -1 for "did not vote".
    reference : array-like of int, shape (n,)
        Reference labels (e.g. a consensus), -1 for "no label".

    Returns
    -------
    ndarray of float64, shape (m,)
        For client ``i``: among the examples where both client ``i`` voted and the reference
        has a label, the fraction where they are equal. NaN for a client with no such example.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import client_agreement
    >>> votes = np.array([[0, 1, 1, 0],
    ...                   [0, 1, 0, -1],
    ...                   [-1, -1, -1, -1]])
    >>> client_agreement(votes, np.array([0, 1, 1, -1])).tolist()
    [1.0, 0.6666666666666666, nan]
    """
    votes = np.asarray(votes)
    reference = np.asarray(reference)
    compared = (votes >= 0) & (reference >= 0)[None, :]
    agree = (votes == reference[None, :]) & compared
    n_compared = compared.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = agree.sum(axis=1) / n_compared
    return np.where(n_compared > 0, out, np.nan)


@overload
def trimmed_vote(
    labels: ArrayLike,
    n_classes: int,
    trim: float = ...,
    weights: ArrayLike | None = ...,
    *,
    return_kept: Literal[False] = ...,
) -> NDArray[np.int64]: ...


@overload
def trimmed_vote(
    labels: ArrayLike,
    n_classes: int,
    trim: float = ...,
    weights: ArrayLike | None = ...,
    *,
    return_kept: Literal[True],
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]: ...


def trimmed_vote(
    labels: ArrayLike,
    n_classes: int,
    trim: float = 0.2,
    weights: ArrayLike | None = None,
    *,
    return_kept: bool = False,
) -> NDArray[np.int64] | tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Majority vote after dropping the clients that agree least with a first majority.

    1. A preliminary (weighted) majority vote over all clients.
    2. Each client's agreement with it: the share of its votes equal to the preliminary
       label, over the examples where it voted and the preliminary vote has a label
       (`client_agreement`; a client with no such example counts as agreement 1).
    3. The ``floor(trim * m)`` clients with the lowest agreement get weight 0, except that
       a client whose agreement equals the round's highest is never dropped (so a vote on
       which all voters agree is never trimmed, and at least one client is kept). Ties in
       agreement are broken by a digest of each client's votes and relative weights, so the
       result does not depend on the order of the clients (clients with identical votes
       and weights are interchangeable).
    4. The (weighted) majority vote of the clients that are kept.

    Parameters
    ----------
    labels : array-like
        Hard votes ``(m, n)`` (-1 = did not vote) or probabilities ``(m, n, n_classes)``
        (reduced to each client's argmax; all-NaN row = absent).
    n_classes : int
        Number of classes C.
    trim : float, default=0.2
        Fraction of the clients to drop at most, in [0, 1). 0 is the plain majority vote.
    weights : array-like of shape (m,) or (m, n), optional
        Non-negative vote weights, used in both votes (agreement itself is unweighted).
    return_kept : bool, default=False
        Also return the boolean mask ``(m,)`` of the clients that were kept.

    Returns
    -------
    labels : ndarray of int64, shape (n,)
        Ties go to the smallest class code; -1 where no kept client (with positive weight)
        voted.
    kept : ndarray of bool, shape (m,)
        Only with ``return_kept=True``.

    Examples
    --------
    Four honest clients and one that always says class 2:

    >>> import numpy as np
    >>> from consensus import trimmed_vote
    >>> votes = np.array([[0, 1, 1, 0],
    ...                   [0, 1, 1, 1],
    ...                   [0, 0, 1, 0],
    ...                   [1, 1, 0, 0],
    ...                   [2, 2, 2, 2]])
    >>> labels, kept = trimmed_vote(votes, n_classes=3, trim=0.2, return_kept=True)
    >>> labels.tolist(), kept.tolist()
    ([0, 1, 1, 0], [True, True, True, True, False])
    """
    trim = _check_fraction(trim, "trim")
    checked = check_inputs(labels, n_classes, weights)
    votes, w = checked.votes, checked.weights
    m = votes.shape[0]
    preliminary = plurality_winners(votes, checked.n_classes, w, None)
    agreement = np.nan_to_num(client_agreement(votes, preliminary), nan=1.0)
    n_drop = min(int(np.floor(trim * m + 1e-9)), max(m - 1, 0))
    kept = np.ones(m, dtype=bool)
    candidates = np.flatnonzero(agreement < agreement.max()) if m else np.empty(0, int)
    n_drop = min(n_drop, candidates.size)
    if n_drop:
        keys = _row_keys(votes, w)
        order = sorted(candidates.tolist(), key=lambda i: (agreement[i], keys[i]))
        kept[order[:n_drop]] = False
    if n_drop == 0:
        out = preliminary
    else:
        base = np.ones(m) if w is None else w
        mask = kept if base.ndim == 1 else kept[:, None]
        out = plurality_winners(votes, checked.n_classes, base * mask, None)
    return (out, kept) if return_kept else out


class TrimmedVote(Consensus):
    """Trimmed majority vote: drop the least-agreeing clients each round; see `trimmed_vote`.

    Parameters
    ----------
    trim : float, default=0.2
        Fraction of the clients (of those that answered this round) dropped each round,
        in [0, 1); validated when called.

    Attributes
    ----------
    kept_ : ndarray of bool, shape (m,)
        After a call: which rows of the last ``labels`` were kept (a diagnostic; the rule
        itself keeps no state between rounds).

    Notes
    -----
    Helps against a minority of clients whose labels disagree with the majority on many
    examples: random, constant, permuted or noisy labels are all trimmed once the honest
    clients agree with each other more than the hostile ones agree with them. It trims
    ``floor(trim * m)`` clients every round even when everyone is honest (unless they all
    agree perfectly), costing a little accuracy when honest clients are weak, and cannot
    help once hostile clients form the preliminary majority.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import TrimmedVote
    >>> votes = np.array([[0, 1, 1], [0, 1, 0], [1, 1, 1], [0, 0, 1], [1, 0, 0]])
    >>> rule = TrimmedVote(trim=0.2)
    >>> rule(votes, n_classes=2)
    array([0, 1, 1])
    >>> rule.kept_.tolist()
    [True, True, True, True, False]
    """

    output: ClassVar[Literal["hard", "soft"]] = "hard"

    def __init__(self, *, trim: float = 0.2) -> None:
        self.trim = trim

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[np.int64]:
        out, self.kept_ = trimmed_vote(
            labels, n_classes, trim=self.trim, weights=weights, return_kept=True
        )
        return out


class ReputationVote(Consensus):
    """Reputation-weighted vote: clients that keep disagreeing with the consensus lose weight.

    Every client starts with reputation 1. After each round the server calls
    ``observe(client_ids, labels, pseudo)`` and every client ``i`` that answered gets

        r_i ← decay · r_i + (1 − decay) · a_i,

    where ``a_i`` is the share of client ``i``'s hard labels that equal the consensus, over
    the public examples where the consensus has a label and the client voted
    (`client_agreement`). A client with no such example keeps its reputation; clients that
    did not answer keep theirs too. Its vote weight in the next round is

        w_i = clip((r_i − floor) / (1 − floor), 0, 1),

    so with ``floor=0`` the weight is the reputation itself, and ``floor`` is the reputation
    worth nothing (e.g. ``1 / n_classes``, the agreement of a client answering at random).
    If every answering client has weight 0, all get weight 1 (the consensus never goes empty).

    Parameters
    ----------
    decay : float, default=0.5
        Memory of the moving average, in [0, 1]: 0 uses only the last round's agreement,
        1 never changes the reputation.
    floor : float, default=0.0
        Reputation mapped to weight 0, in [0, 1).
    base : str or Consensus, default="majority"
        The hard vote that receives the weights: a registered name (e.g. "majority",
        "qualified", "trimmed") or a `Consensus` instance with hard output.

    Attributes
    ----------
    reputation_ : ndarray of float64, shape (max client id + 1,)
        Current reputations by client id (1 for clients never observed); created by the
        first `observe` and cleared by `reset`.
    rounds_ : int
        Rounds observed.

    Notes
    -----
    The state lives in the object: ``sklearn.base.clone(rule, safe=False)`` (what the
    trainer does at the start of every ``fit``) gives a fresh rule, `reset` clears it, and
    `state_dict` / `load_state_dict` save and restore it (numbers and numpy arrays only).

    Helps against clients that *persistently* disagree — random, constant or permuted
    labels, heavy label noise — and, unlike `TrimmedVote`, drops nobody who is honest. In
    round 1 everyone has weight 1, so the first consensus is a plain vote, and because
    agreement is measured against a consensus that hostile clients took part in, a hostile
    majority (or a colluding bloc that wins round 1) earns the good reputation instead.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import ReputationVote
    >>> rule = ReputationVote(decay=0.5)
    >>> votes = np.array([[0, 1, 1, 0], [0, 1, 1, 0], [1, 0, 1, 1]])
    >>> ids = np.array([0, 1, 2])
    >>> pseudo = rule(votes, n_classes=2, weights=rule.weights_for(ids, 4))
    >>> pseudo
    array([0, 1, 1, 0])
    >>> rule.observe(ids, votes, pseudo)
    >>> rule.weights_for(ids, 4)  # client 2 agreed on 1 of 4: 0.5 + 0.5 * 0.25
    array([1.   , 1.   , 0.625])
    >>> rule.state_dict()["reputation"]
    array([1.   , 1.   , 0.625])
    """

    output: ClassVar[Literal["hard", "soft"]] = "hard"

    def __init__(
        self, *, decay: float = 0.5, floor: float = 0.0, base: str | Consensus = "majority"
    ) -> None:
        self.decay = decay
        self.floor = floor
        self.base = base

    # ---------------------------------------------------------------- parameters and state

    def _base_rule(self) -> Consensus:
        rule = get_consensus(self.base)
        if rule.output != "hard":
            raise ValueError(
                f"ReputationVote base must be a hard-label consensus, got {rule!r} "
                f"(output={rule.output!r})"
            )
        return rule

    def _reputations(self, ids: np.ndarray) -> NDArray[np.float64]:
        rep = getattr(self, "reputation_", None)
        out = np.ones(ids.size)
        if rep is not None:
            known = ids < rep.size
            out[known] = rep[ids[known]]
        return out

    def reset(self) -> ReputationVote:
        """Forget every reputation (as if no round had been observed) and return ``self``.

        Examples
        --------
        >>> import numpy as np
        >>> rule = ReputationVote(decay=0.0)
        >>> rule.observe([0, 1], np.array([[0, 0], [1, 1]]), np.array([0, 0]))
        >>> rule.reset().weights_for([0, 1], 2)
        array([1., 1.])
        """
        for name in ("reputation_", "rounds_"):
            self.__dict__.pop(name, None)
        return self

    def state_dict(self) -> dict[str, Any]:
        """The learned state: ``{"reputation": float64 array, "rounds": int}`` (a copy).

        Examples
        --------
        >>> ReputationVote().state_dict()
        {'reputation': array([], dtype=float64), 'rounds': 0}
        """
        rep = getattr(self, "reputation_", None)
        return {
            "reputation": np.empty(0) if rep is None else rep.copy(),
            "rounds": int(getattr(self, "rounds_", 0)),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> Self:
        """Restore a state written by `state_dict` (lists are accepted) and return ``self``.

        Examples
        --------
        >>> rule = ReputationVote().load_state_dict({"reputation": [1.0, 0.25], "rounds": 3})
        >>> rule.weights_for([1, 0, 5], n_public=10)
        array([0.25, 1.  , 1.  ])
        """
        if not isinstance(state, Mapping) or not {"reputation", "rounds"} <= set(state):
            raise ValueError(
                "state must be a dict with keys 'reputation' and 'rounds' (from state_dict())"
            )
        rep = np.asarray(state["reputation"], dtype=np.float64).reshape(-1).copy()
        if rep.size and (not np.all(np.isfinite(rep)) or rep.min() < 0 or rep.max() > 1):
            raise ValueError("state['reputation'] must hold finite values in [0, 1]")
        rounds = int(np.asarray(state["rounds"]))
        if rounds < 0:
            raise ValueError(f"state['rounds'] must be >= 0, got {rounds}")
        self.reset()
        if rep.size:
            self.reputation_ = rep
        if rounds:
            self.rounds_ = rounds
        return self

    # ------------------------------------------------------------------------ the rule

    def weights_for(self, client_ids: ArrayLike, n_public: int) -> NDArray[np.float64]:
        """Vote weights of the given clients from their reputations (see the class notes).

        Parameters
        ----------
        client_ids : array-like of int, shape (m,)
            Ids of the clients whose labels are in the rows of ``labels``, in row order.
        n_public : int
            Size of the public pool (unused: the weights are per client).

        Returns
        -------
        ndarray of float64, shape (m,)

        Examples
        --------
        >>> rule = ReputationVote(floor=0.5).load_state_dict(
        ...     {"reputation": [1.0, 0.75, 0.5], "rounds": 2})
        >>> rule.weights_for([0, 1, 2, 3], n_public=100)
        array([1. , 0.5, 0. , 1. ])
        """
        _check_fraction(self.decay, "decay", upper_open=False)
        floor = _check_fraction(self.floor, "floor")
        ids = check_client_ids(client_ids)
        w = np.clip((self._reputations(ids) - floor) / (1.0 - floor), 0.0, 1.0)
        if w.size and not w.any():
            w[:] = 1.0
        return w

    def observe(self, client_ids: ArrayLike, labels: ArrayLike, pseudo: ArrayLike) -> None:
        """Update the reputations from one round: the clients' labels and the consensus.

        Parameters
        ----------
        client_ids : array-like of int, shape (m,)
            The clients whose labels are the rows of ``labels``.
        labels : array-like
            Their hard votes ``(m, n)`` (-1 = did not vote) or probabilities ``(m, n, C)``
            (argmax; all-NaN row = did not vote).
        pseudo : array-like
            The consensus of the round: hard ``(n,)`` (-1 = abstained) or soft ``(n, C)``.

        Examples
        --------
        >>> import numpy as np
        >>> rule = ReputationVote(decay=0.5)
        >>> rule.observe([2, 0], np.array([[1, 1], [0, 1]]), np.array([0, 1]))
        >>> rule.reputation_.tolist(), rule.rounds_
        ([1.0, 1.0, 0.75], 1)
        """
        decay = _check_fraction(self.decay, "decay", upper_open=False)
        ids = check_client_ids(client_ids)
        votes, reference = _hard(labels), _hard(pseudo)
        if votes.ndim != 2 or votes.shape[0] != ids.size or reference.shape != votes.shape[1:]:
            raise ValueError(
                f"observe needs labels of shape (len(client_ids)={ids.size}, n) and a consensus "
                f"of shape (n,); got labels {np.shape(labels)} and consensus {np.shape(pseudo)}"
            )
        agreement = client_agreement(votes, reference)
        rep = getattr(self, "reputation_", np.empty(0))
        if ids.size and ids.max() >= rep.size:
            rep = np.concatenate([rep, np.ones(int(ids.max()) + 1 - rep.size)])
        seen = ~np.isnan(agreement)
        rep[ids[seen]] = decay * rep[ids[seen]] + (1.0 - decay) * agreement[seen]
        self.reputation_ = rep
        self.rounds_ = int(getattr(self, "rounds_", 0)) + 1

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[np.int64]:
        """Weighted vote of the ``base`` rule. Without ``weights`` the rows of ``labels``
        are taken to be clients ``0 .. m-1`` and weighted by their reputations."""
        if weights is None:
            m = int(np.shape(labels)[0]) if np.ndim(labels) else 0
            n = int(np.shape(labels)[1]) if np.ndim(labels) > 1 else 0
            weights = self.weights_for(np.arange(m), n)
        return self._base_rule()(labels, n_classes=n_classes, weights=weights)
