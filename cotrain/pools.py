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
- :class:`ProcessPool`: long-lived worker processes, object ``i`` placed in worker
  ``i % n_workers``; an idle worker steals a call not yet started from a busy one,
  and the object moves with it (joblib runtime).
- :class:`RayActorPool`: Ray actors, object ``i`` in actor ``i % n_actors`` (Ray runtime).

For deterministic objects the results do not depend on which pool holds them; with a
``timeout`` the pools differ only in which calls straggle (see each pool).
"""

from __future__ import annotations

import itertools
import operator
import os
import pickle
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Mapping, Sequence
from multiprocessing import connection as mp_connection
from typing import Any, Protocol, runtime_checkable

try:  # joblib >= 1.5 depends on cloudpickle; older releases vendor it
    import cloudpickle
except ImportError:  # pragma: no cover - depends on the joblib release
    from joblib.externals import cloudpickle

# A ProcessPool worker executes this file on its own, as module ``_WORKER_MODULE`` (see
# ProcessPool._start_worker), so that it starts without importing the cotrain package
# (scikit-learn and all: a second or more per worker); the objects it is sent import
# what they need. Only the parent side uses the runtimes.
_WORKER_MODULE = "_cotrain_pool_worker"
if __name__ != _WORKER_MODULE:
    from cotrain.runtime import SequentialRuntime, Straggler, _timeout

__all__ = [
    "ClientPool",
    "InProcessPool",
    "ProcessPool",
    "RayActorPool",
    "WorkerDiedError",
    "host_objects",
]

# the variables loky sets in its workers so that BLAS/OpenMP do not oversubscribe cores
_THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


class WorkerDiedError(RuntimeError):
    """A worker process (or Ray actor) of a pool died; the objects it held are lost."""


@runtime_checkable
class ClientPool(Protocol):
    """Objects that live where they run, called by method name.

    Implemented by :class:`InProcessPool`, :class:`ProcessPool` and
    :class:`RayActorPool`; obtained from a runtime's ``host(objects)`` or from
    :func:`host_objects`.

    Examples
    --------
    >>> with SequentialRuntime() as runtime, runtime.host([[1], [2]]) as pool:
    ...     isinstance(pool, ClientPool)
    True
    """

    def __enter__(self) -> ClientPool: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def call(
        self,
        method: str,
        args: Mapping[int, tuple],
        shared: tuple = (),
        timeout: float | None = None,
    ) -> dict[int, Any]:
        """``{i: getattr(objects[i], method)(*shared, *args[i])}``, or ``Straggler``."""
        ...

    def get(self, ids: Sequence[int] | None = None) -> list[Any]:
        """The current objects ``ids`` (all when ``None``), in that order."""
        ...

    def put(self, objects: Mapping[int, Any]) -> None:
        """Replace objects ``i`` by ``objects[i]``."""
        ...

    def close(self) -> None:
        """Release the workers; the pool cannot be used afterwards."""
        ...


# --------------------------------------------------------------------------- helpers
def _check_index(i: Any, n: int, what: str) -> int:
    try:
        index = operator.index(i)
    except TypeError:
        raise TypeError(f"{what}: object ids must be integers, got {i!r}") from None
    if not 0 <= index < n:
        raise KeyError(f"{what}: no object {index} in a pool of {n} (ids 0..{n - 1})")
    return index


def _check_call(method: Any, args: Any, shared: Any, n: int) -> tuple[list[int], tuple]:
    """Validate a ``call``'s arguments; returns the sorted keys and ``shared`` as a tuple."""
    if not isinstance(method, str):
        raise TypeError(f"method must be a method name (str), got {type(method).__name__}")
    if not isinstance(args, Mapping):
        raise TypeError(
            f"args must be a mapping {{object id: tuple of arguments}}, got {type(args).__name__}"
        )
    if not isinstance(shared, tuple | list):
        raise TypeError(f"shared must be a tuple of arguments, got {type(shared).__name__}")
    for key, value in args.items():
        if not isinstance(value, tuple | list):
            raise TypeError(
                f"args[{key!r}] must be a tuple of arguments, got {type(value).__name__}"
            )
    keys = sorted({_check_index(i, n, "args") for i in args})
    if len(keys) != len(args):
        raise ValueError("args has the same object id more than once")
    return keys, tuple(shared)


