"""Compact label messages: quantised soft labels and delta-coded hard labels.

Two message kinds extend :mod:`cotrain.wire.messages` (same 10-byte header style, same bit packer
from :mod:`cotrain.wire.packing`, where both kinds register, so that
:func:`cotrain.wire.messages.decode`
understands them through the kind byte):

``QuantizedSoftLabels`` (kind 3)
    Soft labels quantised to ``b`` bits per class with the sum-to-one constraint
    (METHODS.md §5). Header, then the payload::

        offset  size  field       struct
        0       1     kind        B    3
        1       1     flags       B    bits b, 1..16 (no other flag bits)
        2       4     n           I    rows
        6       4     n_classes   I    columns C
        10      ...   payload     ceil(n * C * b / 8) bytes

    Each row is ``C`` integers ``q_k`` with ``sum(q) = L = 2**b - 1``, packed row-major at ``b``
    bits each with the packer of :mod:`cotrain.wire.packing`; decoded probabilities are ``q / L``.
    An abstaining (NaN) row is the reserved all-zero row (impossible for a real row since
    ``L >= 1``), so abstentions cost no extra byte.

``DeltaHardLabels`` (kind 4)
    Hard labels sent as the changes since the previous message. A 14-byte header::

        offset  size  field       struct
        0       1     kind        B    4
        1       1     flags       B    bit 0: abstain allowed (-1 -> symbol n_classes)
                                       bits 1-2: body layout 0 = full, 1 = bitmap, 2 = gaps
                                       bits 3-4: compressor 0 = none, 1 = zlib, 2 = lzma
        2       4     n           I    number of labels
        6       4     n_classes   I    number of classes
        10      4     crc         I    CRC-32, see below
        14      ...   payload     the body, compressed with the recorded compressor

    Bodies (``b = max(1, ceil(log2(n_classes + abstain)))`` bits per symbol, every field packed
    with the :mod:`cotrain.wire.packing` bit packer, each field starting on a byte boundary):

    * full: the ``n`` symbols, ``ceil(n*b/8)`` bytes (exactly a ``HardLabels`` payload);
      needs no previous labels.
    * bitmap: ``ceil(n/8)`` bytes, bit ``i`` set where label ``i`` changed (``m`` bits set),
      then the ``m`` new symbols in position order, ``ceil(m*b/8)`` bytes.
    * gaps: ``m`` as ``<I`` (4 bytes), one byte ``g`` (gap width in bits, 0..32), the ``m``
      gaps ``p_0, p_1 - p_0 - 1, ...`` at ``g`` bits each, then the new symbols as above.
    * nothing changed: the bitmap layout with an empty body.

    The encoder builds every applicable body (full always; bitmap and gaps when a previous
    labelling is given), compresses each with the requested compressor, and sends the smallest
    of all (body, compressed-or-not) candidates; ties go to bitmap, then gaps, then full, and to
    the uncompressed version. zlib is raw DEFLATE (``wbits=-15``, no zlib header or Adler-32),
    lzma is raw LZMA2 (``FORMAT_RAW``, 1 MiB dictionary), the CRC below protecting the data.

    ``crc = crc32(codes_le_int64, crc32(header_with_crc_zeroed + payload))``: it covers the
    message bytes and the reconstructed labels, so a corrupted message, or a receiver whose
    previous labels differ from the sender's, is detected (``ValueError``) instead of decoding
    to wrong labels. Nothing changed costs exactly the 14-byte header.

Delta state
-----------
:class:`DeltaEncoder` (sender) and :class:`DeltaDecoder` (receiver, one per sender) keep the
previous labelling. The encoder updates its state only when it produces a message and the
decoder only when a message decodes successfully; a round in which the sender sends nothing
changes neither side, so both always hold the same previous labels. A failed decode leaves the
decoder unchanged; call ``reset()`` on both sides to resynchronise (the next message is full).

In a federation, :class:`cotrain.wire.UploadSender` and :class:`cotrain.wire.UploadReceiver`
hold this state instead: the server tells each client which of its uploads it decoded last, so
an upload that never arrived is never used as the reference.
"""

