"""Building the parts of an :class:`learners.LMClassifier`: tokenizer, model, LoRA.

Each function takes the classifier's parameters and returns a ready object; the classifier
calls them from ``fit`` (and from its checkpoint restore). torch, transformers and peft are
imported only inside the functions.
"""

from __future__ import annotations

import contextlib
import copy
import os
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from .families import LMFamily, family_of, lora_defaults
from .tokenizer import train_bpe_tokenizer

__all__ = [
    "DTYPES",
    "head_modules",
    "import_torch",
    "is_config",
    "load_base_model",
    "load_tokenizer",
    "lora_config_kwargs",
    "quiet_transformers",
    "wrap_model",
]

#: the parameter dtypes a classifier may train in (None: the checkpoint's own)
DTYPES = ("float32", "float64", "bfloat16", "float16")


def import_torch() -> tuple[Any, Any]:
    """``(torch, transformers)``, or an ImportError saying which extra to install."""
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "LMClassifier needs torch and transformers: pip install 'cotrain[llm]'"
        ) from exc
    return torch, transformers


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' logging at ERROR and its progress bars off, then as they were.

    Examples
    --------
    >>> with quiet_transformers():  # doctest: +SKIP
    ...     model = AutoModelForSequenceClassification.from_pretrained(folder)
    """
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def is_config(value: Any) -> bool:
    """Whether `value` is a transformers model configuration.

    Examples
    --------
    >>> is_config("gpt2")
    False
    """
    return hasattr(value, "to_json_string") and hasattr(value, "model_type")


def _pretrained_kwargs(gguf_file: str | os.PathLike[str] | None) -> dict[str, Any]:
    return {} if gguf_file is None else {"gguf_file": os.fspath(gguf_file)}


def load_tokenizer(model: Any, tokenizer: Any, gguf_file: Any, texts: list[str]) -> Any:
    """The tokenizer a classifier uses, padding on the right.

    Parameters
    ----------
    model, tokenizer, gguf_file
        The classifier's parameters (see :class:`learners.LMClassifier`).
    texts : list of str
        Training texts, for the byte-level BPE tokenizer trained when `model` is a
        configuration and no `tokenizer` is given.

    Returns
    -------
    transformers.PreTrainedTokenizerBase
        A copy (a given instance is never changed) with a padding token (its end-of-text
        token where it had none).

    Examples
    --------
    >>> from transformers import GPT2Config
    >>> tok = load_tokenizer(GPT2Config(vocab_size=300), None, None, ["a good film"] * 4)
    >>> tok.padding_side, tok.pad_token
    ('right', '<|endoftext|>')
    """
    _, transformers = import_torch()
    tok = tokenizer
    if tok is None:
        if is_config(model):
            tok = train_bpe_tokenizer(texts, vocab_size=model.vocab_size)
        else:
            with quiet_transformers():
                tok = transformers.AutoTokenizer.from_pretrained(
                    model, **_pretrained_kwargs(gguf_file)
                )
    elif isinstance(tok, str | os.PathLike):
        tok = transformers.AutoTokenizer.from_pretrained(tok)
    else:
        tok = copy.deepcopy(tok)
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise ValueError("the tokenizer has neither a padding nor an end-of-text token")
        tok.pad_token = tok.eos_token
    # right padding keeps absolute and rotary positions intact; the head finds the last
    # non-padding token (decoders) or reads the first token (encoders)
    tok.padding_side = "right"
    return tok


def load_base_model(
    model: Any,
    n_classes: int,
    gguf_file: Any,
    check_model_type: Callable[[str], None],
    dtype: str | None,
) -> Any:
    """The sequence-classification model of `model`, with `n_classes` outputs.

    Parameters
    ----------
    model, gguf_file, dtype
        The classifier's parameters (see :class:`learners.LMClassifier`).
    n_classes : int
        Outputs of the head (added, or resized, with fresh weights).
    check_model_type : callable
        Called with the checkpoint's ``model_type`` before its weights are read (raises
        for a family the caller does not take).

    Returns
    -------
    transformers.PreTrainedModel
        ``AutoModelForSequenceClassification`` of the checkpoint's family, in `dtype`.

    Examples
    --------
    >>> from transformers import BertConfig
    >>> config = BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    ...                     intermediate_size=32, vocab_size=100)
    >>> type(load_base_model(config, 3, None, lambda t: None, "float32")).__name__
    'BertForSequenceClassification'
    """
    torch, transformers = import_torch()
    auto = transformers.AutoModelForSequenceClassification
    if is_config(model):
        check_model_type(model.model_type)
        config = copy.deepcopy(model)
        config.num_labels = n_classes
        built = auto.from_config(config)
    else:
        kwargs = _pretrained_kwargs(gguf_file)
        # transformers would build a *randomly initialised* model of the asked class from
        # another family's checkpoint (it only warns): the Auto class reads the family
        check_model_type(transformers.AutoConfig.from_pretrained(model, **kwargs).model_type)
        # transformers reports the new head's weights as missing (expected: it is trained
        # here) and draws a loading bar, once per client: both off while loading
        with quiet_transformers(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*newly initialized.*")
            built = auto.from_pretrained(
                model, num_labels=n_classes, ignore_mismatched_sizes=True, **kwargs
            )
    if dtype is not None:  # a bfloat16 checkpoint would lose AdamW's small updates
        built = built.to(getattr(torch, dtype))
    return built


def head_modules(model: Any, family: LMFamily) -> list[str]:
    """Names of the classification head's modules in `model` (trained in full under LoRA).

    Examples
    --------
    >>> head_modules(model, family_of(model.config))  # doctest: +SKIP
    ['classifier']
    """
    children = dict(model.named_children())
    heads = [name for name in family.head if name in children]
    if not heads:
        heads = [name for name in ("score", "classifier") if name in children]
    if not heads:
        raise ValueError(
            f"cannot find the classification head of a {family.name!r} model; give "
            "lora={'modules_to_save': [...], ...} naming it"
        )
    return heads


def lora_config_kwargs(lora: Any, model: Any, family: LMFamily) -> dict[str, Any] | None:
    """Keyword arguments of ``peft.LoraConfig`` for a classifier's `lora` parameter.

    ``True`` gives the family's defaults (:func:`learners.lm.families.lora_defaults`); a
    dict overrides them. The head's modules are always added to ``modules_to_save``.
    None when `lora` is False or None.

    Examples
    --------
    >>> lora_config_kwargs(False, None, family_of("bert")) is None
    True
    """
    if lora is False or lora is None:
        return None
    kwargs = lora_defaults(family)
    if isinstance(lora, dict):
        kwargs.update(lora)
    heads = head_modules(model, family)
    saved = list(kwargs.get("modules_to_save") or [])
    kwargs["modules_to_save"] = saved + [h for h in heads if h not in saved]
    return kwargs


def wrap_model(model: Any, lora: Any, gradient_checkpointing: bool) -> Any:
    """Activation checkpointing and LoRA, as asked, on a freshly built base model.

    Examples
    --------
    >>> wrap_model(model, lora=True, gradient_checkpointing=False)  # doctest: +SKIP
    PeftModelForSequenceClassification(...)
    """
    family = family_of(model.config)
    if gradient_checkpointing:
        if not getattr(model, "supports_gradient_checkpointing", False):
            raise ValueError(f"gradient_checkpointing: a {family.name!r} model does not support it")
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5
            model.activation_checkpointing_enable({"use_reentrant": False})
        else:  # pragma: no cover - older transformers
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
    kwargs = lora_config_kwargs(lora, model, family)
    if kwargs is None:
        return model
    try:
        import peft
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("LMClassifier(lora=...) needs peft: pip install peft") from exc
    kwargs.setdefault("task_type", peft.TaskType.SEQ_CLS)
    with warnings.catch_warnings():  # peft calls a deprecated transformers helper
        warnings.filterwarnings("ignore", category=FutureWarning)
        return peft.get_peft_model(model, peft.LoraConfig(**kwargs))
