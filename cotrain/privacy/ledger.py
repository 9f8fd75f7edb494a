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

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cotrain.privacy.accounting import RunningComposition

__all__ = ["Guarantee", "PrivacyLedger", "event_from_json", "event_to_json", "guarantee_of"]

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
    >>> guarantee_of(RandomizedResponse(1.0, unit="label"))
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


def event_to_json(event: Any) -> dict[str, Any]:
    """A dp-accounting event as JSON types (for checkpoints: no pickle).

    Examples
    --------
    >>> import dp_accounting as dp
    >>> e = dp.SelfComposedDpEvent(dp.PoissonSampledDpEvent(0.01, dp.GaussianDpEvent(1.0)), 5)
    >>> event_from_json(event_to_json(e)) == e
    True
    """
    import attr

    if not attr.has(type(event)) or not type(event).__module__.startswith("dp_accounting"):
        raise TypeError(f"only dp_accounting events can be stored, got {type(event).__name__}")
    out: dict[str, Any] = {"type": type(event).__name__}
    for f in attr.fields(type(event)):
        value = getattr(event, f.name)
        if isinstance(value, list | tuple):
            out[f.name] = [event_to_json(v) for v in value]
        elif attr.has(type(value)):
            out[f.name] = event_to_json(value)
        else:
            out[f.name] = value
    return out


def event_from_json(data: dict[str, Any]) -> Any:
    """The inverse of :func:`event_to_json` (only dp_accounting's own event classes)."""
    import dp_accounting

    name = data.get("type")
    cls = getattr(dp_accounting, str(name), None)
    if cls is None or not (isinstance(cls, type) and issubclass(cls, dp_accounting.DpEvent)):
        raise ValueError(f"not a dp_accounting event type: {name!r}")
    kwargs = {}
    for key, value in data.items():
        if key == "type":
            continue
        if isinstance(value, dict):
            value = event_from_json(value)
        elif isinstance(value, list):
            value = [event_from_json(v) for v in value]
        kwargs[key] = value
    return cls(**kwargs)


