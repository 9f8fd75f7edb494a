"""GPT2Classifier: the GPT-2 preset of :class:`learners.LMClassifier`.

A GPT-2 sequence-classification head (optionally LoRA on ``c_attn``) fine-tuned on raw
text. It is an :class:`~learners.LMClassifier` that loads the hub's ``gpt2`` by default
and refuses checkpoints of other families (transformers would otherwise build a randomly
initialised GPT-2 from a BERT or Llama folder, with only a warning).

torch, transformers, tokenizers and peft are imported only when a model is built. A model
given as a :class:`transformers.GPT2Config` is built offline with random weights; when no
tokenizer is given with it, a small byte-level BPE tokenizer is trained on the texts of
the first ``fit`` (see :func:`~learners.lm.tokenizer.train_bpe_tokenizer`). Nothing is ever
downloaded then.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from .classifier import LMClassifier

__all__ = ["GPT2Classifier"]


class GPT2Classifier(LMClassifier):
    """A GPT-2 sequence classifier (optionally LoRA) fine-tuned on raw text, for co-training.

    The GPT-2 preset of :class:`~learners.LMClassifier`: the same parameters in the same
    order, ``model="gpt2"`` by default, and checkpoints of other families refused.
    ``X`` is a sequence of strings. The model is
    :class:`transformers.GPT2ForSequenceClassification`: a linear head (``score``) on the
    hidden state of the last non-padding token. Everything else — soft targets,
    continued training across rounds, LoRA, truncation or windows over long texts, token
    caching, checkpoints — is :class:`~learners.LMClassifier`'s; see it for the
    parameters and attributes.

    Parameters
    ----------
    model : str, path-like or transformers.GPT2Config, default="gpt2"
        A hub name or local directory of a GPT-2 checkpoint (another family is refused
        with a ``ValueError``), or a ``GPT2Config``: a randomly initialised model built
        offline.
    tokenizer, gguf_file, max_length, truncation_side, lora, classes, max_epochs, \
epochs_per_fit, batch_size, lr, weight_decay, device, warm_start, random_state, \
gradient_checkpointing, n_threads, cache_encodings, dtype, long_texts, window_stride, \
max_windows
        As in :class:`~learners.LMClassifier`, in the same order and with the same
        defaults. ``lora=True`` adapts ``c_attn`` (stored transposed:
        ``fan_in_fan_out=True``).

    Examples
    --------
    A tiny randomly initialised GPT-2 with an offline tokenizer:

    >>> from transformers import GPT2Config
    >>> from learners import GPT2Classifier
    >>> config = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64,
    ...                     vocab_size=400, bos_token_id=0, eos_token_id=0)
    >>> texts = ["a good film", "a great film", "a bad film", "an awful film"] * 5
    >>> y = ["pos", "pos", "neg", "neg"] * 5
    >>> clf = GPT2Classifier(config, max_epochs=5, lr=1e-3, random_state=0)
    >>> clf.fit(texts, y).predict_proba(["a good film"]).shape
    (1, 2)

    Pretrained GPT-2 with LoRA (needs the weights in the local cache or a directory):

    >>> clf = GPT2Classifier("gpt2", lora={"r": 8, "target_modules": ["c_attn"]})
    >>> clf.fit(texts, y)  # doctest: +SKIP
    """

    _model_types: ClassVar[tuple[str, ...] | None] = ("gpt2",)
    _family_label: ClassVar[str] = "GPT-2"

    def __init__(
        self,
        model: Any = "gpt2",
        *,
        tokenizer: Any = None,
        gguf_file: str | None = None,
        max_length: int = 128,
        truncation_side: str = "left",
        lora: bool | dict[str, Any] = False,
        classes: ArrayLike | None = None,
        max_epochs: int = 1,
        epochs_per_fit: int = 1,
        batch_size: int = 8,
        lr: float = 5e-5,
        weight_decay: float = 0.0,
        device: str = "cpu",
        warm_start: bool = True,
        random_state: int | np.random.RandomState | None = None,
        gradient_checkpointing: bool = False,
        n_threads: int | None = None,
        cache_encodings: bool = True,
        dtype: str | None = "float32",
        long_texts: str = "truncate",
        window_stride: int | None = None,
        max_windows: int = 8,
    ) -> None:
        # scikit-learn reads the parameters from this signature, so it is spelled out:
        # LMClassifier's, in its order; only the default of ``model`` differs (a test
        # holds the two signatures together).
        super().__init__(
            model,
            tokenizer=tokenizer,
            gguf_file=gguf_file,
            max_length=max_length,
            truncation_side=truncation_side,
            lora=lora,
            classes=classes,
            max_epochs=max_epochs,
            epochs_per_fit=epochs_per_fit,
            batch_size=batch_size,
            lr=lr,
            weight_decay=weight_decay,
            device=device,
            warm_start=warm_start,
            random_state=random_state,
            gradient_checkpointing=gradient_checkpointing,
            n_threads=n_threads,
            cache_encodings=cache_encodings,
            dtype=dtype,
            long_texts=long_texts,
            window_stride=window_stride,
            max_windows=max_windows,
        )
