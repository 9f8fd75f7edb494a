"""Per-client privacy bookkeeping of a federated run: what was released, its ε, the budget.

Every accounted mechanism states what its ε protects (``unit``: one private ``"record"`` of
a client, or one released ``"label"``) and against whom (``adversary``: the ``"server"``,
for noise drawn at the client, or ``"broadcast observers"``, for noise the server adds to
the consensus). The ledger keeps one :class:`Guarantee` per (unit, adversary): the
mechanisms of a guarantee are composed with each other over the rounds; guarantees of
different units or adversaries are never summed. A guarantee against the server also holds
against the broadcast observers (they see a post-processing of what the server sees).

The ledger holds no noise seed: privacy noise is drawn by each client from its own entropy
(see :class:`cotrain.FederatedCoTrainer`, ``reproducible_noise``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cotrain.privacy.accounting.composition import RELATIONS, RunningComposition, check_relation
from cotrain.wire.dp_events import event_from_json, event_to_json

__all__ = [
    "Guarantee",
    "PrivacyLedger",
    "assumptions",
    "guarantee_of",
    "relation_events",
]

#: The order in which guarantees are reported; the first present is the headline.
_ORDER = (
    ("record", "server"),
    ("record", "broadcast observers"),
    ("label", "server"),
    ("label", "broadcast observers"),
)


def guarantee_of(mechanism: Any) -> tuple[str, str]:
    """(unit, adversary) of a mechanism: what its ε protects and against whom.

    A mechanism that declares neither is taken as record-level against the server (a
    duck-typed client-side mechanism whose author vouches for its ``dp_event``).

    Examples
    --------
    >>> from consensus import NoisyArgmax
    >>> from cotrain.privacy import RandomizedResponse
    >>> guarantee_of(RandomizedResponse(epsilon=1.0, unit="label"))
    ('label', 'server')
    >>> guarantee_of(NoisyArgmax(sigma=5.0))
    ('record', 'broadcast observers')
    """
    unit = getattr(mechanism, "unit", "record")
    adversary = getattr(mechanism, "adversary", "server")
    if unit not in ("record", "label"):
        raise ValueError(
            f"{type(mechanism).__name__}.unit must be 'record' or 'label', got {unit!r}"
        )
    if adversary not in ("server", "broadcast observers"):
        raise ValueError(
            f"{type(mechanism).__name__}.adversary must be 'server' or 'broadcast observers', "
            f"got {adversary!r}"
        )
    return str(unit), str(adversary)


def relation_events(mechanism: Any, n_classes: int, n_labels: int) -> dict[str, Any]:
    """One round's event of ``mechanism`` under every relation it states a bound for.

    A mechanism with ``relation_event(n_classes, n_labels, relation)`` (every
    :class:`~cotrain.privacy.LabelMechanism`) states the relations for which it returns an
    event; a duck-typed one (e.g. a noisy consensus) states its ``dp_event`` under its
    ``neighbors`` attribute, ``"add_or_remove"`` when it declares none (its author vouches for
    its ``dp_event``, as for its unit and adversary). A value may be None: the mechanism
    releases nothing per round under that relation (its one-off releases still count).

    Examples
    --------
    >>> from consensus import NoisyArgmax
    >>> from cotrain.privacy import RandomizedResponse
    >>> sorted(relation_events(RandomizedResponse(epsilon=1.0, sensitivity=3), 10, 100))
    ['add_or_remove', 'replace_one']
    >>> sorted(relation_events(NoisyArgmax(sigma=5.0), 10, 100))   # it states both
    ['add_or_remove', 'replace_one']
    >>> class Duck:   # a duck-typed mechanism states its dp_event under its neighbors
    ...     def dp_event(self, n_classes, n_labels):
    ...         return None
    >>> sorted(relation_events(Duck(), 10, 100))
    ['add_or_remove']
    """
    if getattr(mechanism, "reports_events", False):  # its events come with its releases
        return {check_relation(getattr(mechanism, "neighbors", RELATIONS[0])): None}
    hook = getattr(mechanism, "relation_event", None)
    if callable(hook):
        events = {r: hook(n_classes, n_labels, r) for r in RELATIONS}
        return {r: e for r, e in events.items() if e is not None}
    stated = check_relation(getattr(mechanism, "neighbors", RELATIONS[0]))
    return {stated: mechanism.dp_event(n_classes, n_labels)}


def assumptions(adversary: str, unit: str) -> list[str]:
    """The assumptions a guarantee of (unit, adversary) rests on, in plain sentences.

    Examples
    --------
    >>> print(assumptions("server", "record")[1][:71])
    sites colluding with the server: each site's guarantee holds on its own
    """
    out = [
        "the server may re-ask a round or ask past the budget: covered only by the site's own "
        "ledger, cache and budget (cotrain.privacy.ledgers.site_ledger), which answers a repeated "
        "request with the bytes it sent the first time and refuses past its budget; a "
        "ledger's ε counts the releases it recorded",
    ]
    if adversary == "server":
        out += [
            "sites colluding with the server: each site's guarantee holds on its own records; "
            "a colluding site learns nothing more than the server (no cross-site guarantee is "
            "claimed)",
            "the noise (and the teachers' shard key) is drawn at the client from its "
            "operating system's entropy and never sent; with reproducible_noise=True "
            "(simulations only) it is seeded and the guarantee does not hold against whoever "
            "knows the seed",
        ]
    else:
        out += [
            "holds only against an honest server: the server adds the noise and sees the "
            "clean votes, so the server, and any site colluding with it, is not covered; the "
            "guarantee is against observers of the broadcast",
        ]
    out.append(
        "the label space and the sampling parameters are public configuration; nothing else "
        "a site sends depends on its private records outside the accounted releases"
    )
    if unit == "label":
        out.append("unit 'label': ε protects one released public label, not a private record")
    return out


@dataclass
class Guarantee:
    """The mechanisms that share one (unit, adversary), composed per client over rounds.

    Three kinds of release compose here: a per-round event the server can compute itself
    (``mechanism.dp_event(C, |U|)``, the same for every client and round, so ε depends
    only on how many rounds a client took part in and is cached by that count), a per-round
    event the client reports (a mechanism with ``reports_events``, e.g. a DP-trained model),
    and one-off (ε, δ) releases made before the run (FedAUX certainty scores), added by basic
    composition: ``ε = ε_rounds(δ) + Σε_once`` at ``δ + Σδ_once`` (:attr:`total_delta`).

    Each is kept under both neighbouring relations (:data:`~cotrain.privacy.RELATIONS`) for
    which every mechanism of the guarantee states a bound (:func:`relation_events`); the
    guarantee's :attr:`relation` is the first of them, add/remove whenever every mechanism
    states it. ``epsilon_after(..., relation=r)`` is None for a relation not stated.

    Examples
    --------
    >>> from cotrain.privacy import RandomizedResponse
    >>> g = Guarantee("record", "server", delta=1e-5)
    >>> g.add(RandomizedResponse(epsilon=1.0, sensitivity=1), n_classes=2, n_labels=10)
    >>> round(g.epsilon_after(3), 3)        # 3 rounds of pure ε = 1, composed exactly
    3.0
    >>> g.relation, round(g.epsilon_after(3, relation="replace_one"), 3)   # s* = 2 labels
    ('add_or_remove', 6.0)
    """

    unit: str
    adversary: str
    delta: float
    budget: float | None = None
    mechanisms: list[Any] = field(default_factory=list)
    reported: bool = False

    def __post_init__(self) -> None:
        #: relation -> per-round events (a relation is dropped once a mechanism omits it)
        self.events: dict[str, list[Any]] = {r: [] for r in RELATIONS}
        #: relation -> one-off (ε, δ) releases
        self.once_by_relation: dict[str, list[tuple[float, float]]] = {r: [] for r in RELATIONS}
        self._by_rounds: dict[tuple[str, int], float] = {}
        self._running: dict[str, tuple[RunningComposition, int]] = {}
        self._reporter: Any = None

    def add(self, mechanism: Any, n_classes: int, n_labels: int) -> None:
        """Add a mechanism released every round (and its one-off releases, if any)."""
        self.mechanisms.append(mechanism)
        budget = getattr(mechanism, "budget", None)
        if budget is not None:
            self.budget = float(budget) if self.budget is None else min(self.budget, budget)
        if getattr(mechanism, "reports_events", False):
            self.reported = True
            self._reporter = mechanism
        stated = relation_events(mechanism, n_classes, n_labels)
        once = getattr(mechanism, "one_off_privacy", None)
        pair = once() if callable(once) else None
        for r in list(self.events):
            if r not in stated:  # the mechanism states no bound under r: r is not reported
                del self.events[r]
                del self.once_by_relation[r]
                continue
            if stated[r] is not None and not getattr(mechanism, "reports_events", False):
                self.events[r].append(stated[r])
            if pair is not None:
                self.once_by_relation[r].append((float(pair[0]), float(pair[1])))
        if not self.events:
            raise ValueError(
                f"the mechanisms of the ({self.unit}, {self.adversary}) guarantee state their "
                "privacy under no common neighbouring relation (add_or_remove or replace_one)"
            )

    # ------------------------------------------------------------------ relations
    @property
    def relation(self) -> str:
        """The relation of the headline ε: add/remove when every mechanism states it."""
        return next(iter(self.events))

    @property
    def relations(self) -> tuple[str, ...]:
        """Every relation under which this guarantee's ε is known."""
        return tuple(self.events)

    @property
    def once(self) -> list[tuple[float, float]]:
        """The one-off (ε, δ) releases under :attr:`relation`."""
        return self.once_by_relation[self.relation]

    # ------------------------------------------------------------------ arithmetic
    @property
    def total_delta(self) -> float:
        """δ of the reported ε: the rounds' δ plus the one-off releases' δ."""
        return self.delta + sum(d for _, d in self.once)

    def epsilon_after(
        self, rounds: int, reported: list[Any] | None = None, relation: str | None = None
    ) -> float | None:
        """Total ε of a client that took part in ``rounds`` rounds (plus its reported
        per-round events, for a DP-trained model), under ``relation`` (default: the
        guarantee's :attr:`relation`); None when a mechanism states no bound under it."""
        rel = self.relation if relation is None else check_relation(relation)
        if rel not in self.events:
            return None
        once = sum(e for e, _ in self.once_by_relation[rel])
        if not self.events[rel] and not reported:  # the one-off releases precede round 1
            return once
        if reported:  # client-specific: the mechanism composes its own events
            if self.events[rel]:
                raise NotImplementedError(
                    "a guarantee that mixes client-reported events (DP-SGD) with per-round "
                    "label noise is not accounted"
                )
            eps = self._reported_epsilon(reported, rel)
            return None if eps is None else eps + once
        key = (rel, int(rounds))
        if key not in self._by_rounds:
            self._by_rounds[key] = self._compose_rounds(rel, int(rounds)) + once
        return self._by_rounds[key]

    def epsilon_by_relation(
        self, rounds: int, reported: list[Any] | None = None
    ) -> dict[str, float | None]:
        """``{relation: ε}`` for both relations (None where no bound is stated)."""
        return {r: self.epsilon_after(rounds, reported, r) for r in RELATIONS}

    def _reported_epsilon(self, reported: list[Any], relation: str) -> float | None:
        method = self._reporter.reported_epsilon
        if "neighbors" in inspect.signature(method).parameters:
            return float(method(reported, self.delta, neighbors=relation))
        if relation == getattr(self._reporter, "neighbors", RELATIONS[0]):
            return float(method(reported, self.delta))
        return None

    def _compose_rounds(self, relation: str, rounds: int) -> float:
        """ε of ``rounds`` rounds of the per-round events, advanced incrementally."""
        running, done = self._running.get(relation, (None, 0))
        if running is None or rounds < done:
            running, done = RunningComposition(self.delta, relation=relation), 0
        # one round at a time, so the state after r rounds (and its floating-point value)
        # is the same whatever path reached it: a resumed run reports the same ε
        while done < rounds:
            for event in self.events[relation]:
                running.compose(event, 1)
            done += 1
        self._running[relation] = (running, done)
        return running.epsilon()

    def assumptions(self) -> list[str]:
        """The assumptions this guarantee rests on (:func:`assumptions`)."""
        return assumptions(self.adversary, self.unit)

    def describe(self) -> str:
        """Plain words: what one ε protects, under which relation, against whom, assuming
        what.

        Examples
        --------
        >>> g = Guarantee("record", "server", delta=1e-5)
        >>> g.events = {"add_or_remove": [], "replace_one": []}
        >>> print(g.describe().split(". Assumptions")[0])
        ε protects one private training record of a client against the server (which may \
deviate), under add/remove neighbours (one record added or removed; the replace-one ε is \
given too)
        """
        what = "one private training record" if self.unit == "record" else "one released label"
        if self.adversary == "server":
            whom = "the server (which may deviate)"
        else:
            whom = f"{self.adversary} (not against the server)"
        if self.relation == "add_or_remove":
            how = "under add/remove neighbours (one record added or removed"
            how += "; the replace-one ε is given too)" if len(self.events) > 1 else ")"
        else:
            how = "under replace-one neighbours only (no add/remove bound is stated)"
        return f"ε protects {what} of a client against {whom}, {how}. Assumptions: " + (
            "; ".join(self.assumptions())
        )


