"""Tests for the compact kinds: quantised soft labels (cotrain.wire.compact) and delta-coded
hard labels (cotrain.wire.delta), with the delta state of the wire endpoints."""

from __future__ import annotations

import pickle
import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cotrain.wire.compact import QuantizedSoftLabels, quantize_probs
from cotrain.wire.delta import DELTA_HEADER_SIZE, DeltaHardLabels
from cotrain.wire.format import MalformedMessage, WireFormat
from cotrain.wire.messages import HardLabels, Message, decode
from cotrain.wire.packing import HEADER_SIZE

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- quantised soft labels


@st.composite
def soft_cases(draw):
    n = draw(st.integers(0, 200))
    c = draw(st.integers(1, 20))
    bits = draw(st.integers(1, 16))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    style = draw(st.sampled_from(["dirichlet", "peaked", "ties", "onehot"]))
    if style == "dirichlet":
        p = rng.dirichlet(np.full(c, 0.5), size=n)
    elif style == "peaked":
        p = rng.dirichlet(np.full(c, 0.05), size=n)
    elif style == "ties":
        p = np.full((n, c), 1.0 / c)
    else:
        p = np.eye(c)[rng.integers(0, c, size=n)]
    nan_rows = rng.random(n) < draw(st.sampled_from([0.0, 0.2, 1.0]))
    p[nan_rows] = np.nan
    return p, bits


