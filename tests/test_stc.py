"""Sparse ternary compression and top-k for FedAvg: hand-computed messages, exact bytes."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import load_digits

from cotrain.baselines import DPFedAvg, FedAvg
from cotrain.compression import (
    CompressedExchange,
    SparseTernaryCompression,
    TopK,
    make_compression,
)
from cotrain.compression.golomb import (
    expected_position_bits,
    golomb_decode,
    golomb_encode,
    golomb_parameter,
    pack_bits,
)


class NumpySoftmax(ClassifierMixin, BaseEstimator):
    """Full-batch softmax regression with the torch learners' weight interface (no torch)."""

    def __init__(self, classes=None, max_epochs=1, epochs_per_fit=1, lr=0.5, warm_start=True):
        self.classes = classes
        self.max_epochs = max_epochs
        self.epochs_per_fit = epochs_per_fit
        self.lr = lr
        self.warm_start = warm_start

    def initialize(self, X, y=None):
        self.classes_ = np.asarray(self.classes)
        self.W_ = np.zeros((np.shape(X)[1], len(self.classes_)), dtype=np.float32)
        self.b_ = np.zeros(len(self.classes_), dtype=np.float32)
        return self

    def get_weights(self, trainable_only=True):
        return {"W": self.W_.copy(), "b": self.b_.copy()}

    def set_weights(self, weights):
        self.W_ = np.asarray(weights["W"], dtype=np.float32).copy()
        self.b_ = np.asarray(weights["b"], dtype=np.float32).copy()
        return self

    def fit(self, X, y, sample_weight=None):
        onehot = (np.asarray(y)[:, None] == self.classes_[None, :]).astype(np.float32)
        for _ in range(self.epochs_per_fit):
            err = self.predict_proba(X) - onehot
            self.W_ = (self.W_ - self.lr * X.T @ err / len(X)).astype(np.float32)
            self.b_ = (self.b_ - self.lr * err.mean(axis=0)).astype(np.float32)
        return self

    def predict_proba(self, X):
        z = np.asarray(X, dtype=np.float32) @ self.W_ + self.b_
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    parts = np.array_split(np.arange(900), 3)
    return [X[p] for p in parts], [y[p] for p in parts], (X[900:], y[900:])


# ------------------------------------------------------------------------- Golomb
def test_golomb_parameter_and_expected_bits_follow_the_thesis():
    # b* = 1 + floor(log2(log(φ-1) / log(1-p)))
    assert golomb_parameter(0.01) == 6  # log(0.618)/log(0.99) = 47.9 -> 1 + 5
    assert golomb_parameter(1 / 400) == 8  # 192.2 -> 1 + 7
    assert golomb_parameter(0.3) == 1  # 1.35 -> 1 + 0
    assert golomb_parameter(0.5) == 0 and golomb_parameter(1.0) == 0
    # eq. 3.9 at p = 0.01: 6 + 1 / (1 - 0.99**64)
    assert expected_position_bits(0.01) == pytest.approx(6 + 1 / (1 - 0.99**64))
    # measured on Bernoulli(p) positions the code spends that many bits per position
    rng = np.random.default_rng(0)
    pos = np.flatnonzero(rng.random(400_000) < 0.01)
    bits = golomb_encode(pos, golomb_parameter(0.01))
    assert len(bits) / len(pos) == pytest.approx(expected_position_bits(0.01), rel=0.02)


def test_golomb_codes_known_positions_bit_for_bit():
    # gaps 4, 1, 16 -> d-1 = 3, 0, 15 with b = 3: q = 0, 0, 1 and r = 3, 0, 7
    bits = golomb_encode([3, 4, 20], b=3)
    assert "".join(map(str, bits)) == "0011" + "0000" + "10111"
    assert pack_bits(bits) == bytes([0b00110000, 0b10111000])
    pos, signs, end = golomb_decode(bits, 3, 3)
    assert pos.tolist() == [3, 4, 20] and signs is None and end == 13
    # with a sign bit after every codeword
    bits = golomb_encode([0, 5], b=2, signs=[True, False])
    assert "".join(map(str, bits)) == "0001" + "10000"
    pos, signs, _ = golomb_decode(bits, 2, 2, signs=True)
    assert pos.tolist() == [0, 5] and signs.tolist() == [True, False]


