"""Runtimes run the client steps of a round: in this process, over joblib workers or Ray.

The round logic lives in :class:`cotrain.FederatedCoTrainer`; a runtime only maps a
function over the round's tasks and returns the results in task order, so every
runtime gives the same result for the same seed.

Every runtime is a context manager (see :class:`Runtime`) with two methods:

- ``map(fn, tasks, timeout=None) -> list`` ships each task to a worker and its result
  back. With a ``timeout`` (seconds, measured from the start of the ``map`` call) a task
  that has not finished in time is returned as a :class:`Straggler` in its place, so the
  caller can treat slow clients like failed ones.
- ``host(objects) -> ClientPool`` places objects (clients) once where they will run and
  keeps them there across calls, so that only each call's arguments and results travel
  (see :mod:`cotrain.pools`). A user runtime without ``host`` still works through
  :func:`cotrain.pools.host_objects`.
"""

from __future__ import annotations

import concurrent.futures
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from joblib import Parallel, delayed

if TYPE_CHECKING:
    from cotrain.pools import ClientPool

__all__ = [
    "RUNTIMES",
    "JoblibRuntime",
    "RayRuntime",
    "Runtime",
    "SequentialRuntime",
    "Straggler",
    "make_runtime",
]

RUNTIMES = ("sequential", "joblib", "ray")


@dataclass(frozen=True)
class Straggler:
    """Stands in for the result of a task that did not finish within the timeout.

    Parameters
    ----------
    index : int
        Position of the task in the list given to ``map``.
    elapsed : float
        Seconds from the start of the ``map`` call to when the task was given up.

    Examples
    --------
    >>> with SequentialRuntime() as runtime:
    ...     runtime.map(pow, [(2, 3), (3, 2)], timeout=0)
    [8, Straggler(index=1, elapsed=0.0)]
    """

    index: int
    elapsed: float

    def __repr__(self) -> str:
        return f"Straggler(index={self.index}, elapsed={round(self.elapsed, 1)})"


def _timeout(given: float | None, default: float | None) -> float | None:
    timeout = default if given is None else given
    if timeout is not None and timeout < 0:
        raise ValueError(f"timeout must be >= 0 or None, got {timeout}")
    return timeout


