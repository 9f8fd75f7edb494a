"""Global class order: checking it, indexing labels in it, aligning probability columns to it."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["align_proba"]


def check_classes(classes: ArrayLike, name: str = "classes") -> NDArray[Any]:
    """Return `classes` as a 1-D array after checking it is non-empty, sorted and unique.

    Sorted order is what lets labels be encoded with :func:`numpy.searchsorted`.
    """
    arr = np.asarray(classes)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of labels, got shape {arr.shape}")
    try:
        ordered = np.unique(arr)
    except TypeError as exc:
        raise ValueError(f"{name} must hold mutually comparable labels: {exc}") from None
    if ordered.shape != arr.shape or np.any(ordered != arr):
        raise ValueError(
            f"{name} must be sorted and unique (as np.unique returns them), got {arr!r}"
        )
    return arr


def label_indices(labels: ArrayLike, classes: NDArray[Any], name: str = "y") -> NDArray[np.intp]:
    """Return the index of every label in the sorted array `classes`.

    Raises ``ValueError`` naming `name` if a label is not one of `classes`.
    """
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    try:
        idx = np.searchsorted(classes, arr)
        idx = np.minimum(idx, classes.size - 1)
        bad = np.asarray(classes[idx] != arr, dtype=bool)
    except TypeError:  # labels not comparable with the classes at all
        bad = np.ones(arr.shape, dtype=bool)
        idx = np.zeros(arr.shape, dtype=np.intp)
    if bad.any():
        unknown = list(dict.fromkeys(arr[bad].tolist()))[:5]
        raise ValueError(
            f"{name} contains labels that are not in classes {classes.tolist()!r}: {unknown!r}"
        )
    return idx.astype(np.intp, copy=False)


def align_proba(
    proba: ArrayLike, estimator_classes: ArrayLike, classes: ArrayLike
) -> NDArray[np.float64]:
    """Put a learner's probability columns into the global class order.

    A learner orders the columns of ``predict_proba`` by its own ``classes_``, which holds
    only the classes it saw in training. Co-training needs every client to answer in the
    same, global, label space: this places each column under its class and fills the
    classes the learner never saw with zeros.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_estimator_classes)
        The learner's probabilities, columns ordered as `estimator_classes`.
    estimator_classes : array-like of shape (n_estimator_classes,)
        The learner's ``classes_``; each must be one of `classes` (any order).
    classes : array-like of shape (n_classes,)
        The global classes, sorted and unique (as :func:`numpy.unique` returns them).

    Returns
    -------
    ndarray of shape (n_samples, n_classes)
        Float probabilities with one column per global class; zeros for missing classes.

    Raises
    ------
    ValueError
        If `estimator_classes` holds a label that is not in `classes`, or the shapes disagree.

    Examples
    --------
    >>> import numpy as np
    >>> from learners import align_proba
    >>> align_proba([[0.3, 0.7]], estimator_classes=["dog", "ant"], classes=["ant", "cat", "dog"])
    array([[0.7, 0. , 0.3]])
    """
    classes_arr = check_classes(classes)
    est_classes = np.asarray(estimator_classes)
    proba_arr = np.asarray(proba, dtype=np.float64)
    if proba_arr.ndim != 2 or proba_arr.shape[1] != est_classes.size:
        raise ValueError(
            f"proba must have shape (n_samples, {est_classes.size}) to match estimator_classes, "
            f"got {proba_arr.shape}"
        )
    cols = label_indices(est_classes, classes_arr, name="estimator_classes")
    out = np.zeros((proba_arr.shape[0], classes_arr.size), dtype=np.float64)
    out[:, cols] = proba_arr
    return out
