"""How much a client trusts the pseudo-labelled pool, chosen from its own data.

A consensus of weak clients can be worse than a strong client's own labels: trained on
``D_i ∪ P`` with every pseudo-label at full weight, a strong client can end up worse than
it would be alone. :class:`PseudoLabelTrust` lets each client choose, every round, the
sample weight ``w`` of the pool rows in its next fit by K-fold cross-validation on its
private rows only — the one thing it knows to be true. Candidates ``w`` are compared on
the same rows (paired); the client keeps the largest weight (trusts the federation)
unless a smaller one wins by more than ``z`` standard errors (:func:`pick_weight`): it
drops the pool only when its own rows show, beyond noise, that the pool makes it worse.

Pool rows whose pseudo-label is a class the client holds no private row of always keep
weight 1: the client's validation folds cannot tell whether they help (they hold no such
class), and without them the client could never learn that class — under label skew the
federation is its only source for it.

What a client *sends* is unchanged: its honest prediction on the pool, so the federation
still benefits from strong clients.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.utils.validation import has_fit_parameter

from learners import ClassAlignedClassifier
from learners.checks import check_int

__all__ = [
    "FixedTrust",
    "PseudoLabelTrust",
    "TrustChoice",
    "check_weight",
    "pick_weight",
    "weighted_training_set",
]


@dataclass(frozen=True)
class TrustChoice:
    """A client's trust in the pseudo-labelled pool for one fit.

    Attributes
    ----------
    weight : float
        Sample weight of the pool rows of classes the client holds (0: its own data only,
        1: plain FedCT).
    scores : dict of float to float
        Mean out-of-fold accuracy on the private rows of every candidate weight (empty
        when the weight was not chosen by cross-validation).
    quality : float or None
        Out-of-fold accuracy of the chosen weight: the client's estimate of its own
        accuracy on data like its own (None when not measured).
    """

    weight: float
    scores: dict[float, float]
    quality: float | None = None


class FixedTrust:
    """The same pool weight in every round (``trust=None`` is ``FixedTrust(1.0)``: FedCT).

    Parameters
    ----------
    weight : float
        Sample weight of the pool rows, in ``[0, 1]``.

    Examples
    --------
    >>> FixedTrust(0.5).choose(None, None, None, None, None, None).weight
    0.5
    """

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = check_weight(weight, "trust")

    def choose(self, *args: Any, **kwargs: Any) -> TrustChoice:
        """The fixed weight (no fit is made)."""
        return TrustChoice(self.weight, {})

    @property
    def fits_per_round(self) -> int:
        """Extra fits this trust costs per round on top of the client's own fit."""
        return 0

    def __repr__(self) -> str:
        return f"FixedTrust({self.weight!r})"


