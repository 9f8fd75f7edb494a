"""Runtimes run the client steps of a round: in this process or over joblib workers.

The round logic lives in :class:`cotrain.FederatedCoTrainer`; a runtime only maps a
function over the round's tasks and returns the results in task order, so every
runtime gives the same result for the same seed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from joblib import Parallel, delayed


class SequentialRuntime:
    """Run client steps one after the other in this process.

    Examples
    --------
    >>> with SequentialRuntime() as runtime:
    ...     runtime.map(pow, [(2, 3), (3, 2)])
    [8, 9]
    """

    def __enter__(self) -> SequentialRuntime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def map(self, fn: Callable[..., Any], tasks: Iterable[Sequence[Any]]) -> list[Any]:
        """Return ``[fn(*task) for task in tasks]``."""
        return [fn(*task) for task in tasks]


class JoblibRuntime:
    """Run client steps in joblib worker processes (loky backend).

    The pool is opened once per ``fit`` and reused across rounds. joblib memory-maps
    large arrays such as the public pool instead of copying them into every task, and
    loky limits BLAS/OpenMP threads per worker so workers do not oversubscribe cores.

    Parameters
    ----------
    n_jobs : int
        Number of worker processes (``-1``: all cores).

    Examples
    --------
    >>> with JoblibRuntime(n_jobs=2) as runtime:
    ...     runtime.map(pow, [(2, 3), (3, 2)])
    [8, 9]
    """

    def __init__(self, n_jobs: int) -> None:
        self.n_jobs = n_jobs
        self._parallel: Parallel | None = None

    def __enter__(self) -> JoblibRuntime:
        self._parallel = Parallel(n_jobs=self.n_jobs, backend="loky")
        self._parallel.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._parallel is not None:
            self._parallel.__exit__(*exc_info)
            self._parallel = None

    def map(self, fn: Callable[..., Any], tasks: Iterable[Sequence[Any]]) -> list[Any]:
        """Return ``[fn(*task) for task in tasks]``, computed by the workers."""
        if self._parallel is None:
            raise RuntimeError("JoblibRuntime.map must be called inside a `with` block")
        return list(self._parallel(delayed(fn)(*task) for task in tasks))


def make_runtime(n_jobs: int | None) -> SequentialRuntime | JoblibRuntime:
    """Choose the runtime for ``n_jobs``: sequential for None or 1, joblib otherwise.

    Examples
    --------
    >>> type(make_runtime(None)).__name__
    'SequentialRuntime'
    """
    if n_jobs is None or n_jobs == 1:
        return SequentialRuntime()
    return JoblibRuntime(n_jobs)
