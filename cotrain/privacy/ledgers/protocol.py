"""What every ledger of a run offers: the :class:`RunLedger` protocol.

A run keeps one ledger on the server's side (:attr:`cotrain.federation.setup.ServerRun.ledger`):
a :class:`~cotrain.privacy.ledgers.ledger.PrivacyLedger` (per-client accounting of label
releases and of a noisy consensus) or, for a secure-sum run, a
:class:`~cotrain.privacy.ledgers.secure_ledger.SecureVotesLedger` (one ε for every site, from the
public plan). The round loop's privacy-budget callback, the round records, checkpoints and the
privacy report use only what this protocol names, so they serve both — and any new ledger that
offers it. What each round adds to a ledger is the round protocol's own business
(:mod:`cotrain.federation.rounds`). A private site's own ledger
(:class:`~cotrain.privacy.ledgers.site_ledger.SiteLedger`) is the site's, not the run's.

Examples
--------
>>> from cotrain.privacy import RandomizedResponse
>>> from cotrain.privacy.ledgers.ledger import PrivacyLedger
>>> from cotrain.privacy.ledgers.secure_ledger import SecureVotesLedger
>>> from cotrain.privacy.mechanisms.secure_votes import SecurePlan
>>> plan = SecurePlan(3, 10, 2, 1, answers=10, mu_answer=900.0, mu_check=None, delta=1e-5)
>>> isinstance(PrivacyLedger([RandomizedResponse(epsilon=1.0)], 2, 2, 10), RunLedger)
True
>>> isinstance(SecureVotesLedger(plan), RunLedger)
True
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["RunLedger"]


@runtime_checkable
class RunLedger(Protocol):
    """A run's ledger (see the module docstring).

    Attributes
    ----------
    headline
        What the round records name with their ε: its ``unit`` ("record" or "label") and
        ``adversary``.
    """

    headline: Any

    def would_exceed_budget(self, clients: Any, upcoming: Any = None) -> bool:
        """Whether the next round (with ``clients``) would take the run past its budget."""
        ...

    def max_epsilon(self) -> Any:
        """The headline ε so far (the largest over the clients where they differ)."""
        ...

    def report(self) -> dict[str, Any]:
        """The guarantee: ε with its unit, relation, adversary, δ and assumptions."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        ...