@pytest.mark.parametrize("b", [0, 1, 4, 6, 9])
def test_golomb_round_trip(b):
    rng = np.random.default_rng(b)
    pos = np.sort(rng.choice(50_000, size=300, replace=False))
    signs = rng.random(300) < 0.5
    bits = golomb_encode(pos, b, signs=signs)
    got, got_signs, end = golomb_decode(bits, b, 300, signs=True)
    assert end == len(bits)
    np.testing.assert_array_equal(got, pos)
    np.testing.assert_array_equal(got_signs, signs)
    gaps = np.diff(pos, prepend=-1) - 1
    assert len(bits) == int(np.sum((gaps >> b) + 1 + b + 1))


def test_golomb_rejects_bad_input():
    with pytest.raises(ValueError, match="strictly increasing"):
        golomb_encode([3, 3], 2)
    with pytest.raises(ValueError, match="b must"):
        golomb_encode([1], -1)
    with pytest.raises(ValueError, match="ends after 1 of 2"):
        golomb_decode(golomb_encode([1], 2), 2, 2)
    with pytest.raises(ValueError, match="sparsity"):
        golomb_parameter(0.0)


# ---------------------------------------------------------------------------- STC
def test_stc_of_a_small_vector_by_hand():
    update = {"w": np.array([0.5, -2.0, 0.1, 1.0, -0.3, 0.0, 0.2, -1.5, 0.05, 0.4])}
    stc = SparseTernaryCompression(sparsity=0.3)  # k = 3, b* = 1
    message, residual = stc.compress(update)
    decoded = stc.decompress(message, {"w": (10,)})["w"]
    # top 3 by magnitude: -2.0, -1.5, 1.0; μ = 4.5 / 3 = 1.5
    assert decoded.tolist() == [0, -1.5, 0, 1.5, 0, 0, 0, -1.5, 0, 0]
    assert decoded.dtype == np.float32
    np.testing.assert_allclose(
        residual["w"], [0.5, -0.5, 0.1, -0.5, -0.3, 0.0, 0.2, 0.0, 0.05, 0.4]
    )
    # positions 1, 3, 7: gaps 2, 2, 4 -> (q, r) = (0, 1), (0, 1), (1, 1); signs 1, 0, 1
    # bits 011 010 1011 (10) -> 2 bytes after the float32 μ
    assert message == struct.pack("<f", 1.5) + bytes([0b01101010, 0b11000000])


def test_stc_keeps_one_mean_per_tensor_and_k_per_tensor():
    rng = np.random.default_rng(1)
    update = {"a": rng.normal(size=(20, 10)), "b": rng.normal(size=7)}
    message, _ = SparseTernaryCompression(sparsity=0.05).compress(update)
    decoded = SparseTernaryCompression(sparsity=0.05).decompress(message, update)
    assert np.count_nonzero(decoded["a"]) == 10  # floor(200 · 0.05)
    assert np.count_nonzero(decoded["b"]) == 1  # max(floor(0.35), 1)
    kept = np.abs(update["a"]).ravel()
    top = np.sort(kept)[-10:]
    np.testing.assert_allclose(np.abs(decoded["a"][decoded["a"] != 0]), top.mean(), rtol=1e-6)
    assert np.flatnonzero(decoded["a"]).tolist() == np.sort(np.argsort(kept)[-10:]).tolist()
    assert (
        np.sign(decoded["a"][decoded["a"] != 0]).tolist()
        == np.sign(update["a"].ravel()[np.flatnonzero(decoded["a"])]).tolist()
    )


