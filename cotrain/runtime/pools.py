"""Resident object pools: objects (clients) live where they run; only small messages travel.

A runtime's :meth:`~cotrain.runtime.SequentialRuntime.map` ships every task's arguments
to a worker and the result back, every round. For a federation that means pickling each
client (its estimator, its private data, a reference to the public pool) down to a
worker and its fitted model back up, every round. A *pool* instead places each object
once, keeps it where it was placed, and calls its methods there:

- ``call(method, args, shared=(), timeout=None)`` runs
  ``getattr(objects[i], method)(*shared, *args[i])`` for every key ``i`` of ``args``
  where object ``i`` lives and returns ``{i: result}``. Only the arguments (``shared``
  once per worker, e.g. the round's broadcast) go down and only the results come up;
  the objects keep the state the calls give them.
- ``get(ids)`` pulls copies of the current objects back (end of a fit, checkpoints),
  ``put({i: obj})`` replaces objects (a restored checkpoint), ``close()`` stops the
  workers. Every pool is a context manager that closes on exit.

Three pools, chosen by the runtime's ``host(objects)`` (see :func:`host_objects`):

- :class:`InProcessPool`: objects stay in this process and are called in place
  (sequential runtime, joblib with ``n_jobs=1``, and the fallback for a user runtime
  that has only ``map``).
- :class:`~cotrain.runtime.process_pool.ProcessPool`: long-lived worker processes, object
  ``i`` placed in worker ``i % n_workers``; an idle worker steals a call not yet started
  from a busy one, and the object moves with it (joblib runtime, which also keeps the
  emptied workers of a closed pool for the next one, as joblib keeps its loky workers).
- :class:`~cotrain.runtime.ray_pool.RayActorPool`: Ray actors, object ``i`` in actor
  ``i % n_actors`` (Ray runtime).

What they share (:class:`~cotrain.runtime.pool_base.ClientPool`,
:class:`~cotrain.runtime.pool_base.WorkerDiedError`, the argument checks) is in
:mod:`cotrain.runtime.pool_base`; the process pool is in :mod:`cotrain.runtime.process_pool`
(its workers: :mod:`cotrain.runtime.pool_worker`, :mod:`cotrain.runtime.worker_group`,
:mod:`cotrain.runtime.worker_processes`), the Ray pool in :mod:`cotrain.runtime.ray_pool`.

For deterministic objects the results do not depend on which pool holds them; with a
``timeout`` the pools differ only in which calls straggle (see each pool).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cotrain.runtime.pool_base import ClientPool, check_call, check_index
from cotrain.runtime.straggler import Straggler, check_timeout, run_in_order

__all__ = [
    "InProcessPool",
    "host_objects",
]


def _call_and_return(obj: Any, method: str, shared: tuple, args: tuple) -> tuple[Any, Any]:
    """A task for a runtime's ``map``: call the method, return its result and the object."""
    return getattr(obj, method)(*shared, *args), obj