@SETTINGS
@given(soft_cases())
def test_quantized_round_trip(case):
    p, bits = case
    L = 2**bits - 1
    message = QuantizedSoftLabels(p, bits)
    data = message.to_bytes()
    assert len(data) == message.nbytes == HEADER_SIZE + (p.size * bits + 7) // 8
    back = decode(data)
    assert isinstance(back, QuantizedSoftLabels)
    np.testing.assert_array_equal(back.q, message.q)
    nan = np.isnan(p[:, 0]) if p.size else np.zeros(p.shape[0], bool)
    decoded = back.probs
    np.testing.assert_array_equal(np.isnan(decoded).all(axis=1), nan)
    np.testing.assert_array_equal(decoded[~nan], message.q[~nan] / L)  # exactly q / L
    assert (message.q[~nan].sum(axis=1) == L).all()
    assert (message.q >= 0).all() and (message.q <= L).all()
    np.testing.assert_allclose(decoded[~nan].sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert (np.abs(decoded[~nan] - p[~nan]) <= 1 / L + 1e-12).all()


def test_quantized_one_bit_is_argmax_ties_low():
    p = np.array([[0.2, 0.5, 0.3], [0.4, 0.2, 0.4], [1 / 3] * 3, [np.nan] * 3])
    q = QuantizedSoftLabels(p, 1).q
    assert q.tolist() == [[0, 1, 0], [1, 0, 0], [1, 0, 0], [0, 0, 0]]


def test_quantized_largest_remainder_hand_case():
    # L = 15: x = [7.5, 4.5, 3.0]; floors [7, 4, 3] miss 1; remainder tie 0.5/0.5 -> class 0
    assert quantize_probs(np.array([[0.5, 0.3, 0.2]]), 4).tolist() == [[8, 4, 3]]
    # rows are normalised first
    assert quantize_probs(np.array([[2.0, 2.0]]), 2).tolist() == [[2, 1]]


@pytest.mark.parametrize(
    ("shape", "bits", "nbytes"),
    [((5, 3), 8, 10 + 15), ((5, 3), 4, 10 + 8), ((5, 3), 2, 10 + 4), ((700, 10), 1, 10 + 875)],
)
def test_quantized_sizes(shape, bits, nbytes):
    p = np.random.default_rng(0).dirichlet(np.ones(shape[1]), size=shape[0])
    message = QuantizedSoftLabels(p, bits)
    assert message.nbytes == nbytes == len(message.to_bytes())
    assert struct.unpack_from("<BBII", message.to_bytes()) == (3, bits, *shape)


def test_quantized_invalid():
    with pytest.raises(ValueError, match="bits"):
        QuantizedSoftLabels(np.ones((1, 2)) / 2, 0)
    with pytest.raises(ValueError, match="bits"):
        QuantizedSoftLabels(np.ones((1, 2)) / 2, 17)
    with pytest.raises(ValueError, match="zero"):
        QuantizedSoftLabels(np.zeros((1, 2)), 4)
    with pytest.raises(ValueError, match="non-negative"):
        QuantizedSoftLabels(np.array([[-0.1, 1.1]]), 4)
    with pytest.raises(ValueError, match="NaN"):
        QuantizedSoftLabels(np.array([[np.nan, 1.0]]), 4)


def test_quantized_corrupt():
    data = bytearray(QuantizedSoftLabels(np.array([[0.5, 0.5], [0.9, 0.1]]), 4).to_bytes())
    with pytest.raises(ValueError):
        decode(bytes(data[:-1]))
    bad = bytearray(data)
    bad[1] = 0
    with pytest.raises(ValueError, match="bits"):
        decode(bytes(bad))
    bad = bytearray(data)
    bad[HEADER_SIZE] ^= 0x01  # the first row no longer sums to 15
    with pytest.raises(ValueError, match="sum"):
        decode(bytes(bad))


# ---------------------------------------------------------------- delta-coded hard labels


@st.composite
def delta_cases(draw):
    n = draw(st.integers(0, 2000))
    c = draw(st.sampled_from([1, 2, 3, 10, 17, 255, 256, 300]))
    abstain = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    low = -1 if abstain else 0
    previous = rng.integers(low, c, size=n)
    frac = draw(st.sampled_from([0.0, 0.001, 0.01, 0.1, 0.5, 1.0]))
    change = rng.random(n) < frac
    current = previous.copy()
    current[change] = rng.integers(low, c, size=int(change.sum()))
    compress = draw(st.sampled_from(["zlib", "lzma", "none"]))
    level = draw(st.integers(0, 9))
    return previous, current, c, abstain, compress, level


@SETTINGS
@given(delta_cases())
def test_delta_round_trip(case):
    previous, current, c, abstain, compress, level = case
    kw = {"compress": compress, "level": level, "allow_abstain": abstain}
    data = DeltaHardLabels.encode(current, previous, c, **kw)
    np.testing.assert_array_equal(DeltaHardLabels.decode(data, previous), current)
    message = decode(data)
    assert isinstance(message, DeltaHardLabels)
    assert message.nbytes == len(data) and message.to_bytes() == data
    if compress == "none":
        assert message.compressor == "none"
    # never larger than the full packed body + the 8 extra header bytes
    full = HardLabels(current, c, allow_abstain=abstain).nbytes
    assert len(data) <= full + 4
    # without previous: a full message, decodable with or without previous
    data_full = DeltaHardLabels.encode(current, None, c, **kw)
    assert decode(data_full).layout == "full"
    np.testing.assert_array_equal(DeltaHardLabels.decode(data_full, None), current)
    np.testing.assert_array_equal(DeltaHardLabels.decode(data_full, previous), current)


@SETTINGS
@given(delta_cases(), st.data())
def test_delta_truncated_or_corrupt_raises(case, data_strategy):
    previous, current, c, abstain, compress, level = case
    kw = {"compress": compress, "level": level, "allow_abstain": abstain}
    data = DeltaHardLabels.encode(current, previous, c, **kw)
    cut = data_strategy.draw(st.integers(0, len(data) - 1))
    with pytest.raises(ValueError):
        DeltaHardLabels.decode(data[:cut], previous)
    pos = data_strategy.draw(st.integers(0, len(data) - 1))
    flip = data_strategy.draw(st.integers(1, 255))
    bad = bytearray(data)
    bad[pos] ^= flip
    with pytest.raises(ValueError):
        DeltaHardLabels.decode(bytes(bad), previous)
    with pytest.raises(ValueError):
        DeltaHardLabels.decode(data + b"\x00", previous)


@SETTINGS
@given(
    st.integers(1, 500),
    st.integers(2, 40),
    st.integers(2, 8),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["zlib", "lzma", "none"]),
    st.booleans(),
)
def test_delta_sequences_round_trip(n, c, rounds, seed, compress, abstain):
    rng = np.random.default_rng(seed)
    low = -1 if abstain else 0
    sent = decoded = None  # what the sender last sent, what the receiver last decoded
    codes = rng.integers(low, c, size=n)
    for t in range(rounds):
        churn = 0.5 / (t + 1)  # decaying churn
        change = rng.random(n) < churn
        codes = codes.copy()
        codes[change] = rng.integers(low, c, size=int(change.sum()))
        if rng.random() < 0.2:  # a skipped round: neither side changes
            continue
        data = DeltaHardLabels.encode(codes, sent, c, compress=compress, allow_abstain=abstain)
        sent = codes
        if t == 2:  # a message survives pickling (joblib ships it to workers)
            data = pickle.loads(pickle.dumps(decode(data))).to_bytes()
        decoded = DeltaHardLabels.decode(data, decoded)
        np.testing.assert_array_equal(decoded, codes)
    data = DeltaHardLabels.encode(codes, None, c, compress=compress, allow_abstain=abstain)
    assert decode(data).layout == "full"  # no previous labels (a reset): a full message
    np.testing.assert_array_equal(DeltaHardLabels.decode(data, None), codes)


