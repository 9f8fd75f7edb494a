"""A site's warm worker: one long-lived process that runs the site's rounds.

Flower starts a fresh ``flwr-clientapp`` process for every message, and a ClientApp that
imports cotrain's learners pays for scikit-learn (and, for torch sites, torch) in each
of them. A site can instead run this worker next to its SuperNode::

    cotrain site serve /srv/site-0/site.toml            # or: python -m cotrain.flower.worker

It loads the site once (data, public pool, learner, every import a round needs) and
serves the light relay ClientApp (:mod:`cotrain.flower.relay`) on a Unix domain socket,
by default ``<site folder>/worker.sock``, created with mode 0600 (only the site's own
user can connect). Requests are served one at a time: ``query`` runs
:func:`cotrain.flower.client_app.site_query`, ``train`` runs
:func:`cotrain.flower.client_app.site_train`, ``secure-share`` runs
:func:`cotrain.flower.secure_site.secagg_share_reply` (a secure-vote site's share for a SecAgg+
sum), ``ping`` answers ``{"ok": true}``.

Framing: every frame is a 4-byte big-endian length followed by that many bytes of UTF-8
JSON; ``bytes`` values travel as ``{"$b64": "<base64>"}``. Never pickle: what the
relay forwards comes from the server. A request is ``{"op": ..., "content": <plain
records>, "site": <site.toml path, optional>}``; a reply is ``{"ok": true, "content":
...}`` or ``{"ok": false, "error": {"type": ..., "message": ...}}``. A malformed frame
gets an error reply (and, if its length cannot be trusted, the connection is closed);
the worker keeps serving. An exception in the site's round comes back as an error
reply, which the relay raises again.

The worker keeps no round state in memory: :func:`~cotrain.flower.client_app.site_train`
keeps the site's model and last upload on disk
(:class:`cotrain.flower.site_state.SiteState`), so restarting the worker or the SuperNode
loses nothing. SIGTERM (or SIGINT) stops it after the request in progress and removes the
socket.

Only the standard library is imported at module level; the client side
(:func:`call_worker`) is what the relay uses.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import signal
import socket
import stat
import struct
import sys
import time
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_FRAME",
    "SiteWorker",
    "WorkerError",
    "WorkerUnavailable",
    "call_worker",
    "decode",
    "default_socket",
    "encode",
    "main",
    "read_frame",
    "worker_answers",
    "write_frame",
]

#: the largest frame either side accepts (bytes of JSON)
MAX_FRAME = 1 << 30
SOCKET_NAME = "worker.sock"
_HEADER = struct.Struct(">I")
_MAX_SOCKET_PATH = 107  # sun_path on Linux, without the terminating NUL
_LOG = logging.getLogger("cotrain.worker")


class WorkerUnavailable(ConnectionError):
    """No worker accepts connections on the socket (none started, or it died)."""


class WorkerError(RuntimeError):
    """An error reply of the worker: the exception its request raised.

    Attributes
    ----------
    type : str
        The exception's class name (e.g. ``"ValueError"``).
    message : str
        Its text.
    """

    def __init__(self, type: str, message: str) -> None:
        super().__init__(f"{type}: {message}")
        self.type = type
        self.message = message


class _BadFrame(ValueError):
    """A frame that is not what the protocol says; ``fatal`` if the stream is lost."""

    def __init__(self, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


# ---------------------------------------------------------------------- framing
def encode(value: Any) -> Any:
    """``value`` with every ``bytes`` replaced by ``{"$b64": ...}`` (JSON-ready).

    Examples
    --------
    >>> encode({"arrays": {"labels": b"\\x00\\xff"}, "config": {"r": [1, 2.5, "a"]}})
    {'arrays': {'labels': {'$b64': 'AP8='}}, 'config': {'r': [1, 2.5, 'a']}}
    >>> decode(encode({"x": [b"ab", True]}))
    {'x': [b'ab', True]}
    """
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$b64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return value


def decode(value: Any) -> Any:
    """The inverse of :func:`encode` (strict base64; see :func:`encode` for examples)."""
    if isinstance(value, dict):
        if set(value) == {"$b64"}:
            if not isinstance(value["$b64"], str):
                raise ValueError("a $b64 value must be a string")
            return base64.b64decode(value["$b64"], validate=True)
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def write_frame(sock: socket.socket, obj: Any) -> None:
    """Send ``obj`` as one frame (length prefix, JSON with base64 bytes)."""
    body = json.dumps(encode(obj), separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_FRAME:
        raise ValueError(f"frame of {len(body)} bytes exceeds MAX_FRAME ({MAX_FRAME})")
    sock.sendall(_HEADER.pack(len(body)) + body)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError(f"connection closed with {left} of {n} bytes unread")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> Any:
    """Receive one frame and return its decoded value.

    Raises
    ------
    EOFError
        If the peer closed the connection (before or within the frame).
    ValueError
        If the frame is too long or is not JSON (with base64 bytes) in UTF-8.
    """
    header = sock.recv(_HEADER.size, socket.MSG_WAITALL)
    if not header:
        raise EOFError("connection closed")
    if len(header) < _HEADER.size:
        raise EOFError("connection closed within a frame header")
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise _BadFrame(f"frame of {length} bytes exceeds MAX_FRAME ({MAX_FRAME})", fatal=True)
    body = _read_exactly(sock, length)
    try:
        return decode(json.loads(body.decode("utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as err:
        raise _BadFrame(f"malformed frame: {err}") from err


# ---------------------------------------------------------------------- client side
def default_socket(site: str | Path) -> Path:
    """The worker socket of a site: ``worker.sock`` in the folder of its ``site.toml``.

    ``site`` is the ``site.toml`` or the folder holding it.

    Examples
    --------
    >>> default_socket("/srv/site-0/site.toml").as_posix()
    '/srv/site-0/worker.sock'
    """
    path = Path(site)
    folder = path if path.suffix != ".toml" else path.parent
    return folder / SOCKET_NAME


def call_worker(
    path: str | Path,
    op: str,
    content: dict[str, Any] | None = None,
    *,
    site: str | None = None,
    timeout: float = 3600.0,
) -> dict[str, Any]:
    """Send one request to the worker on ``path`` and return its reply's content.

    Parameters
    ----------
    path : str or Path
        The worker's Unix socket.
    op : {"ping", "query", "train"}
        The request.
    content : dict, optional
        The message's records in :func:`cotrain.flower.protocol.to_plain` form.
    site : str, optional
        The ``site.toml`` the caller expects the worker to serve; the worker refuses the
        request if it serves another site.
    timeout : float, default=3600
        Seconds to wait for the connection and for the reply (a round's training included).

    Returns
    -------
    dict
        The reply's records (plain form).

    Raises
    ------
    WorkerUnavailable
        If nothing accepts connections on ``path`` (nothing was sent).
    WorkerError
        The worker's error reply (the exception its request raised, or a refused request).
    TimeoutError, ConnectionError, EOFError
        If the worker does not answer in time or the connection breaks after the request
        was sent (the round may have run: the request is not repeated).
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0, got {timeout!r}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as err:
            raise WorkerUnavailable(f"no site worker on {path}: {err}") from err
        request: dict[str, Any] = {"op": op, "content": content or {}}
        if site is not None:
            request["site"] = str(site)
        write_frame(sock, request)
        reply = read_frame(sock)
    finally:
        sock.close()
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise WorkerError("ProtocolError", f"unexpected reply from the worker: {reply!r:.200}")
    if not reply["ok"]:
        err = reply.get("error") or {}
        raise WorkerError(str(err.get("type", "Error")), str(err.get("message", "")))
    return dict(reply.get("content") or {})


# ---------------------------------------------------------------------- server side
def worker_answers(path: str | Path) -> bool:
    """Whether a site worker answers a ping on ``path`` (within 5 s).

    Examples
    --------
    >>> worker_answers("/nonexistent/worker.sock")
    False
    """
    try:
        call_worker(path, "ping", timeout=5)
    except (OSError, EOFError, RuntimeError):
        return False
    return True


class SiteWorker:
    """Serve one site's rounds on a Unix socket (see the module docs).

    Parameters
    ----------
    site : str or Path
        The site's ``site.toml`` (or the folder holding it).
    socket_path : str or Path, optional
        Where to listen; ``<site folder>/worker.sock`` by default.
    read_timeout : float, default=60
        Seconds a connection may take to send its request (a stalled relay cannot
        block the worker).

    Examples
    --------
    >>> worker = SiteWorker("/srv/site-0/site.toml")  # doctest: +SKIP
    >>> worker.serve()  # until SIGTERM  # doctest: +SKIP
    """

    def __init__(
        self,
        site: str | Path,
        socket_path: str | Path | None = None,
        *,
        read_timeout: float = 60.0,
    ) -> None:
        from cotrain.flower.site import load_site

        self.socket_path = Path(socket_path or default_socket(site)).absolute()
        if len(os.fsencode(self.socket_path)) > _MAX_SOCKET_PATH:
            raise ValueError(
                f"socket_path {self.socket_path} is longer than {_MAX_SOCKET_PATH} bytes, "
                "the limit of a Unix socket address: pass a shorter --socket"
            )
        self.read_timeout = float(read_timeout)
        started = time.perf_counter()
        self.site = load_site(site)
        self._warm()
        self.load_s = time.perf_counter() - started
        self._stopping = False
        self._sock: socket.socket | None = None

    def _warm(self) -> None:
        """Import everything a round needs, so that the first round pays nothing."""
        import importlib

        from cotrain.flower import client_app
        from learners import continues_training

        if continues_training(self.site.estimator):  # its model is stored with skops
            try:
                importlib.import_module("skops.io")
            except ImportError:  # pragma: no cover - the handshake reports it
                pass
        try:
            client_app.site_query(self.site)
        except Exception as err:  # the handshake reports it
            _LOG.warning("this site's handshake fails: %s", err)

    def handle(self, request: Any) -> dict[str, Any]:
        """The reply frame to one request frame (never raises for a bad request)."""
        from cotrain.flower import client_app

        try:
            if not isinstance(request, dict) or not isinstance(request.get("op"), str):
                raise ValueError("a request must be an object with a string 'op'")
            op, content = request["op"], request.get("content") or {}
            if not isinstance(content, dict):
                raise ValueError("a request's 'content' must be an object")
            expected = request.get("site")
            if expected is not None and Path(str(expected)).resolve() not in (
                self.site.path.resolve(),
                self.site.path.parent.resolve(),
            ):
                raise ValueError(
                    f"this worker serves the site {self.site.path}, not {expected}: "
                    "check the SuperNode's node config 'worker'"
                )
            if op == "ping":
                return {"ok": True, "content": {}}
            if op == "query":
                return {"ok": True, "content": client_app.site_query(self.site)}
            if op == "train":
                return {"ok": True, "content": client_app.site_train(self.site, content)}
            if op == "secure-share":  # a SecAgg+ stage asks for this site's share
                from cotrain.flower.secure_site import secagg_share_reply

                return {"ok": True, "content": secagg_share_reply(self.site, content)}
            raise ValueError(
                f"unknown op {op!r}: expected 'ping', 'query', 'train' or 'secure-share'"
            )
        except Exception as err:  # every failure: an error reply
            _LOG.warning("request failed: %s: %s", type(err).__name__, err, exc_info=True)
            if self.site.privacy is not None:  # its text can quote private values
                from cotrain.wire.envelope import masked_error

                return {"ok": False, "error": masked_error(err)}
            return {"ok": False, "error": {"type": type(err).__name__, "message": str(err)}}

    def _serve_connection(self, conn: socket.socket) -> None:
        conn.settimeout(self.read_timeout)
        while True:
            try:
                request = read_frame(conn)
            except (EOFError, TimeoutError, OSError):
                return
            except _BadFrame as err:
                error = {"type": "ValueError", "message": str(err)}
                write_frame(conn, {"ok": False, "error": error})
                if err.fatal:
                    return
                continue
            started = time.perf_counter()
            reply = self.handle(request)
            write_frame(conn, reply)
            _LOG.info(
                "%s: %s in %.3f s",
                request.get("op") if isinstance(request, dict) else "?",
                "ok" if reply["ok"] else reply["error"]["type"],
                time.perf_counter() - started,
            )

    def _bind(self) -> socket.socket:
        path = self.socket_path
        if path.exists() or path.is_symlink():
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise FileExistsError(f"{path} exists and is not a socket")
            try:
                call_worker(path, "ping", timeout=5)
            except (WorkerUnavailable, OSError, EOFError, WorkerError):
                path.unlink()  # a dead worker's socket
            else:
                raise FileExistsError(f"another worker already serves on {path}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is created with mode 0600
        try:
            sock.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(16)
        sock.settimeout(0.2)  # wake up to notice a stop request
        return sock

    def stop(self, *_: object) -> None:
        """Stop serving after the request in progress (a signal handler)."""
        self._stopping = True

    def serve(self) -> None:
        """Listen and serve requests one at a time until :meth:`stop` (SIGTERM, SIGINT)."""
        self._sock = self._bind()
        _LOG.info(
            "serving site %s on %s (loaded in %.2f s)",
            self.site.path,
            self.socket_path,
            self.load_s,
        )
        try:
            while not self._stopping:
                try:
                    conn, _ = self._sock.accept()
                except TimeoutError:
                    continue
                with conn:
                    try:
                        self._serve_connection(conn)
                    except OSError as err:  # the relay went away mid-reply
                        _LOG.warning("connection lost: %s", err)
        finally:
            self.close()

    def close(self) -> None:
        """Close the socket and remove its file."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            try:
                self.socket_path.unlink()
            except FileNotFoundError:
                pass


def main(argv: list[str] | None = None) -> int:
    """``python -m cotrain.flower.worker SITE_TOML [--socket PATH]``.

    Examples
    --------
    >>> main(["/srv/site-0/site.toml"])  # serves until SIGTERM  # doctest: +SKIP
    """
    parser = argparse.ArgumentParser(
        prog="cotrain site serve", description="Serve a site's rounds to its relay ClientApp."
    )
    parser.add_argument("site", help="the site's site.toml (or its folder)")
    parser.add_argument("--socket", help="Unix socket path (default: <site folder>/worker.sock)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        worker = SiteWorker(args.site, args.socket)
    except (ValueError, OSError) as err:
        print(f"cotrain site serve: {err}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, worker.stop)
    signal.signal(signal.SIGINT, worker.stop)
    try:
        worker.serve()
    except FileExistsError as err:
        print(f"cotrain site serve: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
