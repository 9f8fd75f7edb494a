"""Argument checks shared by every package: the one owner of "an integer in a range".

``learners`` is the lowest layer that both ``cotrain`` (its wire format included) and the
learner adapters may import, so the rule lives here once. Pure Python, no third-party import.

Examples
--------
>>> from learners.checks import check_int
>>> check_int(3, "epochs", 1)
3
>>> check_int(0, "epochs", 1)
Traceback (most recent call last):
...
ValueError: epochs must be an integer >= 1, got 0
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

__all__ = ["NotAnIntegerError", "check_int"]


class NotAnIntegerError(TypeError, ValueError):
    """A value that should be an integer is not one (a bool, a float, a string...).

    Both a :class:`TypeError` (what is wrong is the type) and a :class:`ValueError` (what
    callers that validate a whole configuration catch), as scikit-learn's own
    ``InvalidParameterError`` is.

    Examples
    --------
    >>> try:
    ...     check_int(2.5, "batch_size", 1)
    ... except ValueError as err:
    ...     print(type(err).__name__, isinstance(err, TypeError), err)
    NotAnIntegerError True batch_size must be an integer >= 1, got 2.5
    """


def check_int(value: Any, name: str, low: int, high: int | None = None) -> int:
    """``value`` as an ``int`` in ``low..high`` (no upper bound when `high` is None).

    scikit-learn's ``check_scalar`` is not used: it takes a bool for an integer, and its
    messages do not say what was expected in the terms used here.

    Parameters
    ----------
    value : object
        The value given.
    name : str
        The argument's name, for the message.
    low : int
        The smallest allowed value.
    high : int, optional
        The largest allowed value.

    Returns
    -------
    int
        The value, as a Python ``int``.

    Raises
    ------
    NotAnIntegerError
        If `value` is not an integer (bools are refused); a TypeError and a ValueError.
    ValueError
        If it lies outside ``low..high``. Both messages name `name` and the expected range.

    Examples
    --------
    >>> import numpy as np
    >>> check_int(np.int64(3), "bits", 1, 16)
    3
    >>> check_int(True, "rounds", 1)
    Traceback (most recent call last):
    ...
    learners.checks.NotAnIntegerError: rounds must be an integer >= 1, got True
    >>> check_int(17, "bits", 1, 16)
    Traceback (most recent call last):
    ...
    ValueError: bits must be an integer between 1 and 16, got 17
    """
    expected = f">= {low}" if high is None else f"between {low} and {high}"
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise NotAnIntegerError(f"{name} must be an integer {expected}, got {value!r}")
    number = int(value)
    if number < low or (high is not None and number > high):
        raise ValueError(f"{name} must be an integer {expected}, got {number}")
    return number
