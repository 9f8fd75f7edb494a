"""Worker processes of :class:`cotrain.runtime.process_pool.ProcessPool`: start, stop, and keep
them warm.

A :class:`WorkerProcess` is one fresh interpreter running :mod:`cotrain.runtime.pool_worker`,
joined to this process by a socket pair. :func:`stop_workers` stops and reaps workers.

:data:`idle_workers` (an :class:`IdleWorkers`) keeps the workers of closed pools that
asked for reuse (``ProcessPool(..., reuse=True)``, as
:meth:`cotrain.runtime.JoblibRuntime.host` does) so that the next pool starts without
paying for new interpreters and their imports, as joblib's loky executor reuses its
workers. A worker is kept only if it is not running a call; it is told to drop
every object of its pool as it is kept (``reset`` in :mod:`cotrain.runtime.pool_worker`),
and the next pool waits for it to confirm that before using it. Idle workers are
stopped after :attr:`IdleWorkers.timeout` seconds (300 by default, as loky), when a
pool asks for workers of another kind (another thread limit, ``sys.path`` or
interpreter), and at interpreter exit; one that dies is reaped at once (no zombie).
A forked child process forgets the idle workers of its parent.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import threading
import time
from multiprocessing import connection as mp_connection
from typing import Any

from cotrain.runtime import pool_worker
from cotrain.runtime.pool_worker import WORKER_MODULE, send_message

__all__ = ["THREAD_VARS", "IdleWorkers", "WorkerProcess", "idle_workers", "stop_workers"]

#: The variables loky sets in its workers so that BLAS/OpenMP do not oversubscribe cores.
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when process ``pid`` exits (Linux), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # pragma: no cover - not Linux >= 5.3
        return None


class WorkerProcess:
    """One started worker interpreter and its end of the connection.

    The worker runs :func:`cotrain.runtime.pool_worker.worker_main` from that file, loaded on
    its own (so the ``cotrain`` package is not imported until an object needs it),
    with this process's ``sys.path`` and its BLAS/OpenMP threads capped at
    ``threads`` (the :data:`THREAD_VARS`, unless already set, and threadpoolctl). It is
    spawned with ``subprocess`` and ``exec``, never forked.

    Parameters
    ----------
    threads : int
        BLAS/OpenMP threads allowed in the worker.

    Attributes
    ----------
    proc : subprocess.Popen
    conn : multiprocessing.connection.Connection
        This process's end of the socket pair; EOF when the worker is gone.
    sentinel : int or None
        A pid file descriptor that becomes readable when the worker exits (Linux).
    key : tuple
        What a pool needs to be able to use it: see :meth:`key_for`.

    Examples
    --------
    >>> worker = WorkerProcess(threads=1)
    >>> worker.running()
    True
    >>> stop_workers([worker], grace=5.0)
    >>> worker.proc.returncode
    0
    """

    def __init__(self, threads: int) -> None:
        parent_end, child_end = socket.socketpair()
        # cotrain/runtime/pool_worker.py run on its own: see cotrain.runtime.pool_worker
        code = (
            "import importlib.util, sys\n"
            f"sys.path[:] = {_path()!r}\n"
            f"spec = importlib.util.spec_from_file_location({WORKER_MODULE!r}, "
            f"{pool_worker.__file__!r})\n"
            "module = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            f"module.worker_main({child_end.fileno()}, {threads})\n"
        )
        env = dict(os.environ)
        for var in THREAD_VARS:
            env.setdefault(var, str(threads))
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code],
                pass_fds=(child_end.fileno(),),
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            parent_end.close()
            raise
        finally:
            child_end.close()  # the worker holds it now: its death reads as EOF here
        self.threads = threads
        self.key = self.key_for(threads)
        self.conn = mp_connection.Connection(parent_end.detach())
        self.sentinel = _pidfd(self.proc.pid)

    @staticmethod
    def key_for(threads: int) -> tuple[Any, ...]:
        """What a worker started now with ``threads`` depends on: thread limit,
        interpreter, ``sys.path`` and the thread variables of the environment.

        Examples
        --------
        >>> WorkerProcess.key_for(1) == WorkerProcess.key_for(1) != WorkerProcess.key_for(2)
        True
        """
        environ = tuple(os.environ.get(var) for var in THREAD_VARS)
        return (threads, sys.executable, tuple(_path()), environ)

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self.proc.pid

    def running(self) -> bool:
        """Whether the process has not exited (an exited one is reaped here)."""
        return self.proc.poll() is None

    def __repr__(self) -> str:
        return f"WorkerProcess(pid={self.pid}, threads={self.threads})"


def _path() -> list[str]:
    return [p for p in sys.path if isinstance(p, str)]


def stop_workers(workers: list[WorkerProcess], grace: float) -> None:
    """Stop workers: ask, wait up to ``grace`` s, terminate, then kill; reap; close fds.

    ``workers`` is emptied (a pool's finalizer holds the same list).

    Parameters
    ----------
    workers : list of WorkerProcess
    grace : float
        Seconds a worker may take to finish a running call and exit.

    Examples
    --------
    >>> stop_workers([], grace=1.0)
    """
    for worker in workers:
        try:
            send_message(worker.conn, "close", -1, None)
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + grace
    for worker in workers:
        try:
            worker.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.proc.terminate()
    for worker in workers:
        try:
            worker.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            worker.proc.kill()
            worker.proc.wait()
    for worker in workers:
        worker.conn.close()
        if worker.sentinel is not None:
            try:
                os.close(worker.sentinel)
            except OSError:  # pragma: no cover - closed already
                pass
            worker.sentinel = None
    workers.clear()


class IdleWorkers:
    """Worker processes kept between pools, each emptied of its pool's objects.

    :meth:`give` takes the workers of a closing pool; :meth:`take` hands matching
    ones to a new pool. A background thread (running only while workers are idle)
    stops a worker once it has been idle for :attr:`timeout` seconds and reaps a
    worker that died. Use the module's :data:`idle_workers`.

    Parameters
    ----------
    timeout : float, default=300.0
        Seconds an idle worker is kept (as loky's reusable executor).
    grace : float, default=5.0
        Seconds a stopped idle worker gets to exit before it is terminated.

    Examples
    --------
    >>> cache = IdleWorkers(timeout=60.0)
    >>> cache.give([WorkerProcess(threads=1)])
    >>> len(cache)
    1
    >>> [worker] = cache.take(WorkerProcess.key_for(1), 2)  # at most what it holds
    >>> len(cache), worker.running()
    (0, True)
    >>> cache.give([worker]); cache.clear(); len(cache)
    0
    """

    def __init__(self, timeout: float = 300.0, grace: float = 5.0) -> None:
        self._forget()
        self.timeout = timeout
        self.grace = grace

    @property
    def timeout(self) -> float:
        """Seconds an idle worker is kept; a change applies to the idle workers too."""
        return self._timeout

    @timeout.setter
    def timeout(self, seconds: float) -> None:
        self._timeout = float(seconds)
        self._wake()

    def _forget(self) -> None:
        """Start empty (also in a forked child, where the workers are the parent's)."""
        old = getattr(self, "_idle", [])
        fds = [w.sentinel for w, _ in old if w.sentinel is not None]
        for worker, _ in old:  # the child's copies of the parent's descriptors
            worker.conn.close()
        for fd in [*fds, *getattr(self, "_wake_fds", ())]:
            try:
                os.close(fd)
            except OSError:  # pragma: no cover - closed already
                pass
        self._lock = threading.Lock()
        self._idle: list[tuple[WorkerProcess, float]] = []  # (worker, idle since)
        self._thread: threading.Thread | None = None
        self._wake_fds: tuple[int, ...] = ()
        self._shut = False

    def __len__(self) -> int:
        return len(self._idle)

    @property
    def pids(self) -> list[int]:
        """Process ids of the idle workers."""
        with self._lock:
            return [worker.pid for worker, _ in self._idle]

    def take(self, key: tuple[Any, ...], n: int) -> list[WorkerProcess]:
        """Up to ``n`` live idle workers with ``key`` (see :meth:`WorkerProcess.key_for`).

        Idle workers that died are reaped; those with another key are stopped (the
        program moved on to pools of another kind).

        Parameters
        ----------
        key : tuple
        n : int

        Returns
        -------
        list of WorkerProcess
            Removed from the idle workers; the caller owns them.
        """
        taken: list[WorkerProcess] = []
        drop: list[WorkerProcess] = []
        with self._lock:
            for worker, _ in self._idle:
                if worker.key != key or not worker.running():
                    drop.append(worker)
                elif len(taken) < n:
                    taken.append(worker)
            gone = {id(w) for w in taken + drop}
            self._idle = [(w, since) for w, since in self._idle if id(w) not in gone]
        stop_workers(drop, self.grace)
        self._wake()
        return taken

    def give(self, workers: list[WorkerProcess]) -> None:
        """Keep ``workers`` (idle, emptied of their objects) for a later :meth:`take`.

        After :meth:`shutdown` (interpreter exit) they are stopped instead.

        Parameters
        ----------
        workers : list of WorkerProcess
        """
        workers = list(workers)
        with self._lock:
            if not self._shut:
                now = time.monotonic()
                self._idle.extend((worker, now) for worker in workers)
                workers = []
                if self._thread is None:
                    self._wake_fds = os.pipe()
                    self._thread = threading.Thread(
                        target=self._watch, name="cotrain-idle-workers", daemon=True
                    )
                    self._thread.start()
        stop_workers(workers, self.grace)
        self._wake()

    def clear(self) -> None:
        """Stop every idle worker now."""
        with self._lock:
            workers = [worker for worker, _ in self._idle]
            self._idle = []
        stop_workers(workers, self.grace)
        self._wake()

    def shutdown(self) -> None:
        """Stop every idle worker, and stop (not keep) the ones given from now on."""
        with self._lock:
            self._shut = True
        self.clear()

    def _wake(self) -> None:
        """Make the watching thread look again (a worker came, went, or timed out)."""
        with self._lock:
            fds = self._wake_fds
            if fds:
                try:
                    os.write(fds[1], b"x")
                except OSError:  # pragma: no cover - the pipe is full: it will wake
                    pass

    def _watch(self) -> None:
        """The background thread: stop expired workers, reap dead ones; exit when none.

        A worker's death is seen on its exit descriptor (Linux), else by looking at
        the processes every second. (Not on its connection: a worker given back
        answers the ``reset`` it was sent while it waits here.)
        """
        while True:
            with self._lock:
                if not self._idle:
                    for fd in self._wake_fds:
                        os.close(fd)
                    self._wake_fds, self._thread = (), None
                    return
                now = time.monotonic()
                done = [
                    w for w, since in self._idle if now - since >= self.timeout or not w.running()
                ]
                self._idle = [(w, since) for w, since in self._idle if w not in done]
                exits = [w.sentinel for w, _ in self._idle if w.sentinel is not None]
                wait_s = min((since + self.timeout - now for _, since in self._idle), default=None)
                if len(exits) < len(self._idle):  # no exit descriptor for some
                    wait_s = 1.0 if wait_s is None else min(wait_s, 1.0)
                wake_r = self._wake_fds[0]
            if done:
                stop_workers(done, self.grace)
                continue
            try:
                ready = mp_connection.wait([*exits, wake_r], timeout=wait_s)
            except (OSError, ValueError):  # a descriptor closed meanwhile by take()
                continue
            if wake_r in ready:
                os.read(wake_r, 4096)


#: The idle workers of this process (see :class:`IdleWorkers`).
idle_workers = IdleWorkers()
atexit.register(idle_workers.shutdown)
if hasattr(os, "register_at_fork"):  # pragma: no branch - POSIX
    os.register_at_fork(after_in_child=idle_workers._forget)
