"""Per-client privacy bookkeeping of a federated run: seeds, events, ε spent, budget."""

from __future__ import annotations

from typing import Any

import numpy as np

from cotrain.privacy.accounting import epsilon_spent


class PrivacyLedger:
    """What each client has released under privacy mechanisms, and its ε.

    Every round a client takes part in, its labels on the public pool pass once through
    each of ``mechanisms`` (a client-side mechanism such as ``RandomizedResponse``, and/or a
    noisy consensus such as ``consensus.NoisyArgmax``); the ledger composes those events
    (:func:`cotrain.privacy.epsilon_spent`) into the total ε spent at the smallest δ of the
    mechanisms. Composing a client-side mechanism with GNMax over its output is an upper
    bound (GNMax is then post-processing of already private labels). All rounds release the
    same number of labels, so a client's ε depends only on how many rounds it took part
    in; the ledger caches it by that count.

    Parameters
    ----------
    mechanisms : list
        Objects with ``dp_event(n_classes, n_labels)``, ``delta`` and ``budget``.
    n_clients, n_classes, n_labels : int
        Federation size, global classes, and labels released per round (|U|).
    seed : numpy.random.SeedSequence
        Root of the client-side mechanism's randomness; each (round, client) gets its own
        stream, so results do not depend on the order in which clients run.

    Examples
    --------
    >>> from cotrain.privacy import RandomizedResponse
    >>> ledger = PrivacyLedger([RandomizedResponse(epsilon=1.0)], 3, 2, 100,
    ...                        np.random.SeedSequence(0))
    >>> ledger.record([0, 1])
    >>> ledger.rounds_taken.tolist(), ledger.epsilon(2)
    ([1, 1, 0], 0.0)
    """

    def __init__(
        self,
        mechanisms: list[Any],
        n_clients: int,
        n_classes: int,
        n_labels: int,
        seed: np.random.SeedSequence,
    ) -> None:
        self.mechanisms = list(mechanisms)
        self.delta = min(m.delta for m in self.mechanisms)
        budgets = [m.budget for m in self.mechanisms if getattr(m, "budget", None) is not None]
        self.budget = min(budgets) if budgets else None
        self.n_classes = n_classes
        self.n_labels = n_labels
        self.rounds_taken = np.zeros(n_clients, dtype=np.int64)
        self._seed = seed
        self._eps_by_rounds: dict[int, float] = {0: 0.0}

    def seed_for(self, round_: int, client: int) -> int:
        """Seed of the client-side mechanism's noise for one client in one round."""
        seq = np.random.SeedSequence(
            self._seed.entropy, spawn_key=(*self._seed.spawn_key, round_, client)
        )
        return int(seq.generate_state(1)[0])

    def epsilon_after(self, rounds: int) -> float:
        """Total ε of a client that took part in ``rounds`` rounds."""
        if rounds not in self._eps_by_rounds:
            per_round = [m.dp_event(self.n_classes, self.n_labels) for m in self.mechanisms]
            self._eps_by_rounds[rounds] = float(epsilon_spent(per_round * rounds, self.delta))
        return self._eps_by_rounds[rounds]

    def epsilon(self, client: int) -> float:
        """Total ε spent so far by ``client``."""
        return self.epsilon_after(int(self.rounds_taken[client]))

    def max_epsilon(self) -> float:
        """The largest total ε over clients (what a round's record reports)."""
        return self.epsilon_after(int(self.rounds_taken.max()))

    def would_exceed_budget(self, clients: Any) -> bool:
        """Whether one more release by any of ``clients`` would exceed the budget."""
        if self.budget is None:
            return False
        next_rounds = int(self.rounds_taken[np.asarray(clients)].max()) + 1
        return self.epsilon_after(next_rounds) > self.budget

    def record(self, clients: Any) -> None:
        """Note that ``clients`` released their labels once more."""
        self.rounds_taken[np.asarray(clients, dtype=np.int64)] += 1

    def state_dict(self) -> dict[str, Any]:
        """The rounds each client has released labels in (all the ledger accumulates)."""
        return {"rounds_taken": self.rounds_taken.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        rounds = np.asarray(state["rounds_taken"], dtype=np.int64)
        if rounds.shape != self.rounds_taken.shape or (rounds < 0).any():
            raise ValueError(
                f"rounds_taken must be {self.rounds_taken.shape[0]} counts >= 0, got {rounds!r}"
            )
        self.rounds_taken = rounds.copy()

    def report(self) -> dict[str, Any]:
        """Per-client totals: rounds released, ε at the ledger's δ, and the budget."""
        return {
            "mechanisms": [repr(m) for m in self.mechanisms],
            "delta": self.delta,
            "budget": self.budget,
            "clients": [
                {"client": i, "rounds": int(r), "epsilon": self.epsilon_after(int(r))}
                for i, r in enumerate(self.rounds_taken)
            ],
            "max_epsilon": self.max_epsilon(),
        }
