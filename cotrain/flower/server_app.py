"""The server side: a Flower ServerApp that runs cotrain rounds over SuperNodes.

:class:`FlowerCoTraining` is the server strategy. It drives the same
:class:`cotrain.server.CoTrainingServer` as :class:`~cotrain.FederatedCoTrainer` (decode,
consensus, broadcast, round record), samples clients and seeds their learners the same
way, so a Flower federation gives the pseudo-labels of an in-process run with the same
``random_state`` and data. Only the transport differs: a handshake (``query``) checks
every site's public pool against the federation's by hash and orders the sites; each
round (``train``) pushes the broadcast to the sampled sites and pulls their uploads,
treating sites that do not answer within ``round_timeout`` as stragglers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import clone

from consensus import get_consensus
from cotrain._validation import check_params
from cotrain.client import StepResult
from cotrain.flower import protocol
from cotrain.flower.site import load_array, pool_fingerprint
from cotrain.history import History, RoundRecord
from cotrain.messages import HardLabels
from cotrain.server import CoTrainingServer, sample_clients
from cotrain.seeding import client_seed
from cotrain.trainer import _accounted

#: run-config key -> FlowerCoTraining parameter (the rest of the run config is ignored)
RUN_CONFIG_KEYS = {
    "rounds": "rounds",
    "consensus": "consensus",
    "share": "share",
    "soft-dtype": "soft_dtype",
    "encoding": "encoding",
    "soft-bits": "soft_bits",
    "participation": "participation",
    "early-stopping": "early_stopping",
    "on-client-error": "on_client_error",
    "min-clients": "min_clients",
    "min-nodes": "min_nodes",
    "round-timeout": "round_timeout",
    "node-timeout": "node_timeout",
    "random-state": "random_state",
    "public-pool": "public_pool",
    "classes": "classes",
}
_ZERO_IS_NONE = {"soft_bits", "early_stopping", "round_timeout"}


class FlowerCoTraining:
    """Federated co-training over a Flower Grid (the ServerApp's strategy).

    Parameters
    ----------
    public_pool : str, Path or ndarray
        The federation's public pool (a ``.npy``/``.npz`` file or the array); its hash is
        what every site's copy must match.
    rounds, consensus, share, soft_dtype, encoding, soft_bits, participation,
    early_stopping, on_client_error, min_clients, random_state :
        As in :class:`~cotrain.FederatedCoTrainer`. ``on_client_error`` defaults to
        "skip" here: a site that fails or drops out sits the round out.
    min_nodes : int, default=2
        SuperNodes to wait for before the handshake.
    node_timeout : float, default=60
        Seconds to wait for ``min_nodes`` nodes, and for the handshake answers.
    round_timeout : float, default=120
        Seconds a round waits for its sites; the others are stragglers.
    classes : sequence, optional
        The global label space; default: the union of the labels the sites report.
    poll_interval : float, default=0.05
        Seconds between polls of the SuperLink for replies.

    Attributes
    ----------
    classes_ : ndarray
    node_ids_ : list of int
        The SuperNode of each client index (sites ordered by their ``client-id``,
        then node id).
    learners_ : list of str
        The learner each site reported.
    refused_ : dict
        ``node id -> reason`` for SuperNodes left out at the handshake (a different
        public pool, an unusable learner, no answer).
    history_ : History
        One :class:`~cotrain.history.RoundRecord` per round (client indices, failures,
        stragglers, bytes, times).
    consensus_codes_ : ndarray of shape (n_rounds, n_public)
        The hard consensus after every round (-1 where it abstained).
    pseudo_label_codes_ : ndarray of shape (n_public,)
        The last hard consensus.
    stopped_reason_ : str or None
        "early stopping" if the consensus settled before ``rounds``.
    """

    def __init__(
        self,
        public_pool: Any,
        *,
        rounds: int = 20,
        consensus: Any = "majority",
        share: str = "hard",
        soft_dtype: str = "float32",
        encoding: str = "packed",
        soft_bits: int | None = None,
        participation: float = 1.0,
        early_stopping: int | None = None,
        on_client_error: str = "skip",
        min_clients: int = 1,
        min_nodes: int = 2,
        node_timeout: float = 60.0,
        round_timeout: float | None = 120.0,
        random_state: int | None = None,
        classes: Any = None,
        poll_interval: float = 0.05,
    ) -> None:
        self.public_pool = public_pool
        self.rounds = rounds
        self.consensus = consensus
        self.share = share
        self.soft_dtype = soft_dtype
        self.encoding = encoding
        self.soft_bits = soft_bits
        self.participation = participation
        self.early_stopping = early_stopping
        self.on_client_error = on_client_error
        self.min_clients = min_clients
        self.min_nodes = min_nodes
        self.node_timeout = node_timeout
        self.round_timeout = round_timeout
        self.random_state = random_state
        self.classes = classes
        self.poll_interval = poll_interval

    @classmethod
    def from_run_config(cls, run_config: dict[str, Any]) -> FlowerCoTraining:
        """Build the strategy from a Flower run config (kebab-case keys).

        TOML has no None: 0 stands for it in ``soft-bits``, ``early-stopping`` and
        ``round-timeout``, and a negative ``random-state`` means unseeded.

        Examples
        --------
        >>> FlowerCoTraining.from_run_config({"rounds": 3, "public-pool": "u.npy",
        ...                                   "soft-bits": 0}).soft_bits is None
        True
        """
        if "public-pool" not in run_config:
            raise ValueError("the run config needs 'public-pool' (the public pool's .npy file)")
        params = {}
        for key, name in RUN_CONFIG_KEYS.items():
            if key in run_config:
                value = run_config[key]
                none = value == 0 if name in _ZERO_IS_NONE else name == "random_state" and value < 0
                params[name] = None if none else value
        return cls(**params)

    # ------------------------------------------------------------------ run
    def run(self, grid: Any) -> FlowerCoTraining:
        """Handshake with the SuperNodes, then run the rounds; returns ``self``."""
        X_public = (
            load_array(self.public_pool)
            if isinstance(self.public_pool, str | Path)
            else np.asarray(self.public_pool)
        )
        self._pool_hash = pool_fingerprint(X_public)
        self._n_public = int(X_public.shape[0])
        sites = self._handshake(grid)
        n = len(sites)
        check_params(self._trainer_params(), n_clients=n)
        self.consensus_ = clone(get_consensus(self.consensus), safe=False)
        if _accounted(self.consensus_):
            raise NotImplementedError(
                f"{type(self.consensus_).__name__} spends privacy budget; privacy accounting "
                "is not available on Flower yet (run it in-process with FederatedCoTrainer)"
            )
        self.node_ids_ = [s["node"] for s in sites]
        self.learners_ = [s["learner"] for s in sites]
        self.classes_ = self._global_classes(sites)
        seeds = np.random.SeedSequence(self.random_state)
        sampler_seed, *client_seeds = seeds.spawn(n + 1)
        self._sampler = np.random.default_rng(sampler_seed)
        self._seeds = [client_seed(s) for s in client_seeds]
        self._ref_round = [0] * n  # the round of each client's last decoded upload
        self._server = CoTrainingServer(
            self.consensus_,
            len(self.classes_),
            n,
            self._n_public,
            share=self.share,
            encoding=self.encoding,
            soft_dtype=self.soft_dtype,
            soft_bits=self.soft_bits,
            on_client_error=self.on_client_error,
            min_clients=self.min_clients,
            client_names=[
                f"site {i} (node {s['node']}, {s['learner']})" for i, s in enumerate(sites)
            ],
        )
        self.history_ = History()
        self.timings_: list[dict[str, float]] = []
        codes, unchanged, self.stopped_reason_ = [], 0, None
        for t in range(1, self.rounds + 1):
            sampled = sample_clients(self._sampler, n, self.participation, self.min_clients)
            record = self._round(t, sampled, grid)
            self.history_.append(record)
            codes.append(self._server.hard_consensus)
            unchanged = unchanged + 1 if record.changed == 0 else 0
            if self.early_stopping is not None and unchanged >= self.early_stopping:
                self.stopped_reason_ = "early stopping"
                break
        self.consensus_codes_ = np.stack(codes)
        self.n_rounds_ = len(self.history_)
        self.learner_warnings_ = dict(self._server.warnings)
        return self

    def _round(self, t: int, sampled: np.ndarray, grid: Any) -> RoundRecord:
        """Push the broadcast to the sampled sites, pull their uploads, vote."""
        start = time.perf_counter()
        broadcast = self._server.broadcast_bytes()
        messages = {int(i): self._train_message(t, int(i), broadcast) for i in sampled}
        pushed = time.time()
        replies = _exchange(grid, messages, self.round_timeout, self.poll_interval)
        received = time.time()
        results = [self._result(i, reply) for i, reply in replies.items()]
        self.timings_.append(_timings(t, pushed, received, replies))
        timed_out = tuple(i for i in messages if i not in replies)
        record, answered = self._server.finish_round(
            t, sampled, results, timed_out, started=start, broadcast=broadcast
        )
        for r in answered:
            self._ref_round[r.client_id] = t
        return record

    def _train_message(self, t: int, i: int, broadcast: bytes | None) -> Any:
        from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict

        content = RecordDict(
            {
                protocol.ROUND: ConfigRecord(
                    {
                        "round": t,
                        "client-index": i,
                        "seed": self._seeds[i],
                        "ref-round": self._ref_round[i],
                        "share": self.share,
                        "encoding": self.encoding,
                        "soft-dtype": self.soft_dtype,
                        "soft-bits": 0 if self.soft_bits is None else int(self.soft_bits),
                        "pool-hash": self._pool_hash,
                        "classes": protocol.labels_to_config(self.classes_),
                    }
                )
            }
        )
        if broadcast is not None:
            content[protocol.LABELS] = ArrayRecord({protocol.PAYLOAD: protocol.to_array(broadcast)})
        return Message(
            content=content, dst_node_id=self.node_ids_[i], message_type="train", group_id=str(t)
        )

    def _result(self, i: int, reply: Any) -> StepResult:
        """A site's reply as the StepResult the in-process clients return."""
        if reply.has_error():
            return StepResult(i, error=protocol.RemoteClientError(_error_text(reply.error)))
        content = reply.content
        result = StepResult(
            i, warnings=protocol.warnings_from_config(content.config_records.get(protocol.WARNINGS))
        )
        if protocol.ERROR in content.config_records:
            err = content.config_records[protocol.ERROR]
            result.error = protocol.RemoteClientError(f"{err['type']}: {err['message']}")
            return result
        try:
            result.message = protocol.from_array(
                content.array_records[protocol.LABELS][protocol.PAYLOAD]
            )
        except (KeyError, ValueError) as err:
            result.error = protocol.RemoteClientError(f"malformed reply: {err}")
            return result
        result.learner_time_s = float(content.metric_records[protocol.STATS]["learner-time-s"])
        return result

    # ------------------------------------------------------------ handshake
    def _handshake(self, grid: Any) -> list[dict[str, Any]]:
        """Ask every connected SuperNode who it is; keep the sites with our public pool."""
        from flwr.app import Message, RecordDict

        deadline = time.monotonic() + self.node_timeout
        nodes = sorted(grid.get_node_ids())
        while len(nodes) < self.min_nodes and time.monotonic() < deadline:
            time.sleep(0.2)
            nodes = sorted(grid.get_node_ids())
        if len(nodes) < self.min_nodes:
            raise RuntimeError(
                f"only {len(nodes)} SuperNodes connected within {self.node_timeout} s, "
                f"fewer than min_nodes={self.min_nodes}"
            )
        messages = {
            node: Message(content=RecordDict(), dst_node_id=node, message_type="query")
            for node in nodes
        }
        replies = _exchange(grid, messages, self.node_timeout, self.poll_interval)
        sites, self.refused_ = [], {}
        for node in nodes:
            reply = replies.get(node)
            if reply is None:
                self.refused_[node] = f"no answer to the handshake within {self.node_timeout} s"
            elif reply.has_error():
                self.refused_[node] = _error_text(reply.error)
            elif reply.content.config_records[protocol.SITE]["pool-hash"] != self._pool_hash:
                info = reply.content.config_records[protocol.SITE]
                self.refused_[node] = (
                    f"public pool mismatch: the site's pool has SHA-256 "
                    f"{str(info['pool-hash'])[:16]}… ({info['n-public']} rows), the "
                    f"federation's {self._pool_hash[:16]}… ({self._n_public} rows)"
                )
            else:
                info = dict(reply.content.config_records[protocol.SITE])
                sites.append({**info, "node": node})
        if len(sites) < max(self.min_clients, 1):
            raise RuntimeError(
                f"{len(sites)} usable sites, fewer than min_clients={self.min_clients}; "
                f"refused: {self.refused_}"
            )
        # sites that name their position come first, in that order; then by node id
        sites.sort(key=lambda s: (s["client-id"] < 0, s["client-id"], s["node"]))
        return sites

    def _global_classes(self, sites: list[dict[str, Any]]) -> np.ndarray:
        if self.classes is not None:
            return np.unique(np.asarray(self.classes))
        return np.unique(np.concatenate([np.asarray(s["labels"]) for s in sites]))

    def _trainer_params(self) -> dict[str, Any]:
        names = (
            "share soft_dtype encoding soft_bits rounds participation early_stopping "
            "on_client_error min_clients round_timeout random_state"
        ).split()
        return {name: getattr(self, name) for name in names} | {"consensus": self.consensus}

    # --------------------------------------------------------------- output
    @property
    def pseudo_label_codes_(self) -> np.ndarray:
        """The last hard consensus on the public pool (-1 where it abstained)."""
        return self._server.hard_consensus

    @property
    def pseudo_labels_(self) -> np.ndarray:
        """The last consensus: labels as a masked array (hard) or probabilities (soft)."""
        broadcast = self._server.broadcast
        if not isinstance(broadcast, HardLabels):
            return broadcast.probs
        codes = broadcast.codes
        return np.ma.masked_array(self.classes_[np.maximum(codes, 0)], mask=codes < 0)

    def save(self, directory: str | Path) -> Path:
        """Write ``history.csv``, ``consensus_codes.npy`` and ``summary.json``."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        self.history_.to_frame().to_csv(folder / "history.csv")
        np.save(folder / "consensus_codes.npy", self.consensus_codes_)
        summary = {
            "n_rounds": self.n_rounds_,
            "stopped_reason": self.stopped_reason_,
            "classes": protocol.labels_to_config(self.classes_),
            "node_ids": [int(n) for n in self.node_ids_],
            "learners": self.learners_,
            "refused": {str(k): v for k, v in self.refused_.items()},
            "failed": {str(r.round): r.failed for r in self.history_},
            "timed_out": {str(r.round): list(r.timed_out) for r in self.history_},
        }
        (folder / "summary.json").write_text(json.dumps(summary, indent=2))
        (folder / "timings.json").write_text(json.dumps(self.timings_, indent=2))
        return folder


def make_server_app() -> Any:
    """The cotrain ServerApp (``serverapp = "your_app.server_app:app"``).

    The run config (``[tool.flwr.app.config]``) holds the strategy's parameters in
    kebab case (see :data:`RUN_CONFIG_KEYS` and :meth:`FlowerCoTraining.from_run_config`)
    and, optionally,
    ``output-dir``, where :meth:`FlowerCoTraining.save` writes the results.
    """
    from flwr.serverapp import ServerApp

    app = ServerApp()

    @app.main()
    def main(grid: Any, context: Any) -> None:
        strategy = FlowerCoTraining.from_run_config(dict(context.run_config)).run(grid)
        output = str(context.run_config.get("output-dir", ""))
        if output:
            strategy.save(output)
        for record in strategy.history_:
            print(
                f"round {record.round}: {len(record.clients)} sites, failed "
                f"{sorted(record.failed)}, timed out {list(record.timed_out)}, coverage "
                f"{record.coverage:.2f}, up {record.bytes_up} B, {record.time_s:.2f} s",
                flush=True,
            )

    return app


def _exchange(
    grid: Any, messages: dict[int, Any], timeout: float | None, poll_interval: float
) -> dict[int, Any]:
    """Push ``{key: message}`` and pull replies until all came or ``timeout`` passed.

    Flower's ``send_and_receive`` polls every 3 s; polling at ``poll_interval`` keeps
    the server from adding seconds to every round.
    """
    keys = list(messages)
    ids = list(grid.push_messages([messages[k] for k in keys]))
    pending = {mid: k for mid, k in zip(ids, keys, strict=True) if mid}
    replies: dict[int, Any] = {}
    deadline = None if timeout is None else time.monotonic() + timeout
    while pending:
        for reply in grid.pull_messages(list(pending)):
            key = pending.pop(reply.metadata.reply_to_message_id, None)
            if key is not None:
                replies[key] = reply
        if not pending or (deadline is not None and time.monotonic() >= deadline):
            break
        time.sleep(poll_interval)
    return replies


def _timings(t: int, pushed: float, received: float, replies: dict[int, Any]) -> dict:
    """Where the seconds of a round went, from the sites' handler timestamps (one clock
    on localhost): push → site handler start (Flower's polling and process start), the
    slowest handler, handler end → all replies back."""
    stats = [
        r.content.metric_records[protocol.STATS]
        for r in replies.values()
        if not r.has_error() and protocol.STATS in r.content.metric_records
    ]
    if not stats:
        return {"round": t, "exchange_s": received - pushed}
    return {
        "round": t,
        "exchange_s": received - pushed,
        "to_handler_s": max(float(s["handler-start"]) for s in stats) - pushed,
        "handler_s": max(float(s["handler-end"]) - float(s["handler-start"]) for s in stats),
        "learner_s": max(float(s["learner-time-s"]) for s in stats),
        "from_handler_s": received - max(float(s["handler-end"]) for s in stats),
    }


def _error_text(error: Any) -> str:
    reason = (error.reason or "").strip().splitlines()
    return f"Flower error {error.code}: {reason[-1] if reason else 'no reason given'}"
