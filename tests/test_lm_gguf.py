"""LMClassifier on a GGUF file written in the test with the ``gguf`` package.

The file holds a tiny Llama (one layer, width 32) and, in its metadata, the byte-level BPE
tokenizer trained here (``tokenizer.ggml.model = "gpt2"``: tokens, merges, token types).
Its token embedding is stored as float16 and one projection as Q8_0 blocks, so the
loader's dequantisation is exercised; transformers reads it through its GGUF loader
(``LMClassifier(folder, gguf_file="tiny.gguf")``), offline.
"""

from __future__ import annotations

import json
import pickle
import shutil

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("accelerate")  # transformers loads GGUF files only with it
gguf = pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

from learners import GPT2Classifier, LMClassifier  # noqa: E402
from learners.lm.tokenizer import EOS_TOKEN, train_bpe_tokenizer  # noqa: E402
from tests.test_gpt2 import make_texts, no_network, one_thread  # noqa: E402, F401

HIDDEN, FFN, HEADS, POSITIONS = 32, 64, 2, 64
CONTROL, NORMAL = 3, 1  # llama.cpp's token types


def permute(weight: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's reordering of the q/k rows for its rotary embedding (transformers undoes it)."""
    rows = weight.shape[0]
    return (
        weight.reshape(n_head, 2, rows // n_head // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def write_tiny_llama(path, tokenizer) -> dict[str, np.ndarray]:
    """Write a one-layer Llama GGUF with `tokenizer` in its metadata.

    Returns the values the file holds for each tensor, as float32 (after float16 or Q8_0
    rounding).
    """
    vocab = tokenizer.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda item: item[1])]
    assert tokens[0] == EOS_TOKEN
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny")
    writer.add_block_count(1)
    writer.add_context_length(POSITIONS)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_merges(merges)
    writer.add_token_types([CONTROL if t == EOS_TOKEN else NORMAL for t in tokens])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    writer.add_pad_token_id(0)

    rng = np.random.default_rng(0)
    held: dict[str, np.ndarray] = {}

    def tensor(name: str, *shape: int, kind: str = "f32") -> None:
        values = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if kind == "f16":
            writer.add_tensor(name, values.astype(np.float16))
            held[name] = values.astype(np.float16).astype(np.float32)
        elif kind == "q8_0":
            q8 = gguf.GGMLQuantizationType.Q8_0
            blocks = gguf.quants.quantize(values, q8)
            writer.add_tensor(name, blocks, raw_shape=blocks.shape, raw_dtype=q8)
            held[name] = gguf.quants.dequantize(blocks, q8)
            assert not np.array_equal(held[name], values)  # really rounded
        else:
            writer.add_tensor(name, values)
            held[name] = values

    tensor("token_embd.weight", len(tokens), HIDDEN, kind="f16")
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(HIDDEN, np.float32))
    tensor("blk.0.attn_q.weight", HIDDEN, HIDDEN)
    tensor("blk.0.attn_k.weight", HIDDEN, HIDDEN)
    tensor("blk.0.attn_v.weight", HIDDEN, HIDDEN, kind="q8_0")
    tensor("blk.0.attn_output.weight", HIDDEN, HIDDEN)
    writer.add_tensor("blk.0.ffn_norm.weight", np.ones(HIDDEN, np.float32))
    tensor("blk.0.ffn_gate.weight", FFN, HIDDEN)
    tensor("blk.0.ffn_up.weight", FFN, HIDDEN)
    tensor("blk.0.ffn_down.weight", HIDDEN, FFN)
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))  # no output.weight: tied
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return held


@pytest.fixture(scope="module")
def data():
    X, y = make_texts(40, seed=0)
    X_test, y_test = make_texts(100, seed=1)
    return X, y, X_test, y_test


@pytest.fixture(scope="module")
def written(tmp_path_factory, data):
    """(folder, tensors as written, the tokenizer in the file's metadata)."""
    X, _, _, _ = data
    folder = tmp_path_factory.mktemp("gguf")
    tokenizer = train_bpe_tokenizer(X, vocab_size=300)
    held = write_tiny_llama(folder / "tiny.gguf", tokenizer)
    return folder, held, tokenizer


def load(folder, **kwargs) -> LMClassifier:
    params = dict(gguf_file="tiny.gguf", max_epochs=10, lr=3e-3, random_state=0)
    return LMClassifier(str(folder), **{**params, **kwargs})


def weights(clf: LMClassifier) -> dict[str, np.ndarray]:
    model = clf.model_
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return {k: v.detach().numpy() for k, v in base.state_dict().items()}


