"""The training loop shared by the self-supervised objectives (imports torch)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import numpy as np
import torch

__all__ = ["seeded_torch", "train_ssl"]


@contextmanager
def seeded_torch(seed: int, n_threads: int | None) -> Iterator[None]:
    """Run with torch's global RNG seeded by `seed` and `n_threads` intra-op threads,
    restoring the caller's RNG state and thread setting afterwards.

    Parameters
    ----------
    seed : int
        Seed of torch's global generator inside the block.
    n_threads : int or None
        Torch threads inside the block (None: as set).

    Yields
    ------
    None

    Examples
    --------
    >>> with seeded_torch(0, 1):
    ...     a = torch.rand(1)
    >>> with seeded_torch(0, 1):
    ...     b = torch.rand(1)
    >>> bool(a == b)
    True
    """
    previous = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if n_threads is not None:
            torch.set_num_threads(n_threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


def train_ssl(
    params: Iterable[torch.nn.Parameter],
    batch_loss: Callable[[torch.Tensor], torch.Tensor],
    n: int,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float = 0.0,
    verbose: int = 0,
) -> list[float]:
    """Minimise a self-supervised loss over mini-batches of ``n`` public rows with Adam.

    Parameters
    ----------
    params : iterable of torch.nn.Parameter
        What to train (body and pretext heads).
    batch_loss : callable
        ``batch_loss(idx)`` returns the mean loss of the rows ``idx`` (a 1-D index tensor).
    n : int
        Number of rows.
    epochs, batch_size, lr, weight_decay
        The optimisation; a last batch of a single row is dropped (a contrastive loss
        needs pairs).
    verbose : int, default=0
        If positive, print the loss after every epoch.

    Returns
    -------
    list of float
        The mean loss of every epoch.

    Examples
    --------
    >>> w = torch.nn.Parameter(torch.ones(1))
    >>> with seeded_torch(0, 1):
    ...     curve = train_ssl([w], lambda idx: (w ** 2).sum(), 10, epochs=3,
    ...                       batch_size=5, lr=0.1)
    >>> len(curve), curve[-1] < curve[0]
    (3, True)
    """
    optimizer = torch.optim.Adam(list(params), lr=lr, weight_decay=weight_decay)
    curve: list[float] = []
    size = int(min(batch_size, n))
    for epoch in range(epochs):
        total, seen = 0.0, 0
        for idx in torch.randperm(n).split(size):
            if idx.numel() < 2:
                continue
            optimizer.zero_grad(set_to_none=True)
            loss = batch_loss(idx)
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * idx.numel()
            seen += idx.numel()
        curve.append(total / max(seen, 1))
        if verbose > 0:
            print(f"pretraining epoch {epoch + 1}/{epochs}: loss {curve[-1]:.4f}")
    return curve


def as_float_tensor(X: np.ndarray) -> torch.Tensor:
    """A contiguous float32 tensor of `X` (a copy only where needed).

    Parameters
    ----------
    X : ndarray
        The data.

    Returns
    -------
    torch.Tensor
        Float32 on the CPU.

    Examples
    --------
    >>> as_float_tensor(np.zeros((2, 3))).dtype
    torch.float32
    """
    return torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))
