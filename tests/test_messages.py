"""Tests for cotrain.wire.messages: exact byte sizes, round trips, corruption handling."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cotrain.wire.messages import HardLabels, Message, SoftLabels, decode, encode_message
from cotrain.wire.packing import HEADER_SIZE


def test_header_is_ten_bytes_and_documented_layout():
    assert HEADER_SIZE == 10
    data = HardLabels(np.array([1, 0, 2]), 3, allow_abstain=True).to_bytes()
    kind, flags, n, n_classes = struct.unpack_from("<BBII", data)
    assert (kind, flags, n, n_classes) == (1, 1, 3, 3)
    data = SoftLabels(np.ones((2, 4)) / 4, dtype="float16").to_bytes()
    assert struct.unpack_from("<BBII", data) == (2, 1, 2, 4)
    data = SoftLabels(np.ones((2, 4)) / 4).to_bytes()
    assert struct.unpack_from("<BBII", data) == (2, 0, 2, 4)


# ---------------------------------------------------------------- exact, hand-computed sizes


@pytest.mark.parametrize(
    ("n", "n_classes", "abstain", "bits", "payload"),
    [
        (370, 2, False, 1, 47),  # ceil(370 / 8) = 47
        (10000, 10, False, 4, 5000),  # 4 bits each
        (10000, 3, True, 2, 2500),  # 3 classes + abstain = 4 symbols
        (10000, 3, False, 2, 2500),
        (10, 4, True, 3, 4),  # 5 symbols -> 3 bits, 30 bits -> 4 bytes
        (8, 1, False, 1, 1),  # a single class still takes one bit
        (0, 5, False, 3, 0),
        (100, 256, False, 8, 100),
        (100, 255, True, 8, 100),
        (100, 256, True, 9, 113),  # 900 bits
        (3, 2**16 + 1, False, 17, 7),  # 51 bits
        (7, 2**32 - 1, False, 32, 28),
    ],
)
def test_hard_label_sizes(n, n_classes, abstain, bits, payload):
    rng = np.random.default_rng(0)
    codes = rng.integers(0, n_classes, size=n)
    message = HardLabels(codes, n_classes, allow_abstain=abstain)
    assert message.bits_per_label == bits
    assert message.nbytes == HEADER_SIZE + payload
    data = message.to_bytes()
    assert len(data) == HEADER_SIZE + payload
    np.testing.assert_array_equal(decode(data).codes, codes)


def test_paper_example_size():
    # FedCT: |U| = 10^4, C = 10 packs into |U| * ceil(log2 C) bits = 5000 bytes (+ header)
    message = encode_message(np.zeros(10**4, dtype=np.int64), 10)
    assert message.nbytes == 10 + 5000


@pytest.mark.parametrize(
    ("shape", "dtype", "payload"),
    [
        ((5, 3), "float32", 60),
        ((5, 3), "float16", 30),
        ((0, 4), "float32", 0),
        ((1, 1), "float16", 2),
    ],
)
def test_soft_label_sizes(shape, dtype, payload):
    probs = np.random.default_rng(0).dirichlet(np.ones(shape[1]), size=shape[0])
    message = SoftLabels(probs, dtype=dtype)
    assert message.nbytes == HEADER_SIZE + payload
    assert len(message.to_bytes()) == HEADER_SIZE + payload


# ------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 1000])
@pytest.mark.parametrize("n_classes", [1, 2, 3, 4, 5, 255, 256, 257])
@pytest.mark.parametrize("abstain", [False, True])
def test_hard_round_trip(n, n_classes, abstain):
    rng = np.random.default_rng(n * 1000 + n_classes)
    low = -1 if abstain else 0
    codes = rng.integers(low, n_classes, size=n)
    message = HardLabels(codes, n_classes, allow_abstain=abstain)
    data = message.to_bytes()
    assert len(data) == message.nbytes
    b = max(1, math.ceil(math.log2(n_classes + abstain)))
    assert len(data) == HEADER_SIZE + math.ceil(n * b / 8)
    for out in (decode(data), HardLabels.from_bytes(data), Message.from_bytes(bytearray(data))):
        assert isinstance(out, HardLabels)
        assert out.codes.dtype == np.int64
        np.testing.assert_array_equal(out.codes, codes)
        assert out.n == n
        assert out.n_classes == n_classes
        assert out.allow_abstain == abstain
        assert out.nbytes == len(data)


def test_hard_round_trip_extreme_codes():
    for n_classes in (2**8 + 1, 2**16, 2**16 + 1, 2**24 + 3, 2**31, 2**32 - 2):
        codes = np.array([0, n_classes - 1, 1, n_classes // 2, -1, n_classes - 1, 0, 3, 5])
        out = decode(HardLabels(codes, n_classes, allow_abstain=True).to_bytes())
        np.testing.assert_array_equal(out.codes, codes)


def test_hard_round_trip_across_chunks():
    # more labels than one packing chunk (2**20), with a bit width that is not byte aligned
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 5, size=(1 << 20) + 13)
    message = HardLabels(codes, 5)
    data = message.to_bytes()
    assert len(data) == HEADER_SIZE + math.ceil(codes.size * 3 / 8)
    np.testing.assert_array_equal(decode(data).codes, codes)


def test_packing_is_little_endian_bit_order():
    # 2 bits per label: labels 1, 2, 3, 0 -> bits (lsb first) 10 01 11 00 -> 0b00111001
    data = HardLabels(np.array([1, 2, 3, 0]), 4).to_bytes()
    assert data[HEADER_SIZE:] == bytes([0b00111001])
    # abstain is stored as symbol n_classes: 3 classes + abstain, -1 -> 3 = 0b11
    data = HardLabels(np.array([-1, 0, 0, 0]), 3, allow_abstain=True).to_bytes()
    assert data[HEADER_SIZE:] == bytes([0b00000011])
    # 16-bit labels are plain little-endian uint16
    data = HardLabels(np.array([258, 1]), 2**16).to_bytes()
    assert data[HEADER_SIZE:] == bytes([2, 1, 1, 0])


@settings(max_examples=200, deadline=None)
@given(
    n_classes=st.integers(min_value=1, max_value=2**32 - 2),
    abstain=st.booleans(),
    data=st.data(),
)
def test_hard_round_trip_property(n_classes, abstain, data):
    low = -1 if abstain else 0
    codes = data.draw(st.lists(st.integers(min_value=low, max_value=n_classes - 1), max_size=70))
    codes = np.array(codes, dtype=np.int64)
    message = HardLabels(codes, n_classes, allow_abstain=abstain)
    encoded = message.to_bytes()
    assert len(encoded) == message.nbytes
    out = decode(encoded)
    np.testing.assert_array_equal(out.codes, codes)
    assert (out.n_classes, out.allow_abstain) == (n_classes, abstain)


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=20),
    n_classes=st.integers(min_value=1, max_value=6),
    dtype=st.sampled_from(["float32", "float16"]),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_soft_round_trip_property(n, n_classes, dtype, seed):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(n_classes), size=n)
    if n:
        probs[rng.random(n) < 0.3] = np.nan  # abstaining rows
    message = SoftLabels(probs, dtype=dtype)
    out = decode(message.to_bytes())
    assert isinstance(out, SoftLabels)
    assert out.dtype == dtype
    assert out.probs.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.probs, message.probs)  # lossless after the cast
    np.testing.assert_allclose(out.probs, probs, rtol=1e-3 if dtype == "float16" else 1e-7)


def test_soft_float32_exact_and_float16_within_tolerance():
    probs = np.random.default_rng(0).dirichlet(np.ones(7), size=50)
    out32 = decode(SoftLabels(probs).to_bytes())
    np.testing.assert_array_equal(out32.probs, probs.astype(np.float32))
    out16 = decode(SoftLabels(probs, dtype="float16").to_bytes())
    assert out16.probs.dtype == np.float16
    np.testing.assert_allclose(out16.probs.astype(float), probs, atol=5e-4)


def test_soft_nan_rows_round_trip():
    probs = np.array([[0.2, 0.8], [np.nan, np.nan], [1.0, 0.0]])
    out = decode(SoftLabels(probs).to_bytes())
    assert np.isnan(out.probs[1]).all()
    np.testing.assert_allclose(out.probs[[0, 2]], probs[[0, 2]])


def test_soft_accepts_numpy_dtype_and_integer_probs():
    message = SoftLabels(np.eye(3, dtype=np.int64), dtype=np.float16)
    assert message.dtype == "float16"
    assert message.nbytes == HEADER_SIZE + 18


def test_encode_message_dispatch():
    hard = encode_message([0, 2, -1], 3, allow_abstain=True)
    assert isinstance(hard, HardLabels)
    assert hard.nbytes == HEADER_SIZE + 1
    soft = encode_message(np.full((4, 3), 1 / 3), 3, soft_dtype="float16")
    assert isinstance(soft, SoftLabels)
    assert soft.nbytes == HEADER_SIZE + 24
    with pytest.raises(ValueError, match="n_classes"):
        encode_message(np.full((4, 3), 1 / 3), 4)
    with pytest.raises(ValueError, match="1-D codes or 2-D"):
        encode_message(np.zeros((2, 2, 2)), 2)


def test_repr_mentions_size():
    assert "nbytes=11" in repr(HardLabels([0, 1, 1], 2))
    assert "nbytes=34" in repr(SoftLabels(np.ones((2, 3)) / 3))


# ------------------------------------------------------------------------------ validation


def test_hard_validation_errors():
    with pytest.raises(ValueError, match="codes must be in"):
        HardLabels(np.array([0, 3]), 3)
    with pytest.raises(ValueError, match="allow_abstain=True"):
        HardLabels(np.array([0, -1]), 3)  # clients never abstain
    with pytest.raises(ValueError, match="codes must be in"):
        HardLabels(np.array([0, -2]), 3, allow_abstain=True)
    with pytest.raises(TypeError, match="integers"):
        HardLabels(np.array([0.0, 1.0]), 3)
    with pytest.raises(TypeError, match="integers"):
        HardLabels(np.array([True, False]), 3)
    with pytest.raises(TypeError, match="integers"):
        HardLabels(np.array(["a"]), 3)
    with pytest.raises(ValueError, match="1-D"):
        HardLabels(np.zeros((2, 2), dtype=int), 3)
    with pytest.raises(ValueError, match="n_classes"):
        HardLabels(np.array([0]), 0)
    with pytest.raises(TypeError, match="n_classes"):
        HardLabels(np.array([0]), 2.0)
    with pytest.raises(ValueError, match="n_classes"):
        HardLabels(np.array([0]), 2**32)
    assert HardLabels([], 3).n == 0  # an empty list is fine
    assert HardLabels(np.array([1], dtype=np.uint8), 2).codes.dtype == np.int64


def test_soft_validation_errors():
    with pytest.raises(ValueError, match="non-negative"):
        SoftLabels(np.array([[0.5, -0.1]]))
    with pytest.raises(ValueError, match="finite"):
        SoftLabels(np.array([[np.inf, 0.0]]))
    with pytest.raises(ValueError, match="finite"):
        SoftLabels(np.array([[1e6, 0.0]]), dtype="float16")  # overflows float16
    with pytest.raises(ValueError, match="NaN"):
        SoftLabels(np.array([[np.nan, 0.5]]))
    with pytest.raises(ValueError, match="2-D"):
        SoftLabels(np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="column"):
        SoftLabels(np.zeros((3, 0)))
    with pytest.raises(ValueError, match="dtype"):
        SoftLabels(np.ones((1, 2)) / 2, dtype="float64")
    with pytest.raises(TypeError, match="real"):
        SoftLabels(np.array([["a", "b"]]))


def _hard_bytes() -> bytes:
    return HardLabels(np.arange(20) % 3, 3).to_bytes()  # 2 bits x 20 = 5 bytes payload


def _soft_bytes() -> bytes:
    return SoftLabels(np.full((3, 2), 0.5)).to_bytes()


@pytest.mark.parametrize("make", [_hard_bytes, _soft_bytes])
def test_truncated_or_extended_bytes_raise(make):
    data = make()
    for cut in (0, 1, HEADER_SIZE - 1, HEADER_SIZE, len(data) - 1):
        with pytest.raises(ValueError):
            decode(data[:cut])
    with pytest.raises(ValueError, match="payload"):
        decode(data + b"\x00")


def test_corrupt_headers_raise():
    data = bytearray(_hard_bytes())
    bad = bytearray(data)
    bad[0] = 9
    with pytest.raises(ValueError, match="unknown message kind"):
        decode(bytes(bad))
    bad = bytearray(data)
    bad[1] = 0x80
    with pytest.raises(ValueError, match="flags"):
        decode(bytes(bad))
    bad = bytearray(data)
    struct.pack_into("<I", bad, 6, 0)  # n_classes = 0
    with pytest.raises(ValueError, match="n_classes"):
        decode(bytes(bad))
    bad = bytearray(data)
    struct.pack_into("<I", bad, 2, 21)  # claims one more label than the payload holds
    with pytest.raises(ValueError, match="payload"):
        decode(bytes(bad))
    soft = bytearray(_soft_bytes())
    soft[1] = 7
    with pytest.raises(ValueError, match="flags"):
        decode(bytes(soft))


def test_corrupt_payload_raises():
    data = bytearray(HardLabels(np.array([0, 1, 2]), 3).to_bytes())
    data[HEADER_SIZE] = 0b00111111  # third label becomes symbol 3, outside 0..2
    with pytest.raises(ValueError, match="out of range"):
        decode(bytes(data))
    data = bytearray(HardLabels(np.array([0, 1, 2]), 3).to_bytes())
    data[HEADER_SIZE] |= 0b11000000  # padding bits must be zero
    with pytest.raises(ValueError, match="padding"):
        decode(bytes(data))
    soft = bytearray(SoftLabels(np.array([[0.5, 0.5]])).to_bytes())
    soft[HEADER_SIZE : HEADER_SIZE + 4] = struct.pack("<f", -1.0)
    with pytest.raises(ValueError, match="non-negative"):
        decode(bytes(soft))


def test_decode_wrong_class_and_type():
    with pytest.raises(ValueError, match="expected a SoftLabels"):
        SoftLabels.from_bytes(_hard_bytes())
    with pytest.raises(ValueError, match="expected a HardLabels"):
        HardLabels.from_bytes(_soft_bytes())
    with pytest.raises(TypeError, match="bytes"):
        decode("not bytes")
    with pytest.raises(TypeError, match="bytes"):
        decode(np.zeros(20, dtype=np.uint8).tolist())
    assert isinstance(decode(memoryview(_soft_bytes())), SoftLabels)


def test_large_message_is_fast():
    # 10^6 labels round trip well within a second (10^7 is the design target, see benchmarks)
    codes = np.random.default_rng(0).integers(0, 10, size=10**6)
    message = HardLabels(codes, 10)
    data = message.to_bytes()
    assert len(data) == HEADER_SIZE + 500_000
    np.testing.assert_array_equal(decode(data).codes, codes)
