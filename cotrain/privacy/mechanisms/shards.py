"""Teacher shards chosen by a keyed hash of each record, so that one record moves one teacher.

Subsample-and-aggregate (:mod:`cotrain.privacy.mechanisms.teachers`) trains one teacher per disjoint
shard of a client's private records. Its sensitivity argument needs the shard of every record
to depend on that record alone: then adding or removing one record changes exactly one
teacher's training data, whatever else is in the data set (add/remove neighbours). A split of
row *positions* (a permutation cut into equal parts) does not have that property: removing
one row shifts the positions of the rows after it, and records move between shards.

Here the shard of a record is ``H_key(record) mod n_teachers``, with ``H_key`` the keyed
BLAKE2b of Python's :mod:`hashlib` (``hashlib.blake2b(key=...)``; no cryptography is written
here) applied to a canonical encoding of the record's content — its features and its label,
never its position. The key is drawn by the client from its privacy randomness every round
(``rng.bytes(32)``) and never leaves the client, so the server cannot predict which records
share a teacher. Shards therefore have random sizes and may be empty.

Records of every supported kind are encoded from their content only (so the encoding of a
record does not change when other records are added or removed — not even through the
array's dtype): numeric rows of any shape (tabular, images) as float64 values with their
shape; scipy sparse rows as their sorted non-zero (column, value) pairs and width; pandas
frames row by row, each value by its type; strings as UTF-8. Two records with the same
content share a shard, which is a deterministic function of the record, as the argument needs.

Examples
--------
>>> import numpy as np
>>> X = np.arange(12.0).reshape(6, 2); y = np.array([0, 1, 0, 1, 0, 1])
>>> shards = teacher_shards(X, y, 3, key=b"k" * 32)
>>> sorted(np.concatenate(shards).tolist())             # a partition of the rows
[0, 1, 2, 3, 4, 5]
>>> after = teacher_shards(X[1:], y[1:], 3, key=b"k" * 32)   # remove record 0
>>> [sorted((s + 1).tolist()) for s in after] == [sorted(set(s.tolist()) - {0}) for s in shards]
True
"""

from __future__ import annotations

import hashlib
import struct
import warnings
from collections.abc import Iterator
from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from learners.checks import check_int

__all__ = ["expected_teachers", "record_encodings", "teacher_shards", "warn_few_rows"]

_MAX_KEY = hashlib.blake2b.MAX_KEY_SIZE  # 64 bytes


def _value_bytes(value: Any) -> bytes:
    """A canonical encoding of one scalar value, by kind (not by container dtype)."""
    if isinstance(value, bytes):
        return b"b" + struct.pack("<Q", len(value)) + value
    if isinstance(value, str | np.str_):
        raw = str(value).encode("utf-8")
        return b"s" + struct.pack("<Q", len(raw)) + raw
    if isinstance(value, bool | np.bool_ | Integral | Real | np.number):
        return b"f" + struct.pack("<d", float(value))
    if value is None:
        return b"n"
    raw = repr(value).encode("utf-8")
    return b"r" + struct.pack("<Q", len(raw)) + raw


def _numeric_rows(X: np.ndarray) -> Iterator[bytes]:
    """Rows of a numeric array (any number of axes) as shape + float64 bytes."""
    rows = np.ascontiguousarray(X, dtype="<f8")
    head = b"a" + struct.pack(f"<{rows.ndim - 1}Q", *rows.shape[1:])
    for row in rows:
        yield head + row.tobytes()


def _sparse_rows(X: Any) -> Iterator[bytes]:
    """Rows of a scipy sparse matrix as width + sorted non-zero (column, value) pairs."""
    csr = sparse.csr_matrix(X, copy=True)
    csr.eliminate_zeros()
    csr.sort_indices()
    head = b"c" + struct.pack("<Q", csr.shape[1])
    for i in range(csr.shape[0]):
        lo, hi = csr.indptr[i], csr.indptr[i + 1]
        cols = csr.indices[lo:hi].astype("<i8").tobytes()
        vals = np.asarray(csr.data[lo:hi], dtype="<f8").tobytes()
        yield head + struct.pack("<Q", hi - lo) + cols + vals


def _object_rows(rows: Any) -> Iterator[bytes]:
    """Rows of a frame, a text column or a list: each value encoded by its own kind."""
    for row in rows:
        if isinstance(row, str | bytes | np.str_) or np.ndim(row) == 0:
            yield _value_bytes(row.item() if isinstance(row, np.generic) else row)
        else:
            values = np.asarray(row, dtype=object).ravel()
            yield b"o" + struct.pack("<Q", values.size) + b"".join(map(_value_bytes, values))


def record_encodings(X: Any) -> list[bytes]:
    """Canonical bytes of each record's features, from its content alone.

    Parameters
    ----------
    X : array-like, scipy sparse matrix or pandas DataFrame
        The rows: a numeric array of any number of axes (row = first axis), a sparse
        matrix, a data frame, or a 1-D sequence of strings (text).

    Returns
    -------
    list of bytes
        One encoding per row; equal rows give equal encodings whatever the other rows.

    Examples
    --------
    >>> import numpy as np
    >>> a = record_encodings(np.array([[1, 2], [3, 4]]))
    >>> b = record_encodings(np.array([[1.0, 2.0], [3.0, 4.5]]))   # another dtype
    >>> a[0] == b[0], a[1] == b[1]
    (True, False)
    >>> record_encodings(np.array(["ab", "abcdef"]))[0] == record_encodings(["ab"])[0]
    True
    """
    if sparse.issparse(X):
        return list(_sparse_rows(X))
    if hasattr(X, "iloc") and hasattr(X, "itertuples"):  # pandas DataFrame
        return list(_object_rows(X.itertuples(index=False, name=None)))
    if hasattr(X, "iloc"):  # pandas Series (e.g. a text column)
        return list(_object_rows(X.tolist()))
    arr = np.asarray(X) if not isinstance(X, list) else None
    if arr is not None and arr.dtype.kind in "biuf" and arr.ndim >= 1:
        return list(_numeric_rows(arr))
    return list(_object_rows(X))