@SETTINGS
@given(
    st.integers(1, 500),
    st.integers(2, 40),
    st.integers(2, 8),
    st.integers(0, 2**32 - 1),
)
def test_delta_endpoints_keep_the_same_reference(n, c, rounds, seed):
    rng = np.random.default_rng(seed)
    wire = WireFormat(n_classes=c, n_public=n, encoding="delta")
    sender, receiver = wire.sender(), wire.receiver()
    codes = rng.integers(0, c, size=n)
    for t in range(1, rounds + 1):
        change = rng.random(n) < 0.5 / t
        codes = codes.copy()
        codes[change] = rng.integers(0, c, size=int(change.sum()))
        fate = rng.random()
        if fate < 0.2:  # a skipped round: neither side changes
            continue
        data = sender.encode(codes, round=t, ref_round=receiver.ref_round)
        if fate < 0.3:  # lost on the way: the next upload must not be coded against it
            continue
        if t == 2:  # the state survives pickling (joblib ships it to workers)
            sender = pickle.loads(pickle.dumps(sender))
            receiver = pickle.loads(pickle.dumps(receiver))
        np.testing.assert_array_equal(receiver.decode(data, round=t), codes)
        np.testing.assert_array_equal(receiver.state_dict()["codes"], codes)
        np.testing.assert_array_equal(sender.state_dict()["codes"], codes)
        assert receiver.ref_round == sender.state_dict()["round"] == t
    fresh = wire.sender()  # a sender that lost its state (a reset) sends a full message
    data = fresh.encode(codes, round=rounds + 1, ref_round=receiver.ref_round)
    assert decode(data).layout == "full"
    np.testing.assert_array_equal(receiver.decode(data, round=rounds + 1), codes)


def test_delta_needs_matching_previous():
    rng = np.random.default_rng(1)
    previous = rng.integers(0, 10, size=1000)
    current = previous.copy()
    current[::100] = (current[::100] + 1) % 10
    data = DeltaHardLabels.encode(current, previous, 10)
    assert decode(data).layout != "full"
    with pytest.raises(ValueError, match="previous"):
        DeltaHardLabels.decode(data, None)
    with pytest.raises(ValueError, match="shape"):
        DeltaHardLabels.decode(data, previous[:-1])
    other = previous.copy()
    other[5] = (other[5] + 1) % 10  # the receiver holds something else: CRC catches it
    with pytest.raises(ValueError, match="CRC"):
        DeltaHardLabels.decode(data, other)
    # a failed decode leaves the receiver's state untouched
    wire = WireFormat(n_classes=10, n_public=1000, encoding="delta")
    assert wire.encode_upload(current, reference=previous) == data  # what a client sends
    receiver = wire.receiver()
    receiver.load_state_dict({"round": 1, "codes": other})
    with pytest.raises(MalformedMessage, match="CRC"):
        receiver.decode(data, round=2)
    assert receiver.ref_round == 1
    np.testing.assert_array_equal(receiver.state_dict()["codes"], other)