from __future__ import annotations

import lzma
import struct
import zlib
from typing import Any, ClassVar

import numpy as np

from cotrain.wire.messages import Message
from cotrain.wire.packing import (
    HEADER,
    HEADER_SIZE,
    MAX_U32,
    as_buffer,
    bits_per_label,
    check_int,
    check_probs,
    pack,
    unpack,
)

__all__ = [
    "DELTA_HEADER_SIZE",
    "DeltaDecoder",
    "DeltaEncoder",
    "DeltaHardLabels",
    "QuantizedSoftLabels",
    "quantize_probs",
]

_KIND_QSOFT = 3
_KIND_DELTA = 4

_DELTA_EXTRA = struct.Struct("<I")
DELTA_HEADER_SIZE: int = HEADER_SIZE + _DELTA_EXTRA.size  # 14 bytes
"""Size in bytes of the header of a :class:`DeltaHardLabels` message."""

_FLAG_ABSTAIN = 0x01
_LAYOUT_SHIFT, _LAYOUT_MASK = 1, 0x06
_COMP_SHIFT, _COMP_MASK = 3, 0x18
_FULL, _BITMAP, _GAPS = 0, 1, 2
_COMPRESSORS = {"none": 0, "zlib": 1, "lzma": 2}
_COMPRESSOR_NAMES = {v: k for k, v in _COMPRESSORS.items()}
_LAYOUT_NAMES = {_FULL: "full", _BITMAP: "bitmap", _GAPS: "gaps"}
_LZMA_DICT = 1 << 20


# ------------------------------------------------------------------ quantised soft labels


def quantize_probs(probs: Any, bits: int) -> np.ndarray:
    """Largest-remainder rounding of each row of ``probs`` to integers summing to ``2**bits-1``.

    Each non-NaN row is normalised to sum to one, scaled by ``L = 2**bits - 1`` and rounded
    down; the ``L - sum(floor)`` missing units go to the entries with the largest remainders,
    ties broken towards the lower class index. With ``bits = 1`` (``L = 1``) this is the
    one-hot argmax, ties to the lowest class index (as :func:`numpy.argmax`). An all-NaN row
    (abstain) becomes an all-zero row. Every entry satisfies ``|q/L - p| < 1/L``.

    Parameters
    ----------
    probs : array-like of float, shape (n, C)
        Non-negative probabilities (each non-NaN row with a positive sum); all-NaN rows abstain.
    bits : int
        Bits per class, 1..16.

    Returns
    -------
    ndarray of int64, shape (n, C)

    Examples
    --------
    >>> import numpy as np
    >>> quantize_probs(np.array([[0.7, 0.2, 0.1], [1/3, 1/3, 1/3]]), 2).tolist()
    [[2, 1, 0], [1, 1, 1]]
    >>> quantize_probs(np.array([[0.4, 0.4, 0.2], [np.nan] * 3]), 1).tolist()
    [[1, 0, 0], [0, 0, 0]]
    """
    bits = check_int(bits, "bits", 1, 16)
    p = np.asarray(probs)
    if p.ndim != 2:
        raise ValueError(f"probs must be 2-D (n, n_classes), got shape {p.shape}")
    if p.dtype.kind not in "biuf":
        raise TypeError(f"probs must be real numbers, got dtype {p.dtype}")
    p = p.astype(np.float64)
    problem = check_probs(p)
    if problem:
        raise ValueError(f"probs {problem}")
    n, c = p.shape
    q = np.zeros((n, c), dtype=np.int64)
    if p.size == 0:
        return q
    valid = ~np.isnan(p[:, 0])
    pv = p[valid]
    # rows scaled by a power of two (exact) to a maximum in [1, 2) first, so that the sum
    # cannot overflow (finite rows of huge values) and subnormal rows keep their precision
    top = pv.max(axis=1, keepdims=True) if pv.size else np.ones((0, 1))
    pv = pv / np.ldexp(1.0, np.frexp(np.where(top > 0, top, 1.0))[1] - 1)
    total = pv.sum(axis=1, keepdims=True)
    if (total <= 0).any():
        raise ValueError("probs has a row summing to zero (use an all-NaN row to abstain)")
    L = (1 << bits) - 1
    x = pv / total * L
    base = np.floor(x)
    rem = x - base
    base = base.astype(np.int64)
    missing = np.clip(L - base.sum(axis=1), 0, c)
    order = np.argsort(-rem, axis=1, kind="stable")  # largest remainder first, low index on ties
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(c)[None, :].repeat(order.shape[0], axis=0), axis=1)
    base += rank < missing[:, None]
    q[valid] = base
    return q


