"""Compression of weight updates: top-k, sparse ternary compression (STC), Golomb coding.

- :class:`SparseTernaryCompression` and :class:`TopK`: per-tensor sparsifiers with
  exact-size byte messages and error accumulation (Sattler et al. 2019; Lin et al.
  2018), :func:`make_compression` to pick one by name;
- :class:`CompressedExchange`: the residuals and byte counts of one compressed run, as
  :class:`~cotrain.baselines.FedAvg` uses them with ``compression=``;
- :mod:`cotrain.compression.golomb`: Golomb coding of the kept positions.

Nothing here imports anything else from ``cotrain``: the baselines that compress their
updates import this package, not the other way round.

Examples
--------
>>> import numpy as np
>>> from cotrain.compression import SparseTernaryCompression
>>> stc = SparseTernaryCompression(sparsity=0.4)
>>> message, _ = stc.compress({"w": np.array([0.5, -2.0, 0.1, 1.0, 0.0])})
>>> stc.decompress(message, {"w": (5,)})["w"].tolist()
[0.0, -1.5, 0.0, 1.5, 0.0]
"""

from __future__ import annotations

from cotrain.compression.exchange import CompressedExchange
from cotrain.compression.golomb import (
    expected_position_bits,
    golomb_decode,
    golomb_encode,
    golomb_parameter,
    pack_bits,
    unpack_bits,
)
from cotrain.compression.sparse import SparseTernaryCompression, TopK, make_compression

__all__ = [
    "CompressedExchange",
    "SparseTernaryCompression",
    "TopK",
    "expected_position_bits",
    "golomb_decode",
    "golomb_encode",
    "golomb_parameter",
    "make_compression",
    "pack_bits",
    "unpack_bits",
]


def __dir__() -> list[str]:
    return sorted(__all__)
