"""GPT2Classifier on a tiny, randomly initialised GPT-2 (offline), and the movie-review loader."""

from __future__ import annotations

import copy
import pickle
import socket
import time

import numpy as np
import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

from learners import ClassAlignedClassifier, GPT2Classifier  # noqa: E402
from learners.lm.tokenizer import EOS_TOKEN, train_bpe_tokenizer  # noqa: E402

POS = "good great fine excellent wonderful lovely superb".split()
NEG = "bad awful terrible poor horrible dull boring".split()
LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["c_attn"]}


def make_texts(n: int, seed: int) -> tuple[list[str], np.ndarray]:
    """Alternating negative/positive texts of five sentiment words each."""
    rng = np.random.default_rng(seed)
    texts, y = [], []
    for i in range(n):
        positive = i % 2 == 1
        texts.append(" ".join(rng.choice(POS if positive else NEG, size=5)))
        y.append("pos" if positive else "neg")
    return texts, np.array(y)


def tiny_config(**kwargs):
    params = dict(
        n_layer=2, n_head=2, n_embd=32, n_positions=128, vocab_size=300, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    params.update(kwargs)
    return transformers.GPT2Config(**params)


def tiny(**kwargs) -> GPT2Classifier:
    params = dict(model=tiny_config(), max_epochs=10, lr=3e-3, random_state=0)
    params.update(kwargs)
    return GPT2Classifier(**params)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """A tiny model gains nothing from threads, and they thrash on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def data():
    X, y = make_texts(40, seed=0)
    X_test, y_test = make_texts(100, seed=1)
    return X, y, X_test, y_test


@pytest.fixture(scope="module")
def fitted(data):
    X, y, _, _ = data
    return tiny().fit(X, y)


@pytest.fixture
def no_network(monkeypatch):
    """Offline mode, and any attempt to open a connection fails the test."""
    attempts = []

    def refuse(self, address, *args, **kwargs):
        attempts.append(address)
        raise OSError(f"network access attempted: {address!r}")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    yield attempts
    assert attempts == [], f"network access attempted: {attempts}"


@pytest.mark.slow
def test_tiny_model_learns_seeded_and_restores_rng(data, fitted):
    X, y, X_test, y_test = data
    state = torch.random.get_rng_state()
    again = tiny().fit(X, y)
    assert torch.equal(torch.random.get_rng_state(), state)  # global RNG untouched
    accuracy = np.mean(fitted.predict(X_test) == y_test)
    assert accuracy >= 0.85  # 1.0 observed with this seed
    np.testing.assert_array_equal(fitted.predict_proba(X_test), again.predict_proba(X_test))
    proba = fitted.predict_proba(X_test[:5])
    assert proba.dtype == np.float64 and proba.shape == (5, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert fitted.classes_.tolist() == ["neg", "pos"]
    assert len(fitted.loss_curve_) == 10 and fitted.loss_curve_[-1] < fitted.loss_curve_[0]
    assert fitted.continues_training is True
    assert GPT2Classifier(warm_start=False).continues_training is False


def test_offline_tokenizer_is_trained_on_first_fit(fitted):
    tok = fitted.tokenizer_
    assert isinstance(tok, transformers.PreTrainedTokenizerFast)
    assert len(tok) <= 300 and tok.pad_token == EOS_TOKEN
    assert len(tok("excellent")["input_ids"]) == 1  # a word of the training texts is merged
    assert len(tok("ünseen words ☃")["input_ids"]) > 0  # byte-level: anything encodes
    with pytest.raises(ValueError, match="at least 257"):
        train_bpe_tokenizer(["a b"], vocab_size=100)


def test_pad_token_is_eos_and_padding_does_not_change_predictions(data):
    X, y, X_test, _ = data
    base = train_bpe_tokenizer(X, vocab_size=300)
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=base.backend_tokenizer, eos_token=EOS_TOKEN
    )
    assert tok.pad_token is None
    clf = tiny(tokenizer=tok, max_epochs=2).fit(X, y)
    assert tok.pad_token is None  # the caller's tokenizer is not changed
    assert clf.tokenizer_.pad_token == EOS_TOKEN
    assert clf.model_.config.pad_token_id == clf.tokenizer_.eos_token_id
    # a short text alone, or padded next to a long one, gets the same answer
    short, long = "good", " ".join(X_test[:6])
    alone = clf.predict_proba([short])
    padded = clf.predict_proba([short, long])[:1]
    np.testing.assert_allclose(alone, padded, atol=1e-6)
    assert clf.predict_proba([""]).shape == (1, 2)  # empty text


def test_max_length_truncates(fitted):
    clf = copy.deepcopy(fitted)
    long = " ".join(["good bad"] * 200)
    assert clf._encode([long])["input_ids"].shape[1] == 128
    clf.max_length = 8
    assert clf._encode([long, "good"])["input_ids"].shape[1] == 8
    np.testing.assert_allclose(clf.predict_proba([long]).sum(), 1.0)
    clf.max_length = 10_000  # clipped to the model's n_positions
    assert clf._encode([long])["input_ids"].shape[1] == 128


def test_truncation_keeps_the_end_of_a_long_text_by_default(fitted):
    clf = copy.deepcopy(fitted)
    clf.max_length = 8
    text = " ".join(["good"] * 50 + ["bad"] * 3)
    ids = clf.tokenizer_(text)["input_ids"]
    np.testing.assert_array_equal(clf._encode([text])["input_ids"][0].numpy(), ids[-8:])
    clf.truncation_side = "right"
    np.testing.assert_array_equal(clf._encode([text])["input_ids"][0].numpy(), ids[:8])
    clf.truncation_side = "middle"
    with pytest.raises(ValueError, match="truncation_side must be 'left' or 'right'"):
        clf.fit([text], [0])


@pytest.mark.slow
def test_lora_trains_only_adapter_and_head(data):
    X, y, X_test, y_test = data
    clf = tiny(lora=LORA).fit(X, y)
    names = set(clf.get_weights())
    assert names and all(("lora_" in n) or ("score" in n) for n in names)
    assert any("score" in n for n in names) and any("lora_A" in n for n in names)
    assert clf.n_parameters(trainable_only=True) < clf.n_parameters(trainable_only=False) / 10
    assert sum(w.size for w in clf.get_weights().values()) == clf.n_parameters()
    assert np.mean(clf.predict(X_test) == y_test) >= 0.7  # 0.89 observed
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.predict_proba(X_test), clf.predict_proba(X_test))


@pytest.mark.slow
def test_warm_start_continues_from_previous_weights(data, fitted):
    X, y, _, _ = data
    clf = copy.deepcopy(fitted)
    before = clf.get_weights()
    steps = float(clf.optimizer_.state_dict()["state"][0]["step"])
    clf.epochs_per_fit = 3
    clf.fit(X, y)
    assert clf.n_fits_ == 2 and len(clf.loss_curve_) == 13
    assert float(clf.optimizer_.state_dict()["state"][0]["step"]) == steps + 3 * 5  # optimizer kept
    assert clf.loss_curve_[-1] < fitted.loss_curve_[-1]  # loss keeps falling
    after = clf.get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    # the deep copy trained, the original did not
    assert all(np.array_equal(before[k], v) for k, v in fitted.get_weights().items())
    # warm_start=False restarts: two fits equal one fresh fit
    fresh = tiny(warm_start=False).fit(X, y).fit(X, y)
    assert fresh.n_fits_ == 1 and len(fresh.loss_curve_) == 10
    np.testing.assert_array_equal(fresh.get_weights()["score.weight"], before["score.weight"])


def test_wrapper_continues_and_passes_soft_targets(data):
    X, y, X_test, _ = data
    wrapper = ClassAlignedClassifier(tiny(max_epochs=2), classes=["neg", "pos"])
    wrapper.fit(X, y)
    soft = np.tile([0.3, 0.7], (len(X), 1))
    wrapper.fit(X, soft)  # passed straight through: accepts_soft_targets
    inner = wrapper.estimator_
    assert isinstance(inner, GPT2Classifier) and inner.n_fits_ == 2
    assert len(inner.loss_curve_) == 3  # 2 epochs, then 1 continued epoch on 40 rows
    assert wrapper.predict_proba(X_test[:3]).shape == (3, 2)


def test_soft_targets_and_sample_weight(data):
    X, y, _, _ = data
    soft = np.where((y == "pos")[:, None], [0.1, 0.9], [0.8, 0.2])
    clf = tiny(classes=["neg", "pos"], max_epochs=2).fit(X, soft, sample_weight=np.full(40, 2.0))
    assert clf.predict_proba(X[:4]).shape == (4, 2)
    with pytest.raises(ValueError, match="classes must be given"):
        tiny().fit(X, soft)
    with pytest.raises(ValueError, match="sample_weight"):
        tiny().fit(X, y, sample_weight=np.ones(3))
    with pytest.raises(TypeError, match="single string"):
        tiny().fit("good", ["pos"])


def test_missing_class_gets_a_column(data):
    X, y, _, _ = data
    clf = tiny(classes=["mixed", "neg", "pos"], max_epochs=2).fit(X, y)
    proba = clf.predict_proba(X[:4])
    assert proba.shape == (4, 3) and clf.model_.config.num_labels == 3
    assert set(clf.predict(X)) <= {"mixed", "neg", "pos"}
    with pytest.raises(ValueError, match="classes changed"):
        tiny(max_epochs=1).fit(X, y).fit([*X[:3], "meh"], ["neg", "pos", "neg", "mixed"])


def test_pickle_round_trip(data, fitted):
    X, y, X_test, _ = data
    state = torch.random.get_rng_state()
    restored = pickle.loads(pickle.dumps(fitted))
    assert torch.equal(torch.random.get_rng_state(), state)
    np.testing.assert_array_equal(restored.predict_proba(X_test), fitted.predict_proba(X_test))
    copied = copy.deepcopy(fitted)
    # both continue identically: weights, optimizer state and seeds travel along
    restored.fit(X, y)
    copied.fit(X, y)
    np.testing.assert_allclose(
        restored.predict_proba(X_test), copied.predict_proba(X_test), atol=1e-6
    )


def test_weights_interface_for_fedavg(data):
    X, y, X_test, _ = data
    a = tiny().initialize(X, y)
    b = tiny().initialize(X, y)
    assert not hasattr(a, "loss_curve_") or a.loss_curve_ == []
    wa, wb = a.get_weights(), b.get_weights()
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)  # same seed, same start
    assert all(v.dtype == np.float32 for v in wa.values())
    assert a.n_parameters() == sum(v.size for v in wa.values())
    b.fit(X, y)
    assert b.n_fits_ == 1 and len(b.loss_curve_) == 10  # first fit after initialize
    a.set_weights(b.get_weights())
    np.testing.assert_allclose(a.predict_proba(X_test), b.predict_proba(X_test), atol=1e-6)
    with pytest.raises(KeyError):
        a.set_weights({"nope": np.zeros(1)})
    with pytest.raises(ValueError, match="shape"):
        a.set_weights({"score.weight": np.zeros((1, 1))})
    with pytest.raises(ValueError, match="classes must be given"):
        tiny().initialize(X)


def test_no_download_from_config_or_local_directory(data, tmp_path, no_network):
    X, y, X_test, _ = data
    clf = tiny(max_epochs=1).fit(X, y)  # config + offline tokenizer
    clf.model_.save_pretrained(tmp_path)
    clf.tokenizer_.save_pretrained(tmp_path)
    local = GPT2Classifier(str(tmp_path), max_epochs=1, lr=3e-3, random_state=0).fit(X, y)
    assert local.predict_proba(X_test[:3]).shape == (3, 2)
    assert len(local.tokenizer_) == len(clf.tokenizer_)
    lora = GPT2Classifier(tmp_path, tokenizer=str(tmp_path), lora=LORA, random_state=0)
    assert lora.fit(X[:8], y[:8]).n_parameters() < lora.n_parameters(trainable_only=False)


@pytest.mark.slow
def test_tiny_federation_runs_two_rounds(data):
    from cotrain import FederatedCoTrainer, partition

    X, y, X_test, y_test = data
    X_arr = np.array(X, dtype=object)
    parts = partition.iid(y, n_clients=3, random_state=0)
    X_public, _ = make_texts(30, seed=2)
    clients = [tiny(max_epochs=5, random_state=i) for i in range(3)]
    start = time.perf_counter()
    trainer = FederatedCoTrainer(clients, rounds=2, random_state=0)
    trainer.fit(
        [X_arr[p].tolist() for p in parts],
        [y[p] for p in parts],
        X_public=X_public,
        eval_set=(X_test, y_test),
    )
    assert time.perf_counter() - start < 60
    assert trainer.n_rounds_ == 2
    assert trainer.predict(X_test[:5]).shape == (5,)
    for client in trainer.clients_:  # round 2 continued the model of round 1
        inner = getattr(client, "estimator_", client)
        assert isinstance(inner, GPT2Classifier) and inner.n_fits_ == 2
        assert len(inner.loss_curve_) == 6


def test_load_movie_reviews():
    from cotrain.datasets.paths import data_home
    from cotrain.datasets.text import load_movie_reviews

    try:
        root = data_home()
    except FileNotFoundError as err:
        pytest.skip(f"shared data folder absent: {err}")
    if not (root / "movie_reviews" / "review_polarity.tar.gz").is_file():
        pytest.skip(f"movie_reviews/review_polarity.tar.gz absent from {root}")
    texts, y = load_movie_reviews()
    assert len(texts) == 2000 and y.shape == (2000,)
    assert {label: int(np.sum(y == label)) for label in ("neg", "pos")} == {
        "neg": 1000,
        "pos": 1000,
    }
    assert all(isinstance(t, str) and t for t in texts)
    assert texts == load_movie_reviews(root)[0]  # deterministic order, explicit folder


def test_load_movie_reviews_missing(tmp_path):
    from cotrain.datasets.text import load_movie_reviews

    with pytest.raises(FileNotFoundError, match="review_polarity"):
        load_movie_reviews(tmp_path)
    with pytest.raises(FileNotFoundError, match="data folder"):
        load_movie_reviews(tmp_path / "absent")


def test_a_checkpoint_of_another_family_is_refused_not_rebuilt_at_random(
    data, tmp_path, no_network
):
    """transformers builds a random GPT-2 from a BERT folder (with a warning only):
    GPT2Classifier refuses such a folder before training."""
    import transformers

    X, y, _, _ = data
    config = transformers.BertConfig(
        vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64,
    )  # fmt: skip
    transformers.BertForSequenceClassification(config).save_pretrained(tmp_path)
    clf = tiny(max_epochs=1).fit(X[:8], y[:8])
    clf.tokenizer_.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="holds a 'bert' model, not GPT-2"):
        GPT2Classifier(str(tmp_path), max_epochs=1, random_state=0).fit(X[:8], y[:8])
