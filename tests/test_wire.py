"""Tests for cotrain.wire: the federation's wire format, its delta state and its refusals."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import itertools
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cotrain.wire.compact import QuantizedSoftLabels, quantize_probs
from cotrain.wire.delta import DELTA_HEADER_SIZE, DeltaHardLabels
from cotrain.wire.endpoints import UploadReceiver, UploadSender
from cotrain.wire.format import MalformedMessage, WireFormat
from cotrain.wire.messages import (
    HardLabels,
    Message,
    SoftLabels,
    decode,
    encode_message,
)
from cotrain.wire.packing import HEADER_SIZE, register_kind, registered_kinds

ROOT = pathlib.Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- deterministic inputs


def _bytes(k: int, r: int) -> np.ndarray:
    """``k`` pseudo-random bytes from SHA-256: the same on every platform and numpy."""
    raw = b"".join(hashlib.sha256(f"{r}-{i}".encode()).digest() for i in range(k // 32 + 1))
    return np.frombuffer(raw, dtype=np.uint8)[:k].astype(np.int64)


def codes_for(n: int, c: int, r: int) -> np.ndarray:
    return _bytes(n, r) % c


def probs_for(n: int, c: int, r: int) -> np.ndarray:
    x = (_bytes(n * c, r) + 1).astype(np.float64).reshape(n, c)
    return x / x.sum(axis=1, keepdims=True)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def legacy_client_encode(labels, share, encoding, soft_dtype, soft_bits, last_sent, n_classes):
    """``Client.encode`` as it was before the wire format (commit 93f07a7)."""
    if share == "soft":
        if soft_bits is not None:
            return QuantizedSoftLabels(labels, bits=soft_bits).to_bytes()
        return SoftLabels(labels, dtype=soft_dtype).to_bytes()
    if encoding == "delta":
        return DeltaHardLabels.encode(labels, last_sent, n_classes)
    return HardLabels(labels, n_classes).to_bytes()


def legacy_encode_broadcast(pseudo, n_classes, soft_dtype, soft_bits):
    """``CoTrainingServer._encode_broadcast`` before the wire format (commit 93f07a7)."""
    if pseudo.ndim == 1:
        return HardLabels(pseudo, n_classes, allow_abstain=True).to_bytes()
    if soft_bits is not None:
        return QuantizedSoftLabels(pseudo, bits=soft_bits).to_bytes()
    return SoftLabels(pseudo, dtype=soft_dtype).to_bytes()


def legacy_decode(data):
    """``decode_labels`` before the wire format (the server's packed decode)."""
    message = decode(data)
    return message.codes if isinstance(message, HardLabels) else message.probs


FORMATS = [
    dict(share=share, encoding=encoding, soft_dtype=dtype, soft_bits=bits)
    for share, encoding, dtype, bits in itertools.product(
        ("hard", "soft"), ("packed", "delta"), ("float32", "float16"), (None, 1, 4, 16)
    )
]


def _id(fmt):
    return "-".join(str(v) for v in fmt.values())


# ---------------------------------------------------------------- known answers


def test_upload_sizes_are_header_plus_payload():
    # hard packed: 10 + ceil(n * ceil(log2 C) / 8)
    assert len(WireFormat(2, 370).encode_upload(np.zeros(370, dtype=int))) == 10 + 47
    assert len(WireFormat(10, 10**4).encode_upload(np.zeros(10**4, dtype=int))) == 10 + 5000
    # soft: 10 + n * C * itemsize, or 10 + ceil(n * C * bits / 8)
    probs = np.full((5, 3), 1 / 3)
    assert len(WireFormat(3, 5, share="soft").encode_upload(probs)) == 10 + 60
    assert len(WireFormat(3, 5, share="soft", soft_dtype="float16").encode_upload(probs)) == 40
    assert len(WireFormat(3, 5, share="soft", soft_bits=4).encode_upload(probs)) == 10 + 8
    assert len(WireFormat(3, 5, share="soft", soft_bits=1).encode_upload(probs)) == 10 + 2
    # delta: a full message of incompressible codes is 14 + the packed payload; no change is 14
    wire = WireFormat(16, 1000, encoding="delta")
    codes = codes_for(1000, 16, 0)
    assert len(wire.encode_upload(codes)) == DELTA_HEADER_SIZE + 500
    assert len(wire.encode_upload(codes, reference=codes)) == DELTA_HEADER_SIZE == 14
    changed = codes.copy()
    changed[7] = (changed[7] + 1) % 16
    # 14 + m (4 bytes) + gap width (1) + one 3-bit gap (1) + one 4-bit code (1)
    assert len(wire.encode_upload(changed, reference=codes)) == 21


def test_broadcast_sizes_are_header_plus_payload():
    wire = WireFormat(3, 4, soft_dtype="float16")
    assert len(wire.encode_broadcast(np.array([0, -1, 2, 1]))) == 10 + 1  # 4 symbols: 2 bits
    assert len(WireFormat(4, 10).encode_broadcast(np.full(10, -1))) == 10 + 4  # 5 symbols: 3 bits
    soft = np.full((4, 3), 1 / 3)
    assert len(wire.encode_broadcast(soft)) == 10 + 24
    assert len(WireFormat(3, 4, soft_bits=5).encode_broadcast(soft)) == 10 + 8  # 60 bits


# Digests of the bytes Client.encode produced at commit 93f07a7 (before the wire format) for
# 257 labels of 5 classes over three rounds (hard rounds 2 and 3 change three labels).
LEGACY_UPLOADS = {
    ("hard", "packed", "float32", None): [
        (107, "af7b5c2b695246ad"),
        (107, "449ecde99bb2fd92"),
        (107, "07dbbf4aa39bb2f5"),
    ],
    ("hard", "delta", "float32", None): [
        (111, "78c88db91a083d31"),
        (24, "080b2d7e41d58a19"),
        (24, "f0a597b1a2ff730d"),
    ],
    ("soft", "packed", "float32", None): [
        (5150, "86550d9beb29c7a5"),
        (5150, "134c15098e3a54d1"),
        (5150, "c5c2c829948d2d79"),
    ],
    ("soft", "packed", "float16", None): [
        (2580, "1e08e76f9e06ce48"),
        (2580, "0b310ec6a59f55d9"),
        (2580, "feb6255bfac88994"),
    ],
    ("soft", "packed", "float32", 3): [
        (492, "a7a76ff64124bb1e"),
        (492, "4a5ed60a1be3aa32"),
        (492, "164220a2689949c4"),
    ],
    ("soft", "delta", "float16", 12): [
        (1938, "e31be40ac26b3290"),
        (1938, "f0be14e69d6d9699"),
        (1938, "920260e11c2b526c"),
    ],
}


@pytest.mark.parametrize("key", list(LEGACY_UPLOADS), ids=str)
def test_uploads_are_byte_identical_to_the_legacy_client(key):
    share, encoding, dtype, bits = key
    n, c = 257, 5
    wire = WireFormat(c, n, share=share, encoding=encoding, soft_dtype=dtype, soft_bits=bits)
    sender, receiver = wire.sender(), wire.receiver()
    previous = None
    for r, expected in enumerate(LEGACY_UPLOADS[key], start=1):
        if share == "soft":
            labels = probs_for(n, c, r)
        elif previous is None:
            labels = codes_for(n, c, r)
        else:
            labels = previous.copy()
            labels[[3, 100 + r, 200]] = (labels[[3, 100 + r, 200]] + 1) % c
        data = sender.encode(labels, r, receiver.ref_round)
        assert (len(data), digest(data)) == expected
        decoded = receiver.decode(data, r)
        if share == "hard":
            np.testing.assert_array_equal(decoded, labels)
            previous = labels


@pytest.mark.parametrize(
    ("dtype", "bits", "ndim", "size", "expected"),
    [
        ("float32", None, 1, 107, "eca8f644b3c95c22"),
        ("float32", None, 2, 5150, "161f58662adce3f8"),
        ("float16", None, 2, 2580, "b848211e4b429971"),
        ("float32", 4, 1, 107, "eca8f644b3c95c22"),
        ("float32", 4, 2, 653, "22a445ed5498958a"),
    ],
)
def test_broadcasts_are_byte_identical_to_the_legacy_server(dtype, bits, ndim, size, expected):
    n, c = 257, 5
    wire = WireFormat(c, n, soft_dtype=dtype, soft_bits=bits)
    if ndim == 1:
        pseudo = codes_for(n, c, 9)
        pseudo[[1, 2]] = -1
    else:
        pseudo = probs_for(n, c, 9)
        pseudo[[0, 5]] = np.nan
    data = wire.encode_broadcast(pseudo)
    assert (len(data), digest(data)) == (size, expected)
    back = wire.decode_broadcast(data)
    if ndim == 1:
        np.testing.assert_array_equal(back, pseudo)
    else:  # abstaining (NaN) rows survive, as float rows and as quantised all-zero rows
        assert np.isnan(back[[0, 5]]).all() and not np.isnan(np.delete(back, [0, 5], 0)).any()


@pytest.mark.parametrize("fmt", FORMATS, ids=_id)
def test_every_format_matches_the_legacy_code_and_round_trips(fmt):
    n, c = 64, 3
    wire = WireFormat(c, n, **fmt)
    sender, receiver = wire.sender(), wire.receiver()
    last_sent = None
    for r in range(1, 5):
        if fmt["share"] == "hard":
            labels = codes_for(n, c, r)
            if r > 1:  # a few changes, so that delta bodies are used
                labels = last_sent.copy()
                labels[r::17] = (labels[r::17] + 1) % c
        else:
            labels = probs_for(n, c, r)
        legacy = legacy_client_encode(labels, last_sent=last_sent, n_classes=c, **fmt)
        data = sender.encode(labels, r, receiver.ref_round)
        assert data == legacy
        assert wire.encode_upload(labels, last_sent) == legacy
        decoded = receiver.decode(data, r)
        assert receiver.ref_round == r
        if fmt["share"] == "hard":
            assert decoded.dtype == np.int64
            np.testing.assert_array_equal(decoded, labels)
            last_sent = labels
        else:
            assert not wire.delta  # soft uploads are never delta-coded
            expected = legacy_decode(legacy)
            assert decoded.dtype == expected.dtype
            np.testing.assert_array_equal(decoded, expected)
            if fmt["soft_bits"] is None:
                np.testing.assert_allclose(
                    decoded, labels, atol=1e-3 if "16" in fmt["soft_dtype"] else 1e-7
                )
            else:
                L = 2 ** fmt["soft_bits"] - 1
                np.testing.assert_array_equal(decoded, quantize_probs(labels, fmt["soft_bits"]) / L)
        if not wire.delta:  # the server's decoding of packed and soft uploads is unchanged
            np.testing.assert_array_equal(wire.decode_upload(data), legacy_decode(data))


@pytest.mark.parametrize("fmt", FORMATS[:16:4] + FORMATS[16::5], ids=_id)
def test_broadcasts_round_trip_in_every_format(fmt):
    n, c = 30, 4
    wire = WireFormat(c, n, **fmt)
    hard = codes_for(n, c, 1)
    hard[::7] = -1
    np.testing.assert_array_equal(wire.decode_broadcast(wire.encode_broadcast(hard)), hard)
    soft = probs_for(n, c, 2)
    soft[::5] = np.nan
    data = wire.encode_broadcast(soft)
    assert data == legacy_encode_broadcast(soft, c, fmt["soft_dtype"], fmt["soft_bits"])
    np.testing.assert_array_equal(wire.decode_broadcast(data), legacy_decode(data))
    assert wire.decode_broadcast(None) is None


# ---------------------------------------------------------------- delta state over rounds


def test_delta_over_rounds_with_a_round_the_server_never_decoded():
    n, c = 400, 7
    wire = WireFormat(c, n, encoding="delta")
    sender, receiver = wire.sender(), wire.receiver()
    labels = {r: codes_for(n, c, 1) for r in range(1, 6)}
    for r in range(2, 6):
        labels[r] = labels[r - 1].copy()
        labels[r][r * 13 : r * 13 + 3] = (labels[r][r * 13 : r * 13 + 3] + 1) % c

    for r in (1, 2):
        data = sender.encode(labels[r], r, receiver.ref_round)
        assert decode(data).layout == ("full" if r == 1 else "gaps")
        np.testing.assert_array_equal(receiver.decode(data, r), labels[r])
    assert receiver.ref_round == 2

    lost = sender.encode(labels[3], 3, receiver.ref_round)  # never reaches the server
    assert decode(lost).layout != "full" and sender.state_dict()["round"] == 3

    data = sender.encode(labels[4], 4, receiver.ref_round)  # the server still says 2
    message = decode(data)
    assert message.layout == "full" and message.n_changed == n
    np.testing.assert_array_equal(receiver.decode(data, 4), labels[4])
    assert receiver.ref_round == 4

    data = sender.encode(labels[5], 5, receiver.ref_round)  # back to small deltas
    assert len(data) < 30
    np.testing.assert_array_equal(receiver.decode(data, 5), labels[5])


def test_a_delta_against_a_round_the_receiver_does_not_hold_is_refused_and_state_kept():
    n, c = 100, 3
    wire = WireFormat(c, n, encoding="delta")
    sender, receiver = wire.sender(), wire.receiver()
    first = codes_for(n, c, 1)
    receiver.decode(sender.encode(first, 1, 0), 1)
    second = first.copy()
    second[5] = (second[5] + 1) % c
    sender.encode(second, 2, 1)  # lost
    third = second.copy()
    third[50] = (third[50] + 1) % c
    wrong = sender.encode(third, 3, ref_round=2)  # a buggy server claiming round 2
    with pytest.raises(MalformedMessage, match="CRC mismatch"):
        receiver.decode(wrong, 3)
    assert receiver.ref_round == 1
    np.testing.assert_array_equal(receiver.state_dict()["codes"], first)
    # the client is told ref_round=1 again; its stored upload is round 3: a full message
    data = sender.encode(third, 4, receiver.ref_round)
    assert decode(data).layout == "full"
    np.testing.assert_array_equal(receiver.decode(data, 4), third)


def test_sender_state_unchanged_when_encoding_fails():
    wire = WireFormat(3, 4, encoding="delta")
    sender = wire.sender()
    sender.encode([0, 1, 2, 0], 1, 0)
    before = sender.state_dict()
    with pytest.raises(ValueError, match=r"labels must be class codes in 0\.\.2"):
        sender.encode([0, 1, 3, 0], 2, 1)
    with pytest.raises(ValueError, match="ref_round must be an integer between 0"):
        sender.encode([0, 1, 2, 0], 2, -1)
    with pytest.raises(TypeError, match="round must be an int"):
        sender.encode([0, 1, 2, 0], 2.0, 1)
    after = sender.state_dict()
    assert after["round"] == before["round"] == 1
    np.testing.assert_array_equal(after["codes"], before["codes"])


def test_soft_and_packed_senders_keep_what_they_need():
    soft = WireFormat(2, 3, share="soft", encoding="delta")
    sender, receiver = soft.sender(), soft.receiver()
    receiver.decode(sender.encode(np.full((3, 2), 0.5), 1, 0), 1)
    assert sender.state_dict() == {"round": 1, "codes": None}
    assert receiver.state_dict() == {"round": 1, "codes": None}
    packed = WireFormat(2, 3)
    sender, receiver = packed.sender(), packed.receiver()
    receiver.decode(sender.encode([1, 0, 1], 1, 0), 1)
    assert sender.state_dict()["codes"].tolist() == [1, 0, 1]  # the client's last upload
    assert receiver.state_dict() == {"round": 1, "codes": None}  # no reference needed


def test_state_dicts_round_trip_and_resume_delta_coding():
    n, c = 200, 4
    wire = WireFormat(c, n, encoding="delta")
    sender, receiver = wire.sender(), wire.receiver()
    labels = codes_for(n, c, 3)
    receiver.decode(sender.encode(labels, 1, 0), 1)
    s_state, r_state = sender.state_dict(), receiver.state_dict()
    assert s_state["round"] == r_state["round"] == 1
    np.testing.assert_array_equal(s_state["codes"], labels)
    s_state["codes"][0] = 99  # a copy: the objects are not affected
    np.testing.assert_array_equal(sender.state_dict()["codes"], labels)

    sender2, receiver2 = wire.sender(), wire.receiver()
    sender2.load_state_dict(sender.state_dict())
    receiver2.load_state_dict(receiver.state_dict())
    assert receiver2.ref_round == 1
    changed = labels.copy()
    changed[10] = (changed[10] + 1) % c
    data = sender2.encode(changed, 2, receiver2.ref_round)
    assert decode(data).layout != "full"
    np.testing.assert_array_equal(receiver2.decode(data, 2), changed)
    assert sender2.state_dict()["round"] == receiver2.state_dict()["round"] == 2


@pytest.mark.parametrize(
    ("make", "state", "error", "match"),
    [
        ("sender", [1, None], TypeError, "state must be a dict"),
        ("sender", {"round": 1}, ValueError, r"state is missing \['codes'\]"),
        (
            "sender",
            {"round": -1, "codes": None},
            ValueError,
            r"state\['round'\] must be an integer between",
        ),
        ("sender", {"round": "1", "codes": None}, TypeError, r"state\['round'\] must be an int"),
        ("sender", {"round": 0, "codes": [0, 1, 2]}, ValueError, "must be None when"),
        ("sender", {"round": 1, "codes": [0, 1]}, ValueError, r"state\['codes'\] must be class"),
        ("sender", {"round": 1, "codes": [0, 1, 3]}, ValueError, r"in 0\.\.2"),
        ("sender", {"round": 1, "codes": [0.0, 1.0, 2.0]}, TypeError, "integer class codes"),
        ("soft_sender", {"round": 1, "codes": [0, 1, 2]}, ValueError, "keeps no labels"),
        ("receiver", {"round": 2, "codes": None}, ValueError, "needed with delta coding"),
        ("packed_receiver", {"round": 2, "codes": [0, 1, 2]}, ValueError, "keeps no labels"),
    ],
)
def test_load_state_dict_refuses_bad_states(make, state, error, match):
    delta = WireFormat(3, 3, encoding="delta")
    obj = {
        "sender": delta.sender,
        "receiver": delta.receiver,
        "soft_sender": WireFormat(3, 3, share="soft").sender,
        "packed_receiver": WireFormat(3, 3).receiver,
    }[make]()
    before = obj.state_dict()
    with pytest.raises(error, match=match):
        obj.load_state_dict(state)
    assert obj.state_dict() == before


# ---------------------------------------------------------------- malformed uploads


def _hard(n=6, c=3):
    return WireFormat(c, n), codes_for(n, c, 1)


def test_refuses_data_that_is_not_bytes():
    wire, _ = _hard()
    for value in (None, "text", [1, 2, 3], np.zeros(20, dtype=np.uint8)):
        with pytest.raises(MalformedMessage, match="upload does not decode: data must be bytes"):
            wire.decode_upload(value)
    with pytest.raises(MalformedMessage, match="broadcast does not decode: data must be bytes"):
        wire.decode_broadcast("text")


@pytest.mark.parametrize("cut", [0, 5, HEADER_SIZE - 1, HEADER_SIZE, -1])
def test_refuses_truncated_uploads(cut):
    wire, codes = _hard()
    data = wire.encode_upload(codes)
    with pytest.raises(MalformedMessage, match=r"does not decode: (truncated|corrupt)"):
        wire.decode_upload(data[:cut])
    delta = WireFormat(3, 6, encoding="delta")
    data = delta.encode_upload(codes)
    with pytest.raises(MalformedMessage, match=r"does not decode: (truncated|corrupt)"):
        delta.decode_upload(data[:cut])


def test_refuses_unknown_kind_byte():
    wire, codes = _hard()
    data = bytearray(wire.encode_upload(codes))
    data[0] = 99
    with pytest.raises(MalformedMessage, match="unknown message kind 99"):
        wire.decode_upload(bytes(data))
    with pytest.raises(MalformedMessage, match="unknown message kind 99"):
        wire.decode_broadcast(bytes(data))


def test_refuses_wrong_number_of_classes():
    wire, codes = _hard()
    with pytest.raises(MalformedMessage, match="n_classes=4, expected n_classes=3"):
        wire.decode_upload(HardLabels(codes, 4).to_bytes())
    soft = WireFormat(3, 6, share="soft")
    with pytest.raises(MalformedMessage, match="n_classes=2, expected n_classes=3"):
        soft.decode_upload(SoftLabels(np.full((6, 2), 0.5)).to_bytes())
    with pytest.raises(MalformedMessage, match="broadcast has n_classes=4"):
        wire.decode_broadcast(HardLabels(codes, 4, allow_abstain=True).to_bytes())


def test_refuses_wrong_length():
    wire, codes = _hard()
    with pytest.raises(MalformedMessage, match="upload has 5 labels, expected n_public=6"):
        wire.decode_upload(HardLabels(codes[:5], 3).to_bytes())
    soft = WireFormat(3, 6, share="soft", soft_bits=4)
    with pytest.raises(MalformedMessage, match="upload has 7 rows, expected n_public=6"):
        soft.decode_upload(QuantizedSoftLabels(np.full((7, 3), 1 / 3), 4).to_bytes())
    with pytest.raises(MalformedMessage, match="broadcast has 5 labels, expected n_public=6"):
        wire.decode_broadcast(HardLabels(codes[:5], 3, allow_abstain=True).to_bytes())


def test_refuses_soft_under_hard_and_hard_under_soft():
    wire, codes = _hard()
    soft_data = SoftLabels(np.full((6, 3), 1 / 3)).to_bytes()
    with pytest.raises(
        MalformedMessage, match=r"upload is a SoftLabels message .* expects HardLabels"
    ):
        wire.decode_upload(soft_data)
    soft = WireFormat(3, 6, share="soft")
    with pytest.raises(
        MalformedMessage, match=r"upload is a HardLabels message .* expects SoftLabels"
    ):
        soft.decode_upload(HardLabels(codes, 3).to_bytes())
    quantised = WireFormat(3, 6, share="soft", soft_bits=8)
    with pytest.raises(MalformedMessage, match="expects QuantizedSoftLabels"):
        quantised.decode_upload(soft_data)


def test_refuses_another_soft_precision():
    probs = np.full((6, 3), 1 / 3)
    with pytest.raises(
        MalformedMessage, match="float16 soft labels, but this format sends float32"
    ):
        WireFormat(3, 6, share="soft").decode_upload(SoftLabels(probs, "float16").to_bytes())
    with pytest.raises(MalformedMessage, match=r"quantised to 4 bits .* soft_bits=5"):
        WireFormat(3, 6, share="soft", soft_bits=5).decode_upload(
            QuantizedSoftLabels(probs, 4).to_bytes()
        )
    with pytest.raises(MalformedMessage, match="broadcast is float32 soft labels"):
        WireFormat(3, 6, soft_dtype="float16").decode_broadcast(SoftLabels(probs).to_bytes())


def test_delta_and_packed_formats_take_only_their_own_kind():
    _, codes = _hard()
    delta = WireFormat(3, 6, encoding="delta")
    with pytest.raises(MalformedMessage, match=r"HardLabels message .* expects DeltaHardLabels"):
        delta.decode_upload(HardLabels(codes, 3).to_bytes())
    with pytest.raises(MalformedMessage, match=r"DeltaHardLabels message .* expects HardLabels"):
        WireFormat(3, 6).decode_upload(DeltaHardLabels.encode(codes, None, 3))
    with pytest.raises(MalformedMessage, match="broadcast is a DeltaHardLabels message"):
        delta.decode_broadcast(DeltaHardLabels.encode(codes, None, 3, allow_abstain=True))


def test_refuses_a_delta_against_the_wrong_reference_or_none():
    n, c = 50, 3
    delta = WireFormat(c, n, encoding="delta")
    previous = codes_for(n, c, 1)
    codes = previous.copy()
    codes[[4, 30]] = (codes[[4, 30]] + 1) % c
    data = delta.encode_upload(codes, reference=previous)
    np.testing.assert_array_equal(delta.decode_upload(data, reference=previous), codes)
    other = previous.copy()
    other[0] = (other[0] + 1) % c
    with pytest.raises(MalformedMessage, match="CRC mismatch"):
        delta.decode_upload(data, reference=other)
    with pytest.raises(MalformedMessage, match=r"needs the previous upload .* holds none"):
        delta.decode_upload(data)
    with pytest.raises(MalformedMessage, match="needs the previous upload"):
        delta.receiver().decode(data, 1)
    # a corrupted byte in the body is caught by the CRC too
    broken = bytearray(data)
    broken[-1] ^= 0x01
    with pytest.raises(MalformedMessage, match=r"CRC mismatch|does not decode"):
        delta.decode_upload(bytes(broken), reference=previous)
    # a bad reference is the caller's bug, not the message's
    with pytest.raises(ValueError, match=r"reference must be class codes of shape \(50,\)") as info:
        delta.decode_upload(data, reference=previous[:10])
    assert not isinstance(info.value, MalformedMessage)


def test_refuses_abstaining_uploads():
    wire, codes = _hard()
    codes[2] = -1
    data = HardLabels(codes, 3, allow_abstain=True).to_bytes()
    with pytest.raises(MalformedMessage, match="upload abstains \\(code -1 at position 2\\)"):
        wire.decode_upload(data)
    delta = WireFormat(3, 6, encoding="delta")
    data = DeltaHardLabels.encode(codes, None, 3, allow_abstain=True)
    with pytest.raises(MalformedMessage, match="upload abstains"):
        delta.decode_upload(data)
    # the same message is a fine broadcast
    np.testing.assert_array_equal(
        wire.decode_broadcast(HardLabels(codes, 3, allow_abstain=True).to_bytes()), codes
    )
    # an abstain-capable message without -1 is accepted (the codes are what matter)
    clean = HardLabels(np.array([0, 1, 2, 0, 1, 2]), 3, allow_abstain=True).to_bytes()
    assert wire.decode_upload(clean).tolist() == [0, 1, 2, 0, 1, 2]


def test_refuses_non_finite_or_unnormalised_probabilities():
    soft = WireFormat(3, 4, share="soft")
    probs = np.full((4, 3), 1 / 3)
    nan_row = probs.copy()
    nan_row[1] = np.nan
    with pytest.raises(MalformedMessage, match="must be finite: row 1 is NaN"):
        soft.decode_upload(SoftLabels(nan_row).to_bytes())
    quantised = WireFormat(3, 4, share="soft", soft_bits=4)
    with pytest.raises(MalformedMessage, match="must be finite: row 1 is NaN"):
        quantised.decode_upload(QuantizedSoftLabels(nan_row, 4).to_bytes())
    inf = bytearray(SoftLabels(probs).to_bytes())
    inf[HEADER_SIZE : HEADER_SIZE + 4] = struct.pack("<f", np.inf)
    with pytest.raises(MalformedMessage, match="must be finite"):
        soft.decode_upload(bytes(inf))
    half = probs / 2
    with pytest.raises(MalformedMessage, match=r"rows summing to 1: row 0 sums to 0\.5"):
        soft.decode_upload(SoftLabels(half).to_bytes())
    # float16 rounding is within the tolerance
    f16 = WireFormat(3, 4, share="soft", soft_dtype="float16")
    rows = probs_for(4, 3, 5)
    np.testing.assert_allclose(f16.decode_upload(f16.encode_upload(rows)), rows, atol=1e-3)


def test_encode_refuses_what_decode_would_refuse():
    with pytest.raises(ValueError, match="labels must not abstain"):
        WireFormat(2, 2, share="soft").encode_upload(np.array([[0.5, 0.5], [np.nan, np.nan]]))
    with pytest.raises(ValueError, match="labels must have rows summing to 1"):
        WireFormat(2, 2, share="soft").encode_upload(np.array([[0.5, 0.5], [0.5, 0.0]]))
    # quantisation normalises rows itself (as before)
    data = WireFormat(2, 1, share="soft", soft_bits=2).encode_upload(np.array([[2.0, 1.0]]))
    assert decode(data).q.tolist() == [[2, 1]]


@pytest.mark.parametrize(
    ("fmt", "labels", "error", "match"),
    [
        ({}, np.zeros(5, dtype=int), ValueError, r"labels must be class codes of shape \(4,\)"),
        ({}, np.zeros((4, 3)), ValueError, r"labels must be class codes of shape \(4,\)"),
        ({}, np.zeros(4), TypeError, "labels must be integer class codes"),
        ({}, np.array([0, 1, 3, 0]), ValueError, r"labels must be class codes in 0\.\.2"),
        ({}, np.array([0, -1, 2, 0]), ValueError, r"in 0\.\.2, got values in \[-1, 2\]"),
        ({"share": "soft"}, np.zeros(4, dtype=int), ValueError, r"shape \(4, 3\)"),
        ({"share": "soft"}, np.full((4, 3), "a"), TypeError, "labels must be real numbers"),
        ({"share": "soft"}, -np.ones((4, 3)), ValueError, "labels must be non-negative"),
    ],
)
def test_encode_upload_names_bad_labels(fmt, labels, error, match):
    with pytest.raises(error, match=match):
        WireFormat(3, 4, **fmt).encode_upload(labels)


def test_encode_upload_names_a_bad_reference_and_ignores_it_when_packed():
    delta = WireFormat(3, 4, encoding="delta")
    with pytest.raises(ValueError, match=r"reference must be class codes of shape \(4,\)"):
        delta.encode_upload([0, 1, 2, 0], reference=[0, 1])
    packed = WireFormat(3, 4)
    assert packed.encode_upload([0, 1, 2, 0], reference=[9]) == packed.encode_upload([0, 1, 2, 0])


def test_encode_broadcast_names_bad_pseudo_labels():
    wire = WireFormat(3, 4)
    with pytest.raises(ValueError, match=r"pseudo must be codes of shape \(4,\)"):
        wire.encode_broadcast(np.zeros(5, dtype=int))
    with pytest.raises(ValueError, match="pseudo has 2 columns, expected n_classes=3"):
        wire.encode_broadcast(np.full((4, 2), 0.5))
    with pytest.raises(TypeError, match="pseudo codes must be integers"):
        wire.encode_broadcast(np.zeros(4))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fmt=st.sampled_from(FORMATS),
    kind=st.integers(0, 6),
    flags=st.integers(0, 255),
    n=st.sampled_from([0, 3, 4, 2**32 - 1]),
    n_classes=st.sampled_from([1, 3, 4, 2**32 - 1]),
    body=st.binary(max_size=40),
)
def test_hostile_bytes_decode_to_valid_labels_or_malformed_message(
    fmt, kind, flags, n, n_classes, body
):
    wire = WireFormat(3, 4, **fmt)
    data = struct.pack("<BBII", kind, flags, n, n_classes) + body
    reference = np.array([0, 1, 2, 0])
    for decoder in (
        lambda: wire.decode_upload(data, reference),
        lambda: wire.receiver().decode(data, 1),
        lambda: wire.decode_broadcast(data),
    ):
        try:
            labels = decoder()
        except MalformedMessage:
            continue
        assert labels.shape[0] == 4
        if labels.ndim == 1:
            assert labels.dtype == np.int64 and labels.min() >= -1 and labels.max() < 3
        else:
            assert labels.shape == (4, 3)


