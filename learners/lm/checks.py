"""Checks of an :class:`learners.LMClassifier`'s parameters and training targets.

Both run before anything is loaded or trained: a bad parameter or label raises a
``ValueError`` (or ``TypeError``) that names it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import check_classification_targets

from .._alignment import label_indices
from .._soft_targets import check_soft_targets
from ..checks import check_int
from .loading import DTYPES, is_config

__all__ = ["check_model_location", "check_params", "training_targets"]


def check_params(clf: Any) -> None:
    """Refuse an LMClassifier parameter of the wrong type or out of range.

    Parameters
    ----------
    clf : LMClassifier
        The classifier (nothing is loaded).

    Raises
    ------
    TypeError, ValueError
        Naming the parameter and what was expected.

    Examples
    --------
    >>> from learners import LMClassifier
    >>> check_params(LMClassifier("folder", long_texts="whole"))
    Traceback (most recent call last):
    ...
    ValueError: long_texts must be 'truncate' or 'windows', got 'whole'
    """
    # before anything is loaded: another value would reach from_pretrained as a hub name
    if not (isinstance(clf.model, str | os.PathLike) or is_config(clf.model)):
        raise TypeError(
            "model must be a hub name, a local directory or a transformers configuration, "
            f"got {type(clf.model).__name__}"
        )
    if isinstance(clf.model, str | os.PathLike):
        check_model_location(clf.model)
    for name in ("max_epochs", "epochs_per_fit", "batch_size", "max_length", "max_windows"):
        check_int(getattr(clf, name), name, 0 if name == "epochs_per_fit" else 1)
    if clf.truncation_side not in ("left", "right"):
        raise ValueError(f"truncation_side must be 'left' or 'right', got {clf.truncation_side!r}")
    if clf.long_texts not in ("truncate", "windows"):
        raise ValueError(f"long_texts must be 'truncate' or 'windows', got {clf.long_texts!r}")
    for name in ("n_threads", "window_stride"):
        v = getattr(clf, name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1):
            raise ValueError(f"{name} must be None or an integer >= 1, got {v!r}")
    if clf.dtype is not None and clf.dtype not in DTYPES:
        raise ValueError(f"dtype must be None or one of {DTYPES}, got {clf.dtype!r}")
    if clf.gguf_file is not None and not isinstance(clf.gguf_file, str | os.PathLike):
        raise TypeError(f"gguf_file must be a file name or None, got {clf.gguf_file!r}")
    if clf.lora not in (True, False, None) and not isinstance(clf.lora, dict):
        raise TypeError(f"lora must be False, True or a dict, got {type(clf.lora).__name__}")


def check_model_location(model: str | os.PathLike[str]) -> None:
    """Refuse a ``model`` that names a local folder which does not exist, before
    transformers reads it as a hub name ("Repo id must be in the form ...").

    A path is taken as local when it exists, is absolute, starts with ``.``/``~`` or holds
    more than one ``/`` (a hub name is ``name`` or ``org/name``); a hub name is left to
    transformers.

    Examples
    --------
    >>> check_model_location("sentence-transformers/all-MiniLM-L6-v2")  # a hub name
    >>> try:
    ...     check_model_location("./models/no-such-model")
    ... except ValueError as err:
    ...     print(str(err)[:44])
    model: no folder './models/no-such-model' (a
    """
    text = os.fspath(model)
    if os.path.exists(os.path.expanduser(text)):
        return
    local = (
        os.path.isabs(text)
        or text.startswith((".", "~"))
        or text.count("/") > 1
        or (os.sep != "/" and os.sep in text)
    )
    if local:
        raise ValueError(
            f"model: no folder {text!r} (a local model is a directory written by "
            "save_pretrained; a hub name is 'name' or 'org/name')"
        )


def training_targets(
    y: ArrayLike,
    n_samples: int,
    resolve_classes: Callable[[NDArray[Any]], NDArray[Any]],
    sample_weight: ArrayLike | None = None,
) -> tuple[NDArray[Any], NDArray[np.float32], NDArray[np.float32]]:
    """The classes, one-hot or row-normalised soft targets, and weights of a fit.

    Parameters
    ----------
    y : array-like of shape (n_samples,) or (n_samples, n_classes)
        Labels, or soft targets with one column per class; a column vector
        ``(n_samples, 1)`` is read as labels, with a ``DataConversionWarning``.
    n_samples : int
        Rows of ``X``.
    resolve_classes : callable
        The classes for `y` (the classifier's ``classes`` or the labels of `y`).
    sample_weight : array-like of shape (n_samples,), optional
        Weights (ones when absent).

    Returns
    -------
    classes : ndarray of shape (n_classes,)
    targets : ndarray of shape (n_samples, n_classes), float32
        Rows sum to 1 (an all-zero soft row stays zero).
    weights : ndarray of shape (n_samples,), float32

    Examples
    --------
    >>> import numpy as np
    >>> classes, targets, weights = training_targets(["b", "a"], 2, np.unique)
    >>> classes.tolist(), targets.tolist(), weights.tolist()
    (['a', 'b'], [[0.0, 1.0], [1.0, 0.0]], [1.0, 1.0])
    """
    n = n_samples
    if y is None:
        raise ValueError("the classifier requires y to be passed, but the target y is None")
    y_arr = np.asarray(y)
    if y_arr.ndim == 2 and y_arr.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected; it is read as "
            "labels. Please change the shape of y to (n_samples,).",
            DataConversionWarning,
            stacklevel=3,
        )
        y_arr = y_arr.ravel()
    if y_arr.shape[:1] != (n,):
        raise ValueError(f"y has {y_arr.shape[:1]} rows but X has {n}")
    if y_arr.ndim == 1:
        check_classification_targets(y_arr)  # no continuous values, NaN or infinity
        classes = resolve_classes(y_arr)
        targets: NDArray[Any] = np.zeros((n, classes.size), dtype=np.float32)
        targets[np.arange(n), label_indices(y_arr, classes, name="y")] = 1.0
    elif y_arr.ndim == 2:
        classes = resolve_classes(y_arr)
        targets = check_soft_targets(y_arr, classes.size)
        sums = targets.sum(axis=1, keepdims=True)
        targets = np.divide(targets, sums, out=np.zeros_like(targets), where=sums > 0)
    else:
        raise ValueError(f"y must be 1-D labels or 2-D soft targets, got shape {y_arr.shape}")
    weights = np.ones(n, dtype=np.float32)
    if sample_weight is not None:
        weights = np.asarray(sample_weight, dtype=np.float32)
        if weights.shape != (n,):
            raise ValueError(f"sample_weight must have shape ({n},), got {weights.shape}")
    return classes, targets.astype(np.float32), weights
