"""The server's training loop of ensemble distillation (FedDF, FedDS, FedAUX), in torch.

The student is a :class:`learners.TorchClassifier`'s network. One call of
:func:`distill_module` trains it on the public pool to match soft targets (the ensemble of
the clients' predictions), optionally jointly with FedDS's rotation-prediction loss
(Gidaris et al. 2018): ``L = KL(target ‖ σ(f(x))) + γ · Σ_{i=0..3} CE(i, r(h(rot_{90i} x)))``
where ``h`` is the student's feature extractor and ``r`` a server-only rotation head.

**Which part is the feature extractor.** The input of the network's *last* ``nn.Linear``
(in ``named_modules`` order) is taken as the feature vector ``h(x)``: for
:class:`learners.MLP` the last hidden layer, for :class:`learners.SmallCNN` the flattened
convolutional features. The rotation head is a separate ``nn.Linear(dim h, 4)`` kept by the
server; it is never sent to the clients and is not part of the student's weights. This
keeps the clients' network one-headed (FedAvg's weight interface unchanged) while the
server model is two-headed, as FedDS's ``f_s = {f_sf, f_sc, f_ss}``.

This module imports torch; :mod:`cotrain.baselines.ensemble_distillation` imports it only
when a fit needs it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = [
    "ExtractorFeatures",
    "RotationHead",
    "distill_module",
    "feature_layer",
    "image_shape_of",
    "penultimate",
    "rotate_batch",
]


def feature_layer(module: nn.Module) -> nn.Linear:
    """The classifier layer of a network: its last ``nn.Linear`` (named_modules order).

    Parameters
    ----------
    module : nn.Module
        The network.

    Returns
    -------
    nn.Linear
        The layer whose input is taken as the network's feature vector.

    Raises
    ------
    TypeError
        If the network has no ``nn.Linear`` layer.

    Examples
    --------
    >>> from learners.modules import SmallCNN
    >>> feature_layer(SmallCNN(10, image_size=8, width=4)).in_features
    32
    """
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise TypeError(
            f"{type(module).__name__} has no nn.Linear layer: FedDS's rotation loss and "
            "FedAUX's extractor features need the input of the last linear layer"
        )
    return linears[-1]


@contextmanager
def _capture_features(module: nn.Module) -> Iterator[list[torch.Tensor]]:
    """Collect the inputs of the network's last linear layer during forward passes."""
    seen: list[torch.Tensor] = []
    handle = feature_layer(module).register_forward_pre_hook(
        lambda _m, args: seen.append(args[0].flatten(1))
    )
    try:
        yield seen
    finally:
        handle.remove()


