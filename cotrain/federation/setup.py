"""The server side of a run, built and restored in one place.

:func:`build_server` turns a run's parameters (consensus rule, wire format, clustering,
privacy, participation, seed) and what the server knows at the start (the public pool,
the number of classes, a name for each client) into a :class:`ServerRun`: the
:class:`~cotrain.federation.server.CoTrainingServer` with its consensus bound to the
pool, the sampler, the privacy ledger, the clients' seeds and the history.
:meth:`ServerRun.state_dict` and :meth:`ServerRun.load_state_dict` save and restore
all of it for checkpoints. The in-process :class:`~cotrain.FederatedCoTrainer` and the
Flower ServerApp (:class:`cotrain.flower.server_app.FlowerCoTraining`) both use them,
so a rule about the server side of a run is written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import clone

from consensus import get_consensus
from cotrain.federation.privacy_setup import (
    bind_public,
    dry_run_consensus,
    make_ledger,
    refuse_replayable_noise,
    replayable_noise_warning,
)
from cotrain.federation.sampling import ClientSampler
from cotrain.federation.seeding import spawn_seeds
from cotrain.federation.server import CoTrainingServer
from cotrain.history import History, RoundRecord
from cotrain.privacy.ledgers.protocol import RunLedger
from cotrain.wire.format import WireFormat

__all__ = ["ServerRun", "auto_consensus", "build_server"]


@dataclass
class ServerRun:
    """Everything the server side of one run holds.

    Attributes
    ----------
    server : CoTrainingServer
        Decodes the uploads, forms the consensus, configures each round.
    sampler : ClientSampler
        Draws the clients of each round.
    client_seeds : list of numpy.random.SeedSequence
        One per client: seeds its learner's unset ``random_state`` (in process, or sent
        to a Flower site as an integer).
    noise_seed : numpy.random.SeedSequence
        Seeds the clients' privacy noise, only where a simulation opts into
        reproducible noise.
    history : History
        One record per finished round.

    Examples
    --------
    >>> run = build_server(consensus="majority", X_public=np.zeros((4, 1)), n_classes=2,
    ...                    client_names=["a", "b"], random_state=0)
    >>> state, broadcast = run.state_dict()
    >>> broadcast is None, state["history"], run.wire.n_public
    (True, [], 4)
    """

    server: CoTrainingServer
    sampler: ClientSampler
    client_seeds: list[np.random.SeedSequence]
    noise_seed: np.random.SeedSequence
    history: History = field(default_factory=History)

    @property
    def consensus(self) -> Any:
        """The run's consensus rule (a copy of the one asked for, bound to the pool)."""
        return self.server.consensus

    @property
    def wire(self) -> WireFormat:
        """The run's wire format."""
        return self.server.wire

    @property
    def ledger(self) -> RunLedger | None:
        """The privacy ledger (None when nothing in the run is accounted)."""
        return self.server.ledger

    def state_dict(self) -> tuple[dict[str, Any], bytes | None]:
        """``(state, broadcast)``: the server's, the sampler's, the ledger's and the
        history's state (arrays and JSON values), and the full broadcast's bytes."""
        state = {
            **self.server.state_dict(),
            "sampler": self.sampler.state_dict(),
            "ledger": None if self.ledger is None else self.ledger.state_dict(),
            "history": [r.to_json() for r in self.history],
        }
        return state, state.pop("broadcast")

    def load_state_dict(self, state: dict[str, Any], broadcast: bytes | None) -> None:
        """Put a :meth:`state_dict` back (the history's records are appended)."""
        self.server.load_state_dict({**state, "broadcast": broadcast})
        self.sampler.load_state_dict(state["sampler"])
        if self.ledger is not None:
            self.ledger.load_state_dict(state["ledger"])
        for record in state["history"]:
            self.history.append(RoundRecord.from_json(record))


