"""Messages between a client and the server, with exact encoded sizes.

Only labels travel in co-training: a client uploads its labels on the public pool, the server
broadcasts the consensus. This module defines those messages as explicit objects that encode to
``bytes`` and decode back, so that the byte counts recorded in a run's history are the sizes of
real messages, not estimates.

Wire format
-----------
Every message is a fixed 10-byte little-endian header followed by a payload::

    offset  size  field       struct
    0       1     kind        B    1 = HardLabels, 2 = SoftLabels,
                                   3 = QuantizedSoftLabels, 4 = DeltaHardLabels
                                   (3: cotrain.wire.compact, 4: cotrain.wire.delta)
    1       1     flags       B    HardLabels: bit 0 = abstain allowed
                                   SoftLabels: 0 = float32, 1 = float16
    2       4     n           I    number of labels (rows)
    6       4     n_classes   I    number of classes (columns)
    10      ...   payload

``HardLabels`` payload: every label is stored in ``b = max(1, ceil(log2(n_symbols)))`` bits,
``n_symbols = n_classes`` (``+ 1`` when abstaining is allowed, the abstain code ``-1`` being
stored as the symbol ``n_classes``). Label ``k`` occupies bits ``k*b .. k*b + b - 1`` of the
payload, least significant bit first, bytes filled from their least significant bit
(``numpy.packbits(..., bitorder="little")``); unused bits of the last byte are zero. The payload
is ``ceil(n * b / 8)`` bytes. For ``b`` = 8, 16 or 32 this is exactly the little-endian
``uint8``/``uint16``/``uint32`` array.

``SoftLabels`` payload: the ``(n, n_classes)`` probability matrix, row-major, as little-endian
``float32`` or ``float16``: ``n * n_classes * itemsize`` bytes. A row of NaN means the sender
abstains on that example.

For example, 370 binary hard labels take 10 + 47 = 57 bytes, 10,000 labels of 10 classes take
10 + 5,000 bytes, and a 5 x 3 float32 soft message takes 10 + 60 = 70 bytes.

The header, the bit packer and the registry of kinds live in :mod:`cotrain.wire.packing`; every
message class registers its kind there, so :func:`decode` understands the kinds of every module
imported. Importing :mod:`cotrain` imports :mod:`cotrain.wire.compact` (kind 3) and
:mod:`cotrain.wire.delta` (kind 4), so they are always known. :class:`cotrain.wire.WireFormat`
chooses the kinds a federation uses.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from cotrain.wire.packing import (
    HEADER,
    HEADER_SIZE,
    MAX_U32,
    as_buffer,
    bits_per_label,
    check_probs,
    message_class,
    pack,
    register_kind,
    unpack,
)
from learners.checks import check_int

__all__ = [
    "HardLabels",
    "Message",
    "SoftLabels",
    "decode",
    "encode_message",
]

_KIND_HARD = 1
_KIND_SOFT = 2
_FLAG_ABSTAIN = 0x01
_SOFT_DTYPES: dict[str, tuple[int, np.dtype]] = {
    "float32": (0, np.dtype("<f4")),
    "float16": (1, np.dtype("<f2")),
}
_SOFT_FLAGS = {flag: name for name, (flag, _) in _SOFT_DTYPES.items()}


class Message:
    """Base class of the label messages; ``Message.from_bytes`` decodes any of them.

    Subclasses define ``to_bytes``, ``from_bytes`` and ``nbytes``; ``nbytes`` is computed from
    the shape alone and always equals ``len(to_bytes())``.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.messages import HardLabels, Message
    >>> data = HardLabels(np.array([0, 2, 1]), n_classes=3).to_bytes()
    >>> message = Message.from_bytes(data)
    >>> type(message).__name__, message.codes.tolist()
    ('HardLabels', [0, 2, 1])
    """

    kind: ClassVar[int] = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("kind"):  # a subclass of a message class keeps its parent's kind
            register_kind(cls.kind, cls)

    @property
    def n(self) -> int:
        """Number of labels (examples) in the message."""
        raise NotImplementedError

    @property
    def n_classes(self) -> int:
        """Number of classes of the label space."""
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        """Exact size of :meth:`to_bytes`, computed without encoding."""
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        """Encode the message (header + payload)."""
        raise NotImplementedError

    @classmethod
    def _decode_payload(cls, flags: int, n: int, n_classes: int, payload: memoryview) -> Message:
        raise NotImplementedError

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Message:
        """Decode a message; on a subclass, the message must be of that subclass.

        Raises
        ------
        TypeError
            If ``data`` is not bytes-like.
        ValueError
            If ``data`` is truncated, too long, of an unknown kind, of another kind than the
            class it is decoded with, or its payload is invalid.
        """
        view = as_buffer(data)
        kind, flags, n, n_classes = HEADER.unpack_from(view)
        target = message_class(kind)
        if target is None or not issubclass(target, Message):
            raise ValueError(f"unknown message kind {kind} (corrupt message?)")
        if cls is not Message and target is not cls:
            raise ValueError(f"expected a {cls.__name__} message, got a {target.__name__} message")
        return target._decode_payload(flags, n, n_classes, view[HEADER_SIZE:])


def decode(data: bytes | bytearray | memoryview) -> Message:
    """Decode any message produced by ``to_bytes`` (dispatch on the kind byte).

    Every registered kind is understood: 1 and 2 from this module, 3 from
    :mod:`cotrain.wire.compact` and 4 from :mod:`cotrain.wire.delta`, which importing
    :mod:`cotrain` registers.

    Parameters
    ----------
    data : bytes, bytearray or memoryview
        An encoded message.

    Returns
    -------
    HardLabels, SoftLabels, QuantizedSoftLabels or DeltaHardLabels
        A :class:`cotrain.wire.delta.DeltaHardLabels` is returned parsed but not applied: call
        its ``apply(previous)`` to get the codes.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.messages import SoftLabels, decode
    >>> message = decode(SoftLabels(np.array([[0.25, 0.75]])).to_bytes())
    >>> message.probs.tolist()
    [[0.25, 0.75]]
    """
    return Message.from_bytes(data)


class HardLabels(Message):
    """Hard labels: one integer class code per example, bit-packed.

    Parameters
    ----------
    codes : array-like of int, shape (n,)
        Class codes in ``0 .. n_classes - 1`` (indices into the global classes), and ``-1``
        (abstain) where ``allow_abstain`` is true.
    n_classes : int
        Size of the label space, ``>= 1``.
    allow_abstain : bool, default=False
        Whether ``-1`` is allowed. Clients' uploads never abstain; the server's broadcast of a
        qualified-majority consensus does.

    Attributes
    ----------
    codes : ndarray of int64, shape (n,)
        The class codes.
    bits_per_label : int
        ``b = max(1, ceil(log2(n_classes + allow_abstain)))``.
    nbytes : int
        ``10 + ceil(n * b / 8)``.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.messages import HardLabels
    >>> message = HardLabels(np.array([0, 1, 2, -1]), n_classes=3, allow_abstain=True)
    >>> message.bits_per_label, message.nbytes
    (2, 11)
    >>> HardLabels.from_bytes(message.to_bytes()).codes.tolist()
    [0, 1, 2, -1]
    """

    kind: ClassVar[int] = _KIND_HARD

    def __init__(self, codes: Any, n_classes: int, *, allow_abstain: bool = False) -> None:
        self._allow_abstain = bool(allow_abstain)
        self._n_classes = check_int(n_classes, "n_classes", 1, MAX_U32 - int(self._allow_abstain))
        arr = np.asarray(codes)
        if arr.ndim != 1:
            raise ValueError(f"codes must be 1-D, got an array of shape {arr.shape}")
        if arr.size > MAX_U32:
            raise ValueError(f"codes has {arr.size} labels, more than {MAX_U32}")
        if arr.size == 0:
            arr = np.empty(0, dtype=np.int64)
        elif arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"codes must be integers, got dtype {arr.dtype}")
        if arr.size:
            low, high = int(arr.min()), int(arr.max())
            floor = -1 if self._allow_abstain else 0
            if low < floor or high >= self._n_classes:
                top = self._n_classes - 1
                allowed = f"-1 or 0..{top}" if self._allow_abstain else f"0..{top}"
                hint = " (-1 needs allow_abstain=True)" if low == -1 == floor - 1 else ""
                raise ValueError(f"codes must be in {allowed}, got values in [{low}, {high}]{hint}")
        self.codes: NDArray[np.int64] = np.array(arr, dtype=np.int64)

    @property
    def n(self) -> int:
        """Number of labels."""
        return int(self.codes.size)

    @property
    def n_classes(self) -> int:
        """Size of the label space."""
        return self._n_classes

    @property
    def allow_abstain(self) -> bool:
        """Whether the code ``-1`` (abstain) may appear."""
        return self._allow_abstain

    @property
    def bits_per_label(self) -> int:
        """Bits per label, ``max(1, ceil(log2(n_classes + allow_abstain)))``."""
        return bits_per_label(self._n_classes + int(self._allow_abstain))

    @property
    def nbytes(self) -> int:
        """``10 + ceil(n * b / 8)``: the exact length of :meth:`to_bytes`."""
        return HEADER_SIZE + (self.n * self.bits_per_label + 7) // 8

    def to_bytes(self) -> bytes:
        """Encode as header + bit-packed payload (see the module docstring)."""
        flags = _FLAG_ABSTAIN if self._allow_abstain else 0
        header = HEADER.pack(self.kind, flags, self.n, self._n_classes)
        symbols = self.codes
        if self._allow_abstain:
            symbols = np.where(symbols < 0, self._n_classes, symbols)
        return header + pack(symbols, self.bits_per_label)

    @classmethod
    def _decode_payload(cls, flags: int, n: int, n_classes: int, payload: memoryview) -> HardLabels:
        if flags & ~_FLAG_ABSTAIN:
            raise ValueError(f"corrupt HardLabels message: unknown flags {flags:#04x}")
        abstain = bool(flags & _FLAG_ABSTAIN)
        if n_classes < 1 or (abstain and n_classes == MAX_U32):
            raise ValueError(f"corrupt HardLabels message: n_classes = {n_classes}")
        b = bits_per_label(n_classes + int(abstain))
        expected = (n * b + 7) // 8
        if len(payload) != expected:
            raise ValueError(
                f"corrupt HardLabels message: payload of {len(payload)} bytes, expected "
                f"{expected} for n={n}, b={b}"
            )
        symbols = unpack(payload, n, b)
        if symbols.size and int(symbols.max()) >= n_classes + int(abstain):
            raise ValueError("corrupt HardLabels message: a code is out of range")
        if abstain:
            symbols[symbols == n_classes] = -1
        message = cls.__new__(cls)
        message._allow_abstain = abstain
        message._n_classes = n_classes
        message.codes = symbols
        return message

    def __repr__(self) -> str:
        return (
            f"HardLabels(n={self.n}, n_classes={self._n_classes}, "
            f"allow_abstain={self._allow_abstain}, nbytes={self.nbytes})"
        )


class SoftLabels(Message):
    """Soft labels: an ``(n, C)`` matrix of class probabilities, sent as float32 or float16.

    Parameters
    ----------
    probs : array-like of float, shape (n, n_classes)
        Non-negative finite probabilities; a row made entirely of NaN marks an abstention.
        They are converted to ``dtype`` at construction, so :attr:`probs` is exactly what is
        transmitted.
    dtype : {"float32", "float16"}, default="float32"
        Wire precision.

    Attributes
    ----------
    probs : ndarray of shape (n, n_classes), dtype float32 or float16
    nbytes : int
        ``10 + n * n_classes * itemsize``.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.messages import SoftLabels
    >>> message = SoftLabels(np.full((5, 3), 1 / 3))
    >>> message.nbytes
    70
    >>> SoftLabels.from_bytes(message.to_bytes()).probs.shape
    (5, 3)
    """

    kind: ClassVar[int] = _KIND_SOFT

    def __init__(self, probs: Any, dtype: str = "float32") -> None:
        if not isinstance(dtype, str) and isinstance(dtype, (type, np.dtype)):
            dtype = np.dtype(dtype).name
        if dtype not in _SOFT_DTYPES:
            raise ValueError(f"dtype must be one of {tuple(_SOFT_DTYPES)}, got {dtype!r}")
        arr = np.asarray(probs)
        if arr.ndim != 2:
            raise ValueError(f"probs must be 2-D (n, n_classes), got shape {arr.shape}")
        if arr.shape[1] < 1:
            raise ValueError("probs must have at least one column (class)")
        if arr.shape[0] > MAX_U32 or arr.shape[1] > MAX_U32:
            raise ValueError(f"probs shape {arr.shape} is too large for the message header")
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"probs must be real numbers, got dtype {arr.dtype}")
        self._dtype = dtype
        with np.errstate(over="ignore"):  # overflow to inf is reported just below
            self.probs: NDArray[np.floating[Any]] = np.array(
                arr, dtype=_SOFT_DTYPES[dtype][1].newbyteorder("=")
            )
        problem = check_probs(self.probs)
        if problem:
            raise ValueError(
                f"probs {problem}"
                + (f" after conversion to {dtype}" if "infinite" in problem else "")
            )

    @property
    def n(self) -> int:
        """Number of rows (examples)."""
        return int(self.probs.shape[0])

    @property
    def n_classes(self) -> int:
        """Number of columns (classes)."""
        return int(self.probs.shape[1])

    @property
    def dtype(self) -> str:
        """Wire precision, ``"float32"`` or ``"float16"``."""
        return self._dtype

    @property
    def nbytes(self) -> int:
        """``10 + n * n_classes * itemsize``: the exact length of :meth:`to_bytes`."""
        return HEADER_SIZE + self.probs.size * _SOFT_DTYPES[self._dtype][1].itemsize

    def to_bytes(self) -> bytes:
        """Encode as header + row-major little-endian float payload."""
        flag, wire = _SOFT_DTYPES[self._dtype]
        header = HEADER.pack(self.kind, flag, self.n, self.n_classes)
        return header + np.ascontiguousarray(self.probs, dtype=wire).tobytes()

    @classmethod
    def _decode_payload(cls, flags: int, n: int, n_classes: int, payload: memoryview) -> SoftLabels:
        name = _SOFT_FLAGS.get(flags)
        if name is None:
            raise ValueError(f"corrupt SoftLabels message: unknown flags {flags:#04x}")
        if n_classes < 1:
            raise ValueError(f"corrupt SoftLabels message: n_classes = {n_classes}")
        wire = _SOFT_DTYPES[name][1]
        expected = n * n_classes * wire.itemsize
        if len(payload) != expected:
            raise ValueError(
                f"corrupt SoftLabels message: payload of {len(payload)} bytes, expected "
                f"{expected} for a {n} x {n_classes} {name} matrix"
            )
        probs = np.frombuffer(payload, dtype=wire, count=n * n_classes).reshape(n, n_classes)
        probs = probs.astype(wire.newbyteorder("="))
        problem = check_probs(probs)
        if problem:
            raise ValueError(f"corrupt SoftLabels message: probs {problem}")
        message = cls.__new__(cls)
        message._dtype = name
        message.probs = probs
        return message

    def __repr__(self) -> str:
        return (
            f"SoftLabels(n={self.n}, n_classes={self.n_classes}, dtype={self._dtype!r}, "
            f"nbytes={self.nbytes})"
        )


def encode_message(
    labels: Any,
    n_classes: int,
    *,
    soft_dtype: str = "float32",
    allow_abstain: bool = False,
) -> HardLabels | SoftLabels:
    """Wrap labels in the matching message: 1-D integer codes or a 2-D probability matrix.

    Parameters
    ----------
    labels : array-like
        ``(n,)`` integer class codes, or ``(n, n_classes)`` probabilities.
    n_classes : int
        Size of the label space (must equal the number of columns of soft labels).
    soft_dtype : {"float32", "float16"}, default="float32"
        Wire precision of soft labels.
    allow_abstain : bool, default=False
        Whether hard codes may be ``-1``.

    Returns
    -------
    HardLabels or SoftLabels

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.messages import encode_message
    >>> encode_message(np.array([1, 0, 1]), 2).nbytes
    11
    >>> encode_message(np.eye(2), 2, soft_dtype="float16").nbytes
    18
    """
    arr = np.asarray(labels)
    if arr.ndim == 1:
        return HardLabels(arr, n_classes, allow_abstain=allow_abstain)
    if arr.ndim == 2:
        n_classes = check_int(n_classes, "n_classes", 1, MAX_U32)
        if arr.shape[1] != n_classes:
            raise ValueError(
                f"soft labels have {arr.shape[1]} columns but n_classes is {n_classes}"
            )
        return SoftLabels(arr, dtype=soft_dtype)
    raise ValueError(
        f"labels must be 1-D codes or 2-D probabilities, got an array of shape {arr.shape}"
    )