def penultimate(module: nn.Module, X: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """The features ``h(x)`` (input of the last linear layer) of ``X``, in eval mode.

    Parameters
    ----------
    module : nn.Module
        The network (e.g. a pretrained ``TorchClassifier.module_``).
    X : ndarray
        Inputs in the network's format.
    batch_size : int, default=512
        Rows per forward pass.

    Returns
    -------
    ndarray of float64, shape (n, dim h)

    Examples
    --------
    >>> import numpy as np
    >>> from learners.modules import SmallCNN
    >>> penultimate(SmallCNN(10, image_size=8, width=4), np.zeros((3, 64))).shape
    (3, 32)
    """
    was_training = module.training
    module.eval()
    device = next(module.parameters()).device
    out = []
    try:
        with torch.no_grad(), _capture_features(module) as seen:
            for start in range(0, len(X), batch_size):
                xb = torch.as_tensor(np.asarray(X[start : start + batch_size]), dtype=torch.float32)
                module(xb.to(device))
                out.append(seen.pop().double().cpu().numpy())
    finally:
        module.train(was_training)
    return np.concatenate(out) if out else np.zeros((0, feature_layer(module).in_features))


def rotate_batch(
    x: torch.Tensor, image_shape: tuple[int, int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The four rotations (0°, 90°, 180°, 270°) of a batch and their labels 0..3.

    Rows are reshaped to ``image_shape`` ``(C, H, W)`` (square H = W), rotated in the
    image plane, and reshaped back to the rows' own shape, so flat 8×8 digits stay flat.

    Parameters
    ----------
    x : Tensor of shape (n, ...)
        A batch with ``prod(image_shape)`` values per row.
    image_shape : tuple of int
        ``(channels, height, width)`` with ``height == width``.

    Returns
    -------
    rotated : Tensor of shape (4n, ...)
        Rotation ``i`` of every row, for ``i = 0..3`` in turn.
    labels : Tensor of int64, shape (4n,)

    Examples
    --------
    >>> import torch
    >>> x = torch.arange(4.0).reshape(1, 4)  # one 2x2 image [[0, 1], [2, 3]]
    >>> rot, lab = rotate_batch(x, (1, 2, 2))
    >>> rot.tolist()
    [[0.0, 1.0, 2.0, 3.0], [1.0, 3.0, 0.0, 2.0], [3.0, 2.0, 1.0, 0.0], [2.0, 0.0, 3.0, 1.0]]
    >>> lab.tolist()
    [0, 1, 2, 3]
    """
    n = x.shape[0]
    images = x.reshape(n, *image_shape)
    rotated = torch.cat([torch.rot90(images, i, dims=(2, 3)) for i in range(4)])
    labels = torch.arange(4, device=x.device).repeat_interleave(n)
    return rotated.reshape(4 * n, *x.shape[1:]), labels


class RotationHead(nn.Module):
    """FedDS's SSL classifier ``f_ss``: predicts which of 4 rotations from features ``h(x)``.

    Parameters
    ----------
    in_features : int
        Dimension of the features (the input of the network's last linear layer).

    Examples
    --------
    >>> import torch
    >>> RotationHead(32)(torch.zeros(5, 32)).shape
    torch.Size([5, 4])
    """

    def __init__(self, in_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(int(in_features), 4)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Rotation logits of shape ``(n, 4)``."""
        return self.linear(h)


@contextmanager
def _threads(n: int | None) -> Iterator[None]:
    old = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def distill_module(
    module: nn.Module,
    X: np.ndarray,
    targets: np.ndarray | None,
    *,
    epochs: int,
    batch_size: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
    gamma: float = 0.0,
    rotation_head: RotationHead | None = None,
    image_shape: tuple[int, int, int] | None = None,
    n_threads: int | None = None,
) -> list[float]:
    """Train ``module`` on ``X`` towards soft ``targets`` (KL), plus γ × rotation loss.

    A fresh Adam optimizer (over the module's trainable parameters and the rotation
    head's) is made for the call; mini-batches are shuffled by a generator seeded with
    ``seed``. The distillation loss per batch is ``mean_x KL(target(x) ‖ σ(f(x)))``; the
    SSL loss is FedDS's Alg. 4, ``Σ_{i=0..3} mean_x CE(i, r(h(rot_{90i} x)))``. Both are
    batch means, so FedDS's γ = 300 on *summed* batch losses of 64 rows is γ = 300/64 here.

    Parameters
    ----------
    module : nn.Module
        The student network (trained in place).
    X : ndarray
        The public inputs, in the network's format.
    targets : ndarray of shape (n, n_classes) or None
        Soft targets (rows sum to 1); None trains the rotation loss alone (pretraining).
    epochs : int
        Passes over ``X``.
    batch_size : int, default=64
    lr : float, default=1e-3
        Adam's learning rate.
    seed : int, default=0
        Seeds the shuffling.
    gamma : float, default=0.0
        Weight of the rotation loss (0: plain distillation).
    rotation_head : RotationHead, optional
        Required when ``gamma > 0`` or ``targets`` is None; trained with the module.
    image_shape : tuple of int, optional
        ``(C, H, W)`` of one input, for the rotations.
    n_threads : int, optional
        Torch threads during the call (restored afterwards).

    Returns
    -------
    list of float
        Mean total loss of every epoch.

    Examples
    --------
    >>> import numpy as np
    >>> from learners.modules import MLP
    >>> net = MLP(4, 3, hidden=(8,))
    >>> X = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    >>> T = np.tile([0.7, 0.2, 0.1], (32, 1))
    >>> losses = distill_module(net, X, T, epochs=20, lr=1e-2)
    >>> losses[-1] < losses[0]
    True
    """
    ssl = targets is None or gamma > 0
    if ssl and (rotation_head is None or image_shape is None):
        raise ValueError("the rotation loss needs rotation_head and image_shape")
    params = [p for p in module.parameters() if p.requires_grad]
    if ssl:
        params += list(rotation_head.parameters())
    optimizer = torch.optim.Adam(params, lr=lr)
    device = next(module.parameters()).device
    Xt = torch.as_tensor(np.ascontiguousarray(X), dtype=torch.float32)
    Tt = None if targets is None else torch.as_tensor(targets, dtype=torch.float32)
    gen = torch.Generator().manual_seed(int(seed))
    n = Xt.shape[0]
    losses = []
    module.train()
    with _threads(n_threads):
        for _ in range(int(epochs)):
            total = 0.0
            for idx in torch.randperm(n, generator=gen).split(min(batch_size, n)):
                xb = Xt[idx].to(device)
                optimizer.zero_grad(set_to_none=True)
                loss = torch.zeros((), device=device)
                if Tt is not None:
                    tb = Tt[idx].to(device)
                    logp = torch.log_softmax(module(xb), dim=1)
                    # KL(t ‖ p) = Σ t log t − Σ t log p (0 log 0 = 0)
                    plogp = torch.where(tb > 0, tb * torch.log(tb.clamp_min(1e-30)), 0.0)
                    loss = loss + (plogp - tb * logp).sum(dim=1).mean()
                if ssl:
                    rot, labels = rotate_batch(xb, image_shape)
                    with _capture_features(module) as seen:
                        module(rot)
                    rot_logits = rotation_head(seen[-1]).reshape(4, len(idx), 4)
                    ce = nn.functional.cross_entropy(
                        rot_logits.reshape(-1, 4), labels, reduction="none"
                    )
                    weight = 1.0 if Tt is None else float(gamma)
                    loss = loss + weight * ce.reshape(4, len(idx)).mean(dim=1).sum()
                loss.backward()
                optimizer.step()
                total += float(loss.detach()) * len(idx)
            losses.append(total / n)
    return losses


def image_shape_of(row_shape: tuple[int, ...], module: nn.Module) -> tuple[int, int, int]:
    """``(C, H, W)`` of one input: the rows' own if 3-D, the module's, or a square.

    Parameters
    ----------
    row_shape : tuple of int
        Shape of one input row.
    module : nn.Module
        The network; ``in_channels``/``image_size`` attributes are used when present.

    Returns
    -------
    tuple of int

    Raises
    ------
    ValueError
        If the rows are not square images.

    Examples
    --------
    >>> from learners.modules import MLP
    >>> image_shape_of((64,), MLP(64, 10))
    (1, 8, 8)
    """
    if len(row_shape) == 3:
        shape = tuple(int(s) for s in row_shape)
    elif hasattr(module, "in_channels") and hasattr(module, "image_size"):
        side = int(module.image_size)
        shape = (int(module.in_channels), side, side)
    else:
        n = math.prod(row_shape)
        side = math.isqrt(n)
        shape = (1, side, side)
    if shape[1] != shape[2] or math.prod(shape) != math.prod(row_shape):
        raise ValueError(
            f"inputs of shape {tuple(row_shape)} are not square images: the rotation loss "
            "needs image_shape=(C, H, W) with H == W"
        )
    return shape  # type: ignore[return-value]


class ExtractorFeatures:
    """Picklable feature map ``X -> penultimate(module, X)`` of a frozen copy of a network.

    Parameters
    ----------
    module : nn.Module
        The (pretrained) network whose features the scorers use; copied now.
    row_shape : tuple of int, optional
        Shape of one input row: flattened rows are reshaped to it first.

    Examples
    --------
    >>> import numpy as np
    >>> from learners.modules import MLP
    >>> ExtractorFeatures(MLP(4, 2, hidden=(3,)))(np.zeros((2, 4))).shape
    (2, 3)
    """

    def __init__(self, module: nn.Module, row_shape: tuple[int, ...] | None = None) -> None:
        import copy

        self.module = copy.deepcopy(module).eval()
        self.row_shape = None if row_shape is None else tuple(int(s) for s in row_shape)

    def __call__(self, X: Any) -> np.ndarray:
        """The features of ``X``, shape ``(n, dim h)``."""
        X = np.asarray(X, dtype=np.float32)
        if self.row_shape is not None:
            X = X.reshape(-1, *self.row_shape)
        return penultimate(self.module, X)
