"""Input checks shared by the consensus functions.

Every check is vectorised and costs at most a few passes over the inputs (O(m·n) for votes and
weights, O(m·n·C) for probabilities). Errors name the argument and say what was expected.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "Checked",
    "check_client_accuracy",
    "check_inputs",
    "check_k",
    "check_n_classes",
    "check_nonnegative_finite",
    "check_quorum",
]


def _is_real_dtype(dtype: np.dtype[Any]) -> bool:
    """True for bool, integer and floating dtypes (no complex, object, strings)."""
    return (
        dtype == np.bool_ or np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)
    )


def check_n_classes(n_classes: Any) -> int:
    """Return ``n_classes`` as an ``int`` after checking it is an integer >= 1."""
    if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral):
        raise TypeError(
            f"n_classes must be an integer >= 1, got {type(n_classes).__name__} {n_classes!r}"
        )
    if n_classes < 1:
        raise ValueError(f"n_classes must be >= 1, got {n_classes}")
    return int(n_classes)


def check_quorum(quorum: Any) -> float:
    """Return ``quorum`` as a ``float`` after checking it lies in (0, 1]."""
    if isinstance(quorum, bool) or not isinstance(quorum, numbers.Real):
        raise TypeError(
            f"quorum must be a real number in (0, 1], got {type(quorum).__name__} {quorum!r}"
        )
    value = float(quorum)
    if not 0.0 < value <= 1.0:  # also rejects NaN
        raise ValueError(f"quorum must be in (0, 1] (a share of the votes), got {value!r}")
    return value


def check_k(k: Any) -> float:
    """Return the entropy temperature ``k`` as a ``float`` after checking it is finite and >= 0."""
    if isinstance(k, bool) or not isinstance(k, numbers.Real):
        raise TypeError(f"k must be a finite real number >= 0, got {type(k).__name__} {k!r}")
    value = float(k)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"k must be a finite real number >= 0, got {value!r}")
    return value


def check_nonnegative_finite(values: ArrayLike, name: str) -> NDArray[np.float64]:
    """Return ``values`` as float64 after checking every entry is finite and >= 0.

    Uses two reductions (``min``/``max`` propagate NaN) and no temporaries.
    """
    arr = np.asarray(values)
    if not _is_real_dtype(arr.dtype):
        raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if arr.size:
        lo, hi = arr.min(), arr.max()
        if np.isnan(lo) or np.isnan(hi) or np.isinf(hi) or np.isinf(lo):
            raise ValueError(f"{name} must be finite; found NaN or infinite values")
        if lo < 0:
            raise ValueError(f"{name} must be non-negative; found a minimum of {lo!r}")
    return arr


def _as_array(values: ArrayLike, name: str) -> np.ndarray:
    """``np.asarray(values)``, with a ragged nested sequence reported under ``name``."""
    try:
        return np.asarray(values)
    except ValueError as err:  # numpy: "setting an array element with a sequence ..."
        raise ValueError(
            f"{name} must be a rectangular array (equal-length rows); could not convert it: {err}"
        ) from None


def _check_weights(weights: ArrayLike | None, m: int, n: int) -> NDArray[np.float64] | None:
    if weights is None:
        return None
    w = check_nonnegative_finite(_as_array(weights, "weights"), "weights")
    if w.shape not in ((m,), (m, n)):
        raise ValueError(
            f"weights must have shape ({m},) (one per client) or ({m}, {n}) (one per client "
            f"per example) to match labels; got shape {w.shape}"
        )
    with np.errstate(over="ignore"):  # the overflow is the error reported here
        overflows = w.size and np.isinf(w.sum(axis=0)).any()
    if overflows:
        raise ValueError(
            "weights are too large: their sum over the clients overflows float64 "
            "(rescale them; only their ratios matter to the weighted rules)"
        )
    return w


def _check_votes(arr: np.ndarray, n_classes: int) -> np.ndarray:
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(
            "hard votes (2-D labels) must have an integer dtype, class codes 0..n_classes-1 and "
            f"-1 for 'did not vote'; got dtype {arr.dtype}"
        )
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -1 or hi > n_classes - 1:
            raise ValueError(
                f"hard votes must lie in [-1, {n_classes - 1}] (class codes for n_classes="
                f"{n_classes}, -1 = did not vote); found values in [{lo}, {hi}]"
            )
    return arr


def _check_probs(
    arr: np.ndarray, n_classes: int
) -> tuple[NDArray[np.float64], NDArray[np.bool_] | None]:
    if not _is_real_dtype(arr.dtype):
        raise TypeError(
            f"probabilities (3-D labels) must be an array of real numbers, got dtype {arr.dtype}"
        )
    if arr.shape[2] != n_classes:
        raise ValueError(
            f"probabilities (3-D labels) must have last dimension n_classes={n_classes}; "
            f"got shape {arr.shape}"
        )
    probs = arr.astype(np.float64, copy=False)
    present: NDArray[np.bool_] | None = None
    nan = np.isnan(probs)
    if nan.any():
        absent: NDArray[np.bool_] = np.all(nan, axis=2, keepdims=False)
        partial = nan.any(axis=2) & ~absent
        if partial.any():
            i, j = (int(x[0]) for x in np.nonzero(partial))
            raise ValueError(
                f"labels[{i}, {j}] mixes NaN with numbers; a client that did not vote on an "
                "example must have an all-NaN probability row"
            )
        present = ~absent
        probs = np.where(nan, 0.0, probs)
    if probs.size:
        lo, hi = probs.min(), probs.max()
        if np.isinf(hi) or np.isinf(lo):
            raise ValueError("probabilities (3-D labels) must be finite; found infinite values")
        if lo < 0:
            raise ValueError(
                f"probabilities (3-D labels) must be non-negative; found a minimum of {lo!r}"
            )
    return probs, present


@dataclass(frozen=True)
class Checked:
    """Validated consensus inputs.

    Attributes
    ----------
    kind : {"hard", "soft"}
        Whether ``values`` holds hard votes or probabilities.
    values : ndarray
        Hard votes ``(m, n)`` of the caller's integer dtype (not copied), or probabilities
        ``(m, n, C)`` as float64 with the all-NaN "absent" rows replaced by zeros.
    present : ndarray of bool, shape (m, n), or None
        For soft input with absent rows: which client voted on which example. None means every
        client voted on every example (always None for hard input, where -1 marks absence).
    weights : ndarray of float64, shape (m,) or (m, n), or None
    n_classes : int
    """

    kind: Literal["hard", "soft"]
    values: np.ndarray
    present: np.ndarray | None
    weights: NDArray[np.float64] | None
    n_classes: int

    @property
    def votes(self) -> np.ndarray:
        """Hard votes ``(m, n)``: the input itself, or each client's argmax of its probabilities.

        Ties in a probability row go to the smallest class code; absent rows become -1.
        """
        if self.kind == "hard":
            return self.values
        votes: NDArray[np.intp] = self.values.argmax(axis=2)
        if self.present is not None:
            votes[~self.present] = -1
        return votes


def check_inputs(labels: ArrayLike, n_classes: Any, weights: ArrayLike | None) -> Checked:
    """Validate ``labels``, ``n_classes`` and ``weights`` together and return a `Checked`."""
    n_classes = check_n_classes(n_classes)
    arr = _as_array(labels, "labels")
    kind: Literal["hard", "soft"]
    if arr.ndim == 2:
        values, present, kind = _check_votes(arr, n_classes), None, "hard"
    elif arr.ndim == 3:
        values, present = _check_probs(arr, n_classes)
        kind = "soft"
    else:
        raise ValueError(
            "labels must be a 2-D array of hard votes (n_clients, n_examples) or a 3-D array of "
            f"probabilities (n_clients, n_examples, n_classes); got ndim={arr.ndim} with shape "
            f"{arr.shape}"
        )
    m, n = arr.shape[:2]
    w = _check_weights(weights, m, n)
    return Checked(kind, values, present, w, n_classes)


def check_client_ids(client_ids: ArrayLike, n_clients: int | None = None) -> NDArray[np.intp]:
    """``client_ids`` as a 1-D integer array, each in ``[0, n_clients)`` (or ``>= 0``).

    Examples
    --------
    >>> check_client_ids([2, 0]).tolist()
    [2, 0]
    """
    ids = np.asarray(client_ids)
    if ids.size == 0:
        ids = ids.astype(np.intp)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(
            f"client_ids must be a 1-D array of integer client ids; got {ids.dtype} with "
            f"shape {ids.shape}"
        )
    if ids.size and ids.min() < 0:
        raise ValueError(f"client_ids must be >= 0, got a minimum of {ids.min()}")
    if ids.size and n_clients is not None and ids.max() >= n_clients:
        raise ValueError(
            f"client_ids must lie in [0, {n_clients - 1}] (one row of scores per client); "
            f"got values in [{ids.min()}, {ids.max()}]"
        )
    return ids.astype(np.intp, copy=False)


def check_client_accuracy(values: Any, m: int, name: str) -> NDArray[np.float64] | None:
    """Each client's accuracy (``quality``, ``reliability``) as float64 ``(m,)``, NaN (not
    sent) replaced by the mean of the sent values; None when ``values`` is None or nobody
    sent one. Errors name ``name``.

    Examples
    --------
    >>> check_client_accuracy([0.5, np.nan, 1.0], 3, "quality").tolist()
    [0.5, 0.75, 1.0]
    >>> check_client_accuracy([np.nan], 1, "quality") is None
    True
    """
    if values is None:
        return None
    q = np.asarray(values)
    if q.dtype == object or not (
        np.issubdtype(q.dtype, np.floating) or np.issubdtype(q.dtype, np.integer)
    ):
        raise TypeError(f"{name} must be an array of real numbers, got dtype {q.dtype}")
    q = q.astype(np.float64)
    if q.shape != (m,):
        raise ValueError(f"{name} must have shape ({m},) (one value per client), got {q.shape}")
    sent = ~np.isnan(q)
    if np.any((q[sent] < 0) | (q[sent] > 1)):
        raise ValueError(f"{name} must lie in [0, 1] (an accuracy) or be NaN (not sent)")
    if not sent.any():
        return None
    # a client that sent nothing counts as the mean of those that did: neither trusted more
    # nor less than the others
    return np.where(sent, q, q[sent].mean())