# --------------------------------------------------------------------- InProcessPool
class InProcessPool:
    """Objects that stay in this process and are called in place.

    Calls run one after the other in key order. With a ``timeout`` (seconds from the
    start of the ``call``) the time is checked before each call, as in
    :class:`~cotrain.runtime.SequentialRuntime`: once it is up, the later calls are not
    run and come back as :class:`~cotrain.runtime.straggler.Straggler` (``index``: the position
    among the sorted keys); the call that overran is kept.

    With ``runtime`` (a runtime that has ``map`` but no ``host``), each call is instead
    dispatched through ``runtime.map``: the object is shipped with the task and the
    updated object comes back with the result and replaces the one held here. A
    runtime whose ``map`` pickles tasks to other processes would otherwise lose the
    call's changes to the object; this is the old (ship-everything) behaviour, correct
    for any runtime but without the savings of a resident pool. A straggler's object
    is left as it was.

    Parameters
    ----------
    objects : sequence
        The objects; object ``i`` is ``objects[i]``.
    timeout : float or None, default=None
        Default timeout in seconds for :meth:`call`.
    runtime : object with ``map``, optional
        Dispatch calls through ``runtime.map`` (see above) instead of calling in place.

    Examples
    --------
    >>> with InProcessPool([[1], [2, 3]]) as pool:
    ...     pool.call("append", {0: (10,), 1: (20,)})
    ...     pool.call("count", {0: (), 1: ()}, shared=(20,))
    ...     pool.get()
    {0: None, 1: None}
    {0: 0, 1: 1}
    [[1, 10], [2, 3, 20]]
    """

    def __init__(
        self, objects: Sequence[Any], timeout: float | None = None, runtime: Any = None
    ) -> None:
        if runtime is not None and not callable(getattr(runtime, "map", None)):
            raise TypeError(f"runtime must have a map method, got {runtime!r}")
        self._objects = list(objects)
        self.timeout = timeout
        self.runtime = runtime
        self._closed = False

    def __enter__(self) -> InProcessPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._objects)

    def __repr__(self) -> str:
        return f"InProcessPool(n_objects={len(self._objects)})"

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this InProcessPool is closed")

    def call(
        self,
        method: str,
        args: Mapping[int, tuple],
        shared: tuple = (),
        timeout: float | None = None,
    ) -> dict[int, Any]:
        """Call ``getattr(objects[i], method)(*shared, *args[i])`` for each key ``i``.

        Parameters
        ----------
        method : str
            Name of the method to call.
        args : mapping of int to tuple
            The objects to call and each one's own arguments.
        shared : tuple, default=()
            Arguments passed first to every call.
        timeout : float or None, default=None
            Seconds for the whole call (``None``: the pool's ``timeout``).

        Returns
        -------
        dict
            ``{i: result}`` in key order; :class:`Straggler` for calls not run in time.
            An exception raised by a method propagates; later calls are not run.
        """
        self._check_open()
        keys, shared = check_call(method, args, shared, len(self._objects))
        given = check_timeout(timeout, self.timeout)
        tasks = [(self._objects[i], method, shared, tuple(args[i])) for i in keys]
        if self.runtime is None:
            outcomes = run_in_order(_call_and_return, tasks, timeout=given)
        else:
            outcomes = self.runtime.map(_call_and_return, tasks, timeout=given)
        out: dict[int, Any] = {}
        for i, outcome in zip(keys, outcomes, strict=True):
            if isinstance(outcome, Straggler):
                out[i] = outcome
            else:
                out[i], self._objects[i] = outcome
        return out

    def get(self, ids: Sequence[int] | None = None) -> list[Any]:
        """The objects themselves (not copies): ``ids`` in that order, or all.

        Examples
        --------
        >>> InProcessPool(["a", "b", "c"]).get([2, 0])
        ['c', 'a']
        """
        self._check_open()
        if ids is None:
            return list(self._objects)
        return [self._objects[check_index(i, len(self._objects), "get")] for i in ids]

    def put(self, objects: Mapping[int, Any]) -> None:
        """Replace object ``i`` by ``objects[i]`` for each key.

        Examples
        --------
        >>> pool = InProcessPool(["a", "b"])
        >>> pool.put({1: "z"}); pool.get()
        ['a', 'z']
        """
        self._check_open()
        checked = {check_index(i, len(self._objects), "put"): obj for i, obj in objects.items()}
        for i, obj in checked.items():
            self._objects[i] = obj

    def close(self) -> None:
        """Mark the pool closed (the objects stay where they are)."""
        self._closed = True


# ----------------------------------------------------------------------- the fallback
def host_objects(runtime: Any, objects: Sequence[Any]) -> ClientPool:
    """A pool for ``objects`` on ``runtime``: ``runtime.host(objects)`` when it has one.

    A runtime with only ``map`` (a user-supplied one) gets an :class:`InProcessPool`
    that keeps the objects here and dispatches each call through ``runtime.map``,
    shipping the object with the call and taking the updated object back from the
    result (the in-place change would be lost if ``map`` ran the call in another
    process). That is correct for any runtime, but moves every object both ways on
    every call; give the runtime a ``host`` method to keep objects resident.

    Parameters
    ----------
    runtime : runtime
        Inside its ``with`` block.
    objects : sequence

    Returns
    -------
    ClientPool

    Examples
    --------
    >>> class MapOnly:  # a user runtime without host
    ...     def map(self, fn, tasks, timeout=None):
    ...         return [fn(*task) for task in tasks]
    >>> with host_objects(MapOnly(), [[1], [2]]) as pool:
    ...     pool.call("append", {1: (5,)})
    ...     pool.get()
    {1: None}
    [[1], [2, 5]]
    """
    host = getattr(runtime, "host", None)
    if callable(host):
        return host(objects)
    return InProcessPool(objects, runtime=runtime)
