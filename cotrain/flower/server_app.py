"""The server side: a Flower ServerApp that runs cotrain rounds over SuperNodes.

:class:`FlowerCoTraining` drives a Flower Grid from the ServerApp (it is not a Flower
``Strategy``: cotrain's round is its own). It builds, checkpoints and restores the server
side of the run with the same function as :class:`~cotrain.FederatedCoTrainer`
(:func:`cotrain.federation.setup.build_server`), and runs the same
:class:`cotrain.federation.loop.RoundLoop` and
:class:`cotrain.federation.server.CoTrainingServer` (sampling, decode, consensus,
broadcast, round record, callbacks for checkpoints, early stopping, the privacy budget
and tracking), and seeds the sites' learners the same way, so a Flower federation gives
the pseudo-labels of an in-process run with the same ``random_state`` and data. Only the
transport differs: a handshake (``query``) checks every site's public pool against the
federation's by hash and orders the sites; each round (``train``) pushes to each sampled
site the downlink the server configured for it and pulls their uploads, treating sites
that do not answer within ``round_timeout`` as stragglers.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from pathlib import Path
from typing import Any

import numpy as np

from cotrain._validation import check_params, require_public_classes
from cotrain.callbacks import PrivacyBudget, loop_callbacks
from cotrain.federation.bookkeeping import RoundBookkeeping
from cotrain.federation.loop import RoundLoop
from cotrain.federation.privacy_setup import check_privacy_setup
from cotrain.federation.rounds import Round, SecureRound, make_round
from cotrain.federation.seeding import client_seed
from cotrain.federation.server import CoTrainingServer, TooFewClients
from cotrain.federation.setup import ServerRun, auto_consensus, build_server
from cotrain.flower import protocol
from cotrain.flower.evaluation import SharedEvaluation
from cotrain.flower.grid_transport import GridTransport, check_deployed_plan
from cotrain.flower.handshake import Roster, error_text, identity
from cotrain.flower.site import load_array, mechanism_from_spec, pool_fingerprint
from cotrain.history import RoundRecord
from cotrain.persistence.checkpoint import CheckpointCallback, Checkpointer, fingerprint
from cotrain.privacy.ledgers.site_ledger import quote_site_epsilon
from cotrain.wire import envelope
from cotrain.wire.broadcast import Downlink
from cotrain.wire.upload import Upload

_LOG = logging.getLogger("cotrain.flower")
#: how ``stopped_reason_`` starts when sites did not answer
STOPPED_SHORT = "stopped: "

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
    "checkpoint-dir": "checkpoint_dir",
    "clustering": "clustering",
}
_ZERO_IS_NONE = {"soft_bits", "early_stopping", "round_timeout"}
#: parameters a resumed run may change (they do not change its result)
_NOT_IN_FINGERPRINT = {
    "rounds",
    "min_nodes",
    "node_timeout",
    "round_timeout",
    "poll_interval",
    "checkpoint_dir",
    "callbacks",
    "public_pool",
}


class FlowerCoTraining:
    """Federated co-training over a Flower Grid, run from the ServerApp.

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
        Required with ``privacy`` (run config ``classes``, a JSON list): the label space
        is then public configuration, private sites send no labels, and a site that
        declares another label space is refused.
    poll_interval : float, default=0.05
        Seconds between polls of the SuperLink for replies.
    checkpoint_dir : str or Path, optional
        Write the server's state after every round (consensus, delta references,
        sampler, privacy ledger, history, the run's token), so that
        ``run(grid, resume=True)`` continues an interrupted federation; the sites keep
        their own state (models, last uploads) under that token.
    callbacks : list of cotrain.callbacks.Callback, optional
        Called around every round, after the built-in checkpoint, privacy budget and
        early-stopping callbacks (see :mod:`cotrain.callbacks`).
    privacy : cotrain.privacy mechanism, optional
        The client-side mechanism of the run. Every site applies its own (``[privacy]``
        in its ``site.toml``, with its own entropy: the server never learns a seed); a
        site whose declared mechanism differs is refused at the handshake. The ledger
        accounts it like in-process (DP-SGD sites report each round's event) and its
        ``budget`` stops the run.
    clustering : None, "agreement" or cotrain.clustering.AgreementClustering, optional
        Clustered co-training, as in :class:`~cotrain.FederatedCoTrainer`: sites whose
        labels on U disagree are split into clusters, each sent its own cluster's
        consensus (run config ``clustering = "agreement"``; ``""`` is None).

    Attributes
    ----------
    classes_ : ndarray
    node_ids_ : list of int
        The SuperNode of each client index (sites ordered by their ``client-id``,
        then node id).
    learners_ : list of str
        The learner each site reported.
    refused_ : dict
        ``node id -> reason`` for SuperNodes left out (a different public pool or
        privacy mechanism, an unusable learner, no answer, a node claiming a site it does
        not match).
    rejoined_ : list of tuple
        ``(round, client index, old node, new node)``: sites whose SuperNode restarted
        under a new node id and took their place again before that round (matched by
        ``client-id``, learner, rows, labels and mechanism, or for a private site by its
        public fields alone: ``client-id``, learner, declared classes and mechanism; see
        :mod:`cotrain.flower.handshake`).
    history_ : History
        One :class:`~cotrain.history.RoundRecord` per round (client indices, failures,
        stragglers, bytes, times; per-site accuracies on the sites' evaluation data and,
        where sites share one evaluation set, ``consensus_accuracy``: see
        :mod:`cotrain.flower.evaluation`).
    consensus_codes_ : ndarray of shape (n_rounds, n_public)
        The hard consensus after every round (-1 where it abstained).
    pseudo_label_codes_ : ndarray of shape (n_public,)
        The last hard consensus.
    stopped_reason_ : str or None
        "early stopping" or "privacy budget" if the run ended before ``rounds``, or
        "stopped: round t: only k of n sampled clients answered ..." if a round had
        fewer than ``min_clients`` answers (sites that failed or did not answer within
        ``round_timeout``): the run then ends with the rounds before it, and with
        ``checkpoint_dir`` a later ``run(grid, resume=True)`` continues from there.
    """

    def __init__(
        self,
        public_pool: Any,
        *,
        rounds: int = 20,
        consensus: Any = "auto",
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
        checkpoint_dir: str | Path | None = None,
        callbacks: list[Any] | None = None,
        privacy: Any = None,
        clustering: Any = None,
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
        self.clustering = clustering
        self.checkpoint_dir = checkpoint_dir
        self.callbacks = callbacks
        self.privacy = privacy

    @classmethod
    def from_run_config(cls, run_config: dict[str, Any]) -> FlowerCoTraining:
        """Build the strategy from a Flower run config (kebab-case keys).

        TOML has no None: 0 stands for it in ``soft-bits``, ``early-stopping`` and
        ``round-timeout``, an empty ``checkpoint-dir`` means none, and a negative
        ``random-state`` means unseeded. ``privacy`` is the run's mechanism as JSON,
        ``'{"class": "cotrain.privacy.SubsampleAndAggregate", "params": {...}}'``, and
        ``classes`` the label space as JSON (``'[0, 1]'``; a Flower run config holds no
        lists; ``""`` is none), required with ``privacy``.

        Examples
        --------
        >>> FlowerCoTraining.from_run_config({"rounds": 3, "public-pool": "u.npy",
        ...                                   "soft-bits": 0}).soft_bits is None
        True
        """
        if "public-pool" not in run_config:
            raise ValueError("the run config needs 'public-pool' (the public pool's .npy file)")
        params: dict[str, Any] = {}
        for key, name in RUN_CONFIG_KEYS.items():
            if key in run_config:
                value = run_config[key]
                if name in _ZERO_IS_NONE:
                    none = value == 0
                elif name in ("checkpoint_dir", "clustering", "classes"):
                    none = value == ""
                else:
                    none = name == "random_state" and value < 0
                params[name] = None if none else value
        if isinstance(params.get("classes"), str):  # JSON: [0, 1] or ["cat", "dog"]
            params["classes"] = json.loads(params["classes"])
        if run_config.get("privacy"):  # JSON: {"class": ..., "params": {...}}
            spec = json.loads(str(run_config["privacy"]))
            params["privacy"] = mechanism_from_spec(spec, "run config 'privacy'")
            require_public_classes(params.get("classes"), True, "the run config key 'classes'")
        return cls(**params)

    # ------------------------------------------------------------------ run
    def run(self, grid: Any, resume: bool = False) -> FlowerCoTraining:
        """Handshake with the SuperNodes, then run the rounds; returns ``self``.

        With ``resume=True`` the run continues from the last round checkpointed in
        ``checkpoint_dir`` (the same parameters, public pool and sites are required).

        Raises
        ------
        ValueError
            With ``privacy`` but no ``classes``, before any message is sent.
        """
        require_public_classes(self.classes, self.privacy)
        X_public = (
            load_array(self.public_pool)
            if isinstance(self.public_pool, str | Path)
            else np.asarray(self.public_pool)
        )
        self._pool_hash = pool_fingerprint(X_public)
        self._n_public = int(X_public.shape[0])
        classes = None if self.classes is None else protocol.labels_to_config(self._classes())
        self._roster = Roster(
            self._pool_hash,
            self._n_public,
            self._privacy_text(),
            self.node_timeout,
            self.poll_interval,
            classes=classes,
        )
        sites = self._roster.handshake(grid, self.min_nodes, self.min_clients)
        self.refused_, self.rejoined_ = self._roster.refused, self._roster.rejoined
        n = len(sites)
        check_params(self._trainer_params(), n_clients=n)
        self.learners_ = [s["learner"] for s in sites]
        self.classes_ = self._global_classes(sites)
        self._eval = SharedEvaluation(sites, self.classes_)
        self._run: ServerRun = build_server(
            consensus=auto_consensus(self.consensus, self.privacy),
            X_public=X_public,
            n_classes=len(self.classes_),
            client_names=[
                f"site {i} (node {s['node']}, {s['learner']})" for i, s in enumerate(sites)
            ],
            share=self.share,
            encoding=self.encoding,
            soft_dtype=self.soft_dtype,
            soft_bits=self.soft_bits,
            clustering=self.clustering,
            participation=self.participation,
            on_client_error=self.on_client_error,
            min_clients=self.min_clients,
            privacy=self.privacy,
            random_state=self.random_state,
            deployment=True,
        )
        self.consensus_ = self._run.consensus
        self._seeds = [client_seed(s) for s in self._run.client_seeds]
        self.history_ = self._run.history
        self.timings_: list[dict[str, float]] = []
        self._codes: list[np.ndarray] = []
        #: what the ServerApp's code received in secure steps (tests: never a share)
        self._received: list[tuple[str, Any]] = []
        #: the sites' latest accuracies, shared predictions, released quality and own ε
        self._books = RoundBookkeeping(len(self.classes_))
        check_privacy_setup(self.privacy, self._run.consensus, [])
        #: the round the run's mechanism declares: the in-process code (rounds.py)
        self._protocol: Round = make_round(
            self.privacy,
            self._run,
            self._books,
            n_public=self._n_public,
            n_classes=len(self.classes_),
            rounds=self.rounds,
            participation=self.participation,
            random_state=self.random_state,
            y_eval_codes=self._eval.y_codes,
        )
        if isinstance(self._protocol, SecureRound):  # every sum through SecAgg+
            check_deployed_plan(self.privacy, self._protocol.plan)
        #: names this run at the sites, which keep their state under it
        self.run_token_ = secrets.token_hex(8)
        checkpoint, start = self._checkpoint(sites, resume), 1
        if resume and checkpoint is not None and checkpoint.checkpointer.latest():
            start = self._restore(checkpoint.checkpointer)
        ledger = self._run.ledger
        own = [checkpoint, None if ledger is None else PrivacyBudget(ledger)]
        callbacks = loop_callbacks(own, self.early_stopping, self.callbacks)
        loop = RoundLoop(
            lambda t, sampled: self._round(t, sampled, grid),
            self._run.sampler.sample,
            self.rounds,
            callbacks,
            self.history_,
            start,
            owner=self,
        )
        try:
            self.stopped_reason_ = loop.run()
        except TooFewClients as err:  # sites did not answer: end with the rounds that ran
            self.stopped_reason_ = f"{STOPPED_SHORT}{err}"
            _LOG.error("%s", self.stopped_reason_)
        self.consensus_codes_ = np.stack(self._codes) if self._codes else np.empty((0, 0))
        self.n_rounds_ = len(self.history_)
        self.learner_warnings_ = dict(self._server.warnings)
        return self

    def _checkpoint(self, sites: list[dict[str, Any]], resume: bool) -> Any:
        """The checkpoint callback for ``checkpoint_dir`` (None without one)."""
        if self.checkpoint_dir is None:
            if resume:
                raise ValueError("resume=True needs checkpoint_dir (where the run was saved)")
            return None
        params = {k: repr(v) for k, v in self._params().items() if k not in _NOT_IN_FINGERPRINT}
        who = [  # a private site: its public fields only (it sends no rows or labels)
            identity(s)
            if s.get("privacy")
            else (s["client-id"], s["learner"], s["n-samples"], s["labels"])
            for s in sites
        ]
        config = fingerprint("flower", sorted(params.items()), self._pool_hash, repr(who))
        checkpointer = Checkpointer(self.checkpoint_dir, config)
        if not resume:
            checkpointer.clear()
        return CheckpointCallback(checkpointer, self._state_dict)

    def _state_dict(self) -> tuple[dict[str, Any], bytes | None, dict[int, Any]]:
        """The server side's state (as in-process: :meth:`ServerRun.state_dict`) and
        what only a deployment keeps (the run token, timings, the sites' accuracies)."""
        state, broadcast = self._run.state_dict()
        state.update(
            consensus_codes=np.stack(self._codes),
            timings=self.timings_,
            run_token=self.run_token_,
            books=self._books.state_dict(),
            **self._protocol.state_dict(),
        )
        return state, broadcast, {}

    def _restore(self, checkpointer: Checkpointer) -> int:
        """Put the server's checkpointed state back; returns the next round."""
        state, broadcast, _ = checkpointer.restore()
        self._run.load_state_dict(state, broadcast)
        self._codes = list(state["consensus_codes"])
        self.timings_ = list(state["timings"])
        self.run_token_ = str(state.get("run_token", self.run_token_))  # the sites' state
        self._books.load_state_dict(state["books"])
        self._protocol.load_state_dict(state)
        return int(state["round"]) + 1

    def _round(self, t: int, sampled: np.ndarray, grid: Any) -> RoundRecord:
        """Round ``t`` of the run's round protocol (:mod:`cotrain.federation.rounds`, the
        in-process code) over the Grid (:class:`~cotrain.flower.grid_transport.
        GridTransport`)."""
        start = time.perf_counter()
        for i in self._roster.rejoin(grid, t):  # a restarted SuperNode, under a new node id
            _LOG.warning("round %s: site %s rejoined on node %s", t, i, self.node_ids_[i])
        transport = GridTransport(
            grid,
            self._server,
            self.node_ids_,
            self.run_token_,
            self._train_message,
            self._upload,
            self._eval,
            self.rounds,
            self.poll_interval,
            received=self._received,
        )
        record = self._protocol.run(t, sampled, transport, self.round_timeout, started=start)
        codes = self._server.hard_consensus
        if codes is not None:  # always, after a round
            self._codes.append(codes.copy())
        self.timings_.append(transport.round_timing(start))
        return record

    def _train_message(self, t: int, i: int, link: Downlink) -> Any:
        from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict

        content = RecordDict(
            {
                protocol.ROUND: ConfigRecord(
                    {
                        "round": t,
                        "client-index": i,
                        "seed": self._seeds[i],
                        "ref-round": link.ref_round,
                        **self._server.wire.to_config(),
                        "pool-hash": self._pool_hash,
                        "classes": protocol.labels_to_config(self.classes_),
                        "run-token": self.run_token_,
                        "broadcast-ref": link.ref,
                        "eval-proba": self.consensus_.output == "soft" and bool(self._eval.sites),
                    }
                )
            }
        )
        if link.data is not None:
            content[envelope.LABELS] = ArrayRecord({protocol.PAYLOAD: protocol.to_array(link.data)})
        return Message(
            content=content, dst_node_id=self.node_ids_[i], message_type="train", group_id=str(t)
        )

    def _upload(self, i: int, reply: Any) -> Upload:
        """A site's reply as the Upload the server receives from in-process clients
        (:func:`cotrain.wire.envelope.decode_upload`).

        A reply that cannot be read (missing records, wrong types) is that site's
        failure, handled by ``on_client_error``: one broken site never stops the run.
        """
        if reply.has_error():
            return Upload(i, error=envelope.RemoteClientError(error_text(reply.error)))
        try:
            return envelope.decode_upload(i, protocol.to_plain(reply.content))
        except Exception as err:  # a broken or hostile reply
            return Upload(
                i, error=envelope.RemoteClientError(f"malformed reply: {type(err).__name__}: {err}")
            )

    # ------------------------------------------------------------ handshake
    def _privacy_text(self) -> str:
        """The run's client-side mechanism as sites declare theirs ("" for none)."""
        return "" if self.privacy is None else repr(self.privacy)

    def _classes(self) -> np.ndarray:
        return np.unique(np.asarray(self.classes))

    def _global_classes(self, sites: list[dict[str, Any]]) -> np.ndarray:
        if self.classes is not None:
            return self._classes()
        return np.unique(np.concatenate([np.asarray(s["labels"]) for s in sites]))

    def _trainer_params(self) -> dict[str, Any]:
        """The parameters this class shares with FederatedCoTrainer (checked alike)."""
        names = (
            "share soft_dtype encoding soft_bits rounds participation early_stopping "
            "on_client_error min_clients round_timeout random_state consensus callbacks privacy "
            "clustering"
        ).split()
        return {name: getattr(self, name) for name in names}

    def _params(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in RUN_CONFIG_KEYS.values()} | {
            "privacy": self.privacy,
            "callbacks": self.callbacks,
            "poll_interval": self.poll_interval,
        }

    # --------------------------------------------------------------- output
    @property
    def _server(self) -> CoTrainingServer:
        """The run's server (from :func:`~cotrain.federation.setup.build_server`)."""
        return self._run.server

    @property
    def node_ids_(self) -> list[int]:
        """The SuperNode of each client index (sites ordered by their ``client-id``, then
        node id; a site that rejoined under a new node has its new id)."""
        return self._roster.node_ids

    @property
    def pseudo_label_codes_(self) -> np.ndarray:
        """The last hard consensus on the public pool (-1 where it abstained)."""
        codes = self._server.hard_consensus
        if codes is None:
            raise AttributeError("pseudo_label_codes_ exists once a round has run")
        return codes

    @property
    def pseudo_labels_(self) -> np.ndarray:
        """The last consensus: labels as a masked array (hard) or probabilities (soft)."""
        labels = self._server.consensus_labels
        if labels is None:
            raise AttributeError("pseudo_labels_ exists once a round has run")
        if labels.ndim == 2:
            return labels
        return np.ma.masked_array(self.classes_[np.maximum(labels, 0)], mask=labels < 0)

    def privacy_report(self) -> dict[str, Any]:
        """Total (ε, δ) spent by every site, with what each ε protects and against whom.

        The same report as :meth:`cotrain.FederatedCoTrainer.privacy_report`, from the
        ledger the ServerApp keeps from what the sites declared and reported, with each
        private site's own ledger ε (``site_epsilon``, from the ``site-epsilon`` of its
        latest reply: every release it sent, including replies this server ignored) beside
        the server's count; where they differ, the site's binds.

        Raises
        ------
        ValueError
            If the run used no privacy mechanism.
        """
        ledger = getattr(getattr(self, "_run", None), "ledger", None)
        if ledger is None:
            raise ValueError(
                "this run used no privacy mechanism (no privacy and a noiseless consensus)"
            )
        report = ledger.report()
        if self.privacy is None:  # a noisy consensus only: no site keeps a ledger
            return report
        books = getattr(self, "_books", None)
        return quote_site_epsilon(report, {} if books is None else books.site_epsilon, self.privacy)

    def save(self, directory: str | Path) -> Path:
        """Write ``history.csv``, ``consensus_codes.npy``, ``summary.json``, ``timings.json``
        and, for a private run, ``privacy.json`` (:meth:`privacy_report`)."""
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
            "rejoined": [list(r) for r in self.rejoined_],
            # [site, category, message, count] (a private site keeps its warnings)
            "warnings": [[*key, n] for key, n in sorted(self.learner_warnings_.items())],
            "failed": {str(r.round): r.failed for r in self.history_},
            "timed_out": {str(r.round): list(r.timed_out) for r in self.history_},
            # the sites whose shared evaluation set the consensus accuracy is scored on
            "eval_sites": self._eval.sites,
        }
        (folder / "summary.json").write_text(json.dumps(summary, indent=2))
        (folder / "timings.json").write_text(json.dumps(self.timings_, indent=2))
        if self._server.ledger is not None:
            report = self.privacy_report()
            (folder / "privacy.json").write_text(json.dumps(report, indent=2, default=str))
        return folder


def make_server_app() -> Any:
    """The cotrain ServerApp (``serverapp = "your_app.server_app:app"``).

    The run config (``[tool.flwr.app.config]``) holds the strategy's parameters in
    kebab case (see :data:`RUN_CONFIG_KEYS` and :meth:`FlowerCoTraining.from_run_config`)
    and, optionally, ``output-dir``, where :meth:`FlowerCoTraining.save` writes the
    results, and ``resume = true`` to continue from ``checkpoint-dir`` (by default
    ``<output-dir>/checkpoint``). A run whose sites stop answering ends with the rounds
    that ran (``stopped_reason`` in ``summary.json``) and prints how to continue it.
    """
    from flwr.serverapp import ServerApp

    app = ServerApp()

    @app.main()
    def main(grid: Any, context: Any) -> None:
        config = dict(context.run_config)
        resume = bool(config.get("resume", False))
        output = str(config.get("output-dir", ""))
        if output and not config.get("checkpoint-dir"):  # a run that stops can resume
            config["checkpoint-dir"] = str(Path(output) / "checkpoint")
        strategy = FlowerCoTraining.from_run_config(config)
        try:
            strategy.run(grid, resume=resume)
        except TooFewClients as err:  # not enough sites answered the handshake
            print(f"run stopped before its first round: {err}", flush=True)
            if output and not resume:  # a resumed run keeps the results it continues
                Path(output).mkdir(parents=True, exist_ok=True)
                (Path(output) / "summary.json").write_text(
                    json.dumps({"n_rounds": 0, "stopped_reason": f"{STOPPED_SHORT}{err}"})
                )
            return
        if output:
            strategy.save(output)
        for record in strategy.history_:
            print(
                f"round {record.round}: {len(record.clients)} sites, failed "
                f"{sorted(record.failed)}, timed out {list(record.timed_out)}, coverage "
                f"{record.coverage:.2f}, up {record.bytes_up} B, {record.time_s:.2f} s",
                flush=True,
            )
        if str(strategy.stopped_reason_).startswith(STOPPED_SHORT):
            where = f"results in {output}; " if output else ""
            print(
                f"run {strategy.stopped_reason_}; {where}to continue from round "
                f"{strategy.n_rounds_ + 1}, run it again with resume=true in the run config",
                flush=True,
            )

    return app
