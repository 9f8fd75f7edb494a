"""FederatedCoTrainer: federated co-training (FedCT) of any scikit-learn-style learners."""

from __future__ import annotations

import copy
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.validation import check_is_fitted

from consensus import Consensus, get_consensus, soft_mean
from cotrain._validation import (
    FitData,
    check_estimators,
    check_fit_inputs,
    check_not_after_transforms,
    check_params,
    check_predict_features,
    check_share_consensus,
    feature_shape,
    masked_labels,
    require_public_classes,
)
from cotrain.callbacks import Callback, LoopView, PrivacyBudget, ProgressBar, loop_callbacks
from cotrain.clustering import AgreementClustering
from cotrain.federation.bookkeeping import aggregate
from cotrain.federation.loop import RoundLoop
from cotrain.federation.privacy_setup import check_privacy_setup
from cotrain.federation.rounds import client_class
from cotrain.federation.seeding import seeded_clone
from cotrain.federation.server import CoTrainingServer
from cotrain.federation.setup import auto_consensus, build_server
from cotrain.federation.simulation import SimulatedFederation
from cotrain.history import RoundRecord, summarize_warnings
from cotrain.params import check_classifier
from cotrain.persistence.checkpoint import CheckpointCallback, Checkpointer, open_checkpointer
from cotrain.persistence.saving import (
    DROPPED_POOL,
    DroppedDataError,
    load_federation,
    save_federation,
)
from cotrain.privacy.mechanisms import LabelMechanism
from cotrain.runtime.pools import host_objects
from cotrain.runtime.runtimes import Runtime, make_runtime
from cotrain.trust import (
    DEFAULT_TRUST,
    FixedTrust,
    PseudoLabelTrust,
    Trust,
    client_trust,
    with_pseudo_labels,
)
from learners import ClassAlignedClassifier

__all__ = ["FederatedCoTrainer"]

#: what ``trust=`` takes: "auto", None (full weight), a fixed weight in [0, 1], or a trust
TrustSpec: TypeAlias = str | float | FixedTrust | PseudoLabelTrust | Trust | None