def _call_and_return(obj: Any, method: str, shared: tuple, args: tuple) -> tuple[Any, Any]:
    """A task for a runtime's ``map``: call the method, return its result and the object."""
    return getattr(obj, method)(*shared, *args), obj


def _dumps(obj: Any) -> bytes:
    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


class _RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker (set as its ``__cause__``)."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return self.tb


# --------------------------------------------------------------------- InProcessPool
class InProcessPool:
    """Objects that stay in this process and are called in place.

    Calls run one after the other in key order. With a ``timeout`` (seconds from the
    start of the ``call``) the time is checked before each call, as in
    :class:`~cotrain.runtime.SequentialRuntime`: once it is up, the later calls are not
    run and come back as :class:`~cotrain.runtime.Straggler` (``index``: the position
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
        keys, shared = _check_call(method, args, shared, len(self._objects))
        given = self.timeout if timeout is None else timeout
        tasks = [(self._objects[i], method, shared, tuple(args[i])) for i in keys]
        if self.runtime is None:
            outcomes = SequentialRuntime().map(_call_and_return, tasks, timeout=given)
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
        return [self._objects[_check_index(i, len(self._objects), "get")] for i in ids]

    def put(self, objects: Mapping[int, Any]) -> None:
        """Replace object ``i`` by ``objects[i]`` for each key.

        Examples
        --------
        >>> pool = InProcessPool(["a", "b"])
        >>> pool.put({1: "z"}); pool.get()
        ['a', 'z']
        """
        self._check_open()
        checked = {_check_index(i, len(self._objects), "put"): obj for i, obj in objects.items()}
        for i, obj in checked.items():
            self._objects[i] = obj

    def close(self) -> None:
        """Mark the pool closed (the objects stay where they are)."""
        self._closed = True


# ----------------------------------------------------------------------- ProcessPool
def _send(conn: mp_connection.Connection, kind: str, seq: int, meta: Any, *frames: bytes) -> None:
    """One message: a small pickled header, then its raw payload frames."""
    conn.send_bytes(pickle.dumps((kind, seq, meta, len(frames))))
    for frame in frames:
        conn.send_bytes(frame)


def _receive_message(conn: mp_connection.Connection) -> tuple[str, int, Any, list[bytes]]:
    kind, seq, meta, n_frames = pickle.loads(conn.recv_bytes())
    return kind, seq, meta, [conn.recv_bytes() for _ in range(n_frames)]


def _error_payload(err: BaseException) -> bytes:
    tb = traceback.format_exc()
    try:
        return _dumps((err, tb))
    except Exception:  # an exception that cannot be pickled travels as text
        return _dumps((RuntimeError(f"{type(err).__name__}: {err}"), tb))


def _limit_threads(threads: int) -> None:
    """Cap BLAS/OpenMP threads of the libraries loaded so far (as loky's workers do)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return
    threadpool_limits(limits=threads)


def _inbox_reader(
    conn: mp_connection.Connection,
    inbox: queue.SimpleQueue,
    objects: dict[int, Any],
    send_lock: threading.Lock,
) -> None:
    """Worker thread: read every message as it arrives, so the parent never blocks on a
    send. A ``release`` is answered here at once, while the main thread may be running
    another object's method; everything else is queued for the main thread."""
    try:
        while True:
            message = _receive_message(conn)
            if message[0] == "release":
                _release(conn, send_lock, objects, message[1], message[2])
                continue
            inbox.put(message)
            if message[0] == "close":
                return
    except (EOFError, OSError):  # the parent is gone: finish the current call, then exit
        inbox.put(("close", -1, None, []))


def _release(
    conn: mp_connection.Connection,
    send_lock: threading.Lock,
    objects: dict[int, Any],
    seq: int,
    i: int,
) -> None:
    """Send object ``i`` to the parent and forget it (a steal; see ProcessPool).

    The parent asks only for an object whose call it has not dispatched, so object
    ``i`` is not running. If it cannot be pickled it stays here (``refused``).
    """
    try:
        frame = _dumps(objects[i])
    except Exception as err:
        kind, frame = "refused", _error_payload(err)
    else:
        del objects[i]
        kind = "released"
    with send_lock:
        _send(conn, kind, seq, i, frame)


def _worker_main(fd: int, threads: int) -> None:
    """Entry point of a :class:`ProcessPool` worker (a fresh interpreter)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent closes the pool
    _limit_threads(threads)
    conn = mp_connection.Connection(fd)
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    objects: dict[int, Any] = {}
    send_lock = threading.Lock()  # the reader thread answers releases on the same socket
    reader = threading.Thread(
        target=_inbox_reader,
        args=(conn, inbox, objects, send_lock),
        name="pool-inbox",
        daemon=True,
    )
    reader.start()
    shared: tuple[int, tuple] = (-1, ())  # the current call's number and shared arguments
    try:
        while True:
            kind, seq, meta, frames = inbox.get()
            if kind == "close":
                return
            if kind == "run":
                shared, reply = _worker_run(objects, shared, seq, meta, frames, threads)
            else:
                try:
                    if kind == "load":
                        objects.update(pickle.loads(frames[0]))
                        _limit_threads(threads)  # unpickling may have loaded new libraries
                        reply = ("ok", None)
                    elif kind == "adopt":  # a stolen object, without a call to run
                        objects[meta] = pickle.loads(frames[0])
                        _limit_threads(threads)
                        reply = ("ok", meta)
                    elif kind == "get":
                        reply = ("objects", None, _dumps([objects[i] for i in meta]))
                    else:
                        raise ValueError(f"unknown pool command {kind!r}")
                except Exception as err:
                    reply = ("error", None, _error_payload(err))
            with send_lock:
                _send(conn, reply[0], seq, *reply[1:])
    except OSError:  # the parent closed its end
        return


def _worker_run(
    objects: dict[int, Any],
    shared: tuple[int, tuple],
    seq: int,
    meta: tuple[str, int, bool, bool],
    frames: list[bytes],
    threads: int,
) -> tuple[tuple[int, tuple], tuple[Any, ...]]:
    """Run one call: ``getattr(objects[i], method)(*shared, *args)``.

    ``frames`` holds the call's own arguments, then the ``call``'s shared arguments if
    this is the first of its calls sent to this worker, then the object itself if it
    was just stolen from another worker. Returns the (new) shared arguments and the
    reply: ``("done", i, result)`` or ``("raised", i, error)``.
    """
    method, i, with_shared, with_object = meta
    try:
        rest = iter(frames[1:])
        if with_shared:
            shared = (seq, pickle.loads(next(rest)))
        if with_object:
            objects[i] = pickle.loads(next(rest))
            _limit_threads(threads)
        if shared[0] != seq:  # pragma: no cover - the parent always sends them first
            raise RuntimeError(f"call {seq} came without its shared arguments")
        args = pickle.loads(frames[0])
        return shared, ("done", i, _dumps(getattr(objects[i], method)(*shared[1], *args)))
    except Exception as err:
        return shared, ("raised", i, _error_payload(err))


def _shutdown(
    procs: list[subprocess.Popen],
    conns: list[mp_connection.Connection],
    sentinels: list[int | None],
    grace: float,
) -> None:
    """Stop the workers: ask, wait up to ``grace`` s, then terminate, then kill; reap."""
    for conn in conns:
        try:
            _send(conn, "close", -1, None)
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for conn in conns:
        conn.close()
    for fd in sentinels:
        if fd is not None:
            os.close(fd)
    procs.clear()
    conns.clear()
    sentinels.clear()


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when process ``pid`` exits (Linux), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # pragma: no cover - not Linux >= 5.3
        return None


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

    ``n_workers`` worker processes are started once (per pool, i.e. once per
    ``host()``); object ``i`` is placed in worker ``i % n_workers`` and lives there
    until a steal moves it (below). The objects are sent with cloudpickle (so classes
    defined in functions or ``__main__`` work), each worker's objects in *one* pickle,
    so an array they share (the public pool) is sent once per worker. Afterwards only a
    ``call``'s arguments go down (``shared`` pickled once and sent once per worker) and
    its results come up.

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
    :class:`~cotrain.runtime.Straggler` (``index``: position among the sorted keys)
    for the rest. A call that had not started by then is not run (an object already
    on its way to a thief arrives there, without running). A call already running
    finishes in its worker, which keeps whatever state that call gave the object,
    and its late result is recognised (calls are numbered) and dropped; until then
    that worker takes no new call, but idle workers may steal its objects' calls.

    Workers are fresh interpreters (spawned with ``subprocess`` and ``exec``, never
    forked, so torch and OpenMP threads in this process are safe), started with this
    process's ``sys.path`` but without re-running ``__main__`` and without importing
    the ``cotrain`` package until an object needs it. Each worker's BLAS and
    OpenMP threads are capped at ``threads_per_worker`` as loky does (the
    ``*_NUM_THREADS`` variables, unless already set, and threadpoolctl), so the workers
    do not oversubscribe the cores. A worker that dies (segfault, killed), also while
    an object is being moved, makes the pool raise :class:`WorkerDiedError` naming the
    objects it held, and close. Workers are stopped by :meth:`close`, on leaving the
    ``with`` block (exception or not), and when the pool is garbage-collected. POSIX
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

    Attributes
    ----------
    n_workers : int
        Number of worker processes.
    pids : list of int
        Their process ids.
    placement : list of int
        The worker each object lives in.

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
    """

    def __init__(
        self,
        objects: Sequence[Any],
        n_workers: int | None = None,
        timeout: float | None = None,
        threads_per_worker: int | None = None,
        shutdown_timeout: float = 5.0,
        steal_after: float | None = 0.1,
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
        self._seq = itertools.count()
        self._broken: str | None = None
        self._closed = False
        self._home = [i % self.n_workers for i in range(self._n)]
        # per worker, the call it is running: (call number, object id, when it was sent)
        self._busy: list[tuple[int, int, float] | None] = [None] * self.n_workers
        self._pinned: set[int] = set()  # objects that could not be pickled: never stolen
        self._procs: list[subprocess.Popen] = []
        self._conns: list[mp_connection.Connection] = []
        self._sentinels: list[int | None] = []
        self._finalizer = weakref.finalize(
            self, _shutdown, self._procs, self._conns, self._sentinels, shutdown_timeout
        )
        try:
            for _ in range(self.n_workers):
                self._start_worker()
            self._load(dict(enumerate(objects)))
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ plumbing
    def _start_worker(self) -> None:
        parent_end, child_end = socket.socketpair()
        path = [p for p in sys.path if isinstance(p, str)]
        # this file, run on its own (not `import cotrain.pools`: see _WORKER_MODULE)
        code = (
            "import importlib.util, sys\n"
            f"sys.path[:] = {path!r}\n"
            f"spec = importlib.util.spec_from_file_location({_WORKER_MODULE!r}, {__file__!r})\n"
            "module = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            f"module._worker_main({child_end.fileno()}, {self.threads_per_worker})\n"
        )
        env = dict(os.environ)
        for var in _THREAD_VARS:
            env.setdefault(var, str(self.threads_per_worker))
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", code],
                pass_fds=(child_end.fileno(),),
                env=env,
                stdin=subprocess.DEVNULL,
            )
        finally:
            child_end.close()  # the worker holds it now: its death reads as EOF here
        self._procs.append(proc)
        self._conns.append(mp_connection.Connection(parent_end.detach()))
        self._sentinels.append(_pidfd(proc.pid))

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers."""
        return [proc.pid for proc in self._procs]

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
        if self._broken is not None:
            raise WorkerDiedError(self._broken)
        if self._closed:
            raise RuntimeError("this ProcessPool is closed")

    def _died(self, w: int) -> None:
        """Worker ``w`` is gone: close the pool and raise, naming what it held."""
        proc = self._procs[w]
        try:
            code: int | None = proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            how = "its connection broke"
        elif code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exit code {code}"
        self._broken = (
            f"ProcessPool worker {w} (pid {proc.pid}) died ({how}) while holding objects "
            f"{self.held_by(w)}; their state is lost and the pool is closed (start a new "
            "pool, e.g. from a checkpoint)"
        )
        self.close()
        raise WorkerDiedError(self._broken)

    def _post(self, w: int, kind: str, seq: int, meta: Any, *frames: bytes) -> None:
        try:
            _send(self._conns[w], kind, seq, meta, *frames)
        except OSError:
            self._died(w)

    def _recv(self, w: int) -> tuple[str, int, Any, list[bytes]]:
        """The next message from worker ``w``; a call's result frees the worker."""
        try:
            message = _receive_message(self._conns[w])
        except (EOFError, OSError):
            self._died(w)
            raise  # unreachable: _died raises
        if message[0] in ("done", "raised"):
            self._busy[w] = None
        return message

    def _wait(self, workers: Sequence[int], deadline: float | None) -> list[int]:
        """Workers among ``workers`` with a message to read; ``[]`` at the deadline.

        Raises :class:`WorkerDiedError` if one of them died (never hangs on a dead one).
        """
        watched: dict[Any, int] = {}
        for w in workers:
            watched[self._conns[w]] = w
            if self._sentinels[w] is not None:
                watched[self._sentinels[w]] = w
        polling = any(self._sentinels[w] is None for w in workers)
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.perf_counter())
            wait_s = remaining
            if polling:  # no exit descriptor: look at the processes every half second
                wait_s = 0.5 if remaining is None else min(0.5, remaining)
            ready = mp_connection.wait(list(watched), timeout=wait_s)
            readable = sorted(
                {watched[r] for r in ready if isinstance(r, mp_connection.Connection)}
            )
            if readable:
                return readable
            dead = [watched[r] for r in ready]
            if polling:
                dead += [w for w in workers if self._procs[w].poll() is not None]
            if dead:
                self._died(dead[0])
            if remaining is not None and wait_s is not None and wait_s >= remaining:
                return []

    def _remote_error(self, w: int, i: int | None, method: str, frame: bytes) -> BaseException:
        try:
            err, tb = pickle.loads(frame)
        except Exception as load_err:  # e.g. an exception class that cannot be rebuilt
            err, tb = RuntimeError(f"(exception could not be unpickled: {load_err})"), ""
        err.__cause__ = _RemoteTraceback(f'\n"""\n{tb}"""')
        where = f"object {i}'s {method}()" if i is not None else method
        err.add_note(f"(raised in ProcessPool worker {w}, pid {self._procs[w].pid}, by {where})")
        return err

    def _request(self, kind: str, messages: Mapping[int, tuple[Any, list[bytes]]]) -> dict:
        """Send one command to some workers and wait for each one's reply frames.

        A worker still running a straggler answers once that call is done (its late
        result is dropped).
        """
        seq = next(self._seq)
        for w, (meta, frames) in messages.items():
            self._post(w, kind, seq, meta, *frames)
        pending, replies = set(messages), {}
        while pending:
            for w in self._wait(sorted(pending), None):
                reply, got_seq, _, frames = self._recv(w)
                if got_seq != seq:
                    continue  # a straggler's late result: dropped
                if reply == "error":
                    raise self._remote_error(w, None, kind, frames[0])
                replies[w] = frames
                pending.discard(w)
        return replies

    def _load(self, objects: Mapping[int, Any]) -> None:
        groups: dict[int, dict[int, Any]] = {}
        for i, obj in objects.items():
            groups.setdefault(self._home[i], {})[i] = obj
        # one pickle per worker: what its objects share is sent (and rebuilt) once
        self._request("load", {w: (None, [_dumps(group)]) for w, group in groups.items()})

    # ------------------------------------------------------------- scheduling
    def _run(
        self, state: _CallState, w: int, i: int, args: tuple, obj: bytes | None = None
    ) -> None:
        """Send object ``i``'s call to worker ``w`` (with the object itself if stolen)."""
        frames = [_dumps(args)]
        with_shared = w not in state.primed
        if with_shared:
            frames.append(state.shared)
        if obj is not None:
            frames.append(obj)
        self._post(w, "run", state.seq, (state.method, i, with_shared, obj is not None), *frames)
        state.primed.add(w)
        self._busy[w] = (state.seq, i, time.perf_counter())

    def _dispatch(self, state: _CallState) -> None:
        """Give every idle worker the next call of its own objects."""
        thieves = state.thieves()
        for w in range(self.n_workers):
            if self._busy[w] is None and w not in thieves and state.todo[w]:
                i, args = state.todo[w].pop(0)
                self._run(state, w, i, args)

    def _stealable(self, state: _CallState, w: int) -> list[int]:
        """Positions in ``todo[w]`` of calls whose object may move (not running, not pinned)."""
        busy = self._busy[w]
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
            if self._busy[w] is None and w not in thieves and not state.todo[w]
        ]
        wake: float | None = None
        for thief in idle:
            now = time.perf_counter()
            best: tuple[int, list[int]] | None = None
            for victim in range(self.n_workers):
                stealable = self._stealable(state, victim) if victim != thief else []
                if not stealable:
                    continue
                busy = self._busy[victim]
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
            self._post(victim, "release", state.seq, i)
        return wake

    def _handle(self, state: _CallState, w: int, message: tuple) -> None:
        """Act on a message from worker ``w`` during a call."""
        kind, seq, i, frames = message
        if seq != state.seq:
            return  # a late result of an earlier call: dropped (the worker is free)
        if kind == "done":
            state.results[i] = pickle.loads(frames[0])
        elif kind == "raised":
            raise self._remote_error(w, i, state.method, frames[0])
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
            for w in self._wait(victims, None):
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
        keys, shared = _check_call(method, args, shared, self._n)
        timeout = _timeout(timeout, self.timeout)
        start = time.perf_counter()
        deadline = None if timeout is None else start + timeout
        seq = next(self._seq)
        todo: dict[int, list[tuple[int, tuple]]] = {w: [] for w in range(self.n_workers)}
        for i in keys:
            todo[self._home[i]].append((i, tuple(args[i])))
        state = _CallState(seq, method, _dumps(shared), todo)
        workers = list(range(self.n_workers))
        try:
            while True:
                self._dispatch(state)
                wake = self._steal(state)
                if not (
                    any(todo.values())
                    or state.moving
                    or any(busy is not None and busy[0] == seq for busy in self._busy)
                ):
                    break  # everything came back
                until = min((t for t in (deadline, wake) if t is not None), default=None)
                ready = self._wait(workers, until)
                if deadline is not None and time.perf_counter() >= deadline:
                    break  # what is read from now on is late; nothing more starts
                for w in ready:
                    self._handle(state, w, self._recv(w))
            elapsed = time.perf_counter() - start
            self._settle(state)
        except BaseException:
            if self._broken is None and not self._closed:
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
        ids = (
            list(range(self._n)) if ids is None else [_check_index(i, self._n, "get") for i in ids]
        )
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
        self._load({_check_index(i, self._n, "put"): obj for i, obj in objects.items()})

    def close(self) -> None:
        """Stop the workers (a running call gets ``shutdown_timeout`` s) and reap them."""
        self._closed = True
        self._finalizer()