def test_residual_accumulates_over_two_rounds():
    stc = SparseTernaryCompression(sparsity=0.25)  # k = 1 of 4
    u1 = {"w": np.array([3.0, 1.0, -2.0, 0.5])}
    u2 = {"w": np.array([0.0, 0.5, -0.25, 0.75])}
    m1, r1 = stc.compress(u1)
    assert stc.decompress(m1, {"w": (4,)})["w"].tolist() == [3.0, 0, 0, 0]
    assert r1["w"].tolist() == [0.0, 1.0, -2.0, 0.5]
    m2, r2 = stc.compress(u2, r1)
    # u2 + r1 = [0, 1.5, -2.25, 1.25]: the residual's -2 wins over u2's own largest 0.75
    assert stc.decompress(m2, {"w": (4,)})["w"].tolist() == [0, 0, -2.25, 0]
    assert r2["w"].tolist() == [0.0, 1.5, 0.0, 1.25]
    # nothing is lost: what was sent plus what is held back is what was produced
    sent = stc.decompress(m1, {"w": (4,)})["w"] + stc.decompress(m2, {"w": (4,)})["w"]
    np.testing.assert_allclose(sent + r2["w"], u1["w"] + u2["w"])
    # without error accumulation round 2 sends u2's own top entry and keeps nothing
    plain = SparseTernaryCompression(sparsity=0.25, residuals=False)
    m2, r2 = plain.compress(u2, None)
    assert plain.decompress(m2, {"w": (4,)})["w"].tolist() == [0, 0, 0, 0.75]
    assert r2["w"].tolist() == [0.0] * 4


def test_topk_sends_values_and_positions_exactly():
    update = {"w": np.array([0.5, -2.0, 0.1, 1.0, -0.3, 0.0, 0.2, -1.5, 0.05, 0.4])}
    topk = TopK(sparsity=0.3, residuals=False)
    message, residual = topk.compress(update)
    assert topk.decompress(message, {"w": (10,)})["w"].tolist() == [
        0,
        -2.0,
        0,
        1.0,
        0,
        0,
        0,
        -1.5,
        0,
        0,
    ]
    # 3 float32 values, then positions 1, 3, 7 coded 01 01 101 (7 bits) -> 1 byte
    assert message == struct.pack("<3f", -2.0, 1.0, -1.5) + bytes([0b01011010])
    assert not residual["w"].any()
    _, with_residual = TopK(sparsity=0.3).compress(update)
    np.testing.assert_allclose(with_residual["w"][[0, 2, 9]], [0.5, 0.1, 0.4])


def test_malformed_messages_are_refused():
    stc = SparseTernaryCompression(sparsity=0.01)
    message, _ = stc.compress({"w": np.arange(1000.0)})
    assert stc.decompress(message, {"w": (1000,)})["w"][999] > 0
    with pytest.raises(ValueError, match="ends after"):
        stc.decompress(message[:5], {"w": (1000,)})
    with pytest.raises(ValueError, match="shorter than its header"):
        stc.decompress(message[:2], {"w": (1000,)})
    with pytest.raises(ValueError, match="beyond its last position"):
        stc.decompress(message + b"\x00", {"w": (1000,)})


def test_bad_parameters_name_the_argument():
    update = {"w": np.ones(4)}
    with pytest.raises(ValueError, match="sparsity must be"):
        SparseTernaryCompression(sparsity=0).compress(update)
    with pytest.raises(ValueError, match="sparsity must be"):
        TopK(sparsity=1.5).compress(update)
    with pytest.raises(ValueError, match="sparsity_down must be"):
        SparseTernaryCompression(sparsity_down=-1).check()
    with pytest.raises(TypeError, match="residuals must be"):
        SparseTernaryCompression(residuals="yes").compress(update)
    with pytest.raises(TypeError, match="downstream must be"):
        TopK(downstream=None).check()
    with pytest.raises(TypeError, match="update must be"):
        SparseTernaryCompression().compress([1.0, 2.0])
    with pytest.raises(ValueError, match=r"residual\['w'\] has shape"):
        SparseTernaryCompression().compress(update, {"w": np.ones(3)})
    with pytest.raises(ValueError, match="compression must be"):
        make_compression("gzip")
    with pytest.raises(TypeError, match="compression must be"):
        make_compression(42)
    assert isinstance(make_compression("topk"), TopK)


