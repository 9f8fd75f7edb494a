"""Moved to :mod:`cotrain.compression` (kept importable for one release, with a warning).

Examples
--------
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     from cotrain.baselines.stc import SparseTernaryCompression
>>> import cotrain.compression
>>> SparseTernaryCompression is cotrain.compression.SparseTernaryCompression
True
>>> "use cotrain.compression.SparseTernaryCompression" in str(caught[-1].message)
True
"""

from __future__ import annotations

from learners._deprecation import deprecated_names

__all__: list[str] = []

__getattr__ = deprecated_names(
    __name__,
    {
        name: f"cotrain.compression.{name}"
        for name in ("CompressedExchange", "SparseTernaryCompression", "TopK", "make_compression")
    },
)
