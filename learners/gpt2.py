"""GPT2Classifier: fine-tune a GPT-2 sequence-classification head on raw text.

torch, transformers, tokenizers and peft are imported only when a model is built, so importing
this module is cheap and works without them.

A model given as a :class:`transformers.GPT2Config` is built offline with random weights; when
no tokenizer is given with it, a small byte-level BPE tokenizer is trained on the texts of the
first ``fit`` (see :func:`train_bpe_tokenizer`). Nothing is ever downloaded then.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import warnings
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from ._alignment import check_classes, label_indices
from ._soft_targets import check_soft_targets
from .gpt2_state import (
    build_model,
    model_state,
    param_from_plain,
    param_to_plain,
    tokenizer_files,
    tokenizer_from_files,
)
from .gpt2_tokenizer import EOS_TOKEN, train_bpe_tokenizer

__all__ = ["EOS_TOKEN", "GPT2Classifier", "train_bpe_tokenizer"]


def _import_torch() -> Any:
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "GPT2Classifier needs torch and transformers: pip install torch transformers"
        ) from exc
    return torch, transformers


def _as_texts(X: Any) -> list[str]:
    """X (list, tuple, 1-D array, Series, or one-column 2-D array of strings) as a list."""
    if isinstance(X, str | bytes):
        raise TypeError("X must be a sequence of texts, got a single string")
    if hasattr(X, "iloc") and getattr(X, "ndim", 1) == 2:  # one-column DataFrame
        X = X.to_numpy()
    arr = np.asarray(X, dtype=object)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"X must be a 1-D sequence of texts, got shape {arr.shape}")
    texts = arr.tolist()
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"X must hold strings; X[{i}] is {type(t).__name__}")
    return texts


def _batches(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


class GPT2Classifier(ClassifierMixin, BaseEstimator):
    """A GPT-2 sequence classifier (optionally LoRA) fine-tuned on raw text, for co-training.

    ``X`` is a sequence of strings. The model is
    :class:`transformers.GPT2ForSequenceClassification`: a linear head on the hidden state
    of the last non-padding token. It always has one output per global class, so a client
    whose training set lacks a class still answers with every column. With
    ``warm_start=True`` each later ``fit`` continues from the previous weights and
    optimizer state (``h_t = A(D ∪ P, h_{t-1})``), training `epochs_per_fit` epochs.

    Parameters
    ----------
    model : str, path-like or transformers.GPT2Config, default="gpt2"
        A hub name or local directory, loaded with
        ``GPT2ForSequenceClassification.from_pretrained`` (a head of ``len(classes)``
        outputs is added or resized), or a ``GPT2Config``: a randomly initialised model
        built offline.
    tokenizer : tokenizer, str, path-like or None, default=None
        A tokenizer instance (copied, never changed), or a hub name or local directory
        (``AutoTokenizer.from_pretrained``). ``None``: the same name or directory as
        `model`; when `model` is a config, a byte-level BPE tokenizer with
        ``config.vocab_size`` entries trained on the texts of the first ``fit`` (or
        ``initialize``) with :func:`train_bpe_tokenizer`. Clients of a FedAvg baseline
        must share one tokenizer: build it once and pass it to every client.
        A tokenizer without a padding token pads with its end-of-text token.
    max_length : int, default=128
        Texts are truncated to this many tokens (and to the model's ``n_positions``), on
        the side ``truncation_side`` says.
    lora : bool or dict, default=False
        ``False``: fine-tune every weight. A dict: keyword arguments of
        ``peft.LoraConfig`` (e.g. ``{"r": 8, "lora_alpha": 16, "target_modules":
        ["c_attn"]}``); only the adapter and the classification head are trained.
        ``True`` uses ``{"r": 8, "lora_alpha": 16, "target_modules": ["c_attn"]}``.
    classes : array-like, optional
        The global classes, sorted and unique; defaults to the labels of `y`.
    max_epochs : int, default=1
        Epochs of the first fit.
    epochs_per_fit : int, default=1
        Epochs of each later fit that continues training (``warm_start=True``).
    batch_size : int, default=8
        Texts per gradient step (and per forward pass in ``predict_proba``).
    lr : float, default=5e-5
        AdamW learning rate.
    weight_decay : float, default=0.0
        AdamW weight decay.
    device : str, default="cpu"
        Torch device of the model ("cpu", "cuda", "cuda:1", ...).
    warm_start : bool, default=True
        Continue training across fits; ``False`` rebuilds the model at every fit.
    random_state : int, RandomState or None, default=None
        Seeds the head (or model) initialisation, the shuffling and dropout. The global
        torch random state is restored after every fit.
    truncation_side : {"left", "right"}, default="left"
        Which end of a text longer than ``max_length`` tokens is cut: ``"left"`` keeps its
        last tokens (for classifying reviews, where the verdict usually comes at the end),
        ``"right"`` its first.

    Attributes
    ----------
    model_ : transformers.GPT2ForSequenceClassification or peft.PeftModel
        The fine-tuned model.
    tokenizer_ : transformers.PreTrainedTokenizerBase
        The tokenizer used (padding on the right).
    optimizer_ : torch.optim.AdamW
        The optimizer, kept across warm-started fits.
    classes_ : ndarray of shape (n_classes,)
        The classes, in the order of the probability columns.
    n_classes_ : int
        Number of classes.
    loss_curve_ : list of float
        Mean training loss of every epoch, over all fits.
    n_fits_ : int
        Fits done on the current model.
    seed_ : int
        The seed drawn from `random_state` when the model was built; every fit derives its
        own seed (shuffling, dropout) from it and the fit count.

    Notes
    -----
    Fitted models go into cotrain checkpoints and a Flower site's state without pickle
    (skops, and ``torch.load(weights_only=True)`` for the configuration as JSON, weights
    with any LoRA adapter, optimizer, training flag and tokenizer files; see
    :mod:`learners.gpt2_state`), rebuilt offline: a resumed run continues bit-identically.
    A ``site.toml`` cannot hold a ``GPT2Config``: give a ``save_pretrained`` directory.

    Soft targets (2-D `y`, one column per class) are trained with the cross-entropy
    against the row-normalised targets. Each sample's loss is multiplied by its
    `sample_weight`, and a batch's loss is the mean over its samples.

    Examples
    --------
    A tiny randomly initialised GPT-2 with an offline tokenizer:

    >>> from transformers import GPT2Config  # doctest: +SKIP
    >>> from learners import GPT2Classifier
    >>> config = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64,
    ...                     vocab_size=400, bos_token_id=0, eos_token_id=0)  # doctest: +SKIP
    >>> texts = ["a good film", "a great film", "a bad film", "an awful film"] * 5
    >>> y = ["pos", "pos", "neg", "neg"] * 5
    >>> clf = GPT2Classifier(config, max_epochs=5, lr=1e-3, random_state=0)  # doctest: +SKIP
    >>> clf.fit(texts, y).predict_proba(["a good film"]).shape  # doctest: +SKIP
    (1, 2)

    Pretrained GPT-2 with LoRA (needs the weights in the local cache or a directory):

    >>> clf = GPT2Classifier("gpt2", lora={"r": 8, "target_modules": ["c_attn"]})
    >>> clf.fit(texts, y)  # doctest: +SKIP
    """

    accepts_soft_targets: ClassVar[bool] = True
    #: trust="auto" gives this learner's pool full weight instead of cross-validating it
    #: (every cross-validation fit would be a full first training; see cotrain.trust)
    cross_validated_trust: ClassVar[bool] = False

    #: attributes that :func:`cotrain.checkpoint.save_model` stores with ``torch.save`` (read
    #: back with ``weights_only=True``, see :meth:`_checkpoint_tensors`) instead of skops
    _checkpoint_tensor_attrs = ("model", "tokenizer", "model_", "optimizer_", "tokenizer_")

    def __init__(
        self,
        model: Any = "gpt2",
        tokenizer: Any = None,
        max_length: int = 128,
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
        truncation_side: str = "left",
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.lora = lora
        self.classes = classes
        self.max_epochs = max_epochs
        self.epochs_per_fit = epochs_per_fit
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.device = device
        self.warm_start = warm_start
        self.truncation_side = truncation_side
        self.random_state = random_state

    @property
    def continues_training(self) -> bool:
        """Whether a later fit continues from the previous weights (``warm_start``)."""
        return bool(self.warm_start)

    # ------------------------------------------------------------------ building
    def _lora_kwargs(self) -> dict[str, Any] | None:
        if self.lora is False or self.lora is None:
            return None
        if self.lora is True:
            return {"r": 8, "lora_alpha": 16, "target_modules": ["c_attn"]}
        if not isinstance(self.lora, dict):
            raise TypeError(f"lora must be False, True or a dict, got {type(self.lora).__name__}")
        return dict(self.lora)

    def _seed_for(self, step: int) -> int:
        return int(np.random.SeedSequence([self.seed_, step]).generate_state(1)[0])

    @contextlib.contextmanager
    def _seeded(self, seed: int) -> Iterator[None]:
        """Seed torch's global generator(s) for dropout and initialisation, then restore."""
        torch, _ = _import_torch()
        dev = torch.device(self.device)
        devices = [dev.index or 0] if dev.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            yield

    def _make_tokenizer(self, texts: list[str]) -> Any:
        _, transformers = _import_torch()
        tok = self.tokenizer
        if tok is None:
            if isinstance(self.model, transformers.GPT2Config):
                tok = train_bpe_tokenizer(texts, vocab_size=self.model.vocab_size)
            else:
                tok = transformers.AutoTokenizer.from_pretrained(self.model)
        elif isinstance(tok, str | os.PathLike):
            tok = transformers.AutoTokenizer.from_pretrained(tok)
        else:
            tok = copy.deepcopy(tok)
        if tok.pad_token is None:
            if tok.eos_token is None:
                raise ValueError("the tokenizer has neither a padding nor an end-of-text token")
            tok.pad_token = tok.eos_token
        # the head reads the last non-padding token; right padding keeps GPT-2's absolute
        # positions intact (truncation follows `truncation_side` at every encoding)
        tok.padding_side = "right"
        return tok

    def _make_model(self, n_classes: int, tokenizer: Any) -> Any:
        _, transformers = _import_torch()
        cls = transformers.GPT2ForSequenceClassification
        if isinstance(self.model, transformers.GPT2Config):
            config = copy.deepcopy(self.model)
            config.num_labels = n_classes
            model = cls(config)
        elif isinstance(self.model, str | os.PathLike):
            # transformers would build a *randomly initialised* GPT-2 from another family's
            # checkpoint (it only warns): refuse that before loading
            model_type = transformers.AutoConfig.from_pretrained(self.model).model_type
            if model_type != "gpt2":
                raise ValueError(
                    f"model: {str(self.model)!r} holds a {model_type!r} model, not GPT-2; "
                    "GPT2Classifier loads GPT-2 checkpoints only (transformers would build a "
                    "randomly initialised GPT-2 from it)"
                )
            model = cls.from_pretrained(
                self.model, num_labels=n_classes, ignore_mismatched_sizes=True
            )
        else:
            raise TypeError(
                "model must be a hub name, a local directory or a transformers.GPT2Config, "
                f"got {type(self.model).__name__}"
            )
        if len(tokenizer) > model.config.vocab_size:
            raise ValueError(
                f"the tokenizer has {len(tokenizer)} tokens but the model's vocabulary has "
                f"{model.config.vocab_size}"
            )
        model.config.pad_token_id = tokenizer.pad_token_id
        if tokenizer.eos_token_id is not None:
            model.config.eos_token_id = tokenizer.eos_token_id
            bos = tokenizer.bos_token_id
            model.config.bos_token_id = tokenizer.eos_token_id if bos is None else bos
        return self._wrap_lora(model)

    def _wrap_lora(self, model: Any) -> Any:
        kwargs = self._lora_kwargs()
        if kwargs is None:
            return model
        try:
            import peft
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("GPT2Classifier(lora=...) needs peft: pip install peft") from exc
        kwargs.setdefault("task_type", peft.TaskType.SEQ_CLS)
        kwargs.setdefault("modules_to_save", ["score"])
        if "score" not in kwargs["modules_to_save"]:
            kwargs["modules_to_save"] = [*kwargs["modules_to_save"], "score"]
        kwargs.setdefault("fan_in_fan_out", True)  # GPT-2's Conv1D layers store W transposed
        with warnings.catch_warnings():  # peft calls a deprecated transformers helper
            warnings.filterwarnings("ignore", category=FutureWarning)
            return peft.get_peft_model(model, peft.LoraConfig(**kwargs))

    def _make_optimizer(self) -> Any:
        torch, _ = _import_torch()
        return torch.optim.AdamW(
            [p for p in self.model_.parameters() if p.requires_grad],
            lr=self.lr,
            weight_decay=self.weight_decay,
        )

    def _build(self, texts: list[str], classes: NDArray[Any]) -> None:
        if classes.size < 2:
            raise ValueError(
                "GPT2Classifier needs at least 2 classes; pass the global classes as classes="
            )
        rs = self.random_state
        if rs is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0])
        elif isinstance(rs, int | np.integer):
            seed = int(rs)
        else:  # a RandomState
            seed = int(rs.randint(np.iinfo(np.int32).max))
        self.seed_ = seed
        self.tokenizer_ = self._make_tokenizer(texts)
        with self._seeded(self._seed_for(0)):
            model = self._make_model(int(classes.size), self.tokenizer_)
        model.config.id2label = {i: str(c) for i, c in enumerate(classes.tolist())}
        model.config.label2id = {str(c): i for i, c in enumerate(classes.tolist())}
        self.model_ = model.to(self.device)
        self.optimizer_ = self._make_optimizer()
        self.classes_ = classes
        self.n_classes_ = int(classes.size)
        self.loss_curve_: list[float] = []
        self.n_fits_ = 0

    def _resolve_classes(self, y: NDArray[Any] | None) -> NDArray[Any]:
        if self.classes is not None:
            return check_classes(self.classes)
        if y is None or y.ndim != 1:
            raise ValueError("classes must be given when y is absent or holds soft targets")
        return np.unique(y)

    def initialize(self, X: Any, y: ArrayLike | None = None) -> GPT2Classifier:
        """Build the tokenizer and model without training (e.g. for FedAvg).

        Parameters
        ----------
        X : sequence of str
            Texts; train the offline tokenizer when `model` is a config and no tokenizer
            is given.
        y : array-like of shape (n_samples,), optional
            Labels, used for the classes when `classes` is not set.

        Returns
        -------
        self : GPT2Classifier
            With ``model_``, ``tokenizer_`` and ``optimizer_`` set; the next fit is its
            first (``max_epochs`` epochs) and continues from these weights.
        """
        texts = _as_texts(X)
        self._build(texts, self._resolve_classes(None if y is None else np.asarray(y)))
        return self

    # ------------------------------------------------------------------ training
    def _encode(self, texts: list[str]) -> dict[str, Any]:
        tok = self.tokenizer_
        max_len = int(self.max_length)
        n_pos = getattr(self._base_config(), "n_positions", None)
        if n_pos is not None:
            max_len = min(max_len, int(n_pos))
        texts = [t if t else tok.eos_token for t in texts]
        tok.truncation_side = self.truncation_side
        enc = tok(texts, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
        return {
            "input_ids": enc["input_ids"].to(self.device),
            "attention_mask": enc["attention_mask"].to(self.device),
        }

    def _base_config(self) -> Any:
        return self.model_.config if hasattr(self.model_, "config") else None

    def fit(self, X: Any, y: ArrayLike, sample_weight: ArrayLike | None = None) -> GPT2Classifier:
        """Fine-tune on texts `X` with labels (or soft targets) `y`.

        Parameters
        ----------
        X : sequence of str
            Training texts.
        y : array-like of shape (n_samples,) or (n_samples, n_classes)
            Labels from `classes`, or soft targets with one column per class (needs
            `classes`).
        sample_weight : array-like of shape (n_samples,), optional
            Per-sample weights of the loss.

        Returns
        -------
        self : GPT2Classifier
            The fitted classifier.
        """
        for name in ("max_epochs", "epochs_per_fit", "batch_size", "max_length"):
            value = getattr(self, name)
            low = 0 if name == "epochs_per_fit" else 1
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.truncation_side not in ("left", "right"):
            raise ValueError(
                f"truncation_side must be 'left' or 'right', got {self.truncation_side!r}"
            )
        texts = _as_texts(X)
        n = len(texts)
        y_arr = np.asarray(y)
        if y_arr.shape[:1] != (n,):
            raise ValueError(f"y has {y_arr.shape[:1]} rows but X has {n}")
        if y_arr.ndim == 1:
            classes = self._resolve_classes(y_arr)
            targets = np.zeros((n, classes.size), dtype=np.float32)
            targets[np.arange(n), label_indices(y_arr, classes, name="y")] = 1.0
        elif y_arr.ndim == 2:
            classes = self._resolve_classes(y_arr)
            targets = check_soft_targets(y_arr, classes.size)
            sums = targets.sum(axis=1, keepdims=True)
            targets = np.divide(targets, sums, out=np.zeros_like(targets), where=sums > 0)
        else:
            raise ValueError(f"y must be 1-D labels or 2-D soft targets, got shape {y_arr.shape}")
        weights = np.ones(n, dtype=np.float32)
        if sample_weight is not None:
            weights = np.asarray(sample_weight, dtype=np.float32)
            if weights.shape != (n,):
                raise ValueError(f"sample_weight must have shape ({n},), got {weights.shape}")

        continuing = self.warm_start and hasattr(self, "model_")
        if continuing and not np.array_equal(classes, self.classes_):
            raise ValueError(
                f"warm_start: classes changed from {self.classes_.tolist()!r} to "
                f"{classes.tolist()!r}; use warm_start=False or fixed classes="
            )
        if not continuing:
            self._build(texts, classes)
        epochs = int(self.max_epochs if self.n_fits_ == 0 else self.epochs_per_fit)
        self._train(texts, targets.astype(np.float32), weights, epochs)
        self.n_fits_ += 1
        return self

    def _train(
        self,
        texts: list[str],
        targets: NDArray[np.float32],
        weights: NDArray[np.float32],
        epochs: int,
    ) -> None:
        torch, _ = _import_torch()
        for group in self.optimizer_.param_groups:  # hyper-parameters set since the last fit
            group["lr"] = self.lr
            group["weight_decay"] = self.weight_decay
        seed = self._seed_for(self.n_fits_ + 1)
        gen = torch.Generator().manual_seed(seed)
        t_all = torch.from_numpy(targets)
        w_all = torch.from_numpy(weights)
        model = self.model_
        n = len(texts)
        with self._seeded(seed):
            model.train()
            for _ in range(epochs):
                order = torch.randperm(n, generator=gen).tolist()
                total, count = 0.0, 0
                for part in _batches(n, int(self.batch_size)):
                    idx = order[part]
                    enc = self._encode([texts[i] for i in idx])
                    logits = model(**enc).logits.float()
                    t = t_all[idx].to(logits.device)
                    w = w_all[idx].to(logits.device)
                    per_sample = -(t * torch.log_softmax(logits, dim=-1)).sum(dim=-1)
                    loss = (w * per_sample).mean()
                    self.optimizer_.zero_grad(set_to_none=True)
                    loss.backward()
                    self.optimizer_.step()
                    total += float(loss.detach()) * len(idx)
                    count += len(idx)
                self.loss_curve_.append(total / max(count, 1))
            model.eval()

    # ------------------------------------------------------------------ prediction
    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Class probabilities, one column per class of ``classes_``.

        Parameters
        ----------
        X : sequence of str
            Texts.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Probabilities (float64); rows sum to 1.
        """
        check_is_fitted(self)
        torch, _ = _import_torch()
        texts = _as_texts(X)
        out = np.empty((len(texts), self.n_classes_), dtype=np.float64)
        model = self.model_
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                for part in _batches(len(texts), int(self.batch_size)):
                    logits = model(**self._encode(texts[part])).logits.float()
                    out[part] = torch.softmax(logits, dim=-1).cpu().numpy()
        finally:
            model.train(was_training)
        return out

    def predict(self, X: Any) -> NDArray[Any]:
        """Most probable class of each text.

        Parameters
        ----------
        X : sequence of str
            Texts.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        return self.classes_[self.predict_proba(X).argmax(axis=1)]

    # ------------------------------------------------------------------ weights (FedAvg)
    def _named_parameters(self, trainable_only: bool) -> Iterator[tuple[str, Any]]:
        check_is_fitted(self)
        for name, p in self.model_.named_parameters():
            if p.requires_grad or not trainable_only:
                yield name, p

    def get_weights(self, trainable_only: bool = True) -> dict[str, NDArray[np.float32]]:
        """Named parameters as float32 arrays (copies).

        Parameters
        ----------
        trainable_only : bool, default=True
            Only the trained parameters (with LoRA: the adapter and the head).

        Returns
        -------
        dict of str to ndarray
            Parameter name (as in ``model_.named_parameters()``) to its values.
        """
        return {
            name: p.detach().to("cpu", dtype=p.dtype).float().numpy().copy()
            for name, p in self._named_parameters(trainable_only)
        }

    def set_weights(self, weights: dict[str, ArrayLike]) -> GPT2Classifier:
        """Overwrite named parameters (any subset of ``model_.named_parameters()``).

        Parameters
        ----------
        weights : dict of str to array-like
            As returned by :meth:`get_weights` (e.g. averaged over clients).

        Returns
        -------
        self : GPT2Classifier
        """
        torch, _ = _import_torch()
        params = dict(self._named_parameters(trainable_only=False))
        unknown = sorted(set(weights) - set(params))
        if unknown:
            raise KeyError(f"unknown parameter names: {unknown[:5]}")
        with torch.no_grad():
            for name, value in weights.items():
                p = params[name]
                arr = torch.as_tensor(np.asarray(value))
                if tuple(arr.shape) != tuple(p.shape):
                    raise ValueError(
                        f"{name}: expected shape {tuple(p.shape)}, got {tuple(arr.shape)}"
                    )
                p.copy_(arr.to(device=p.device, dtype=p.dtype))
        return self

    def n_parameters(self, trainable_only: bool = True) -> int:
        """Number of (trainable) parameters of the model.

        Parameters
        ----------
        trainable_only : bool, default=True
            Count only the trained parameters.

        Returns
        -------
        int
        """
        return int(sum(p.numel() for _, p in self._named_parameters(trainable_only)))

    # ------------------------------------------------------------------ checkpoints
    def _checkpoint_tensors(self) -> dict[str, Any]:
        """Everything skops cannot store, as plain data that ``torch.load(weights_only=True)``
        reads: the `model` and `tokenizer` parameters, and once fitted the model (its
        configuration as JSON, weights with any LoRA adapter, training flag), the optimizer
        state and the tokenizer's files (see :mod:`learners.gpt2_state`)."""
        saved: dict[str, Any] = {
            "model": param_to_plain(self.model),
            "tokenizer": param_to_plain(self.tokenizer),
        }
        if hasattr(self, "model_"):
            saved["model_"] = model_state(self.model_, self.optimizer_)
            saved["tokenizer_"] = tokenizer_files(self.tokenizer_)
        return saved

    def _restore_tensors(self, saved: dict[str, Any]) -> None:
        """Rebuild what :meth:`_checkpoint_tensors` stored (offline, no pickle)."""
        self.model = param_from_plain(saved["model"])
        self.tokenizer = param_from_plain(saved["tokenizer"])
        if "model_" in saved:
            self._restore_model(saved["model_"])
            tok = tokenizer_from_files(saved["tokenizer_"])
            tok.padding_side = tok.truncation_side = "right"
            self.tokenizer_ = tok

    def _restore_model(self, state: dict[str, Any]) -> None:
        self.model_ = build_model(state, self._wrap_lora).to(self.device)
        self.optimizer_ = self._make_optimizer()
        if state["optimizer"] is not None:
            self.optimizer_.load_state_dict(state["optimizer"])

    # ------------------------------------------------------------------ copying, pickling
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        model = state.pop("model_", None)
        optimizer = state.pop("optimizer_", None)
        if model is not None:
            torch, _ = _import_torch()
            buffer = io.BytesIO()
            torch.save(model_state(model, optimizer), buffer)
            state["_model_bytes"] = buffer.getvalue()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        blob = state.pop("_model_bytes", None)
        self.__dict__.update(state)
        if blob is not None:
            torch, _ = _import_torch()
            self._restore_model(torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True))

    def __deepcopy__(self, memo: dict[int, Any]) -> GPT2Classifier:
        # native deep copies of the model and optimizer (one memo keeps the optimizer
        # pointing at the copied parameters); faster than a pickle round trip
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = copy.deepcopy(value, memo)
        return new
