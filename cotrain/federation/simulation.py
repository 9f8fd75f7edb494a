"""The in-process federation a :class:`~cotrain.FederatedCoTrainer` simulates.

:class:`SimulatedFederation` holds the clients and the server side of one run (a
:class:`~cotrain.federation.setup.ServerRun`, built as for the Flower ServerApp) and
plays the round its privacy mechanism declares
(:func:`~cotrain.federation.rounds.make_round`, the code the ServerApp runs) through the client pool
(:class:`~cotrain.federation.pool_transport.PoolTransport`: the clients resident
wherever the runtime keeps them). It also scores each round on evaluation data, which
only a simulation has, and collects the state dicts of every part for checkpoints.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np

from cotrain._validation import FitData
from cotrain.federation.bookkeeping import RoundBookkeeping
from cotrain.federation.client import Client
from cotrain.federation.pool_transport import PoolTransport
from cotrain.federation.rounds import Round, make_round
from cotrain.federation.sampling import ClientSampler
from cotrain.federation.server import CoTrainingServer
from cotrain.federation.setup import ServerRun
from cotrain.history import History, RoundRecord
from cotrain.privacy.ledgers.site_ledger import quote_site_epsilon

__all__ = ["SimulatedFederation"]


class SimulatedFederation:
    """The clients and the server side of one in-process run.

    Parameters
    ----------
    clients : list of Client
        Set up with the public pool, wire format, privacy mechanism and evaluation data.
    run : ServerRun
        The server, sampler, ledger, seeds and history (from
        :func:`~cotrain.federation.setup.build_server`).
    data : FitData
        The validated inputs (for evaluation: ``y_eval_codes``, ``y_public_codes``).
    reproducible_noise : bool, default=False
        Seed each client's privacy noise per round from the run's noise seed; False:
        every client draws its noise from the operating system's entropy.
    privacy : LabelMechanism, optional
        The clients' mechanism: it declares the round
        (:func:`~cotrain.federation.rounds.make_round`).
    rounds : int, default=1
        The run's rounds (a secure-sum plan is made for them).
    participation : float, default=1.0
    random_state : int, optional
        Seeds a secure round's public query order.

    Raises
    ------
    ValueError
        For a secure-sum round the run cannot serve (sampled clients, clusters, soft
        labels).
    """

    def __init__(
        self,
        clients: list[Client],
        run: ServerRun,
        data: FitData,
        reproducible_noise: bool = False,
        *,
        privacy: Any = None,
        rounds: int = 1,
        participation: float = 1.0,
        random_state: Any = None,
    ) -> None:
        self.clients = clients
        self.run = run
        self.data = data
        #: seeds the clients' privacy noise only with reproducible_noise (else: OS entropy)
        self.noise_seed = run.noise_seed if reproducible_noise else None
        #: learner warnings of private clients, which never reach the server
        self.local_warnings: Counter = Counter()
        #: each client's latest predictions, accuracy, released quality and site ε
        self.books = RoundBookkeeping(len(data.classes))
        self.round: Round = make_round(
            privacy,
            run,
            self.books,
            n_public=len(data.pool),
            n_classes=len(data.classes),
            rounds=rounds,
            participation=participation,
            random_state=random_state,
            y_eval_codes=data.y_eval_codes,
        )
        self.pool: Any = None

    @property
    def server(self) -> CoTrainingServer:
        """The run's server."""
        return self.run.server

    @property
    def sampler(self) -> ClientSampler:
        """The run's client sampler."""
        return self.run.sampler

    @property
    def ledger(self) -> Any:
        """The run's privacy ledger (None when nothing is accounted)."""
        return self.run.ledger

    @property
    def history(self) -> History:
        """The records of the rounds run so far."""
        return self.run.history

    def run_round(self, t: int, sampled: np.ndarray, timeout: float | None) -> RoundRecord:
        """Round ``t`` of the run's round protocol (:mod:`cotrain.federation.rounds`)
        through the client pool, and the pool's pseudo-label accuracy where its labels are
        known (a simulation only)."""
        start = time.perf_counter()
        classes = len(self.data.classes)
        transport = PoolTransport(
            self.pool, self.server, classes, self.noise_seed, self.local_warnings
        )
        record = self.round.run(t, sampled, transport, timeout, started=start)
        data, hard = self.data, self.server.hard_consensus
        if data.y_public_codes is not None and hard is not None and (hard >= 0).any():
            covered = np.asarray(hard >= 0)
            accuracy = float(np.mean(hard[covered] == data.y_public_codes[covered]))
            record = replace(record, pseudo_label_accuracy=accuracy)
        return record

    def privacy_report(self) -> dict[str, Any] | None:
        """The server ledger's report, each private client's own ledger ε quoted beside
        the server's count (``"site_epsilon"``; see
        :func:`~cotrain.privacy.ledgers.site_ledger.quote_site_epsilon`); None without a ledger."""
        if self.ledger is None:
            return None
        report = self.ledger.report()
        mechanism = self.clients[0].privacy if self.clients else None
        if mechanism is None:  # only a noisy consensus: no client keeps a ledger
            return report
        return quote_site_epsilon(report, self.books.site_epsilon, mechanism)

    @property
    def learner_warnings(self) -> Counter:
        """``(client, category, message) -> count`` of every learner warning so far: those
        the server received and those private clients kept to themselves."""
        return self.server.warnings + self.local_warnings

    def state_dict(self) -> tuple[dict[str, Any], bytes | None, dict[int, Any]]:
        """``(state, broadcast, models)``: every part's state dict (the server side's as
        :meth:`ServerRun.state_dict`, the clients' from where they live), the encoded
        broadcast, and the fitted models by client."""
        clients = self.pool.call("state_dict", {c.client_id: () for c in self.clients})
        models = {i: s.pop("model") for i, s in clients.items() if s["fitted"]}
        state, broadcast = self.run.state_dict()
        state.update(
            clients=[clients[i] for i in sorted(clients)],
            books=self.books.state_dict(),
            **self.round.state_dict(),
            local_warnings=[[*key, n] for key, n in self.local_warnings.items()],
        )
        return state, broadcast, models

    def load_state_dict(
        self, state: dict[str, Any], broadcast: bytes | None, models: dict[int, Any]
    ) -> None:
        """Put a :meth:`state_dict` back (before the clients are hosted)."""
        for client, s in zip(self.clients, state["clients"], strict=True):
            client.load_state_dict({**s, "model": models.get(client.client_id)})
        self.run.load_state_dict(state, broadcast)
        self.books.load_state_dict(state["books"])
        self.round.load_state_dict(state)
        self.local_warnings = Counter(
            {(c, cat, msg): n for c, cat, msg, n in state.get("local_warnings", [])}
        )
