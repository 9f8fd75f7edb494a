"""The worker side of :class:`cotrain.runtime.process_pool.ProcessPool`: its message format and
main loop.

A worker is a fresh interpreter that runs this file on its own, as module
:data:`WORKER_MODULE` (see :class:`cotrain.runtime.worker_processes.WorkerProcess`), not as
``cotrain.runtime.pool_worker``: importing the ``cotrain`` package would import scikit-learn and
all (a second or more per worker), while the objects a worker is sent import only what
they need. **This module must therefore import nothing from cotrain** (the standard
library and cloudpickle only). The parent imports it as ``cotrain.runtime.pool_worker`` for the
message format.

Messages are a small pickled header ``(kind, seq, meta, n_frames)`` followed by raw
payload frames (:func:`send_message`, :func:`receive_message`). The parent sends
``load`` / ``adopt`` / ``get`` / ``run`` / ``release`` / ``reset`` / ``close``; the worker
answers each (but ``close``) with a message of the same ``seq``. ``reset`` drops every
object the worker holds, so that a worker can serve another pool afterwards.
"""

from __future__ import annotations

import gc
import pickle
import queue
import signal
import threading
import traceback
from multiprocessing import connection as mp_connection
from typing import Any

try:  # joblib >= 1.5 depends on cloudpickle; older releases vendor it
    import cloudpickle
except ImportError:  # pragma: no cover - depends on the joblib release
    from joblib.externals import cloudpickle

__all__ = [
    "WORKER_MODULE",
    "dumps",
    "error_payload",
    "limit_threads",
    "receive_message",
    "send_message",
    "worker_main",
]

#: The name this file runs under in a worker process (never ``cotrain.runtime.pool_worker``).
WORKER_MODULE = "_cotrain_pool_worker"


def dumps(obj: Any) -> bytes:
    """Pickle ``obj`` with cloudpickle (classes from ``__main__`` or functions travel).

    Examples
    --------
    >>> pickle.loads(dumps(lambda x: x + 1))(1)
    2
    """
    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def send_message(
    conn: mp_connection.Connection, kind: str, seq: int, meta: Any, *frames: bytes
) -> None:
    """Send one message: a small pickled header, then its raw payload frames.

    Parameters
    ----------
    conn : multiprocessing.connection.Connection
    kind : str
        What the message is (``"run"``, ``"done"``, ...).
    seq : int
        Number of the request it belongs to.
    meta : picklable
        Small details (an object id, a method name).
    *frames : bytes
        Payloads, sent as they are.

    Examples
    --------
    >>> from multiprocessing import Pipe
    >>> a, b = Pipe()
    >>> send_message(a, "done", 7, 3, b"payload")
    >>> receive_message(b)
    ('done', 7, 3, [b'payload'])
    """
    conn.send_bytes(pickle.dumps((kind, seq, meta, len(frames))))
    for frame in frames:
        conn.send_bytes(frame)


def receive_message(conn: mp_connection.Connection) -> tuple[str, int, Any, list[bytes]]:
    """Read one message sent by :func:`send_message`: ``(kind, seq, meta, frames)``.

    Examples
    --------
    >>> from multiprocessing import Pipe
    >>> a, b = Pipe()
    >>> send_message(a, "ok", 1, None)
    >>> receive_message(b)
    ('ok', 1, None, [])
    """
    kind, seq, meta, n_frames = pickle.loads(conn.recv_bytes())
    return kind, seq, meta, [conn.recv_bytes() for _ in range(n_frames)]


def error_payload(err: BaseException) -> bytes:
    """The exception being handled and its traceback, pickled: ``(err, traceback text)``.

    An exception that cannot be pickled travels as a ``RuntimeError`` naming it.

    Examples
    --------
    >>> try:
    ...     1 / 0
    ... except ZeroDivisionError as err:
    ...     err_back, tb = pickle.loads(error_payload(err))
    >>> type(err_back).__name__, "1 / 0" in tb
    ('ZeroDivisionError', True)
    """
    tb = traceback.format_exc()
    try:
        return dumps((err, tb))
    except Exception:  # an exception that cannot be pickled travels as text
        return dumps((RuntimeError(f"{type(err).__name__}: {err}"), tb))


def limit_threads(threads: int) -> None:
    """Cap BLAS/OpenMP threads of the libraries loaded so far (as loky's workers do).

    Examples
    --------
    >>> limit_threads(1)
    """
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
            message = receive_message(conn)
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
        frame = dumps(objects[i])
    except Exception as err:
        kind, frame = "refused", error_payload(err)
    else:
        del objects[i]
        kind = "released"
    with send_lock:
        send_message(conn, kind, seq, i, frame)


def worker_main(fd: int, threads: int) -> None:
    """Entry point of a :class:`~cotrain.runtime.process_pool.ProcessPool` worker (a fresh
    interpreter).

    Parameters
    ----------
    fd : int
        File descriptor of this worker's end of the socket pair to the parent.
    threads : int
        BLAS/OpenMP threads allowed in this worker.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent closes the pool
    limit_threads(threads)
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
            elif kind == "reset":  # the pool closed: forget all of it, keep the process
                if objects or shared[0] != -1:
                    objects.clear()
                    shared = (-1, ())
                    gc.collect()  # objects in reference cycles too
                reply = ("ok", None)
            else:
                reply = _worker_command(objects, kind, meta, frames, threads)
            with send_lock:
                send_message(conn, reply[0], seq, *reply[1:])
    except OSError:  # the parent closed its end
        return


def _worker_command(
    objects: dict[int, Any], kind: str, meta: Any, frames: list[bytes], threads: int
) -> tuple[Any, ...]:
    """Run a ``load``, ``adopt`` or ``get`` command; returns the reply."""
    try:
        if kind == "load":
            objects.update(pickle.loads(frames[0]))
            limit_threads(threads)  # unpickling may have loaded new libraries
            return ("ok", None)
        if kind == "adopt":  # a stolen object, without a call to run
            objects[meta] = pickle.loads(frames[0])
            limit_threads(threads)
            return ("ok", meta)
        if kind == "get":
            return ("objects", None, dumps([objects[i] for i in meta]))
        raise ValueError(f"unknown pool command {kind!r}")
    except Exception as err:
        return ("error", None, error_payload(err))


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
            limit_threads(threads)
        if shared[0] != seq:  # pragma: no cover - the parent always sends them first
            raise RuntimeError(f"call {seq} came without its shared arguments")
        args = pickle.loads(frames[0])
        return shared, ("done", i, dumps(getattr(objects[i], method)(*shared[1], *args)))
    except Exception as err:
        return shared, ("raised", i, error_payload(err))