class QuantizedSoftLabels(Message):
    """Soft labels quantised to ``bits`` bits per class, rows summing exactly to one.

    Parameters
    ----------
    probs : array-like of float, shape (n, n_classes)
        Non-negative probabilities; each row is normalised to sum to one before rounding.
        An all-NaN row marks an abstention.
    bits : int
        Bits per class, 1..16; ``L = 2**bits - 1`` quantisation levels per row.

    Attributes
    ----------
    q : ndarray of int64, shape (n, n_classes)
        The transmitted integers: rows sum to ``L``, abstaining rows are all zero.
    bits : int
    levels : int
        ``L = 2**bits - 1``.
    probs : ndarray of float64, shape (n, n_classes)
        ``q / L``, NaN rows for abstentions: exactly what the receiver decodes.
    nbytes : int
        ``10 + ceil(n * n_classes * bits / 8)``.

    See Also
    --------
    quantize_probs : the rounding rule (largest remainder, ties to the lower class index).

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.messages import decode
    >>> message = QuantizedSoftLabels(np.array([[0.5, 0.3, 0.2], [np.nan] * 3]), bits=4)
    >>> message.q.tolist(), message.nbytes
    ([[8, 4, 3], [0, 0, 0]], 13)
    >>> decode(message.to_bytes()).probs[0].tolist() == [8 / 15, 4 / 15, 3 / 15]
    True
    """

    kind: ClassVar[int] = _KIND_QSOFT

    def __init__(self, probs: Any, bits: int) -> None:
        self._bits = check_int(bits, "bits", 1, 16)
        p = np.asarray(probs)
        if p.ndim == 2 and (p.shape[1] < 1 or max(p.shape) > MAX_U32):
            raise ValueError(f"probs shape {p.shape} must have 1..2**32-1 columns and rows")
        self.q: np.ndarray = quantize_probs(p, self._bits)

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.q.shape[0])

    @property
    def n_classes(self) -> int:
        """Number of classes."""
        return int(self.q.shape[1])

    @property
    def bits(self) -> int:
        """Bits per class."""
        return self._bits

    @property
    def levels(self) -> int:
        """``L = 2**bits - 1``: the sum of every non-abstaining row of :attr:`q`."""
        return (1 << self._bits) - 1

    @property
    def abstain(self) -> np.ndarray:
        """Boolean mask of the abstaining rows."""
        return ~self.q.any(axis=1)

    @property
    def probs(self) -> np.ndarray:
        """Decoded probabilities ``q / L`` (float64), all-NaN rows where abstaining."""
        out = self.q / self.levels
        out[self.abstain] = np.nan
        return out

    @property
    def nbytes(self) -> int:
        """``10 + ceil(n * n_classes * bits / 8)``: the exact length of :meth:`to_bytes`."""
        return HEADER_SIZE + (self.q.size * self._bits + 7) // 8

    def to_bytes(self) -> bytes:
        """Encode as header + row-major bit-packed integers (see the module docstring)."""
        header = HEADER.pack(self.kind, self._bits, self.n, self.n_classes)
        return header + pack(self.q.reshape(-1), self._bits)

    @classmethod
    def _decode_payload(
        cls, flags: int, n: int, n_classes: int, payload: memoryview
    ) -> QuantizedSoftLabels:
        if not 1 <= flags <= 16:
            raise ValueError(f"corrupt QuantizedSoftLabels message: bits = {flags}")
        if n_classes < 1:
            raise ValueError(f"corrupt QuantizedSoftLabels message: n_classes = {n_classes}")
        expected = (n * n_classes * flags + 7) // 8
        if len(payload) != expected:
            raise ValueError(
                f"corrupt QuantizedSoftLabels message: payload of {len(payload)} bytes, "
                f"expected {expected} for a {n} x {n_classes} matrix at {flags} bits"
            )
        q = unpack(payload, n * n_classes, flags).reshape(n, n_classes)
        sums = q.sum(axis=1)
        L = (1 << flags) - 1
        if ((sums != L) & (sums != 0)).any():
            raise ValueError(f"corrupt QuantizedSoftLabels message: a row does not sum to {L}")
        message = cls.__new__(cls)
        message._bits = flags
        message.q = q
        return message

    def __repr__(self) -> str:
        return (
            f"QuantizedSoftLabels(n={self.n}, n_classes={self.n_classes}, bits={self._bits}, "
            f"nbytes={self.nbytes})"
        )