def test_malformed_message_is_a_value_error():
    assert issubclass(MalformedMessage, ValueError)
    with pytest.raises(ValueError):
        WireFormat(2, 2).decode_upload(b"")


def test_receiver_keeps_its_state_after_a_malformed_upload():
    n, c = 40, 5
    wire = WireFormat(c, n, encoding="delta")
    sender, receiver = wire.sender(), wire.receiver()
    first = codes_for(n, c, 1)
    receiver.decode(sender.encode(first, 1, 0), 1)
    for junk in (b"", b"\x04" + bytes(20), HardLabels(first, c).to_bytes(), None):
        with pytest.raises(MalformedMessage):
            receiver.decode(junk, 2)
    assert receiver.ref_round == 1
    second = first.copy()
    second[3] = (second[3] + 1) % c
    np.testing.assert_array_equal(receiver.decode(sender.encode(second, 2, 1), 2), second)


# ---------------------------------------------------------------- fields and configuration


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_classes": 0}, ValueError, "n_classes must be an integer between 1"),
        (
            {"n_classes": 2**32 - 1},
            ValueError,
            "n_classes must be an integer between 1 and 4294967294",
        ),
        ({"n_classes": 2.0}, TypeError, "n_classes must be an int"),
        ({"n_classes": True}, TypeError, "n_classes must be an int"),
        ({"n_public": -1}, ValueError, "n_public must be an integer between 0"),
        ({"n_public": "5"}, TypeError, "n_public must be an int"),
        ({"share": "both"}, ValueError, r"share must be one of \('hard', 'soft'\)"),
        ({"share": 1}, TypeError, "share must be a str"),
        ({"encoding": "zlib"}, ValueError, r"encoding must be one of \('packed', 'delta'\)"),
        ({"encoding": None}, TypeError, "encoding must be a str"),
        ({"soft_dtype": "float64"}, ValueError, "soft_dtype must be one of"),
        ({"soft_dtype": np.float16}, TypeError, "soft_dtype must be a str"),
        ({"soft_bits": 0}, ValueError, "soft_bits must be an integer between 1 and 16"),
        ({"soft_bits": 17}, ValueError, "soft_bits must be an integer between 1 and 16"),
        ({"soft_bits": 4.0}, TypeError, "soft_bits must be an int"),
    ],
)
def test_fields_are_validated(kwargs, error, match):
    with pytest.raises(error, match=match):
        WireFormat(**{"n_classes": 3, "n_public": 10, **kwargs})


