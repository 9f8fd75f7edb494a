"""Ready-made torch modules for :class:`learners.TorchClassifier`, sized for small CPUs.

Both follow the module protocol of :class:`~learners.TorchClassifier`: their ``__init__``
takes ``n_classes`` (and ``n_features``), which the classifier injects from the data, so
they can be given as a class plus keyword arguments::

    TorchClassifier(module=MLP, module_params={"hidden": (64,)})
    TorchClassifier(module=SmallCNN, module_params={"width": 8})

This module imports torch; ``import learners`` does not (it loads this module lazily).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["MLP", "SmallCNN"]


class MLP(nn.Module):
    """A multi-layer perceptron: ``Linear -> ReLU [-> Dropout]`` blocks and a linear head.

    Inputs of any shape ``(n, ...)`` are flattened to ``(n, n_features)``. The output is
    one logit per class (no softmax).

    Parameters
    ----------
    n_features : int
        Number of input features (injected by :class:`~learners.TorchClassifier`).
    n_classes : int
        Number of output units (injected by :class:`~learners.TorchClassifier`).
    hidden : sequence of int, default=(100,)
        Width of each hidden layer; ``()`` gives a linear (softmax regression) model.
    dropout : float, default=0.0
        Dropout probability after each hidden activation.

    Examples
    --------
    >>> import torch
    >>> from learners.modules import MLP
    >>> net = MLP(64, 10, hidden=(32,))
    >>> net(torch.zeros(5, 64)).shape
    torch.Size([5, 10])
    >>> sum(p.numel() for p in net.parameters())  # 64*32 + 32 + 32*10 + 10
    2410
    """

    def __init__(
        self,
        n_features: int,
        n_classes: int,
        hidden: Sequence[int] = (100,),
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        layers: list[nn.Module] = []
        width = int(n_features)
        for h in hidden:
            layers += [nn.Linear(width, int(h)), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = int(h)
        layers.append(nn.Linear(width, int(n_classes)))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape ``(n, n_classes)`` for inputs of shape ``(n, ...)``."""
        return self.layers(x.flatten(1))


class SmallCNN(nn.Module):
    """A small convolutional network: two conv blocks and a linear head.

    Each block is ``Conv2d(3x3, padding=1) -> ReLU -> MaxPool2d(2)``; the blocks have
    `width` and ``2 * width`` channels. Inputs may be images ``(n, in_channels, H, W)``,
    ``(n, H, W)`` when ``in_channels == 1``, or flat rows of ``in_channels * H * W``
    features (reshaped inside ``forward``), so it also runs on scikit-learn's 8x8 digits.

    Parameters
    ----------
    n_classes : int
        Number of output units (injected by :class:`~learners.TorchClassifier`).
    in_channels : int, default=1
        Image channels (1 for grey-scale, 3 for colour).
    image_size : int, optional
        Side of the (square) image, e.g. 8 (digits), 28 (MNIST) or 32 (CIFAR-10); at least
        4. Inferred from `n_features` when omitted.
    width : int, default=16
        Channels of the first conv block.
    n_features : int, optional
        Number of input values per sample, ``in_channels * image_size ** 2`` (injected by
        :class:`~learners.TorchClassifier`); only used to infer `image_size`.

    Examples
    --------
    >>> import torch
    >>> from learners.modules import SmallCNN
    >>> net = SmallCNN(10, image_size=8, width=8)
    >>> net(torch.zeros(5, 64)).shape  # flat 8x8 digits
    torch.Size([5, 10])
    >>> SmallCNN(10, in_channels=3, n_features=3 * 32 * 32)(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    """

    def __init__(
        self,
        n_classes: int,
        in_channels: int = 1,
        image_size: int | None = None,
        width: int = 16,
        n_features: int | None = None,
    ) -> None:
        super().__init__()
        if image_size is None:
            if n_features is None:
                raise ValueError("SmallCNN needs image_size (or n_features to infer it from)")
            side = math.isqrt(int(n_features) // int(in_channels))
            if in_channels * side * side != n_features:
                raise ValueError(
                    f"cannot infer a square image_size from n_features={n_features} "
                    f"and in_channels={in_channels}; pass image_size"
                )
            image_size = side
        if image_size < 4:
            raise ValueError(f"image_size must be at least 4, got {image_size}")
        self.in_channels = int(in_channels)
        self.image_size = int(image_size)
        self.features = nn.Sequential(
            nn.Conv2d(self.in_channels, width, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        side = self.image_size // 2 // 2
        self.head = nn.Linear(2 * width * side * side, int(n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape ``(n, n_classes)`` for images or flat rows."""
        shape = (self.in_channels, self.image_size, self.image_size)
        if x.dim() != 4:
            if math.prod(x.shape[1:]) != math.prod(shape):
                raise ValueError(
                    f"SmallCNN expects {math.prod(shape)} values per sample {shape}, "
                    f"got input of shape {tuple(x.shape)}"
                )
            x = x.reshape(x.shape[0], *shape)
        return self.head(self.features(x).flatten(1))