class SequentialRuntime:
    """Run client steps one after the other in this process.

    A running task cannot be pre-empted, so a ``timeout`` is checked after each task:
    once the round's time is up, every *later* task is returned as a
    :class:`Straggler` without being run. The task that overran is kept (it finished).

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
            One result per task, in task order; :class:`Straggler` for tasks not run.
        """
        timeout = _timeout(timeout, self.timeout)
        start = time.perf_counter()
        out: list[Any] = []
        for i, task in enumerate(tasks):
            elapsed = time.perf_counter() - start
            if timeout is not None and elapsed >= timeout and i > 0:
                out.append(Straggler(i, elapsed))
            else:
                out.append(fn(*task))
        return out

    def host(self, objects: Sequence[Any]) -> ClientPool:
        """Keep ``objects`` in this process and call them in place.

        Parameters
        ----------
        objects : sequence
            Object ``i`` is ``objects[i]``.

        Returns
        -------
        cotrain.pools.InProcessPool
            With this runtime's ``timeout`` as its default.

        Examples
        --------
        >>> with SequentialRuntime() as runtime, runtime.host([[1], [2]]) as pool:
        ...     pool.call("append", {0: (3,)})
        ...     pool.get()
        {0: None}
        [[1, 3], [2]]
        """
        from cotrain.pools import InProcessPool

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
    deadline; unfinished tasks are returned as :class:`Straggler`. Queued stragglers
    are cancelled, but a straggler that is already running cannot be stopped: its
    worker finishes it (the result is dropped) and is busy meanwhile, which can delay
    the next round. With ``n_jobs=1`` joblib runs in this process and the timeout
    behaves as in :class:`SequentialRuntime`.

    :meth:`host` keeps objects resident in ``n_jobs`` worker processes of their own
    (a :class:`cotrain.pools.ProcessPool`, with work stealing, closed at the latest
    when the ``with`` block ends), or in this process with ``n_jobs=1``.

    Parameters
    ----------
    n_jobs : int
        Number of worker processes (``-1``: all cores).
    timeout : float or None, default=None
        Default per-round timeout in seconds for :meth:`map`.

    Examples
    --------
    >>> with JoblibRuntime(n_jobs=2) as runtime:
    ...     runtime.map(pow, [(2, 3), (3, 2)])
    [8, 9]
    """

    def __init__(self, n_jobs: int, timeout: float | None = None) -> None:
        self.n_jobs = n_jobs
        self.timeout = timeout
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
            from joblib import effective_n_jobs

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
            One result per task, in task order; :class:`Straggler` for late tasks.
        """
        timeout = _timeout(timeout, self.timeout)
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
            :class:`~cotrain.pools.ProcessPool`).

        Returns
        -------
        cotrain.pools.ProcessPool or cotrain.pools.InProcessPool
            A :class:`~cotrain.pools.ProcessPool` of ``n_jobs`` workers (effective
            number, at most one per object), or an in-process pool when that is 1. Its
            default timeout is this runtime's. Closed when the ``with`` block ends, if
            not before.

        Examples
        --------
        >>> with JoblibRuntime(n_jobs=2) as runtime, runtime.host([[1], [2]]) as pool:
        ...     pool.call("append", {0: (3,), 1: (4,)})
        ...     pool.get()
        {0: None, 1: None}
        [[1, 3], [2, 4]]
        """
        import os

        from joblib import effective_n_jobs

        from cotrain.pools import InProcessPool, ProcessPool

        if not self._entered:
            raise RuntimeError("JoblibRuntime.host must be called inside a `with` block")
        n_workers = effective_n_jobs(self.n_jobs)
        if n_workers == 1:
            return InProcessPool(objects, timeout=self.timeout)
        if os.name != "posix":  # pragma: no cover - ProcessPool is POSIX only
            return InProcessPool(objects, timeout=self.timeout, runtime=self)
        pool = ProcessPool(objects, n_workers=n_workers, timeout=self.timeout)
        self._pools.append(pool)
        return pool


class RayRuntime:
    """Run client steps as Ray tasks, or on a pool of Ray actors.

    ``__enter__`` starts Ray (``ray.init``) unless it is already running, and
    ``__exit__`` shuts down only a Ray that it started. Arguments that are the same
    object in every task (the trainer's per-round ``step`` dict holding the public pool
    and the broadcast) are put in the object store once per :meth:`map` and passed by
    reference, so the public pool is not serialised once per client. Results come back
    in task order; with a ``timeout``, tasks not finished by the deadline are cancelled
    (``ray.cancel(force=False)``: a task already running may still run to its end) and
    returned as :class:`Straggler`.

    :meth:`host` keeps objects resident in Ray actors of their own (a
    :class:`cotrain.pools.RayActorPool`: ``actor_pool_size`` actors, or one per CPU).

    Ray is imported only here, so ``import cotrain`` does not need it
    (``pip install "cotrain[ray]"``).

    Parameters
    ----------
    num_cpus : int or None, default=None
        CPUs for a Ray started here (``None``: all). Ignored when joining ``address``.
    address : str or None, default=None
        Address of an existing Ray cluster (e.g. ``"auto"``); ``None`` starts a local one.
    actor_pool_size : int or None, default=None
        Run the tasks on this many long-lived actors (round-robin) instead of as
        stateless tasks; ``None`` uses tasks.
    timeout : float or None, default=None
        Default per-round timeout in seconds for :meth:`map`.
    batch_size : int or "auto", default="auto"
        Tasks per Ray call, to amortise Ray's per-call cost over light clients (as
        joblib batches). ``"auto"``: one per client when a timeout is in force (so
        stragglers are given up one by one), otherwise about four calls per CPU (or per
        actor). With a timeout, every task of an unfinished call is a straggler.

    Examples
    --------
    >>> with RayRuntime(num_cpus=2) as runtime:  # doctest: +SKIP
    ...     runtime.map(pow, [(2, 3), (3, 2)])
    [8, 9]
    """

    def __init__(
        self,
        num_cpus: int | None = None,
        address: str | None = None,
        actor_pool_size: int | None = None,
        timeout: float | None = None,
        batch_size: int | str = "auto",
    ) -> None:
        if actor_pool_size is not None and actor_pool_size < 1:
            raise ValueError(f"actor_pool_size must be >= 1 or None, got {actor_pool_size}")
        self.num_cpus = num_cpus
        self.address = address
        self.actor_pool_size = actor_pool_size
        self.timeout = timeout
        if batch_size != "auto" and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"batch_size must be 'auto' or an int >= 1, got {batch_size!r}")
        self.batch_size = batch_size
        self._ray: Any = None
        self._started = False
        self._call: Any = None
        self._actors: list[Any] = []
        self._pools: list[Any] = []

    def __enter__(self) -> RayRuntime:
        try:
            import ray
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError(
                'RayRuntime needs Ray: pip install "ray" (or "cotrain[ray]")'
            ) from err
        self._ray = ray
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "ignore_reinit_error": True,
                "log_to_driver": False,
            }
            if self.address is not None:
                kwargs["address"] = self.address
            else:
                kwargs["num_cpus"] = self.num_cpus
            ray.init(**kwargs)
            self._started = True
        self._call = ray.remote(_run_batch)
        if self.actor_pool_size is not None:
            actor = ray.remote(_Worker)
            self._actors = [actor.remote() for _ in range(self.actor_pool_size)]
        return self

    def __exit__(self, *exc_info: object) -> None:
        ray = self._ray
        if ray is None:
            return None
        pools, self._pools = self._pools, []
        for pool in pools:
            pool.close()
        for actor in self._actors:
            ray.kill(actor)
        self._actors = []
        self._call = None
        if self._started:
            ray.shutdown()
            self._started = False
        self._ray = None
        return None

    def map(
        self,
        fn: Callable[..., Any],
        tasks: Iterable[Sequence[Any]],
        timeout: float | None = None,
    ) -> list[Any]:
        """Return ``[fn(*task) for task in tasks]``, computed by Ray workers.

        Parameters
        ----------
        fn : callable
            Called as ``fn(*task)``; must be picklable (cloudpickle).
        tasks : iterable of sequences
            The arguments of each call. Arguments that are the same object in every
            task are put in the object store once.
        timeout : float or None, default=None
            Seconds for the whole map (``None``: the runtime's ``timeout``).

        Returns
        -------
        list
            One result per task, in task order; :class:`Straggler` for late tasks.
        """
        if self._ray is None:
            raise RuntimeError("RayRuntime.map must be called inside a `with` block")
        ray = self._ray
        timeout = _timeout(timeout, self.timeout)
        start = time.perf_counter()
        tasks = [tuple(task) for task in tasks]
        if not tasks:
            return []
        shared = _shared_positions(tasks)
        # the shared arguments and fn go to the object store once; Ray resolves the
        # top-level refs in each task's arguments before calling it
        shared_refs = [ray.put(tasks[0][pos]) for pos in shared]
        fn_ref = ray.put(fn)
        size = self._batch_size(len(tasks), timeout)
        starts = range(0, len(tasks), size)
        refs = []
        for b, first in enumerate(starts):
            batch = [
                tuple(None if pos in shared else arg for pos, arg in enumerate(task))
                for task in tasks[first : first + size]
            ]
            args = (fn_ref, tuple(shared), batch, *shared_refs)
            if self._actors:
                refs.append(self._actors[b % len(self._actors)].call.remote(*args))
            else:
                refs.append(self._call.remote(*args))
        if timeout is None:
            return [result for batch_out in ray.get(refs) for result in batch_out]
        remaining = max(0.0, timeout - (time.perf_counter() - start))
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=remaining)
        elapsed = time.perf_counter() - start
        done = set(ready)
        out: list[Any] = []
        for first, ref in zip(starts, refs, strict=True):
            if ref in done:
                out.extend(ray.get(ref))
                continue
            try:
                ray.cancel(ref, force=False)
            except Exception:  # best effort: the result is dropped anyway
                pass
            out.extend(Straggler(i, elapsed) for i in range(first, min(first + size, len(tasks))))
        return out

    def _batch_size(self, n_tasks: int, timeout: float | None) -> int:
        if self.batch_size != "auto":
            return int(self.batch_size)
        if timeout is not None:
            return 1  # stragglers are given up one client at a time
        slots = len(self._actors) or max(1, int(self._ray.cluster_resources().get("CPU", 1)))
        return max(1, math.ceil(n_tasks / (4 * slots)))

    def host(self, objects: Sequence[Any]) -> ClientPool:
        """Keep ``objects`` resident in Ray actors for the rest of the ``with`` block.

        Parameters
        ----------
        objects : sequence
            Object ``i`` is ``objects[i]``; it lives in actor ``i % n_actors``.

        Returns
        -------
        cotrain.pools.RayActorPool
            ``actor_pool_size`` actors (``None``: one per CPU of the cluster), at most
            one per object; its default timeout is this runtime's. Closed when the
            ``with`` block ends, if not before.

        Examples
        --------
        >>> with RayRuntime(num_cpus=2) as rt, rt.host([[1], [2]]) as pool:  # doctest: +SKIP
        ...     pool.call("append", {0: (3,)})
        {0: None}
        """
        from cotrain.pools import RayActorPool

        if self._ray is None:
            raise RuntimeError("RayRuntime.host must be called inside a `with` block")
        pool = RayActorPool(objects, n_actors=self.actor_pool_size, timeout=self.timeout)
        self._pools.append(pool)
        return pool


def _run_batch(
    fn: Callable[..., Any],
    shared: tuple[int, ...],
    batch: list[tuple[Any, ...]],
    *shared_values: Any,
) -> list[Any]:
    """Body of a Ray task or actor call: put the shared values back, run each task."""
    out = []
    for task in batch:
        args = list(task)
        for pos, value in zip(shared, shared_values, strict=True):
            args[pos] = value
        out.append(fn(*args))
    return out


class _Worker:
    """Body of a pooled Ray actor."""

    def call(self, *args: Any) -> list[Any]:
        return _run_batch(*args)


def _shared_positions(tasks: list[tuple[Any, ...]]) -> list[int]:
    """Argument positions holding the same (non-trivial) object in every task."""
    if len(tasks) < 2:
        return []
    first = tasks[0]
    return [
        pos
        for pos, arg in enumerate(first)
        if arg is not None
        and not isinstance(arg, int | float | bool | str)
        and all(len(t) == len(first) and t[pos] is arg for t in tasks[1:])
    ]


class Runtime(Protocol):
    """What the trainer needs from a runtime: a context manager with ``map`` and ``host``.

    :class:`SequentialRuntime`, :class:`JoblibRuntime` and :class:`RayRuntime` implement
    it. A user-supplied runtime may leave ``host`` out:
    :func:`cotrain.pools.host_objects` then keeps the objects in this process and ships
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
        """``[fn(*task) for task in tasks]``, :class:`Straggler` for late tasks."""
        ...

    def host(self, objects: Sequence[Any]) -> ClientPool:
        """Place ``objects`` where they will run; see :mod:`cotrain.pools`."""
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
        A :class:`SequentialRuntime`, :class:`JoblibRuntime` or :class:`RayRuntime`, or
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
