"""The wire format: what travels between clients and the server, byte for byte.

- :mod:`~cotrain.wire.messages`: the message kinds (packed hard labels, soft labels) and
  :func:`~cotrain.wire.messages.decode`;
- :mod:`~cotrain.wire.compact`: quantised soft labels, a compact kind;
- :mod:`~cotrain.wire.delta`: delta-coded hard labels, the other compact kind;
- :mod:`~cotrain.wire.packing`: bit packing and the registry of message kinds;
- :mod:`~cotrain.wire.format`: :class:`WireFormat`, the one object that encodes and decodes
  uploads and broadcasts;
- :mod:`~cotrain.wire.endpoints`: :class:`UploadSender` and :class:`UploadReceiver`, the
  per-client delta state on each side, built by the format;
- :mod:`~cotrain.wire.broadcast`: the server's broadcast of the consensus and its decoder;
- :mod:`~cotrain.wire.upload`: :class:`Upload`, all the server sees of a client in a round;
- :mod:`~cotrain.wire.envelope`: a deployed site's reply around its :class:`Upload`
  (:func:`~cotrain.wire.envelope.encode_upload`, :func:`~cotrain.wire.envelope.decode_upload`)
  and the bytes a private site's ledger caches of it;
- :mod:`~cotrain.wire.dp_events`: dp-accounting privacy events as JSON types, and back.

Nothing here imports the rest of :mod:`cotrain`: the format can be read and tested alone.

Examples
--------
>>> import numpy as np
>>> from cotrain.wire import WireFormat
>>> wire = WireFormat(share="hard", n_classes=3, n_public=4)
>>> wire.decode_upload(wire.encode_upload(np.array([0, 2, 1, 1]))).tolist()
[0, 2, 1, 1]
"""

from cotrain.wire.broadcast import BroadcastDecoder, BroadcastEncoder, Downlink, MissingReference
from cotrain.wire.compact import QuantizedSoftLabels, quantize_probs
from cotrain.wire.delta import DeltaHardLabels
from cotrain.wire.endpoints import UploadReceiver, UploadSender
from cotrain.wire.format import MalformedMessage, WireFormat
from cotrain.wire.messages import HardLabels, Message, SoftLabels, decode, encode_message
from cotrain.wire.upload import Upload

__all__ = [
    "BroadcastDecoder",
    "BroadcastEncoder",
    "DeltaHardLabels",
    "Downlink",
    "HardLabels",
    "MalformedMessage",
    "Message",
    "MissingReference",
    "QuantizedSoftLabels",
    "SoftLabels",
    "Upload",
    "UploadReceiver",
    "UploadSender",
    "WireFormat",
    "decode",
    "encode_message",
    "quantize_probs",
]


def __dir__() -> list[str]:
    return sorted(__all__)
