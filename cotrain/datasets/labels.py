"""Label arrays as the data tools take them: checked, coded in a label space, seeded.

The client splitters of :mod:`cotrain.partition` and the label corruption of
:mod:`cotrain.robustness.corruption` accept labels of any hashable values (numbers, strings,
mixed objects) and a ``random_state`` of ``None``, an int seed or a
:class:`numpy.random.Generator`. These helpers give them one reading of both: a 1-D label
array, its classes and integer codes (:func:`factorize`, or :func:`encode_labels` in a given
label space), the dtype that holds labels and classes unchanged, and a Generator.

Examples
--------
>>> import numpy as np
>>> from cotrain.datasets.labels import check_label_array, factorize
>>> classes, codes = factorize(check_label_array(np.array([3, 1, 3])))
>>> classes.tolist(), codes.tolist()
([1, 3], [1, 0, 1])
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "RandomState",
    "as_generator",
    "check_label_array",
    "check_label_space",
    "encode_labels",
    "factorize",
    "label_codes",
    "output_dtype",
]

#: What a ``random_state`` argument may be: None, an int seed or a numpy Generator.
RandomState = None | int | np.integer | np.random.Generator


def as_generator(random_state: Any) -> np.random.Generator:
    """A numpy Generator from ``None``, an int seed, a SeedSequence or a Generator.

    Examples
    --------
    >>> from cotrain.datasets.labels import as_generator
    >>> int(as_generator(0).integers(10)) == int(as_generator(0).integers(10))
    True
    """
    if isinstance(random_state, bool):
        raise TypeError(
            f"random_state must be None, an int or a numpy Generator, got {random_state!r}"
        )
    try:
        return np.random.default_rng(random_state)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            "random_state must be None, a non-negative int or a numpy.random.Generator, "
            f"got {random_state!r}"
        ) from exc


def check_label_array(y: Any, name: str = "y") -> np.ndarray:
    """``y`` as a non-empty 1-D array; TypeError or ValueError naming ``name`` otherwise.

    Examples
    --------
    >>> from cotrain.datasets.labels import check_label_array
    >>> check_label_array(["a", "b"]).tolist()
    ['a', 'b']
    """
    if isinstance(y, (str, bytes)):
        raise TypeError(f"{name} must be a 1-D array of labels, got a {type(y).__name__}")
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got an array of shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    return arr


def factorize(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(y, return_inverse=True)``, with a fallback for unorderable object labels.

    Labels that cannot be sorted (e.g. a mix of strings and numbers) keep their first-seen
    order instead.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.datasets.labels import factorize
    >>> classes, codes = factorize(np.array(["b", "a", "b"]))
    >>> classes.tolist(), codes.tolist()
    (['a', 'b'], [1, 0, 1])
    """
    try:
        classes, codes = np.unique(y, return_inverse=True)
    except TypeError:  # e.g. a mix of str and int in an object array: keep first-seen order
        lookup: dict[Any, int] = {}
        codes = np.fromiter(
            (lookup.setdefault(v, len(lookup)) for v in y.tolist()), dtype=np.int64, count=y.size
        )
        classes = np.empty(len(lookup), dtype=object)
        classes[:] = list(lookup)
    return classes, np.asarray(codes, dtype=np.int64).reshape(-1)


def check_label_space(classes: Any) -> np.ndarray:
    """Validate a user-given ``classes`` argument: 1-D, non-empty, no duplicates.

    Examples
    --------
    >>> from cotrain.datasets.labels import check_label_space
    >>> check_label_space([2, 0, 1]).tolist()
    [2, 0, 1]
    """
    if isinstance(classes, (str, bytes)):
        raise TypeError("classes must be a 1-D sequence of labels, got a single string")
    arr = np.asarray(classes)
    if arr.ndim != 1:
        raise ValueError(f"classes must be 1-D, got an array of shape {arr.shape}")
    if arr.size == 0:
        raise ValueError("classes must not be empty")
    uniq, _ = factorize(arr)
    if uniq.size != arr.size:
        raise ValueError("classes must not contain duplicates")
    return arr


def encode_labels(y: np.ndarray, classes: np.ndarray, name: str = "y") -> np.ndarray:
    """Codes of ``y`` in ``classes`` (position in the array); ValueError for unknown labels.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.datasets.labels import encode_labels
    >>> encode_labels(np.array(["c", "a"]), np.array(["c", "b", "a"])).tolist()
    [0, 2]
    """
    codes: np.ndarray | None = None
    try:
        order = np.argsort(classes, kind="stable")
        ordered = classes[order]
        pos = np.clip(np.searchsorted(ordered, y), 0, classes.size - 1)
        found = np.asarray(ordered[pos] == y, dtype=bool)
        if found.shape == y.shape:
            codes = np.where(found, order[pos], -1).astype(np.int64)
    except (TypeError, ValueError, np.exceptions.DTypePromotionError):
        codes = None
    if codes is None:  # unorderable or incomparable labels: a dictionary look-up
        lookup = {c: i for i, c in enumerate(classes.tolist())}
        codes = np.fromiter((lookup.get(v, -1) for v in y.tolist()), dtype=np.int64, count=y.size)
    if np.any(codes < 0):
        missing = y[codes < 0][:5].tolist()
        raise ValueError(f"{name} contains labels that are not in classes, e.g. {missing}")
    return codes


def label_codes(y: np.ndarray, classes: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The label space and ``y``'s codes in it: ``classes`` checked when given, else
    :func:`factorize` of ``y``.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.datasets.labels import label_codes
    >>> [a.tolist() for a in label_codes(np.array(["b", "a"]))]
    [['a', 'b'], [1, 0]]
    >>> label_codes(np.array(["b", "a"]), ["b", "a", "c"])[1].tolist()
    [0, 1]
    """
    if classes is None:
        return factorize(y)
    classes = check_label_space(classes)
    return classes, encode_labels(y, classes)


def output_dtype(y: np.ndarray, classes: np.ndarray) -> np.dtype:
    """``y``'s dtype if it can hold every class unchanged, else the common dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.datasets.labels import output_dtype
    >>> output_dtype(np.array([0, 1], dtype=np.int8), np.array([0, 1, 300]))
    dtype('int64')
    """
    try:
        if np.array_equal(classes.astype(y.dtype), classes):
            return y.dtype
    except (TypeError, ValueError, OverflowError):
        pass
    try:
        return np.result_type(y.dtype, classes.dtype)
    except (TypeError, np.exceptions.DTypePromotionError):
        return np.dtype(object)