def _check_key(key: Any) -> bytes:
    if not isinstance(key, bytes) or not 1 <= len(key) <= _MAX_KEY:
        raise TypeError(f"key must be bytes of length 1 to {_MAX_KEY}, got {type(key).__name__}")
    return key


def teacher_shards(
    X: Any, y: Any, n_teachers: Any, key: bytes | None = None
) -> list[NDArray[np.intp]]:
    """Assign each record (row of ``X`` with its label in ``y``) to a teacher by keyed hash.

    Teacher of record i = ``BLAKE2b_key(encoding(X[i]) ‖ encoding(y[i])) mod n_teachers``
    (:func:`record_encodings`; ``hashlib.blake2b`` keyed with ``key``). It depends on the
    record's content and the key only — not on its position or on the other records — so
    adding or removing one record changes the shard of that record's teacher and of no other.
    Shards have random sizes and may be empty (a teacher with an empty shard trains on the
    pseudo-labelled public rows alone, or abstains without them; see
    :func:`cotrain.privacy.mechanisms.teacher_counts.teacher_votes`).

    Parameters
    ----------
    X : array-like, scipy sparse matrix or pandas DataFrame
        The private rows (see :func:`record_encodings`).
    y : array-like of shape (n_rows,)
        Their labels.
    n_teachers : int
        Number of shards (>= 1; may exceed the number of rows).
    key : bytes
        The hash key (1 to 64 bytes): drawn by the client each round from its privacy
        randomness, never sent.

    Returns
    -------
    list of ndarray
        ``n_teachers`` arrays of row indices (sorted, possibly empty), together a partition
        of ``range(n_rows)``.

    Raises
    ------
    ValueError
        If ``n_teachers`` is not an integer >= 1, or ``y`` is not one label per row of X.
    TypeError
        If ``key`` is not 1 to 64 bytes.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [2.0]]); y = np.array([0, 1, 1])
    >>> [s.tolist() for s in teacher_shards(X, y, 5, key=bytes(32))]   # 5 teachers, 3 rows
    [[0], [], [], [2], [1]]
    """
    check_int(n_teachers, "n_teachers", 1)
    key = _check_key(key)
    features = record_encodings(X)
    labels = list(np.asarray(y, dtype=object).ravel()) if not isinstance(y, list) else y
    if np.ndim(y) != 1 or len(labels) != len(features):
        raise ValueError("y must be 1-D labels with one per row of X")
    k = int(n_teachers)
    teacher = np.empty(len(features), dtype=np.int64)
    for i, (row, label) in enumerate(zip(features, labels, strict=True)):
        label = label.item() if isinstance(label, np.generic) else label
        digest = hashlib.blake2b(row + b"|" + _value_bytes(label), digest_size=8, key=key)
        teacher[i] = int.from_bytes(digest.digest(), "little") % k
    order = np.argsort(teacher, kind="stable")
    bounds = np.searchsorted(teacher[order], np.arange(k + 1))
    return [order[bounds[j] : bounds[j + 1]].astype(np.intp) for j in range(k)]


def expected_teachers(n_rows: int, n_teachers: int) -> float:
    """How many of ``n_teachers`` shards hold at least one of ``n_rows`` records, expected
    under the keyed hash (each record falls in a shard uniformly at random):
    ``n_teachers · (1 − (1 − 1/n_teachers)^n_rows)``.

    Examples
    --------
    >>> round(expected_teachers(20, 50), 1)  # 50 teachers asked of 20 rows
    16.6
    >>> expected_teachers(0, 5)
    0.0
    """
    return n_teachers * (1.0 - (1.0 - 1.0 / n_teachers) ** n_rows)


def warn_few_rows(n_teachers: int, n_rows: list[int]) -> None:
    """Warn, before training, about every client whose private rows are fewer than the
    teachers asked of it: some of its shards are then certainly empty, and an empty
    teacher casts no vote from private data (round 1: no vote at all).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_few_rows(50, [200, 20])
    >>> print(str(caught[0].message)[:76])
    n_teachers=50 cannot be made from the private rows of client 1 (20 rows): ab
    """
    short = [(i, n) for i, n in enumerate(n_rows) if n < n_teachers]
    if not short:
        return
    listed = ", ".join(
        f"client {i} ({n} rows): about {expected_teachers(n, n_teachers):.0f}" for i, n in short
    )
    warnings.warn(
        f"n_teachers={n_teachers} cannot be made from the private rows of {listed} teachers "
        "will hold a record (the keyed hash leaves the other shards empty; an empty teacher "
        "learns nothing private and casts no vote in round 1). Choose n_teachers at most "
        "the smallest client's rows",
        UserWarning,
        stacklevel=3,
    )
