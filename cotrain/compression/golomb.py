"""Golomb coding of the positions of a sparse vector (Sattler's thesis, §3.3, App. A.2).

The non-zero positions of a top-k sparsified update are approximately a Bernoulli
process with success probability ``p`` (the sparsity), so the gaps between them are
geometric and the Golomb code with parameter ``M = 2**b`` is optimal for them. The
thesis's choice (eq. 3.9) is

``b* = 1 + floor(log2(log(φ − 1) / log(1 − p)))``, ``φ = (√5 + 1) / 2``,

and a gap ``d ≥ 1`` (positions are coded as distances from the previous one, the
first from position −1) is written as ``q = (d − 1) div 2**b`` one-bits, a zero-bit,
and the remainder ``(d − 1) mod 2**b`` in ``b`` bits, most significant first
(Algorithms 16 and 17). Optionally one extra bit follows every codeword (the sign of
a ternary value). Bits are numpy ``uint8`` arrays of zeros and ones; :func:`pack_bits`
turns them into bytes (zero-padded to a whole byte).
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np

from learners.checks import check_int

__all__ = [
    "expected_position_bits",
    "golomb_decode",
    "golomb_encode",
    "golomb_parameter",
    "pack_bits",
    "unpack_bits",
]

_GOLDEN = (math.sqrt(5.0) + 1.0) / 2.0


def _check_sparsity(p: Any, name: str = "sparsity") -> float:
    if isinstance(p, bool) or not isinstance(p, Real) or not 0 < float(p) <= 1:
        raise ValueError(f"{name} must be a number in (0, 1], got {p!r}")
    return float(p)


def golomb_parameter(sparsity: float) -> int:
    """The thesis's optimal Golomb bit size ``b*`` for a sparsity rate ``p``.

    Parameters
    ----------
    sparsity : float
        Fraction ``p`` of non-zero elements, in (0, 1].

    Returns
    -------
    int
        ``b* = 1 + floor(log2(log(φ − 1) / log(1 − p)))``, at least 0 (``p ≥ 1/2``, where
        the gaps are short, gives a plain unary code).

    Examples
    --------
    >>> golomb_parameter(0.01), golomb_parameter(1 / 400), golomb_parameter(0.5)
    (6, 8, 0)
    """
    p = _check_sparsity(sparsity)
    if p >= 1.0:
        return 0
    ratio = math.log(_GOLDEN - 1.0) / math.log1p(-p)
    return max(0, 1 + math.floor(math.log2(ratio)))


def expected_position_bits(sparsity: float) -> float:
    """Average bits per position of the Golomb code for geometric gaps (thesis eq. 3.9).

    ``b̄ = b* + 1 / (1 − (1 − p)**(2**b*))``: the ``b*`` remainder bits plus the
    expected unary part and its terminating zero-bit.

    Parameters
    ----------
    sparsity : float
        Fraction ``p`` of non-zero elements, in (0, 1].

    Returns
    -------
    float
        Expected bits per coded position (without sign bits).

    Examples
    --------
    >>> round(expected_position_bits(0.01), 2)
    8.11
    """
    p = _check_sparsity(sparsity)
    b = golomb_parameter(p)
    return b + 1.0 / (1.0 - (1.0 - p) ** (2**b))


def golomb_encode(positions: Any, b: int, signs: Any = None) -> np.ndarray:
    """Golomb-code strictly increasing non-negative positions as gaps (Algorithm 16).

    Parameters
    ----------
    positions : array-like of int
        Strictly increasing positions ``i_1 < i_2 < …`` (0-based).
    b : int
        Remainder bits (``golomb_parameter(p)``), ``M = 2**b``.
    signs : array-like of bool, optional
        One extra bit written after each codeword (1 for True).

    Returns
    -------
    ndarray of uint8
        The bits, one per element.

    Examples
    --------
    >>> golomb_encode([0, 5], b=2).tolist()   # gaps 1, 5: (q=0, r=0), (q=1, r=0)
    [0, 0, 0, 1, 0, 0, 0]
    """
    pos = np.asarray(positions, dtype=np.int64).ravel()
    check_int(b, "b", 0)
    if pos.size and (pos[0] < 0 or np.any(np.diff(pos) <= 0)):
        raise ValueError("positions must be non-negative and strictly increasing")
    extra = 0 if signs is None else 1
    if signs is not None:
        signs = np.asarray(signs, dtype=bool).ravel()
        if signs.shape != pos.shape:
            raise ValueError(f"signs has {signs.size} entries, expected {pos.size}")
    gaps = np.diff(pos, prepend=-1) - 1  # d - 1 >= 0
    q = gaps >> b
    r = gaps & ((1 << b) - 1)
    lengths = q + 1 + b + extra
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    bits = np.zeros(int(lengths.sum()), dtype=np.uint8)
    if q.sum():
        offsets = np.arange(int(q.sum())) - np.repeat(np.cumsum(q) - q, q)
        bits[np.repeat(starts, q) + offsets] = 1
    remainder_at = starts + q + 1
    for t in range(b):
        bits[remainder_at + t] = (r >> (b - 1 - t)) & 1
    if signs is not None:
        bits[remainder_at + b] = signs
    return bits


def golomb_decode(
    bits: Any, b: int, count: int, *, signs: bool = False, offset: int = 0
) -> tuple[np.ndarray, np.ndarray | None, int]:
    """Read ``count`` Golomb-coded positions from ``bits`` (Algorithm 17).

    Parameters
    ----------
    bits : array-like of 0/1
        The bit stream.
    b : int
        Remainder bits used by the encoder.
    count : int
        Number of positions to read.
    signs : bool, default=False
        Whether one extra bit follows every codeword.
    offset : int, default=0
        Where to start reading.

    Returns
    -------
    positions : ndarray of int64
    signs : ndarray of bool, or None
    end : int
        Offset just after the last bit read.

    Raises
    ------
    ValueError
        If the stream ends before ``count`` positions were read.

    Examples
    --------
    >>> golomb_decode([0, 0, 0, 1, 0, 0, 0], b=2, count=2)[0].tolist()
    [0, 5]
    """
    text = (np.asarray(bits, dtype=np.uint8) + 48).tobytes().decode("ascii")
    positions = np.empty(count, dtype=np.int64)
    sign_bits = np.empty(count if signs else 0, dtype=bool)
    extra = 1 if signs else 0
    i, last = offset, -1
    for n in range(count):
        zero = text.find("0", i)
        if zero < 0 or zero + b + extra >= len(text):
            raise ValueError(f"bit stream ends after {n} of {count} positions")
        q = zero - i
        r = int(text[zero + 1 : zero + 1 + b], 2) if b else 0
        last = last + q * (1 << b) + r + 1
        positions[n] = last
        i = zero + 1 + b
        if signs:
            sign_bits[n] = text[i] == "1"
            i += 1
    return positions, (sign_bits if signs else None), i


def pack_bits(bits: np.ndarray) -> bytes:
    """Bits (0/1) to bytes, most significant bit first, zero-padded to a whole byte.

    Examples
    --------
    >>> pack_bits(np.array([1, 0, 1], dtype=np.uint8))
    b'\\xa0'
    """
    return np.packbits(np.asarray(bits, dtype=np.uint8)).tobytes()


def unpack_bits(data: bytes) -> np.ndarray:
    """Bytes to bits (0/1), most significant bit first (the inverse of :func:`pack_bits`).

    Examples
    --------
    >>> unpack_bits(b"\\xa0").tolist()
    [1, 0, 1, 0, 0, 0, 0, 0]
    """
    return np.unpackbits(np.frombuffer(data, dtype=np.uint8))