class PseudoLabelTrust:
    """Choose the pool's sample weight by K-fold cross-validation on the private rows.

    Every round, for each candidate weight ``w``, the client fits a fresh copy of its
    learner on each training fold of its private rows plus the pseudo-labelled pool at
    weight ``w`` and scores it on the held-out private fold; the weight with the best mean
    out-of-fold accuracy is used for the real fit (on all private rows) — but a weight
    below the largest is chosen only if it beats the largest by more than ``z`` standard
    errors of the paired per-row difference: the client keeps trusting the federation
    unless its own rows show, beyond noise, that the pool hurts. Learners whose
    ``fit`` takes no ``sample_weight`` get row selection instead: a fraction ``w`` of the
    pool rows (a seeded, nested subset).

    Cost: ``cv × len(weights)`` extra fits per round on fold-sized private data plus the
    pool (default 3 × 2 = 6). Given a ``cache`` (the client keeps one), the fold fits on
    private rows alone (weight 0, when the client holds every pseudo-labelled class) are
    made once and reused, so from the third round on a default client makes 3 extra fits
    (the weight-1 ones) per round. A learner that continues training (``warm_start``)
    pays its first-fit cost for each. A client with fewer than ``2 × cv`` private rows,
    or before the first consensus, makes no extra fit.

    Parameters
    ----------
    weights : sequence of float, default=(0.0, 1.0)
        Candidate pool weights, each in ``[0, 1]``.
    cv : int, default=3
        Folds (stratified when every class held has at least ``cv`` rows).
    z : float, default=2.0
        How many standard errors (of the mean per-row difference in out-of-fold
        correctness, paired over the same rows) a smaller weight must win by to replace
        the largest; 0: the best mean wins (ties to the larger weight).
    random_state : int, optional
        Seeds the folds and row selection; the trainer derives it from its
        ``random_state`` and the client.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int)
    >>> U = rng.normal(size=(100, 2))
    >>> wrong = (U[:, 0] < 0).astype(int)  # a consensus that is always wrong
    >>> trust = PseudoLabelTrust(random_state=0)
    >>> choice = trust.choose(DecisionTreeClassifier(random_state=0), X, y, U, wrong,
    ...                       classes=np.array([0, 1]))
    >>> choice.weight, choice.scores[1.0] < choice.scores[0.0]
    (0.0, True)
    """

    def __init__(
        self,
        *,
        weights: tuple[float, ...] = (0.0, 1.0),
        cv: int = 3,
        z: float = 2.0,
        random_state: int | None = None,
    ) -> None:
        self.weights = weights
        self.cv = cv
        self.z = z
        self.random_state = random_state

    @property
    def fits_per_round(self) -> int:
        """Extra fits this trust costs per round on top of the client's own fit."""
        return self.cv * len(self.weights)

    def __repr__(self) -> str:
        return (
            f"PseudoLabelTrust(weights={tuple(self.weights)!r}, cv={self.cv!r}, "
            f"z={self.z!r}, random_state={self.random_state!r})"
        )

    def check(self) -> PseudoLabelTrust:
        """Validate the parameters; returns self."""
        weights = self.weights
        if isinstance(weights, str | bytes) or not hasattr(weights, "__len__") or not weights:
            raise ValueError(f"trust weights must be a non-empty sequence, got {weights!r}")
        for w in weights:
            check_weight(w, "trust weights")
        check_int(self.cv, "trust cv", 2)
        if isinstance(self.z, bool) or not isinstance(self.z, numbers.Real) or self.z < 0:
            raise ValueError(f"trust z must be a number >= 0, got {self.z!r}")
        return self

    def choose(
        self,
        estimator: Any,
        X: np.ndarray,
        y: np.ndarray,
        X_pool: np.ndarray,
        y_pool: np.ndarray,
        classes: np.ndarray,
        cache: dict[Any, np.ndarray] | None = None,
    ) -> TrustChoice:
        """The pool weight for the next fit, by cross-validation on ``X``, ``y``.

        Parameters
        ----------
        estimator : classifier
            The client's learner (unfitted prototype; cloned for every fit).
        X, y : ndarray
            The private rows and their labels (values from ``classes``).
        X_pool, y_pool : ndarray
            The pseudo-labelled pool rows (abstentions removed): labels, or soft targets
            ``(n_pool, n_classes)``.
        classes : ndarray
            The global classes.
        cache : dict, optional
            Keeps the out-of-fold correctness of the private-rows-only fits between calls
            for the same client (same rows, learner and folds), which do not depend on
            the pool.

        Returns
        -------
        TrustChoice
        """
        weights = sorted({float(w) for w in self.weights})
        if len(weights) == 1 or len(X_pool) == 0 or len(y) < 2 * self.cv:
            return TrustChoice(max(weights), {})
        folds = list(self._folds(y))
        correct: dict[float, np.ndarray] = {}  # out-of-fold correctness of every row
        y_pool_codes = y_pool.argmax(axis=1) if y_pool.ndim == 2 else None
        for w in weights:
            # with no pool row left (weight 0, every pool class held) the fits see only
            # private rows: the same every round
            private_only = w == 0.0 and _holds_every_class(y, y_pool, y_pool_codes, classes)
            if private_only and cache is not None and "private-only" in cache:
                correct[w] = cache["private-only"]
                continue
            correct[w] = np.zeros(len(y))
            for train, test in folds:
                Xt, yt, wt = weighted_training_set(
                    estimator, X[train], y[train], X_pool, y_pool, classes, w, self.random_state
                )
                model = ClassAlignedClassifier(clone(estimator), classes=classes)
                model.fit(Xt, yt, sample_weight=wt)
                correct[w][test] = model.predict(X[test]) == y[test]
            if private_only and cache is not None:
                cache["private-only"] = correct[w]
        scores = {w: float(c.mean()) for w, c in correct.items()}
        weight = pick_weight(correct, self.z)
        return TrustChoice(weight, scores, scores[weight])

    def _folds(self, y: np.ndarray):
        _, counts = np.unique(y, return_counts=True)
        stratified = counts.min() >= self.cv
        splitter = (StratifiedKFold if stratified else KFold)(
            self.cv, shuffle=True, random_state=self.random_state
        )
        return splitter.split(np.zeros(len(y)), y)


