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
- :class:`ProcessPool`: long-lived worker processes, object ``i`` in worker
  ``i % n_workers`` (joblib runtime).
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
    conn: mp_connection.Connection, inbox: queue.SimpleQueue, cancelled: list[int]
) -> None:
    """Worker thread: read every message as it arrives, so the parent never blocks on a
    send; a ``cancel`` is applied at once, everything else queued for the main thread."""
    try:
        while True:
            message = _receive_message(conn)
            if message[0] == "cancel":
                cancelled[0] = max(cancelled[0], message[1])
                continue
            inbox.put(message)
            if message[0] == "close":
                return
    except (EOFError, OSError):  # the parent is gone: finish the current call, then exit
        inbox.put(("close", -1, None, []))


def _worker_main(fd: int, threads: int) -> None:
    """Entry point of a :class:`ProcessPool` worker (a fresh interpreter)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent closes the pool
    _limit_threads(threads)
    conn = mp_connection.Connection(fd)
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    cancelled = [-1]  # highest cancelled call number
    reader = threading.Thread(
        target=_inbox_reader, args=(conn, inbox, cancelled), name="pool-inbox", daemon=True
    )
    reader.start()
    objects: dict[int, Any] = {}
    try:
        while True:
            kind, seq, meta, frames = inbox.get()
            if kind == "close":
                return
            if kind == "call":
                _worker_calls(conn, objects, seq, meta, frames, cancelled)
                continue
            try:
                if kind == "load":
                    objects.update(pickle.loads(frames[0]))
                    _limit_threads(threads)  # unpickling may have loaded new libraries
                    reply: tuple[Any, ...] = ("ok", None)
                elif kind == "get":
                    reply = ("objects", None, _dumps([objects[i] for i in meta]))
                else:
                    raise ValueError(f"unknown pool command {kind!r}")
            except Exception as err:
                reply = ("error", None, _error_payload(err))
            _send(conn, reply[0], seq, *reply[1:])
    except OSError:  # the parent closed its end
        return


def _worker_calls(
    conn: mp_connection.Connection,
    objects: dict[int, Any],
    seq: int,
    method: str,
    frames: list[bytes],
    cancelled: list[int],
) -> None:
    """Run one ``call``'s items in order, streaming each result back when it is done."""
    try:
        items = pickle.loads(frames[0])
        shared = pickle.loads(frames[1])
    except Exception as err:
        _send(conn, "error", seq, None, _error_payload(err))
        return
    for i, args in items:
        if seq <= cancelled[0]:  # the parent gave up on this call: do not start the rest
            return
        try:
            reply: tuple[str, bytes] = (
                "result",
                _dumps(getattr(objects[i], method)(*shared, *args)),
            )
        except Exception as err:
            reply = ("error", _error_payload(err))
        _send(conn, reply[0], seq, i, reply[1])
        if reply[0] == "error":
            return


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


