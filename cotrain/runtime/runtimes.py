"""Runtimes run the client steps of a round: in this process, over joblib workers or Ray.

The round logic lives in :class:`cotrain.FederatedCoTrainer`; a runtime only maps a
function over the round's tasks and returns the results in task order, so every
runtime gives the same result for the same seed.

Every runtime is a context manager (see :class:`Runtime`) with two methods:

- ``map(fn, tasks, timeout=None) -> list`` ships each task to a worker and its result
  back. With a ``timeout`` (seconds, measured from the start of the ``map`` call) a task
  that has not finished in time is returned as a :class:`~cotrain.runtime.straggler.Straggler` in
  its place, so the
  caller can treat slow clients like failed ones.
- ``host(objects) -> ClientPool`` places objects (clients) once where they will run and
  keeps them there across calls, so that only each call's arguments and results travel
  (see :mod:`cotrain.runtime.pools`). A user runtime without ``host`` still works through
  :func:`cotrain.runtime.pools.host_objects`.

The Ray runtime lives in :mod:`cotrain.runtime.ray_runtime`, the straggler marker in
:mod:`cotrain.runtime.straggler`.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from joblib import Parallel, delayed, effective_n_jobs

from cotrain.runtime.pool_base import ClientPool
from cotrain.runtime.pools import InProcessPool
from cotrain.runtime.process_pool import ProcessPool
from cotrain.runtime.ray_runtime import RayRuntime
from cotrain.runtime.straggler import Straggler, check_timeout, run_in_order

__all__ = [
    "RUNTIMES",
    "JoblibRuntime",
    "Runtime",
    "SequentialRuntime",
    "make_runtime",
]

RUNTIMES = ("sequential", "joblib", "ray")


class SequentialRuntime:
    """Run client steps one after the other in this process.

    A running task cannot be pre-empted, so a ``timeout`` is checked after each task:
    once the round's time is up, every *later* task is returned as a
    :class:`~cotrain.runtime.straggler.Straggler` without being run. The task that overran is kept
    (it finished).

    Parameters
    ----------
    timeout : float or None, default=None
        Default per-round timeout in seconds for :meth:`map`.

    Examples
    --------
    >>> with SequentialRuntime() as runtime:
    ...     runtime.map(pow, [(2, 3), (3, 2)])
    [8, 9]
    """

    def __init__(self, timeout: float | None = None) -> None:
        self.timeout = timeout

    def __enter__(self) -> SequentialRuntime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def map(
        self,
        fn: Callable[..., Any],
        tasks: Iterable[Sequence[Any]],
        timeout: float | None = None,
    ) -> list[Any]:
        """Return ``[fn(*task) for task in tasks]``; later tasks straggle after ``timeout``.

        Parameters
        ----------
        fn : callable
            Called as ``fn(*task)``.
        tasks : iterable of sequences
            The arguments of each call.
        timeout : float or None, default=None
            Seconds for the whole map (``None``: the runtime's ``timeout``).

        Returns
        -------
        list
            One result per task, in task order; :class:`~cotrain.runtime.straggler.Straggler` for
            tasks not run.
        """
        return run_in_order(fn, tasks, check_timeout(timeout, self.timeout))

    def host(self, objects: Sequence[Any]) -> ClientPool:
        """Keep ``objects`` in this process and call them in place.

        Parameters
        ----------
        objects : sequence
            Object ``i`` is ``objects[i]``.

        Returns
        -------
        cotrain.runtime.pools.InProcessPool
            With this runtime's ``timeout`` as its default.

        Examples
        --------
        >>> with SequentialRuntime() as runtime, runtime.host([[1], [2]]) as pool:
        ...     pool.call("append", {0: (3,)})
        ...     pool.get()
        {0: None}
        [[1, 3], [2]]
        """
        return InProcessPool(objects, timeout=self.timeout)


def _ready() -> None:
    """A no-op task that makes a worker process start."""


class JoblibRuntime:
    """Run client steps in joblib worker processes (loky backend).

    The loky pool is opened by the first :meth:`map` of a ``with`` block (a ``fit``)
    and reused until the block ends; a block that only uses :meth:`host` never starts
    it. joblib memory-maps
    large arrays such as the public pool instead of copying them into every task, and
    loky limits BLAS/OpenMP threads per worker so workers do not oversubscribe cores.

    With a ``timeout`` the tasks are submitted to the pool's memory-mapping loky
    executor (the same workers, so no restart) and collected as they finish until the
    deadline; unfinished tasks are returned as :class:`~cotrain.runtime.straggler.Straggler`.
    Queued stragglers
    are cancelled, but a straggler that is already running cannot be stopped: its
    worker finishes it (the result is dropped) and is busy meanwhile, which can delay
    the next round. With ``n_jobs=1`` joblib runs in this process and the timeout
    behaves as in :class:`SequentialRuntime`.

    :meth:`host` keeps objects resident in ``n_jobs`` worker processes of their own
    (a :class:`cotrain.runtime.process_pool.ProcessPool`, with work stealing, closed at the latest
    when the ``with`` block ends), or in this process with ``n_jobs=1``. As joblib
    does with its loky workers, the pool's worker processes outlive it: emptied of
    every object when it closes, they wait (up to 300 s) for the next ``host`` with
    the same number of workers, in this block or a later one (the next ``fit``), which
    then starts in milliseconds instead of paying for new interpreters and their
    imports (see :data:`cotrain.runtime.worker_processes.idle_workers`). Like loky's workers,
    a reused worker does not re-import a module it already imported: after editing a
    module that the clients' code lives in (in a notebook, say), call
    ``cotrain.runtime.worker_processes.idle_workers.clear()`` or pass ``reuse_workers=False``.

    Parameters
    ----------
    n_jobs : int
        Number of worker processes (``-1``: all cores).
    timeout : float or None, default=None
        Default per-round timeout in seconds for :meth:`map`.
    reuse_workers : bool, default=True
        Whether :meth:`host` reuses (and keeps) idle worker processes; ``False``: its
        pools start their own and stop them when they close.

    Examples
    --------
    >>> with JoblibRuntime(n_jobs=2) as runtime:
    ...     runtime.map(pow, [(2, 3), (3, 2)])
    [8, 9]
    """

    def __init__(
        self, n_jobs: int, timeout: float | None = None, reuse_workers: bool = True
    ) -> None:
        self.n_jobs = n_jobs
        self.timeout = timeout
        self.reuse_workers = reuse_workers
        self._entered = False
        self._parallel: Parallel | None = None
        self._pools: list[Any] = []

    def __enter__(self) -> JoblibRuntime:
        # the loky workers start with the first map (see _started_parallel): a fit that
        # only hosts its clients (host) never starts them
        self._entered = True
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._entered = False
        pools, self._pools = self._pools, []
        for pool in pools:
            pool.close()
        if self._parallel is not None:
            self._parallel.__exit__(*exc_info)
            self._parallel = None

    def _started_parallel(self) -> Parallel:
        """joblib's pool, its loky workers started on the first call."""
        if not self._entered:
            raise RuntimeError("JoblibRuntime.map must be called inside a `with` block")
        if self._parallel is None:
            parallel = Parallel(n_jobs=self.n_jobs, backend="loky")
            parallel.__enter__()
            self._parallel = parallel
            # start the workers before map's clock does, so that its timeout measures
            # the tasks, not the pool's start-up (which the first map pays anyway)
            parallel(delayed(_ready)() for _ in range(effective_n_jobs(self.n_jobs)))
        return self._parallel

    def map(
        self,
        fn: Callable[..., Any],
        tasks: Iterable[Sequence[Any]],
        timeout: float | None = None,
    ) -> list[Any]:
        """Return ``[fn(*task) for task in tasks]``, computed by the workers.

        Parameters
        ----------
        fn : callable
            Called as ``fn(*task)``; must be picklable.
        tasks : iterable of sequences
            The arguments of each call.
        timeout : float or None, default=None
            Seconds for the whole map (``None``: the runtime's ``timeout``).

        Returns
        -------
        list
            One result per task, in task order; :class:`~cotrain.runtime.straggler.Straggler` for
            late tasks.
        """
        timeout = check_timeout(timeout, self.timeout)
        parallel = self._started_parallel()
        if timeout is None:
            return list(parallel(delayed(fn)(*task) for task in tasks))
        # joblib's own pool (memory-mapping loky executor); private, hence the fallback
        executor = getattr(getattr(parallel, "_backend", None), "_workers", None)
        if executor is None:  # n_jobs=1: joblib runs in this process
            return SequentialRuntime().map(fn, tasks, timeout=timeout)
        start = time.perf_counter()
        futures = [executor.submit(fn, *task) for task in tasks]
        remaining = max(0.0, timeout - (time.perf_counter() - start))
        concurrent.futures.wait(futures, timeout=remaining)
        elapsed = time.perf_counter() - start
        out: list[Any] = []
        for i, future in enumerate(futures):
            if future.done():
                out.append(future.result())  # re-raises the task's exception, like Parallel
            else:
                future.cancel()
                out.append(Straggler(i, elapsed))
        return out

    def host(self, objects: Sequence[Any]) -> ClientPool:
        """Keep ``objects`` resident in worker processes for the rest of the ``with`` block.

        Parameters
        ----------
        objects : sequence
            Object ``i`` is ``objects[i]``; it is placed in worker ``i % n_workers``
            and moves when an idle worker steals its call (see
            :class:`~cotrain.runtime.process_pool.ProcessPool`).

        Returns
        -------
        cotrain.runtime.process_pool.ProcessPool or cotrain.runtime.pools.InProcessPool
            A :class:`~cotrain.runtime.process_pool.ProcessPool` of ``n_jobs`` workers (effective
            number, at most one per object), or an in-process pool when that is 1. Its
            default timeout is this runtime's. Closed when the ``with`` block ends, if
            not before; with ``reuse_workers``, its workers are then kept for the
            next pool.

        Examples
        --------
        >>> with JoblibRuntime(n_jobs=2) as runtime, runtime.host([[1], [2]]) as pool:
        ...     pool.call("append", {0: (3,), 1: (4,)})
        ...     pool.get()
        {0: None, 1: None}
        [[1, 3], [2, 4]]
        """
        if not self._entered:
            raise RuntimeError("JoblibRuntime.host must be called inside a `with` block")
        n_workers = effective_n_jobs(self.n_jobs)
        if n_workers == 1:
            return InProcessPool(objects, timeout=self.timeout)
        if os.name != "posix":  # pragma: no cover - ProcessPool is POSIX only
            return InProcessPool(objects, timeout=self.timeout, runtime=self)
        pool = ProcessPool(
            objects, n_workers=n_workers, timeout=self.timeout, reuse=self.reuse_workers
        )
        self._pools.append(pool)
        return pool


class Runtime(Protocol):
    """What the trainer needs from a runtime: a context manager with ``map`` and ``host``.

    :class:`SequentialRuntime`, :class:`JoblibRuntime` and
    :class:`~cotrain.runtime.ray_runtime.RayRuntime` implement
    it. A user-supplied runtime may leave ``host`` out:
    :func:`cotrain.runtime.pools.host_objects` then keeps the objects in this process and ships
    each one through ``map`` with its call, taking the updated object back.

    Examples
    --------
    >>> runtime: Runtime = make_runtime(None)
    >>> with runtime as rt:
    ...     rt.map(pow, [(2, 3)])
    [8]
    """

    def __enter__(self) -> Runtime: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def map(
        self,
        fn: Callable[..., Any],
        tasks: Iterable[Sequence[Any]],
        timeout: float | None = None,
    ) -> list[Any]:
        """``[fn(*task) for task in tasks]``, :class:`~cotrain.runtime.straggler.Straggler` for
        late tasks."""
        ...

    def host(self, objects: Sequence[Any]) -> ClientPool:
        """Place ``objects`` where they will run; see :mod:`cotrain.runtime.pools`."""
        ...


def make_runtime(n_jobs: int | None, runtime: str | Any = None) -> Runtime:
    """Choose the runtime that runs the client steps.

    Parameters
    ----------
    n_jobs : int or None
        Parallelism: with ``runtime=None``, sequential for ``None`` or 1 and joblib
        otherwise. For ``"joblib"`` it is the number of workers (``None``: all cores);
        for ``"ray"`` the CPUs of a Ray started here (``None`` or -1: all).
    runtime : {None, "sequential", "joblib", "ray"} or runtime instance, default=None
        A name, or an object with ``__enter__``/``__exit__``/``map`` (and optionally
        ``host``, see :class:`Runtime`) used as is.

    Returns
    -------
    Runtime
        A :class:`SequentialRuntime`, :class:`JoblibRuntime` or
        :class:`~cotrain.runtime.ray_runtime.RayRuntime`, or
        the given instance.

    Raises
    ------
    ValueError
        For an unknown runtime name.

    Examples
    --------
    >>> type(make_runtime(None)).__name__
    'SequentialRuntime'
    >>> type(make_runtime(4, "sequential")).__name__
    'SequentialRuntime'
    >>> make_runtime(2, "dask")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown runtime 'dask'; choose one of 'sequential', 'joblib', 'ray', ...
    """
    if runtime is None:
        if n_jobs is None or n_jobs == 1:
            return SequentialRuntime()
        return JoblibRuntime(n_jobs)
    if isinstance(runtime, str):
        if runtime == "sequential":
            return SequentialRuntime()
        if runtime == "joblib":
            return JoblibRuntime(-1 if n_jobs is None else n_jobs)
        if runtime == "ray":
            return RayRuntime(num_cpus=None if n_jobs is None or n_jobs < 1 else n_jobs)
        names = ", ".join(repr(name) for name in RUNTIMES)
        raise ValueError(
            f"unknown runtime {runtime!r}; choose one of {names}, or pass a runtime instance"
        )
    if not all(hasattr(runtime, attr) for attr in ("__enter__", "__exit__", "map")):
        raise TypeError(
            f"runtime must be a name or have __enter__, __exit__ and map; got {runtime!r}"
        )
    return runtime
