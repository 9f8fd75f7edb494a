"""Sensitivity s* of a client's label release: empirical estimate and the Prop. 2 bound.

s* is the largest number of released values that replacing one private record can change:
``max over neighbours D, D' of ‖f(D) ⊕ f(D')‖_F²`` for the one-hot bit matrix ``f(D)`` of a
client's labels on the public pool U (DP-FedCT, fedct §4). For one-hot rows each changed label
flips exactly two bits, so s* in bits = 2 × s* in labels. :class:`XORMechanism` takes bits;
:class:`RandomizedResponse` and :class:`GaussianSoftLabels` take labels (passing bits to them is
safe, only twice as noisy). Both functions here default to **bits**.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np
from joblib import Parallel, delayed
from numpy.typing import ArrayLike, NDArray
from scipy import stats
from sklearn.base import clone

__all__ = ["analytic_sensitivity_bound", "estimate_sensitivity"]


def _check_unit(unit: Any) -> int:
    if unit not in ("bits", "labels"):
        raise ValueError(f"unit must be 'bits' or 'labels', got {unit!r}")
    return 2 if unit == "bits" else 1


def _fit_predict(estimator: Any, X: Any, y: Any, X_public: Any) -> np.ndarray:
    return np.asarray(clone(estimator).fit(X, y).predict(X_public))


def _take(X: Any, idx: np.ndarray) -> Any:
    return X.iloc[idx] if hasattr(X, "iloc") else np.asarray(X)[idx]


def estimate_sensitivity(
    estimator: Any,
    X: ArrayLike,
    y: ArrayLike,
    X_public: ArrayLike,
    n_neighbours: int = 100,
    random_state: int | np.random.Generator | None = None,
    n_jobs: int | None = None,
    *,
    unit: Literal["bits", "labels"] = "bits",
    return_all: bool = False,
) -> int | tuple[int, NDArray[np.int64]]:
    """Empirical sensitivity: the paper's retrain-on-neighbours procedure (fedct §5).

    Fit a clone of ``estimator`` on (X, y) and predict U; then for each of ``n_neighbours``
    neighbouring datasets, refit a fresh clone and count how many labels on U change. The
    neighbour replaces record r (drawn uniformly) by a copy of another record j ≠ r of the
    same data (features and label, drawn uniformly) — a replace-one neighbour that stays in the
    data distribution. Returns the maximum over neighbours.

    This is an *estimate* (a sample maximum, so a lower bound of the true s* in general), not
    a guarantee; DP holds only if the true s* is at most the value given to a mechanism.

    Parameters
    ----------
    estimator : scikit-learn classifier
        Cloned for every fit. If it has a ``random_state`` parameter that is None, every
        clone gets the same fixed seed (drawn from ``random_state``), so that the count
        reflects the replaced record and not the learner's own training randomness.
    X, y : array-like
        The client's private training data (at least 2 records).
    X_public : array-like
        The public pool U.
    n_neighbours : int, default=100
        Neighbouring datasets to try (the paper uses 100).
    random_state : int, Generator or None
        Seeds the choice of neighbours (and the learner's seed as above).
    n_jobs : int, optional
        Parallel refits (joblib).
    unit : {"bits", "labels"}, default="bits"
        ``"bits"``: 2 × changed labels (one-hot bit flips, :class:`XORMechanism`'s s*);
        ``"labels"``: changed labels.
    return_all : bool, default=False
        Also return the count of every neighbour.

    Returns
    -------
    s : int
        The largest count, in ``[0, 2|U|]`` bits or ``[0, |U|]`` labels.
    counts : ndarray of int64, shape (n_neighbours,)
        Only with ``return_all=True``.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> s, counts = estimate_sensitivity(DecisionTreeClassifier(), X[::2], y[::2], X[1::2],
    ...                                  n_neighbours=20, random_state=0, return_all=True)
    >>> 0 <= s <= 2 * 75 and s == counts.max() and s % 2 == 0
    True
    """
    factor = _check_unit(unit)
    if isinstance(n_neighbours, bool) or not isinstance(n_neighbours, Integral) or n_neighbours < 1:
        raise ValueError(f"n_neighbours must be an integer >= 1, got {n_neighbours!r}")
    y = np.asarray(y)
    n = y.shape[0]
    if n < 2:
        raise ValueError(f"X, y must hold at least 2 records to form neighbours, got {n}")
    rng = (
        random_state
        if isinstance(random_state, np.random.Generator)
        else np.random.default_rng(random_state)
    )
    estimator = clone(estimator)
    params = estimator.get_params() if hasattr(estimator, "get_params") else {}
    if "random_state" in params and params["random_state"] is None:
        estimator.set_params(random_state=int(rng.integers(2**31 - 1)))

    base = _fit_predict(estimator, X, y, X_public)
    replaced = rng.integers(n, size=n_neighbours)
    donors = (replaced + rng.integers(1, n, size=n_neighbours)) % n  # uniform j != r

    def neighbour(r: int, j: int) -> np.ndarray:
        idx = np.arange(n)
        idx[r] = j
        return _fit_predict(estimator, _take(X, idx), y[idx], X_public)

    preds = Parallel(n_jobs=n_jobs)(
        delayed(neighbour)(int(r), int(j)) for r, j in zip(replaced, donors, strict=True)
    )
    counts = np.array([factor * int(np.sum(p != base)) for p in preds], dtype=np.int64)
    s = int(counts.max())
    return (s, counts) if return_all else s


def analytic_sensitivity_bound(
    n_public: int,
    stability: float,
    rho: float = 0.05,
    *,
    unit: Literal["bits", "labels"] = "bits",
) -> int:
    """Prop. 2 of FedCT: a high-probability bound on s* for a stable learner.

    For a learner that is on-average-replace-one stable with rate ``ε_stab`` (for a loss that
    upper-bounds the 0-1 loss), with probability at least ``1 − rho`` the number of labels on U
    that change when one record is replaced is at most (Short's binomial quantile bound)::

        ceil(n·p + z·sqrt(n·p·(1 − p)) + (z² + 2)/3),   n = |U|, p = ε_stab, z = Φ⁻¹(1 − ρ)

    capped at the trivial bound n. ``unit="bits"`` (default) doubles it (one-hot bit flips,
    the s* of :class:`XORMechanism`); ``unit="labels"`` returns the count of labels.

    Parameters
    ----------
    n_public : int
        |U| (>= 1).
    stability : float
        The stability rate ε_stab(|D ∪ U|) in [0, 1].
    rho : float, default=0.05
        Failure probability in (0, 1).
    unit : {"bits", "labels"}, default="bits"

    Returns
    -------
    int

    Examples
    --------
    n = 10000, p = 0.01, ρ = 0.05: z = 1.6449, 100 + 1.6449·9.9499 + (2.7055 + 2)/3
    = 100 + 16.366 + 1.568 = 117.93 → 118 labels, 236 bits.

    >>> analytic_sensitivity_bound(10_000, 0.01, unit="labels")
    118
    >>> analytic_sensitivity_bound(10_000, 0.01)
    236
    """
    factor = _check_unit(unit)
    if isinstance(n_public, bool) or not isinstance(n_public, Integral) or n_public < 1:
        raise ValueError(f"n_public must be an integer >= 1, got {n_public!r}")
    if (
        isinstance(stability, bool)
        or not isinstance(stability, Real)
        or not (0.0 <= float(stability) <= 1.0)
    ):
        raise ValueError(f"stability must be a number in [0, 1], got {stability!r}")
    if isinstance(rho, bool) or not isinstance(rho, Real) or not 0.0 < float(rho) < 1.0:
        raise ValueError(f"rho must be a number in (0, 1), got {rho!r}")
    n, p = int(n_public), float(stability)
    z = float(stats.norm.ppf(1.0 - float(rho)))
    bound = math.ceil(n * p + z * math.sqrt(n * p * (1.0 - p)) + (z * z + 2.0) / 3.0)
    return factor * min(n, max(bound, 0))
