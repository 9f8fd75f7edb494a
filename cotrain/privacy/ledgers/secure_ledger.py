"""The ledger of a secure-sum run: one guarantee for every site, from the public plan.

Under :class:`~cotrain.privacy.mechanisms.secure_votes.SecureTeacherVotes` no site's release is
private on its own (each adds only a share of the noise); what is private is the sum the server
learns. One record of any site is protected by the noise of that sum, so the run has one ε for all
sites, a function of the public :class:`~cotrain.privacy.mechanisms.secure_votes.SecurePlan` and of
how many rounds released a sum. :class:`SecureVotesLedger` keeps that count (and, for the report,
how many queries were asked and answered) and stops the run before a round past the plan.

Examples
--------
>>> from cotrain.privacy.mechanisms.secure_votes import SecurePlan
>>> plan = SecurePlan(10, 100, 2, 2, answers=100, mu_answer=4000.0, mu_check=None, delta=1e-5)
>>> ledger = SecureVotesLedger(plan)
>>> ledger.record(asked=100, answered=100)
>>> ledger.would_exceed_budget([0, 1]), ledger.rounds_taken
(False, 1)
>>> ledger.record(asked=100, answered=100)
>>> ledger.spent, ledger.would_exceed_budget([0, 1])   # one more round: train, release nothing
(True, False)
>>> ledger.fit_rounds += 1
>>> ledger.would_exceed_budget([0, 1])
True
>>> ledger.max_epsilon() == plan.epsilon()
True
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from cotrain.privacy.mechanisms.secure_votes import SecurePlan

__all__ = ["SecureVotesLedger"]


class _Headline:
    """What a round record names with its ε."""

    unit = "record"
    adversary = "server"


class SecureVotesLedger:
    """Counts the sums a secure-sum run released; reports the one ε they cost.

    Parameters
    ----------
    plan : SecurePlan
        The run's public noise plan.

    Attributes
    ----------
    rounds_taken : int
        Rounds whose sums were released (a round is counted once its sites have sent their
        shares, whether or not the sum could be revealed).
    asked, answered : int
        Queries asked and answered over those rounds.
    """

    headline = _Headline()

    def __init__(self, plan: SecurePlan) -> None:
        self.plan = plan
        self.rounds_taken = 0
        self.asked = 0
        self.answered = 0
        #: rounds after the last release, in which the sites trained and sent nothing
        self.fit_rounds = 0

    @property
    def budget(self) -> float:
        """The planned rounds' ε: the run stops before a round past the plan."""
        return self.plan.epsilon()

    def record(self, asked: int, answered: int) -> None:
        """Count one round's release: ``asked`` queries, ``answered`` of them answered."""
        self.rounds_taken += 1
        self.asked += int(asked)
        self.answered += int(answered)

    @property
    def spent(self) -> bool:
        """Whether every planned release was made (the next round releases nothing)."""
        return self.rounds_taken >= self.plan.rounds

    def would_exceed_budget(self, clients: Any = None, upcoming: Any = None) -> bool:
        """Whether the run should stop: every planned release was made and the sites
        already trained on the last consensus (one round that releases nothing)."""
        return self.spent and self.fit_rounds >= 1

    def max_epsilon(self, *args: Any, **kwargs: Any) -> float:
        """ε of one record of any site after the rounds taken (add/remove, a bound)."""
        return self.plan.epsilon(self.rounds_taken)

    def report(self) -> dict[str, Any]:
        """The guarantee with its unit, relation, adversary, assumptions and δ; the same ε
        for every site (``clients``), and the queries asked and answered.

        Examples
        --------
        >>> from cotrain.privacy.mechanisms.secure_votes import SecurePlan
        >>> plan = SecurePlan(3, 10, 2, 1, answers=5, mu_answer=900.0, mu_check=3600.0,
        ...                   delta=1e-5, dropouts=1)
        >>> ledger = SecureVotesLedger(plan); ledger.record(asked=10, answered=4)
        >>> r = ledger.report()
        >>> r["relation"], r["unit"], r["adversary"], r["answered"], r["answer_slots"]
        ('add_or_remove', 'record', 'server', 4, 5)
        >>> r["epsilon_by_relation"]["replace_one"] is None
        True
        """
        eps = self.max_epsilon()
        clients = [
            {
                "client": i,
                "rounds": self.rounds_taken,
                "epsilon": eps,
                "epsilon_by_relation": {"add_or_remove": eps, "replace_one": None},
                "relation": "add_or_remove",
                "delta": self.plan.delta,
                "unit": "record",
                "adversary": "server",
            }
            for i in range(self.plan.n_sites)
        ]
        return {
            "mechanisms": ["SecureTeacherVotes (teacher votes summed under secure aggregation)"],
            "unit": "record",
            "adversary": "server",
            "relation": "add_or_remove",
            "protects": self.plan.describe(),
            "assumptions": self.plan.assumptions(),
            "delta": self.plan.delta,
            "budget": self.budget,
            "clients": clients,
            "max_epsilon": eps,
            "epsilon_by_relation": {"add_or_remove": eps, "replace_one": None},
            "accounting": "data-independent bound (answer slots accounted whether used or not)",
            "rounds": self.rounds_taken,
            "asked": self.asked,
            "answered": self.answered,
            "answer_slots": self.plan.answers * self.rounds_taken,
            "plan": asdict(self.plan),
        }

    def state_dict(self) -> dict[str, Any]:
        """The counts, for checkpoints."""
        return {
            "rounds_taken": self.rounds_taken,
            "asked": self.asked,
            "answered": self.answered,
            "fit_rounds": self.fit_rounds,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        self.rounds_taken = int(state["rounds_taken"])
        self.asked, self.answered = int(state["asked"]), int(state["answered"])
        self.fit_rounds = int(state.get("fit_rounds", 0))
