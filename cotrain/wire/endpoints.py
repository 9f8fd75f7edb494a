"""The two ends of an upload channel: the per-client delta state of the wire format.

A delta-coded upload carries only the labels that changed since a reference, the previous
upload of the same client, so both sides must agree on that reference. Each client holds an
:class:`UploadSender` and the server one :class:`UploadReceiver` per client, both built from
the federation's :class:`~cotrain.wire.format.WireFormat`
(:meth:`~cotrain.wire.format.WireFormat.sender`,
:meth:`~cotrain.wire.format.WireFormat.receiver`):

1. the server tells the client, with each round's request, ``ref_round``: the round of this
   client's last upload that it *decoded* (0: none), :attr:`UploadReceiver.ref_round`;
2. the client's sender delta-codes against its last upload if that upload was sent in
   ``ref_round``, and sends a full message otherwise (an upload lost, refused, or sent in a
   round the server gave up on is never used as a reference); it then remembers this upload;
3. the receiver decodes against the last upload it decoded and, only on success, remembers it.

A :class:`~cotrain.wire.delta.DeltaHardLabels` message carries a CRC of the reconstructed
labels, so a receiver whose reference differs from the sender's refuses the message instead
of decoding wrong labels. Both objects have ``state_dict()`` / ``load_state_dict()``. In the
other formats (packed or soft) they only keep the round of the last upload.

This module depends only on what an endpoint needs of its format (:class:`UploadFormat`),
so that :mod:`cotrain.wire.format` can build endpoints without an import cycle.

Examples
--------
>>> import numpy as np
>>> from cotrain.wire.format import WireFormat
>>> wire = WireFormat(n_classes=3, n_public=6, encoding="delta")
>>> sender, receiver = wire.sender(), wire.receiver()
>>> first = sender.encode(np.array([0, 1, 2, 0, 1, 2]), round=1, ref_round=receiver.ref_round)
>>> receiver.decode(first, round=1).tolist(), len(first)  # a full message: 14 + 12 bits
([0, 1, 2, 0, 1, 2], 16)
>>> second = sender.encode(np.array([0, 1, 2, 0, 1, 1]), round=2, ref_round=receiver.ref_round)
>>> receiver.decode(second, round=2).tolist(), receiver.ref_round
([0, 1, 2, 0, 1, 1], 2)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from cotrain.wire.packing import MAX_U32
from learners.checks import check_int

__all__ = ["UploadFormat", "UploadReceiver", "UploadSender"]


@runtime_checkable
class UploadFormat(Protocol):
    """What an upload endpoint needs of its wire format.

    :class:`~cotrain.wire.format.WireFormat` is the implementation; the protocol only keeps
    this module free of it (the format builds its endpoints).

    Examples
    --------
    >>> from cotrain.wire.endpoints import UploadFormat
    >>> from cotrain.wire.format import WireFormat
    >>> isinstance(WireFormat(2, 3), UploadFormat), isinstance({"n-classes": 2}, UploadFormat)
    (True, False)
    """

    @property
    def share(self) -> str:
        """``"hard"`` or ``"soft"``."""
        ...

    @property
    def delta(self) -> bool:
        """Whether uploads are delta-coded."""
        ...

    def describe(self) -> str:
        """The format in a few words, for error messages."""
        ...

    def check_codes(self, value: Any, name: str, *, abstain: bool = False) -> NDArray[np.int64]:
        """``value`` as the format's class codes (or a ``TypeError``/``ValueError``)."""
        ...

    def encode_upload(self, labels: Any, reference: Any = None) -> bytes:
        """Encode one upload, delta-coded against ``reference`` where the format says so."""
        ...

    def decode_upload(self, data: Any, reference: Any = None) -> NDArray[Any]:
        """Decode one upload against ``reference`` (a ``MalformedMessage`` if it is bad)."""
        ...


def _check_state(wire: UploadFormat, state: Any, keeps_codes: bool, side: str) -> tuple[int, Any]:
    """Validate a sender's or receiver's state dict; returns ``(round, codes or None)``."""
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be a dict, got {type(state).__name__}")
    missing = {"round", "codes"} - set(state)
    if missing:
        raise ValueError(f"state is missing {sorted(missing)}")
    round_ = check_int(state["round"], "state['round']", 0, MAX_U32)
    codes = state["codes"]
    if codes is None:
        return round_, None
    if not keeps_codes:
        raise ValueError(
            f"state['codes'] must be None: the {side} of this format "
            f"({wire.describe()}) keeps no labels"
        )
    if round_ == 0:
        raise ValueError("state['codes'] must be None when state['round'] is 0 (no upload yet)")
    abstain = bool(getattr(wire, "abstain", False))
    return round_, wire.check_codes(codes, "state['codes']", abstain=abstain).copy()


class _LastUpload:
    """What both ends of the wire keep of one client: the round of its last upload and,
    where delta coding needs them, that upload's codes."""

    def __init__(self, wire: UploadFormat) -> None:
        if not isinstance(wire, UploadFormat):
            raise TypeError(f"wire must be a WireFormat, got {type(wire).__name__}")
        self.wire = wire
        self._round = 0
        self._codes: NDArray[np.int64] | None = None

    def state_dict(self) -> dict[str, Any]:
        """``{"round": int, "codes": ndarray or None}``: the last upload (copies).

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> WireFormat(3, 2).sender().state_dict()
        {'round': 0, 'codes': None}
        """
        codes = None if self._codes is None else self._codes.copy()
        return {"round": self._round, "codes": codes}


