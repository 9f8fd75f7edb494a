"""What one client sends the server in a round: the encoded labels and their status.

An :class:`Upload` is all the server ever sees of a client. A client builds it (in process,
in a worker or at a Flower site), the runtime or the Flower message carries it, and
:class:`cotrain.federation.server.CoTrainingServer` decodes it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Upload"]


@dataclass
class Upload:
    """What one client sends the server in a round: all the server ever sees of it.

    Attributes
    ----------
    client_id : int
    message : bytes or None
        The encoded labels (None when the client failed before sending).
    error : BaseException or None
        The client's failure, reported instead of a message.
    warnings : Counter
        ``(category, message) -> count`` of its learner's warnings this round.
    learner_time_s : float or None
        Seconds its learner spent fitting and predicting. None: not sent (always, for a
        client with a privacy mechanism: how long a fit takes depends on its private rows).
    dp_event : dp_accounting.DpEvent or None
        The privacy event of this round's release, for a client whose model is trained
        privately (e.g. DP-SGD); the ledger composes it. None for every other client.
    broadcast_version : int or None
        The newest consensus version the client holds after this round (its
        acknowledgement, the reference of the next delta-coded broadcast; see
        :mod:`cotrain.wire.broadcast`); None: no report, the server keeps what it had.
    quality : float or None
        The client's estimate of its own accuracy (out-of-fold on its private rows, from
        :class:`cotrain.trust.PseudoLabelTrust`); a consensus with ``uses_quality``
        weighs its votes by it. None: not sent (always, for a client with a privacy
        mechanism).
    trust : float or None
        The weight the client gave the pseudo-labelled pool in this round's fit (see
        :mod:`cotrain.trust`), recorded in the history. None: no consensus yet, or not sent
        (always, for a client with a privacy mechanism).
    site_epsilon : float or None
        A private client's own ledger ε after this reply (its
        :meth:`cotrain.privacy.ledgers.site_ledger.SiteLedger.epsilon`: every release it sent,
        a function of public configuration and of how many releases it made); the
        privacy report quotes it beside the server's count. None for any other client.
    """

    client_id: int
    message: bytes | None = None
    error: BaseException | None = None
    warnings: Counter[tuple[str, str]] = field(default_factory=Counter)
    learner_time_s: float | None = 0.0
    dp_event: Any = None
    broadcast_version: int | None = None
    quality: float | None = None
    trust: float | None = None
    site_epsilon: float | None = None
