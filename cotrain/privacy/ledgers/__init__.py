"""Privacy ledgers: who keeps count of what was released, and stops a run at its budget.

- :mod:`~cotrain.privacy.ledgers.protocol` — :class:`RunLedger`, what every ledger of a run
  offers the round loop, the records, checkpoints and the report;
- :mod:`~cotrain.privacy.ledgers.ledger` — :class:`PrivacyLedger`, the server's per-client
  bookkeeping of a federated run (one :class:`Guarantee` per unit and adversary);
- :mod:`~cotrain.privacy.ledgers.site_ledger` — :class:`SiteLedger`, a private site's own
  ledger, where its budget is enforced and its replies are kept;
- :mod:`~cotrain.privacy.ledgers.secure_ledger` — :class:`SecureVotesLedger`, the one ledger
  of a secure-sum run, from its public plan.
"""

from cotrain.privacy.ledgers.ledger import (
    Guarantee,
    PrivacyLedger,
    assumptions,
    guarantee_of,
    relation_events,
)
from cotrain.privacy.ledgers.protocol import RunLedger
from cotrain.privacy.ledgers.secure_ledger import SecureVotesLedger
from cotrain.privacy.ledgers.site_ledger import (
    PrivacyBudgetSpent,
    SentReply,
    SiteLedger,
    quote_site_epsilon,
)

__all__ = [
    "Guarantee",
    "PrivacyBudgetSpent",
    "PrivacyLedger",
    "RunLedger",
    "SecureVotesLedger",
    "SentReply",
    "SiteLedger",
    "assumptions",
    "guarantee_of",
    "quote_site_epsilon",
    "relation_events",
]


def __dir__() -> list[str]:
    return sorted(__all__)
