"""Setting up the server side of a federation, shared by the trainer and Flower.

Both :class:`~cotrain.FederatedCoTrainer` and the Flower ServerApp check the consensus
the same way and account privacy with the same ledger.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cotrain.privacy.accounting import is_accounted

__all__ = ["dry_run_consensus", "make_ledger"]


def make_ledger(
    mechanisms: list[Any],
    n_clients: int,
    n_classes: int,
    n_public: int,
    seed: np.random.SeedSequence,
) -> Any:
    """A privacy ledger over the accounted ``mechanisms``, or None if none is.

    Raises
    ------
    ValueError
        If the budget is smaller than the ε of a single round.

    Examples
    --------
    >>> make_ledger([None], 3, 2, 10, np.random.SeedSequence(0)) is None
    True
    """
    accounted = [m for m in mechanisms if is_accounted(m)]
    if not accounted:
        return None
    from cotrain.privacy.ledger import PrivacyLedger

    ledger = PrivacyLedger(accounted, n_clients, n_classes, n_public, seed)
    if ledger.would_exceed_budget(np.arange(n_clients)):
        raise ValueError(
            f"privacy budget {ledger.budget} is smaller than the ε of one round "
            f"({ledger.epsilon_after(1):.4g}); raise the budget or the noise"
        )
    return ledger


def dry_run_consensus(consensus: Any, n_clients: int, n_classes: int, n_public: int) -> None:
    """Call the consensus once on a one-example vote, so that its parameters (quorum,
    k, scores) are checked before any client trains.

    Examples
    --------
    >>> from consensus import QualifiedMajority
    >>> dry_run_consensus(QualifiedMajority(quorum=2.0), 3, 2, 10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: ...quorum...
    """
    ids = np.arange(n_clients)
    weights = consensus.weights_for(ids, n_public)
    if weights is not None and np.ndim(weights) == 2:
        weights = weights[:, :1]
    consensus(np.zeros((n_clients, 1), dtype=np.int64), n_classes=n_classes, weights=weights)