class UploadSender(_LastUpload):
    """A client's side of the wire: encodes its uploads and keeps its last one.

    Keeps the round of its last upload and, for hard labels, that upload's codes: the
    reference of the next delta-coded upload (see the module docstring). Build it with
    :meth:`~cotrain.wire.format.WireFormat.sender`.

    Parameters
    ----------
    wire : WireFormat

    Attributes
    ----------
    wire : WireFormat

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.format import WireFormat
    >>> wire = WireFormat(n_classes=16, n_public=1000, encoding="delta")
    >>> sender = wire.sender()
    >>> codes = np.random.default_rng(0).integers(0, 16, size=1000)
    >>> len(sender.encode(codes, round=1, ref_round=0))  # full: 14 + 1000 labels at 4 bits
    514
    >>> codes[7] = (codes[7] + 1) % 16
    >>> len(sender.encode(codes, round=2, ref_round=1))  # 14 + m (4) + width (1) + 1 + 1
    21
    >>> len(sender.encode(codes, round=3, ref_round=1))  # round 2 was not decoded: full
    514
    """

    def encode(self, labels: Any, round: int, ref_round: int) -> bytes:
        """Encode this round's upload and remember it.

        Parameters
        ----------
        labels : array-like
            As for :meth:`~cotrain.wire.format.WireFormat.encode_upload`.
        round : int
            This round (``>= 1``).
        ref_round : int
            The round of this client's last upload the server decoded (0: none), as the
            server reports it. A delta format codes against the stored upload if it was
            sent in that round, and sends a full message otherwise.

        Returns
        -------
        bytes

        Raises
        ------
        TypeError, ValueError
            If an argument is invalid; the state is then unchanged.

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> sender = WireFormat(n_classes=3, n_public=2).sender()
        >>> len(sender.encode([2, 1], round=1, ref_round=0)), sender.state_dict()["round"]
        (11, 1)
        """
        round = check_int(round, "round", 1, MAX_U32)
        ref_round = check_int(ref_round, "ref_round", 0, MAX_U32)
        reference = None
        if self._codes is not None and ref_round == self._round:
            reference = self._codes
        data = self.wire.encode_upload(labels, reference)
        self._round = round
        if self.wire.share == "hard":
            self._codes = np.array(labels, dtype=np.int64)
        return data

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put back a :meth:`state_dict` (validated against the format).

        Raises
        ------
        TypeError, ValueError
            If ``state`` is not such a dict for this format; the state is then unchanged.

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> sender = WireFormat(3, 2, encoding="delta").sender()
        >>> sender.load_state_dict({"round": 4, "codes": [2, 0]})
        >>> sender.state_dict()["codes"].tolist()
        [2, 0]
        """
        keeps = self.wire.share == "hard"
        self._round, self._codes = _check_state(self.wire, state, keeps, "sender")

    def __repr__(self) -> str:
        return f"UploadSender(round={self._round}, wire={self.wire!r})"


class UploadReceiver(_LastUpload):
    """The server's side of the wire for one client: decodes its uploads.

    Keeps the round of the client's last upload it decoded (:attr:`ref_round`, which the
    server sends the client each round) and, with delta coding, that upload's codes: the
    reference of the next delta message. Build it with
    :meth:`~cotrain.wire.format.WireFormat.receiver`.

    Parameters
    ----------
    wire : WireFormat

    Attributes
    ----------
    wire : WireFormat

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.format import MalformedMessage, WireFormat
    >>> wire = WireFormat(n_classes=2, n_public=3, encoding="delta")
    >>> sender, receiver = wire.sender(), wire.receiver()
    >>> receiver.decode(sender.encode([0, 1, 1], 1, receiver.ref_round), 1).tolist()
    [0, 1, 1]
    >>> try:
    ...     receiver.decode(b"garbage...", 2)
    ... except MalformedMessage:
    ...     print("refused; ref_round stays", receiver.ref_round)
    refused; ref_round stays 1
    """

    @property
    def ref_round(self) -> int:
        """Round of the last upload decoded from this client (0: none yet)."""
        return self._round

    def decode(self, data: Any, round: int) -> NDArray[Any]:
        """Decode this round's upload against the stored reference and remember it.

        Parameters
        ----------
        data : bytes, bytearray or memoryview
            The client's upload.
        round : int
            The round it was sent in (``>= 1``).

        Returns
        -------
        ndarray
            As :meth:`~cotrain.wire.format.WireFormat.decode_upload`.

        Raises
        ------
        MalformedMessage
            If the upload is malformed (see
            :meth:`~cotrain.wire.format.WireFormat.decode_upload`); the state is then
            unchanged.
        TypeError, ValueError
            If ``round`` is invalid.

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> wire = WireFormat(n_classes=3, n_public=2)
        >>> receiver = wire.receiver()
        >>> receiver.decode(wire.encode_upload([2, 1]), round=5).tolist(), receiver.ref_round
        ([2, 1], 5)
        """
        round = check_int(round, "round", 1, MAX_U32)
        labels = self.wire.decode_upload(data, self._codes)
        self._round = round
        if self.wire.delta:
            self._codes = labels.copy()
        return labels

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put back a :meth:`state_dict` (validated against the format).

        With delta coding, a state with ``round > 0`` must carry the codes: the client
        will delta-code against that round.

        Raises
        ------
        TypeError, ValueError
            If ``state`` is not such a dict for this format; the state is then unchanged.

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> receiver = WireFormat(3, 2).receiver()
        >>> receiver.load_state_dict({"round": 2, "codes": None})
        >>> receiver.ref_round
        2
        """
        round_, codes = _check_state(self.wire, state, self.wire.delta, "receiver")
        if self.wire.delta and round_ > 0 and codes is None:
            raise ValueError("state['codes'] is needed with delta coding once state['round'] > 0")
        self._round, self._codes = round_, codes

    def __repr__(self) -> str:
        return f"UploadReceiver(ref_round={self._round}, wire={self.wire!r})"
