"""Continued next-token pretraining of a causal language model on public texts.

torch and transformers are imported when :func:`pretrain_text` runs, not when this module
is imported.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.pretrain.validation import check_float, check_seed
from learners.checks import check_int

__all__ = ["PretrainedLanguageModel", "pretrain_text"]


class PretrainedLanguageModel:
    """A causal language model pretrained on the public pool, saved in a folder.

    ``GPT2Classifier(model=lm.path)`` (or :class:`learners.LMClassifier` for other
    families) loads its body and tokenizer and puts a fresh classification head on it;
    :meth:`classifier` does that.

    Parameters
    ----------
    path : str or path-like
        The folder (``save_pretrained`` of the model and its tokenizer).
    model_type : str
        The transformers family (``"gpt2"``, ...).
    loss_curve : sequence of float
        Mean next-token loss of every epoch.
    n_public : int
        Public texts it was trained on.

    Examples
    --------
    >>> lm = PretrainedLanguageModel("lm_folder", "gpt2", [3.2, 2.9], 100)
    >>> lm
    PretrainedLanguageModel('lm_folder', model_type='gpt2', n_public=100)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        model_type: str,
        loss_curve: Sequence[float],
        n_public: int,
    ) -> None:
        self.path = str(path)
        self.model_type = str(model_type)
        self.loss_curve = [float(v) for v in loss_curve]
        self.n_public = int(n_public)

    def __repr__(self) -> str:
        return (
            f"PretrainedLanguageModel({self.path!r}, model_type={self.model_type!r}, "
            f"n_public={self.n_public})"
        )

    def classifier(self, **params: Any) -> Any:
        """A text classifier that starts from this model.

        Parameters
        ----------
        **params
            Other parameters of :class:`learners.GPT2Classifier` (GPT-2) or
            :class:`learners.LMClassifier` (other families).

        Returns
        -------
        learners.GPT2Classifier or learners.LMClassifier
            Unfitted, with ``model=self.path``.

        Examples
        --------
        >>> lm = PretrainedLanguageModel("lm_folder", "gpt2", [], 0)
        >>> type(lm.classifier(max_epochs=2)).__name__
        'GPT2Classifier'
        """
        from learners import GPT2Classifier, LMClassifier

        if "model" in params:
            raise TypeError("classifier() sets model itself; do not pass model")
        cls = GPT2Classifier if self.model_type == "gpt2" else LMClassifier
        return cls(model=self.path, **params)


def _check_texts(texts: Any) -> list[str]:
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence | np.ndarray):
        raise TypeError(f"texts_public must be a sequence of strings, got {type(texts).__name__}")
    out = list(texts)
    bad = [i for i, t in enumerate(out) if not isinstance(t, str)]
    if bad:
        raise TypeError(
            f"texts_public must hold strings; item {bad[0]} is {type(out[bad[0]]).__name__}"
        )
    if len([t for t in out if t.strip()]) < 2:
        raise ValueError(f"texts_public needs at least 2 non-empty texts, got {len(out)}")
    return out


def _load(model: Any, tokenizer: Any, texts: list[str]) -> tuple[Any, Any]:
    """The causal LM and its tokenizer (a configuration builds random weights offline)."""
    import transformers

    from learners.lm.tokenizer import train_bpe_tokenizer

    if isinstance(model, transformers.PretrainedConfig):
        lm = transformers.AutoModelForCausalLM.from_config(model)
        if tokenizer is None:
            tokenizer = train_bpe_tokenizer(texts, vocab_size=model.vocab_size)
    elif isinstance(model, str | os.PathLike):
        lm = transformers.AutoModelForCausalLM.from_pretrained(model)
        if tokenizer is None:
            tokenizer = model
    else:
        raise TypeError(
            "model must be a transformers configuration, a hub name or a local folder, "
            f"got {type(model).__name__}"
        )
    if isinstance(tokenizer, str | os.PathLike):
        tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer)
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError("tokenizer has neither a padding nor an end-of-text token")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    return lm, tokenizer