# ------------------------------------------------------------------ delta-coded hard labels


def _compress(body: bytes, method: str, level: int) -> bytes:
    if method == "zlib":
        co = zlib.compressobj(level, zlib.DEFLATED, -15)
        return co.compress(body) + co.flush()
    filters = [{"id": lzma.FILTER_LZMA2, "preset": level, "dict_size": _LZMA_DICT}]
    return lzma.compress(body, format=lzma.FORMAT_RAW, filters=filters)


def _decompress(payload: bytes, method: int, limit: int) -> bytes:
    """Decompress at most ``limit`` bytes; the stream must end exactly at the payload end."""
    try:
        if method == 1:
            do = zlib.decompressobj(-15)
            out = do.decompress(payload, limit + 1)
            ok = do.eof and not do.unused_data and not do.unconsumed_tail
        else:
            filters = [{"id": lzma.FILTER_LZMA2, "dict_size": _LZMA_DICT}]
            dec = lzma.LZMADecompressor(format=lzma.FORMAT_RAW, filters=filters)
            out = dec.decompress(payload, max_length=limit + 1)
            ok = dec.eof and not dec.unused_data
    except (zlib.error, lzma.LZMAError) as err:
        raise ValueError(f"corrupt DeltaHardLabels message: {err}") from err
    if not ok or len(out) > limit:
        raise ValueError("corrupt DeltaHardLabels message: bad compressed stream")
    return out


def _crc(codes: np.ndarray, header_and_payload: bytes) -> int:
    return zlib.crc32(codes.astype("<i8").tobytes(), zlib.crc32(header_and_payload))


def _check_codes(arr: Any, name: str, n_classes: int, abstain: bool) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got an array of shape {arr.shape}")
    if arr.size > MAX_U32:
        raise ValueError(f"{name} has {arr.size} labels, more than {MAX_U32}")
    if arr.size == 0:
        return np.empty(0, dtype=np.int64)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
    low, high = int(arr.min()), int(arr.max())
    if low < (-1 if abstain else 0) or high >= n_classes:
        allowed = f"-1 or 0..{n_classes - 1}" if abstain else f"0..{n_classes - 1}"
        hint = "" if abstain or low != -1 else " (-1 needs allow_abstain=True)"
        raise ValueError(f"{name} must be in {allowed}, got values in [{low}, {high}]{hint}")
    return np.array(arr, dtype=np.int64)


