"""FederatedCoTrainer: federated co-training (FedCT) of any scikit-learn-style learners."""

from __future__ import annotations

import os
import time
import warnings
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.validation import check_is_fitted

from consensus import get_consensus, majority_vote, soft_mean
from cotrain._validation import (
    FitData,
    check_estimators,
    check_features,
    check_fit_inputs,
    check_params,
    describe_shape,
    feature_shape,
)
from cotrain.checkpoint import (
    FORMAT,
    Checkpointer,
    estimator_types,
    fingerprint,
    load_model,
)
from cotrain.client import (
    Client,
    run_client_step,
    with_pseudo_labels,
)
from cotrain.history import History, RoundRecord
from cotrain.messages import HardLabels, decode
from cotrain.runtime import Straggler, make_runtime
from cotrain.seeding import client_seed, seeded_clone
from cotrain.server import CoTrainingServer, sample_clients
from learners import ClassAlignedClassifier


class FederatedCoTrainer(ClassifierMixin, BaseEstimator):
    """Federated co-training: clients share only labels on a public unlabeled pool.

    Each round, every sampled client fits its own model on its private data plus the
    public examples pseudo-labeled by the last consensus, labels the public pool, and
    sends those labels (hard, or soft probabilities). The server forms a consensus that
    becomes next round's pseudo-labels, replacing the previous ones (FedCT, Alg. 1).

    Parameters
    ----------
    estimators : list of classifiers
        One scikit-learn-style classifier per client (cloned, never mutated). Clients may
        use different learners.
    consensus : str or consensus.Consensus, default="majority"
        How label votes become pseudo-labels: "majority", "qualified" (quorum 0.9),
        "mean" (distributed distillation), "entropy" (FedDS), "certainty" (FedAUX), or
        an object from :mod:`consensus`.
    share : {"hard", "soft"}, default="hard"
        Clients send hard labels (packed at ceil(log2 C) bits) or probabilities (float32).
    soft_dtype : {"float32", "float16"}, default="float32"
        Precision of soft labels on the wire (uploads with ``share="soft"`` and the
        broadcast of a soft consensus); float16 halves the bytes.
    encoding : {"packed", "delta"}, default="packed"
        Hard-label uploads: packed at ceil(log2 C) bits, or delta-coded — only the labels
        that changed since the client's previous upload, compressed (zlib), with a CRC;
        the server keeps each client's last labels to decode them. Broadcasts stay packed.
    soft_bits : int, default=None
        Quantise soft labels (uploads and a soft consensus broadcast) to this many bits
        per class, rows kept summing to one (largest-remainder rounding); None sends
        ``soft_dtype`` floats.
    rounds : int, default=20
        Communication rounds.
    participation : float, default=1.0
        Fraction of clients asked each round, sampled with ``random_state``.
    privacy : cotrain.privacy mechanism, default=None
        A label-privacy mechanism (e.g. ``RandomizedResponse(epsilon)``) applied on each
        client to its labels before they are encoded. Its ε is composed over the rounds
        each client takes part in and reported in ``history_[t].epsilon`` and
        :meth:`privacy_report`; with a ``budget`` the run stops before a round that would
        exceed it (``stopped_reason_ == "privacy budget"``).
    early_stopping : int, default=None
        Stop once the consensus (hard labels, abstentions included) has not changed for
        this many consecutive rounds.
    on_client_error : {"raise", "skip"}, default="raise"
        A failing client stops the run, or sits the round out (recorded in the history).
    min_clients : int, default=1
        With "skip", a round in which fewer clients answer fails with a RuntimeError.
    classes : array-like, default=None
        The global label space; default: the union of all clients' labels.
    n_jobs : int, default=None
        Joblib workers for the client steps; results are identical for any value.
    runtime : {"sequential", "joblib", "ray"} or runtime object, default=None
        Where client steps run; None picks sequential or joblib from ``n_jobs``. "ray"
        needs the ``ray`` extra. The round logic is the same in every runtime.
    round_timeout : float, default=None
        Seconds a round waits for its clients; the ones still running are stragglers,
        recorded in ``history_[t].timed_out``, and the round goes on with the others if
        at least ``min_clients`` answered.
    checkpoint_dir : str or path, default=None
        Write a checkpoint after every round (client models with skops — torch tensors
        with ``torch.save`` —, pseudo-labels, the server's message state, generator states
        and the history; atomically, see :mod:`cotrain.checkpoint`), so that
        ``fit(..., resume=True)`` continues an interrupted run from its last complete
        round with exactly the result of an uninterrupted one. A fit without ``resume``
        starts afresh and replaces the directory's checkpoints.
    random_state : int, default=None
        Seeds client sampling and every client estimator whose ``random_state`` is None.
    verbose : int, default=0
        0: silent; 1: a progress bar over rounds; 2: also one line per round.

    Attributes
    ----------
    classes_ : ndarray
        Global classes, in the caller's label values.
    clients_ : list of estimators
        The fitted local models, one per client (None for a client that never fitted).
    pseudo_labels_ : ndarray
        Last consensus on the public pool: hard labels in the caller's values as a masked
        array (masked where the consensus abstained), or soft targets
        ``(n_public, n_classes)``.
    pseudo_label_codes_ : ndarray
        The hard consensus as indices into ``classes_``, -1 where it abstained.
    history_ : History
        One record per round: clients, failures, coverage, agreement, labels changed,
        bytes up and down, wall time, and accuracies when evaluation data is given.
    n_rounds_ : int
        Rounds actually run (fewer than ``rounds`` after early stopping).
    stopped_reason_ : str or None
        Why the run ended before ``rounds``: "early stopping", "privacy budget", or None.
    learner_warnings_ : dict
        ``(client, category, message) -> count`` of warnings raised by the learners,
        summarised once at the end of ``fit`` instead of printed every round.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain import FederatedCoTrainer, partition
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X_train, y_train, X_public = X[:100], y[:100], X[100:400]
    >>> parts = partition.iid(y_train, n_clients=3, random_state=0)
    >>> trainer = FederatedCoTrainer([DecisionTreeClassifier()] * 3, rounds=3, random_state=0)
    >>> trainer = trainer.fit([X_train[p] for p in parts], [y_train[p] for p in parts],
    ...                       X_public=X_public)
    >>> trainer.predict(X[400:405]).shape
    (5,)
    >>> len(trainer.history_)
    3
    """

    def __init__(
        self,
        estimators: list[Any],
        consensus: Any = "majority",
        share: str = "hard",
        soft_dtype: str = "float32",
        encoding: str = "packed",
        soft_bits: int | None = None,
        rounds: int = 20,
        participation: float = 1.0,
        privacy: Any = None,
        early_stopping: int | None = None,
        on_client_error: str = "raise",
        min_clients: int = 1,
        classes: Any = None,
        n_jobs: int | None = None,
        runtime: Any = None,
        round_timeout: float | None = None,
        checkpoint_dir: Any = None,
        random_state: int | None = None,
        verbose: int = 0,
    ) -> None:
        self.estimators = estimators
        self.consensus = consensus
        self.share = share
        self.soft_dtype = soft_dtype
        self.encoding = encoding
        self.soft_bits = soft_bits
        self.rounds = rounds
        self.participation = participation
        self.privacy = privacy
        self.early_stopping = early_stopping
        self.on_client_error = on_client_error
        self.min_clients = min_clients
        self.classes = classes
        self.n_jobs = n_jobs
        self.runtime = runtime
        self.round_timeout = round_timeout
        self.checkpoint_dir = checkpoint_dir
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        X: Any,
        y: Any = None,
        *,
        X_public: Any,
        groups: Any = None,
        eval_set: tuple[Any, Any] | None = None,
        y_public: Any = None,
        resume: bool = False,
    ) -> FederatedCoTrainer:
        """Run federated co-training.

        Parameters
        ----------
        X : list of array-like, or array-like with ``groups``
            One feature array per client, or all rows with ``groups`` naming the client.
        y : list of array-like, or array-like with ``groups``
            The clients' labels (any hashable values, one type across clients).
        X_public : array-like of shape (n_public, ...)
            The public unlabeled pool U that all clients label: a table
            ``(n_public, n_features)``, image tensors ``(n_public, C, H, W)``, or raw text
            (a 1-D sequence of strings, for text learners such as GPT2Classifier).
        groups : array-like, optional
            Client of each row when X and y are single arrays (clients in sorted order).
        eval_set : (X_eval, y_eval), optional
            Test data scored every round (clients and consensus); never used to train.
        y_public : array-like, optional
            Hidden truth of the public pool, to score the pseudo-labels; never used to
            train.
        resume : bool, default=False
            Continue from the last complete round checkpointed in ``checkpoint_dir`` (a
            run that had finished is restored without training). The same estimators,
            parameters and data are required; a checkpoint from another configuration,
            or one that was altered, is refused with a ``ValueError``. Without a
            checkpoint in the directory the fit starts from round 1.

        Returns
        -------
        self
        """
        estimators = check_estimators(self.estimators, self.share)
        data = check_fit_inputs(
            X,
            y,
            X_public,
            groups=groups,
            n_estimators=len(estimators),
            classes=self.classes,
            eval_set=eval_set,
            y_public=y_public,
        )
        check_params(self.get_params(deep=False), n_clients=len(estimators))
        _check_privacy(self.privacy, self.share)
        # a copy, so that a noisy consensus starts every fit from its own seed
        self.consensus_ = clone(get_consensus(self.consensus), safe=False)
        _dry_run(self.consensus_, len(estimators), data)
        self.classes_ = data.classes
        self._feature_shape = feature_shape(data.X_public)
        if len(self._feature_shape) == 1:
            self.n_features_in_ = self._feature_shape[0]
        self._X_public = data.X_public
        if data.feature_names is not None:
            self.feature_names_in_ = data.feature_names

        seeds = np.random.SeedSequence(self.random_state)
        sampler_seed, *client_seeds = seeds.spawn(len(estimators) + 1)
        self._sampler = np.random.default_rng(sampler_seed)
        self._ledger = None
        mechanisms = [m for m in (self.privacy, self.consensus_) if _accounted(m)]
        if mechanisms:
            from cotrain.privacy.ledger import PrivacyLedger

            self._ledger = PrivacyLedger(
                mechanisms,
                len(estimators),
                len(data.classes),
                data.X_public.shape[0],
                seeds.spawn(1)[0],
            )
            if self._ledger.would_exceed_budget(np.arange(len(estimators))):
                raise ValueError(
                    f"privacy budget {self._ledger.budget} is smaller than the ε of one round "
                    f"({self._ledger.epsilon_after(1):.4g}); raise the budget or the noise"
                )
        self._clients = [
            Client(i, seeded_clone(est, s), Xi, yi, data.classes)
            for i, (est, s, Xi, yi) in enumerate(
                zip(estimators, client_seeds, data.X_clients, data.y_clients, strict=True)
            )
        ]
        self._server = CoTrainingServer(
            self.consensus_,
            len(data.classes),
            len(estimators),
            data.X_public.shape[0],
            share=self.share,
            encoding=self.encoding,
            soft_dtype=self.soft_dtype,
            soft_bits=self.soft_bits,
            on_client_error=self.on_client_error,
            min_clients=self.min_clients,
            ledger=self._ledger,
            client_names=[f"client {i} ({type(e).__name__})" for i, e in enumerate(estimators)],
        )
        self.history_ = History()
        self.stopped_reason_ = None
        self._checkpointer = self._make_checkpointer(estimators, data, resume)
        start, finished = 1, False
        if self._checkpointer is not None and resume and self._checkpointer.latest():
            start, finished = self._restore_checkpoint()
        if not finished:
            self._run_rounds(data, start)
        self.n_rounds_ = len(self.history_)
        self._summarise_warnings()
        return self

    def _run_rounds(self, data: FitData, start: int = 1) -> None:
        from tqdm.auto import tqdm

        unchanged = _trailing_unchanged(self.history_)
        with (
            make_runtime(self.n_jobs, self.runtime) as runtime,
            tqdm(
                total=self.rounds,
                initial=start - 1,
                disable=self.verbose < 1,
                desc="FedCT",
                unit="round",
            ) as bar,
        ):
            for t in range(start, self.rounds + 1):
                if self.early_stopping is not None and unchanged >= self.early_stopping:
                    self.stopped_reason_ = "early stopping"  # (a resumed, settled run)
                    break
                sampled = self._sample_clients()
                if self._ledger is not None and self._ledger.would_exceed_budget(sampled):
                    self.stopped_reason_ = "privacy budget"
                    break
                record = self._round(t, sampled, runtime, data)
                self.history_.append(record)
                if self._checkpointer is not None:
                    self._save_checkpoint(t)
                bar.update(1)
                bar.set_postfix(_postfix(record))
                if self.verbose >= 2:
                    bar.write(_round_line(record))
                unchanged = unchanged + 1 if record.changed == 0 else 0
                if self.early_stopping is not None and unchanged >= self.early_stopping:
                    self.stopped_reason_ = "early stopping"
                    break
        if self._checkpointer is not None:
            self._checkpointer.update_state(finished=True, stopped_reason=self.stopped_reason_)

    # ----------------------------------------------------------- checkpoints
    def _make_checkpointer(
        self, estimators: list[Any], data: FitData, resume: bool
    ) -> Checkpointer | None:
        if self.checkpoint_dir is None:
            if resume:
                raise ValueError("resume=True needs checkpoint_dir (where the run was saved)")
            return None
        if not isinstance(self.checkpoint_dir, str | os.PathLike):
            raise TypeError(
                f"checkpoint_dir must be a path (str or os.PathLike), got "
                f"{type(self.checkpoint_dir).__name__}"
            )
        for est in estimators:
            if type(est).__name__ in _NOT_CHECKPOINTABLE:
                raise NotImplementedError(
                    f"checkpoint_dir: {type(est).__name__} models cannot be checkpointed yet "
                    f"({_NOT_CHECKPOINTABLE[type(est).__name__]})"
                )
        params = self.get_params(deep=False)
        # what the result of the rounds so far depends on: not n_jobs, runtime or verbose,
        # nor `rounds` (a finished run can be extended)
        for name in ("n_jobs", "runtime", "verbose", "checkpoint_dir", "estimators", "rounds"):
            params.pop(name)
        config = fingerprint(
            FORMAT,
            [repr(e) for e in estimators],
            sorted((k, repr(v)) for k, v in params.items()),
            data.X_clients,
            data.y_clients,
            data.X_public,
            data.classes,
            data.X_eval,
            data.y_eval_codes,
            data.y_public_codes,
        )
        checkpointer = Checkpointer(self.checkpoint_dir, config)
        self._trusted_types = estimator_types(estimators)
        if not resume:
            checkpointer.clear()
        return checkpointer

    def _save_checkpoint(self, t: int) -> None:
        server = self._server
        arrays: dict[str, np.ndarray] = {}
        if server.hard_consensus is not None:
            arrays["hard_consensus"] = server.hard_consensus
        for c in self._clients:
            for key, value in (
                ("last_sent", c.last_sent),
                ("eval_codes", c.last_eval[0]),
                ("eval_proba", c.last_eval[1]),
                ("uplink", server.uplink[c.client_id].previous),
            ):
                if value is not None:
                    arrays[f"{key}_{c.client_id}"] = value
        if self._ledger is not None:
            arrays["ledger_rounds_taken"] = self._ledger.rounds_taken
        state_dict = getattr(self.consensus_, "state_dict", None)
        state = {
            "round": t,
            "sampler": self._sampler.bit_generator.state,
            "consensus": _jsonable(state_dict()) if callable(state_dict) else None,
            "history": [r.to_json() for r in self.history_],
            "warnings": [[*key, n] for key, n in server.warnings.items()],
            "fitted": [c.fitted for c in self._clients],
            "stopped_reason": None,
            "finished": False,
        }
        models = {c.client_id: c.model for c in self._clients if c.fitted}
        self._checkpointer.save(t, state, arrays, server.broadcast_bytes(), models)

    def _restore_checkpoint(self) -> tuple[int, bool]:
        """Put the state of the last checkpoint back; returns (next round, finished)."""
        state, arrays, broadcast, folder = self._checkpointer.load()
        server = self._server
        for c in self._clients:
            i = c.client_id
            if state["fitted"][i]:
                c.model = load_model(folder, f"client-{i}", self._trusted_types)
                c.fitted = True
            c.last_sent = arrays.get(f"last_sent_{i}")
            c.last_eval = (arrays.get(f"eval_codes_{i}"), arrays.get(f"eval_proba_{i}"))
            server.uplink[i].previous = arrays.get(f"uplink_{i}")
        server.hard_consensus = arrays.get("hard_consensus")
        server.broadcast = None if broadcast is None else decode(broadcast)
        server.warnings = Counter({(c, cat, msg): n for c, cat, msg, n in state["warnings"]})
        if self._ledger is not None:
            self._ledger.rounds_taken = arrays["ledger_rounds_taken"].copy()
        if state["consensus"] is not None:
            self.consensus_.load_state_dict(state["consensus"])
        self._sampler.bit_generator.state = state["sampler"]
        for record in state["history"]:
            self.history_.append(RoundRecord.from_json(record))
        self.stopped_reason_ = state["stopped_reason"]
        # a run that stopped early stays stopped; one that used up its rounds can go on
        finished = state["finished"] and (
            state["stopped_reason"] is not None or state["round"] >= self.rounds
        )
        return state["round"] + 1, bool(finished)

    def _round(self, t: int, sampled: np.ndarray, runtime: Any, data: FitData) -> RoundRecord:
        """One communication round: clients step, the server decodes, votes and records."""
        start = time.perf_counter()
        broadcast = self._server.broadcast_bytes()
        step = {  # what every client of this round receives
            "X_public": data.X_public,
            "broadcast": broadcast,
            "share": self.share,
            "X_eval": data.X_eval,
            "eval_proba": self.consensus_.output == "soft" and data.X_eval is not None,
            "soft_dtype": self.soft_dtype,
            "privacy": self.privacy,
            "encoding": self.encoding,
            "soft_bits": self.soft_bits,
        }
        seeds = [
            None if self._ledger is None else self._ledger.seed_for(t, int(i)) for i in sampled
        ]
        tasks = [(self._clients[i], step, seed) for i, seed in zip(sampled, seeds, strict=True)]
        outcomes = runtime.map(run_client_step, tasks, timeout=self.round_timeout)
        timed_out = tuple(
            int(i) for i, o in zip(sampled, outcomes, strict=True) if isinstance(o, Straggler)
        )
        results = [o for o in outcomes if not isinstance(o, Straggler)]
        record, answered = self._server.finish_round(
            t, sampled, results, timed_out, started=start, broadcast=broadcast
        )
        for r in answered:  # the workers' copies of the clients come back
            client = self._clients[r.client_id]
            client.model, client.fitted = r.model, True
            client.last_sent = r.sent_codes
            client.last_eval = (r.eval_codes, r.eval_proba)
        covered = self._server.hard_consensus >= 0
        return replace(record, **self._evaluate(data, self._server.hard_consensus, covered))

    def _evaluate(self, data: FitData, hard: np.ndarray, covered: np.ndarray) -> dict[str, Any]:
        """Accuracies for the round record (only from evaluation-only data)."""
        out: dict[str, Any] = {}
        if data.y_public_codes is not None and covered.any():
            out["pseudo_label_accuracy"] = float(
                np.mean(hard[covered] == data.y_public_codes[covered])
            )
        if data.X_eval is None:
            return out
        fitted = [c for c in self._clients if c.fitted]
        codes = np.stack([c.last_eval[0] for c in fitted])
        acc = {
            c.client_id: float(np.mean(row == data.y_eval_codes))
            for c, row in zip(fitted, codes, strict=True)
        }
        probas = [c.last_eval[1] for c in fitted]
        consensus_pred = self._aggregate(codes, None if probas[0] is None else np.stack(probas))
        out.update(
            client_accuracy=acc,
            mean_accuracy=float(np.mean(list(acc.values()))),
            std_accuracy=float(np.std(list(acc.values()))),
            consensus_accuracy=float(np.mean(consensus_pred == data.y_eval_codes)),
        )
        return out

    def _sample_clients(self) -> np.ndarray:
        return sample_clients(
            self._sampler, len(self._clients), self.participation, self.min_clients
        )

    def _summarise_warnings(self) -> None:
        self.learner_warnings_ = dict(self._server.warnings)
        by_message: dict[tuple[str, str], list[int]] = {}
        counts: Counter = Counter()
        for (client, category, message), n in self._server.warnings.items():
            by_message.setdefault((category, message), []).append(client)
            counts[(category, message)] += n
        for (category, message), clients in by_message.items():
            warnings.warn(
                f"{category} raised {counts[(category, message)]} times by clients "
                f"{sorted(clients)} during fit: {message[:300]}",
                UserWarning,
                stacklevel=3,
            )

    def privacy_report(self) -> dict[str, Any]:
        """Total (ε, δ) spent by every client under the ``privacy`` mechanism.

        Returns
        -------
        dict
            ``mechanism``, ``delta``, ``budget``, ``max_epsilon`` and, per client, the
            rounds in which it released labels and its ε, composed over those rounds.
        """
        check_is_fitted(self, "history_")
        if self._ledger is None:
            raise ValueError(
                "this run used no privacy mechanism (privacy=None and a noiseless consensus)"
            )
        return self._ledger.report()

    # ------------------------------------------------------------- predict
    @property
    def clients_(self) -> list[Any]:
        """The fitted local models, one per client (None if a client never fitted)."""
        check_is_fitted(self, "history_")
        return [c.model.estimator_ if c.fitted else None for c in self._clients]

    @property
    def pseudo_labels_(self) -> np.ndarray:
        """Last consensus on the public pool.

        Hard consensus: a masked array of labels in the caller's values, masked where
        the consensus abstained (``.filled(-1)`` gives -1 there for numeric labels).
        Soft consensus: targets of shape ``(n_public, n_classes)``, NaN rows where no
        client answered.
        """
        check_is_fitted(self, "history_")
        if not isinstance(self._server.broadcast, HardLabels):
            return self._server.broadcast.probs
        codes = self._server.broadcast.codes
        return np.ma.masked_array(self.classes_[np.maximum(codes, 0)], mask=codes < 0)

    @property
    def pseudo_label_codes_(self) -> np.ndarray:
        """Hard consensus on the public pool as class indices, -1 where it abstained."""
        check_is_fitted(self, "history_")
        return self._server.hard_consensus

    def _fitted_models(self) -> list[ClassAlignedClassifier]:
        check_is_fitted(self, "history_")
        return [c.model for c in self._clients if c.fitted]

    def _aggregate(self, codes: np.ndarray, probas: np.ndarray | None) -> np.ndarray:
        """Prediction rule: a soft consensus applies to probabilities; a hard one (majority,
        qualified majority, certainty) is a plain majority vote (no abstaining)."""
        if self.consensus_.output == "soft" and probas is not None:
            return np.argmax(self.consensus_(probas, n_classes=len(self.classes_)), axis=1)
        return majority_vote(codes, len(self.classes_))

    def _check_X(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "history_")
        X = check_features(X, "X", text=self._feature_shape == ())
        if feature_shape(X) != self._feature_shape:
            raise ValueError(
                f"X has {describe_shape(feature_shape(X))}, expected "
                f"{describe_shape(self._feature_shape)}"
            )
        return X

    def predict(self, X: Any) -> np.ndarray:
        """Consensus of the local models' predictions, in the caller's label values."""
        X = self._check_X(X)
        models = self._fitted_models()
        codes = np.stack([np.searchsorted(self.classes_, m.predict(X)) for m in models])
        probas = (
            np.stack([m.predict_proba(X) for m in models])
            if self.consensus_.output == "soft"
            else None
        )
        return self.classes_[self._aggregate(codes, probas)]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Consensus probabilities of the local models, columns in ``classes_`` order.

        Soft consensus rules (mean, entropy) apply to the clients' probabilities; for
        hard rules this is the plain mean of the clients' probabilities.
        """
        X = self._check_X(X)
        probas = np.stack([m.predict_proba(X) for m in self._fitted_models()])
        if self.consensus_.output == "soft":
            return self.consensus_(probas, n_classes=len(self.classes_))
        return soft_mean(probas, len(self.classes_))

    def distill(self, estimator: Any) -> Any:
        """Fit one global model on the public pool with the final consensus labels.

        Hard consensus: the labelled public rows; soft consensus: soft targets (weighted
        row expansion for learners without soft-target support).

        Parameters
        ----------
        estimator : classifier
            Cloned, then fitted; the original is not touched.

        Returns
        -------
        estimator
            The fitted clone.
        """
        check_is_fitted(self, "history_")
        pseudo = (
            self._server.broadcast.codes
            if isinstance(self._server.broadcast, HardLabels)
            else self._server.broadcast.probs
        )
        X, y = with_pseudo_labels(
            self._X_public[:0],
            np.empty(0, dtype=self.classes_.dtype),
            self._X_public,
            pseudo,
            self.classes_,
        )
        model = ClassAlignedClassifier(clone(estimator), classes=self.classes_).fit(X, y)
        return model.estimator_


#: learners whose fitted models cannot be stored without pickle yet, and why
_NOT_CHECKPOINTABLE = {
    "RuleFitClassifier": "skops cannot store imodels' rule dictionaries (tuple keys)",
    "GPT2Classifier": "saving transformers models in checkpoints is not implemented",
}


def _trailing_unchanged(history: History) -> int:
    """Rounds at the end of ``history`` in which the consensus did not change."""
    n = 0
    for record in reversed(list(history)):
        if record.changed != 0:
            break
        n += 1
    return n


def _jsonable(state: dict[str, Any]) -> dict[str, Any]:
    """A consensus ``state_dict()`` with arrays as lists, for ``state.json``."""
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in state.items()}


def _accounted(mechanism: Any) -> bool:
    """Whether ``mechanism`` (client-side or a noisy consensus) has privacy to account."""
    return (
        mechanism is not None
        and callable(getattr(mechanism, "dp_event", None))
        and getattr(mechanism, "accountable", True)
    )


def _check_privacy(privacy: Any, share: str) -> None:
    """The mechanism must offer the interface the clients and the ledger use."""
    if privacy is None:
        return
    for name in ("randomize", "dp_event"):
        if not callable(getattr(privacy, name, None)):
            raise TypeError(
                f"privacy must be a label-privacy mechanism from cotrain.privacy (with "
                f"{name}()), got {type(privacy).__name__}"
            )
    if getattr(privacy, "applies_to", share) != share:
        raise ValueError(
            f"privacy mechanism {type(privacy).__name__} randomises {privacy.applies_to} "
            f"labels but share={share!r}"
        )


def _dry_run(consensus: Any, n_clients: int, data: FitData) -> None:
    """Call the consensus once on a one-example vote, so that its parameters (quorum,
    k, scores) are checked before any client trains."""
    ids = np.arange(n_clients)
    weights = consensus.weights_for(ids, data.X_public.shape[0])
    if weights is not None and np.ndim(weights) == 2:
        weights = weights[:, :1]
    consensus(
        np.zeros((n_clients, 1), dtype=np.int64), n_classes=len(data.classes), weights=weights
    )


def _postfix(record: RoundRecord) -> dict[str, str]:
    out = {"coverage": f"{record.coverage:.2f}", "agree": f"{record.agreement:.2f}"}
    if record.mean_accuracy is not None:
        out["acc"] = f"{record.mean_accuracy:.3f}"
    return out


def _round_line(record: RoundRecord) -> str:
    acc = (
        ""
        if record.mean_accuracy is None
        else (
            f" acc {record.mean_accuracy:.3f}±{record.std_accuracy:.3f}"
            f" consensus {record.consensus_accuracy:.3f}"
        )
    )
    return (
        f"round {record.round:3d}: {len(record.clients)} clients, "
        f"{len(record.failed)} failed, coverage {record.coverage:.2f}, "
        f"agreement {record.agreement:.2f}, changed {record.changed}, "
        f"up {record.bytes_up} B, down {record.bytes_down} B, {record.time_s:.2f} s{acc}"
    )