class ProcessPool:
    """Objects resident in long-lived worker processes.

    ``n_workers`` worker processes are started once (per pool, i.e. once per
    ``host()``); object ``i`` lives in worker ``i % n_workers`` (a fixed,
    deterministic assignment). The objects are sent with cloudpickle (so classes
    defined in functions or ``__main__`` work), each worker's objects in *one* pickle,
    so an array they share (the public pool) is sent once per worker. Afterwards only a
    ``call``'s arguments go down (``shared`` pickled once and sent once per worker) and
    its results come up.

    A worker runs its calls one after the other, in key order, and sends each result
    back as soon as it is done. With a ``timeout`` (seconds from the start of the
    ``call``) the pool returns at the deadline with the results that arrived and a
    :class:`~cotrain.runtime.Straggler` (``index``: position among the sorted keys) for
    the rest. The workers are told to skip the calls they have not started; a call
    already running finishes in its worker, which keeps whatever state that call gave
    the object, and its late result is recognised (calls are numbered) and dropped.

    Workers are fresh interpreters (spawned with ``subprocess`` and ``exec``, never
    forked, so torch and OpenMP threads in this process are safe), started with this
    process's ``sys.path`` but without re-running ``__main__`` and without importing
    the ``cotrain`` package until an object needs it. Each worker's BLAS and
    OpenMP threads are capped at ``threads_per_worker`` as loky does (the
    ``*_NUM_THREADS`` variables, unless already set, and threadpoolctl), so the workers
    do not oversubscribe the cores. A worker that dies (segfault, killed) makes the
    pool raise :class:`WorkerDiedError` naming the objects it held, and close. Workers
    are stopped by :meth:`close`, on leaving the ``with`` block (exception or not), and
    when the pool is garbage-collected. POSIX only.

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

    Attributes
    ----------
    n_workers : int
        Number of worker processes.
    pids : list of int
        Their process ids (worker ``w`` holds objects ``w, w + n_workers, ...``).

    Examples
    --------
    >>> with ProcessPool([[1], [2, 3]], n_workers=2) as pool:
    ...     pool.call("append", {0: (10,), 1: (20,)})  # runs in the workers
    ...     pool.call("count", {0: (), 1: ()}, shared=(20,))
    ...     pool.get()  # copies of the objects, as the workers hold them
    {0: None, 1: None}
    {0: 0, 1: 1}
    [[1, 10], [2, 3, 20]]
    """

    def __init__(
        self,
        objects: Sequence[Any],
        n_workers: int | None = None,
        timeout: float | None = None,
        threads_per_worker: int | None = None,
        shutdown_timeout: float = 5.0,
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
        self._n = len(objects)
        self.n_workers = min(n_workers, max(1, self._n))
        self.timeout = timeout
        self.threads_per_worker = threads_per_worker or max(1, cores // self.n_workers)
        self._seq = itertools.count()
        self._broken: str | None = None
        self._closed = False
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

    def held_by(self, worker: int) -> list[int]:
        """Ids of the objects that live in worker ``worker``."""
        return list(range(worker, self._n, self.n_workers))

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
        try:
            return _receive_message(self._conns[w])
        except (EOFError, OSError):
            self._died(w)
            raise  # unreachable: _died raises

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
        """Send one command to some workers and wait for each one's reply frames."""
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
            groups.setdefault(i % self.n_workers, {})[i] = obj
        # one pickle per worker: what its objects share is sent (and rebuilt) once
        self._request("load", {w: (None, [_dumps(group)]) for w, group in groups.items()})

    # -------------------------------------------------------------------- the API
    def call(
        self,
        method: str,
        args: Mapping[int, tuple],
        shared: tuple = (),
        timeout: float | None = None,
    ) -> dict[int, Any]:
        """Call ``getattr(objects[i], method)(*shared, *args[i])`` in object ``i``'s worker.

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
            ``__cause__``); the workers skip the calls of this ``call`` they have not
            started.
        WorkerDiedError
            When a worker died; the pool is closed.
        """
        self._check_open()
        keys, shared = _check_call(method, args, shared, self._n)
        timeout = _timeout(timeout, self.timeout)
        start = time.perf_counter()
        deadline = None if timeout is None else start + timeout
        seq = next(self._seq)
        groups: dict[int, list[tuple[int, tuple]]] = {}
        for i in keys:
            groups.setdefault(i % self.n_workers, []).append((i, tuple(args[i])))
        shared_frame = _dumps(shared)
        for w, items in groups.items():
            self._post(w, "call", seq, method, _dumps(items), shared_frame)
        pending = {w: {i for i, _ in items} for w, items in groups.items()}
        results: dict[int, Any] = {}
        while pending:
            ready = self._wait(sorted(pending), deadline)
            if not ready:
                break  # the deadline
            for w in ready:
                kind, got_seq, i, frames = self._recv(w)
                if got_seq != seq:
                    continue  # a late result of an earlier call: dropped
                if kind == "error":
                    for other in pending:
                        if other != w:
                            self._post(other, "cancel", seq, None)
                    raise self._remote_error(w, i, method, frames[0])
                results[i] = pickle.loads(frames[0])
                pending[w].discard(i)
                if not pending[w]:
                    del pending[w]
        elapsed = time.perf_counter() - start
        for w in pending:  # skip what has not started; what runs finishes, unread
            self._post(w, "cancel", seq, None)
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
            groups.setdefault(i % self.n_workers, []).append(i)
        replies = self._request("get", {w: (group, []) for w, group in groups.items()})
        found: dict[int, Any] = {}
        for w, group in groups.items():
            found.update(zip(group, pickle.loads(replies[w][0]), strict=True))
        return [found[i] for i in ids]

    def put(self, objects: Mapping[int, Any]) -> None:
        """Replace object ``i`` by ``objects[i]`` in its worker (one pickle per worker).

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
