"""The Ray runtime: client steps as Ray tasks or on Ray actors (see :mod:`cotrain.runtime`).

Ray is imported only when a :class:`RayRuntime` is entered, so this module imports
without it. Import the runtime from :mod:`cotrain.runtime`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cotrain.runtime.pool_base import ClientPool
from cotrain.runtime.ray_pool import RayActorPool
from cotrain.runtime.straggler import Straggler, check_timeout

__all__ = ["RayRuntime"]


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
    :class:`cotrain.runtime.ray_pool.RayActorPool`: ``actor_pool_size`` actors, or one per CPU).

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
        timeout = check_timeout(timeout, self.timeout)
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
        cotrain.runtime.ray_pool.RayActorPool
            ``actor_pool_size`` actors (``None``: one per CPU of the cluster), at most
            one per object; its default timeout is this runtime's. Closed when the
            ``with`` block ends, if not before.

        Examples
        --------
        >>> with RayRuntime(num_cpus=2) as rt, rt.host([[1], [2]]) as pool:  # doctest: +SKIP
        ...     pool.call("append", {0: (3,)})
        {0: None}
        """
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


def _shared_positions(tasks: Sequence[Sequence[Any]]) -> list[int]:
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