def auto_consensus(consensus: Any, privacy: Any) -> Any:
    """The consensus rule ``"auto"`` stands for: ``"dawid_skene"`` (each client's confusion
    matrix estimated from the votes on U, :class:`consensus.DawidSkene`) without a privacy
    mechanism, ``"majority"`` with one (the rule the private plans were measured with);
    any other value unchanged.

    Examples
    --------
    >>> auto_consensus("auto", None), auto_consensus("auto", object()), auto_consensus("mean", None)
    ('dawid_skene', 'majority', 'mean')
    """
    if isinstance(consensus, str) and consensus.strip().lower() == "auto":
        return "dawid_skene" if privacy is None else "majority"
    return consensus


def build_server(
    *,
    consensus: Any,
    X_public: Any,
    n_classes: int,
    client_names: Sequence[str],
    share: str = "hard",
    encoding: str = "packed",
    soft_dtype: str = "float32",
    soft_bits: int | None = None,
    clustering: Any = None,
    participation: float = 1.0,
    on_client_error: str = "raise",
    min_clients: int = 1,
    privacy: Any = None,
    random_state: int | None = None,
    reproducible_noise: bool = False,
    deployment: bool = False,
) -> ServerRun:
    """Build the server side of a run, before any client trains.

    The consensus rule is copied (a noisy rule starts every run from its own seed),
    checked on a one-example vote and given the public pool; the privacy ledger
    accounts the clients' mechanism and the consensus; the seeds of the sampler, the
    clients and their noise are spawned from ``random_state`` in a fixed order, so the
    same seed gives the same run in process and on Flower.

    Parameters
    ----------
    consensus : str or consensus.Consensus
        The consensus rule, as the trainer's ``consensus`` parameter.
    X_public : array-like of shape (n_public, ...)
        The public pool (for a rule that fits on it, and its size).
    n_classes : int
        Classes of the global label space.
    client_names : sequence of str
        How errors name each client; its length is the number of clients.
    share, encoding, soft_dtype, soft_bits, clustering, participation, on_client_error, \
min_clients, privacy, random_state, reproducible_noise :
        As in :class:`~cotrain.FederatedCoTrainer` (already validated).
    deployment : bool, default=False
        A real deployment (Flower) refuses privacy noise that a seed could replay; a
        simulation warns about it instead.

    Returns
    -------
    ServerRun

    Raises
    ------
    ValueError
        If the consensus refuses its parameters on the one-example vote, the privacy
        budget is below one round's ε, or (``deployment``) a noisy consensus has a
        ``random_state``.

    Examples
    --------
    >>> run = build_server(consensus="majority", X_public=np.zeros((5, 2)), n_classes=3,
    ...                    client_names=["client 0", "client 1"], participation=0.5,
    ...                    random_state=0)
    >>> run.wire.n_classes, run.wire.n_public, len(run.client_seeds), run.ledger is None
    (3, 5, 2, True)
    >>> run.sampler.sample().tolist()
    [1]
    """
    rule = clone(get_consensus(consensus), safe=False)
    n, n_public = len(client_names), int(X_public.shape[0])
    dry_run_consensus(rule, n, n_classes, n_public)
    bind_public(rule, X_public)  # a rule that fits on U (dual distillation)
    sampler_seed, client_seeds, noise_seed = spawn_seeds(random_state, n)
    if deployment:
        refuse_replayable_noise(rule)
    else:
        replayable_noise_warning(rule, reproducible_noise)
    ledger = make_ledger([privacy, rule], n, n_classes, n_public)
    # a mechanism whose uploads may abstain (per-site Confident-GNMax) needs a wire that lets them
    abstain = share == "hard" and bool(getattr(privacy, "abstains", False))
    wire = WireFormat(n_classes, n_public, share, encoding, soft_dtype, soft_bits, abstain)
    server = CoTrainingServer(
        rule,
        wire,
        n,
        on_client_error=on_client_error,
        min_clients=min_clients,
        ledger=ledger,
        client_names=list(client_names),
        clustering=clustering,
    )
    sampler = ClientSampler(sampler_seed, n, participation, min_clients)
    return ServerRun(server, sampler, client_seeds, noise_seed)