def pretrain_text(
    texts_public: Sequence[str],
    output_dir: str | os.PathLike[str],
    *,
    model: Any = "gpt2",
    tokenizer: Any = None,
    epochs: int = 1,
    batch_size: int = 8,
    lr: float = 5e-5,
    max_length: int = 128,
    random_state: int | np.random.RandomState | None = None,
    n_threads: int | None = 1,
    verbose: int = 0,
) -> PretrainedLanguageModel:
    """Continue next-token pretraining of a causal LM (GPT-2's body) on the public pool.

    Runs at the server, **on public texts only** (FedAUX's preparation phase P1 for text:
    self-supervised next-token prediction on the auxiliary data). The model and its
    tokenizer are saved to `output_dir`, from which ``GPT2Classifier(model=output_dir)``
    starts every client (a fresh classification head on the pretrained body).

    Parameters
    ----------
    texts_public : sequence of str
        Unlabelled public texts.
    output_dir : str or path-like
        Folder to save the model and tokenizer to (created; files there are replaced).
    model : str, path-like or transformers configuration, default="gpt2"
        A hub name or local folder of a causal LM, or a configuration (e.g. a small
        ``GPT2Config``): randomly initialised, built offline.
    tokenizer : tokenizer, str or path-like, optional
        Default: the model's own; for a configuration, a byte-level BPE tokenizer trained
        on `texts_public` (:func:`learners.lm.tokenizer.train_bpe_tokenizer`).
    epochs : int, default=1
        Passes over the public texts.
    batch_size : int, default=8
        Texts per step.
    lr : float, default=5e-5
        AdamW's learning rate.
    max_length : int, default=128
        Tokens per text (longer texts are cut).
    random_state : int, RandomState or None, default=None
        Seeds a configuration's initialisation and the shuffling (torch's global
        generator is left as it was).
    n_threads : int or None, default=1
        Torch threads while training (restored afterwards).
    verbose : int, default=0
        If positive, print the loss of every epoch.

    Returns
    -------
    PretrainedLanguageModel
        Its ``path`` is `output_dir`; ``loss_curve`` has one mean loss per epoch.

    Examples
    --------
    >>> import pytest, tempfile
    >>> _ = pytest.importorskip("transformers")
    >>> from transformers import GPT2Config
    >>> from cotrain.pretrain import pretrain_text
    >>> config = GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=32,
    ...                     vocab_size=300, bos_token_id=0, eos_token_id=0)
    >>> texts = ["a good film", "a bad film", "a great plot", "an awful plot"] * 4
    >>> folder = tempfile.mkdtemp()
    >>> lm = pretrain_text(texts, folder, model=config, epochs=2, lr=1e-3,
    ...                    random_state=0)
    >>> clf = lm.classifier(max_epochs=1, random_state=0)
    >>> clf.fit(texts, ["pos", "neg"] * 8).predict(["a good plot"]).shape
    (1,)
    """
    texts = _check_texts(texts_public)
    if not isinstance(output_dir, str | os.PathLike):
        raise TypeError(f"output_dir must be a path, got {type(output_dir).__name__}")
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"output_dir {str(out)!r} exists and is not a folder")
    epochs = check_int(epochs, "epochs", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    max_length = check_int(max_length, "max_length", 2)
    lr = check_float("lr", lr, 0.0)
    seed = check_seed(random_state)
    if n_threads is not None:
        n_threads = check_int(n_threads, "n_threads", 1)

    import torch

    from cotrain.pretrain.loop import seeded_torch

    with seeded_torch(seed, n_threads):
        lm, tok = _load(model, tokenizer, texts)
        enc = tok(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        ids, mask = enc["input_ids"], enc["attention_mask"]
        labels = ids.masked_fill(mask == 0, -100)
        optimizer = torch.optim.AdamW(lm.parameters(), lr=lr)
        lm.train()
        curve: list[float] = []
        for epoch in range(epochs):
            total, seen = 0.0, 0
            for idx in torch.randperm(len(texts)).split(batch_size):
                width = int(mask[idx].sum(dim=1).max())
                if width < 2:
                    continue
                optimizer.zero_grad(set_to_none=True)
                loss = lm(
                    input_ids=ids[idx, :width],
                    attention_mask=mask[idx, :width],
                    labels=labels[idx, :width],
                ).loss
                loss.backward()
                optimizer.step()
                total += float(loss.detach()) * idx.numel()
                seen += idx.numel()
            curve.append(total / max(seen, 1))
            if verbose > 0:
                print(f"pretraining epoch {epoch + 1}/{epochs}: next-token loss {curve[-1]:.4f}")
    out.mkdir(parents=True, exist_ok=True)
    lm.save_pretrained(out)
    tok.save_pretrained(out)
    return PretrainedLanguageModel(out, lm.config.model_type, curve, len(texts))
