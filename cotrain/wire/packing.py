"""The shared machinery of the label messages: header, bit packing, checks, kind registry.

:mod:`cotrain.wire.messages` (kinds 1 and 2), :mod:`cotrain.wire.compact` (kind 3) and
:mod:`cotrain.wire.delta` (kind 4) build on this module and register their message classes
here, so that messages imports neither of the others and :func:`~cotrain.wire.messages.decode`
dispatches on the kind byte to whichever classes are registered. Importing :mod:`cotrain`
registers all four (it imports :mod:`cotrain.wire`, which imports every kind). The checks are
shared with :mod:`cotrain.wire.format`.

The layouts themselves are documented in :mod:`cotrain.wire.messages`,
:mod:`cotrain.wire.compact` and :mod:`cotrain.wire.delta`; everything here is byte-for-byte
what those formats specify.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from numpy.typing import NDArray

from learners.checks import check_int

__all__ = [
    "CHUNK",
    "HEADER",
    "HEADER_SIZE",
    "MAX_U32",
    "as_buffer",
    "bits_per_label",
    "check_choice",
    "check_probs",
    "message_class",
    "pack",
    "register_kind",
    "registered_kinds",
    "row_sum_problem",
    "unpack",
]

HEADER = struct.Struct("<BBII")
"""The 10-byte header of every message: kind, flags, n, n_classes (little-endian)."""

HEADER_SIZE: int = HEADER.size  # 10 bytes
"""Size in bytes of the fixed header that starts every message."""

MAX_U32: int = 2**32 - 1
"""Largest ``n`` or ``n_classes`` a header can carry."""

CHUNK: int = 1 << 20
"""Labels packed per step (a multiple of 8); bounds temporary memory."""

_KINDS: dict[int, type] = {}


# ------------------------------------------------------------------ kind registry


def register_kind(kind: int, cls: type) -> None:
    """Record ``cls`` as the message class of the kind byte ``kind``.

    Registering the same class again is a no-op (module reloads); a different class for a
    kind already taken is an error, so two formats can never share a kind byte.

    Parameters
    ----------
    kind : int
        The kind byte, 1..255.
    cls : type
        The class whose ``_decode_payload`` decodes messages of that kind.

    Raises
    ------
    ValueError
        If ``kind`` is out of range or already taken by another class.

    Examples
    --------
    >>> from cotrain.wire.packing import message_class, register_kind
    >>> from cotrain.wire.messages import HardLabels
    >>> register_kind(1, HardLabels)  # already registered: nothing changes
    >>> message_class(1).__name__
    'HardLabels'
    """
    kind = check_int(kind, "kind", 1, 255)
    current = _KINDS.get(kind)
    same = current is not None and (current.__module__, current.__qualname__) == (
        cls.__module__,
        cls.__qualname__,
    )
    if current is not None and not same:
        raise ValueError(f"kind {kind} is already registered to {current.__name__}")
    _KINDS[kind] = cls


def message_class(kind: int) -> type | None:
    """The class registered for a kind byte, or None if no class is.

    Examples
    --------
    >>> from cotrain.wire.packing import message_class
    >>> message_class(2).__name__, message_class(200)
    ('SoftLabels', None)
    """
    return _KINDS.get(kind)


def registered_kinds() -> dict[int, str]:
    """``kind byte -> class name`` of every registered message class.

    Examples
    --------
    >>> import cotrain.wire.format  # registers the compact kinds too
    >>> from cotrain.wire.packing import registered_kinds
    >>> registered_kinds()
    {1: 'HardLabels', 2: 'SoftLabels', 3: 'QuantizedSoftLabels', 4: 'DeltaHardLabels'}
    """
    return {kind: _KINDS[kind].__name__ for kind in sorted(_KINDS)}


# ------------------------------------------------------------------ bit packing


def bits_per_label(n_symbols: int) -> int:
    """``max(1, ceil(log2(n_symbols)))`` computed exactly on integers.

    Examples
    --------
    >>> from cotrain.wire.packing import bits_per_label
    >>> [bits_per_label(k) for k in (1, 2, 3, 4, 5, 256, 257)]
    [1, 1, 2, 2, 3, 8, 9]
    """
    return max(1, (n_symbols - 1).bit_length())


def _word(b: int) -> int:
    """Bytes of the smallest unsigned integer (1, 2 or 4) that holds ``b`` bits."""
    return 1 if b <= 8 else 2 if b <= 16 else 4


def pack(symbols: NDArray[np.integer[Any]], b: int) -> bytes:
    """Pack non-negative integers below ``2**b`` into ``ceil(n*b/8)`` bytes.

    Symbol ``k`` occupies bits ``k*b .. k*b + b - 1``, least significant bit first, bytes
    filled from their least significant bit; unused bits of the last byte are zero. For ``b``
    = 8, 16 or 32 this is exactly the little-endian unsigned integer array.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.packing import pack
    >>> pack(np.array([1, 2, 3]), 2).hex()  # 01 | 10 << 2 | 11 << 4
    '39'
    """
    n = symbols.size
    if n == 0:
        return b""
    if b in (8, 16, 32):
        return symbols.astype(f"<u{b // 8}").tobytes()
    word = _word(b)
    out = []
    for start in range(0, n, CHUNK):
        chunk = symbols[start : start + CHUNK].astype(f"<u{word}")
        bits = np.unpackbits(chunk.view(np.uint8).reshape(-1, word), axis=1, bitorder="little")
        out.append(np.packbits(bits[:, :b].reshape(-1), bitorder="little"))
    return np.concatenate(out).tobytes()


def unpack(payload: memoryview, n: int, b: int) -> NDArray[np.int64]:
    """Inverse of :func:`pack`: ``n`` symbols of ``b`` bits as an ``int64`` array.

    Raises
    ------
    ValueError
        If the padding bits of the last byte are not zero.

    Examples
    --------
    >>> from cotrain.wire.packing import unpack
    >>> unpack(memoryview(bytes([0x39])), 3, 2).tolist()
    [1, 2, 3]
    """
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if b in (8, 16, 32):
        return np.frombuffer(payload, dtype=f"<u{b // 8}", count=n).astype(np.int64)
    word = _word(b)
    buf = np.frombuffer(payload, dtype=np.uint8)
    tail = (n * b) % 8
    if tail and buf[-1] >> tail:
        raise ValueError("corrupt message: non-zero padding bits")
    out = np.empty(n, dtype=np.int64)
    step_bytes = CHUNK * b // 8
    for k, start in enumerate(range(0, n, CHUNK)):
        count = min(CHUNK, n - start)
        raw = buf[k * step_bytes : k * step_bytes + (count * b + 7) // 8]
        bits = np.unpackbits(raw, count=count * b, bitorder="little").reshape(count, b)
        padded = np.zeros((count, 8 * word), dtype=np.uint8)
        padded[:, :b] = bits
        values = np.packbits(padded, axis=1, bitorder="little").view(f"<u{word}")
        out[start : start + count] = values.reshape(-1)
    return out


# ------------------------------------------------------------------ checks


def as_buffer(data: Any) -> memoryview:
    """A contiguous byte view of an encoded message, at least a header long.

    Raises
    ------
    TypeError
        If ``data`` is not bytes, bytearray or memoryview.
    ValueError
        If it is shorter than the 10-byte header.

    Examples
    --------
    >>> from cotrain.wire.packing import as_buffer
    >>> len(as_buffer(bytearray(12)))
    12
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, bytearray or memoryview, got {type(data).__name__}")
    view = memoryview(data)
    if not view.c_contiguous:  # e.g. a strided slice of an array: copy, casting would fail
        view = memoryview(view.tobytes())
    view = view.cast("B")
    if len(view) < HEADER_SIZE:
        raise ValueError(
            f"truncated message: {len(view)} bytes, shorter than the {HEADER_SIZE}-byte header"
        )
    return view


