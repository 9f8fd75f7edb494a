"""The worker processes of one :class:`cotrain.runtime.process_pool.ProcessPool`, as message
endpoints.

A :class:`WorkerGroup` sends messages to its workers, waits for their replies without
ever hanging on a dead one (a dead worker raises :class:`cotrain.runtime.pool_base.WorkerDiedError`
naming the objects it held), turns a worker's exception back into itself, and knows
which call each worker is running. Closing it stops its workers, or, for a pool that
reuses workers, empties them and hands them to
:data:`cotrain.runtime.worker_processes.idle_workers`.
"""

from __future__ import annotations

import itertools
import pickle
import signal
import subprocess
import time
import weakref
from collections.abc import Mapping, Sequence
from multiprocessing import connection as mp_connection
from typing import Any, NoReturn

from cotrain.runtime.pool_base import WorkerDiedError
from cotrain.runtime.pool_worker import receive_message, send_message
from cotrain.runtime.worker_processes import WorkerProcess, idle_workers, stop_workers

__all__ = ["WorkerGroup"]

# request numbers, unique in this process: a reused worker's late reply to an earlier
# pool can never pass for a reply to the current one
_SEQ = itertools.count()


class _RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker (set as its ``__cause__``)."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return self.tb


class WorkerGroup:
    """``n`` worker processes of one pool, and what each is running.

    Parameters
    ----------
    n : int
        Number of workers.
    threads : int
        BLAS/OpenMP threads per worker.
    home : list of int
        The pool's placement (``home[i]``: the worker holding object ``i``), read to
        name a dead worker's objects; the pool updates it in place.
    reuse : bool, default=False
        Take idle workers of earlier pools first, and give the workers back, emptied,
        on :meth:`close` (see :mod:`cotrain.runtime.worker_processes`).
    grace : float, default=5.0
        Seconds a closing worker may take to finish a running call.

    Attributes
    ----------
    workers : list of WorkerProcess
    busy : list
        Per worker, the call it runs: ``(request number, object id, when sent)``, or
        ``None``. Set by the pool; cleared when that call's result is read.
    broken : str or None
        Why the group is unusable (a worker died), else ``None``.
    reused : int
        How many workers came from earlier pools.

    Examples
    --------
    >>> group = WorkerGroup(1, threads=1, home=[0])
    >>> replies = group.request("get", {0: ([], [])}, group.next_seq())  # objects []
    >>> pickle.loads(replies[0][0])
    []
    >>> group.close(); group.pids
    []
    """

    def __init__(
        self, n: int, threads: int, home: list[int], reuse: bool = False, grace: float = 5.0
    ) -> None:
        self.threads = threads
        self.home = home
        self.reuse = reuse
        self.grace = grace
        self.broken: str | None = None
        self.workers: list[WorkerProcess] = []
        self.busy: list[tuple[int, int, float] | None] = [None] * n
        self._finalizer = weakref.finalize(self, stop_workers, self.workers, grace)
        try:
            if reuse:
                taken = idle_workers.take(WorkerProcess.key_for(threads), n)
                self.workers.extend(taken)
                # one round trip: a worker that died since it was checked (it may have
                # been killed a moment ago) is found here, and replaced
                answered = self._confirm(taken)
                dead = [worker for worker in taken if worker not in answered]
                for worker in dead:
                    self.workers.remove(worker)
                stop_workers(dead, 0.0)
            self.reused = len(self.workers)
            while len(self.workers) < n:
                self.workers.append(WorkerProcess(threads))
        except BaseException:
            self._finalizer()
            raise

    @staticmethod
    def next_seq() -> int:
        """A new request number (unique in this process)."""
        return next(_SEQ)

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers (empty once closed)."""
        return [worker.pid for worker in self.workers]

    def held_by(self, w: int) -> list[int]:
        """Ids of the objects worker ``w`` holds."""
        return [i for i, home in enumerate(self.home) if home == w]

    def died(self, w: int) -> NoReturn:
        """Worker ``w`` is gone: stop the others and raise, naming what it held."""
        proc = self.workers[w].proc
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
        self.broken = (
            f"ProcessPool worker {w} (pid {proc.pid}) died ({how}) while holding objects "
            f"{self.held_by(w)}; their state is lost and the pool is closed (start a new "
            "pool, e.g. from a checkpoint)"
        )
        self._finalizer()
        raise WorkerDiedError(self.broken)

    def post(self, w: int, kind: str, seq: int, meta: Any, *frames: bytes) -> None:
        """Send a message to worker ``w``."""
        try:
            send_message(self.workers[w].conn, kind, seq, meta, *frames)
        except OSError:
            self.died(w)

    def recv(self, w: int) -> tuple[str, int, Any, list[bytes]]:
        """The next message from worker ``w``; a call's result frees the worker."""
        try:
            message = receive_message(self.workers[w].conn)
        except (EOFError, OSError):
            self.died(w)
        if message[0] in ("done", "raised"):
            self.busy[w] = None
        return message

    def wait(self, workers: Sequence[int], deadline: float | None) -> list[int]:
        """Workers among ``workers`` with a message to read; ``[]`` at the deadline
        (``time.perf_counter()`` seconds). Raises :class:`WorkerDiedError` if one of
        them died (never hangs on a dead one)."""
        watched: dict[Any, int] = {}
        for w in workers:
            watched[self.workers[w].conn] = w
            if self.workers[w].sentinel is not None:
                watched[self.workers[w].sentinel] = w
        polling = any(self.workers[w].sentinel is None for w in workers)
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
                dead += [w for w in workers if self.workers[w].proc.poll() is not None]
            if dead:
                self.died(dead[0])
            if remaining is not None and wait_s is not None and wait_s >= remaining:
                return []

    def remote_error(self, w: int, i: int | None, method: str, frame: bytes) -> BaseException:
        """The exception a worker sent (its traceback as ``__cause__``, a note saying where)."""
        try:
            err, tb = pickle.loads(frame)
        except Exception as load_err:  # e.g. an exception class that cannot be rebuilt
            err, tb = RuntimeError(f"(exception could not be unpickled: {load_err})"), ""
        err.__cause__ = _RemoteTraceback(f'\n"""\n{tb}"""')
        where = f"object {i}'s {method}()" if i is not None else method
        pid = self.workers[w].pid
        err.add_note(f"(raised in ProcessPool worker {w}, pid {pid}, by {where})")
        return err

    def request(
        self, kind: str, messages: Mapping[int, tuple[Any, list[bytes]]], seq: int
    ) -> dict[int, list[bytes]]:
        """Send one command to some workers and wait for each one's reply frames.

        A worker still running a straggler answers once that call is done (its late
        result is dropped). A worker's ``error`` reply is raised.
        """
        for w, (meta, frames) in messages.items():
            self.post(w, kind, seq, meta, *frames)
        pending, replies = set(messages), {}
        while pending:
            for w in self.wait(sorted(pending), None):
                reply, got_seq, _, frames = self.recv(w)
                if got_seq != seq:
                    continue  # a straggler's late result: dropped
                if reply == "error":
                    raise self.remote_error(w, None, kind, frames[0])
                replies[w] = frames
                pending.discard(w)
        return replies

    def close(self) -> None:
        """Stop the workers; with ``reuse``, empty and keep those not running a call.

        A worker that is not running a call is sent a ``reset`` (drop every object)
        and given to :data:`~cotrain.runtime.worker_processes.idle_workers` without waiting for
        its answer: the next pool to take it waits for that (:meth:`_confirm`). A
        worker still running a straggler is stopped, with ``grace`` seconds to finish.
        """
        try:
            if self.reuse and self.broken is None and self.workers:
                self._drain()
                kept, seq = [], self.next_seq()
                for w, worker in enumerate(self.workers):
                    if self.busy[w] is None:
                        try:
                            send_message(worker.conn, "reset", seq, None)
                        except (OSError, ValueError):  # it died: stopped below
                            continue
                        kept.append(worker)
                for worker in kept:
                    self.workers.remove(worker)
                idle_workers.give(kept)
        finally:
            self._finalizer()

    def _drain(self) -> None:
        """Read what the workers have sent already: a late result frees its worker."""
        for w, worker in enumerate(self.workers):
            try:
                while self.busy[w] is not None and worker.conn.poll():
                    if receive_message(worker.conn)[0] in ("done", "raised"):
                        self.busy[w] = None
            except (EOFError, OSError):  # it died: stopped with the busy ones
                self.busy[w] = (-1, -1, 0.0)

    def _confirm(self, workers: list[WorkerProcess]) -> list[WorkerProcess]:
        """The workers that answer a ``reset`` within ``grace`` seconds, in order.

        Their earlier messages (the answer to the ``reset`` of their last pool, late
        results) are read and dropped; a worker that died meanwhile is not among them.
        """
        seq = self.next_seq()
        pending: dict[Any, WorkerProcess] = {}
        for worker in workers:
            try:
                send_message(worker.conn, "reset", seq, None)
            except (OSError, ValueError):
                continue
            pending[worker.conn] = worker
        answered: list[WorkerProcess] = []
        deadline = time.monotonic() + self.grace
        while pending:
            ready = mp_connection.wait(list(pending), max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            for conn in ready:
                try:
                    kind, got_seq, _, _ = receive_message(conn)
                except (EOFError, OSError):
                    del pending[conn]  # it died
                    continue
                if got_seq == seq:
                    worker = pending.pop(conn)
                    if kind == "ok":
                        answered.append(worker)
        return [worker for worker in workers if worker in answered]