# ---------------------------------------------------------------------- RayActorPool
class _Holder:
    """Body of a Ray actor holding some of a pool's objects."""

    def __init__(self) -> None:
        self.objects: dict[int, Any] = {}

    def load(self, objects: dict[int, Any]) -> None:
        self.objects.update(objects)

    def call(self, method: str, i: int, shared: tuple, args: tuple) -> Any:
        return getattr(self.objects[i], method)(*shared, *args)

    def get(self, ids: list[int]) -> list[Any]:
        return [self.objects[i] for i in ids]

    def pid(self) -> int:
        return os.getpid()


class RayActorPool:
    """Objects resident in Ray actors.

    Object ``i`` lives in actor ``i % n_actors``. Each worker's objects are sent in one
    argument (one serialisation), ``shared`` is put in the object store once per
    :meth:`call`, and each call is one actor task, so results stream back as they
    finish. An actor runs its calls in submission (key) order. With a ``timeout`` the
    unfinished calls are cancelled (``ray.cancel``: a call that has not started is not
    run; a running one finishes and keeps its changes to the object) and returned as
    :class:`~cotrain.runtime.Straggler`. A method's exception propagates as itself (the
    Ray error as its ``__cause__``); a dead actor raises :class:`WorkerDiedError`.

    Needs a running Ray: use it through :meth:`cotrain.runtime.RayRuntime.host`.

    Parameters
    ----------
    objects : sequence
        The objects; object ``i`` is ``objects[i]``.
    n_actors : int or None, default=None
        Number of actors (``None``: the cluster's CPUs); at most one per object.
    timeout : float or None, default=None
        Default timeout in seconds for :meth:`call`.

    Examples
    --------
    >>> from cotrain.runtime import RayRuntime
    >>> with RayRuntime(num_cpus=2) as rt, rt.host([[1], [2, 3]]) as pool:  # doctest: +SKIP
    ...     pool.call("append", {0: (10,), 1: (20,)})
    ...     pool.get()
    {0: None, 1: None}
    [[1, 10], [2, 3, 20]]
    """

    def __init__(
        self, objects: Sequence[Any], n_actors: int | None = None, timeout: float | None = None
    ) -> None:
        try:
            import ray
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError('RayActorPool needs Ray: pip install "cotrain[ray]"') from err
        if not ray.is_initialized():
            raise RuntimeError(
                "RayActorPool needs a running Ray: use RayRuntime().host() inside its `with`"
            )
        objects = list(objects)
        if n_actors is None:
            n_actors = max(1, int(ray.cluster_resources().get("CPU", 1)))
        if not isinstance(n_actors, int) or n_actors < 1:
            raise ValueError(f"n_actors must be an int >= 1 or None, got {n_actors!r}")
        self._ray = ray
        self._n = len(objects)
        self.n_actors = min(n_actors, max(1, self._n))
        self.timeout = timeout
        self._closed = False
        self._broken: str | None = None
        holder = ray.remote(_Holder)
        self._actors = [holder.remote() for _ in range(self.n_actors)]
        try:
            self._load(dict(enumerate(objects)))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RayActorPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return f"RayActorPool(n_objects={self._n}, n_actors={self.n_actors})"

    def _check_open(self) -> None:
        if self._broken is not None:
            raise WorkerDiedError(self._broken)
        if self._closed:
            raise RuntimeError("this RayActorPool is closed")

    def _get(self, ref: Any, actor: int, what: str) -> Any:
        """``ray.get`` with the pool's errors: the method's own, or the actor's death."""
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return self._ray.get(ref)
        except RayActorError as err:
            self._broken = (
                f"RayActorPool actor {actor} died while holding objects "
                f"{list(range(actor, self._n, self.n_actors))}; their state is lost and the "
                f"pool is closed ({type(err).__name__})"
            )
            self.close()
            raise WorkerDiedError(self._broken) from err
        except RayTaskError as err:
            cause = getattr(err, "cause", None)
            if not isinstance(cause, BaseException):
                raise
            cause.add_note(f"(raised in RayActorPool actor {actor} by {what})")
            raise cause from err

    def _load(self, objects: Mapping[int, Any]) -> None:
        groups: dict[int, dict[int, Any]] = {}
        for i, obj in objects.items():
            groups.setdefault(i % self.n_actors, {})[i] = obj
        refs = {a: self._actors[a].load.remote(group) for a, group in groups.items()}
        for a, ref in refs.items():
            self._get(ref, a, "load")

    def call(
        self,
        method: str,
        args: Mapping[int, tuple],
        shared: tuple = (),
        timeout: float | None = None,
    ) -> dict[int, Any]:
        """Call ``getattr(objects[i], method)(*shared, *args[i])`` in object ``i``'s actor.

        Parameters
        ----------
        method : str
            Name of the method to call.
        args : mapping of int to tuple
            The objects to call and each one's own arguments.
        shared : tuple, default=()
            Arguments passed first to every call (put in the object store once).
        timeout : float or None, default=None
            Seconds for the whole call (``None``: the pool's ``timeout``).

        Returns
        -------
        dict
            ``{i: result}`` in key order; :class:`Straggler` for calls not finished.
        """
        self._check_open()
        ray = self._ray
        keys, shared = _check_call(method, args, shared, self._n)
        timeout = _timeout(timeout, self.timeout)
        start = time.perf_counter()
        if not keys:
            return {}
        shared_ref = ray.put(shared)
        refs = {
            i: self._actors[i % self.n_actors].call.remote(method, i, shared_ref, tuple(args[i]))
            for i in keys
        }
        done: set[Any] | None = None
        if timeout is not None:
            remaining = max(0.0, timeout - (time.perf_counter() - start))
            ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=remaining)
            done = set(ready)
        elapsed = time.perf_counter() - start
        out: dict[int, Any] = {}
        try:
            for pos, i in enumerate(keys):
                if done is None or refs[i] in done:
                    out[i] = self._get(refs[i], i % self.n_actors, f"object {i}'s {method}()")
                else:
                    out[i] = Straggler(pos, elapsed)
        except BaseException:
            self._cancel(ref for i, ref in refs.items() if i not in out)
            raise
        self._cancel(refs[i] for i in keys if isinstance(out[i], Straggler))
        return out

    def _cancel(self, refs: Any) -> None:
        for ref in refs:
            try:
                self._ray.cancel(ref, force=False)
            except Exception:  # best effort: a late result is never read anyway
                pass

    def get(self, ids: Sequence[int] | None = None) -> list[Any]:
        """Copies of the current objects, pulled back from the actors.

        Parameters
        ----------
        ids : sequence of int or None, default=None
            Which objects, in this order (``None``: all).

        Returns
        -------
        list
        """
        self._check_open()
        ids = (
            list(range(self._n)) if ids is None else [_check_index(i, self._n, "get") for i in ids]
        )
        groups: dict[int, list[int]] = {}
        for i in dict.fromkeys(ids):
            groups.setdefault(i % self.n_actors, []).append(i)
        refs = {a: self._actors[a].get.remote(group) for a, group in groups.items()}
        found: dict[int, Any] = {}
        for a, group in groups.items():
            found.update(zip(group, self._get(refs[a], a, "get"), strict=True))
        return [found[i] for i in ids]

    def put(self, objects: Mapping[int, Any]) -> None:
        """Replace object ``i`` by ``objects[i]`` in its actor.

        Parameters
        ----------
        objects : mapping of int to object
        """
        self._check_open()
        self._load({_check_index(i, self._n, "put"): obj for i, obj in objects.items()})

    def close(self) -> None:
        """Kill the actors (their objects are dropped)."""
        self._closed = True
        actors, self._actors = self._actors, []
        if actors and self._ray.is_initialized():
            for actor in actors:
                try:
                    self._ray.kill(actor)
                except Exception:  # already dead
                    pass


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
