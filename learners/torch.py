"""TorchClassifier: any torch module as a scikit-learn classifier that keeps training.

This module holds the estimator API (parameters, ``fit``, ``predict``, checkpoints, weights by
name); building the network and optimizer and scoping torch's random stream and threads are in
:mod:`learners._torch_tools`. It imports torch; ``import learners`` does not
(``learners.TorchClassifier`` loads this module on first use).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._alignment import check_classes, label_indices
from ._soft_targets import check_soft_targets
from ._torch_tools import (
    build_module,
    build_optimizer,
    num_threads,
    private_rng,
    resolve_device,
    seeded_state,
)
from .checks import check_int
from .sklearn_checks import WARM_START_REFIT

try:
    import torch
    from torch import nn
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError('TorchClassifier needs torch: pip install "cotrain[torch]"') from exc

__all__ = ["TorchClassifier"]

_PREDICT_BATCH = 1024


class TorchClassifier(ClassifierMixin, BaseEstimator):
    """Any ``torch.nn.Module`` as a scikit-learn classifier, for co-training.

    The module maps a batch of inputs to one logit per class; it is trained with
    (sample-weighted) cross-entropy by mini-batch gradient descent in a small training
    loop of its own. Built for federated co-training:

    - **fixed global classes**: the output layer has ``len(classes)`` units, and a class
      missing from a fit's labels is fine;
    - **soft targets**: ``fit`` takes labels or probabilities ``(n, n_classes)``
      (cross-entropy against the distribution), so ``accepts_soft_targets`` is True and
      :class:`~learners.ClassAlignedClassifier` hands soft pseudo-labels over unchanged;
    - **continued training**: with ``warm_start=True`` (the default) every fit after the
      first continues from the current weights and optimizer state for `epochs_per_fit`
      epochs (or `steps_per_fit` optimizer steps), ``h_t = A(D ∪ P, h_{t-1})``;
    - **reproducible**: initialisation, shuffling and dropout draw from the estimator's
      own seeded random stream; torch's global RNG is left untouched;
    - **FedAvg-ready**: :meth:`initialize`, :meth:`get_weights`, :meth:`set_weights` and
      :meth:`n_parameters` expose the model's weights as numpy arrays by name.

    Parameters
    ----------
    module : nn.Module class, callable or nn.Module instance, default=None
        The network; ``None`` means :class:`learners.modules.MLP`. A class or callable is
        called with the data's sizes injected: ``n_features`` (number of input values
        per sample, ``prod(X.shape[1:])``) and ``n_classes`` are passed by keyword to
        those of its parameters named so (:class:`~learners.modules.SmallCNN` takes only
        ``n_classes``, and ``n_features`` if it needs to infer the image size); a
        callable with neither name is called as ``module(n_features, n_classes,
        **module_params)``. An instance is deep-copied as it is (its initial weights do
        not depend on `random_state`). The module must return logits of shape
        ``(n, n_classes)``. Give a module-level class or function, not a lambda, if the
        estimator is to be pickled (joblib runtimes pickle client estimators).
    module_params : dict, optional
        Extra keyword arguments for `module`.
    classes : array-like of shape (n_classes,), optional
        The global classes, sorted and unique; :class:`~learners.ClassAlignedClassifier`
        sets them. Default: the labels of the first fit's `y` (``arange(n_classes)``
        for soft targets).
    max_epochs : int, default=10
        Epochs of the first fit (and of every fit when `warm_start` is false).
    epochs_per_fit : int, default=1
        Epochs of each later fit when `warm_start` is true: the local work per round
        (the communication period). 0 leaves the weights as they are.
    steps_per_fit : int, optional
        If given, each later fit runs this many optimizer steps (mini-batches, reshuffled
        after every pass over the data) instead of `epochs_per_fit` epochs.
    batch_size : int, default=64
        Mini-batch size (the whole data if it has fewer rows).
    lr : float, default=1e-3
        Learning rate.
    optimizer : {"adam", "adamw", "sgd"} or torch optimizer class, default="adam"
        Called as ``optimizer(trainable_params, lr=lr, weight_decay=weight_decay,
        **optimizer_params)``.
    optimizer_params : dict, optional
        Extra keyword arguments for the optimizer, e.g. ``{"momentum": 0.9}`` for SGD.
    weight_decay : float, default=0.0
        L2 penalty (the optimizer's ``weight_decay``).
    device : str, default="cpu"
        Torch device to train and predict on, e.g. ``"cuda"`` (an error if CUDA is not
        available). Inputs and outputs are numpy arrays either way.
    warm_start : bool, default=True
        Continue from the current weights on every fit after the first (or after
        :meth:`initialize`); if false, every fit starts from a fresh initialisation.
    random_state : int, RandomState or None, default=None
        Seeds the initial weights, the shuffling and dropout.
    n_threads : int, optional
        Torch intra-op threads while fitting and predicting (torch's global setting is
        restored afterwards); None leaves torch's setting. 1 is usually fastest for small
        networks, and much faster when several clients train at once on few cores.
    verbose : int, default=0
        If positive, print the training loss after every epoch.

    Attributes
    ----------
    module_ : nn.Module
        The trained network (in training mode between calls).
    optimizer_ : torch.optim.Optimizer
        Its optimizer, whose state carries over to continued fits.
    classes_ : ndarray of shape (n_classes,)
        The classes, in the order of the output units and probability columns.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        ``X.shape[1]`` seen in the first fit (the channels, for image input).
    input_shape_ : tuple of int
        ``X.shape[1:]`` seen in the first fit.
    loss_curve_ : list of float
        Mean training loss of every epoch since the network was initialised (one entry
        per continued fit when `steps_per_fit` is set), over all fits.
    n_epochs_ : int
        Epochs (full passes) trained since the network was initialised.
    n_steps_ : int
        Optimizer steps taken since the network was initialised.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> from learners import MLP, TorchClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = TorchClassifier(MLP, module_params={"hidden": (16,)}, max_epochs=30, lr=1e-2,
    ...                       random_state=0)
    >>> clf.fit(X, y).score(X, y) > 0.9
    True
    >>> len(clf.fit(X, y).loss_curve_)  # the second fit continues: one more epoch
    31
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    """

    accepts_soft_targets = True
    #: trust="auto" gives this learner's pool full weight instead of cross-validating it
    #: (every cross-validation fit would be a full first training; see cotrain.trust)
    cross_validated_trust = False

    def __init__(
        self,
        module: Any = None,
        *,
        module_params: dict[str, Any] | None = None,
        classes: ArrayLike | None = None,
        max_epochs: int = 10,
        epochs_per_fit: int = 1,
        steps_per_fit: int | None = None,
        batch_size: int = 64,
        lr: float = 1e-3,
        optimizer: str | type[torch.optim.Optimizer] = "adam",
        optimizer_params: dict[str, Any] | None = None,
        weight_decay: float = 0.0,
        device: str = "cpu",
        warm_start: bool = True,
        random_state: int | np.random.RandomState | None = None,
        n_threads: int | None = None,
        verbose: int = 0,
    ) -> None:
        self.module = module
        self.module_params = module_params
        self.classes = classes
        self.max_epochs = max_epochs
        self.epochs_per_fit = epochs_per_fit
        self.steps_per_fit = steps_per_fit
        self.batch_size = batch_size
        self.lr = lr
        self.optimizer = optimizer
        self.optimizer_params = optimizer_params
        self.weight_decay = weight_decay
        self.device = device
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose

    @property
    def continues_training(self) -> bool:
        """Whether a later fit continues the previous one (``warm_start``)."""
        return bool(self.warm_start)

    # ------------------------------------------------------------------ building
    def _check_params(self) -> None:
        check_int(self.max_epochs, "max_epochs", 1)
        check_int(self.epochs_per_fit, "epochs_per_fit", 0)
        if self.steps_per_fit is not None:
            check_int(self.steps_per_fit, "steps_per_fit", 1)
        check_int(self.batch_size, "batch_size", 1)
        if self.n_threads is not None:
            check_int(self.n_threads, "n_threads", 1)
        if not (isinstance(self.lr, int | float) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")
        if not (isinstance(self.weight_decay, int | float) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")

    def _device(self) -> torch.device:
        return resolve_device(self.device)

    def _make_module(self, n_features: int, n_classes: int) -> nn.Module:
        return build_module(self.module, self.module_params, n_features, n_classes)

    def _make_optimizer(self, module: nn.Module) -> torch.optim.Optimizer:
        return build_optimizer(
            self.optimizer, module, self.lr, self.weight_decay, self.optimizer_params
        )

    def _init_model(self, X: NDArray[np.float32], classes: NDArray[Any]) -> None:
        """Build a freshly initialised module and optimizer for inputs like `X`."""
        device = self._device()
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        state = seeded_state(seed)
        with private_rng(device, state):
            module = self._make_module(math.prod(X.shape[1:]), int(classes.size)).to(device)
        module.train()
        self.module_ = module
        self.optimizer_ = self._make_optimizer(module)
        self.classes_ = classes
        self.n_classes_ = int(classes.size)
        self.input_shape_ = tuple(int(s) for s in X.shape[1:])
        self.loss_curve_: list[float] = []
        self.n_epochs_ = 0
        self.n_steps_ = 0
        self._rng_state = state

    def _validate_X(self, X: Any, *, reset: bool) -> NDArray[np.float32]:
        X = validate_data(self, X, reset=reset, allow_nd=True, dtype=np.float32)
        if not reset and tuple(X.shape[1:]) != self.input_shape_:
            raise ValueError(
                f"X has samples of shape {tuple(X.shape[1:])}, expected {self.input_shape_}"
            )
        return X

    def _classes_for(self, y: NDArray[Any] | None) -> NDArray[Any]:
        if self.classes is not None:
            return check_classes(self.classes)
        if y is None:
            raise ValueError("pass classes= or y to size the output layer")
        if y.ndim == 2:
            return np.arange(y.shape[1])
        return np.unique(y)

    def initialize(self, X: Any, y: ArrayLike | None = None) -> TorchClassifier:
        """Build the module and optimizer for inputs like `X`, without training.

        A global model for weight averaging can be created this way and its weights
        broadcast with :meth:`get_weights` / :meth:`set_weights`. With ``warm_start=True``
        the next ``fit`` continues from these weights (for `epochs_per_fit` epochs).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Example inputs: only their shape is used.
        y : array-like of shape (n_samples,) or (n_samples, n_classes), optional
            Labels or soft targets, to find the classes when `classes` is not set.

        Returns
        -------
        self : TorchClassifier
            With a freshly initialised ``module_``.

        Examples
        --------
        >>> import numpy as np
        >>> from learners import TorchClassifier
        >>> clf = TorchClassifier(module_params={"hidden": (8,)}, classes=[0, 1, 2])
        >>> clf.initialize(np.zeros((1, 4))).n_parameters()  # 4*8 + 8 + 8*3 + 3
        67
        """
        self._check_params()
        X = self._validate_X(X, reset=True)
        self._init_model(X, self._classes_for(None if y is None else np.asarray(y)))
        return self

    # ------------------------------------------------------------------ training
    def _targets(
        self, y: NDArray[Any], classes: NDArray[Any]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """Targets as probability rows, and a 0/1 weight per row (0: no signal)."""
        if y.ndim == 1:
            codes = label_indices(y, classes, name="y")
            targets = np.zeros((codes.size, classes.size), dtype=np.float32)
            targets[np.arange(codes.size), codes] = 1.0
            return targets, np.ones(codes.size, dtype=np.float32)
        soft = check_soft_targets(y, classes.size)
        sums = soft.sum(axis=1, keepdims=True)
        has_mass = sums[:, 0] > 0
        # a new array: the caller's y is never modified
        probs = np.divide(soft, sums, out=np.zeros(soft.shape, np.float32), where=sums > 0)
        return probs, has_mass.astype(np.float32)

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> TorchClassifier:
        """Train the network, or continue training it when `warm_start` is true.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Training inputs (cast to float32).
        y : array-like of shape (n_samples,) or (n_samples, n_classes)
            Labels (values from `classes`), or soft targets: non-negative class weights
            per row, one column per class (rows are normalised to sum to 1; all-zero rows
            are ignored).
        sample_weight : array-like of shape (n_samples,), optional
            Per-sample weights of the loss.

        Returns
        -------
        self : TorchClassifier
            The fitted classifier.
        """
        self._check_params()
        continuing = bool(self.warm_start) and hasattr(self, "module_")
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        X, y = validate_data(
            self,
            X,
            y,
            reset=not continuing,
            allow_nd=True,
            dtype=np.float32,
            multi_output=True,
            y_numeric=False,
        )
        if y.ndim == 2 and y.shape[1] == 1:
            warnings.warn(
                "A column-vector y was passed when a 1d array was expected; it is read as "
                "labels. Please change the shape of y to (n_samples,).",
                DataConversionWarning,
                stacklevel=2,
            )
            y = y.ravel()
        if y.ndim == 1:
            check_classification_targets(y)
        elif y.ndim != 2:
            raise ValueError(f"y must be 1-D labels or 2-D soft targets, got shape {y.shape}")
        classes = self._classes_for(y)
        targets, has_mass = self._targets(y, classes)
        weight = (
            _check_sample_weight(sample_weight, X, dtype=np.float32, ensure_non_negative=True)
            * has_mass
        )

        if continuing:
            if tuple(X.shape[1:]) != self.input_shape_:
                raise ValueError(
                    f"warm_start: X has samples of shape {tuple(X.shape[1:])}, the network "
                    f"was built for {self.input_shape_}"
                )
            if not np.array_equal(classes, self.classes_):
                raise ValueError(
                    f"warm_start: classes changed from {self.classes_.tolist()!r} to "
                    f"{classes.tolist()!r}; use warm_start=False or fixed classes="
                )
            epochs, steps = self.epochs_per_fit, self.steps_per_fit
        else:
            self._init_model(X, classes)
            epochs, steps = self.max_epochs, None
        self._train(X, targets, weight, epochs, steps)
        return self

    def _train(
        self,
        X: NDArray[np.float32],
        targets: NDArray[np.float32],
        weight: NDArray[np.float32],
        epochs: int,
        steps: int | None,
    ) -> None:
        device = self._device()
        data = [torch.from_numpy(np.ascontiguousarray(a)) for a in (X, targets, weight)]
        n = data[0].shape[0]

        def step(idx: torch.Tensor) -> float:
            loss = self._step(*(t[idx].to(device) for t in data))
            self.n_steps_ += 1
            return loss

        self.module_.train()
        with num_threads(self.n_threads), private_rng(device, self._rng_state):
            if steps is None:
                for _ in range(epochs):
                    total = sum(step(idx) for idx in self._batches(n))
                    self._record(total / n)
                    self.n_epochs_ += 1
            else:
                total, seen, done = 0.0, 0, 0
                while done < steps:
                    for idx in self._batches(n):
                        total += step(idx)
                        seen += idx.numel()
                        done += 1
                        if done == steps:
                            break
                    else:
                        self.n_epochs_ += 1
                self._record(total / max(seen, 1))

    def _batches(self, n: int) -> Iterable[torch.Tensor]:
        """Row indices of the mini-batches of one epoch (a subclass may sample otherwise)."""
        return torch.randperm(n).split(min(self.batch_size, n))

    def _step(self, xb: torch.Tensor, tb: torch.Tensor, wb: torch.Tensor) -> float:
        """One optimizer step on a mini-batch; the summed loss of its rows (a hook)."""
        self.optimizer_.zero_grad(set_to_none=True)
        logp = torch.log_softmax(self.module_(xb), dim=1)
        loss = (wb * -(tb * logp).sum(dim=1)).sum() / xb.shape[0]
        loss.backward()
        self.optimizer_.step()
        return float(loss.detach()) * xb.shape[0]

    def _record(self, loss: float) -> None:
        self.loss_curve_.append(loss)
        if self.verbose > 0:
            print(f"epoch {len(self.loss_curve_)}: loss {loss:.4f}")

    # ------------------------------------------------------------------ predicting
    def _logits(self, X: Any) -> torch.Tensor:
        check_is_fitted(self, "module_")
        X = self._validate_X(X, reset=False)
        device = self._device()
        module = self.module_
        was_training = module.training
        module.eval()
        try:
            with torch.no_grad(), num_threads(self.n_threads):
                Xt = torch.from_numpy(np.ascontiguousarray(X))
                chunks = [
                    module(Xt[start : start + _PREDICT_BATCH].to(device)).double().cpu()
                    for start in range(0, Xt.shape[0], _PREDICT_BATCH)
                ]
        finally:
            module.train(was_training)
        return torch.cat(chunks)

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Class probabilities (softmax of the logits), in batches, in evaluation mode.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs (cast to float32).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Probabilities in the order of ``classes_``; rows sum to 1.
        """
        return torch.softmax(self._logits(X), dim=1).numpy()

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """Most probable class of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs (cast to float32).

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        codes = self._logits(X).argmax(dim=1).numpy()
        return self.classes_[codes]

    def _expected_failed_checks(self) -> dict[str, str]:
        """The scikit-learn checks this classifier fails, and why (see
        :func:`learners.sklearn_checks.expected_failed_checks`)."""
        failed = {
            "check_sample_weight_equivalence_on_dense_data": (
                "mini-batch SGD: a row of weight 2 is not the row repeated twice (the "
                "batches, their number and the shuffling differ)"
            ),
        }
        if self.warm_start:
            failed.update(WARM_START_REFIT)
        return failed

    # -------------------------------------------------------------- checkpoints
    #: attributes holding tensors, stored by :func:`cotrain.persistence.checkpoint.save_model` with
    #: ``torch.save`` (read back with ``weights_only=True``) instead of skops
    _checkpoint_tensor_attrs = ("module_", "optimizer_", "_rng_state")

    def _checkpoint_tensors(self) -> dict[str, Any]:
        """The network, optimizer and random-generator state as plain tensors."""
        return {
            "module": self.module_.state_dict(),
            "optimizer": self.optimizer_.state_dict(),
            "rng": dict(self._rng_state),
        }

    def _restore_tensors(self, saved: dict[str, Any]) -> None:
        """Rebuild the network and optimizer from :meth:`_checkpoint_tensors`."""
        device = self._device()
        module = self._make_module(math.prod(self.input_shape_), self.n_classes_).to(device)
        module.load_state_dict(saved["module"])
        module.train()
        self.module_ = module
        self.optimizer_ = self._make_optimizer(module)
        self.optimizer_.load_state_dict(saved["optimizer"])
        self._rng_state = dict(saved["rng"])

    # ------------------------------------------------------------------ weights
    def _named_parameters(self, trainable_only: bool) -> Iterator[tuple[str, nn.Parameter]]:
        if not hasattr(self, "module_"):
            raise NotFittedError(
                f"this {type(self).__name__} has no network yet: call initialize(X) or fit first"
            )
        for name, param in self.module_.named_parameters():
            if param.requires_grad or not trainable_only:
                yield name, param

    def get_weights(self, trainable_only: bool = True) -> dict[str, NDArray[np.float32]]:
        """The network's parameters by name, as float32 numpy copies.

        Parameters
        ----------
        trainable_only : bool, default=True
            Only the parameters with ``requires_grad`` (frozen ones are left out).

        Returns
        -------
        dict of str to ndarray
            ``module_.named_parameters()`` order; buffers (e.g. batch-norm statistics)
            are not included.

        Examples
        --------
        >>> import numpy as np
        >>> from learners import TorchClassifier
        >>> clf = TorchClassifier(module_params={"hidden": (8,)}, classes=[0, 1])
        >>> {k: v.shape for k, v in clf.initialize(np.zeros((1, 3))).get_weights().items()}
        {'layers.0.weight': (8, 3), 'layers.0.bias': (8,), 'layers.2.weight': (2, 8), \
'layers.2.bias': (2,)}
        """
        return {
            name: param.detach().cpu().numpy().astype(np.float32, copy=True)
            for name, param in self._named_parameters(trainable_only)
        }

    def set_weights(
        self, weights: dict[str, ArrayLike], *, reset_optimizer: bool = False
    ) -> TorchClassifier:
        """Load parameters by name (e.g. a global model's, for weight averaging).

        Parameters
        ----------
        weights : dict of str to array-like
            Values for some or all of ``module_``'s named parameters (frozen ones
            included); each must have exactly the parameter's shape. Parameters not named
            keep their values.
        reset_optimizer : bool, default=False
            Also start a fresh optimizer (dropping e.g. Adam's moment estimates).

        Returns
        -------
        self : TorchClassifier
            With the new weights; the next ``fit`` continues from them when `warm_start`
            is true.

        Examples
        --------
        >>> import numpy as np
        >>> from learners import TorchClassifier
        >>> a = TorchClassifier(classes=[0, 1], random_state=0).initialize(np.zeros((1, 3)))
        >>> b = TorchClassifier(classes=[0, 1], random_state=1).initialize(np.zeros((1, 3)))
        >>> b.set_weights(a.get_weights()).predict_proba(np.ones((1, 3))).tolist() == (
        ...     a.predict_proba(np.ones((1, 3))).tolist())
        True
        """
        params = dict(self._named_parameters(trainable_only=False))
        unknown = sorted(set(weights) - set(params))
        if unknown:
            raise KeyError(f"unknown parameter names {unknown}; the network has {sorted(params)}")
        values = {}
        for name, value in weights.items():
            arr = np.asarray(value)
            if tuple(arr.shape) != tuple(params[name].shape):
                raise ValueError(
                    f"weights[{name!r}] has shape {tuple(arr.shape)}, the parameter has "
                    f"{tuple(params[name].shape)}"
                )
            values[name] = arr
        with torch.no_grad():
            for name, arr in values.items():
                param = params[name]
                param.copy_(torch.as_tensor(arr, dtype=param.dtype, device=param.device))
        if reset_optimizer:
            self.optimizer_ = self._make_optimizer(self.module_)
        return self

    def n_parameters(self, trainable_only: bool = True) -> int:
        """Number of scalar parameters of the network.

        Parameters
        ----------
        trainable_only : bool, default=True
            Count only the parameters with ``requires_grad``.

        Returns
        -------
        int
            The total number of values.
        """
        return int(sum(p.numel() for _, p in self._named_parameters(trainable_only)))
