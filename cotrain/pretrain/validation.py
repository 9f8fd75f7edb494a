"""Argument checks shared by the pretraining entry points (no torch)."""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np

__all__ = ["check_float", "check_public_array", "check_seed"]


def check_float(name: str, value: Any, low: float, high: float | None = None) -> float:
    """`value` as a float in ``(low, high]`` (``(low, inf)`` without `high`).

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : object
        The value given.
    low : float
        Exclusive lower bound.
    high : float, optional
        Inclusive upper bound.

    Returns
    -------
    float
        The value.

    Examples
    --------
    >>> check_float("lr", 1e-3, 0.0)
    0.001
    >>> check_float("corruption", 1.5, 0.0, 1.0)
    Traceback (most recent call last):
    ...
    ValueError: corruption must be a number in (0.0, 1.0], got 1.5
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    bounds = f"({low}, {'inf)' if high is None else f'{high}]'}"
    if not (value > low and (high is None or value <= high)) or not np.isfinite(value):
        raise ValueError(f"{name} must be a number in {bounds}, got {value!r}")
    return float(value)


def check_seed(random_state: Any) -> int:
    """A torch seed drawn from `random_state` (None, an int or a RandomState).

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState
        As in scikit-learn.

    Returns
    -------
    int
        A seed in ``[0, 2**31 - 1)``.

    Examples
    --------
    >>> check_seed(0) == check_seed(0)
    True
    """
    from sklearn.utils import check_random_state

    try:
        rng = check_random_state(random_state)
    except ValueError:
        raise TypeError(
            f"random_state must be None, an int or a numpy RandomState, got {random_state!r}"
        ) from None
    return int(rng.randint(np.iinfo(np.int32).max))


def check_public_array(X: Any, name: str = "X_public", min_rows: int = 4) -> np.ndarray:
    """The public pool as a finite float32 array of at least `min_rows` rows.

    Parameters
    ----------
    X : array-like of shape (n_samples, ...)
        Numeric rows or images (pandas frames are taken).
    name : str, default="X_public"
        The argument's name, for messages.
    min_rows : int, default=4
        Fewest rows that make a contrastive batch worth training on.

    Returns
    -------
    ndarray of float32
        A copy of the data.

    Examples
    --------
    >>> check_public_array([[0, 1]] * 4).shape
    (4, 2)
    >>> check_public_array([["a", "b"]] * 4)
    Traceback (most recent call last):
    ...
    TypeError: X_public must be numeric, got values of dtype <U1
    """
    if isinstance(X, str | bytes) or X is None:
        raise TypeError(f"{name} must be a numeric array-like, got {type(X).__name__}")
    arr = np.asarray(X)
    if arr.dtype == object:
        try:
            arr = arr.astype(np.float32)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be numeric, got non-numeric values") from None
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric, got values of dtype {arr.dtype}")
    arr = arr.astype(np.float32)
    if arr.ndim < 2:
        raise ValueError(
            f"{name} must have one row per sample (2-D or more), got shape {arr.shape}"
        )
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows, got {arr.shape[0]}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr
