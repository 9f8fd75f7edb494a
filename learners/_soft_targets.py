"""Soft targets for learners that only take hard labels: weighted row expansion."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils import _safe_indexing

__all__ = ["check_soft_targets", "expand_soft_targets", "n_rows"]


def n_rows(X: Any) -> int:
    """Number of samples in `X` (arrays, sparse matrices, frames, lists of texts)."""
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None else len(X)


def check_soft_targets(targets: ArrayLike, n_classes: int) -> NDArray[np.float64]:
    """Return `targets` as a float (n, n_classes) array of finite, non-negative weights."""
    arr = np.asarray(targets, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != n_classes:
        raise ValueError(
            f"soft targets must have shape (n_samples, {n_classes}) (one column per class), "
            f"got {arr.shape}"
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError("soft targets must be finite and non-negative")
    return arr


def expand_soft_targets(
    X: Any,
    targets: ArrayLike,
    classes: ArrayLike,
    sample_weight: ArrayLike | None = None,
    min_weight: float = 1e-3,
) -> tuple[Any, NDArray[Any], NDArray[np.float64]]:
    """Turn soft targets into weighted hard-labelled rows.

    A learner that only takes hard labels but accepts ``sample_weight`` can still learn
    from a distribution over classes: every row is repeated once per class it gives
    probability at least `min_weight`, labelled with that class and weighted by that
    probability, renormalised over the classes kept. A row's most probable class is always
    kept, so no row with any probability mass is lost; all-zero rows are dropped.

    Parameters
    ----------
    X : array-like, sparse matrix or DataFrame of shape (n_samples, ...)
        The inputs; rows are taken with :func:`sklearn.utils._safe_indexing`.
    targets : array-like of shape (n_samples, n_classes)
        Non-negative class weights per row (probabilities; rows need not sum to 1).
    classes : array-like of shape (n_classes,)
        The label of each target column, in the caller's own label values.
    sample_weight : array-like of shape (n_samples,), optional
        Per-row weights, multiplied into the weights of that row's copies.
    min_weight : float, default=1e-3
        Classes with a smaller probability are pruned before renormalising; in (0, 1].

    Returns
    -------
    X_rep : same type as `X`, with n_kept rows
        The rows of `X`, row ``i`` repeated once per kept class, in row order.
    y_rep : ndarray of shape (n_kept,)
        The class of each copy, taken from `classes`.
    w_rep : ndarray of shape (n_kept,)
        The weight of each copy; a row's weights sum to its sample weight (1 by default).

    Examples
    --------
    >>> import numpy as np
    >>> from learners import expand_soft_targets
    >>> X = np.array([[0.0], [1.0]])
    >>> X_rep, y_rep, w_rep = expand_soft_targets(X, [[0.75, 0.25], [0.0, 1.0]], ["no", "yes"])
    >>> X_rep.ravel().tolist(), y_rep.tolist(), w_rep.tolist()
    ([0.0, 0.0, 1.0], ['no', 'yes', 'yes'], [0.75, 0.25, 1.0])
    """
    if not 0.0 < min_weight <= 1.0:
        raise ValueError(f"min_weight must be in (0, 1], got {min_weight!r}")
    classes_arr = np.asarray(classes)
    if classes_arr.ndim != 1:
        raise ValueError(f"classes must be 1-D, got shape {classes_arr.shape}")
    probs = check_soft_targets(targets, classes_arr.size)
    n = n_rows(X)
    if probs.shape[0] != n:
        raise ValueError(f"targets has {probs.shape[0]} rows but X has {n}")

    keep = probs >= min_weight
    top = probs.argmax(axis=1)
    has_mass = probs[np.arange(n), top] > 0
    keep[np.flatnonzero(has_mass), top[has_mass]] = True

    rows, cols = np.nonzero(keep)
    kept_total = np.where(keep, probs, 0.0).sum(axis=1)
    weights = probs[rows, cols] / kept_total[rows]
    if sample_weight is not None:
        sw = np.asarray(sample_weight, dtype=np.float64)
        if sw.shape != (n,):
            raise ValueError(f"sample_weight must have shape ({n},), got {sw.shape}")
        weights = weights * sw[rows]
    return _safe_indexing(X, rows), classes_arr[cols], weights
