"""What each language-model family needs from a sequence classifier built on it.

:class:`learners.LMClassifier` loads any model that transformers can put a
sequence-classification head on. The families differ in three ways that matter here:
where the head sits (``score`` on decoder models, ``classifier`` on encoders), which
linear layers LoRA adapts (GPT-2's fused ``c_attn`` stored transposed, BERT's
``query``/``value``, Llama's ``q_proj``/``v_proj``), and whether the model reads the last
non-padding token (decoders) or the first one (encoders). :func:`family_of` answers from
a model's ``config.model_type``; a type not listed falls back on peft's own table of
target modules and on the head the model actually has.

Nothing here imports torch or transformers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FAMILIES", "LMFamily", "family_of", "lora_defaults"]


@dataclass(frozen=True)
class LMFamily:
    """How to fine-tune one family of transformers models as a sequence classifier.

    Parameters
    ----------
    name : str
        The family, e.g. ``"gpt2"``, ``"bert"``, ``"llama"``.
    decoder : bool
        A causal (decoder-only) model: the head reads the last non-padding token, found
        through ``config.pad_token_id``, which must therefore be set.
    head : tuple of str
        Modules of the classification head, trained in full under LoRA
        (``modules_to_save``).
    lora_targets : tuple of str or None
        LoRA's ``target_modules``; None lets peft choose from its own table.
    fan_in_fan_out : bool, default=False
        The targets store their weight transposed (GPT-2's ``Conv1D``).

    Examples
    --------
    >>> FAMILIES["bert"].head, FAMILIES["bert"].lora_targets
    (('classifier',), ('query', 'value'))
    """

    name: str
    decoder: bool
    head: tuple[str, ...]
    lora_targets: tuple[str, ...] | None
    fan_in_fan_out: bool = False


def _decoder(name: str, targets: tuple[str, ...] = ("q_proj", "v_proj")) -> LMFamily:
    return LMFamily(name, decoder=True, head=("score",), lora_targets=targets)


def _encoder(name: str, targets: tuple[str, ...], head: tuple[str, ...]) -> LMFamily:
    return LMFamily(name, decoder=False, head=head, lora_targets=targets)


#: the families whose heads and LoRA targets are known (by ``config.model_type``)
FAMILIES: dict[str, LMFamily] = {
    "gpt2": LMFamily("gpt2", True, ("score",), ("c_attn",), fan_in_fan_out=True),
    "gpt_neo": _decoder("gpt_neo"),
    "gpt_neox": _decoder("gpt_neox", ("query_key_value",)),
    "llama": _decoder("llama"),
    "mistral": _decoder("mistral"),
    "qwen2": _decoder("qwen2"),
    "qwen3": _decoder("qwen3"),
    "phi3": _decoder("phi3", ("qkv_proj",)),
    "gemma": _decoder("gemma"),
    "gemma2": _decoder("gemma2"),
    "opt": _decoder("opt"),
    "bert": _encoder("bert", ("query", "value"), ("classifier",)),
    "roberta": _encoder("roberta", ("query", "value"), ("classifier",)),
    "xlm-roberta": _encoder("xlm-roberta", ("query", "value"), ("classifier",)),
    "electra": _encoder("electra", ("query", "value"), ("classifier",)),
    "distilbert": _encoder("distilbert", ("q_lin", "v_lin"), ("pre_classifier", "classifier")),
    "deberta-v2": _encoder("deberta-v2", ("query_proj", "value_proj"), ("pooler", "classifier")),
    "modernbert": _encoder("modernbert", ("Wqkv",), ("head", "classifier")),
}


def family_of(config: Any) -> LMFamily:
    """The family of a transformers model configuration.

    Parameters
    ----------
    config : transformers.PretrainedConfig or str
        A model's configuration (its ``model_type`` is read), or the model type itself.

    Returns
    -------
    LMFamily
        The known family, or for another type a family with peft's default LoRA targets,
        a ``score`` head when the configuration says it is a decoder
        (``is_decoder``, or a causal-LM architecture) and ``classifier`` otherwise.

    Examples
    --------
    >>> family_of("llama").lora_targets
    ('q_proj', 'v_proj')
    >>> family_of("falcon").head
    ('score',)
    """
    model_type = config if isinstance(config, str) else str(getattr(config, "model_type", ""))
    if model_type in FAMILIES:
        return FAMILIES[model_type]
    architectures = (
        [] if isinstance(config, str) else list(getattr(config, "architectures", None) or [])
    )
    causal = any(a.endswith("ForCausalLM") for a in architectures)
    decoder = causal or bool(getattr(config, "is_decoder", False)) or isinstance(config, str)
    head = ("score",) if decoder else ("classifier",)
    return LMFamily(model_type or "unknown", decoder=decoder, head=head, lora_targets=None)


def lora_defaults(family: LMFamily) -> dict[str, Any]:
    """The LoRA settings of ``lora=True`` for a family (``r=8``, ``lora_alpha=16``).

    Parameters
    ----------
    family : LMFamily
        From :func:`family_of`.

    Returns
    -------
    dict
        Keyword arguments of ``peft.LoraConfig``.

    Examples
    --------
    >>> lora_defaults(FAMILIES["gpt2"])
    {'r': 8, 'lora_alpha': 16, 'target_modules': ['c_attn'], 'fan_in_fan_out': True}
    >>> lora_defaults(FAMILIES["bert"])
    {'r': 8, 'lora_alpha': 16, 'target_modules': ['query', 'value']}
    """
    kwargs: dict[str, Any] = {"r": 8, "lora_alpha": 16}
    if family.lora_targets is not None:
        kwargs["target_modules"] = list(family.lora_targets)
    if family.fan_in_fan_out:
        kwargs["fan_in_fan_out"] = True
    return kwargs
