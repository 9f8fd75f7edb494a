"""A private site's own ledger: every release it sent, its ε, its budget, its replies.

The server's :class:`~cotrain.privacy.ledgers.ledger.PrivacyLedger` counts the replies the server
decoded; a server that deviates (asks for the same round again, replays a late round,
drops replies, starts a new run) is not bound by it. :class:`SiteLedger` is the site's
side of the same arithmetic — a ``PrivacyLedger`` of one client over the site's own
mechanism — kept by the site itself, which is where the guarantee is enforced:

- a request the site already answered (the same key: in-process the round, on Flower the
  run token and the round) gets the bytes it sent the first time (:meth:`SiteLedger.lookup`):
  re-sending them is post-processing, no fresh noise is ever drawn for it;
- a new release is refused when it would take the site's ε past its mechanism's
  ``budget`` (:meth:`SiteLedger.check` raises :class:`PrivacyBudgetSpent`);
- every release is recorded (:meth:`SiteLedger.record`) *before* it is sent, so a reply
  the server later ignores (late, dropped) is counted; a failed round releases nothing and
  is neither counted nor cached.

Its ε (:meth:`SiteLedger.epsilon`) is what one private record of the site is protected by
against everyone who saw its replies (the server and anyone it shares them with), under
the mechanism's neighbouring relation: a function of public configuration (mechanism,
number of classes, size of the public pool) and of how many releases the site made.

A ledger is kept in memory (an in-process client, in its ``state_dict``) or in a directory
(a Flower site, ``<site folder>/state/privacy/``): ``ledger.json`` plus one file per cached
reply, each written atomically (temporary file + :func:`os.replace`), with an exclusive
:func:`fcntl.flock` held by :meth:`SiteLedger.transaction` around the whole
look-up / check / compute / record step (Flower starts a fresh process per message, and
messages can overlap). The ledger spans runs: a new run token does not reset the budget.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.files import exclusive_lock, write_atomic
from cotrain.privacy.ledgers.ledger import PrivacyLedger, guarantee_of
from cotrain.privacy.mechanisms.secure_votes import SkellamShifts
from cotrain.wire.dp_events import event_from_json, event_to_json

__all__ = [
    "DEFAULT_SITE_BUDGET",
    "PrivacyBudgetSpent",
    "SentReply",
    "Served",
    "SiteLedger",
    "quote_site_epsilon",
]

#: the masked text of a refusal, as a private site sends it
REFUSAL = "privacy budget spent"
#: a deployed private site's ε budget when its mechanism states none: what one private
#: record of the site may lose, over every run its folder ever answers (add/remove or the
#: mechanism's relation, against the server and anyone who sees the site's replies)
DEFAULT_SITE_BUDGET = 10.0
_FORMAT = 1
_LEDGER_FILE = "ledger.json"
_LOCK_FILE = "lock"
_REPLIES = "replies"


class PrivacyBudgetSpent(RuntimeError):
    """A private site refused a release: one more would take its ε past its budget.

    A client failure like any other (the server skips or raises per ``on_client_error``);
    the site's own log keeps the figures, the server gets ``"privacy budget spent"``.

    Examples
    --------
    >>> str(PrivacyBudgetSpent())
    'privacy budget spent'
    """

    def __init__(self, message: str = REFUSAL) -> None:
        super().__init__(message)


@dataclass(frozen=True)
class SentReply:
    """One release the site sent: its key, the exact bytes, and its privacy event.

    Attributes
    ----------
    key : str
        The request it answered (see :meth:`SiteLedger.key`).
    reply : bytes
        Exactly what was sent (re-sent unchanged for a repeated request).
    dp_event : dp_accounting.DpEvent, SkellamShifts or None
        The event the site reported with it (a mechanism with ``reports_events``).
    digest : str or None
        What the request asked, where its key does not say it all (a secure sum's queries
        or selection, and its plan): the same key asking for something else is refused.
    claimed : bool
        Whether it left into a secure sum (:meth:`SiteLedger.claim`): a share enters one
        sum only.
    """

    key: str
    reply: bytes
    dp_event: Any = None
    digest: str | None = None
    claimed: bool = False


@dataclass
class Served:
    """How a private site answered one request (:meth:`SiteLedger.serve`).

    Attributes
    ----------
    outcome : {"repeat", "new", "refused", "failed"}
        ``"repeat"``: the request was answered before, ``reply`` is what was sent then;
        ``"new"``: a release, counted and kept before it leaves; ``"refused"``: one more
        release would pass the budget (nothing computed, or the computed round's reported
        event was larger than assumed); ``"failed"``: the round failed, nothing released.
    reply : bytes or None
        The bytes to send (``"repeat"`` and ``"new"``).
    dp_event : dp_accounting.DpEvent or None
        The release's reported event.
    error : BaseException or None
        Why nothing was released (``"refused"``: :class:`PrivacyBudgetSpent`).
    epsilon : float
        The site's ε once this answer has left: what its reply says (``site-epsilon``).
    computed : object
        What the round computed (``"new"``, ``"failed"``, or ``"refused"`` after a
        computed round), for the caller's reply; None otherwise.
    """

    outcome: str
    reply: bytes | None
    dp_event: Any
    error: BaseException | None
    epsilon: float
    computed: Any = None


class SiteLedger:
    """A private site's record of every release it sent, with its ε and its budget.

    Parameters
    ----------
    mechanism : cotrain.privacy mechanism
        The site's own mechanism (``dp_event``, ``delta``, ``budget``; or
        ``reports_events``). Its ``budget`` (None: unlimited) is the site's.
    n_classes, n_public : int
        The public configuration its events depend on: the label space's size and |U|.
    directory : str or Path, optional
        Keep the ledger on disk there (created if missing; a ledger already there must
        have been kept for the same mechanism, ``n_classes`` and ``n_public``, else
        ValueError). None: in memory.
    budget : float, optional
        The site's budget when its mechanism states none (a deployed site:
        :data:`DEFAULT_SITE_BUDGET`); the mechanism's ``budget`` wins when it has one.

    Examples
    --------
    >>> from cotrain.privacy import RandomizedResponse
    >>> ledger = SiteLedger(RandomizedResponse(epsilon=1.0, sensitivity=1, budget=2.0), 2, 10)
    >>> ledger.lookup(1) is None, ledger.can_release()
    (True, True)
    >>> ledger.record(1, b"labels of round 1")
    >>> ledger.lookup(1).reply, ledger.releases, round(ledger.epsilon(), 3)
    (b'labels of round 1', 1, 1.0)
    >>> ledger.record(2, b"labels of round 2")
    >>> ledger.can_release()            # a third release would reach ε = 3 > 2
    False
    >>> ledger.check()
    Traceback (most recent call last):
    ...
    cotrain.privacy.ledgers.site_ledger.PrivacyBudgetSpent: privacy budget spent
    """

    def __init__(
        self,
        mechanism: Any,
        n_classes: int,
        n_public: int,
        directory: str | os.PathLike[str] | None = None,
        budget: float | None = None,
    ) -> None:
        if mechanism is None:
            raise ValueError("mechanism must be a privacy mechanism, got None")
        for name, value in (("n_classes", n_classes), ("n_public", n_public)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        self.mechanism = mechanism
        self.n_classes = int(n_classes)
        self.n_public = int(n_public)
        self.directory = None if directory is None else Path(directory)
        self._budget = None if budget is None else float(budget)
        self._sent: dict[str, SentReply] = {}
        self._order: list[str] = []
        self._depth = 0
        self._reset()
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            (self.directory / _REPLIES).mkdir(exist_ok=True)
            with self.transaction():  # loads what is there, checks its configuration
                pass

    # ------------------------------------------------------------------ identity
    @property
    def configuration(self) -> dict[str, Any]:
        """The public configuration the ledger's arithmetic depends on."""
        return {
            "mechanism": repr(self.mechanism),
            "n_classes": self.n_classes,
            "n_public": self.n_public,
        }

    @staticmethod
    def key(request: Any) -> str:
        """The text key of a request: a round (int), a text, or a tuple of them joined
        by ``/`` (a Flower site: ``(run token, round)``).

        Examples
        --------
        >>> SiteLedger.key(3), SiteLedger.key(("a1b2", 3))
        ('3', 'a1b2/3')
        """
        parts = request if isinstance(request, tuple) else (request,)
        if not parts or any(
            isinstance(p, bool) or not isinstance(p, str | int | np.integer) for p in parts
        ):
            raise TypeError(f"a request key is a round, a text or a tuple of them, got {request!r}")
        return "/".join(str(p) for p in parts)

    # ------------------------------------------------------------------ ε
    def _reset(self) -> None:
        self._ledger = PrivacyLedger([self.mechanism], 1, self.n_classes, self.n_public)
        self._sent, self._order = {}, []

    @property
    def budget(self) -> float | None:
        """The site's ε budget (its mechanism's ``budget``, else the ledger's own; None:
        unlimited)."""
        return self._budget if self._ledger.budget is None else self._ledger.budget

    @property
    def delta(self) -> float:
        """δ of :meth:`epsilon`."""
        return float(self._ledger.delta)

    @property
    def releases(self) -> int:
        """How many releases the site has sent (each counted once)."""
        return int(self._ledger.rounds_taken[0])

    def epsilon(self) -> float:
        """ε spent so far: the releases composed exactly as the server's ledger does."""
        return float(self._ledger.epsilon(0))

    def next_epsilon(self, dp_event: Any = None) -> float:
        """ε once one more release is recorded (``dp_event``: its reported event, for a
        mechanism with ``reports_events``; default: one like the last)."""
        g = self._ledger.headline
        if g.reported:
            events = list(self._ledger.reported.get(0, []))
            nxt = dp_event if dp_event is not None else (events[-1] if events else None)
            upcoming = events + ([] if nxt is None else [nxt])
            return _stated(g.epsilon_after(self.releases + 1, upcoming))
        return _stated(g.epsilon_after(self.releases + 1))

    def can_release(self, dp_event: Any = None) -> bool:
        """Whether one more release stays within the budget (:meth:`next_epsilon`)."""
        return self.budget is None or self.next_epsilon(dp_event) <= self.budget

    def check(self, dp_event: Any = None) -> None:
        """Raise :class:`PrivacyBudgetSpent` unless :meth:`can_release`."""
        if not self.can_release(dp_event):
            raise PrivacyBudgetSpent()

    # ------------------------------------------------------------------ replies
    def sent(self, prefix: str = "") -> list[SentReply]:
        """Every release whose key (:meth:`key`) starts with ``prefix``, in order (``"a1b2/"``:
        those of one run on Flower)."""
        return [self._sent[k] for k in self._order if k.startswith(prefix)]

    def lookup(self, request: Any) -> SentReply | None:
        """What the site sent for ``request`` (see :meth:`key`), or None if it never
        answered it."""
        return self._sent.get(self.key(request))

    def record(
        self, request: Any, reply: bytes, dp_event: Any = None, digest: str | None = None
    ) -> None:
        """Count one release answering ``request`` and keep its exact ``reply`` bytes.

        Call it before sending (inside :meth:`transaction` for a ledger on disk): what is
        recorded is counted even if the server never reads it.

        Raises
        ------
        ValueError
            If ``request`` was answered already (re-send :meth:`lookup`'s bytes instead).
        PrivacyBudgetSpent
            If the release would exceed the budget.
        """
        key = self.key(request)
        if key in self._sent:
            raise ValueError(f"request {key!r} was answered already: re-send its reply")
        if not isinstance(reply, bytes | bytearray):
            raise TypeError(f"reply must be bytes, got {type(reply).__name__}")
        self.check(dp_event)
        sent = SentReply(key, bytes(reply), dp_event, digest)
        if self.directory is not None:
            if self._depth == 0:
                raise RuntimeError("record a release on disk inside ledger.transaction()")
            self._write_reply(sent)
        self._add(sent)
        if self.directory is not None:
            self._write_ledger()

    def serve(
        self,
        request: Any,
        compute: Callable[[], tuple[Any, Callable[[float], bytes]]],
        *,
        digest: str | None = None,
        event: Any = None,
    ) -> Served:
        """Answer ``request`` under the site's rules — the one place they are applied, for
        an in-process client and a deployed site alike — holding :meth:`transaction`:

        1. a request answered before gets the bytes sent then (no refit, no fresh noise) —
           unless it asks, under the same key, for something else (``digest``): refused;
        2. a new release that would pass the budget is refused before anything runs;
        3. otherwise ``compute()`` runs the round and returns ``(result, pack)``: a
           ``result`` with ``error`` and ``dp_event`` (its reported event, refused if
           larger than assumed) and ``pack(epsilon)``, the reply's bytes carrying the ε
           the site will have once it is sent; they are recorded *before* they leave.

        Parameters
        ----------
        request : object
            The request's key (:meth:`key`): the round in process, the run token and the
            round on Flower.
        compute : callable
            Runs the round (only when a new release may be made).
        digest : str, optional
            What the request asks beyond its key (see :attr:`SentReply.digest`).
        event : object, optional
            The release's event where it is known before the round runs (a secure share's
            :class:`~cotrain.privacy.mechanisms.secure_votes.SkellamShifts`): checked against
            the budget and recorded unless the round reports its own; default: one like the
            last.

        Returns
        -------
        Served

        Examples
        --------
        >>> from types import SimpleNamespace
        >>> from cotrain.privacy import RandomizedResponse
        >>> ledger = SiteLedger(RandomizedResponse(epsilon=1.0, sensitivity=1, budget=1.5), 2, 10)
        >>> def compute():
        ...     round_ = SimpleNamespace(error=None, dp_event=None)
        ...     return round_, lambda eps: f"eps={eps:.0f}".encode()
        >>> first = ledger.serve(1, compute)
        >>> first.outcome, first.reply, ledger.serve(1, compute).reply
        ('new', b'eps=1', b'eps=1')
        >>> ledger.serve(2, compute).outcome      # ε would reach 2 > 1.5
        'refused'
        """
        with self.transaction():
            sent = self.lookup(request)
            if sent is not None and sent.digest != digest:  # the same name, another question
                other = PrivacyBudgetSpent("request already answered for another question")
                return Served("refused", None, None, other, self.epsilon())
            if sent is not None:
                return Served("repeat", sent.reply, sent.dp_event, None, self.epsilon())
            if not self.can_release(event):
                return Served("refused", None, None, PrivacyBudgetSpent(), self.epsilon())
            result, pack = compute()
            if result.error is not None:
                return Served("failed", None, None, result.error, self.epsilon(), result)
            spent = event if result.dp_event is None else result.dp_event
            if not self.can_release(spent):  # reported larger than assumed
                refused = PrivacyBudgetSpent()
                return Served("refused", None, None, refused, self.epsilon(), result)
            epsilon = self.next_epsilon(spent)
            reply = pack(epsilon)
            self.record(request, reply, spent, digest)
            return Served("new", reply, spent, None, epsilon, result)

    def claim(self, request: Any) -> bool:
        """Mark the release answering ``request`` as gone into a secure sum; False if it
        went into one already (or was never made). A share that entered two sums whose
        sites differ would be revealed by their difference, whatever the sums are called,
        so a secure site contributes each share once (:class:`~cotrain.federation.site.Site`).

        Examples
        --------
        >>> from cotrain.privacy import RandomizedResponse
        >>> ledger = SiteLedger(RandomizedResponse(epsilon=1.0, sensitivity=1), 2, 10)
        >>> ledger.record(("run", 1, "first"), b"share")
        >>> ledger.claim(("run", 1, "first")), ledger.claim(("run", 1, "first"))
        (True, False)
        """
        with self.transaction():
            sent = self.lookup(request)
            if sent is None or sent.claimed:
                return False
            self._sent[sent.key] = dataclasses.replace(sent, claimed=True)
            if self.directory is not None:
                self._write_ledger()
            return True

    def _add(self, sent: SentReply) -> None:
        events = {0: sent.dp_event} if sent.dp_event is not None else None
        self._ledger.record([0], events)
        self._sent[sent.key] = sent
        self._order.append(sent.key)

    # ------------------------------------------------------------------ report, state
    def report(self) -> dict[str, Any]:
        """The site's own figures: ``epsilon``, ``delta``, ``budget``, ``releases``, the
        guarantee (``unit``, ``adversary``, ``relation``: the neighbouring relation of
        ``epsilon``, ``protects``), ``epsilon_by_relation`` (every relation the mechanism
        states a bound under), what it ``counts``, ``mechanism`` and the ``requests``
        answered, in order.

        Examples
        --------
        >>> from cotrain.privacy import RandomizedResponse
        >>> r = SiteLedger(RandomizedResponse(epsilon=1.0, sensitivity=1), 2, 10).report()
        >>> r["releases"], r["epsilon"], r["unit"], r["adversary"], r["relation"]
        (0, 0.0, 'record', 'server', 'add_or_remove')
        """
        g = self._ledger.headline
        return {
            "epsilon": self.epsilon(),
            "delta": float(g.total_delta),
            "budget": self.budget,
            "releases": self.releases,
            "unit": g.unit,
            "adversary": g.adversary,
            "relation": g.relation,
            "epsilon_by_relation": {r: self._ledger.epsilon(0, g, r) for r in g.relations},
            "protects": g.describe(),
            "counts": "every release this site sent, replies the server ignored included",
            "mechanism": repr(self.mechanism),
            "requests": list(self._order),
        }

    def state_dict(self) -> dict[str, Any]:
        """The releases in order: key, reply bytes (as a ``uint8`` array, so checkpoints
        store it as an array) and reported event; and the configuration."""
        return {
            "configuration": self.configuration,
            "releases": [
                {
                    "key": k,
                    "reply": np.frombuffer(self._sent[k].reply, dtype=np.uint8).copy(),
                    "dp_event": _event_json(self._sent[k].dp_event),
                    "digest": self._sent[k].digest,
                    "claimed": self._sent[k].claimed,
                }
                for k in self._order
            ],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put a :meth:`state_dict` back (it must be of the same configuration)."""
        self._check_configuration(state.get("configuration", {}))
        self._reset()
        for item in state["releases"]:
            reply = item["reply"]
            data = reply if isinstance(reply, bytes) else np.asarray(reply, np.uint8).tobytes()
            event = _event_from_json(item.get("dp_event"))
            self._add(_sent(str(item["key"]), data, event, item))

    def _check_configuration(self, stored: Mapping[str, Any]) -> None:
        if dict(stored) != self.configuration:
            raise ValueError(
                f"this site ledger was kept for {dict(stored)}, not {self.configuration}: "
                "a site's releases are accounted under one configuration"
            )

    # ------------------------------------------------------------------ on disk
    @contextlib.contextmanager
    def transaction(self) -> Iterator[SiteLedger]:
        """Hold the ledger's exclusive lock (a ledger on disk: :func:`fcntl.flock`, with
        its state reloaded from disk) around a look-up / check / compute / record step.
        Re-entrant; a ledger in memory needs no lock.

        Examples
        --------
        >>> import tempfile
        >>> from cotrain.privacy import RandomizedResponse
        >>> folder = tempfile.mkdtemp()
        >>> mech = RandomizedResponse(epsilon=1.0, sensitivity=1)
        >>> with SiteLedger(mech, 2, 10, folder).transaction() as ledger:
        ...     if ledger.lookup(("run-a", 1)) is None:
        ...         ledger.record(("run-a", 1), b"reply")
        >>> SiteLedger(mech, 2, 10, folder).releases   # another process sees it
        1
        """
        if self.directory is None or self._depth > 0:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        with exclusive_lock(self.directory / _LOCK_FILE):
            try:
                self._depth = 1
                self._load()
                yield self
            finally:
                self._depth = 0

    def _load(self) -> None:
        assert self.directory is not None
        path = self.directory / _LEDGER_FILE
        if not path.exists():
            self._reset()
            self._write_ledger()
            return
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != _FORMAT:
            raise ValueError(f"{path}: unknown site ledger format {data.get('format')!r}")
        self._check_configuration(data["configuration"])
        self._reset()
        for item in data["releases"]:
            reply = (self.directory / _REPLIES / item["file"]).read_bytes()
            if hashlib.sha256(reply).hexdigest() != item["sha256"]:
                raise ValueError(f"{path}: the reply of {item['key']!r} was changed on disk")
            event = _event_from_json(item.get("dp_event"))
            self._add(_sent(str(item["key"]), reply, event, item))

    def _write_reply(self, sent: SentReply) -> None:
        assert self.directory is not None
        write_atomic(self.directory / _REPLIES / _reply_file(sent.key), sent.reply)

    def _write_ledger(self) -> None:
        assert self.directory is not None
        data = {
            "format": _FORMAT,
            "configuration": self.configuration,
            "releases": [
                {
                    "key": k,
                    "file": _reply_file(k),
                    "sha256": hashlib.sha256(self._sent[k].reply).hexdigest(),
                    "dp_event": _event_json(self._sent[k].dp_event),
                    "digest": self._sent[k].digest,
                    "claimed": self._sent[k].claimed,
                }
                for k in self._order
            ],
            "epsilon": self.epsilon(),
            "delta": self.delta,
            "budget": self.budget,
        }
        text = json.dumps(data, indent=1, sort_keys=True)
        write_atomic(self.directory / _LEDGER_FILE, text.encode("utf-8"))

    def __getstate__(self) -> dict[str, Any]:
        # the composition's running state is rebuilt from the releases (not pickled)
        state = {k: v for k, v in self.__dict__.items() if k != "_ledger"}
        state["_depth"] = 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        sent = [state["_sent"][k] for k in state["_order"]]
        self._reset()
        for item in sent:
            self._add(item)

    def __repr__(self) -> str:
        where = "memory" if self.directory is None else str(self.directory)
        return f"SiteLedger({self.mechanism!r}, releases={self.releases}, in {where})"


def quote_site_epsilon(
    report: dict[str, Any], site_epsilon: Mapping[int, float | None], mechanism: Any
) -> dict[str, Any]:
    """The server's privacy report with each client's own ledger ε quoted beside its count.

    ``site_epsilon`` maps a client to the ε its last reply carried (its
    :meth:`SiteLedger.epsilon`); it goes into the client entries (``"site_epsilon"``,
    None where the client never said) of the guarantee ``mechanism`` belongs to. In an
    honest run it equals the server's ``"epsilon"``; where they differ, the site's is the
    one that binds (it counts every release sent).

    Examples
    --------
    >>> from cotrain.privacy import RandomizedResponse
    >>> mech = RandomizedResponse(epsilon=1.0, sensitivity=1)
    >>> server = PrivacyLedger([mech], 2, 2, 10)
    >>> server.record([0, 1])
    >>> clients = quote_site_epsilon(server.report(), {0: 0.99}, mech)["clients"]
    >>> [(round(c["epsilon"], 3), c["site_epsilon"]) for c in clients]
    [(1.0, 0.99), (1.0, None)]
    """
    unit, adversary = guarantee_of(mechanism)
    for g in report.get("guarantees", []):
        if (g.get("unit"), g.get("adversary")) != (unit, adversary):
            continue
        for entry in g.get("clients", []):
            value = site_epsilon.get(int(entry["client"]))
            entry["site_epsilon"] = None if value is None else float(value)
    return report


def _stated(epsilon: float | None) -> float:
    """The ε of the guarantee's own relation (always stated: see ``Guarantee.relation``)."""
    if epsilon is None:  # pragma: no cover - a guarantee states its own relation
        raise RuntimeError("the site's guarantee states no ε under its own relation")
    return float(epsilon)


def _event_json(event: Any) -> dict[str, Any] | None:
    if event is None:
        return None
    return event.to_json() if isinstance(event, SkellamShifts) else event_to_json(event)


def _event_from_json(data: dict[str, Any] | None) -> Any:
    if data is None:
        return None
    if data.get("type") == "SkellamShifts":
        return SkellamShifts.from_json(data)
    return event_from_json(data)


def _sent(key: str, reply: bytes, event: Any, item: Mapping[str, Any]) -> SentReply:
    return SentReply(key, reply, event, item.get("digest"), bool(item.get("claimed", False)))


def _reply_file(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32] + ".bin"
