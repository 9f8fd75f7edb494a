"""Setting up the server side of a federation, shared by the trainer and Flower.

Both :class:`~cotrain.FederatedCoTrainer` and the Flower ServerApp check the consensus
the same way and account privacy with the same ledger.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from cotrain.privacy.accounting.epsilon import is_accounted
from cotrain.privacy.mechanisms.base import as_mechanism
from cotrain.privacy.mechanisms.shards import warn_few_rows

__all__ = [
    "bind_public",
    "check_privacy_setup",
    "dry_run_consensus",
    "make_ledger",
    "refuse_replayable_noise",
    "replayable_noise_warning",
]


def bind_public(consensus: Any, X_public: Any) -> None:
    """Give the public pool, once before round 1, to a consensus that needs it.

    A rule that works on the public rows themselves, not only on the clients' labels
    (:class:`consensus.DualDistillation` fits a server model on them), defines
    ``bind_public(X_public)``; every other rule is left alone.

    Examples
    --------
    >>> from consensus import MajorityVote
    >>> bind_public(MajorityVote(), np.zeros((3, 2)))   # nothing to bind
    """
    bind = getattr(consensus, "bind_public", None)
    if callable(bind):
        bind(X_public)


def make_ledger(mechanisms: list[Any], n_clients: int, n_classes: int, n_public: int) -> Any:
    """A privacy ledger over the accounted ``mechanisms`` (``[privacy, consensus]``), or
    None if none is.

    Warns (``UserWarning``) when a mechanism's ε protects one released label rather than a
    private record (``unit="label"``), and when only the consensus's certainty scores are
    private (no client-side mechanism): the labels then leave the clients without noise.

    Raises
    ------
    ValueError
        If the budget is smaller than the ε of a single round.

    Examples
    --------
    >>> make_ledger([None], 3, 2, 10) is None
    True
    """
    mechanisms = [as_mechanism(mechanisms[0]), *mechanisms[1:]] if mechanisms else []
    accounted = [m for m in mechanisms if is_accounted(m)]
    if not accounted:
        return None
    from cotrain.privacy.ledgers.ledger import PrivacyLedger, guarantee_of

    for m in accounted:
        if guarantee_of(m)[0] == "label":
            warnings.warn(
                f"{type(m).__name__}(unit='label') protects one released public label, not a "
                "private record: its ε is no guarantee about any client's data (use "
                "unit='record', or cotrain.privacy.SubsampleAndAggregate for record-level DP "
                "with any learner)",
                UserWarning,
                stacklevel=3,
            )
    # mechanisms = [the clients' privacy mechanism, the consensus]: a consensus accounted
    # for its certainty scores alone leaves the labels themselves unprotected
    if mechanisms[0] is None and any(guarantee_of(m) == ("record", "server") for m in accounted):
        warnings.warn(
            "only the certainty scores are differentially private: the clients' labels are "
            "released to the server without noise, so the reported ε (one private record, "
            "against the server) covers the release of the scores alone, not the labels; "
            "add a client-side mechanism (privacy=...) for a guarantee that covers both",
            UserWarning,
            stacklevel=3,
        )
    ledger = PrivacyLedger(accounted, n_clients, n_classes, n_public)
    if ledger.would_exceed_budget(np.arange(n_clients)):
        raise ValueError(
            f"privacy budget {ledger.budget} is smaller than the ε of one round "
            f"({ledger.epsilon_after(1):.4g}); raise the budget or the noise"
        )
    return ledger


def check_privacy_setup(
    privacy: Any, consensus: Any, estimators: list[Any], n_rows: list[int] | None = None
) -> None:
    """Check, before any training, that the privacy mechanism fits the federation.

    The mechanism decides (its ``check_federation``): teachers' votes need a hard consensus
    (:class:`~cotrain.privacy.SubsampleAndAggregate`), a privately trained model must accept
    every client's estimator (:class:`~cotrain.privacy.DPSGD`). Where the clients' private
    row counts are known (``n_rows``, a simulation), a client with fewer rows than the
    teachers asked of it is warned about
    (:func:`~cotrain.privacy.mechanisms.shards.warn_few_rows`).

    Examples
    --------
    >>> from consensus import MajorityVote
    >>> check_privacy_setup(None, MajorityVote(), [])   # nothing to check
    """
    mechanism = as_mechanism(privacy)
    if mechanism is not None:
        mechanism.check_federation(consensus, estimators)
    n_teachers = getattr(mechanism, "n_teachers", None)
    if n_teachers is not None and n_rows is not None:
        warn_few_rows(int(n_teachers), n_rows)


def replayable_noise_warning(consensus: Any, reproducible_noise: bool) -> None:
    """Warn that privacy noise can be replayed by whoever knows its seed.

    ``reproducible_noise=True`` derives the clients' noise from ``random_state`` (which the
    server knows); a noisy consensus given a ``random_state`` makes the server's noise
    replayable by whoever knows that seed.

    Examples
    --------
    >>> replayable_noise_warning(None, False)   # nothing to say
    """
    if reproducible_noise:
        warnings.warn(
            "reproducible_noise=True: every client's privacy noise is derived from "
            "random_state, so whoever knows random_state (the server) can replay the noise and "
            "recover the clean labels. Use it for simulations only; a deployment refuses it",
            UserWarning,
            stacklevel=3,
        )
    if is_accounted(consensus) and getattr(consensus, "random_state", None) is not None:
        warnings.warn(
            f"{type(consensus).__name__}(random_state=...) seeds the server's privacy noise: "
            "whoever knows that seed can replay the noise and recover the clean consensus. "
            "Leave random_state=None for a real guarantee",
            UserWarning,
            stacklevel=3,
        )


def refuse_replayable_noise(consensus: Any) -> None:
    """A deployment refuses privacy noise that anyone could replay from a seed.

    Raises
    ------
    ValueError
        If a noisy consensus was given a ``random_state``.

    Examples
    --------
    >>> from consensus import NoisyArgmax
    >>> refuse_replayable_noise(NoisyArgmax(sigma=5.0))   # OS entropy: fine
    >>> refuse_replayable_noise(NoisyArgmax(sigma=5.0, random_state=0))
    Traceback (most recent call last):
    ...
    ValueError: consensus=NoisyArgmax(random_state=0) seeds the server's privacy noise: ...
    """
    state = getattr(consensus, "random_state", None)
    if is_accounted(consensus) and state is not None:
        raise ValueError(
            f"consensus={type(consensus).__name__}(random_state={state!r}) seeds the server's "
            "privacy noise: whoever knows the seed can replay it and recover the clean "
            "consensus, so a deployment refuses it; leave random_state=None"
        )


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