@dataclass
class Guarantee:
    """The mechanisms that share one (unit, adversary), composed per client over rounds.

    Three kinds of release compose here: a per-round event the server can compute itself
    (``mechanism.dp_event(C, |U|)``, the same for every client and round, so ε depends
    only on how many rounds a client took part in and is cached by that count), a per-round
    event the client reports (a mechanism with ``reports_events``, e.g. a DP-trained model),
    and one-off (ε, δ) releases made before the run (FedAUX certainty scores), added by basic
    composition: ``ε = ε_rounds(δ) + Σε_once`` at ``δ + Σδ_once`` (:attr:`total_delta`).

    Examples
    --------
    >>> from cotrain.privacy import RandomizedResponse
    >>> g = Guarantee("record", "server", delta=1e-5)
    >>> g.add(RandomizedResponse(epsilon=1.0, sensitivity=1), n_classes=2, n_labels=10)
    >>> round(g.epsilon_after(3), 3)        # 3 rounds of pure ε = 1, composed exactly
    3.0
    """

    unit: str
    adversary: str
    delta: float
    budget: float | None = None
    mechanisms: list[Any] = field(default_factory=list)
    round_events: list[Any] = field(default_factory=list)
    reported: bool = False
    once: list[tuple[float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_rounds: dict[int, float] = {0: 0.0}
        self._running: RunningComposition | None = None
        self._reporter: Any = None
        self._running_rounds = 0

    def add(self, mechanism: Any, n_classes: int, n_labels: int) -> None:
        """Add a mechanism released every round (and its one-off releases, if any)."""
        self.mechanisms.append(mechanism)
        budget = getattr(mechanism, "budget", None)
        if budget is not None:
            self.budget = float(budget) if self.budget is None else min(self.budget, budget)
        if getattr(mechanism, "reports_events", False):
            self.reported = True
            self._reporter = mechanism
        else:
            event = mechanism.dp_event(n_classes, n_labels)
            if event is not None:
                self.round_events.append(event)
        once = getattr(mechanism, "one_off_privacy", None)
        if callable(once) and once() is not None:
            eps, delta = once()
            self.once.append((float(eps), float(delta)))

    # ------------------------------------------------------------------ arithmetic
    @property
    def total_delta(self) -> float:
        """δ of the reported ε: the rounds' δ plus the one-off releases' δ."""
        return self.delta + sum(d for _, d in self.once)

    def _once_epsilon(self) -> float:
        return sum(e for e, _ in self.once)

    def epsilon_after(self, rounds: int, reported: list[Any] | None = None) -> float:
        """Total ε of a client that took part in ``rounds`` rounds (plus its reported
        per-round events, for a DP-trained model)."""
        if not self.round_events and not reported:  # the one-off releases precede round 1
            return self._once_epsilon()
        if reported:  # client-specific: the mechanism composes its own events
            if self.round_events:
                raise NotImplementedError(
                    "a guarantee that mixes client-reported events (DP-SGD) with per-round "
                    "label noise is not accounted"
                )
            return self._reporter.reported_epsilon(reported, self.delta) + self._once_epsilon()
        if rounds not in self._by_rounds:
            self._by_rounds[rounds] = self._compose_rounds(rounds) + self._once_epsilon()
        return self._by_rounds[rounds]

    def _compose_rounds(self, rounds: int) -> float:
        """ε of ``rounds`` rounds of the per-round events, advanced incrementally."""
        if self._running is None or rounds < self._running_rounds:
            self._running = RunningComposition(self.delta)
            self._running_rounds = 0
        # one round at a time, so the state after r rounds (and its floating-point value)
        # is the same whatever path reached it: a resumed run reports the same ε
        while self._running_rounds < rounds:
            for event in self.round_events:
                self._running.compose(event, 1)
            self._running_rounds += 1
        return self._running.epsilon()

    def describe(self) -> str:
        """Plain words: what one ε of this guarantee protects, against whom."""
        what = "one private training record" if self.unit == "record" else "one released label"
        whom = "the server" if self.adversary == "server" else self.adversary
        return f"ε protects {what} of a client against {whom}"


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
        return (guarantee or self.headline).epsilon_after(rounds)

    def epsilon(self, client: int, guarantee: Guarantee | None = None) -> float:
        """Total ε spent so far by ``client`` under ``guarantee`` (default: the headline)."""
        g = guarantee or self.headline
        reported = self._reported(client) if g.reported else None
        return g.epsilon_after(int(self.rounds_taken[client]), reported)

    def max_epsilon(self, guarantee: Guarantee | None = None) -> float:
        """The largest total ε over clients (what a round's record reports)."""
        g = guarantee or self.headline
        if g.reported:
            return max((self.epsilon(i, g) for i in range(len(self.rounds_taken))), default=0.0)
        return g.epsilon_after(int(self.rounds_taken.max()))

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
                    eps = g.epsilon_after(
                        int(self.rounds_taken[i]) + 1, self._reported(i, nxt) or None
                    )
                else:
                    eps = g.epsilon_after(int(self.rounds_taken[i]) + 1)
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
        >>> PrivacyLedger([RandomizedResponse(1.0)], 2, 2, 10).report_problem(None) is None
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
        """Per-guarantee and per-client totals, each ε with its unit and adversary.

        Keys: ``unit``, ``adversary``, ``delta``, ``budget``, ``max_epsilon`` and
        ``clients`` (``{"client", "rounds", "epsilon", "delta", "unit", "adversary"}``
        each) describe the headline
        guarantee; ``guarantees`` lists every guarantee the same way (plus its
        ``mechanisms`` and a sentence, ``protects``); ``mechanisms`` lists them all.
        """
        guarantees = []
        for g in self.guarantees:
            guarantees.append(
                {
                    "unit": g.unit,
                    "adversary": g.adversary,
                    "protects": g.describe(),
                    "mechanisms": [repr(m) for m in g.mechanisms],
                    "delta": g.total_delta,
                    "budget": g.budget,
                    "clients": [
                        {
                            "client": i,
                            "rounds": int(r),
                            "epsilon": self.epsilon(i, g),
                            "delta": g.total_delta,
                            "unit": g.unit,
                            "adversary": g.adversary,
                        }
                        for i, r in enumerate(self.rounds_taken)
                    ],
                    "max_epsilon": self.max_epsilon(g),
                }
            )
        head = guarantees[0]
        return {
            "mechanisms": [repr(m) for m in self.mechanisms],
            **{k: head[k] for k in ("unit", "adversary", "protects", "delta", "budget")},
            "clients": head["clients"],
            "max_epsilon": head["max_epsilon"],
            "guarantees": guarantees,
        }