# -------------------------------------------------------------------------- FedAvg
def test_fedavg_history_bytes_are_the_encoded_messages(digits):
    X, y, test = digits
    stc = SparseTernaryCompression(sparsity=0.05)
    fedavg = FedAvg(NumpySoftmax(classes=list(range(10))), rounds=3, compression=stc)
    fedavg.fit(X, y, eval_set=test)
    exchange = fedavg.compression_
    assert isinstance(exchange, CompressedExchange)
    dense = 4 * (64 * 10 + 10)
    # W: k = floor(640 · 0.05) = 32, b: k = 1; b* = golomb_parameter(0.05) = 3
    b = golomb_parameter(0.05)
    shapes = {"W": (64, 10), "b": (10,)}
    for record, sizes in zip(fedavg.history_, exchange.uplink_sizes, strict=True):
        assert record.bytes_up == sum(sizes)
        assert len(sizes) == 3
    for message in exchange.last_messages:
        decoded = stc.decompress(message, shapes)
        assert [np.count_nonzero(v) for v in decoded.values()] == [32, 1]
        bits = 0
        for v in decoded.values():
            gaps = np.diff(np.flatnonzero(v), prepend=-1) - 1
            bits += int(np.sum((gaps >> b) + 1 + b + 1))
        assert len(message) == 4 * 2 + math.ceil(bits / 8)
    assert fedavg.history_[-1].bytes_up == sum(len(m) for m in exchange.last_messages)
    # downstream: dense weights at the first round, then the previous round's broadcast
    assert fedavg.history_[0].bytes_down == 3 * dense
    for t in (1, 2):
        assert fedavg.history_[t].bytes_down == 3 * exchange.broadcast_sizes[t - 1]
    assert all(s < dense / 20 for s in exchange.broadcast_sizes)


def test_fedavg_one_round_is_the_decoded_average(digits):
    X, y, _ = digits
    sizes = [100, 200, 300]
    X, y = (
        [Xi[:n] for Xi, n in zip(X, sizes, strict=True)],
        [yi[:n] for yi, n in zip(y, sizes, strict=True)],
    )
    topk = TopK(sparsity=0.1, downstream=False)
    fedavg = FedAvg(NumpySoftmax(classes=list(range(10))), rounds=1, compression=topk).fit(X, y)
    shapes = {"W": (64, 10), "b": (10,)}
    decoded = [topk.decompress(m, shapes) for m in fedavg.compression_.last_messages]
    for name in shapes:  # θ0 = 0: the global weights are the size-weighted mean update
        expected = sum(n * d[name] for n, d in zip(sizes, decoded, strict=True)) / sum(sizes)
        np.testing.assert_allclose(fedavg.global_model_.get_weights()[name], expected, rtol=1e-6)
    # every client's update is exactly its message plus its residual
    for i, client in enumerate(fedavg.clients_):
        for name in shapes:
            np.testing.assert_allclose(
                decoded[i][name] + fedavg.compression_.residuals[i][name],
                client.get_weights()[name],
                rtol=1e-6,
                atol=1e-7,
            )
    assert fedavg.history_[0].bytes_down == 3 * 4 * 650  # downstream=False: dense