def _stated(epsilon: float | None) -> float:
    """ε under a guarantee's own relation, which every mechanism of it states."""
    if epsilon is None:  # pragma: no cover - Guarantee.relation is stated by construction
        raise RuntimeError("no ε is stated under the guarantee's own relation")
    return epsilon


class PrivacyLedger:
    """What each client has released under privacy mechanisms, and its ε, per guarantee.

    Every round a client takes part in, its labels on the public pool pass once through
    each of ``mechanisms`` (a client-side mechanism such as
    :class:`cotrain.privacy.SubsampleAndAggregate`, and/or a noisy consensus such as
    ``consensus.NoisyArgmax``). Mechanisms are grouped by what their ε protects and
    against whom (:func:`guarantee_of`); each group is composed on its own, at the smallest
    δ of its mechanisms, incrementally over rounds. The headline ε (:meth:`max_epsilon`,
    the history's ``epsilon``) is the first of: record-level against the server,
    record-level against broadcast observers, label-level against the server, label-level
    against broadcast observers.

    Parameters
    ----------
    mechanisms : list
        Objects with ``dp_event(n_classes, n_labels)``, ``delta`` and ``budget`` (and
        optionally ``unit``, ``adversary``, ``reports_events``, ``one_off_privacy()``).
    n_clients, n_classes, n_labels : int
        Federation size, global classes, and labels released per round (|U|).

    Examples
    --------
    >>> from cotrain.privacy import RandomizedResponse
    >>> ledger = PrivacyLedger([RandomizedResponse(epsilon=1.0, sensitivity=1)], 3, 2, 100)
    >>> ledger.record([0, 1])
    >>> ledger.rounds_taken.tolist(), round(ledger.epsilon(0), 3), ledger.epsilon(2)
    ([1, 1, 0], 1.0, 0.0)
    >>> ledger.headline.unit, ledger.headline.adversary
    ('record', 'server')
    """

    def __init__(
        self, mechanisms: list[Any], n_clients: int, n_classes: int, n_labels: int
    ) -> None:
        self.mechanisms = list(mechanisms)
        self.n_classes = n_classes
        self.n_labels = n_labels
        self.rounds_taken = np.zeros(n_clients, dtype=np.int64)
        #: client -> the per-round events it reported (DP-trained models), in order
        self.reported: dict[int, list[Any]] = {}
        groups: dict[tuple[str, str], Guarantee] = {}
        for m in self.mechanisms:
            key = guarantee_of(m)
            if key not in groups:
                groups[key] = Guarantee(*key, delta=0.0)
            if getattr(m, "delta", None) is not None:  # one-off releases carry their own δ
                d = float(m.delta)
                groups[key].delta = d if groups[key].delta == 0.0 else min(groups[key].delta, d)
        for m in self.mechanisms:  # after every δ is known
            groups[guarantee_of(m)].add(m, n_classes, n_labels)
        self.guarantees = [groups[k] for k in _ORDER if k in groups]
        self.headline = self.guarantees[0]
        self.delta = self.headline.total_delta
        self.budget = self.headline.budget

    # ------------------------------------------------------------------ ε
    def _reported(self, client: int, extra: Any = None) -> list[Any]:
        events = list(self.reported.get(int(client), []))
        return events + ([extra] if extra is not None else [])

    def epsilon_after(self, rounds: int, guarantee: Guarantee | None = None) -> float:
        """Total ε of a client that took part in ``rounds`` rounds (headline guarantee;
        clients that report their own events are counted in :meth:`epsilon`)."""
        return _stated((guarantee or self.headline).epsilon_after(rounds))

    def epsilon(
        self, client: int, guarantee: Guarantee | None = None, relation: str | None = None
    ) -> Any:
        """Total ε spent so far by ``client`` under ``guarantee`` (default: the headline),
        under ``relation`` (default: the guarantee's, add/remove when stated; None for a
        relation the mechanisms state no bound under)."""
        g = guarantee or self.headline
        reported = self._reported(client) if g.reported else None
        return g.epsilon_after(int(self.rounds_taken[client]), reported, relation)

    def max_epsilon(self, guarantee: Guarantee | None = None, relation: str | None = None) -> Any:
        """The largest total ε over clients (what a round's record reports), under
        ``relation`` (default: the guarantee's; None where no bound is stated)."""
        g = guarantee or self.headline
        if relation is not None and check_relation(relation) not in g.relations:
            return None
        if g.reported:
            return max(
                (self.epsilon(i, g, relation) for i in range(len(self.rounds_taken))),
                default=0.0,
            )
        return g.epsilon_after(int(self.rounds_taken.max()), None, relation)

    def epsilon_by_relation(self, guarantee: Guarantee | None = None) -> dict[str, Any]:
        """``{relation: max ε over clients}`` for both relations (None: no bound stated).

        Examples
        --------
        >>> from cotrain.privacy import SubsampleAndAggregate
        >>> ledger = PrivacyLedger([SubsampleAndAggregate(sigma=40.0)], 1, 10, 300)
        >>> ledger.record([0]); ledger.record([0])
        >>> {r: round(e, 4) for r, e in ledger.epsilon_by_relation().items()}
        {'add_or_remove': 3.7086, 'replace_one': 8.3854}
        """
        return {r: self.max_epsilon(guarantee, r) for r in RELATIONS}

    def would_exceed_budget(self, clients: Any, upcoming: dict[int, Any] | None = None) -> bool:
        """Whether one more release by any of ``clients`` would exceed a budget.

        A client that reports its own events is assumed to report one more like its last
        (or ``upcoming[client]``); before its first report, only the other events count.
        """
        ids = np.asarray(clients, dtype=np.int64).reshape(-1)
        for g in self.guarantees:
            if g.budget is None or ids.size == 0:
                continue
            for i in ids:
                i = int(i)
                nxt = None
                if g.reported:
                    last = self.reported.get(i)
                    nxt = (upcoming or {}).get(i, last[-1] if last else None)
                    eps = _stated(
                        g.epsilon_after(
                            int(self.rounds_taken[i]) + 1, self._reported(i, nxt) or None
                        )
                    )
                else:
                    eps = _stated(g.epsilon_after(int(self.rounds_taken[i]) + 1))
                if eps > g.budget:
                    return True
        return False

    def report_problem(self, event: Any) -> str | None:
        """What is wrong with a client's reported privacy event, or None.

        A DP-trained client must report its round's event (a dp-accounting ``DpEvent``);
        anything else would leave its ε unknown, so the server treats that upload as a
        client failure. Without such a mechanism, nothing is expected.

        Examples
        --------
        >>> from cotrain.privacy import RandomizedResponse
        >>> PrivacyLedger([RandomizedResponse(epsilon=1.0)], 2, 2, 10).report_problem(None) is None
        True
        """
        if not any(g.reported for g in self.guarantees):
            return None
        try:
            import dp_accounting
        except ImportError:  # pragma: no cover - DP-SGD needs it
            return "dp-accounting is needed to account a DP-trained client"
        if not isinstance(event, dp_accounting.DpEvent):
            return (
                "a DP-trained client must report its round's privacy event (a dp_accounting "
                f"DpEvent), got {type(event).__name__}"
            )
        return None

    def record(self, clients: Any, events: dict[int, Any] | None = None) -> None:
        """Note that ``clients`` released their labels once more (``events``: the
        per-round events reported by clients with a DP-trained model)."""
        ids = np.asarray(clients, dtype=np.int64)
        self.rounds_taken[ids] += 1
        for i, event in (events or {}).items():
            if event is not None:
                self.reported.setdefault(int(i), []).append(event)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The rounds each client has released labels in, and the events clients reported."""
        reported = {str(k): [event_to_json(e) for e in v] for k, v in self.reported.items()}
        return {"rounds_taken": self.rounds_taken.copy(), "reported": reported}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        rounds = np.asarray(state["rounds_taken"], dtype=np.int64)
        if rounds.shape != self.rounds_taken.shape or (rounds < 0).any():
            raise ValueError(
                f"rounds_taken must be {self.rounds_taken.shape[0]} counts >= 0, got {rounds!r}"
            )
        self.rounds_taken = rounds.copy()
        self.reported = {
            int(k): [event_from_json(e) for e in v] for k, v in state.get("reported", {}).items()
        }

    def report(self) -> dict[str, Any]:
        """Per-guarantee and per-client totals, each ε with its unit, relation and adversary.

        Keys: ``unit``, ``adversary``, ``relation`` (the headline relation,
        ``"add_or_remove"`` whenever every mechanism states it), ``epsilon_by_relation``
        (``{"add_or_remove": ε, "replace_one": ε}``, the max over clients; None where no
        bound is stated), ``assumptions`` (plain sentences), ``protects`` (all of it in
        words), ``delta``, ``budget`` (under the headline relation), ``max_epsilon`` and
        ``clients`` (``{"client", "rounds", "epsilon", "epsilon_by_relation", "relation",
        "delta", "unit", "adversary"}`` each) describe the headline guarantee; ``guarantees``
        lists every guarantee the same way (plus its ``mechanisms``); ``mechanisms`` lists
        them all.

        Examples
        --------
        >>> from cotrain.privacy import SubsampleAndAggregate
        >>> ledger = PrivacyLedger([SubsampleAndAggregate(sigma=40.0)], 2, 10, 300)
        >>> ledger.record([0, 1]); ledger.record([0])
        >>> r = ledger.report()
        >>> r["relation"], r["adversary"], round(r["max_epsilon"], 4)
        ('add_or_remove', 'server', 3.7086)
        >>> {k: round(v, 4) for k, v in r["clients"][1]["epsilon_by_relation"].items()}
        {'add_or_remove': 2.5017, 'replace_one': 5.5448}
        >>> len(r["assumptions"]) >= 2
        True
        """
        guarantees = []
        for g in self.guarantees:
            clients = []
            for i, rounds in enumerate(self.rounds_taken):
                by_relation = {rel: self.epsilon(i, g, rel) for rel in RELATIONS}
                clients.append(
                    {
                        "client": i,
                        "rounds": int(rounds),
                        "epsilon": by_relation[g.relation],
                        "epsilon_by_relation": by_relation,
                        "relation": g.relation,
                        "delta": g.total_delta,
                        "unit": g.unit,
                        "adversary": g.adversary,
                    }
                )
            guarantees.append(
                {
                    "unit": g.unit,
                    "adversary": g.adversary,
                    "relation": g.relation,
                    "protects": g.describe(),
                    "assumptions": g.assumptions(),
                    "mechanisms": [repr(m) for m in g.mechanisms],
                    "delta": g.total_delta,
                    "budget": g.budget,
                    "clients": clients,
                    "max_epsilon": self.max_epsilon(g),
                    "epsilon_by_relation": self.epsilon_by_relation(g),
                }
            )
        head = guarantees[0]
        keys = ("unit", "adversary", "relation", "protects", "assumptions", "delta", "budget")
        return {
            "mechanisms": [repr(m) for m in self.mechanisms],
            **{k: head[k] for k in keys},
            "clients": head["clients"],
            "max_epsilon": head["max_epsilon"],
            "epsilon_by_relation": head["epsilon_by_relation"],
            "guarantees": guarantees,
        }
