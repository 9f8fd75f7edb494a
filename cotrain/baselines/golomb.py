"""Moved to :mod:`cotrain.compression.golomb` (kept importable for one release, with a warning).

Examples
--------
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     from cotrain.baselines.golomb import golomb_parameter
>>> golomb_parameter(0.5), "cotrain.compression.golomb" in str(caught[-1].message)
(0, True)
"""

from __future__ import annotations

from learners._deprecation import deprecated_names

__all__: list[str] = []

__getattr__ = deprecated_names(
    __name__,
    {
        name: f"cotrain.compression.golomb.{name}"
        for name in (
            "expected_position_bits",
            "golomb_decode",
            "golomb_encode",
            "golomb_parameter",
            "pack_bits",
            "unpack_bits",
        )
    },
)
