"""One compressed FedAvg run: client residuals, the server's residual, exact bytes.

The clients' side of :mod:`cotrain.compression.sparse` over rounds (Sattler's thesis,
Algorithm 7 and §4.2.2): every client keeps its residual across rounds, the server its
own, and the downstream bytes follow the cache of partial updates a client missed.
:class:`~cotrain.baselines.FedAvg` creates a :class:`CompressedExchange` when given
``compression=``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["CompressedExchange"]


class CompressedExchange:
    """One compressed FedAvg run: residuals, the server's residual, and exact bytes.

    Parameters
    ----------
    compressor : object
        From :func:`~cotrain.compression.make_compression`.
    n_clients : int
        Number of clients (each keeps its own residual across rounds, also across the
        rounds it sits out).

    Attributes
    ----------
    residuals : list of dict or None
        Each client's residual (None before its first upload).
    server_residual : dict or None
        The server's residual (downstream compression).
    uplink_sizes : list of list of int
        Per round, the byte length of every sampled client's message.
    broadcast_sizes : list of int
        Per round, the byte length of the server's downstream message (compressed
        downstream only).
    last_messages : list of bytes
        The last round's uplink messages, in the order of its sampled clients.

    Notes
    -----
    Downstream bytes with ``downstream=True``: a client downloads the dense global
    weights the first time it is sampled, and later the broadcast messages of every
    round since the model it holds (the thesis's cache of partial updates, §4.2.2,
    sent as the list of messages), or the dense weights if those are fewer bytes.
    With ``downstream=False`` every sampled client downloads the dense weights.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.compression import SparseTernaryCompression
    >>> ex = CompressedExchange(SparseTernaryCompression(sparsity=0.25), n_clients=2)
    >>> w = {"w": np.zeros(4, dtype=np.float32)}
    >>> locals_ = [{"w": np.array([1.0, 0, 0, 0])}, {"w": np.array([0, 0, 0, 3.0])}]
    >>> new, up, down = ex.round(w, locals_, [0, 1], None)
    >>> new["w"].tolist()   # mean update [0.5, 0, 0, 1.5], downstream STC keeps k = 1
    [0.0, 0.0, 0.0, 1.5]
    >>> up, down   # 2 messages of 4 bytes μ + 1 byte of bits; 2 dense downloads
    (10, 32)
    >>> ex.server_residual["w"].tolist()
    [0.5, 0.0, 0.0, 0.0]
    """

    def __init__(self, compressor: Any, n_clients: int) -> None:
        self.compressor = compressor
        self.residuals: list[dict[str, np.ndarray] | None] = [None] * n_clients
        self.server_residual: dict[str, np.ndarray] | None = None
        self.uplink_sizes: list[list[int]] = []
        self.broadcast_sizes: list[int] = []
        self.last_messages: list[bytes] = []
        self._holds = np.full(n_clients, -1)  # round of the global model held; -1 none

    def _downstream(self) -> bool:
        return bool(getattr(self.compressor, "downstream", False))

    def round(
        self,
        global_w: Mapping[str, np.ndarray],
        locals_: Sequence[Mapping[str, np.ndarray]],
        clients: Sequence[int],
        counts: Sequence[float] | None,
    ) -> tuple[dict[str, np.ndarray], int, int]:
        """One round: compress the clients' updates, average, update the global weights.

        Parameters
        ----------
        global_w : dict of str to ndarray
            The global weights the sampled clients started from.
        locals_ : sequence of dict
            Their weights after local training.
        clients : sequence of int
            Their indices.
        counts : sequence of float, optional
            Averaging weights (numbers of examples); None averages uniformly.

        Returns
        -------
        weights : dict of str to ndarray of float32
            The new global weights.
        bytes_up, bytes_down : int
            Exact bytes of the uplink messages and of what the sampled clients
            downloaded to hold ``global_w``.
        """
        t = len(self.uplink_sizes) + 1
        shapes = {k: np.shape(v) for k, v in global_w.items()}
        dense = int(sum(4 * math.prod(s) for s in shapes.values()))
        base = {k: np.asarray(v, dtype=np.float32) for k, v in global_w.items()}
        bytes_down = 0
        for i in clients:
            if not self._downstream() or self._holds[i] < 0:
                bytes_down += dense
            else:
                bytes_down += min(dense, sum(self.broadcast_sizes[self._holds[i] : t - 1]))
            self._holds[i] = t - 1
        coef = np.full(len(clients), 1.0 / len(clients))
        if counts is not None:
            coef = np.asarray(counts, dtype=np.float64) / float(np.sum(counts))
        messages, average = [], {k: np.zeros(s) for k, s in shapes.items()}
        for c, i, local in zip(coef, clients, locals_, strict=True):
            update = {k: np.asarray(local[k], dtype=np.float32) - base[k] for k in base}
            message, residual = self.compressor.compress(update, self.residuals[i])
            self.residuals[i] = residual
            messages.append(message)
            for k, v in self.compressor.decompress(message, shapes).items():
                average[k] += c * v
        self.uplink_sizes.append([len(m) for m in messages])
        self.last_messages = messages
        if self._downstream():
            down = getattr(self.compressor, "sparsity_down", None)
            kwargs = {} if down is None else {"sparsity": down}
            message, self.server_residual = self.compressor.compress(
                average, self.server_residual, **kwargs
            )
            self.broadcast_sizes.append(len(message))
            step = self.compressor.decompress(message, shapes, **kwargs)
        else:
            step = average
        new = {
            k: (base[k] + np.asarray(step[k], dtype=np.float32)).astype(np.float32) for k in base
        }
        return new, int(sum(len(m) for m in messages)), int(bytes_down)
