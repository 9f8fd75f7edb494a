"""The in-process federation a :class:`~cotrain.FederatedCoTrainer` simulates.

:class:`SimulatedFederation` holds the clients and the server side of one run (a
:class:`~cotrain.federation.setup.ServerRun`, built as for the Flower ServerApp) and
plays a round between them through a client pool (the clients resident wherever the
runtime keeps them). It also scores each round on evaluation data, which only a
simulation has, and collects the state dicts of every part for checkpoints.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np

from consensus import ReliabilityVote, majority_vote
from cotrain._validation import FitData
from cotrain.federation.client import Client
from cotrain.federation.sampling import ClientSampler
from cotrain.federation.seeding import noise_seed_for
from cotrain.federation.server import CoTrainingServer
from cotrain.federation.setup import ServerRun
from cotrain.history import History, RoundRecord
from cotrain.privacy.ledgers.site_ledger import quote_site_epsilon
from cotrain.runtime.runtimes import Straggler

__all__ = ["SimulatedFederation", "aggregate"]


def aggregate(
    consensus: Any,
    codes: np.ndarray,
    probas: np.ndarray | None,
    n_classes: int,
    quality: np.ndarray | None = None,
):
    """The prediction rule of a federation: a soft consensus applies to probabilities; a
    :class:`~consensus.ReliabilityVote` weights each model's vote by its client's
    reliability (``quality``, ``(m,)`` with NaN where unknown); any other hard rule
    (majority, qualified majority, certainty) is a plain majority vote that never abstains.

    Examples
    --------
    >>> from consensus import MajorityVote, ReliabilityVote
    >>> votes = np.array([[0, 1], [1, 1], [1, 0]])
    >>> aggregate(MajorityVote(), votes, None, 2).tolist()
    [1, 1]
    >>> aggregate(ReliabilityVote(), votes, None, 2, quality=np.array([0.99, 0.6, 0.6])).tolist()
    [0, 1]
    """
    if consensus.output == "soft" and probas is not None:
        return np.argmax(consensus(probas, n_classes=n_classes), axis=1)
    if isinstance(consensus, ReliabilityVote) and quality is not None:
        weights = consensus.weights_for(
            np.arange(len(codes)), codes.shape[1], quality=quality, n_classes=n_classes
        )
        return consensus(codes, n_classes=n_classes, weights=weights)
    return majority_vote(codes, n_classes)


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
    """

    def __init__(
        self,
        clients: list[Client],
        run: ServerRun,
        data: FitData,
        reproducible_noise: bool = False,
    ) -> None:
        self.clients = clients
        self.run = run
        self.data = data
        #: seeds the clients' privacy noise only with reproducible_noise (else: OS entropy)
        self.noise_seed = run.noise_seed if reproducible_noise else None
        #: learner warnings of private clients, which never reach the server
        self.local_warnings: Counter = Counter()
        #: client id -> its latest (codes, probabilities) on the evaluation data
        self.last_eval: dict[int, tuple[Any, Any]] = {}
        #: each client's last released quality (its reliability for the prediction rule)
        self.last_quality: dict[int, float | None] = {}
        #: client id -> the ε its own ledger reported with its latest upload (private clients)
        self.site_epsilon: dict[int, float] = {}
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
        """One round: each sampled client gets its downlink and uploads its labels;
        the server decodes, votes and records; the round is scored."""
        start = time.perf_counter()
        server = self.server
        links = server.configure_round(t, sampled)
        args = {i: (t, link, noise_seed_for(self.noise_seed, t, i)) for i, link in links.items()}
        out = self.pool.call("run_round", args, timeout=timeout)
        results = [r for r in out.values() if not isinstance(r, Straggler)]
        timed_out = tuple(sorted(i for i, r in out.items() if isinstance(r, Straggler)))
        record, answered = server.finish_round(
            t, sampled, [r.upload() for r in results], timed_out, started=start,
            bytes_down=sum(link.nbytes for link in links.values()),
        )  # fmt: skip
        for r in results:
            if r.client_id in answered:
                self.last_eval[r.client_id] = (r.eval_codes, r.eval_proba)
            if r.upload().site_epsilon is not None:  # as a site's reply carries it
                self.site_epsilon[r.client_id] = float(r.upload().site_epsilon)
        # what private clients keep off their uploads, the experimenter still sees
        private = [r for r in results if r.private]
        for r in private:
            for (category, message), n in r.warnings.items():
                self.local_warnings[(r.client_id, category, message)] += n
        local_time = sum(r.learner_time_s for r in private)
        released = {r.client_id: r.upload().trust for r in results}  # as a site reports it
        trust = {i: w for i, w in released.items() if w is not None}
        quality = {r.client_id: r.upload().quality for r in results}
        self.last_quality.update({i: q for i, q in quality.items() if i in answered})
        return replace(
            record, learner_time_s=record.learner_time_s + local_time, trust=trust,
            quality={i: q for i, q in quality.items() if q is not None}, **self.evaluate(),
        )  # fmt: skip

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
        return quote_site_epsilon(report, self.site_epsilon, mechanism)

    @property
    def learner_warnings(self) -> Counter:
        """``(client, category, message) -> count`` of every learner warning so far: those
        the server received and those private clients kept to themselves."""
        return self.server.warnings + self.local_warnings

    def evaluate(self) -> dict[str, Any]:
        """Accuracies for the round record (only from evaluation-only data)."""
        data = self.data
        out: dict[str, Any] = {}
        hard = self.server.hard_consensus
        if hard is None:  # pragma: no cover - evaluated after a round's consensus
            raise RuntimeError("evaluate needs a finished round")
        covered = np.asarray(hard >= 0)
        if data.y_public_codes is not None and covered.any():
            out["pseudo_label_accuracy"] = float(
                np.mean(hard[covered] == data.y_public_codes[covered])
            )
        if data.X_eval is None:
            return out
        ids = sorted(self.last_eval)
        codes = np.stack([self.last_eval[i][0] for i in ids])
        acc = {
            i: float(np.mean(row == data.y_eval_codes)) for i, row in zip(ids, codes, strict=True)
        }
        probas = [self.last_eval[i][1] for i in ids]
        quality = [self.last_quality.get(i) for i in ids]
        pred = aggregate(
            self.server.consensus, codes, None if probas[0] is None else np.stack(probas),
            len(data.classes), np.array([np.nan if q is None else q for q in quality]),
        )  # fmt: skip
        out.update(
            client_accuracy=acc,
            mean_accuracy=float(np.mean(list(acc.values()))),
            std_accuracy=float(np.std(list(acc.values()))),
            consensus_accuracy=float(np.mean(pred == data.y_eval_codes)),
        )
        return out

    def state_dict(self) -> tuple[dict[str, Any], bytes | None, dict[int, Any]]:
        """``(state, broadcast, models)``: every part's state dict (the server side's as
        :meth:`ServerRun.state_dict`, the clients' from where they live), the encoded
        broadcast, and the fitted models by client."""
        clients = self.pool.call("state_dict", {c.client_id: () for c in self.clients})
        models = {i: s.pop("model") for i, s in clients.items() if s["fitted"]}
        state, broadcast = self.run.state_dict()
        state.update(
            clients=[clients[i] for i in sorted(clients)],
            eval={str(i): list(v) for i, v in self.last_eval.items()},
            local_warnings=[[*key, n] for key, n in self.local_warnings.items()],
            site_epsilon={str(i): e for i, e in self.site_epsilon.items()},
        )
        return state, broadcast, models

    def load_state_dict(
        self, state: dict[str, Any], broadcast: bytes | None, models: dict[int, Any]
    ) -> None:
        """Put a :meth:`state_dict` back (before the clients are hosted)."""
        for client, s in zip(self.clients, state["clients"], strict=True):
            client.load_state_dict({**s, "model": models.get(client.client_id)})
        self.run.load_state_dict(state, broadcast)
        self.last_eval = {int(i): tuple(v) for i, v in state["eval"].items()}
        self.local_warnings = Counter(
            {(c, cat, msg): n for c, cat, msg, n in state.get("local_warnings", [])}
        )
        self.site_epsilon = {int(i): float(e) for i, e in state.get("site_epsilon", {}).items()}
