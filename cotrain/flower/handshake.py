"""Which SuperNode is which site: the handshake, and sites that come back under a new node.

The ServerApp asks every connected SuperNode who it is (a ``query`` message) and keeps the
sites that hold the federation's public pool and apply the run's privacy mechanism
(:class:`Roster`). A SuperNode that restarts mid-run registers with the SuperLink again
and may get a new node id; before every round the roster asks the nodes it has not seen
yet, and a node whose site is one of the run's (the same ``client-id``, learner and
mechanism, and the same number of rows and labels — or, for a private site, which sends
neither, the same declared label space) takes that site's place, so the site continues
from its own state on disk. A node claiming a site it does not match is refused.

Messages go out and come back through :func:`exchange`, which polls the SuperLink at a
short interval (Flower's ``send_and_receive`` polls every 3 s).
"""

from __future__ import annotations

import time
from typing import Any

from cotrain.federation.server import TooFewClients
from cotrain.flower import protocol
from cotrain.wire import envelope

__all__ = ["IDENTITY", "PRIVATE_IDENTITY", "Roster", "error_text", "exchange", "identity"]

#: what must match for a node to take a site's place
IDENTITY = ("client-id", "learner", "n-samples", "labels", "privacy")
#: the same for a private site, from public configuration only (see cotrain.flower.transcript)
PRIVATE_IDENTITY = ("client-id", "learner", "classes", "privacy")


def exchange(
    grid: Any, messages: dict[int, Any], timeout: float | None, poll_interval: float
) -> dict[int, Any]:
    """Push ``{key: message}`` and pull replies until all came or ``timeout`` passed.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The ServerApp's grid.
    messages : dict
        ``key -> message`` (keys are returned with their replies).
    timeout : float or None
        Seconds to wait for the replies (None: until all came).
    poll_interval : float
        Seconds between polls.

    Returns
    -------
    dict
        ``key -> reply`` for the replies that came in time.
    """
    keys = list(messages)
    ids = list(grid.push_messages([messages[k] for k in keys]))
    pending = {mid: k for mid, k in zip(ids, keys, strict=True) if mid}
    replies: dict[int, Any] = {}
    deadline = None if timeout is None else time.monotonic() + timeout
    while pending:
        for reply in grid.pull_messages(list(pending)):
            key = pending.pop(reply.metadata.reply_to_message_id, None)
            if key is not None:
                replies[key] = reply
        if not pending or (deadline is not None and time.monotonic() >= deadline):
            break
        time.sleep(poll_interval)
    return replies


def identity(site: dict[str, Any]) -> tuple[Any, ...]:
    """What names ``site`` (a handshake reply) across restarts: :data:`IDENTITY`, or
    :data:`PRIVATE_IDENTITY` for a private site (public configuration only).

    Examples
    --------
    >>> identity({"client-id": 0, "learner": "SVC", "classes": [0, 1], "privacy": "RR()"})
    (0, 'SVC', (0, 1), 'RR()')
    """
    keys = PRIVATE_IDENTITY if site.get("privacy") else IDENTITY
    return tuple(_plain(site.get(k)) for k in keys)


def error_text(error: Any) -> str:
    """A Flower error reply in one line (its code and the last line of its reason)."""
    reason = (error.reason or "").strip().splitlines()
    return f"Flower error {error.code}: {reason[-1] if reason else 'no reason given'}"