class DeltaHardLabels(Message):
    """Hard labels coded as the changes since the previous labelling (kind 4).

    Build one from the labels (``DeltaHardLabels(codes, previous, n_classes)``), or use the
    class methods :meth:`encode` (straight to bytes) and :meth:`decode` (bytes and the
    previous labels to codes), or the stateful :class:`DeltaEncoder` / :class:`DeltaDecoder`.
    :func:`cotrain.wire.messages.decode` returns the parsed, not yet applied, message: call
    :meth:`apply` with the previous labels.

    Parameters
    ----------
    codes : array-like of int, shape (n,)
        Class codes ``0..n_classes-1`` (and ``-1`` with ``allow_abstain``).
    previous : array-like of int, shape (n,), or None
        The labelling the receiver holds; ``None`` makes a full message.
    n_classes : int
        Size of the label space.
    compress : {"zlib", "lzma", "none"}, default="zlib"
        Compressor tried on every body (kept only where it makes the message smaller).
    level : int, default=6
        Compression level (zlib level or lzma preset), 0..9.
    allow_abstain : bool, default=False
        Whether ``-1`` may appear in ``codes`` and ``previous``.

    Attributes
    ----------
    positions : ndarray of int64
        Positions carried by the message (all of ``0..n-1`` for a full message).
    values : ndarray of int64
        Their codes (``-1`` = abstain).
    layout : {"full", "bitmap", "gaps"}
    compressor : {"none", "zlib", "lzma"}
        The compressor actually used (``"none"`` when compressing did not help).
    nbytes : int
        Size of the encoded message.

    Examples
    --------
    >>> import numpy as np
    >>> previous = np.zeros(1000, dtype=np.int64)
    >>> codes = previous.copy(); codes[[10, 500]] = [3, 7]
    >>> message = DeltaHardLabels(codes, previous, 10)
    >>> message.layout, message.n_changed, message.positions.tolist()
    ('gaps', 2, [10, 500])
    >>> data = DeltaHardLabels.encode(codes, previous, 10)
    >>> data == message.to_bytes()
    True
    >>> len(data)  # 14-byte header + m (4 bytes) + width (1) + 2 gaps at 9 bits + 2 codes at 4 bits
    23
    >>> DeltaHardLabels.decode(data, previous)[[10, 500]].tolist()
    [3, 7]
    >>> len(DeltaHardLabels.encode(codes, codes, 10))  # nothing changed: the header alone
    14
    """

    kind: ClassVar[int] = _KIND_DELTA

    def __init__(
        self,
        codes: Any,
        previous: Any,
        n_classes: int,
        *,
        compress: str = "zlib",
        level: int = 6,
        allow_abstain: bool = False,
    ) -> None:
        if not isinstance(compress, str) or compress not in _COMPRESSORS:
            raise ValueError(f"compress must be one of {tuple(_COMPRESSORS)}, got {compress!r}")
        level = check_int(level, "level", 0, 9)
        abstain = bool(allow_abstain)
        n_classes = check_int(n_classes, "n_classes", 1, MAX_U32 - int(abstain))
        codes = _check_codes(codes, "codes", n_classes, abstain)
        n = codes.size
        b = bits_per_label(n_classes + int(abstain))

        def symbols(values: np.ndarray) -> np.ndarray:
            return np.where(values < 0, n_classes, values) if abstain else values

        # (layout, changed positions or None for all, body), in order of preference
        bodies: list[tuple[int, np.ndarray | None, bytes]] = []
        if previous is not None:
            previous = _check_codes(previous, "previous", n_classes, abstain)
            if previous.size != n:
                raise ValueError(f"previous has {previous.size} labels, codes has {n}")
            changed = codes != previous
            pos = np.flatnonzero(changed).astype(np.int64)
            m = int(pos.size)
            new = pack(symbols(codes[pos]), b)
            if m == 0:
                bodies.append((_BITMAP, pos, b""))
            else:
                bitmap = np.packbits(changed, bitorder="little").tobytes()
                bodies.append((_BITMAP, pos, bitmap + new))
                gaps = np.diff(pos, prepend=-1) - 1
                g = int(gaps.max()).bit_length()
                packed_gaps = pack(gaps, g) if g else b""
                bodies.append((_GAPS, pos, struct.pack("<IB", m, g) + packed_gaps + new))
        bodies.append((_FULL, None, pack(symbols(codes), b)))

        best: tuple[int, np.ndarray | None, int, bytes] | None = None  # + compressor, payload
        for layout, pos, body in bodies:
            options = [(0, body)]
            if compress != "none" and body:
                options.append((_COMPRESSORS[compress], _compress(body, compress, level)))
            for comp, payload in options:
                if best is None or len(payload) < len(best[3]):
                    best = (layout, pos, comp, payload)
        assert best is not None
        layout, pos, comp, payload = best
        flags = (
            (_FLAG_ABSTAIN if abstain else 0) | (layout << _LAYOUT_SHIFT) | (comp << _COMP_SHIFT)
        )
        self._n = n
        self._n_classes = n_classes
        self._allow_abstain = abstain
        self.layout: str = _LAYOUT_NAMES[layout]
        self.compressor: str = _COMPRESSOR_NAMES[comp]
        self.positions: np.ndarray = np.arange(n) if pos is None else pos
        self.values: np.ndarray = codes.copy() if pos is None else codes[pos]
        self._signed = HEADER.pack(self.kind, flags, n, n_classes) + _DELTA_EXTRA.pack(0) + payload
        self._crc = _crc(codes, self._signed)

    # -- encoding ------------------------------------------------------------------------

    @classmethod
    def encode(
        cls,
        codes: Any,
        previous: Any,
        n_classes: int,
        *,
        compress: str = "zlib",
        level: int = 6,
        allow_abstain: bool = False,
    ) -> bytes:
        """Encode ``codes`` as the changes since ``previous`` (a full message if it is None).

        The same as ``DeltaHardLabels(codes, previous, n_classes, ...).to_bytes()``; the
        parameters are those of the class.

        Returns
        -------
        bytes

        Examples
        --------
        >>> import numpy as np
        >>> len(DeltaHardLabels.encode(np.array([0, 1, 1, 0]), None, 2))  # full: 14 + 1
        15
        """
        message = cls(
            codes,
            previous,
            n_classes,
            compress=compress,
            level=level,
            allow_abstain=allow_abstain,
        )
        return message.to_bytes()

    # -- decoding ------------------------------------------------------------------------

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, previous: Any) -> np.ndarray:
        """Reconstruct the codes from a message and the previous labelling.

        Parameters
        ----------
        data : bytes-like
            A message from :meth:`encode`.
        previous : array-like of int, shape (n,), or None
            The labelling the sender encoded against (ignored by a full message).

        Returns
        -------
        ndarray of int64, shape (n,)

        Raises
        ------
        ValueError
            If the message is corrupt or truncated, or ``previous`` is needed and missing, of
            the wrong length, or not the sender's (CRC mismatch).
        """
        message = Message.from_bytes(data)
        if not isinstance(message, cls):
            raise ValueError(f"expected a DeltaHardLabels message, got {type(message).__name__}")
        return message.apply(previous)

    @classmethod
    def _decode_payload(
        cls, flags: int, n: int, n_classes: int, payload: memoryview
    ) -> DeltaHardLabels:
        if len(payload) < _DELTA_EXTRA.size:
            raise ValueError("truncated DeltaHardLabels message: header cut short")
        if flags & ~(_FLAG_ABSTAIN | _LAYOUT_MASK | _COMP_MASK):
            raise ValueError(f"corrupt DeltaHardLabels message: unknown flags {flags:#04x}")
        abstain = bool(flags & _FLAG_ABSTAIN)
        layout = (flags & _LAYOUT_MASK) >> _LAYOUT_SHIFT
        comp = (flags & _COMP_MASK) >> _COMP_SHIFT
        if layout not in _LAYOUT_NAMES or comp not in _COMPRESSOR_NAMES:
            raise ValueError(f"corrupt DeltaHardLabels message: unknown flags {flags:#04x}")
        if n_classes < 1 or (abstain and n_classes == MAX_U32):
            raise ValueError(f"corrupt DeltaHardLabels message: n_classes = {n_classes}")
        (crc,) = _DELTA_EXTRA.unpack_from(payload)
        b = bits_per_label(n_classes + int(abstain))
        full_bytes = (n * b + 7) // 8
        if layout == _FULL:
            limit = full_bytes
        elif layout == _BITMAP:
            limit = (n + 7) // 8 + full_bytes
        else:
            limit = 5 + 4 * n + full_bytes
        raw = bytes(payload[_DELTA_EXTRA.size :])
        body = raw if comp == 0 else _decompress(raw, comp, limit)

        def fail(why: str) -> ValueError:
            return ValueError(f"corrupt DeltaHardLabels message: {why}")

        if layout == _FULL:
            m, pos, sym_part = n, None, body
        elif layout == _BITMAP and not body:  # nothing changed
            m, pos, sym_part = 0, np.empty(0, dtype=np.int64), b""
        elif layout == _BITMAP:
            nb = (n + 7) // 8
            if len(body) < nb:
                raise fail("body too short")
            mask = np.unpackbits(np.frombuffer(body, np.uint8, nb), bitorder="little")
            if mask[n:].any():
                raise fail("non-zero padding bits")
            pos = np.flatnonzero(mask[:n])
            m = int(pos.size)
            if m == 0:
                raise fail("empty change bitmap")
            sym_part = body[nb:]
        else:
            if len(body) < 5:
                raise fail("body too short")
            m, g = struct.unpack_from("<IB", body)
            if not 1 <= m <= n or g > 32:
                raise fail(f"{m} changes of {g}-bit gaps for n = {n}")
            gb = (m * g + 7) // 8
            if len(body) < 5 + gb:
                raise fail("body too short")
            if g:
                gaps = _unpack_checked(memoryview(body)[5 : 5 + gb], m, g)
            else:
                gaps = np.zeros(m, dtype=np.int64)
            pos = np.cumsum(gaps + 1) - 1
            if pos[-1] >= n:
                raise fail("position out of range")
            sym_part = body[5 + gb :]
        if len(sym_part) != (m * b + 7) // 8:
            raise fail(f"body of unexpected length ({len(body)} bytes)")
        values = _unpack_checked(memoryview(sym_part), m, b)
        if values.size and int(values.max()) >= n_classes + int(abstain):
            raise fail("a code is out of range")
        if abstain:
            values[values == n_classes] = -1
        message = cls.__new__(cls)
        message._n = n
        message._n_classes = n_classes
        message._allow_abstain = abstain
        message.layout = _LAYOUT_NAMES[layout]
        message.compressor = _COMPRESSOR_NAMES[comp]
        message.positions = np.arange(n) if pos is None else pos.astype(np.int64)
        message.values = values
        message._crc = crc
        message._signed = HEADER.pack(cls.kind, flags, n, n_classes) + _DELTA_EXTRA.pack(0) + raw
        return message

    def apply(self, previous: Any) -> np.ndarray:
        """The codes this message carries on top of ``previous`` (checked against the CRC).

        Raises
        ------
        ValueError
            If ``previous`` is needed and missing or of the wrong length, or the
            reconstruction fails the CRC (corrupt message or a different previous labelling).
        """
        if self.layout == "full":
            codes = self.values.copy()
        else:
            if previous is None:
                raise ValueError("this DeltaHardLabels message needs the previous labels")
            prev = np.asarray(previous)
            if prev.ndim != 1 or prev.size != self._n:
                raise ValueError(
                    f"previous must have shape ({self._n},), got an array of shape {prev.shape}"
                )
            if prev.size and (prev.dtype == np.bool_ or not np.issubdtype(prev.dtype, np.integer)):
                raise ValueError(f"previous must be integer codes, got dtype {prev.dtype}")
            codes = prev.astype(np.int64, copy=True)
            codes[self.positions] = self.values
        if _crc(codes, self._signed) != self._crc:
            raise ValueError(
                "DeltaHardLabels CRC mismatch: corrupt message or previous labels differ from "
                "the sender's"
            )
        return codes

    @property
    def n(self) -> int:
        """Number of labels."""
        return self._n

    @property
    def n_classes(self) -> int:
        """Size of the label space."""
        return self._n_classes

    @property
    def allow_abstain(self) -> bool:
        """Whether ``-1`` may appear."""
        return self._allow_abstain

    @property
    def n_changed(self) -> int:
        """Number of labels carried."""
        return int(self.values.size)

    @property
    def nbytes(self) -> int:
        """Length of the encoded message."""
        return len(self._signed)

    def to_bytes(self) -> bytes:
        """The encoded message (as received)."""
        signed = self._signed
        return signed[:HEADER_SIZE] + _DELTA_EXTRA.pack(self._crc) + signed[DELTA_HEADER_SIZE:]

    def __repr__(self) -> str:
        return (
            f"DeltaHardLabels(n={self._n}, n_classes={self._n_classes}, layout={self.layout!r}, "
            f"compressor={self.compressor!r}, n_changed={self.n_changed}, nbytes={self.nbytes})"
        )