def check_probs(probs: NDArray[Any]) -> str:
    """A description of what is wrong with a probability matrix ('' if nothing).

    NaN is allowed only as whole rows (abstentions); other values must be finite and
    non-negative.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.packing import check_probs
    >>> check_probs(np.array([[0.5, 0.5], [np.nan, np.nan]]))
    ''
    >>> check_probs(np.array([[-1.0, 2.0]]))
    'must be non-negative'
    """
    if probs.size == 0:
        return ""
    nan = np.isnan(probs)
    if nan.any():
        partial = nan.any(axis=1) & ~nan.all(axis=1)
        if partial.any():
            row = int(np.flatnonzero(partial)[0])
            return (
                f"has a row with some but not all values NaN (row {row}); NaN rows must be all-NaN"
            )
        values = probs[~nan]
    else:
        values = probs
    if np.isinf(values).any():
        return "must be finite (got infinite values)"
    if (values < 0).any():
        return "must be non-negative"
    return ""


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of the strings ``choices``.

    Raises
    ------
    TypeError
        If ``value`` is not a str.
    ValueError
        If it is not one of ``choices`` (the message names ``name``).

    Examples
    --------
    >>> from cotrain.wire.packing import check_choice
    >>> check_choice("soft", "share", ("hard", "soft"))
    'soft'
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {choices}, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def row_sum_problem(probs: NDArray[np.floating[Any]], n_classes: int) -> str:
    """What is wrong with the row sums of finite probabilities ('' if nothing).

    A row may miss 1 by the error of a trip through float16: rounding to float16 moves each
    entry by at most ``2**-11`` of its value (normal numbers) or ``2**-25`` (subnormals), so
    a row summing to one moves by less than ``2**-11 + n_classes * 2**-25``; twice that
    leaves room for the sender's own rounding.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.packing import row_sum_problem
    >>> row_sum_problem(np.array([[0.5, 0.5], [0.5, 0.25]]), 2)
    'must have rows summing to 1: row 1 sums to 0.75'
    """
    if probs.size == 0:
        return ""
    tolerance = 2.0**-10 + n_classes * 2.0**-24
    error = np.abs(probs.sum(axis=1, dtype=np.float64) - 1.0)
    bad = error > tolerance
    if not bad.any():
        return ""
    row = int(np.flatnonzero(bad)[0])
    total = float(probs[row].sum(dtype=np.float64))
    return f"must have rows summing to 1: row {row} sums to {total:.6g}"