class Roster:
    """The run's sites and the SuperNode each one answers on.

    Parameters
    ----------
    pool_hash : str
        SHA-256 fingerprint of the federation's public pool.
    n_public : int
        Its number of rows.
    privacy : str
        The run's client-side mechanism as sites declare it ("" for none).
    timeout : float
        Seconds to wait for the answers to a handshake.
    poll_interval : float
        Seconds between polls of the SuperLink.
    classes : list, optional
        The run's label space (``protocol.labels_to_config`` form): a site that declares
        another one is refused, and a private site must declare it.

    Attributes
    ----------
    sites : list of dict
        What each site reported, in client-index order, with its ``node``.
    refused : dict
        ``node id -> reason`` for the SuperNodes left out.
    rejoined : list of tuple
        ``(round, client index, old node, new node)`` for every site that came back under
        a new node id.

    Examples
    --------
    >>> roster = Roster("ab" * 32, 10, "", timeout=5.0, poll_interval=0.05)
    >>> roster.node_ids, roster.refused
    ([], {})
    """

    def __init__(
        self,
        pool_hash: str,
        n_public: int,
        privacy: str,
        timeout: float,
        poll_interval: float,
        classes: list[Any] | None = None,
    ) -> None:
        self.pool_hash = pool_hash
        self.n_public = n_public
        self.privacy = privacy
        self.classes = classes
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.sites: list[dict[str, Any]] = []
        self.refused: dict[int, str] = {}
        self.rejoined: list[tuple[int, int, int, int]] = []

    @property
    def node_ids(self) -> list[int]:
        """The SuperNode of each client index."""
        return [s["node"] for s in self.sites]

    def handshake(self, grid: Any, min_nodes: int, min_clients: int) -> list[dict[str, Any]]:
        """Ask every connected SuperNode who it is; keep the usable sites, ordered by
        ``client-id`` (sites without one last, by node id).

        Raises
        ------
        RuntimeError
            If fewer than ``min_nodes`` SuperNodes connect within the timeout, or fewer
            than ``min_clients`` sites are usable.
        """
        deadline = time.monotonic() + self.timeout
        nodes = sorted(grid.get_node_ids())
        while len(nodes) < min_nodes and time.monotonic() < deadline:
            time.sleep(0.2)
            nodes = sorted(grid.get_node_ids())
        if len(nodes) < min_nodes:
            raise RuntimeError(
                f"only {len(nodes)} SuperNodes connected within {self.timeout} s, "
                f"fewer than min_nodes={min_nodes}"
            )
        sites = [s for s in self._ask(grid, nodes) if s is not None]
        if len(sites) < max(min_clients, 1):
            raise TooFewClients(
                f"{len(sites)} usable sites, fewer than min_clients={min_clients}; "
                f"refused: {self.refused}"
            )
        sites.sort(key=lambda s: (s["client-id"] < 0, s["client-id"], s["node"]))
        self.sites = sites
        return sites

    def rejoin(self, grid: Any, t: int) -> list[int]:
        """Before round ``t``: give a site whose SuperNode came back under a new node id
        its new node. Returns the client indices that rejoined."""
        known = set(self.node_ids) | set(self.refused)
        new = [n for n in sorted(grid.get_node_ids()) if n not in known]
        if not new:
            return []
        back = []
        for site in self._ask(grid, new):
            if site is None:
                continue
            i = self._match(site)
            if i is None:
                rows = "" if site.get("privacy") else f", {site.get('n-samples')} rows"
                self.refused[site["node"]] = (
                    f"not a site of this run: client-id {site['client-id']} with "
                    f"{site['learner']}{rows}"
                    + ("" if site["client-id"] >= 0 else " (a site needs a client-id to rejoin)")
                )
                continue
            self.rejoined.append((t, i, self.sites[i]["node"], site["node"]))
            self.sites[i] = {**self.sites[i], "node": site["node"]}
            back.append(i)
        return back

    def _match(self, site: dict[str, Any]) -> int | None:
        """The client index whose site ``site`` is (same identity), if any."""
        if site["client-id"] < 0:
            return None
        for i, known in enumerate(self.sites):
            if identity(known) == identity(site):
                return i
        return None

    def _ask(self, grid: Any, nodes: list[int]) -> list[dict[str, Any] | None]:
        """Query ``nodes``; each usable site's report with its node (None: refused)."""
        from flwr.app import Message, RecordDict

        messages = {
            node: Message(content=RecordDict(), dst_node_id=node, message_type="query")
            for node in nodes
        }
        replies = exchange(grid, messages, self.timeout, self.poll_interval)
        return [self._check(node, replies.get(node)) for node in nodes]

    def _check(self, node: int, reply: Any) -> dict[str, Any] | None:
        """A node's handshake reply as a site, or None (with the reason in ``refused``)."""
        if reply is None:
            self.refused[node] = f"no answer to the handshake within {self.timeout} s"
            return None
        if reply.has_error():
            self.refused[node] = error_text(reply.error)
            return None
        records = reply.content.config_records
        if envelope.ERROR in records:  # the site could not answer (masked if private)
            error = records[envelope.ERROR]
            self.refused[node] = f"the site refused: {error.get('type')}: {error.get('message')}"
            return None
        try:
            info = dict(records[protocol.SITE])
        except KeyError:
            self.refused[node] = "malformed handshake reply: no 'site' record"
            return None
        if info.get("pool-hash") != self.pool_hash:
            self.refused[node] = (
                f"public pool mismatch: the site's pool has SHA-256 "
                f"{str(info.get('pool-hash'))[:16]}… ({info.get('n-public')} rows), the "
                f"federation's {self.pool_hash[:16]}… ({self.n_public} rows)"
            )
            return None
        declared = str(info.get("privacy", ""))
        if declared != self.privacy:
            self.refused[node] = (
                f"privacy mismatch: the site applies {declared or 'no mechanism'}, the run "
                f"{self.privacy or 'none'}"
            )
            return None
        declared_classes = info.get("classes")
        if declared_classes is None and declared:
            self.refused[node] = "a private site must declare its label space (classes)"
            return None
        if declared_classes is not None and self.classes is not None:
            if set(declared_classes) != set(self.classes):
                self.refused[node] = (
                    f"label space mismatch: the site declares classes {list(declared_classes)}, "
                    f"the run's are {list(self.classes)}"
                )
                return None
        return {**info, "node": node}


def _plain(value: Any) -> Any:
    """A config value comparable with ``==`` (Flower hands lists back as lists)."""
    return tuple(value) if isinstance(value, list | tuple) else value
