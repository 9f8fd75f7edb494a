"""Delta-coded broadcasts: the server sends each client only what changed since the
consensus that client last acknowledged.

With ``encoding="delta"`` and a hard consensus, the broadcast of round ``t`` (the
consensus formed in round ``t - 1``, its *version*) is coded per client against the
version that client last acknowledged, as a :class:`~cotrain.wire.delta.DeltaHardLabels`
message (abstentions allowed). Both sides keep a small state:

1. every client keeps the consensus versions it decoded (:class:`BroadcastDecoder`) and
   reports in its upload the newest one it holds (:attr:`BroadcastDecoder.version`);
2. the server (:class:`BroadcastEncoder`) records that report as the client's
   acknowledgement, and keeps the codes of every version some client acknowledged;
3. the next broadcast to that client is a delta against its acknowledged version (its
   ``ref``), or a full message when it has none, when its version is gone, or when the
   full message is shorter. The client decodes against the version ``ref`` and drops the
   versions before it (the server will never refer to them again).

A client that does not hold ``ref`` (a site that lost its state) cannot decode the delta:
:meth:`BroadcastDecoder.decode` raises :class:`MissingReference`, the client trains on its
own data alone that round and reports version 0, so the server sends it a full message
next time. A ``DeltaHardLabels`` message carries a CRC of the labels it reconstructs, so a
wrong reference is refused, never decoded into wrong labels. Soft broadcasts are always
sent in full.

Examples
--------
>>> import numpy as np
>>> from cotrain.wire.format import WireFormat
>>> wire = WireFormat(n_classes=3, n_public=100, encoding="delta")
>>> server, client = BroadcastEncoder(wire, n_clients=1), BroadcastDecoder(wire)
>>> first = np.arange(100) % 3
>>> first[7] = -1  # the consensus abstains there
>>> server.publish(1, first)
>>> message = server.message_for(0)  # client 0 holds nothing yet: a full message
>>> message.ref, len(message.data)  # 10-byte header + 100 labels at 2 bits
(0, 35)
>>> client.decode(message, version=1)[:8].tolist(), client.version
([0, 1, 2, 0, 1, 2, 0, -1], 1)
>>> server.acknowledge(0, client.version)
>>> second = first.copy()
>>> second[50] = 0
>>> server.publish(2, second)
>>> message = server.message_for(0)  # one label changed since version 1
>>> message.ref, len(message.data)  # 14 + m (4) + width (1) + gap (1) + new code (1)
(1, 21)
>>> bool((client.decode(message, version=2) == second).all())
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from cotrain.wire.delta import DeltaHardLabels
from cotrain.wire.format import MalformedMessage, WireFormat
from cotrain.wire.messages import decode

__all__ = ["BroadcastDecoder", "BroadcastEncoder", "Downlink", "MissingReference"]


class MissingReference(MalformedMessage):
    """A delta broadcast refers to a consensus version the client does not hold."""


@dataclass(frozen=True)
class Downlink:
    """What the server sends one client in a round: the broadcast, and the reference of
    the client's next upload.

    Attributes
    ----------
    data : bytes or None
        The encoded consensus (None before the first consensus).
    ref : int
        The consensus version ``data`` is delta-coded against (0: a full message).
    ref_round : int
        The round of this client's last upload the server decoded (0: none): what a
        delta-coded upload is coded against. It is not counted in :attr:`nbytes`.
    """

    data: bytes | None
    ref: int = 0
    ref_round: int = 0

    @property
    def nbytes(self) -> int:
        """Size of the message (0 when there is none)."""
        return 0 if self.data is None else len(self.data)


class BroadcastEncoder:
    """The server's side: the current broadcast and what each client acknowledged.

    Parameters
    ----------
    wire : WireFormat
        The federation's format; broadcasts are delta-coded when ``wire.delta``.
    n_clients : int
        Number of clients.

    Examples
    --------
    >>> from cotrain.wire.format import WireFormat
    >>> encoder = BroadcastEncoder(WireFormat(2, 4), n_clients=2)
    >>> encoder.message_for(1)
    Downlink(data=None, ref=0, ref_round=0)
    """

    def __init__(self, wire: WireFormat, n_clients: int) -> None:
        self.wire = wire
        self.version = 0
        self.full: bytes | None = None
        self.acked = [0] * n_clients
        #: clustered co-training: client -> index of its group's consensus (None: one
        #: consensus for all), and each group's full message
        self.member: NDArray[np.int64] | None = None
        self.group_full: list[bytes] = []
        #: version -> (client -> group, or None) and each group's hard codes, for every
        #: version a client acknowledged (delta only)
        self._codes: dict[int, tuple[NDArray[np.int64] | None, list[NDArray[np.int64]]]] = {}

    def publish(
        self,
        version: int,
        pseudo: NDArray[Any],
        groups: tuple[NDArray[Any], list[NDArray[Any]]] | None = None,
    ) -> None:
        """Set the consensus of round ``version`` (codes with -1, or soft targets).

        ``groups`` (clustered co-training): ``(member, consensus)``, client ``i`` receiving
        ``consensus[member[i]]``; ``pseudo`` is then the federation's headline consensus
        (:attr:`full`, e.g. the largest cluster's), which no client is sent for itself.

        Examples
        --------
        >>> from cotrain.wire.format import WireFormat
        >>> encoder = BroadcastEncoder(WireFormat(2, 3), n_clients=2)
        >>> a, b = np.array([0, 1, 1]), np.array([1, 0, 0])
        >>> encoder.publish(1, a, groups=(np.array([0, 1]), [a, b]))
        >>> encoder.message_for(1).data == encoder.wire.encode_broadcast(b)
        True
        """
        self.version = int(version)
        self.full = self.wire.encode_broadcast(pseudo)
        member, per_group = (None, [pseudo]) if groups is None else groups
        self.member = None if member is None else np.asarray(member, dtype=np.int64)
        self.group_full = [
            self.full if p is pseudo else self.wire.encode_broadcast(p) for p in per_group
        ]
        per_group = [np.asarray(p) for p in per_group]
        if self.wire.delta and all(p.ndim == 1 for p in per_group):
            self._codes[self.version] = (self.member, [p.astype(np.int64) for p in per_group])
        self._prune()

    def _full_for(self, client_id: int) -> bytes | None:
        """The full message of the consensus this client is sent."""
        if self.member is None:
            return self.full
        return self.group_full[int(self.member[client_id])]

    def _codes_for(self, version: int, client_id: int) -> NDArray[np.int64]:
        member, codes = self._codes[version]
        return codes[0 if member is None else int(member[client_id])]

    def message_for(self, client_id: int) -> Downlink:
        """The broadcast for one client: a delta against its acknowledged version when
        that is shorter than the full message, else the full message (of its cluster's
        consensus, in clustered co-training)."""
        full = self._full_for(client_id)
        ref = self.acked[client_id]
        if full is None or ref <= 0 or ref not in self._codes:
            return Downlink(full)
        if self.version not in self._codes:  # a soft consensus: always in full
            return Downlink(full)
        delta = DeltaHardLabels.encode(
            self._codes_for(self.version, client_id),
            self._codes_for(ref, client_id),
            self.wire.n_classes,
            allow_abstain=True,
        )
        return Downlink(delta, ref) if len(delta) < len(full) else Downlink(full)

    def acknowledge(self, client_id: int, version: int) -> None:
        """Record the newest consensus version a client reports holding (0: none)."""
        version = int(version)
        self.acked[client_id] = version if version in self._codes else 0
        self._prune()

    def _prune(self) -> None:
        keep = set(self.acked) | {self.version}
        self._codes = {v: c for v, c in self._codes.items() if v in keep}

    def state_dict(self) -> dict[str, Any]:
        """The acknowledgements and the codes they refer to (for checkpoints)."""
        versions = sorted(self._codes)
        state = {
            "version": self.version,
            "acked": list(self.acked),
            "versions": versions,
            "codes": [self._codes[v][1][0] for v in versions],
        }
        if self.member is not None or any(self._codes[v][0] is not None for v in versions):
            state["groups"] = {  # clustered co-training: one consensus per cluster
                "member": self.member,
                "full": [np.frombuffer(b, dtype=np.uint8) for b in self.group_full],
                "members": [self._codes[v][0] for v in versions],
                "codes": [self._codes[v][1] for v in versions],
            }
        return state

    def load_state_dict(self, state: Mapping[str, Any], full: bytes | None) -> None:
        """Put a :meth:`state_dict` back, with the full broadcast it goes with."""
        self.version, self.full = int(state["version"]), full
        self.acked = [int(v) for v in state["acked"]]
        groups = state.get("groups")
        if groups is None:
            self.member, self.group_full = None, [] if full is None else [full]
            self._codes = {
                int(v): (None, [np.asarray(c, dtype=np.int64)])
                for v, c in zip(state["versions"], state["codes"], strict=True)
            }
            return
        member = groups["member"]
        self.member = None if member is None else np.asarray(member, dtype=np.int64)
        self.group_full = [np.asarray(b, dtype=np.uint8).tobytes() for b in groups["full"]]
        self._codes = {
            int(v): (
                None if m is None else np.asarray(m, dtype=np.int64),
                [np.asarray(c, dtype=np.int64) for c in codes],
            )
            for v, m, codes in zip(
                state["versions"], groups["members"], groups["codes"], strict=True
            )
        }


class BroadcastDecoder:
    """A client's side: the consensus versions it decoded, for the next delta.

    Parameters
    ----------
    wire : WireFormat
        The federation's format.

    Examples
    --------
    >>> from cotrain.wire.format import WireFormat
    >>> decoder = BroadcastDecoder(WireFormat(2, 3, encoding="delta"))
    >>> decoder.decode(Downlink(None), version=0) is None, decoder.version
    (True, 0)
    """

    def __init__(self, wire: WireFormat) -> None:
        self.wire = wire
        self._codes: dict[int, NDArray[np.int64]] = {}

    @property
    def version(self) -> int:
        """The newest consensus version this client holds (0: none)."""
        return max(self._codes, default=0)

    def decode(self, downlink: Downlink, version: int) -> NDArray[Any] | None:
        """The consensus carried by ``downlink`` (the consensus of round ``version``).

        Raises
        ------
        MissingReference
            If the message is a delta against a version this client does not hold.
        MalformedMessage
            If it does not decode (wrong kind, size, or a CRC mismatch).
        """
        if downlink.data is None:
            return None
        pseudo: NDArray[Any] | None
        if downlink.ref > 0:
            reference = self._codes.get(downlink.ref)
            if reference is None:
                raise MissingReference(
                    f"the broadcast is a delta against consensus version {downlink.ref}, "
                    f"which this client does not hold (it holds {sorted(self._codes)})"
                )
            message = self._parse_delta(downlink.data)
            try:
                pseudo = message.apply(reference)
            except ValueError as err:
                raise MalformedMessage(f"delta broadcast does not decode: {err}") from err
        else:
            pseudo = self.wire.decode_broadcast(downlink.data)
        if self.wire.delta and pseudo is not None and pseudo.ndim == 1:
            self._codes = {v: c for v, c in self._codes.items() if v >= downlink.ref}
            self._codes[int(version)] = pseudo
        return pseudo

    def _parse_delta(self, data: bytes) -> DeltaHardLabels:
        """``data`` as a delta broadcast of this format (not yet applied)."""
        try:
            message = decode(data)
        except ValueError as err:
            raise MalformedMessage(f"broadcast does not decode: {err}") from err
        if not isinstance(message, DeltaHardLabels):
            raise MalformedMessage(
                f"a broadcast with a reference must be a DeltaHardLabels message, got "
                f"{type(message).__name__}"
            )
        if message.n_classes != self.wire.n_classes or message.n != self.wire.n_public:
            raise MalformedMessage(
                f"delta broadcast has {message.n_classes} classes and {message.n} labels, "
                f"expected {self.wire.n_classes} and {self.wire.n_public}"
            )
        return message

    def forget(self) -> None:
        """Drop every version (a client whose state is gone)."""
        self._codes = {}

    def state_dict(self) -> dict[str, Any]:
        """The versions held (for checkpoints and a site's state)."""
        versions = sorted(self._codes)
        return {"versions": versions, "codes": [self._codes[v] for v in versions]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        self._codes = {
            int(v): np.asarray(c, dtype=np.int64)
            for v, c in zip(state["versions"], state["codes"], strict=True)
        }
