"""The networks that pretraining fits and clients start from (imports torch).

A pretrained body is the feature part of one of :mod:`learners.modules`' networks, so a
client initialised from it has exactly the architecture of a randomly initialised client
(``TorchClassifier(SmallCNN, ...)`` or ``TorchClassifier(MLP, ...)``) and the two can be
compared like for like:

- ``"SmallCNN"``: the body is ``features`` (two conv blocks); the embedding is its
  flattened output;
- ``"MLP"``: the body is every layer but the last ``Linear``; the embedding is the last
  hidden layer's activation.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from learners.modules import MLP, SmallCNN

__all__ = ["ARCHITECTURES", "body_keys", "build_network", "embed", "embedding_dim"]

#: the architectures a pretrained body can belong to
ARCHITECTURES = ("SmallCNN", "MLP")


def build_network(
    architecture: str, params: dict[str, Any], n_features: int, n_classes: int
) -> nn.Module:
    """A fresh ``learners.modules`` network (random weights) of `architecture`.

    Parameters
    ----------
    architecture : {"SmallCNN", "MLP"}
        Which network.
    params : dict
        Its keyword arguments besides the injected sizes (e.g. ``{"image_size": 8,
        "width": 16}`` or ``{"hidden": (128,)}``).
    n_features : int
        Input values per sample.
    n_classes : int
        Output units of the head.

    Returns
    -------
    torch.nn.Module
        The network, as :class:`learners.TorchClassifier` would build it.

    Examples
    --------
    >>> net = build_network("MLP", {"hidden": (16,)}, 64, 10)
    >>> type(net).__name__, body_keys("MLP", net)
    ('MLP', ['layers.0.weight', 'layers.0.bias'])
    """
    if architecture == "SmallCNN":
        return SmallCNN(n_classes, n_features=n_features, **params)
    if architecture == "MLP":
        return MLP(n_features, n_classes, **params)
    raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {architecture!r}")


def body_keys(architecture: str, network: nn.Module) -> list[str]:
    """The state-dict keys of the network's body (everything but the output head).

    Parameters
    ----------
    architecture : {"SmallCNN", "MLP"}
        The network's architecture.
    network : torch.nn.Module
        A network from :func:`build_network`.

    Returns
    -------
    list of str
        Keys of ``network.state_dict()`` that pretraining fits.

    Examples
    --------
    >>> net = build_network("SmallCNN", {"image_size": 8, "width": 4}, 64, 10)
    >>> body_keys("SmallCNN", net)
    ['features.0.weight', 'features.0.bias', 'features.3.weight', 'features.3.bias']
    """
    keys = list(network.state_dict())
    if architecture == "SmallCNN":
        return [k for k in keys if k.startswith("features.")]
    last = f"layers.{len(network.layers) - 1}."
    return [k for k in keys if not k.startswith(last)]


def embed(architecture: str, network: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The body's features of a batch: what the output head of `network` reads.

    Parameters
    ----------
    architecture : {"SmallCNN", "MLP"}
        The network's architecture.
    network : torch.nn.Module
        A network from :func:`build_network`.
    x : torch.Tensor of shape (n, ...)
        Inputs (flat rows or images).

    Returns
    -------
    torch.Tensor of shape (n, embedding_dim)
        The flattened body output.

    Examples
    --------
    >>> net = build_network("MLP", {"hidden": (16, 8)}, 64, 10)
    >>> embed("MLP", net, torch.zeros(3, 64)).shape
    torch.Size([3, 8])
    """
    if architecture == "SmallCNN":
        shape = (network.in_channels, network.image_size, network.image_size)
        if x.dim() != 4:
            x = x.reshape(x.shape[0], *shape)
        return network.features(x).flatten(1)
    return network.layers[:-1](x.flatten(1))


def embedding_dim(architecture: str, network: nn.Module) -> int:
    """Length of one embedding (the input size of the output head).

    Parameters
    ----------
    architecture : {"SmallCNN", "MLP"}
        The network's architecture.
    network : torch.nn.Module
        A network from :func:`build_network`.

    Returns
    -------
    int
        ``in_features`` of the head.

    Examples
    --------
    >>> embedding_dim("SmallCNN", build_network("SmallCNN", {"width": 4}, 64, 10))
    32
    """
    head = network.head if architecture == "SmallCNN" else network.layers[-1]
    return int(head.in_features)
