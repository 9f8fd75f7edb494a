"""The state of a fitted LMClassifier as plain data, for checkpoints and pickles.

A fitted :class:`learners.LMClassifier` (or its preset :class:`learners.GPT2Classifier`)
holds objects that neither skops nor ``torch.load(weights_only=True)`` can rebuild safely:
the transformers model (possibly wrapped by peft), its optimizer, the tokenizer, and
perhaps a model configuration or tokenizer object as a constructor parameter. The
functions here turn them into plain data — the model's configuration as a JSON string,
tensors, the tokenizer's files as bytes — and build them back without downloading
anything and without pickle:

- :func:`model_state` / :func:`build_model`: the configuration, weights (LoRA adapters
  included), optimizer state, training flag and parameter dtype;
- :func:`tokenizer_files` / :func:`tokenizer_from_files`: a tokenizer as the files
  ``save_pretrained`` writes, read back from a temporary local directory;
- :func:`param_to_plain` / :func:`param_from_plain`: the ``model`` and ``tokenizer``
  constructor parameters (a name, a path, a model configuration or a tokenizer object).

The model is rebuilt from its own configuration type (``config.model_type``: GPT-2, BERT,
Llama, ...) with ``AutoModelForSequenceClassification``.

torch and transformers are imported only when a function needs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import Any

__all__ = [
    "build_model",
    "config_from_json",
    "model_state",
    "no_init_weights",
    "param_from_plain",
    "param_to_plain",
    "tokenizer_files",
    "tokenizer_from_files",
]


def no_init_weights() -> Any:
    """transformers' context that skips random initialisation (weights are loaded next).

    Examples
    --------
    >>> with no_init_weights():  # doctest: +SKIP
    ...     model = AutoModelForSequenceClassification.from_config(config)
    """
    try:
        from transformers.initialization import no_init_weights as context
    except ImportError:  # pragma: no cover - older transformers
        try:
            from transformers.modeling_utils import no_init_weights as context
        except ImportError:
            return contextlib.nullcontext()
    return context()


def _to_cpu(value: Any) -> Any:
    """``value`` with every tensor in it (dicts, lists, tuples) moved to the CPU."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(v) for v in value)
    return value


