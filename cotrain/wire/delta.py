"""Delta-coded hard labels: the labels that changed since the previous labelling (kind 4).

A message kind of the same family as :mod:`cotrain.wire.messages` (the 10-byte header, then a
CRC; the bit packer of :mod:`cotrain.wire.packing`, where the kind registers, so that
:func:`cotrain.wire.messages.decode` understands it through the kind byte).

Hard labels are sent as the changes since the previous message. A 14-byte header::

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
A message is only meaningful against the labelling its sender coded against. In a federation
:class:`cotrain.wire.endpoints.UploadSender` and :class:`cotrain.wire.endpoints.UploadReceiver`
hold that state on each side: the server tells each client which of its uploads it decoded
last, so an upload that never arrived is never used as the reference, and a receiver that
fails to decode a message keeps its state.
"""

from __future__ import annotations

import lzma
import struct
import zlib
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from cotrain.wire.messages import Message
from cotrain.wire.packing import (
    HEADER,
    HEADER_SIZE,
    MAX_U32,
    bits_per_label,
    pack,
    unpack,
)
from learners.checks import check_int

__all__ = ["DELTA_HEADER_SIZE", "DeltaHardLabels"]

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


def _crc(codes: NDArray[np.int64], header_and_payload: bytes) -> int:
    return zlib.crc32(codes.astype("<i8").tobytes(), zlib.crc32(header_and_payload))


def _check_codes(arr: Any, name: str, n_classes: int, abstain: bool) -> NDArray[np.int64]:
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
    previous labels to codes); :class:`cotrain.wire.endpoints.UploadSender` and
    :class:`cotrain.wire.endpoints.UploadReceiver` keep the previous labels of each side.
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
    layout: str
    compressor: str
    positions: NDArray[np.int64]
    values: NDArray[np.int64]
    _n: int
    _n_classes: int
    _allow_abstain: bool
    _signed: bytes
    _crc: int

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

        def symbols(values: NDArray[np.int64]) -> NDArray[np.int64]:
            return np.where(values < 0, n_classes, values) if abstain else values

        # (layout, changed positions or None for all, body), in order of preference
        bodies: list[tuple[int, NDArray[np.int64] | None, bytes]] = []
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

        # (layout, positions, compressor, payload) of the smallest message so far
        best: tuple[int, NDArray[np.int64] | None, int, bytes] | None = None
        for layout, where, body in bodies:
            options = [(0, body)]
            if compress != "none" and body:
                options.append((_COMPRESSORS[compress], _compress(body, compress, level)))
            for comp, payload in options:
                if best is None or len(payload) < len(best[3]):
                    best = (layout, where, comp, payload)
        assert best is not None
        layout, where, comp, payload = best
        flags = (
            (_FLAG_ABSTAIN if abstain else 0) | (layout << _LAYOUT_SHIFT) | (comp << _COMP_SHIFT)
        )
        self._n = n
        self._n_classes = n_classes
        self._allow_abstain = abstain
        self.layout = _LAYOUT_NAMES[layout]
        self.compressor = _COMPRESSOR_NAMES[comp]
        self.positions = np.arange(n, dtype=np.int64) if where is None else where
        self.values = codes.copy() if where is None else codes[where]
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
    def decode(cls, data: bytes | bytearray | memoryview, previous: Any) -> NDArray[np.int64]:
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

    def apply(self, previous: Any) -> NDArray[np.int64]:
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


def _unpack_checked(payload: memoryview, n: int, b: int) -> NDArray[np.int64]:
    if (n * b + 7) // 8 != len(payload):
        raise ValueError("corrupt DeltaHardLabels message: field of unexpected length")
    try:
        return unpack(payload, n, b)
    except ValueError as err:
        raise ValueError(f"corrupt DeltaHardLabels message: {err}") from err