@pytest.mark.usefixtures("no_network")
def test_gguf_file_gives_its_config_dequantised_weights_and_tokenizer(data, written):
    X, y, _, _ = data
    folder, held, tokenizer = written
    clf = load(folder).initialize(X, y)
    model = clf.model_
    assert type(model).__name__ == "LlamaForSequenceClassification"
    assert clf.family_.name == "llama" and clf.family_.head == ("score",)
    config = model.config
    assert (config.model_type, config.hidden_size, config.intermediate_size) == ("llama", 32, 64)
    assert (config.num_hidden_layers, config.num_attention_heads) == (1, 2)
    assert config.max_position_embeddings == POSITIONS
    assert config.vocab_size == len(tokenizer) == held["token_embd.weight"].shape[0]
    assert model.dtype == torch.float32  # float16 and Q8_0 tensors dequantised
    w = weights(clf)
    expected = {
        "model.embed_tokens.weight": "token_embd.weight",  # float16 in the file
        "model.layers.0.self_attn.v_proj.weight": "blk.0.attn_v.weight",  # Q8_0 blocks
        "model.layers.0.self_attn.o_proj.weight": "blk.0.attn_output.weight",
        "model.layers.0.mlp.gate_proj.weight": "blk.0.ffn_gate.weight",
        "model.layers.0.mlp.up_proj.weight": "blk.0.ffn_up.weight",
        "model.layers.0.mlp.down_proj.weight": "blk.0.ffn_down.weight",
    }
    for name, gguf_name in expected.items():
        np.testing.assert_array_equal(w[name], held[gguf_name], err_msg=name)
    for proj, gguf_name in (("q_proj", "blk.0.attn_q.weight"), ("k_proj", "blk.0.attn_k.weight")):
        loaded = w[f"model.layers.0.self_attn.{proj}.weight"]
        np.testing.assert_array_equal(permute(loaded, HEADS), held[gguf_name])
    np.testing.assert_array_equal(w["model.norm.weight"], np.ones(HIDDEN, np.float32))
    assert w["score.weight"].shape == (2, HIDDEN)  # the new head
    # the tokenizer rebuilt from the metadata splits texts as the one written there
    for text in [*X[:5], "ünseen words ☃", ""]:
        assert clf.tokenizer_(text)["input_ids"] == tokenizer(text)["input_ids"], text
    assert clf.tokenizer_.pad_token == EOS_TOKEN and config.pad_token_id == 0


@pytest.mark.usefixtures("no_network")
def test_gguf_model_trains_and_pickles_without_its_file(data, written, tmp_path):
    X, y, X_test, y_test = data
    folder, _, _ = written
    shutil.copy(folder / "tiny.gguf", tmp_path / "tiny.gguf")
    clf = load(tmp_path).fit(X, y)
    assert np.mean(clf.predict(X_test) == y_test) >= 0.9  # 1.0 observed
    assert clf.loss_curve_[-1] < 0.1 < clf.loss_curve_[0]
    blob = pickle.dumps(clf)
    (tmp_path / "tiny.gguf").unlink()  # rebuilt from the stored config, not the file
    restored = pickle.loads(blob)
    assert type(restored.model_).__name__ == "LlamaForSequenceClassification"
    assert type(restored.model_.config).__name__ == "LlamaConfig"
    assert restored.gguf_file == "tiny.gguf"
    np.testing.assert_array_equal(restored.predict_proba(X_test), clf.predict_proba(X_test))
    assert [restored.tokenizer_(t)["input_ids"] for t in X[:3]] == [
        clf.tokenizer_(t)["input_ids"] for t in X[:3]
    ]


@pytest.mark.usefixtures("no_network")
def test_lora_on_a_gguf_model_adapts_q_and_v_and_keeps_the_file_weights(data, written):
    X, y, X_test, y_test = data
    folder, held, _ = written
    clf = load(folder, lora=True).fit(X, y)
    trained = clf.get_weights()
    adapted = {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in trained if ".lora_" in n}
    assert adapted == {"q_proj", "v_proj"}
    assert all(".score.modules_to_save." in n for n in trained if ".lora_" not in n)
    w = weights(clf)
    np.testing.assert_array_equal(w["model.embed_tokens.weight"], held["token_embd.weight"])
    np.testing.assert_array_equal(
        w["model.layers.0.self_attn.v_proj.base_layer.weight"], held["blk.0.attn_v.weight"]
    )
    assert np.mean(clf.predict(X_test) == y_test) >= 0.85  # 0.96 observed


@pytest.mark.usefixtures("no_network")
def test_gguf_errors(data, written, tmp_path):
    X, y, _, _ = data
    folder, _, _ = written
    with pytest.raises(ValueError, match="holds a 'llama' model, not GPT-2"):
        GPT2Classifier(str(folder), gguf_file="tiny.gguf").fit(X[:4], y[:4])
    with pytest.raises(TypeError, match="gguf_file must be a file name or None"):
        load(folder, gguf_file=["tiny.gguf"]).fit(X[:4], y[:4])
    with pytest.raises(OSError, match=r"absent\.gguf"):
        load(folder, gguf_file="absent.gguf").fit(X[:4], y[:4])
