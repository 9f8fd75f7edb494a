"""The torch plumbing of :class:`~learners.torch.TorchClassifier`, free of estimator state.

Building a network from a module spec and an optimizer from its name, resolving a device,
and two scopes every fit and predict runs in: the estimator's own random stream
(:func:`private_rng`) and a thread count (:func:`num_threads`), both restoring torch's global
settings afterwards. The estimator API (parameters, ``fit``, ``predict``, weights) stays in
:mod:`learners.torch`.

This module imports torch.

Examples
--------
>>> import torch
>>> from learners._torch_tools import private_rng, seeded_state
>>> state = seeded_state(0)
>>> with private_rng(torch.device("cpu"), state):
...     first = torch.rand(1)
>>> with private_rng(torch.device("cpu"), seeded_state(0)):
...     again = torch.rand(1)
>>> bool(first == again)
True
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:
    import torch
    from torch import nn
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError('TorchClassifier needs torch: pip install "cotrain[torch]"') from exc

__all__ = [
    "OPTIMIZERS",
    "build_module",
    "build_optimizer",
    "num_threads",
    "private_rng",
    "resolve_device",
    "seeded_state",
]

#: The optimizers a TorchClassifier accepts by name.
OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
}


@contextmanager
def private_rng(device: torch.device, state: dict[str, torch.Tensor]) -> Iterator[None]:
    """Run with torch's global RNG set to `state`, then save it back there and restore the
    caller's global RNG: dropout, shuffling and initialisation draw from the estimator's own
    stream and the global state is left as it was."""
    devices = (
        [device.index if device.index is not None else torch.cuda.current_device()]
        if (device.type == "cuda")
        else []
    )
    with torch.random.fork_rng(devices=devices):
        torch.set_rng_state(state["cpu"])
        if devices:
            if "cuda" in state:
                torch.cuda.set_rng_state(state["cuda"], devices[0])
            else:  # first use on this device: seed it from the estimator's own stream
                seed = int(torch.randint(0, 2**62, (1,)).item())
                with torch.cuda.device(devices[0]):
                    torch.cuda.manual_seed(seed)
        yield
        state["cpu"] = torch.get_rng_state()
        if devices:
            state["cuda"] = torch.cuda.get_rng_state(devices[0])


@contextmanager
def num_threads(n: int | None) -> Iterator[None]:
    """Run with `n` torch intra-op threads (None: as set), restoring the setting after."""
    previous = torch.get_num_threads()
    if n is None or n == previous:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def seeded_state(seed: int) -> dict[str, torch.Tensor]:
    """A fresh RNG state for `seed` (computed without touching the global RNG)."""
    return {"cpu": torch.Generator().manual_seed(seed).get_state()}


def resolve_device(spec: Any) -> torch.device:
    """The torch device named by `spec`; ValueError if it is none or CUDA is missing.

    Examples
    --------
    >>> from learners._torch_tools import resolve_device
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    try:
        device = torch.device(spec)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={spec!r} is not a torch device: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={spec!r} was requested but CUDA is not available "
            "(torch.cuda.is_available() is False); use device='cpu'"
        )
    return device


def build_module(
    spec: Any, module_params: dict[str, Any] | None, n_features: int, n_classes: int
) -> nn.Module:
    """The network of a ``module=`` spec, with the data's sizes injected.

    Parameters
    ----------
    spec : nn.Module class, callable, nn.Module instance or None
        As :class:`~learners.torch.TorchClassifier`'s ``module`` (None: :class:`~learners.MLP`).
    module_params : dict or None
        Extra keyword arguments for `spec`.
    n_features, n_classes : int
        Passed by keyword to those of `spec`'s parameters named so, else positionally.

    Returns
    -------
    nn.Module
        A new network (an instance `spec` is deep-copied).

    Examples
    --------
    >>> from learners._torch_tools import build_module
    >>> build_module(None, {"hidden": (4,)}, n_features=3, n_classes=2)
    MLP(
      (layers): Sequential(
        (0): Linear(in_features=3, out_features=4, bias=True)
        (1): ReLU()
        (2): Linear(in_features=4, out_features=2, bias=True)
      )
    )
    """
    from .modules import MLP

    spec = MLP if spec is None else spec
    kwargs = dict(module_params or {})
    if isinstance(spec, nn.Module):
        if kwargs:
            raise ValueError("module_params cannot be used with a module instance")
        return copy.deepcopy(spec)
    if not callable(spec):
        raise TypeError(
            f"module must be an nn.Module class, a callable or an instance, got {spec!r}"
        )
    clash = {"n_features", "n_classes"}.intersection(kwargs)
    if clash:
        raise ValueError(f"module_params may not set {sorted(clash)}: they are injected")
    try:
        names = set(inspect.signature(spec).parameters)
    except (TypeError, ValueError):  # builtins without a signature
        names = set()
    sizes = {"n_features": n_features, "n_classes": n_classes}
    injected = {k: v for k, v in sizes.items() if k in names}
    module = spec(**injected, **kwargs) if injected else spec(n_features, n_classes, **kwargs)
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must build an nn.Module, got {type(module).__name__}")
    return module


def build_optimizer(
    spec: Any,
    module: nn.Module,
    lr: float,
    weight_decay: float,
    optimizer_params: dict[str, Any] | None,
) -> torch.optim.Optimizer:
    """An optimizer over `module`'s trainable parameters, from a name or an optimizer class.

    Examples
    --------
    >>> from torch import nn
    >>> from learners._torch_tools import build_optimizer
    >>> type(build_optimizer("SGD", nn.Linear(2, 1), 0.1, 0.0, {"momentum": 0.9})).__name__
    'SGD'
    """
    if isinstance(spec, str):
        if spec.lower() not in OPTIMIZERS:
            raise ValueError(
                f"optimizer must be one of {sorted(OPTIMIZERS)} or a torch optimizer "
                f"class, got {spec!r}"
            )
        spec = OPTIMIZERS[spec.lower()]
    elif not callable(spec):
        raise TypeError(f"optimizer must be a string or a torch optimizer class, got {spec!r}")
    params = [p for p in module.parameters() if p.requires_grad]
    return spec(params, lr=lr, weight_decay=weight_decay, **(optimizer_params or {}))
