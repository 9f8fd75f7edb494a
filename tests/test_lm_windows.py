"""LMClassifier(long_texts="windows"): a long text read whole as overlapping windows.

Window boundaries are checked on hand-built id lists; the classifier on tiny offline BERT
(a word-level tokenizer: one token per word, so every window is a text of its own) and
GPT-2 (the byte-level BPE tokenizer, no special tokens) models built from configurations.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

import torch  # noqa: E402
from sklearn.base import clone  # noqa: E402

from learners import ClassAlignedClassifier, GPT2Classifier, LMClassifier  # noqa: E402
from learners.lm.encoding import (  # noqa: E402
    pad_batch,
    pool_windows,
    special_affixes,
    window_rows,
    window_starts,
    windows,
)
from learners.lm.tokenizer import train_bpe_tokenizer  # noqa: E402
from tests.test_gpt2 import make_texts  # noqa: E402
from tests.test_lm import tiny_config  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data():
    X, y = make_texts(20, seed=0)
    return X, y


@pytest.fixture(scope="module")
def bert_tokenizer(data, tmp_path_factory):
    """A word-level BERT tokenizer: [CLS] + one id per word + [SEP]."""
    X, _ = data
    words = sorted({w for t in X for w in t.split()})
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    return transformers.BertTokenizerFast(str(vocab))


def no_dropout(config):
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        setattr(config, name, 0.0)
    return config


def bert(tokenizer, **kwargs) -> LMClassifier:
    params = dict(
        model=no_dropout(tiny_config("bert")), tokenizer=tokenizer, max_length=6,
        long_texts="windows", classes=["neg", "pos"], random_state=0,
    )  # fmt: skip
    params.update(kwargs)
    return LMClassifier(**params)


@pytest.fixture(scope="module")
def long_text(data):
    X, _ = data
    return " ".join(X[:3])  # 15 words, one token each


# ---------------------------------------------------------------- window boundaries
def test_windows_of_a_hand_built_id_list():
    ids = list(range(100, 113))  # 13 tokens
    # width 4 (6 - [CLS] - [SEP]), stride 3: starts 0, 3, 6, then 9 (= 13 - 4, the end)
    assert windows(ids, 6, 3, 8, prefix=[1], suffix=[2]) == [
        [1, 100, 101, 102, 103, 2],
        [1, 103, 104, 105, 106, 2],
        [1, 106, 107, 108, 109, 2],
        [1, 109, 110, 111, 112, 2],
    ]
    # stride 2: starts 0, 2, 4, 6, 8 and 9 — the last overlaps its predecessor by 3
    assert window_starts(13, width=4, stride=2, max_windows=8) == [0, 2, 4, 6, 8, 9]
    # 6 would be needed, 4 allowed: spread over 0 .. 9 (0, 3, 6, 9)
    assert window_starts(13, width=4, stride=2, max_windows=4) == [0, 3, 6, 9]
    assert windows(ids, 4, 2, 4) == [ids[0:4], ids[3:7], ids[6:10], ids[9:13]]
    # one window: the one truncation keeps (left: the last tokens; right: the first)
    assert windows(ids, 6, 2, 1, [1], [2]) == [[1, *ids[-4:], 2]]
    assert windows(ids, 6, 2, 1, [1], [2], truncation_side="right") == [[1, *ids[:4], 2]]
    # stride = width: no overlap; a text that fits, or an empty one: one window
    assert windows(ids[:8], 4, 4, 8) == [ids[0:4], ids[4:8]]
    assert windows(ids[:4], 6, 2, 8, [1], [2]) == [[1, *ids[:4], 2]]
    assert windows([], 6, 2, 8, [1], [2]) == [[1, 2]]
    # every window of at most max_tokens ids, and all tokens covered
    for stride in range(1, 5):
        got = windows(ids, 6, stride, 20, [1], [2])
        assert all(len(w) <= 6 and w[0] == 1 and w[-1] == 2 for w in got)
        assert sorted({t for w in got for t in w[1:-1]}) == ids


def test_window_argument_errors():
    with pytest.raises(ValueError, match="stride must be from 1 to width=4, got 5"):
        window_starts(13, width=4, stride=5, max_windows=8)
    with pytest.raises(ValueError, match="max_windows must be at least 1"):
        window_starts(13, width=4, stride=2, max_windows=0)
    with pytest.raises(ValueError, match="max_tokens=2 leaves no room"):
        windows([5, 6], 2, 1, 8, prefix=[1], suffix=[2])


def test_rows_and_pooling_by_hand():
    rows, owner, counts = window_rows([[[1], [2], [3]], [[4]], [[5], [6]]])
    assert rows == [[1], [2], [3], [4], [5], [6]]
    assert owner.tolist() == [0, 0, 0, 1, 2, 2] and counts.tolist() == [3, 1, 2]
    probs = np.array([[0.6, 0.4], [0.3, 0.7], [0.0, 1.0], [0.25, 0.75], [1.0, 0.0], [0.5, 0.5]])
    np.testing.assert_allclose(
        pool_windows(probs, owner, counts), [[0.3, 0.7], [0.25, 0.75], [0.75, 0.25]]
    )


def test_special_affixes_of_an_encoder_and_a_decoder_tokenizer(data, bert_tokenizer):
    tok = bert_tokenizer
    assert special_affixes(tok) == ([tok.cls_token_id], [tok.sep_token_id])
    assert special_affixes(train_bpe_tokenizer(data[0], vocab_size=300)) == ([], [])


# ---------------------------------------------------------------- prediction
def test_an_encoder_reads_a_long_text_as_the_mean_of_its_windows(data, bert_tokenizer, long_text):
    X, y = data
    clf = bert(bert_tokenizer, max_epochs=5, lr=1e-2).fit(X, y)  # 2 windows per text
    tok = bert_tokenizer
    cls, sep = tok.cls_token_id, tok.sep_token_id
    ids = tok(long_text, add_special_tokens=False)["input_ids"]
    assert len(ids) == 15
    # max_length 6: 4 words per window, stride 2: starts 0, 2, ..., 10 and 11 (= 15 - 4)
    expected = [[cls, *ids[s : s + 4], sep] for s in (0, 2, 4, 6, 8, 10, 11)]
    assert clf._token_ids([long_text], windowed=True) == [expected]

    words = long_text.split()
    window_texts = [" ".join(words[s : s + 4]) for s in (0, 2, 4, 6, 8, 10, 11)]
    short = " ".join(X[5].split()[:3])  # 5 tokens: fits one window
    got = clf.predict_proba([long_text, short])
    clf.long_texts = "truncate"
    per_window = clf.predict_proba(window_texts)  # each fits: read whole, as its window
    truncated = clf.predict_proba([long_text])[0]  # [CLS] + its last 4 words + [SEP]
    np.testing.assert_allclose(got[0], per_window.mean(axis=0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[1], clf.predict_proba([short])[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(truncated, per_window[-1], rtol=1e-6, atol=1e-7)
    assert np.ptp(per_window[:, 0]) > 1e-3  # the windows disagree: the mean is not any one
    assert abs(got[0, 0] - truncated[0]) > 1e-5

    # at most 3 windows: spread over starts 0 .. 11 -> 0, 6 (5.5 rounded up), 11
    clf.set_params(long_texts="windows", max_windows=3)
    spread = [[cls, *ids[s : s + 4], sep] for s in (0, 6, 11)]
    assert clf._token_ids([long_text], windowed=True) == [spread]
    np.testing.assert_allclose(
        clf.predict_proba([long_text])[0],
        per_window[[0, 3, 6]].mean(axis=0),
        rtol=1e-6,
        atol=1e-7,
    )
    clf.set_params(max_windows=1)  # the one window truncation keeps: the same input
    np.testing.assert_array_equal(clf.predict_proba([long_text])[0], truncated)


def test_a_decoder_window_mean_matches_direct_model_calls(data):
    X, y = data
    long = " ".join(X)  # about 100 words
    clf = GPT2Classifier(
        tiny_config("gpt2"), max_length=16, window_stride=10, max_windows=50,
        long_texts="windows", max_epochs=2, lr=3e-3, random_state=0,
    ).fit(X, y)  # fmt: skip
    ids = clf.tokenizer_(long)["input_ids"]
    assert len(ids) > 16 and special_affixes(clf.tokenizer_) == ([], [])
    starts = [*range(0, len(ids) - 16, 10), len(ids) - 16]
    assert clf._token_ids([long], windowed=True)[0] == [ids[s : s + 16] for s in starts]
    with torch.inference_mode():
        direct = [
            torch.softmax(clf.model_(**pad_batch([ids[s : s + 16]], 0, "cpu")).logits, -1)[0]
            for s in starts
        ]
    expected = torch.stack(direct).mean(dim=0).double().numpy()
    np.testing.assert_allclose(clf.predict_proba([long])[0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_a_text_that_fits_gets_the_same_probabilities_in_both_modes(data, bert_tokenizer, family):
    X, y = data
    if family == "bert":
        clf = bert(bert_tokenizer, max_length=16, max_epochs=2).fit(X, y)
    else:
        clf = GPT2Classifier(
            tiny_config("gpt2"), max_length=64, long_texts="windows", max_epochs=2,
            random_state=0,
        ).fit(X, y)  # fmt: skip
    short = X[:4]
    windowed = clf._token_ids(short, windowed=True)
    assert windowed == [[ids] for ids in clf._token_ids(short)]  # one window: the same ids
    windowed_proba = clf.predict_proba(short)
    one_by_one = [clf.predict_proba([t]) for t in short]
    clf.long_texts = "truncate"
    np.testing.assert_array_equal(clf.predict_proba(short), windowed_proba)
    for text, alone in zip(short, one_by_one, strict=True):
        np.testing.assert_array_equal(clf.predict_proba([text]), alone)


def test_windows_are_cut_once_per_distinct_text(data, bert_tokenizer, long_text, monkeypatch):
    X, _ = data
    clf = bert(bert_tokenizer).initialize(X)
    calls: list[int] = []
    tokenizer_type = type(clf.tokenizer_)
    original = tokenizer_type.__call__

    def counting(self, text, *args, **kwargs):
        calls.append(1 if isinstance(text, str) else len(text))
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(tokenizer_type, "__call__", counting)
    first = clf.predict_proba([long_text, X[0], long_text])
    assert calls == [1, 1, 2]  # the special tokens (twice: with and without), 2 texts
    np.testing.assert_allclose(first[0], first[2], rtol=1e-6)
    clf.predict_proba([X[0], long_text])
    assert calls == [1, 1, 2]  # cached
    clf.max_windows = 3  # another setting: cut again
    clf.predict_proba([long_text])
    assert calls == [1, 1, 2, 1]


# ---------------------------------------------------------------- training
def test_fit_trains_every_window_with_its_texts_weight_divided(
    data, bert_tokenizer, long_text, monkeypatch
):
    X, _ = data
    short = " ".join(X[5].split()[:3])  # one window
    clf = bert(bert_tokenizer)
    seen = {}

    def record(ids, targets, weights, epochs):
        seen.update(ids=ids, targets=targets.tolist(), weights=weights.tolist())

    monkeypatch.setattr(clf, "_train", record)
    clf.fit([long_text, short], ["pos", "neg"], sample_weight=[2.0, 0.5])
    assert len(seen["ids"]) == 8  # 7 windows of the long text, then the short one
    assert seen["ids"][:7] == clf._token_ids([long_text], windowed=True)[0]
    assert seen["targets"] == [[0.0, 1.0]] * 7 + [[1.0, 0.0]]
    np.testing.assert_allclose(seen["weights"], [2 / 7] * 7 + [0.5], rtol=1e-7)

    # soft targets are repeated per window too
    clf.fit([long_text, short], np.array([[0.2, 0.6], [1.0, 1.0]]))
    np.testing.assert_allclose(seen["targets"], [[0.25, 0.75]] * 7 + [[0.5, 0.5]])
    np.testing.assert_allclose(seen["weights"], [1 / 7] * 7 + [1.0], rtol=1e-7)


def test_a_long_text_trains_like_its_windows_at_a_share_of_its_weight(bert_tokenizer, long_text):
    """One epoch, one batch: the long text in windows mode moves the weights exactly as its
    7 windows given as texts with weight 1/7 each (and not as with weight 1 each)."""
    words = long_text.split()
    window_texts = [" ".join(words[s : s + 4]) for s in (0, 2, 4, 6, 8, 10, 11)]
    common = dict(max_epochs=1, batch_size=16, lr=1e-2)
    windowed = bert(bert_tokenizer, **common).initialize([long_text])
    before = windowed.get_weights()
    windowed.fit([long_text], ["pos"])
    shared = bert(bert_tokenizer, long_texts="truncate", **common)
    shared.fit(window_texts, ["pos"] * 7, sample_weight=np.full(7, 1 / 7))
    whole = bert(bert_tokenizer, long_texts="truncate", **common)
    whole.fit(window_texts, ["pos"] * 7)
    after, expected = windowed.get_weights(), shared.get_weights()
    moved = [name for name in after if not np.array_equal(after[name], before[name])]
    assert moved  # it trained
    for name in after:
        np.testing.assert_allclose(after[name], expected[name], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(windowed.loss_curve_, shared.loss_curve_, rtol=1e-5)
    head = "classifier.weight"
    assert not np.allclose(after[head], whole.get_weights()[head], rtol=1e-5, atol=1e-7)


def test_gpt2_fits_and_predicts_long_and_short_texts_with_windows(data):
    X, y = data
    texts = [" ".join(X[i : i + 8]) if i % 3 == 0 else X[i] for i in range(len(X))]
    clf = GPT2Classifier(
        tiny_config("gpt2"), max_length=24, long_texts="windows", max_windows=4,
        max_epochs=3, lr=3e-3, batch_size=4, random_state=0,
    ).fit(texts, y)  # fmt: skip
    n_windows = [len(w) for w in clf._token_ids(texts, windowed=True)]
    assert max(n_windows) == 4 and min(n_windows) == 1
    proba = clf.predict_proba(texts)
    assert proba.shape == (len(texts), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    assert len(clf.loss_curve_) == 3 and all(np.isfinite(clf.loss_curve_))


# ---------------------------------------------------------------- parameters
def test_window_parameters_round_trip(data, bert_tokenizer, long_text):
    X, y = data
    params = dict(long_texts="windows", window_stride=3, max_windows=5)
    for cls in (LMClassifier, GPT2Classifier):
        clf = cls(tiny_config("gpt2"), **params)
        got = clf.get_params()
        assert {k: got[k] for k in params} == params
        assert {k: clone(clf).get_params()[k] for k in params} == params
    defaults = LMClassifier("folder").get_params()
    assert (defaults["long_texts"], defaults["window_stride"], defaults["max_windows"]) == (
        "truncate",
        None,
        8,
    )
    fitted = bert(bert_tokenizer, window_stride=3, max_windows=5, max_epochs=1).fit(X, y)
    restored = pickle.loads(pickle.dumps(fitted))
    assert {k: restored.get_params()[k] for k in params} == params
    np.testing.assert_array_equal(
        restored.predict_proba([long_text, X[0]]), fitted.predict_proba([long_text, X[0]])
    )


def test_a_cotrain_checkpoint_keeps_the_window_parameters(
    data, bert_tokenizer, long_text, tmp_path
):
    pytest.importorskip("skops")
    from cotrain.persistence.checkpoint import estimator_types, load_model, save_model

    X, y = data
    template = bert(bert_tokenizer, window_stride=3, max_windows=5, max_epochs=1)
    model = ClassAlignedClassifier(template, classes=["neg", "pos"]).fit(X, y)
    save_model(model, tmp_path, "client-0")
    restored = load_model(tmp_path, "client-0", estimator_types([model])).estimator_
    assert (restored.long_texts, restored.window_stride, restored.max_windows) == (
        "windows",
        3,
        5,
    )
    np.testing.assert_array_equal(
        restored.predict_proba([long_text, X[0]]), model.predict_proba([long_text, X[0]])
    )


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"long_texts": "whole"}, "long_texts must be 'truncate' or 'windows', got 'whole'"),
        ({"long_texts": None}, "long_texts must be 'truncate' or 'windows'"),
        ({"window_stride": 0}, "window_stride must be None or an integer >= 1, got 0"),
        ({"window_stride": 2.5}, "window_stride must be None or an integer >= 1"),
        ({"window_stride": True}, "window_stride must be None or an integer >= 1"),
        ({"max_windows": 0}, "max_windows must be an integer >= 1, got 0"),
        ({"max_windows": "8"}, "max_windows must be an integer >= 1"),
    ],
)
def test_bad_window_parameters_are_refused_before_anything_is_loaded(data, params, match):
    X, y = data
    clf = LMClassifier(tiny_config("llama"), **params)
    with pytest.raises(ValueError, match=match):
        clf.fit(X[:4], y[:4])
    assert not hasattr(clf, "model_")


def test_window_sizes_the_tokenizer_cannot_serve_are_refused(data, bert_tokenizer, long_text):
    X, _ = data
    clf = bert(bert_tokenizer, window_stride=5).initialize(X)  # 4 words per window
    with pytest.raises(ValueError, match="window_stride must be at most a window's 4 text"):
        clf.predict_proba([long_text])
    clf.set_params(window_stride=None, max_length=2)  # [CLS] + [SEP] fill it
    with pytest.raises(ValueError, match="max_length=2 leaves no room for text"):
        clf.predict_proba([long_text])
