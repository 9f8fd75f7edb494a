"""Where the clients of a round run: in this process, in worker processes, or on Ray.

:func:`make_runtime` picks one from ``n_jobs`` and ``runtime``; every runtime maps a function
over a round's tasks and can host clients where they run (:mod:`~cotrain.runtime.pools`), and
a client that does not answer in time comes back as a :class:`Straggler`. The runtimes live in
:mod:`~cotrain.runtime.runtimes`, worker processes in :mod:`~cotrain.runtime.process_pool`,
:mod:`~cotrain.runtime.worker_group`, :mod:`~cotrain.runtime.worker_processes` and
:mod:`~cotrain.runtime.pool_worker`, Ray in :mod:`~cotrain.runtime.ray_runtime` and
:mod:`~cotrain.runtime.ray_pool`.

Nothing here imports the rest of :mod:`cotrain`: a runtime maps functions it is given.

Examples
--------
>>> from cotrain.runtime import make_runtime
>>> with make_runtime(n_jobs=None) as runtime:
...     runtime.map(abs, [(-1,), (2,), (-3,)])  # one tuple of arguments per call
[1, 2, 3]
"""

from cotrain.runtime.ray_runtime import RayRuntime
from cotrain.runtime.runtimes import (
    RUNTIMES,
    JoblibRuntime,
    Runtime,
    SequentialRuntime,
    make_runtime,
)
from cotrain.runtime.straggler import Straggler

__all__ = [
    "RUNTIMES",
    "JoblibRuntime",
    "RayRuntime",
    "Runtime",
    "SequentialRuntime",
    "Straggler",
    "make_runtime",
]


def __dir__() -> list[str]:
    return sorted(__all__)
