"""The wire format of a federation: one object that encodes and decodes every label message.

A federation fixes once how labels travel: hard class codes or soft probabilities
(``share``), hard uploads packed or delta-coded (``encoding``), soft labels as ``float32`` /
``float16`` or quantised to ``soft_bits`` bits per class. :class:`WireFormat` holds that
choice with the sizes of the label space and of the public pool, and is the only place that
turns labels into bytes and back, for uploads (client to server) and broadcasts (server to
clients). The message classes themselves live in :mod:`cotrain.wire.messages` (kinds 1, 2),
:mod:`cotrain.wire.compact` (kind 3) and :mod:`cotrain.wire.delta` (kind 4).

================  ==========================  ==========================================
share / encoding  upload                      broadcast
================  ==========================  ==========================================
hard, packed      ``HardLabels``              ``HardLabels`` (``-1`` = abstain), or soft
hard, delta       ``DeltaHardLabels``         as for packed, or per client a
                                              ``DeltaHardLabels`` against the consensus it
                                              acknowledged (:mod:`cotrain.wire.broadcast`)
soft              ``SoftLabels(soft_dtype)``  1-D consensus: ``HardLabels``; 2-D:
                  or ``QuantizedSoftLabels``  ``SoftLabels(soft_dtype)`` or
                  when ``soft_bits`` is set   ``QuantizedSoftLabels(soft_bits)``
================  ==========================  ==========================================

The broadcast follows the shape of the consensus (a hard rule gives codes, a soft rule
probabilities), not ``share``. Each direction accepts exactly the kinds its format produces:
a message of another kind, another label space or another length is a
:class:`MalformedMessage`, and so is an upload that abstains (uploads label every example)
or whose probabilities are not finite rows summing to one.

Delta coding needs state on both ends (the client's last upload, the server's last decoded
upload of each client): :meth:`WireFormat.sender` and :meth:`WireFormat.receiver` build those
ends, :class:`~cotrain.wire.endpoints.UploadSender` and
:class:`~cotrain.wire.endpoints.UploadReceiver` (see :mod:`cotrain.wire.endpoints`).

Examples
--------
>>> import numpy as np
>>> from cotrain.wire.format import WireFormat
>>> wire = WireFormat(n_classes=3, n_public=6, encoding="delta")
>>> first = wire.encode_upload(np.array([0, 1, 2, 0, 1, 2]))  # no reference: a full message
>>> len(first), wire.decode_upload(first).tolist()  # 14-byte header + 6 labels at 2 bits
(16, [0, 1, 2, 0, 1, 2])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from cotrain.wire.compact import QuantizedSoftLabels
from cotrain.wire.delta import DeltaHardLabels
from cotrain.wire.endpoints import UploadReceiver, UploadSender
from cotrain.wire.messages import HardLabels, Message, SoftLabels
from cotrain.wire.packing import (
    HEADER,
    MAX_U32,
    as_buffer,
    check_choice,
    check_probs,
    message_class,
    row_sum_problem,
)
from learners.checks import check_int

# UploadReceiver and UploadSender are defined in cotrain.wire.endpoints; importable here too
__all__ = ["MalformedMessage", "WireFormat"]

_SHARES = ("hard", "soft")
_ENCODINGS = ("packed", "delta")
_SOFT_DTYPES = ("float32", "float16")
_CONFIG_KEYS = {
    "n_classes": "n-classes",
    "n_public": "n-public",
    "share": "share",
    "encoding": "encoding",
    "soft_dtype": "soft-dtype",
    "soft_bits": "soft-bits",
    "abstain": "abstain",
}


class MalformedMessage(ValueError):
    """A message that does not decode, or does not fit the federation's wire format.

    Raised by the decoding methods of :class:`WireFormat` and
    :class:`~cotrain.wire.endpoints.UploadReceiver`; the
    message says what is wrong. A malformed upload is a failure of the client that sent it.

    Examples
    --------
    >>> from cotrain.wire.format import MalformedMessage, WireFormat
    >>> try:
    ...     WireFormat(n_classes=2, n_public=3).decode_upload(b"short")
    ... except MalformedMessage as err:
    ...     print(err)
    upload does not decode: truncated message: 5 bytes, shorter than the 10-byte header
    """


@dataclass(frozen=True)
class WireFormat:
    """How labels travel in a federation; encodes and decodes uploads and broadcasts.

    Parameters
    ----------
    n_classes : int
        Size of the global label space, ``1 .. 2**32 - 2``.
    n_public : int
        Rows of the public pool: the length of every upload and broadcast.
    share : {"hard", "soft"}, default="hard"
        Clients upload hard class codes or soft probabilities.
    encoding : {"packed", "delta"}, default="packed"
        Hard uploads bit-packed, or delta-coded against the client's previous upload (see
        the module docstring); with "delta" a hard consensus broadcast is delta-coded too
        (:mod:`cotrain.wire.broadcast`). Soft labels ignore it.
    soft_dtype : {"float32", "float16"}, default="float32"
        Precision of soft labels (uploads and soft broadcasts) when ``soft_bits`` is None.
    soft_bits : int or None, default=None
        Quantise soft labels (uploads and soft broadcasts) to this many bits per class,
        1..16, instead of sending floats.
    abstain : bool, default=False
        Hard uploads may abstain on an example (code -1: the client releases no label for
        it, e.g. per-site Confident-GNMax); otherwise an upload labels every example.

    Raises
    ------
    TypeError
        If a field has the wrong type (the message names it).
    ValueError
        If a field has a wrong value (the message names it).

    See Also
    --------
    cotrain.wire.messages.HardLabels, cotrain.wire.messages.SoftLabels,
    cotrain.wire.compact.QuantizedSoftLabels, cotrain.wire.delta.DeltaHardLabels

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.format import WireFormat
    >>> wire = WireFormat(n_classes=3, n_public=4)
    >>> data = wire.encode_upload(np.array([0, 2, 1, 1]))
    >>> len(data)  # 10-byte header + 4 labels at 2 bits
    11
    >>> wire.decode_upload(data).tolist()
    [0, 2, 1, 1]
    >>> soft = WireFormat(n_classes=3, n_public=4, share="soft", soft_bits=4)
    >>> len(soft.encode_upload(np.full((4, 3), 1 / 3)))  # 10 + 4 * 3 * 4 bits
    16
    >>> WireFormat.from_config(soft.to_config()) == soft
    True
    """

    n_classes: int
    n_public: int
    share: str = "hard"
    encoding: str = "packed"
    soft_dtype: str = "float32"
    soft_bits: int | None = None
    abstain: bool = False

    def __post_init__(self) -> None:
        # a hard broadcast reserves one symbol for abstain: n_classes + 1 must fit the header
        set_field = object.__setattr__
        set_field(self, "n_classes", check_int(self.n_classes, "n_classes", 1, MAX_U32 - 1))
        set_field(self, "n_public", check_int(self.n_public, "n_public", 0, MAX_U32))
        check_choice(self.share, "share", _SHARES)
        check_choice(self.encoding, "encoding", _ENCODINGS)
        check_choice(self.soft_dtype, "soft_dtype", _SOFT_DTYPES)
        if self.soft_bits is not None:
            set_field(self, "soft_bits", check_int(self.soft_bits, "soft_bits", 1, 16))
        if not isinstance(self.abstain, (bool, np.bool_)):
            raise TypeError(f"abstain must be True or False, got {self.abstain!r}")
        set_field(self, "abstain", bool(self.abstain))
        if self.abstain and self.share != "hard":
            raise ValueError("abstain=True needs share='hard' (a soft upload labels every row)")

    # -- what travels ----------------------------------------------------------------------

    @property
    def delta(self) -> bool:
        """Whether uploads are delta-coded (``share="hard"`` and ``encoding="delta"``).

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> WireFormat(2, 5, share="soft", encoding="delta").delta
        False
        """
        return self.share == "hard" and self.encoding == "delta"

    @property
    def upload_type(self) -> type[Message]:
        """The message class of an upload in this format.

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> WireFormat(2, 5, share="soft", soft_bits=8).upload_type.__name__
        'QuantizedSoftLabels'
        """
        if self.share == "hard":
            return DeltaHardLabels if self.encoding == "delta" else HardLabels
        return SoftLabels if self.soft_bits is None else QuantizedSoftLabels

    @property
    def soft_type(self) -> type[Message]:
        """The message class of soft labels in this format (uploads and soft broadcasts).

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> WireFormat(2, 5).soft_type.__name__
        'SoftLabels'
        """
        return SoftLabels if self.soft_bits is None else QuantizedSoftLabels

    # -- uploads ---------------------------------------------------------------------------

    def encode_upload(self, labels: Any, reference: Any = None) -> bytes:
        """Encode a client's labels on the public pool.

        Parameters
        ----------
        labels : array-like
            ``share="hard"``: integer class codes ``(n_public,)`` in ``0 .. n_classes - 1``;
            ``share="soft"``: probabilities ``(n_public, n_classes)``, finite, non-negative,
            rows summing to one (quantisation normalises rows itself).
        reference : array-like of int, shape (n_public,), or None
            With ``encoding="delta"`` and hard labels, the labels the server holds for this
            client (its last decoded upload): the message carries the changes since them.
            ``None`` sends a full delta message. Ignored by every other format.

        Returns
        -------
        bytes
            A ``HardLabels``, ``DeltaHardLabels``, ``SoftLabels`` or ``QuantizedSoftLabels``
            message (see the module docstring).

        Raises
        ------
        TypeError, ValueError
            If ``labels`` or ``reference`` do not fit the format (the message names which).

        Examples
        --------
        >>> import numpy as np
        >>> from cotrain.wire.format import WireFormat
        >>> wire = WireFormat(n_classes=2, n_public=3, share="soft", soft_dtype="float16")
        >>> len(wire.encode_upload(np.array([[0.5, 0.5], [1.0, 0.0], [0.25, 0.75]])))
        22
        """
        if self.share == "hard":
            codes = self.check_codes(labels, "labels", abstain=self.abstain)
            if self.encoding == "delta":
                if reference is not None:
                    reference = self.check_codes(reference, "reference", abstain=self.abstain)
                return DeltaHardLabels.encode(
                    codes, reference, self.n_classes, allow_abstain=self.abstain
                )
            return HardLabels(codes, self.n_classes, allow_abstain=self.abstain).to_bytes()
        probs = np.asarray(labels)
        if probs.ndim != 2 or probs.shape != (self.n_public, self.n_classes):
            raise ValueError(
                f"labels must be probabilities of shape ({self.n_public}, {self.n_classes}), "
                f"got an array of shape {probs.shape}"
            )
        if probs.dtype.kind not in "biuf":
            raise TypeError(f"labels must be real numbers, got dtype {probs.dtype}")
        problem = check_probs(probs)
        if problem:
            raise ValueError(f"labels {problem}")
        if probs.size and np.isnan(probs).any():
            raise ValueError("labels must not abstain: an upload has no NaN rows")
        if self.soft_bits is not None:
            return QuantizedSoftLabels(probs, bits=self.soft_bits).to_bytes()
        message = SoftLabels(probs, dtype=self.soft_dtype)
        problem = row_sum_problem(message.probs, self.n_classes)
        if problem:
            raise ValueError(f"labels {problem}")
        return message.to_bytes()

    def decode_upload(self, data: Any, reference: Any = None) -> NDArray[Any]:
        """The labels carried by a client's upload, checked against the format.

        Parameters
        ----------
        data : bytes, bytearray or memoryview
            The upload, as :meth:`encode_upload` produced it.
        reference : array-like of int, shape (n_public,), or None
            With ``encoding="delta"``: the labels the sender coded against (the receiver's
            last decoded upload of this client). A full delta message needs none.

        Returns
        -------
        ndarray
            Hard codes ``(n_public,)`` as ``int64``; soft probabilities
            ``(n_public, n_classes)`` as ``float32``/``float16`` (``SoftLabels``, the wire
            precision) or ``float64`` (``QuantizedSoftLabels``, ``q / L``).

        Raises
        ------
        MalformedMessage
            If ``data`` is not bytes-like or does not decode; if it is not the kind of
            message this format uploads (a delta format takes only ``DeltaHardLabels``, a
            packed one only ``HardLabels``; a soft format only its own precision); if its
            number of classes or of labels differs from the format's; if it abstains; if
            its probabilities are not finite rows summing to one (within the float16
            rounding error); or, for a delta message, if the reference is missing or not
            the sender's (CRC mismatch).
        ValueError
            If ``reference`` itself is not ``(n_public,)`` codes (a bug of the caller, not
            of the message).

        Examples
        --------
        >>> import numpy as np
        >>> from cotrain.wire.format import MalformedMessage, WireFormat
        >>> wire = WireFormat(n_classes=4, n_public=3)
        >>> wire.decode_upload(wire.encode_upload([3, 0, 1])).tolist()
        [3, 0, 1]
        >>> try:
        ...     WireFormat(n_classes=4, n_public=2).decode_upload(wire.encode_upload([3, 0, 1]))
        ... except MalformedMessage as err:
        ...     print(err)
        upload has 3 labels, expected n_public=2
        """
        if self.delta and reference is not None:
            reference = self.check_codes(reference, "reference", abstain=self.abstain)
        message = self._parse(data, "upload", (self.upload_type,))
        if isinstance(message, DeltaHardLabels):
            try:
                labels = message.apply(reference)
            except ValueError as err:
                if reference is None and message.layout != "full":
                    raise MalformedMessage(
                        "delta upload needs the previous upload of this client, and the "
                        "receiver holds none"
                    ) from err
                raise MalformedMessage(f"delta upload does not decode: {err}") from err
        elif isinstance(message, HardLabels):
            labels = message.codes
        else:
            assert isinstance(message, (SoftLabels, QuantizedSoftLabels))  # _parse checked it
            probs = message.probs
            if probs.size and np.isnan(probs).any():
                where = int(np.flatnonzero(np.isnan(probs).any(axis=1))[0])
                raise MalformedMessage(
                    f"upload probabilities must be finite: row {where} is NaN (an upload labels "
                    "every example)"
                )
            problem = row_sum_problem(probs, self.n_classes)
            if problem:
                raise MalformedMessage(f"upload probabilities {problem}")
            return probs
        if labels.size and int(labels.min()) < 0 and not self.abstain:
            where = int(np.flatnonzero(labels < 0)[0])
            raise MalformedMessage(
                f"upload abstains (code -1 at position {where}); an upload labels every example"
            )
        return labels

    # -- broadcasts ------------------------------------------------------------------------

    def encode_broadcast(self, pseudo: Any) -> bytes:
        """Encode the consensus the server sends to the clients of the next round.

        Parameters
        ----------
        pseudo : array-like
            Hard pseudo-labels ``(n_public,)`` with ``-1`` where the consensus abstains, or
            soft targets ``(n_public, n_classes)`` with all-NaN rows where it abstains.

        Returns
        -------
        bytes
            ``HardLabels`` (abstain allowed) for codes; ``SoftLabels(soft_dtype)``, or
            ``QuantizedSoftLabels(soft_bits)`` when ``soft_bits`` is set (an abstaining row
            is sent as the reserved all-zero row), for soft targets.

        Raises
        ------
        TypeError, ValueError
            If ``pseudo`` does not fit the format (the message names it).

        Examples
        --------
        >>> import numpy as np
        >>> from cotrain.wire.format import WireFormat
        >>> wire = WireFormat(n_classes=3, n_public=4)
        >>> data = wire.encode_broadcast(np.array([0, -1, 2, 1]))
        >>> len(data), wire.decode_broadcast(data).tolist()  # 3 classes + abstain: 2 bits
        (11, [0, -1, 2, 1])
        """
        arr = np.asarray(pseudo)
        if arr.ndim not in (1, 2) or arr.shape[0] != self.n_public:
            raise ValueError(
                f"pseudo must be codes of shape ({self.n_public},) or targets of shape "
                f"({self.n_public}, {self.n_classes}), got an array of shape {arr.shape}"
            )
        if arr.ndim == 1:
            if arr.size and (arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer)):
                raise TypeError(f"pseudo codes must be integers, got dtype {arr.dtype}")
            return HardLabels(arr, self.n_classes, allow_abstain=True).to_bytes()
        if arr.shape[1] != self.n_classes:
            raise ValueError(
                f"pseudo has {arr.shape[1]} columns, expected n_classes={self.n_classes}"
            )
        if self.soft_bits is not None:
            return QuantizedSoftLabels(arr, bits=self.soft_bits).to_bytes()
        return SoftLabels(arr, dtype=self.soft_dtype).to_bytes()

    def decode_broadcast(self, data: Any) -> NDArray[Any] | None:
        """The consensus carried by a broadcast (``None``: no consensus yet).

        Parameters
        ----------
        data : bytes, bytearray, memoryview or None
            A broadcast from :meth:`encode_broadcast`.

        Returns
        -------
        ndarray or None
            Codes ``(n_public,)`` (``int64``, ``-1`` = abstain) or soft targets
            ``(n_public, n_classes)`` (all-NaN rows = abstain), as the server's
            :meth:`encode_broadcast` sent them.

        Raises
        ------
        MalformedMessage
            If ``data`` does not decode, is not a kind this format broadcasts, or its
            number of classes or of rows differs from the format's.

        Examples
        --------
        >>> import numpy as np
        >>> from cotrain.wire.format import WireFormat
        >>> wire = WireFormat(n_classes=2, n_public=2, soft_bits=2)
        >>> wire.decode_broadcast(None) is None
        True
        >>> wire.decode_broadcast(wire.encode_broadcast([[1.0, 0.0], [np.nan] * 2])).tolist()
        [[1.0, 0.0], [nan, nan]]
        """
        if data is None:
            return None
        message = self._parse(data, "broadcast", (HardLabels, self.soft_type))
        if isinstance(message, HardLabels):
            return message.codes
        assert isinstance(message, (SoftLabels, QuantizedSoftLabels))  # _parse checked it
        return message.probs

    # -- delta state -----------------------------------------------------------------------

    def sender(self) -> UploadSender:
        """A client's side of this format: encodes its uploads, keeps its last one.

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> WireFormat(2, 3, encoding="delta").sender().state_dict()
        {'round': 0, 'codes': None}
        """
        return UploadSender(self)

    def receiver(self) -> UploadReceiver:
        """The server's side of this format for one client: decodes its uploads.

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> WireFormat(2, 3, encoding="delta").receiver().ref_round
        0
        """
        return UploadReceiver(self)

    # -- configuration ---------------------------------------------------------------------

    def to_config(self) -> dict[str, int | str]:
        """The format as a flat config (e.g. a Flower ``ConfigRecord``).

        Keys are kebab-case; ``soft-bits`` is 0 for None (TOML and Flower have no None).

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> WireFormat(n_classes=10, n_public=500, share="soft").to_config()
        {'n-classes': 10, 'n-public': 500, 'share': 'soft', 'encoding': 'packed', 'soft-dtype': 'float32', 'soft-bits': 0, 'abstain': False}
        """  # noqa: E501
        return {
            "n-classes": self.n_classes,
            "n-public": self.n_public,
            "share": self.share,
            "encoding": self.encoding,
            "soft-dtype": self.soft_dtype,
            "soft-bits": 0 if self.soft_bits is None else self.soft_bits,
            "abstain": self.abstain,
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> WireFormat:
        """The format of a :meth:`to_config` dict (other keys are ignored).

        ``n-classes`` and ``n-public`` are required; the other keys default as in the
        constructor, and ``soft-bits`` 0 means None.

        Parameters
        ----------
        config : mapping
            A flat config, such as a Flower ``ConfigRecord``.

        Returns
        -------
        WireFormat

        Raises
        ------
        TypeError
            If ``config`` is not a mapping, or a value has the wrong type.
        ValueError
            If a required key is missing or a value is wrong (the message names the key).

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> WireFormat.from_config({"n-classes": 3, "n-public": 8, "soft-bits": 0, "seed": 1})
        WireFormat(n_classes=3, n_public=8, share='hard', encoding='packed', soft_dtype='float32', soft_bits=None, abstain=False)
        """  # noqa: E501
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping, got {type(config).__name__}")
        kwargs: dict[str, Any] = {}
        for name, key in _CONFIG_KEYS.items():
            if key in config:
                kwargs[name] = config[key]
            elif name in ("n_classes", "n_public"):
                raise ValueError(f"config has no {key!r} key, which the wire format needs")
        if kwargs.get("soft_bits") == 0 and not isinstance(kwargs["soft_bits"], bool):
            kwargs["soft_bits"] = None
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as err:
            raise type(err)(f"wire-format config: {err} (keys are kebab-case)") from err

    # -- checks ----------------------------------------------------------------------------

    def check_codes(self, value: Any, name: str, *, abstain: bool = False) -> NDArray[np.int64]:
        """``value`` as ``(n_public,)`` int64 class codes in ``0 .. n_classes - 1`` (and -1
        with ``abstain``).

        Parameters
        ----------
        value : array-like
            The codes to check.
        name : str
            What to call ``value`` in an error message.

        Returns
        -------
        ndarray of int64, shape (n_public,)

        Raises
        ------
        TypeError
            If ``value`` is not integers.
        ValueError
            If ``value`` has another shape or a code outside the label space.

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> WireFormat(n_classes=3, n_public=2).check_codes([2, 0], "labels").tolist()
        [2, 0]
        """
        arr = np.asarray(value)
        if arr.ndim != 1 or arr.shape[0] != self.n_public:
            raise ValueError(
                f"{name} must be class codes of shape ({self.n_public},), got an array of "
                f"shape {arr.shape}"
            )
        if arr.size == 0:
            return np.empty(0, dtype=np.int64)
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{name} must be integer class codes, got dtype {arr.dtype}")
        low, high = int(arr.min()), int(arr.max())
        if low < (-1 if abstain else 0) or high >= self.n_classes:
            allowed = f"{'-1 or ' if abstain else ''}0..{self.n_classes - 1}"
            raise ValueError(
                f"{name} must be class codes in {allowed}, got values in [{low}, {high}]"
            )
        return arr.astype(np.int64, copy=False)

    def _parse(self, data: Any, what: str, kinds: tuple[type[Message], ...]) -> Message:
        """Decode ``data`` into one of ``kinds`` that fits the label space and pool."""
        try:
            view = as_buffer(data)
        except (TypeError, ValueError) as err:
            raise MalformedMessage(f"{what} does not decode: {err}") from err
        kind, _, n, n_classes = HEADER.unpack_from(view)
        cls = message_class(kind)
        if cls is None:
            raise MalformedMessage(f"{what} does not decode: unknown message kind {kind}")
        if cls not in kinds:
            expected = " or ".join(k.__name__ for k in kinds)
            raise MalformedMessage(
                f"{what} is a {cls.__name__} message (kind {kind}), but this format "
                f"({self.describe()}) expects {expected}"
            )
        if n_classes != self.n_classes:
            raise MalformedMessage(
                f"{what} has n_classes={n_classes}, expected n_classes={self.n_classes}"
            )
        if n != self.n_public:
            noun = "labels" if cls in (HardLabels, DeltaHardLabels) else "rows"
            raise MalformedMessage(f"{what} has {n} {noun}, expected n_public={self.n_public}")
        try:
            message = Message.from_bytes(view)
        except ValueError as err:
            raise MalformedMessage(f"{what} does not decode: {err}") from err
        if isinstance(message, SoftLabels) and message.dtype != self.soft_dtype:
            raise MalformedMessage(
                f"{what} is {message.dtype} soft labels, but this format sends {self.soft_dtype}"
            )
        if isinstance(message, QuantizedSoftLabels) and message.bits != self.soft_bits:
            raise MalformedMessage(
                f"{what} is quantised to {message.bits} bits per class, but this format "
                f"uses soft_bits={self.soft_bits}"
            )
        return message

    def describe(self) -> str:
        """The choices of this format that decide its message kinds, for error messages.

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> WireFormat(n_classes=3, n_public=2, share="soft", soft_bits=4).describe()
        "share='soft', soft_bits=4"
        """
        if self.share == "hard":
            abstains = ", abstain=True" if self.abstain else ""
            return f"share='hard', encoding={self.encoding!r}{abstains}"
        if self.soft_bits is not None:
            return f"share='soft', soft_bits={self.soft_bits}"
        return f"share='soft', soft_dtype={self.soft_dtype!r}"