def _unpack_checked(payload: memoryview, n: int, b: int) -> np.ndarray:
    if (n * b + 7) // 8 != len(payload):
        raise ValueError("corrupt DeltaHardLabels message: field of unexpected length")
    try:
        return unpack(payload, n, b)
    except ValueError as err:
        raise ValueError(f"corrupt DeltaHardLabels message: {err}") from err


class DeltaEncoder:
    """Sender side of delta coding: remembers the labels it last sent.

    Parameters
    ----------
    n_classes : int
    compress : {"zlib", "lzma", "none"}, default="zlib"
    level : int, default=6
    allow_abstain : bool, default=False

    Notes
    -----
    The state changes only when :meth:`encode` returns a message; if a round is skipped
    nothing changes here or at the receiver. Picklable (plain attributes).

    Examples
    --------
    >>> import numpy as np
    >>> encoder, decoder = DeltaEncoder(3), DeltaDecoder()
    >>> decoder.decode(encoder.encode(np.array([0, 1, 2, 1]))).tolist()
    [0, 1, 2, 1]
    >>> data = encoder.encode(np.array([0, 1, 2, 2]))
    >>> len(data), decoder.decode(data).tolist()  # 4 labels at 2 bits: the full body is smallest
    (15, [0, 1, 2, 2])
    """

    def __init__(
        self,
        n_classes: int,
        *,
        compress: str = "zlib",
        level: int = 6,
        allow_abstain: bool = False,
    ) -> None:
        self.n_classes = n_classes
        self.compress = compress
        self.level = level
        self.allow_abstain = allow_abstain
        self.previous: np.ndarray | None = None

    def encode(self, codes: Any) -> bytes:
        """Encode ``codes`` against the last message (full if none) and remember them."""
        data = DeltaHardLabels.encode(
            codes,
            self.previous,
            self.n_classes,
            compress=self.compress,
            level=self.level,
            allow_abstain=self.allow_abstain,
        )
        self.previous = np.array(codes, dtype=np.int64)
        return data

    def reset(self) -> None:
        """Forget the previous labels: the next message is full."""
        self.previous = None


class DeltaDecoder:
    """Receiver side of delta coding (one per sender): remembers the labels it last decoded.

    The state changes only when :meth:`decode` succeeds. Picklable.

    Examples
    --------
    >>> import numpy as np
    >>> decoder = DeltaDecoder()
    >>> decoder.decode(DeltaEncoder(2).encode(np.array([1, 0]))).tolist()
    [1, 0]
    """

    def __init__(self) -> None:
        self.previous: np.ndarray | None = None

    def decode(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """Reconstruct the codes of ``data`` and remember them."""
        codes = DeltaHardLabels.decode(as_buffer(data), self.previous)
        self.previous = codes.copy()
        return codes

    def reset(self) -> None:
        """Forget the previous labels (do the same on the encoder side)."""
        self.previous = None