def test_fields_are_normalised_frozen_and_hashable():
    wire = WireFormat(np.int64(3), np.int32(10), soft_bits=np.int8(4))
    assert type(wire.n_classes) is type(wire.n_public) is type(wire.soft_bits) is int
    assert (
        wire == WireFormat(3, 10, soft_bits=4) and len({wire, WireFormat(3, 10, soft_bits=4)}) == 1
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        wire.share = "soft"
    assert wire.upload_type is HardLabels and wire.soft_type is QuantizedSoftLabels
    assert WireFormat(3, 10, encoding="delta").upload_type is DeltaHardLabels
    assert WireFormat(3, 10, share="soft").upload_type is SoftLabels


@pytest.mark.parametrize("fmt", FORMATS, ids=_id)
def test_config_round_trip(fmt):
    wire = WireFormat(7, 123, **fmt)
    config = wire.to_config()
    assert set(config) == {
        "n-classes", "n-public", "share", "encoding", "soft-dtype", "soft-bits", "abstain",
    }  # fmt: skip
    assert all(isinstance(v, int | str) for v in config.values())  # abstain: a bool
    assert config["soft-bits"] == (0 if fmt["soft_bits"] is None else fmt["soft_bits"])
    assert WireFormat.from_config(config) == wire
    assert WireFormat.from_config({**config, "seed": 3, "pool-hash": "x"}) == wire


def test_from_config_defaults_and_errors():
    assert WireFormat.from_config({"n-classes": 2, "n-public": 5}) == WireFormat(2, 5)
    with pytest.raises(ValueError, match="config has no 'n-public' key"):
        WireFormat.from_config({"n-classes": 2})
    with pytest.raises(TypeError, match="config must be a mapping"):
        WireFormat.from_config([("n-classes", 2)])
    with pytest.raises(
        ValueError, match="wire-format config: soft_bits must be an integer between 1 and 16"
    ):
        WireFormat.from_config({"n-classes": 2, "n-public": 5, "soft-bits": 20})
    with pytest.raises(TypeError, match="wire-format config: soft_bits must be an int"):
        WireFormat.from_config({"n-classes": 2, "n-public": 5, "soft-bits": False})
    with pytest.raises(ValueError, match="wire-format config: share must be one of"):
        WireFormat.from_config({"n-classes": 2, "n-public": 5, "share": "Hard"})


def test_sender_and_receiver_need_a_wire_format():
    with pytest.raises(TypeError, match="wire must be a WireFormat"):
        UploadSender({"n-classes": 2})
    with pytest.raises(TypeError, match="wire must be a WireFormat"):
        UploadReceiver(None)
    assert "ref_round=0" in repr(WireFormat(2, 2).receiver())


# ---------------------------------------------------------------- the message modules


def test_delta_hard_labels_is_constructible_and_matches_encode():
    n, c = 300, 6
    previous = codes_for(n, c, 1)
    for changes in (0, 1, 5, 40, n):
        codes = previous.copy()
        codes[:changes] = (codes[:changes] + 1) % c
        for compress in ("zlib", "lzma", "none"):
            message = DeltaHardLabels(codes, previous, c, compress=compress)
            data = DeltaHardLabels.encode(codes, previous, c, compress=compress)
            assert message.to_bytes() == data and message.nbytes == len(data)
            parsed = decode(data)
            for name in ("layout", "compressor", "n", "n_classes", "allow_abstain", "n_changed"):
                assert getattr(message, name) == getattr(parsed, name)
            np.testing.assert_array_equal(message.positions, parsed.positions)
            np.testing.assert_array_equal(message.values, parsed.values)
            np.testing.assert_array_equal(message.apply(previous), codes)
    full = DeltaHardLabels(previous, None, c)
    assert full.layout == "full" and full.to_bytes() == DeltaHardLabels.encode(previous, None, c)
    with pytest.raises(TypeError):
        DeltaHardLabels()
    with pytest.raises(ValueError, match="compress must be one of"):
        DeltaHardLabels(previous, None, c, compress="gzip")


def test_delta_sender_and_receiver_round_trip_a_sequence():
    wire = WireFormat(n_classes=4, n_public=100, encoding="delta")
    sender, receiver = wire.sender(), wire.receiver()
    for r in range(1, 4):
        codes = codes_for(100, 4, r)
        data = sender.encode(codes, round=r, ref_round=receiver.ref_round)
        np.testing.assert_array_equal(receiver.decode(data, round=r), codes)
        np.testing.assert_array_equal(sender.state_dict()["codes"], receiver.state_dict()["codes"])


def test_encode_message_builds_the_message_of_its_labels():
    assert encode_message(np.array([1, 0, 1]), 2).to_bytes() == HardLabels([1, 0, 1], 2).to_bytes()
    soft = encode_message(np.eye(2), 2, soft_dtype="float16")
    assert soft.to_bytes() == SoftLabels(np.eye(2), dtype="float16").to_bytes()


def test_every_kind_is_registered_and_decodes_through_messages():
    assert registered_kinds() == {
        1: "HardLabels",
        2: "SoftLabels",
        3: "QuantizedSoftLabels",
        4: "DeltaHardLabels",
    }
    with pytest.raises(ValueError, match="kind 1 is already registered to HardLabels"):
        register_kind(1, SoftLabels)
    for data in (
        QuantizedSoftLabels(np.full((2, 3), 1 / 3), 3).to_bytes(),
        DeltaHardLabels.encode(np.array([0, 2]), None, 3),
    ):
        assert type(Message.from_bytes(data)).kind == data[0]


@pytest.mark.slow
def test_importing_only_cotrain_messages_decodes_compact_kinds():
    quantised = QuantizedSoftLabels(np.full((2, 3), 1 / 3), 3).to_bytes()
    delta = DeltaHardLabels.encode([1], None, 2)
    script = (
        "from cotrain.wire.messages import decode; "
        f"print(type(decode({quantised!r})).__name__, type(decode({delta!r})).__name__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.split() == ["QuantizedSoftLabels", "DeltaHardLabels"]


def _imports(path: pathlib.Path) -> list[tuple[str, str]]:
    """``(module, name)`` of every ``from module import name`` in a file."""
    tree = ast.parse(path.read_text())
    return [
        (node.module or "", alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ] + [
        (alias.name, "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ]


def test_message_modules_have_no_cycle_and_no_private_imports():
    pkg = ROOT / "cotrain" / "wire"
    wire_modules = {f"cotrain.wire.{p.stem}" for p in pkg.glob("*.py")} | {"cotrain.wire"}

    def wire_imports(name: str) -> set[str]:
        return {m for m, _ in _imports(pkg / f"{name}.py") if m.startswith("cotrain")}

    assert not wire_imports("packing")  # the bottom: bit packing and the kind registry
    assert wire_imports("messages") == {"cotrain.wire.packing"}
    for name in ("compact", "delta"):  # the compact kinds know messages, never the format
        assert not wire_imports(name) & {"cotrain.wire", "cotrain.wire.format"}, name
    assert "cotrain.wire.compact" not in wire_imports("delta")
    # the endpoints know their format only through a protocol: the format builds them
    assert wire_imports("endpoints") == {"cotrain.wire.packing"}
    assert "cotrain.wire.endpoints" in wire_imports("format")
    for path in pkg.glob("*.py"):
        found = _imports(path)
        assert {m for m, _ in found if m.startswith("cotrain")} <= wire_modules, path.name
        private = [(m, n) for m, n in found if m.startswith("cotrain") and n.startswith("_")]
        assert not private, (path.name, private)


def test_the_split_modules_are_the_only_homes_of_their_names():
    from cotrain.wire import compact
    from cotrain.wire import format as wire_format

    assert DELTA_HEADER_SIZE == 14
    for module, name in [
        (compact, "DeltaHardLabels"),
        (compact, "DELTA_HEADER_SIZE"),
        (wire_format, "UploadSender"),
        (wire_format, "UploadReceiver"),
    ]:
        assert name not in module.__all__
    assert not hasattr(compact, "DeltaEncoder") and not hasattr(compact, "DeltaDecoder")