def model_state(model: Any, optimizer: Any) -> dict[str, Any]:
    """A sequence-classification model (peft-wrapped or not) and its optimizer as plain data.

    Parameters
    ----------
    model : transformers.PreTrainedModel or peft.PeftModel
        The model.
    optimizer : torch.optim.Optimizer or None
        Its optimizer.

    Returns
    -------
    dict
        ``config`` (the base model's configuration, a JSON string), ``weights`` (the full
        state dict on the CPU, adapters included), ``optimizer`` (its state dict on the CPU,
        or None), ``training`` (the model's training flag) and ``dtype`` (of its
        parameters, e.g. ``"float32"``); :func:`torch.load` with ``weights_only=True``
        reads it back.

    Examples
    --------
    >>> state = model_state(clf.model_, clf.optimizer_)  # doctest: +SKIP
    >>> sorted(state)  # doctest: +SKIP
    ['config', 'dtype', 'optimizer', 'training', 'weights']
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    dtype = next(iter(model.parameters())).dtype
    return {
        "config": base.config.to_json_string(use_diff=False),
        "weights": _to_cpu(model.state_dict()),
        "optimizer": None if optimizer is None else _to_cpu(optimizer.state_dict()),
        "training": bool(model.training),
        "dtype": str(dtype).removeprefix("torch."),
    }


def build_model(state: dict[str, Any], wrap: Callable[[Any], Any]) -> Any:
    """The model of :func:`model_state`, rebuilt offline on the CPU.

    The base model is built from the stored configuration without random initialisation
    (and without touching torch's global random state), passed through ``wrap`` (the
    classifier's LoRA wrapping, which must be the one the stored model had), and given
    the stored weights and training flag. The optimizer is left to the caller.

    Parameters
    ----------
    state : dict
        As returned by :func:`model_state`.
    wrap : callable
        ``wrap(base model) -> model`` (identity without LoRA).

    Returns
    -------
    torch.nn.Module
        The model, on the CPU.

    Examples
    --------
    >>> model = build_model(model_state(clf.model_, None), clf._wrap_lora)  # doctest: +SKIP
    """
    import torch
    import transformers

    config = config_from_json(state["config"])
    with torch.random.fork_rng(devices=[]), no_init_weights():
        base = transformers.AutoModelForSequenceClassification.from_config(config)
        model = wrap(base)
    dtype = getattr(torch, str(state.get("dtype", "float32")))
    if dtype != next(iter(model.parameters())).dtype:
        model = model.to(dtype)
    model.load_state_dict(state["weights"])
    model.train(bool(state["training"]))
    return model


def config_from_json(text: str) -> Any:
    """A transformers configuration of the right type (``model_type``) from its JSON.

    Parameters
    ----------
    text : str
        ``config.to_json_string(use_diff=False)``.

    Returns
    -------
    transformers.PretrainedConfig
        E.g. a ``GPT2Config``, ``BertConfig`` or ``LlamaConfig``.

    Examples
    --------
    >>> from transformers import BertConfig
    >>> text = BertConfig(hidden_size=32, num_hidden_layers=1).to_json_string()
    >>> type(config_from_json(text)).__name__
    'BertConfig'
    """
    import transformers

    values = json.loads(text)
    model_type = values.pop("model_type", None)
    if not model_type:
        raise ValueError("the stored model configuration has no model_type")
    return transformers.AutoConfig.for_model(model_type, **values)


def _file_name(name: str) -> str:
    if not name or name != Path(name).name or name in (".", ".."):
        raise ValueError(f"a stored tokenizer file must be a plain file name, got {name!r}")
    return name


def tokenizer_files(tokenizer: Any) -> dict[str, bytes]:
    """A tokenizer as the files its ``save_pretrained`` writes (name to contents).

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
        The tokenizer.

    Returns
    -------
    dict of str to bytes
        Sorted by file name; :func:`tokenizer_from_files` reads it back.

    Examples
    --------
    >>> from learners.lm.tokenizer import train_bpe_tokenizer
    >>> tok = train_bpe_tokenizer(["a good film", "a bad film"] * 5, vocab_size=300)
    >>> sorted(tokenizer_files(tok))
    ['tokenizer.json', 'tokenizer_config.json']
    >>> again = tokenizer_from_files(tokenizer_files(tok))
    >>> again("a good film")["input_ids"] == tok("a good film")["input_ids"]
    True
    """
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        return {
            p.name: p.read_bytes() for p in sorted(Path(folder).iterdir(), key=lambda p: p.name)
        }


def tokenizer_from_files(files: dict[str, bytes]) -> Any:
    """The tokenizer stored by :func:`tokenizer_files`, loaded from a temporary local
    directory with ``AutoTokenizer.from_pretrained`` (nothing is downloaded)."""
    import transformers

    with tempfile.TemporaryDirectory() as folder:
        for name, data in files.items():
            (Path(folder) / _file_name(name)).write_bytes(bytes(data))
        return transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)


def param_to_plain(value: Any) -> dict[str, Any]:
    """The ``model`` or ``tokenizer`` parameter of an LMClassifier as plain data.

    Parameters
    ----------
    value : None, str, path-like, transformers.PretrainedConfig or tokenizer
        The parameter.

    Returns
    -------
    dict
        ``{"kind": ..., ...}``; :func:`param_from_plain` rebuilds the parameter.

    Raises
    ------
    TypeError
        For any other kind of value.

    Examples
    --------
    >>> from pathlib import Path
    >>> param_to_plain("gpt2"), param_to_plain(None)
    ({'kind': 'str', 'value': 'gpt2'}, {'kind': 'none'})
    >>> param_from_plain(param_to_plain(Path("models/gpt2"))) == Path("models/gpt2")
    True
    """
    if value is None:
        return {"kind": "none"}
    if isinstance(value, str):
        return {"kind": "str", "value": value}
    if isinstance(value, PurePath):
        return {"kind": "path", "value": str(value)}
    if isinstance(value, os.PathLike):
        return {"kind": "str", "value": os.fspath(value)}
    if hasattr(value, "to_json_string") and hasattr(value, "model_type"):
        return {"kind": "config", "value": value.to_json_string(use_diff=False)}
    if hasattr(value, "save_pretrained") and callable(value):
        return {"kind": "tokenizer", "value": tokenizer_files(value)}
    raise TypeError(
        f"cannot store an LMClassifier parameter of type {type(value).__name__} in a "
        "checkpoint: give a name, a local directory, a model configuration or a tokenizer"
    )


def param_from_plain(plain: dict[str, Any]) -> Any:
    """The parameter stored by :func:`param_to_plain`."""
    kind, value = plain["kind"], plain.get("value")
    if kind == "none":
        return None
    if kind == "str":
        return str(value)
    if kind == "path":
        return Path(value)
    if kind in ("config", "gpt2-config"):  # "gpt2-config": checkpoints of cotrain <= 0.1
        return config_from_json(value)
    if kind == "tokenizer":
        return tokenizer_from_files(value)
    raise ValueError(f"unknown stored LMClassifier parameter kind {kind!r}")
