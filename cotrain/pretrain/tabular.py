"""SCARF-style contrastive pretraining of an MLP body on public tabular rows.

torch is imported when :func:`pretrain_tabular` runs, not when this module is imported.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from cotrain.pretrain.extractor import PretrainedExtractor
from cotrain.pretrain.validation import check_float, check_public_array, check_seed
from learners.checks import check_int

__all__ = ["pretrain_tabular"]


def pretrain_tabular(
    X_public: ArrayLike,
    *,
    hidden: Sequence[int] = (128,),
    corruption: float = 0.6,
    epochs: int = 50,
    batch_size: int = 128,
    lr: float = 1e-3,
    temperature: float = 1.0,
    projection_dim: int = 64,
    random_state: int | np.random.RandomState | None = None,
    n_threads: int | None = 1,
    verbose: int = 0,
) -> PretrainedExtractor:
    """Pretrain a :class:`learners.MLP` body on public rows with SCARF (Bahri et al. 2022).

    Runs at the server, **on public data only** (FedAUX's preparation phase P1 for
    tabular data). Each public row and a corrupted copy of it — a random `corruption`
    fraction of its features replaced by the same features of random public rows (their
    empirical marginals) — go through the body and a projection head; NT-Xent pulls the
    pair together against the rest of the batch. The body initialises
    ``TorchClassifier(module=ext.module_factory())``, with the architecture of
    ``TorchClassifier(MLP, module_params={"hidden": hidden})``, or feeds other learners
    (:meth:`PretrainedExtractor.transform`).

    Parameters
    ----------
    X_public : array-like of shape (n, n_features)
        Unlabelled public rows, scaled as the clients' inputs will be (e.g. a
        StandardScaler fitted on the public pool).
    hidden : sequence of int, default=(128,)
        Hidden layer widths (the body); at least one.
    corruption : float, default=0.6
        Fraction of features corrupted in the positive view (SCARF's default).
    epochs : int, default=50
        Passes over the public pool.
    batch_size : int, default=128
        Rows per step.
    lr : float, default=1e-3
        Adam's learning rate.
    temperature : float, default=1.0
        NT-Xent temperature (SCARF's default).
    projection_dim : int, default=64
        Output size of the projection head.
    random_state : int, RandomState or None, default=None
        Seeds initialisation, shuffling and corruption (torch's global generator is left
        as it was).
    n_threads : int or None, default=1
        Torch threads while training (restored afterwards).
    verbose : int, default=0
        If positive, print the loss of every epoch.

    Returns
    -------
    PretrainedExtractor
        The body's weights (``architecture="MLP"``), with ``loss_curve``.

    Examples
    --------
    >>> import pytest
    >>> _ = pytest.importorskip("torch")
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from cotrain.pretrain import pretrain_tabular
    >>> X = StandardScaler().fit_transform(load_breast_cancer().data)
    >>> ext = pretrain_tabular(X, hidden=(32,), epochs=3, random_state=0)
    >>> ext.method, ext.embedding_dim, ext.transform(X[:4]).shape
    ('scarf', 32, (4, 32))
    """
    arr = check_public_array(X_public)
    if arr.ndim != 2:
        raise ValueError(f"X_public must be 2-D (rows of features), got shape {arr.shape}")
    if isinstance(hidden, str) or not isinstance(hidden, Sequence) or len(hidden) == 0:
        raise ValueError(f"hidden must be a non-empty sequence of layer widths, got {hidden!r}")
    widths = tuple(check_int(h, "hidden", 1) for h in hidden)
    corruption = check_float("corruption", corruption, 0.0, 1.0)
    epochs = check_int(epochs, "epochs", 1)
    batch_size = check_int(batch_size, "batch_size", 2)
    projection_dim = check_int(projection_dim, "projection_dim", 1)
    lr = check_float("lr", lr, 0.0)
    temperature = check_float("temperature", temperature, 0.0)
    seed = check_seed(random_state)
    if n_threads is not None:
        n_threads = check_int(n_threads, "n_threads", 1)

    import torch
    from torch import nn

    from cotrain.pretrain.loop import as_float_tensor, seeded_torch, train_ssl
    from cotrain.pretrain.networks import body_keys, build_network, embed
    from cotrain.pretrain.objectives import corrupt_rows, nt_xent

    params = {"hidden": widths}
    data = as_float_tensor(arr)
    with seeded_torch(seed, n_threads):
        net = build_network("MLP", params, arr.shape[1], 2)
        projector = nn.Sequential(
            nn.Linear(widths[-1], widths[-1]), nn.ReLU(), nn.Linear(widths[-1], projection_dim)
        )
        net.train()

        def batch_loss(idx: torch.Tensor) -> torch.Tensor:
            x = data[idx]
            views = torch.cat([x, corrupt_rows(x, data, corruption)])
            z = projector(embed("MLP", net, views))
            return nt_xent(z[: idx.numel()], z[idx.numel() :], temperature)

        trained = [*net.layers[:-1].parameters(), *projector.parameters()]
        curve = train_ssl(
            trained,
            batch_loss,
            arr.shape[0],
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            verbose=verbose,
        )
    full = net.state_dict()
    state = {k: full[k].detach().numpy().copy() for k in body_keys("MLP", net)}
    return PretrainedExtractor(
        "MLP",
        params,
        arr.shape[1],
        state,
        method="scarf",
        loss_curve=curve,
        n_public=arr.shape[0],
    ).fit_feature_scaling(arr)