#: the type of the estimator :meth:`FederatedCoTrainer.distill` is given and returns
EstimatorT = TypeVar("EstimatorT")


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
        use different learners. To scale or impute, give each client its own pipeline
        (``make_pipeline(StandardScaler(), SVC())``): it fits on the client's own rows and
        transforms the public pool too; the trainer as the last step of a ``Pipeline``
        after transforms is refused, as the pipeline would not transform ``X_public``.
        NaN in the data is accepted where the learners that see it take it (scikit-learn
        tag ``allow_nan``: e.g. HistGradientBoosting, XGBoost, trees).
    consensus : str or consensus.Consensus, default="auto"
        How label votes become pseudo-labels. "auto": "dawid_skene" without a privacy
        mechanism (:class:`consensus.DawidSkene`: each client's confusion matrix is
        estimated from the votes on U by EM, so that a strong client outvotes weak ones
        class by class), "majority" with one; or "majority", "qualified" (quorum 0.9),
        "reliability" (votes weighted by the out-of-fold accuracy a client sends as
        ``quality``), "mean" (distributed distillation), "entropy" (FedDS), "certainty"
        (FedAUX), or an object from :mod:`consensus`. A soft rule with ``share="hard"``
        makes each class's share of the votes the soft pseudo-label (with a warning saying
        so).
    share : {"hard", "soft"}, default="hard"
        Clients send hard labels (packed at ceil(log2 C) bits) or probabilities (float32).
    soft_dtype : {"float32", "float16"}, default="float32"
        Precision of soft labels on the wire (uploads with ``share="soft"`` and the
        broadcast of a soft consensus); float16 halves the bytes.
    encoding : {"packed", "delta"}, default="packed"
        Hard labels: packed at ceil(log2 C) bits, or delta-coded — only the labels that
        changed, compressed (zlib), with a CRC. Uploads are coded against the client's
        previous upload (the server keeps each client's last labels to decode them), a hard
        consensus broadcast against the consensus each client last acknowledged
        (:mod:`cotrain.wire.broadcast`); ``bytes_down`` counts each client's own message.
    soft_bits : int, default=None
        Quantise soft labels (uploads and a soft consensus broadcast) to this many bits
        per class, rows kept summing to one (largest-remainder rounding); None sends
        ``soft_dtype`` floats.
    trust : "auto", None, float, PseudoLabelTrust, CrossFitTrust, HoldoutTrust or \
PoolHalvesTrust, default="auto"
        How each client uses the pseudo-labelled pool. "auto" without a privacy mechanism:
        :class:`cotrain.trust.cross_fit.CrossFitTrust` — two models per client, each fitted
        on half its rows and the whole pseudo-labelled pool, send the mean of their labels
        on U (a random forest: one fit, as in FedCT); their out-of-fold accuracy on the
        client's rows goes with its upload as ``quality``, and the client's predictor blends
        them with its local-only model, moving toward the co-trained models only as far as
        its own rows show, beyond one standard error, that they help (``history_[t].trust``
        is their weight). "auto" with a
        privacy mechanism: :class:`cotrain.trust.PseudoLabelTrust` (the pool's sample
        weight, 0 or 1, by 3-fold cross-validation; its quality stays at the client). Torch
        and language-model learners, and a client whose model is trained privately
        (DP-SGD: the choice would look at its data outside the ε), get weight 1 under
        "auto". None: every pseudo-label at full weight (the paper's FedCT); a float in
        [0, 1]: that fixed weight. Explicit options for torch and language-model sites:
        :class:`~cotrain.trust.holdout.HoldoutTrust` (a held-out check and fallback)
        and :class:`~cotrain.trust.pool_halves.PoolHalvesTrust` (two models on halves
        of the pool, each labelling the other half). What a client sends is always its own
        honest prediction.
    clustering : None, "agreement" or cotrain.clustering.AgreementClustering, default=None
        Clustered co-training (the thesis's clustered FL in label space): clients whose
        labels on U disagree beyond chance (another label map, concept shift) are split
        into clusters by recursive bi-partition of their pairwise label agreement, each
        cluster gets its own consensus (with ``consensus``) and each client is sent its
        cluster's. "agreement": :class:`~cotrain.clustering.AgreementClustering` with its
        defaults. The clusters after each round are in ``history_[t].clusters``;
        ``pseudo_labels_`` is the largest cluster's consensus, and ``predict`` still votes
        over every client (use ``clients_`` of one cluster for its own predictions).
    rounds : int, default=20
        Communication rounds.
    participation : float, default=1.0
        Fraction of clients asked each round, sampled with ``random_state``.
    privacy : cotrain.privacy mechanism, default=None
        A privacy mechanism applied on each client before its labels leave it: record-level
        DP for any learner with ``SubsampleAndAggregate(n_teachers=..., sigma=...)``,
        DP-SGD for torch clients with ``DPSGD(noise_multiplier=..., max_grad_norm=...,
        sampling_rate=..., steps=...)``
        (its sampling is public configuration; every row trains at weight 1, so a
        ``trust`` other than "auto", None or 1 is refused), or a label
        randomiser (``RandomizedResponse``, ``XORMechanism``, ``GaussianSoftLabels``). Its
        ε is composed over the rounds each client takes part in and reported, with what it
        protects (``unit``: one private record or one released label) and against whom
        (``adversary``), in ``history_[t].epsilon`` and :meth:`privacy_report`; with a
        ``budget`` the run stops before a round that would exceed it
        (``stopped_reason_ == "privacy budget"``). A ``unit="label"`` mechanism warns.
    reproducible_noise : bool, default=False
        False: every client draws its privacy noise from the operating system's entropy, so
        nobody who knows ``random_state`` (the server) can replay it; two runs with the
        same ``random_state`` then release different noisy labels. True (simulations only;
        warns, and a Flower deployment refuses it): the noise is derived from
        ``random_state``, so a run can be repeated exactly — and the server could remove
        the noise.
    early_stopping : int, default=None
        Stop once the consensus (hard labels, abstentions included) has not changed for
        this many consecutive rounds.
    on_client_error : {"raise", "skip"}, default="raise"
        A failing client stops the run, or sits the round out (recorded in the history).
    min_clients : int, default=1
        With "skip", a round in which fewer clients answer fails with a RuntimeError.
    classes : array-like, default=None
        The global label space; default: the union of all clients' labels. Required with
        ``privacy``: the label space is then public configuration (a ``ValueError``
        otherwise), and a client holding a label outside it fails before any training.
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
        and the history; atomically, see :mod:`cotrain.persistence.checkpoint`), so that
        ``fit(..., resume=True)`` continues an interrupted run from its last complete
        round with exactly the result of an uninterrupted one. A fit without ``resume``
        starts afresh and replaces the directory's checkpoints.
    callbacks : list of cotrain.callbacks.Callback, default=None
        Called around every round (``on_fit_start``, ``on_round_start``,
        ``on_round_end``, ``on_fit_end``; see :mod:`cotrain.callbacks`), after the
        trainer's own (checkpoint, privacy budget, progress, early stopping); e.g.
        :class:`cotrain.tracking.MLflowLogger`. A callback may stop the run.
    random_state : int, default=None
        Seeds client sampling and every client estimator whose ``random_state`` is None.
    verbose : int, default=0
        0: silent; 1: a progress bar over rounds; 2: also one line per round.

    Attributes
    ----------
    classes_ : ndarray
        Global classes, in the caller's label values.
    consensus_ : consensus.Consensus
        The consensus rule of the run (a copy of ``consensus``).
    n_features_in_ : int
        Features of a table (absent for images and text).
    feature_names_in_ : ndarray
        Column names of a DataFrame ``X_public`` (absent otherwise).
    feature_shape_ : tuple of int
        Shape of one example: ``(n_features,)``, ``(C, H, W)``, or ``()`` for text.
    clients_ : list of estimators
        The fitted local models, one per client (None for a client that never fitted).
    client_models_ : list of learners.ClassAlignedClassifier
        The same models wrapped to answer in the global classes (what :meth:`predict`
        votes with), None for a client that never fitted.
    pseudo_labels_ : ndarray
        Last consensus on the public pool: hard labels in the caller's values as a masked
        array (masked where the consensus abstained), or soft targets
        ``(n_public, n_classes)``, NaN rows where no client answered. Kept current after
        every round, so that a callback can read it during ``fit``.
    pseudo_label_codes_ : ndarray
        The hard consensus as indices into ``classes_``, -1 where it abstained (kept
        current after every round, as ``pseudo_labels_``).
    X_public_ : array-like
        The public pool, which :meth:`distill` labels; None in a trainer loaded from a
        folder saved with ``drop_data=True``. No client's private rows are kept.
    privacy_report_ : dict or None
        What :meth:`privacy_report` returns; None for a run without a privacy mechanism.
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
        *,
        consensus: str | Consensus = "auto",
        share: str = "hard",
        soft_dtype: str = "float32",
        encoding: str = "packed",
        soft_bits: int | None = None,
        trust: TrustSpec = DEFAULT_TRUST,
        clustering: str | AgreementClustering | None = None,
        rounds: int = 20,
        participation: float = 1.0,
        privacy: LabelMechanism | None = None,
        reproducible_noise: bool = False,
        early_stopping: int | None = None,
        on_client_error: str = "raise",
        min_clients: int = 1,
        classes: ArrayLike | None = None,
        n_jobs: int | None = None,
        runtime: str | Runtime | None = None,
        round_timeout: float | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        callbacks: Sequence[Callback] | None = None,
        random_state: int | None = None,
        verbose: int = 0,
    ) -> None:
        self.estimators = estimators
        self.consensus = consensus
        self.share = share
        self.soft_dtype = soft_dtype
        self.encoding = encoding
        self.soft_bits = soft_bits
        self.trust = trust
        self.clustering = clustering
        self.rounds = rounds
        self.participation = participation
        self.privacy = privacy
        self.reproducible_noise = reproducible_noise
        self.early_stopping = early_stopping
        self.on_client_error = on_client_error
        self.min_clients = min_clients
        self.classes = classes
        self.n_jobs = n_jobs
        self.runtime = runtime
        self.round_timeout = round_timeout
        self.checkpoint_dir = checkpoint_dir
        self.callbacks = callbacks
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        X: ArrayLike | Sequence[ArrayLike],
        y: ArrayLike | Sequence[ArrayLike] | None = None,
        *,
        X_public: ArrayLike,
        groups: ArrayLike | None = None,
        eval_set: tuple[ArrayLike, ArrayLike] | None = None,
        y_public: ArrayLike | None = None,
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
        check_not_after_transforms(self)
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
            estimators=estimators,
        )
        check_params(self.get_params(deep=False), n_clients=len(estimators))
        require_public_classes(self.classes, self.privacy)
        for name in RUN_OUTCOME:  # nothing of an earlier fit survives a new one
            self.__dict__.pop(name, None)
        try:
            self._setup(estimators, data)
            checkpoint = self._open_checkpoint(estimators, data, resume)
            start, finished = 1, False
            if resume and checkpoint is not None and checkpoint.checkpointer.latest():
                start, finished = self._restore(checkpoint.checkpointer)
            if not finished:
                self._run(start, checkpoint)
            self._set_fitted(self._federation)
        finally:  # the run, with every client's rows, is not kept (resume reads checkpoints)
            self.__dict__.pop("_federation", None)
        summarize_warnings(Counter(self.learner_warnings_), stacklevel=3)
        return self

    def _set_fitted(self, fed: SimulatedFederation) -> None:
        """Copy the outcome of a finished (or restored) run into the fitted attributes."""
        self.client_models_ = [c.model if c.fitted else None for c in fed.clients]
        self.clients_ = [None if m is None else m.estimator_ for m in self.client_models_]
        self._publish_consensus(fed.server)
        self.history_ = fed.history
        self.n_rounds_ = len(fed.history)
        self.learner_warnings_ = dict(fed.learner_warnings)
        self.privacy_report_ = fed.privacy_report()  # with each client's own ledger ε
        self.X_public_ = fed.data.X_public

    def _publish_consensus(self, server: CoTrainingServer) -> None:
        """``pseudo_labels_`` and ``pseudo_label_codes_`` from the server's last consensus
        (after every round, so that callbacks can read them during ``fit``)."""
        labels, codes = server.consensus_labels, server.hard_consensus
        if labels is None or codes is None:  # a run checks its budget before round 1
            raise RuntimeError("no consensus to publish: the run has not completed a round")
        self.pseudo_label_codes_ = codes
        self.pseudo_labels_ = labels if labels.ndim == 2 else masked_labels(labels, self.classes_)

    def _setup(self, estimators: list[Any], data: FitData) -> None:
        """Build the server side of the run (as the Flower ServerApp does), then the
        clients."""
        rule = get_consensus(auto_consensus(self.consensus, self.privacy))
        check_share_consensus(self.share, rule)
        check_privacy_setup(self.privacy, rule, estimators, [len(y) for y in data.y_clients])
        run = build_server(
            consensus=rule,
            X_public=data.pool,
            n_classes=len(data.classes),
            client_names=[f"client {i} ({type(e).__name__})" for i, e in enumerate(estimators)],
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
            reproducible_noise=self.reproducible_noise,
        )
        # a copy, so that a noisy consensus starts every fit from its own seed
        self.consensus_ = run.consensus
        self.classes_ = data.classes
        self.feature_shape_ = feature_shape(data.pool)
        if len(self.feature_shape_) == 1:
            self.n_features_in_ = self.feature_shape_[0]
        if data.feature_names is not None:
            self.feature_names_in_ = data.feature_names
        eval_proba = self.consensus_.output == "soft" and data.X_eval is not None
        make_client = client_class(
            self.privacy, len(estimators), len(data.pool), len(data.classes), self.rounds
        )
        clients = [
            make_client(
                i,
                seeded_clone(est, s),
                Xi,
                yi,
                data.classes,
                X_public=data.pool,
                wire=run.wire,
                privacy=self.privacy,
                X_eval=data.X_eval,
                eval_proba=eval_proba,
                trust=client_trust(self.trust, self.privacy, s, est),
            )
            for i, (est, s, Xi, yi) in enumerate(
                zip(estimators, run.client_seeds, data.X_clients, data.y_clients, strict=True)
            )
        ]
        self._federation = SimulatedFederation(
            clients,
            run,
            data,
            self.reproducible_noise,
            privacy=self.privacy,
            rounds=self.rounds,
            participation=self.participation,
            random_state=self.random_state,
        )
        self.history_ = self._federation.history
        self.stopped_reason_: str | None = None

    def _run(self, start: int, checkpoint: CheckpointCallback | None) -> None:
        """The round loop, with the clients resident where the runtime keeps them."""
        fed = self._federation
        progress = ProgressBar(self.verbose)
        own = [
            ConsensusAttributes(self, fed),
            checkpoint,
            None if fed.ledger is None else PrivacyBudget(fed.ledger),
        ]
        callbacks = loop_callbacks(own, self.early_stopping, self.callbacks, progress)
        try:
            with (
                make_runtime(self.n_jobs, self.runtime) as runtime,
                host_objects(runtime, fed.clients) as fed.pool,
            ):
                run_round = partial(fed.run_round, timeout=self.round_timeout)
                loop = RoundLoop(
                    run_round,
                    fed.sampler.sample,
                    self.rounds,
                    callbacks,
                    fed.history,
                    start,
                    owner=self,
                )
                self.stopped_reason_ = loop.run()
                fed.clients = fed.pool.get()  # the fitted models come back once
        finally:
            progress.close()
            fed.pool = None

    # ----------------------------------------------------------- checkpoints
    def _open_checkpoint(
        self, estimators: list[Any], data: FitData, resume: bool
    ) -> CheckpointCallback | None:
        params = {  # what the result depends on
            k: v for k, v in self.get_params(deep=False).items() if k not in NOT_IN_FINGERPRINT
        }
        checkpointer = open_checkpointer(self.checkpoint_dir, resume, estimators, params, data)
        collect = self._federation.state_dict
        return None if checkpointer is None else CheckpointCallback(checkpointer, collect)

    def _restore(self, checkpointer: Checkpointer) -> tuple[int, bool]:
        """Put the last checkpoint's state back; returns (next round, finished)."""
        state, broadcast, models = checkpointer.restore()
        self._federation.load_state_dict(state, broadcast, models)
        self.stopped_reason_ = state["stopped_reason"]
        # a run that stopped early stays stopped; one that used up its rounds can go on
        finished = state["finished"] and (
            state["stopped_reason"] is not None or state["round"] >= self.rounds
        )
        return state["round"] + 1, bool(finished)

    def privacy_report(self) -> dict[str, Any]:
        """Total (ε, δ) spent by every client, with what each ε protects and against whom.

        Returns
        -------
        dict
            The headline guarantee (record-level against the server when the run has one):
            ``unit`` ("record": one private training record of a client; "label": one
            released public label), ``adversary`` ("server" or "broadcast observers"),
            ``relation`` ("add_or_remove", the headline neighbouring relation, whenever every
            mechanism states it), ``epsilon_by_relation`` (max ε under "add_or_remove" and
            "replace_one"; None where no bound is stated), ``assumptions`` (plain
            sentences: a server that re-asks is covered only by the site's own ledger,
            colluding sites, ...), ``protects`` (all of it in words), ``delta``,
            ``budget``, ``max_epsilon`` and
            ``clients`` (per client: the rounds it released labels in and its ε composed
            over them; ``site_epsilon``, in the guarantee of the client's own mechanism:
            the ε its own ledger counted over every release it sent, equal to the server's
            in an honest run); ``guarantees`` lists every (unit, adversary) of the run the
            same way — they are never summed; ``mechanisms`` names them all. See
            ``docs/privacy.md``.
        """
        check_is_fitted(self, "privacy_report_")
        if self.privacy_report_ is None:
            raise ValueError(
                "this run used no privacy mechanism (privacy=None and a noiseless consensus)"
            )
        return copy.deepcopy(self.privacy_report_)

    # -------------------------------------------------------------- saving
    def save(self, path: str | os.PathLike[str], *, drop_data: bool = True) -> Path:
        """Write the fitted attributes to the folder ``path`` with skops (no pickle).

        The folder holds the fitted client models, ``classes_``, the consensus rule,
        ``pseudo_labels_``, ``history_``, the learner warnings and the privacy report (see
        :mod:`cotrain.persistence.saving`). A fitted trainer keeps no client's rows; it
        keeps the public pool (``X_public_``) for :meth:`distill`, written only with
        ``drop_data=False``.

        Parameters
        ----------
        path : str or path
            A folder; one written by an earlier ``save`` is replaced.
        drop_data : bool, default=True
            Leave out the public pool; False keeps it so that :meth:`distill` works after
            :meth:`load`.

        Returns
        -------
        Path
            The folder.
        """
        return save_federation(self, path, drop_data=drop_data)

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, trusted: Iterable[str | type] | None = None
    ) -> FederatedCoTrainer:
        """Read a folder written by :meth:`save`: a fitted trainer with the saved one's
        fitted attributes, that predicts as it did.

        Parameters
        ----------
        path : str or path
            The folder.
        trusted : list of str or type, optional
            Types skops may build besides scikit-learn's, XGBoost's, numpy's, scipy's,
            the ``learners`` adapters' and this library's own (e.g. your own learner
            class); any other type in the files is refused with a
            :class:`cotrain.persistence.saving.SavedFederationError`.

        Returns
        -------
        FederatedCoTrainer
        """
        return load_federation(path, cls, trusted=trusted)

    # ------------------------------------------------------------- predict
    def _fitted_models(self) -> list[ClassAlignedClassifier]:
        check_is_fitted(self, "client_models_")
        return [m for m in self.client_models_ if m is not None]

    def _check_X(self, X: ArrayLike) -> np.ndarray:
        models = [m.estimator for m in self._fitted_models()]
        return check_predict_features(X, self.feature_shape_, models)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Consensus of the local models' predictions, in the caller's label values."""
        X = self._check_X(X)
        models = self._fitted_models()
        codes = np.stack([np.searchsorted(self.classes_, m.predict(X)) for m in models])
        soft = self.consensus_.output == "soft"
        probas = np.stack([m.predict_proba(X) for m in models]) if soft else None
        quality = self._last_quality()
        return self.classes_[aggregate(self.consensus_, codes, probas, len(self.classes_), quality)]

    def _last_quality(self) -> np.ndarray:
        """Each fitted client's last released quality (NaN where it sent none)."""
        last: dict[int, float] = {}
        for record in getattr(self, "history_", ()):
            last.update(record.quality)
        ids = [i for i, m in enumerate(self.client_models_) if m is not None]
        return np.array([last.get(i, np.nan) for i in ids], dtype=np.float64)

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Consensus probabilities of the local models, columns in ``classes_`` order.

        Soft consensus rules (mean, entropy) apply to the clients' probabilities; for
        hard rules this is the plain mean of the clients' probabilities.
        """
        X = self._check_X(X)
        probas = np.stack([m.predict_proba(X) for m in self._fitted_models()])
        if self.consensus_.output == "soft":
            return self.consensus_(probas, n_classes=len(self.classes_))
        return soft_mean(probas, len(self.classes_))

    def distill(self, estimator: EstimatorT) -> EstimatorT:
        """Fit one global model on the public pool with the final consensus labels.

        Hard consensus: the labelled public rows; soft consensus: soft targets (weighted
        row expansion for learners without soft-target support).

        Parameters
        ----------
        estimator : classifier
            Cloned, then fitted (the original is not touched); not a classifier: TypeError.

        Returns
        -------
        estimator
            The fitted clone.

        Raises
        ------
        DroppedDataError
            For a trainer loaded from a folder saved without its public pool.
        """
        check_classifier(estimator, "distill(estimator)")
        check_is_fitted(self, "X_public_")
        if self.X_public_ is None:
            raise DroppedDataError(DROPPED_POOL)
        X_public, soft = self.X_public_, self.pseudo_labels_.ndim == 2
        X, y = with_pseudo_labels(
            X_public[:0],
            np.empty(0, dtype=self.classes_.dtype),
            X_public,
            self.pseudo_labels_ if soft else self.pseudo_label_codes_,
            self.classes_,
        )
        return ClassAlignedClassifier(clone(estimator), classes=self.classes_).fit(X, y).estimator_


class ConsensusAttributes(Callback):
    """Keeps a trainer's ``pseudo_labels_`` and ``pseudo_label_codes_`` current after every
    round of its run, so that the callbacks after it can read them during ``fit``."""

    def __init__(self, trainer: FederatedCoTrainer, federation: SimulatedFederation) -> None:
        self.trainer, self.federation = trainer, federation

    def on_round_end(self, loop: LoopView, record: RoundRecord) -> None:
        self.trainer._publish_consensus(self.federation.server)


#: the attributes that hold the outcome of a run (set at the end of ``fit``)
RUN_OUTCOME = (
    "client_models_",
    "clients_",
    "pseudo_labels_",
    "pseudo_label_codes_",
    "n_rounds_",
    "learner_warnings_",
    "privacy_report_",
    "X_public_",
)


#: parameters the result does not depend on (and `rounds`: a finished run can be extended)
NOT_IN_FINGERPRINT = (
    "n_jobs",
    "runtime",
    "verbose",
    "checkpoint_dir",
    "callbacks",
    "estimators",
    "rounds",
)
