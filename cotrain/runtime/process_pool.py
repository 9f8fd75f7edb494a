"""The parent side of :class:`ProcessPool`: objects resident in worker processes.

Placement, the scheduling of a ``call`` over the workers (one call at a time per
worker, with work stealing) and the pool's API. The workers' own loop is in
:mod:`cotrain.runtime.pool_worker`, talking to them in :mod:`cotrain.runtime.worker_group`,
starting,
stopping and keeping them in :mod:`cotrain.runtime.worker_processes`. Import the pool from
:mod:`cotrain.runtime.pools`.
"""

from __future__ import annotations

import operator
import os
import pickle
import time
from collections.abc import Mapping, Sequence
from typing import Any

from cotrain.runtime.pool_base import WorkerDiedError, check_call, check_index
from cotrain.runtime.pool_worker import dumps
from cotrain.runtime.straggler import Straggler, check_timeout
from cotrain.runtime.worker_group import WorkerGroup

__all__ = ["ProcessPool"]


class _CallState:
    """Book-keeping of one :meth:`ProcessPool.call` in the parent.

    ``todo[w]``: the calls not started yet of the objects living in worker ``w``, in
    key order, as ``(object id, args)``; ``primed``: the workers that have this call's
    shared arguments; ``moving``: steals in flight, ``{object id: (victim, thief,
    args)}``; ``results``: what came back in time.
    """

    __slots__ = ("method", "moving", "primed", "results", "seq", "shared", "todo")

    def __init__(
        self, seq: int, method: str, shared: bytes, todo: dict[int, list[tuple[int, tuple]]]
    ) -> None:
        self.seq = seq
        self.method = method
        self.shared = shared
        self.todo = todo
        self.primed: set[int] = set()
        self.moving: dict[int, tuple[int, int, tuple]] = {}
        self.results: dict[int, Any] = {}

    def thieves(self) -> set[int]:
        """Workers waiting for a stolen object."""
        return {thief for _, thief, _ in self.moving.values()}


