"""Weights, checkpoints and pickling of an :class:`learners.LMClassifier`.

:class:`LMStateMixin` gives the classifier the weight interface FedAvg uses
(:meth:`~LMStateMixin.get_weights`, :meth:`~LMStateMixin.set_weights`), the hooks through
which cotrain checkpoints store it without pickle (``_checkpoint_tensors`` /
``_restore_tensors``, see :mod:`learners.lm.state`), and pickling and deep copies that
rebuild the model from its own configuration type.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.validation import check_is_fitted

from .loading import import_torch
from .state import (
    build_model,
    model_state,
    param_from_plain,
    param_to_plain,
    tokenizer_files,
    tokenizer_from_files,
)

__all__ = ["LMStateMixin"]


class LMStateMixin:
    """The state of a fitted language-model classifier: weights, checkpoints, pickles.

    The class it is mixed into provides ``model_``, ``optimizer_``, ``tokenizer_``,
    ``device``, ``_wrap(model)`` (LoRA and checkpointing on a rebuilt base model) and
    ``_make_optimizer()``.

    Examples
    --------
    >>> from learners import LMClassifier
    >>> issubclass(LMClassifier, LMStateMixin)
    True
    """

    #: attributes that :func:`cotrain.persistence.checkpoint.save_model` stores with ``torch.save``
    #: (read
    #: back with ``weights_only=True``, see :meth:`_checkpoint_tensors`) instead of skops;
    #: the token cache is dropped by ``__getstate__``, which copies and skops use
    _checkpoint_tensor_attrs = ("model", "tokenizer", "model_", "optimizer_", "tokenizer_")

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
            Only the trained parameters (with LoRA: the adapters and the head).

        Returns
        -------
        dict of str to ndarray
            Parameter name (as in ``model_.named_parameters()``) to its values.
        """
        return {
            name: p.detach().to("cpu", dtype=p.dtype).float().numpy().copy()
            for name, p in self._named_parameters(trainable_only)
        }

    def set_weights(self, weights: dict[str, ArrayLike]) -> Any:
        """Overwrite named parameters (any subset of ``model_.named_parameters()``).

        Parameters
        ----------
        weights : dict of str to array-like
            As returned by :meth:`get_weights` (e.g. averaged over clients).

        Returns
        -------
        self
        """
        torch, _ = import_torch()
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
        state and the tokenizer's files (see :mod:`learners.lm.state`)."""
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
            tok.padding_side = "right"
            self.tokenizer_ = tok

    def _restore_model(self, state: dict[str, Any]) -> None:
        self.model_ = build_model(state, self._wrap).to(self.device)
        self.optimizer_ = self._make_optimizer()
        if state["optimizer"] is not None:
            self.optimizer_.load_state_dict(state["optimizer"])

    # ------------------------------------------------------------------ copying, pickling
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_token_cache", None)  # rebuilt on demand
        model = state.pop("model_", None)
        optimizer = state.pop("optimizer_", None)
        if model is not None:
            torch, _ = import_torch()
            buffer = io.BytesIO()
            torch.save(model_state(model, optimizer), buffer)
            state["_model_bytes"] = buffer.getvalue()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        blob = state.pop("_model_bytes", None)
        self.__dict__.update(state)
        if blob is not None:
            torch, _ = import_torch()
            self._restore_model(torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True))

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        # native deep copies of the model and optimizer (one memo keeps the optimizer
        # pointing at the copied parameters); faster than a pickle round trip. The token
        # cache is left out: it belongs to the original's tokenizer object, and the copy
        # would discard it at its first encoding anyway (rebuilt on demand).
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            if key != "_token_cache":  # keyed to this tokenizer object; the copy has its own
                new.__dict__[key] = copy.deepcopy(value, memo)
        return new