def test_partial_participation_downloads_the_missed_broadcasts(digits):
    X, y, _ = digits
    X, y = X + X, y + y  # 6 clients, 3 a round
    fedavg = FedAvg(
        NumpySoftmax(classes=list(range(10))),
        rounds=4,
        participation=0.5,
        compression="stc",
        random_state=0,
    ).fit(X, y)
    sizes = fedavg.compression_.broadcast_sizes
    holds = {}
    for t, record in enumerate(fedavg.history_, start=1):
        expected = sum(
            4 * 650 if i not in holds else min(4 * 650, sum(sizes[holds[i] : t - 1]))
            for i in record.clients
        )
        assert record.bytes_down == expected
        holds.update({i: t - 1 for i in record.clients})


def test_stc_fedavg_learns_nearly_as_well_as_dense(digits):
    X, y, test = digits
    proto = NumpySoftmax(classes=list(range(10)))
    dense = FedAvg(proto, rounds=20).fit(X, y, eval_set=test)
    stc = FedAvg(proto, rounds=20, compression=SparseTernaryCompression(0.05)).fit(
        X, y, eval_set=test
    )
    dense_acc, stc_acc = dense.history_[-1].mean_accuracy, stc.history_[-1].mean_accuracy
    assert dense_acc > 0.85
    assert stc_acc > dense_acc - 0.03  # measured: 0.899 vs 0.910
    up_dense = sum(r.bytes_up for r in dense.history_)
    up_stc = sum(r.bytes_up for r in stc.history_)
    assert up_dense / up_stc > 30


def test_clone_get_params_and_validation_before_training(digits):
    X, y, _ = digits
    stc = SparseTernaryCompression(sparsity=0.02, downstream=False)
    fedavg = FedAvg(NumpySoftmax(classes=list(range(10))), compression=stc)
    params = fedavg.get_params(deep=True)
    assert params["compression"] is stc and params["compression__sparsity"] == 0.02
    copy = clone(fedavg)
    assert copy.compression is not stc
    assert copy.compression.get_params() == stc.get_params()
    assert FedAvg(NumpySoftmax()).get_params()["compression"] is None
    with pytest.raises(ValueError, match="compression must be"):
        FedAvg(NumpySoftmax(classes=list(range(10))), compression="zip").fit(X, y)
    with pytest.raises(ValueError, match="sparsity must be"):
        FedAvg(NumpySoftmax(), compression=SparseTernaryCompression(2.0)).fit(X, y)
    # DP-FedAvg has no compression and stays dense
    dp = DPFedAvg(NumpySoftmax(classes=list(range(10))), rounds=1, noise_multiplier=0.0)
    assert "compression" not in dp.get_params()
    dp.fit(X, y)
    assert dp.compression_ is None and dp.history_[0].bytes_up == 3 * 4 * 650


@pytest.mark.slow
def test_fedavg_stc_with_a_torch_learner(digits):
    pytest.importorskip("torch")
    from learners import TorchClassifier
    from learners.modules import MLP

    X, y, test = digits
    learner = TorchClassifier(
        MLP, module_params={"hidden": (16,)}, lr=1e-2, random_state=0, classes=list(range(10))
    )
    fedavg = FedAvg(learner, rounds=2, compression="stc", random_state=0).fit(X, y, eval_set=test)
    shapes = {k: v.shape for k, v in fedavg.global_model_.get_weights().items()}
    for message in fedavg.compression_.last_messages:
        decoded = SparseTernaryCompression().decompress(message, shapes)
        assert decoded.keys() == shapes.keys()
    assert fedavg.history_[-1].bytes_up == sum(map(len, fedavg.compression_.last_messages))
    assert fedavg.history_[-1].bytes_up < 3 * 4 * sum(math.prod(s) for s in shapes.values()) / 30


def test_the_compression_package_imports_nothing_else_from_cotrain():
    import ast
    from pathlib import Path

    import cotrain.compression

    for path in Path(cotrain.compression.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                assert name.split(".")[0] != "cotrain" or name.startswith("cotrain.compression"), (
                    f"{path.name} imports {name}"
                )