class ProcessPool:
    """Objects resident in long-lived worker processes, with work stealing.

    ``n_workers`` worker processes are started once per pool (or taken over from
    closed pools, with ``reuse=True``); object ``i`` is placed in worker
    ``i % n_workers`` and lives there until a steal moves it (below). The objects
    are sent with cloudpickle (so classes defined in functions or ``__main__`` work),
    each worker's objects in *one* pickle, so an array they share (the public pool)
    is sent once per worker. Afterwards only a ``call``'s arguments go down
    (``shared`` pickled once and sent once per worker) and its results come up.

    **Scheduling.** The pool hands each worker one method call at a time (of the
    objects living there, in key order) and the next one when its result comes back,
    so it always knows which calls have not started. A worker that is idle, with
    nothing left of this ``call`` among its own objects, *steals*: from the worker
    with the most calls not started (the lowest-numbered on a tie) it takes the last
    one, once that worker's running call has run for ``steal_after`` seconds. The
    victim's reader thread pickles that object (which is not running), sends it back
    and forgets it, even while the victim's main thread runs another object's method
    (the reader thread needs the GIL: a method that holds it for long delays a steal);
    the pool sends the object with its call to the thief, which keeps it from then on
    (see :meth:`held_by` and :attr:`placement`). An object moves whole, so results
    do not depend on where it runs; a fast object is not made to wait behind a slow
    one in its worker while another worker is idle. A stolen object carries its own
    copy of what it shared with the objects of its old worker (an array such as the
    public pool), so objects must not rely on sharing mutable state; an object that
    its worker cannot pickle is never moved (its call runs where it is). Handing out one
    call at a time costs one message round trip per call (well under a millisecond),
    and no call is ever queued in a worker where it could not be stolen from.
    ``steal_after`` keeps objects in place when calls are short: a steal moves a whole
    object, which costs more than waiting a moment for a victim about to finish.

    **Timeouts.** With a ``timeout`` (seconds from the start of the ``call``) the
    pool returns at the deadline with the results that arrived and a
    :class:`~cotrain.runtime.straggler.Straggler` (``index``: position among the sorted keys)
    for the rest. A call that had not started by then is not run (an object already
    on its way to a thief arrives there, without running). A call already running
    finishes in its worker, which keeps whatever state that call gave the object,
    and its late result is recognised (calls are numbered) and dropped; until then
    that worker takes no new call, but idle workers may steal its objects' calls.

    **Workers** are fresh interpreters (spawned with ``subprocess`` and ``exec``, never
    forked, so torch and OpenMP threads in this process are safe), started with this
    process's ``sys.path`` but without re-running ``__main__`` and without importing
    the ``cotrain`` package until an object needs it. Each worker's BLAS and
    OpenMP threads are capped at ``threads_per_worker`` as loky does (the
    ``*_NUM_THREADS`` variables, unless already set, and threadpoolctl), so the workers
    do not oversubscribe the cores. A worker that dies (segfault, killed), also while
    an object is being moved, makes the pool raise :class:`WorkerDiedError` naming the
    objects it held, and close. Workers are stopped by :meth:`close`, on leaving the
    ``with`` block (exception or not), and when the pool is garbage-collected.

    With ``reuse=True`` (what :meth:`cotrain.runtime.JoblibRuntime.host` asks for, as
    joblib reuses its loky workers) :meth:`close` instead has every worker drop all
    the objects it holds and keeps the worker, idle, for the next pool with the same
    thread limit: starting a worker (a new interpreter, then the imports its objects
    need, such as scikit-learn) costs about half a second, which a short fit would
    otherwise pay every time. A worker still running a straggler ``shutdown_timeout``
    seconds after :meth:`close` is stopped instead. Idle workers are stopped after 300
    s, at interpreter exit, and when they die (see
    :data:`cotrain.runtime.worker_processes.idle_workers`); a dead idle worker is never handed
    to a pool. Objects do not carry over, but what the objects' code left in the
    worker's modules (module globals, caches) does, as in any reused worker. POSIX
    only.

    Parameters
    ----------
    objects : sequence
        The objects (picklable with cloudpickle); object ``i`` is ``objects[i]``.
    n_workers : int or None, default=None
        Worker processes (``None``: all cores); at most one per object.
    timeout : float or None, default=None
        Default timeout in seconds for :meth:`call`.
    threads_per_worker : int or None, default=None
        BLAS/OpenMP threads per worker (``None``: cores // ``n_workers``, at least 1).
    shutdown_timeout : float, default=5.0
        Seconds :meth:`close` lets a worker finish a running call before terminating it.
    steal_after : float or None, default=0.1
        An idle worker steals a call not yet started from a worker whose running call
        has run this many seconds; ``None``: never (objects stay where they were
        placed, and a worker's calls run one after the other).
    reuse : bool, default=False
        Start with idle workers of closed pools where there are some, and keep the
        workers, emptied, when this pool closes (see above).

    Attributes
    ----------
    n_workers : int
        Number of worker processes.
    pids : list of int
        Their process ids.
    placement : list of int
        The worker each object lives in.
    reused_workers : int
        How many workers came from pools closed earlier.

    Examples
    --------
    >>> with ProcessPool([[1], [2, 3]], n_workers=2) as pool:
    ...     pool.call("append", {0: (10,), 1: (20,)})  # runs in the workers
    ...     pool.call("count", {0: (), 1: ()}, shared=(20,))
    ...     pool.get()  # copies of the objects, as the workers hold them
    ...     pool.placement
    {0: None, 1: None}
    {0: 0, 1: 1}
    [[1, 10], [2, 3, 20]]
    [0, 1]

    With ``reuse=True`` the next pool gets the same (emptied) worker processes:

    >>> with ProcessPool([[1]], n_workers=1, reuse=True) as pool:
    ...     first = pool.pids
    >>> with ProcessPool([[2]], n_workers=1, reuse=True) as pool:
    ...     pool.pids == first, pool.reused_workers, pool.get()
    (True, 1, [[2]])
    >>> from cotrain.runtime.worker_processes import idle_workers
    >>> idle_workers.clear()  # stop them now rather than after 300 s idle
    """

    def __init__(
        self,
        objects: Sequence[Any],
        n_workers: int | None = None,
        timeout: float | None = None,
        threads_per_worker: int | None = None,
        shutdown_timeout: float = 5.0,
        steal_after: float | None = 0.1,
        reuse: bool = False,
    ) -> None:
        from joblib import cpu_count

        if os.name != "posix":  # pragma: no cover - the CI runs on Linux
            raise NotImplementedError("ProcessPool needs a POSIX system (Linux, macOS)")
        objects = list(objects)
        cores = cpu_count()
        if n_workers is None:
            n_workers = cores
        if not isinstance(n_workers, int) or n_workers < 1:
            raise ValueError(f"n_workers must be an int >= 1 or None, got {n_workers!r}")
        if threads_per_worker is not None and (
            not isinstance(threads_per_worker, int) or threads_per_worker < 1
        ):
            raise ValueError(
                f"threads_per_worker must be an int >= 1 or None, got {threads_per_worker!r}"
            )
        if steal_after is not None and (
            not isinstance(steal_after, int | float) or not steal_after >= 0
        ):
            raise ValueError(f"steal_after must be a number >= 0 or None, got {steal_after!r}")
        self._n = len(objects)
        self.n_workers = min(n_workers, max(1, self._n))
        self.timeout = timeout
        self.steal_after = steal_after
        self.threads_per_worker = threads_per_worker or max(1, cores // self.n_workers)
        self.reuse = reuse
        self._closed = False
        self._home = [i % self.n_workers for i in range(self._n)]
        self._pinned: set[int] = set()  # objects that could not be pickled: never stolen
        self._group = WorkerGroup(
            self.n_workers, self.threads_per_worker, self._home, reuse, shutdown_timeout
        )
        try:
            self._load(dict(enumerate(objects)))
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers."""
        return self._group.pids

    @property
    def reused_workers(self) -> int:
        """How many of the workers served earlier pools (``reuse=True``), 0 otherwise."""
        return self._group.reused

    @property
    def placement(self) -> list[int]:
        """The worker each object lives in: ``placement[i]`` holds object ``i``.

        Starts as ``i % n_workers``; a steal moves an object to the thief.
        """
        return list(self._home)

    def held_by(self, worker: int) -> list[int]:
        """Ids of the objects that live in worker ``worker``, in increasing order.

        Parameters
        ----------
        worker : int

        Returns
        -------
        list of int
        """
        return [i for i, home in enumerate(self._home) if home == worker]

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return f"ProcessPool(n_objects={self._n}, n_workers={self.n_workers})"

    def _check_open(self) -> None:
        if self._group.broken is not None:
            raise WorkerDiedError(self._group.broken)
        if self._closed:
            raise RuntimeError("this ProcessPool is closed")

    def _recv(self, w: int) -> tuple[str, int, Any, list[bytes]]:
        return self._group.recv(w)

    def _request(self, kind: str, messages: Mapping[int, tuple[Any, list[bytes]]]) -> dict:
        return self._group.request(kind, messages, self._group.next_seq())

    def _load(self, objects: Mapping[int, Any]) -> None:
        groups: dict[int, dict[int, Any]] = {}
        for i, obj in objects.items():
            groups.setdefault(self._home[i], {})[i] = obj
        # one pickle per worker: what its objects share is sent (and rebuilt) once
        self._request("load", {w: (None, [dumps(group)]) for w, group in groups.items()})

    # ------------------------------------------------------------- scheduling
    def _run(
        self, state: _CallState, w: int, i: int, args: tuple, obj: bytes | None = None
    ) -> None:
        """Send object ``i``'s call to worker ``w`` (with the object itself if stolen)."""
        frames = [dumps(args)]
        with_shared = w not in state.primed
        if with_shared:
            frames.append(state.shared)
        if obj is not None:
            frames.append(obj)
        meta = (state.method, i, with_shared, obj is not None)
        self._group.post(w, "run", state.seq, meta, *frames)
        state.primed.add(w)
        self._group.busy[w] = (state.seq, i, time.perf_counter())

    def _dispatch(self, state: _CallState) -> None:
        """Give every idle worker the next call of its own objects."""
        thieves = state.thieves()
        for w in range(self.n_workers):
            if self._group.busy[w] is None and w not in thieves and state.todo[w]:
                i, args = state.todo[w].pop(0)
                self._run(state, w, i, args)

    def _stealable(self, state: _CallState, w: int) -> list[int]:
        """Positions in ``todo[w]`` of calls whose object may move (not running, not pinned)."""
        busy = self._group.busy[w]
        running = None if busy is None else busy[1]
        return [
            pos
            for pos, (i, _) in enumerate(state.todo[w])
            if i != running and i not in self._pinned
        ]

    def _steal(self, state: _CallState) -> float | None:
        """Start steals for the idle workers with nothing left of their own.

        Victim: the worker with the most stealable calls not started (the
        lowest-numbered on a tie) whose running call has run ``steal_after`` seconds;
        the thief takes its last one. Returns when a victim becomes eligible, if one
        is waited for (``None`` otherwise).
        """
        if self.steal_after is None:
            return None
        thieves = state.thieves()
        idle = [
            w
            for w in range(self.n_workers)
            if self._group.busy[w] is None and w not in thieves and not state.todo[w]
        ]
        wake: float | None = None
        for thief in idle:
            now = time.perf_counter()
            best: tuple[int, list[int]] | None = None
            for victim in range(self.n_workers):
                stealable = self._stealable(state, victim) if victim != thief else []
                if not stealable:
                    continue
                busy = self._group.busy[victim]
                eligible = now if busy is None else busy[2] + self.steal_after
                if eligible > now:
                    wake = eligible if wake is None else min(wake, eligible)
                elif best is None or len(stealable) > len(best[1]):
                    best = (victim, stealable)
            if best is None:
                continue
            victim, stealable = best
            i, args = state.todo[victim].pop(stealable[-1])
            state.moving[i] = (victim, thief, args)
            self._group.post(victim, "release", state.seq, i)
        return wake

    def _handle(self, state: _CallState, w: int, message: tuple) -> None:
        """Act on a message from worker ``w`` during a call."""
        kind, seq, i, frames = message
        if seq != state.seq:
            return  # a late result of an earlier call: dropped (the worker is free)
        if kind == "done":
            state.results[i] = pickle.loads(frames[0])
        elif kind == "raised":
            raise self._group.remote_error(w, i, state.method, frames[0])
        elif kind == "released":  # a stolen object: it goes with its call to the thief
            _, thief, args = state.moving.pop(i)
            self._home[i] = thief
            self._run(state, thief, i, args, obj=frames[0])
        elif kind == "refused":  # it cannot be pickled: it stays, and runs there
            victim, _, args = state.moving.pop(i)
            self._pinned.add(i)
            state.todo[victim].append((i, args))
            state.todo[victim].sort(key=operator.itemgetter(0))

    def _settle(self, state: _CallState) -> None:
        """Finish the steals in flight without running their calls (end of a call)."""
        while state.moving:
            victims = sorted({victim for victim, _, _ in state.moving.values()})
            for w in self._group.wait(victims, None):
                kind, seq, i, frames = self._recv(w)
                if seq != state.seq or kind not in ("released", "refused"):
                    continue  # results read now are late: dropped
                _, thief, _ = state.moving.pop(i)
                if kind == "released":
                    self._home[i] = thief
                    self._request("adopt", {thief: (i, [frames[0]])})
                else:
                    self._pinned.add(i)

    # -------------------------------------------------------------------- the API
    def call(
        self,
        method: str,
        args: Mapping[int, tuple],
        shared: tuple = (),
        timeout: float | None = None,
    ) -> dict[int, Any]:
        """Call ``getattr(objects[i], method)(*shared, *args[i])`` where object ``i`` lives.

        Parameters
        ----------
        method : str
            Name of the method to call.
        args : mapping of int to tuple
            The objects to call and each one's own arguments.
        shared : tuple, default=()
            Arguments passed first to every call: pickled once, sent once per worker.
        timeout : float or None, default=None
            Seconds for the whole call (``None``: the pool's ``timeout``).

        Returns
        -------
        dict
            ``{i: result}`` in key order; :class:`Straggler` for calls not finished by
            the deadline.

        Raises
        ------
        Exception
            The first exception raised by a method (its worker traceback as
            ``__cause__``); the calls of this ``call`` not started are not run.
        WorkerDiedError
            When a worker died; the pool is closed.
        """
        self._check_open()
        keys, shared = check_call(method, args, shared, self._n)
        timeout = check_timeout(timeout, self.timeout)
        start = time.perf_counter()
        deadline = None if timeout is None else start + timeout
        seq = self._group.next_seq()
        todo: dict[int, list[tuple[int, tuple]]] = {w: [] for w in range(self.n_workers)}
        for i in keys:
            todo[self._home[i]].append((i, tuple(args[i])))
        state = _CallState(seq, method, dumps(shared), todo)
        workers = list(range(self.n_workers))
        try:
            while True:
                self._dispatch(state)
                wake = self._steal(state)
                if not (
                    any(todo.values())
                    or state.moving
                    or any(busy is not None and busy[0] == seq for busy in self._group.busy)
                ):
                    break  # everything came back
                until = min((t for t in (deadline, wake) if t is not None), default=None)
                ready = self._group.wait(workers, until)
                if deadline is not None and time.perf_counter() >= deadline:
                    break  # what is read from now on is late; nothing more starts
                for w in ready:
                    self._handle(state, w, self._recv(w))
            elapsed = time.perf_counter() - start
            self._settle(state)
        except BaseException:
            if self._group.broken is None and not self._closed:
                self._settle(state)  # no object is left half-way between two workers
            raise
        results = state.results
        return {
            i: results[i] if i in results else Straggler(pos, elapsed) for pos, i in enumerate(keys)
        }

    def get(self, ids: Sequence[int] | None = None) -> list[Any]:
        """Copies of the current objects, pulled back from the workers.

        Waits for a straggling call still running in a worker, so the copy has its
        state.

        Parameters
        ----------
        ids : sequence of int or None, default=None
            Which objects, in this order (``None``: all).

        Returns
        -------
        list
        """
        self._check_open()
        ids = list(range(self._n)) if ids is None else [check_index(i, self._n, "get") for i in ids]
        groups: dict[int, list[int]] = {}
        for i in dict.fromkeys(ids):
            groups.setdefault(self._home[i], []).append(i)
        replies = self._request("get", {w: (group, []) for w, group in groups.items()})
        found: dict[int, Any] = {}
        for w, group in groups.items():
            found.update(zip(group, pickle.loads(replies[w][0]), strict=True))
        return [found[i] for i in ids]

    def put(self, objects: Mapping[int, Any]) -> None:
        """Replace object ``i`` by ``objects[i]`` where it lives (one pickle per worker).

        Parameters
        ----------
        objects : mapping of int to object
        """
        self._check_open()
        self._load({check_index(i, self._n, "put"): obj for i, obj in objects.items()})

    def close(self) -> None:
        """Stop the workers (a running call gets ``shutdown_timeout`` s) and reap them.

        With ``reuse=True``, the workers not running a call drop every object and are
        kept, idle, for the next pool instead; the others are stopped.
        """
        self._closed = True
        self._group.close()
