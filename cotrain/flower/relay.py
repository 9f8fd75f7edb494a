"""A light ClientApp that hands each message to the site's warm worker.

Flower runs a ClientApp in a fresh ``flwr-clientapp`` process per message. This one
imports only the standard library, Flower and :mod:`cotrain.flower.protocol` (numpy), so
the process starts without scikit-learn or torch: it converts the message to plain
records (:func:`cotrain.flower.protocol.to_plain`), sends them to the site's worker
(:mod:`cotrain.flower.worker`, ``cotrain site serve``) over its Unix socket and turns
the worker's answer back into the reply.

Where the worker listens, from the SuperNode's node config:

- ``worker="/path/worker.sock"``, else
- ``worker.sock`` in the folder of the site (``site="/path/site.toml"``, or
  ``<sites-dir>/site-<partition-id>`` in simulation) if that socket exists.

``worker-timeout`` (seconds, default 3600) bounds one request, training included.

If no worker accepts the connection (none configured, not started, or dead), the relay
runs the round in its own process as :mod:`cotrain.flower.client_app` does (importing it
then), and logs a warning: the site still takes part, only slower. An exception raised
by the site's round at the worker is raised again here (as the same built-in exception
type where there is one), so Flower sends its usual error reply.
"""

from __future__ import annotations

import builtins
import logging
from pathlib import Path
from typing import Any

from cotrain.flower import protocol
from cotrain.flower.secure_share import share_request, share_vector
from cotrain.flower.secure_sum import DEFAULT_BOUND, is_secure_sum_message, secure_sum_handler
from cotrain.flower.worker import WorkerError, WorkerUnavailable, call_worker, default_socket

__all__ = [
    "DEFAULT_TIMEOUT",
    "make_relay_app",
    "relay_query",
    "relay_train",
    "secure_vector",
    "worker_socket",
]

#: seconds one request to the worker may take by default (training included)
DEFAULT_TIMEOUT = 3600.0
_LOG = logging.getLogger("cotrain.relay")


def make_relay_app() -> Any:
    """The relay ClientApp (``clientapp = "your_app.client_app:app"``).

    Returns
    -------
    flwr.clientapp.ClientApp
        Handles ``query`` and ``train`` messages through the site's worker.

    Examples
    --------
    >>> app = make_relay_app()
    >>> type(app).__name__
    'ClientApp'
    """
    from flwr.clientapp import ClientApp

    app = ClientApp()
    app.query()(relay_query)
    app.train()(relay_train)
    return app


def site_path(node_config: Any, run_config: Any) -> str | None:
    """The site's ``site.toml`` (or folder) named by the node config, or ``None``.

    Examples
    --------
    >>> site_path({"site": "/srv/a/site.toml"}, {})
    '/srv/a/site.toml'
    >>> site_path({"partition-id": 2}, {"sites-dir": "/srv"})
    '/srv/site-2'
    >>> site_path({}, {}) is None
    True
    """
    if "site" in node_config:
        return str(node_config["site"])
    if "partition-id" in node_config and "sites-dir" in run_config:
        return str(Path(str(run_config["sites-dir"])) / f"site-{int(node_config['partition-id'])}")
    return None


def worker_socket(node_config: Any, run_config: Any) -> Path | None:
    """Where the site's worker listens (see the module docs), or ``None`` if nowhere.

    Examples
    --------
    >>> worker_socket({"worker": "/run/site-0.sock"}, {}).as_posix()
    '/run/site-0.sock'
    >>> worker_socket({"site": "/nonexistent/site.toml"}, {}) is None
    True
    """
    if "worker" in node_config:
        return Path(str(node_config["worker"]))
    site = site_path(node_config, run_config)
    if site is None:
        return None
    path = default_socket(site)
    return path if path.exists() else None


def _timeout(node_config: Any) -> float:
    value = node_config.get("worker-timeout", DEFAULT_TIMEOUT)
    try:
        timeout = float(value)
    except (TypeError, ValueError):
        timeout = -1.0
    if not timeout > 0:
        raise ValueError(f"node config 'worker-timeout' must be a number > 0, got {value!r}")
    return timeout


def _ask(op: str, msg: Any, context: Any) -> dict[str, Any] | None:
    """The worker's reply to ``op`` on ``msg``, or ``None`` if no worker is reachable."""
    node, run = context.node_config, context.run_config
    path = worker_socket(node, run)
    if path is None:
        _LOG.warning("no site worker (start `cotrain site serve`): running the round here")
        return None
    content = protocol.to_plain(msg.content) if op == "train" else {}
    try:
        return call_worker(path, op, content, site=site_path(node, run), timeout=_timeout(node))
    except WorkerUnavailable as err:
        _LOG.warning("%s; running the round here", err)
        return None
    except WorkerError as err:
        raise _reraise(err) from None


def _reraise(err: WorkerError) -> Exception:
    """The worker's error as an exception: its built-in type where there is one."""
    cls = getattr(builtins, err.type, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, OSError):
        try:
            return cls(err.message)
        except Exception:  # a built-in that takes other arguments
            pass
    from cotrain.wire.envelope import RemoteClientError  # on the error path only

    return RemoteClientError(f"{err.type}: {err.message}")


def relay_query(msg: Any, context: Any) -> Any:
    """Handshake, answered by the site's worker (or here if it has none)."""
    from flwr.app import Message

    reply = _ask("query", msg, context)
    if reply is None:
        from cotrain.flower.client_app import handle_query

        return handle_query(msg, context)
    return Message(content=protocol.from_plain(reply), reply_to=msg)


def relay_train(msg: Any, context: Any) -> Any:
    """One round, run by the site's worker (or here if it has none); a stage of a SecAgg+
    sum goes to :func:`cotrain.flower.secure_sum.secure_sum_handler` here, in the relay,
    where Flower keeps the site's SecAgg+ state (:func:`secure_vector` fetches the share)."""
    from flwr.app import Message

    if is_secure_sum_message(msg):
        return secure_sum_handler(secure_vector, bound=DEFAULT_BOUND)(msg, context)
    reply = _ask("train", msg, context)
    if reply is None:
        from cotrain.flower.client_app import handle_train

        return handle_train(msg, context)
    return Message(content=protocol.from_plain(reply), reply_to=msg)


def secure_vector(config: dict[str, Any], context: Any) -> Any:
    """This site's vector for a SecAgg+ sum (a secure-vote round), from its worker (or
    computed here if it has none): :func:`cotrain.flower.secure_site.secagg_share_reply`."""
    node, run = context.node_config, context.run_config
    request, path = share_request(config, context), worker_socket(node, run)
    if path is not None:
        try:
            return share_vector(
                call_worker(
                    path,
                    "secure-share",
                    request,
                    site=site_path(node, run),
                    timeout=_timeout(node),
                )
            )
        except WorkerUnavailable as err:
            _LOG.warning("%s; computing the share here", err)
        except WorkerError as err:
            raise _reraise(err) from None
    from cotrain.flower.client_app import local_secure_vector

    return local_secure_vector(config, context)