def test_delta_invalid_inputs():
    with pytest.raises(ValueError, match="allow_abstain"):
        DeltaHardLabels.encode(np.array([-1, 0]), None, 2)
    with pytest.raises(ValueError, match="labels"):
        DeltaHardLabels.encode(np.array([0, 1]), np.array([0]), 2)
    with pytest.raises(ValueError, match="compress"):
        DeltaHardLabels.encode(np.array([0, 1]), None, 2, compress="bz2")
    with pytest.raises(ValueError, match=r"in 0\.\.1"):
        DeltaHardLabels.encode(np.array([0, 2]), None, 2)
    with pytest.raises(TypeError):
        DeltaHardLabels()


# ---------------------------------------------------------------- exact, hand-computed sizes


def test_nothing_changed_is_header_only():
    codes = np.random.default_rng(0).integers(0, 10, size=700)
    for compress in ("zlib", "lzma", "none"):
        data = DeltaHardLabels.encode(codes, codes, 10, compress=compress)
        assert len(data) == DELTA_HEADER_SIZE == 14
        kind, flags, n, c, crc = struct.unpack("<BBIII", data)
        # kind 4, bitmap layout (1 << 1), no compressor; CRC of header-with-zero-CRC then codes
        assert (kind, flags, n, c) == (4, 0b010, 700, 10)
        expected = zlib.crc32(codes.astype("<i8").tobytes(), zlib.crc32(data[:10] + b"\0" * 4))
        assert crc == expected
        np.testing.assert_array_equal(DeltaHardLabels.decode(data, codes), codes)


def test_hand_computed_sizes():
    previous = np.zeros(1000, dtype=np.int64)
    codes = previous.copy()
    codes[[10, 500]] = [3, 7]
    # gaps body: m = 2 as <I (4), width 9 (1), gaps [10, 489] at 9 bits = 18 bits -> 3 bytes,
    # codes [3, 7] at 4 bits -> 1 byte (0x73)
    data = DeltaHardLabels.encode(codes, previous, 10, compress="none")
    assert len(data) == 14 + 4 + 1 + 3 + 1
    message = decode(data)
    assert (message.layout, message.compressor, message.n_changed) == ("gaps", "none", 2)
    assert message.positions.tolist() == [10, 500]
    gaps = (10 | (489 << 9)).to_bytes(3, "little")
    assert bytes(data[14:]) == struct.pack("<IB", 2, 9) + gaps + b"\x73"
    # full fallback without previous, uncompressed: 14 + ceil(1000 * 4 / 8) = 514
    data = DeltaHardLabels.encode(codes, None, 10, compress="none")
    assert len(data) == 514
    assert bytes(data[14:]) == HardLabels(codes, 10).to_bytes()[10:]
    # everything changed, 1-bit labels: full body (125 bytes) beats bitmap + codes (250)
    prev = np.zeros(1000, dtype=np.int64)
    data = DeltaHardLabels.encode(1 - prev, prev, 2, compress="none")
    assert len(data) == 14 + 125 and decode(data).layout == "full"
    # a dense change pattern where the bitmap wins: every other label of 16, 4 classes:
    # bitmap 2 bytes + 8 codes x 2 bits = 4 bytes; gaps 4 + 1 + 1 + 2 = 8; full 16 x 2 bits = 4
    # (tie with full: bitmap is preferred)
    prev = np.zeros(16, dtype=np.int64)
    cur = prev.copy()
    cur[::2] = 1
    data = DeltaHardLabels.encode(cur, prev, 4, compress="none")
    assert len(data) == 14 + 4 and decode(data).layout == "bitmap"


def test_delta_is_registered_with_message_dispatch():
    data = DeltaHardLabels.encode(np.array([1, 0, 1]), None, 2)
    assert type(Message.from_bytes(data)).__name__ == "DeltaHardLabels"
    with pytest.raises(ValueError, match="expected a HardLabels"):
        HardLabels.from_bytes(data)
