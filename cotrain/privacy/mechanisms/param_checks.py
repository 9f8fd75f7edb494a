"""Parameter checks shared by the privacy mechanisms (each names the argument it rejects)."""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from learners.checks import check_int

__all__ = [
    "LOOSE_EPSILON",
    "UNITS",
    "check_delta",
    "check_epsilon",
    "check_hard_codes",
    "check_n_classes",
    "check_n_labels",
    "check_positive",
    "check_sensitivity",
    "check_sensitivity_for_unit",
    "check_unit",
]


def check_positive(value: Any, name: str, *, allow_none: bool = False) -> float | None:
    """``value`` as a float if it is a finite number > 0 (None allowed with ``allow_none``).

    Examples
    --------
    >>> check_positive(2, "epsilon")
    2.0
    """
    if value is None and allow_none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not math.isfinite(float(value))
        or float(value) <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


#: above this ε a guarantee protects nothing in practice: e^20 ≈ 4.9e8, so an adversary's
#: odds on any record (or label) may grow 490-million-fold, and randomized response on two
#: classes keeps a true label with probability 1 − 2e-9 (about one flip in 500 million
#: labels: no noise at the size of any dataset here). The largest ε published for a
#: production release we know of, the US Census 2020's 17.14 in total, stays below it.
LOOSE_EPSILON = 20.0


def check_epsilon(value: Any, name: str = "epsilon", *, allow_none: bool = False) -> float | None:
    """``value`` as a float if it is a finite number > 0 (see :func:`check_positive`),
    with a warning, before anything trains, when it exceeds :data:`LOOSE_EPSILON`.

    Examples
    --------
    >>> check_epsilon(2.0)
    2.0
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = check_epsilon(1e9)
    >>> str(caught[0].message)[:52]
    'epsilon=1e+09 protects nothing in practice: above 20'
    """
    epsilon = check_positive(value, name, allow_none=allow_none)
    if epsilon is not None and epsilon > LOOSE_EPSILON:
        warnings.warn(
            f"{name}={epsilon:g} protects nothing in practice: above {LOOSE_EPSILON:g}, "
            f"e^{name} ({f'{math.exp(epsilon):.1e}' if epsilon < 700 else 'over 1e304'}) "
            "bounds how far an adversary's "
            "odds may move, which rules nothing out, and randomized response keeps nearly "
            "every label; report it as no privacy, or choose a smaller value",
            UserWarning,
            stacklevel=3,
        )
    return epsilon


def check_sensitivity(value: Any, *, allow_none: bool = False) -> int | None:
    """``value`` as an int if it is a whole number >= 1 (None allowed with ``allow_none``)."""
    if value is None and allow_none:
        return None
    ok = not isinstance(value, bool) and (
        isinstance(value, Integral)
        or (isinstance(value, Real) and math.isfinite(float(value)) and float(value).is_integer())
    )
    if not ok or int(value) < 1:
        raise ValueError(
            f"sensitivity must be an integer >= 1 (the number of released values one private "
            f"record can change), got {value!r}"
        )
    return int(value)


UNITS = ("record", "label")


def check_unit(value: Any) -> str:
    """``value`` if it is ``"record"`` or ``"label"``."""
    if value not in UNITS:
        raise ValueError(
            f"unit must be 'record' (one private training record) or 'label' (one released "
            f"public label), got {value!r}"
        )
    return str(value)


def check_delta(value: Any) -> float:
    """``value`` as a float if it lies in (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 < float(value) < 1.0:
        raise ValueError(f"delta must be a number in (0, 1), got {value!r}")
    return float(value)


def check_n_classes(n_classes: Any) -> int:
    """``n_classes`` as an int if it is an integer >= 1."""
    return check_int(n_classes, "n_classes", 1)


def check_n_labels(n_labels: Any) -> int:
    """``n_labels`` as an int if it is an integer >= 0."""
    return check_int(n_labels, "n_labels", 0)


def check_hard_codes(labels: ArrayLike, n_classes: int) -> NDArray[np.int64]:
    """``labels`` as int64 class codes in ``0..n_classes-1``, shape ``(n,)``."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"labels must be a 1-D array of class codes, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"labels must be integer class codes, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= n_classes):
        raise ValueError(
            f"labels must be class codes in 0..{n_classes - 1}; found values in "
            f"[{arr.min()}, {arr.max()}]"
        )
    return arr


def check_sensitivity_for_unit(value: Any, unit: Any, per_label: int, what: str) -> int | None:
    """s* (None allowed), which with ``unit="label"`` may only be one label's own count.

    ``per_label`` is how many of the released values (``what``: "labels", "bits", "rows")
    one label occupies; a larger sensitivity describes one private record, which is
    ``unit="record"``.

    Examples
    --------
    >>> check_sensitivity_for_unit(50, "record", 1, "labels")
    50
    >>> check_sensitivity_for_unit(50, "label", 1, "labels")
    Traceback (most recent call last):
    ...
    ValueError: sensitivity=50 labels is what one private RECORD changes; ...
    """
    s = check_sensitivity(value, allow_none=True)
    if unit == "label" and s not in (None, per_label):
        raise ValueError(
            f"sensitivity={s!r} {what} is what one private RECORD changes; with unit='label' "
            f"one label ({per_label} of the {what}) is protected on its own: leave "
            "sensitivity=None, or use unit='record'"
        )
    return s