def pick_weight(correct: dict[float, np.ndarray], z: float) -> float:
    """The pool weight to use, from each candidate's out-of-fold correctness per row.

    The largest weight (most trust in the federation) stays unless a smaller one has a
    higher mean correctness by more than ``z`` standard errors of the paired per-row
    difference; among those that do, the best mean wins (ties to the larger weight).

    Parameters
    ----------
    correct : dict of float to ndarray of shape (n,)
        Candidate weight -> 1/0 per private row: its held-out prediction was right.
    z : float
        Standard errors a smaller weight must win by.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> pool = np.array([1, 1, 1, 1, 0, 0, 1, 1])
    >>> own = np.array([1, 1, 1, 1, 1, 1, 1, 0])  # +2 -1 over 8 rows: mean 0.125, se 0.227
    >>> pick_weight({0.0: own, 1.0: pool}, z=0.5), pick_weight({0.0: own, 1.0: pool}, z=1.0)
    (0.0, 1.0)
    """
    weights = sorted(correct)
    top = weights[-1]
    winners = {top: float(np.mean(correct[top]))}
    for w in weights[:-1]:
        diff = np.asarray(correct[w], dtype=np.float64) - correct[top]
        mean = diff.mean()
        se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else 0.0
        if mean > 0 and mean > z * se:
            winners[w] = float(np.mean(correct[w]))
    best = max(winners.values())
    return max(w for w, s in winners.items() if s >= best - 1e-12)


def weighted_training_set(
    estimator: Any,
    X: np.ndarray,
    y: np.ndarray,
    X_pool: np.ndarray,
    y_pool: np.ndarray,
    classes: np.ndarray,
    weight: float,
    random_state: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``D ∪ P`` with the pool rows at ``weight`` — except those of classes ``y`` lacks,
    which keep weight 1.

    A learner whose ``fit`` takes ``sample_weight`` gets all rows and a weight vector
    (None when every weight is 1); any other learner gets the private rows and a seeded
    subset of ``weight`` of the pool rows (nested: a larger weight keeps a superset).

    Parameters
    ----------
    estimator : classifier
        Decides between sample weights and row selection.
    X, y : ndarray
        Private rows; ``y`` labels, or one-hot soft targets when ``y_pool`` is soft.
    X_pool, y_pool : ndarray
        Pseudo-labelled pool rows: labels, or soft targets ``(n_pool, n_classes)``.
    classes : ndarray
        The global classes.
    weight : float
        In ``[0, 1]``.
    random_state : int, optional
        Seeds the row selection.

    Returns
    -------
    X, y : ndarray
        The training set.
    sample_weight : ndarray or None

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X, y = np.zeros((2, 1)), np.array(["a", "a"])
    >>> U, pseudo = np.ones((2, 1)), np.array(["a", "b"])
    >>> _, yt, w = weighted_training_set(DecisionTreeClassifier(), X, y, U, pseudo,
    ...                                   np.array(["a", "b"]), 0.25)
    >>> yt.tolist(), w.tolist()  # "b" is a class the client holds no row of: weight 1
    (['a', 'a', 'a', 'b'], [1.0, 1.0, 0.25, 1.0])
    """
    soft = y_pool.ndim == 2
    held = np.isin(classes, _label_values(y, classes))
    pool_codes = y_pool.argmax(axis=1) if soft else np.searchsorted(classes, y_pool)
    pool_w = np.where(held[pool_codes], weight, 1.0)
    if soft and y.ndim == 1:
        y = (y[:, None] == classes[None, :]).astype(np.float64)
    if np.all(pool_w == 1.0):
        return np.concatenate([X, X_pool]), np.concatenate([y, y_pool]), None
    if has_fit_parameter(estimator, "sample_weight"):
        keep = pool_w > 0
        w = np.concatenate([np.ones(len(y)), pool_w[keep]])
        return np.concatenate([X, X_pool[keep]]), np.concatenate([y, y_pool[keep]]), w
    rank = np.random.default_rng(random_state).permutation(len(pool_w)) / max(len(pool_w), 1)
    keep = rank < pool_w  # nested subsets: a row kept at weight w is kept at any w' > w
    return np.concatenate([X, X_pool[keep]]), np.concatenate([y, y_pool[keep]]), None


def _holds_every_class(
    y: np.ndarray, y_pool: np.ndarray, pool_codes: np.ndarray | None, classes: np.ndarray
) -> bool:
    """Whether every pseudo-labelled class is among the private labels ``y``."""
    pool_values = classes[pool_codes] if pool_codes is not None else y_pool
    return bool(np.isin(np.unique(pool_values), np.unique(y)).all())


def _label_values(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """The classes present in ``y`` (labels or soft targets)."""
    if y.ndim == 2:
        return classes[y.sum(axis=0) > 0]
    return np.unique(y)


def check_weight(weight: Any, name: str) -> float:
    """``weight`` as a float in ``[0, 1]``, or a ValueError naming ``name``."""
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
        raise TypeError(f"{name} must be a number in [0, 1], got {weight!r}")
    if not 0.0 <= float(weight) <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {weight!r}")
    return float(weight)
