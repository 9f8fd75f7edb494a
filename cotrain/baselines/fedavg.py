"""FedAvg and user-level DP-FedAvg: clients exchange model parameters, not labels.

The learners are torch estimators (:class:`learners.TorchClassifier`,
:class:`learners.GPT2Classifier`) or anything with the same weight interface:
``initialize(X, y=None)``, ``get_weights(trainable_only=True) -> {name: float32 array}``,
``set_weights(weights)``, and a ``fit`` that continues from the current weights
(``warm_start=True``). This module itself needs neither torch nor dp-accounting at
import time: weights travel as numpy arrays, and dp-accounting is imported when
:class:`DPFedAvg` computes its ε.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from numbers import Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from cotrain._validation import check_params
from cotrain.baselines._common import (
    accuracy,
    check_client_data,
    check_predict_inputs,
    weights_nbytes,
)
from cotrain.baselines.aggregation import average_weights, dp_aggregate
from cotrain.baselines.resume import WeightsCheckpoint
from cotrain.baselines.rounds import run_rounds
from cotrain.compression import CompressedExchange, make_compression
from cotrain.federation.sampling import sample_clients
from cotrain.federation.seeding import seeded_clone
from cotrain.history import History, RoundRecord
from cotrain.privacy.fedaux.noise import replayable_noise
from cotrain.privacy.mechanisms.param_checks import check_delta
from cotrain.runtime.runtimes import make_runtime
from learners.checks import check_int

__all__ = ["DPFedAvg", "FedAvg"]

_WEIGHT_METHODS = ("initialize", "get_weights", "set_weights", "fit", "predict")


def _local_step(
    model: Any, weights: dict[str, np.ndarray], X: Any, y: Any, X_eval: Any
) -> tuple[Any, dict[str, np.ndarray], Any, float]:
    """One client's round: load the global weights, train locally, send the weights back."""
    model.set_weights(weights)
    start = time.perf_counter()
    model.fit(X, y)
    local = model.get_weights(trainable_only=True)
    pred = None if X_eval is None else model.predict(X_eval)
    return model, local, pred, time.perf_counter() - start


class FedAvg(ClassifierMixin, BaseEstimator):
    """Federated averaging (McMahan et al. 2017) of torch learners.

    All clients start from one global initialisation. Each round the sampled clients
    receive the global weights, train ``local_epochs`` epochs on their own data, and
    send their weights back; the server averages them, weighted by the clients'
    numbers of training examples. Only the trainable parameters travel and are
    averaged (``get_weights(trainable_only=True)``): with LoRA, the adapters and the
    head, not the frozen backbone.

    Parameters
    ----------
    estimator : torch learner
        One prototype (:class:`learners.TorchClassifier`, :class:`learners.GPT2Classifier`
        or an estimator with the same weight interface), cloned for the global model and
        for every client. Its ``classes``, ``warm_start``, ``max_epochs`` and
        ``epochs_per_fit`` parameters (where it has them) are set by FedAvg.
    rounds : int, default=20
        Communication rounds.
    local_epochs : int, default=1
        Epochs every sampled client trains per round, starting from the global weights.
    participation : float, default=1.0
        Fraction of clients sampled each round (seeded as in
        :class:`~cotrain.FederatedCoTrainer`).
    weighted : bool, default=True
        Weight clients by their numbers of training examples (McMahan et al.); False
        averages uniformly.
    compression : None, "stc", "topk" or compressor, default=None
        Clients send compressed weight updates with error accumulation instead of their
        weights (:class:`~cotrain.compression.SparseTernaryCompression`,
        :class:`~cotrain.compression.TopK`); the history records the encoded bytes.
    n_jobs : int, default=None
        Joblib workers for the client steps.
    random_state : int, default=None
        Seeds client sampling, the global initialisation and every client estimator
        whose ``random_state`` is None.
    verbose : int, default=0
        0: silent; 1: a progress bar over rounds; 2: also one line per round.
    checkpoint_dir : str or path, default=None
        Write a checkpoint after every round (every client's torch learner and the
        global model, the global weights, the generators and the history; atomically,
        see :mod:`cotrain.baselines.resume`), so that ``fit(..., resume=True)`` continues
        an interrupted run with exactly the result of an uninterrupted one. A fit without
        ``resume`` replaces the directory's checkpoints. Not available with
        ``compression`` (``NotImplementedError``).
    callbacks : list of cotrain.callbacks.Callback, default=None
        Called around every round, as for :class:`~cotrain.FederatedCoTrainer` (the
        rounds run on :class:`cotrain.federation.loop.RoundLoop`), after FedAvg's own
        progress bar; e.g. :class:`cotrain.tracking.MLflowLogger`. A callback may stop
        the run (``stopped_reason_``).

    Attributes
    ----------
    classes_ : ndarray
        Global classes.
    global_model_ : estimator
        The global model after the last round; ``predict`` uses it.
    clients_ : list of estimators
        The clients' local models after their last local training.
    history_ : History
        One :class:`~cotrain.RoundRecord` per round: ``bytes_down`` the global weights
        sent to the sampled clients, ``bytes_up`` their weights sent back (4 bytes per
        trainable parameter and client in each direction), times, and with
        ``eval_set``: ``client_accuracy`` the local models' accuracies after local
        training (as in a FedCT record, every client that has trained so far), and the
        global model's accuracy as ``mean_accuracy`` and ``consensus_accuracy`` with
        ``std_accuracy`` 0 (every client receives the global model, which is the result
        of FedAvg). ``coverage`` and ``agreement`` are NaN: there is no public pool.
    n_rounds_ : int
        Rounds run (fewer than ``rounds`` when a callback stopped the run).
    stopped_reason_ : str or None
        Why the run ended before ``rounds`` (a callback's reason), or None.
    compression_ : CompressedExchange or None
        Residuals and message sizes of a compressed run.

    Notes
    -----
    Non-trainable state (buffers such as BatchNorm running statistics, frozen
    weights) never travels: every client keeps its own and the global model keeps its
    initial one. Use normalisation without running statistics (LayerNorm, GroupNorm)
    with FedAvg. A client's optimizer state, if its learner keeps one across fits,
    stays on the client between the rounds it takes part in.

    Examples
    --------
    >>> import pytest
    >>> torch = pytest.importorskip("torch")
    >>> from sklearn.datasets import load_digits
    >>> from learners import TorchClassifier
    >>> from cotrain.baselines import FedAvg
    >>> X, y = load_digits(return_X_y=True)
    >>> fedavg = FedAvg(TorchClassifier(), rounds=2, random_state=0)
    >>> fedavg = fedavg.fit([X[:100] / 16, X[100:200] / 16], [y[:100], y[100:200]])
    >>> fedavg.predict(X[-5:] / 16).shape
    (5,)
    """

    def __init__(
        self,
        estimator: Any,
        *,
        rounds: int = 20,
        local_epochs: int = 1,
        participation: float = 1.0,
        weighted: bool = True,
        compression: Any = None,
        n_jobs: int | None = None,
        random_state: int | None = None,
        verbose: int = 0,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        callbacks: list[Any] | None = None,
    ) -> None:
        self.estimator = estimator
        self.rounds = rounds
        self.local_epochs = local_epochs
        self.participation = participation
        self.weighted = weighted
        self.compression = compression
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint_dir = checkpoint_dir
        self.callbacks = callbacks

    # ------------------------------------------------------------------ checks
    def _check_params(self, n_clients: int) -> None:
        check_params(
            {
                "rounds": self.rounds,
                "participation": self.participation,
                "n_jobs": self.n_jobs,
                "verbose": self.verbose,
                "random_state": self.random_state,
                "early_stopping": getattr(self, "early_stopping", None),
                "checkpoint_dir": getattr(self, "checkpoint_dir", None),
                "callbacks": getattr(self, "callbacks", None),
            },
            n_clients=n_clients,
        )
        check_int(self.local_epochs, "local_epochs", 1)
        if not isinstance(getattr(self, "weighted", True), bool | np.bool_):
            raise TypeError(f"weighted must be True or False, got {self.weighted!r}")

    def _check_estimator(self) -> None:
        missing = [m for m in _WEIGHT_METHODS if not callable(getattr(self.estimator, m, None))]
        if missing:
            raise TypeError(
                f"estimator ({type(self.estimator).__name__}) lacks {', '.join(missing)}: "
                f"{type(self).__name__} needs a torch learner with initialize/get_weights/"
                "set_weights, such as learners.TorchClassifier"
            )

    def _make(self, seed: np.random.SeedSequence, classes: np.ndarray, X: Any, y: Any) -> Any:
        """A seeded clone set up to train ``local_epochs`` per fit, built with initialize."""
        est = seeded_clone(self.estimator, seed)
        params = est.get_params(deep=False)
        update: dict[str, Any] = {"classes": classes, "warm_start": True}
        update.update(max_epochs=self.local_epochs, epochs_per_fit=self.local_epochs)
        est.set_params(**{k: v for k, v in update.items() if k in params})
        est.initialize(X, y)
        learned = getattr(est, "classes_", None)
        if learned is not None and not np.array_equal(np.asarray(learned), classes):
            raise ValueError(
                f"{type(est).__name__} initialised with classes {np.asarray(learned).tolist()}, "
                f"but the clients hold {classes.tolist()}; give it a classes= parameter"
            )
        return est

    # --------------------------------------------------------------------- fit
    def fit(
        self,
        X: ArrayLike | Sequence[ArrayLike],
        y: ArrayLike | Sequence[ArrayLike] | None = None,
        *,
        groups: ArrayLike | None = None,
        eval_set: tuple[ArrayLike, ArrayLike] | None = None,
        resume: bool = False,
    ) -> FedAvg:
        """Run federated averaging.

        Parameters
        ----------
        X, y : list of array-like, or arrays with ``groups``
            The clients' data, as for :meth:`cotrain.FederatedCoTrainer.fit`; inputs are
            passed to the learner as they are (tabular arrays, images, texts).
        groups : array-like, optional
            Client of each row when X and y are single arrays.
        eval_set : (X_eval, y_eval), optional
            Test data scored every round.
        resume : bool, default=False
            Continue from the last round checkpointed in ``checkpoint_dir``, with exactly
            the result of an uninterrupted run (the same estimator, parameters and data are
            required; another configuration is refused with a ``ValueError``).

        Returns
        -------
        self
        """
        self._check_estimator()
        data = check_client_data(
            X,
            y,
            groups=groups,
            eval_set=eval_set,
            classes=getattr(self.estimator, "classes", None),
            learners=[self.estimator],
        )
        m = len(data.X_clients)
        self._check_params(m)
        self._check_extra_params()
        checkpoint = WeightsCheckpoint.open(self, self._fingerprint_data(data), resume)
        compressor = make_compression(getattr(self, "compression", None))
        self.compression_ = None if compressor is None else CompressedExchange(compressor, m)
        self.classes_ = data.classes
        self._row_shape = data.X_clients[0].shape[1:]
        seeds = np.random.SeedSequence(self.random_state).spawn(m + 3)
        self._sampler = np.random.default_rng(seeds[0])
        opt_in = getattr(self, "reproducible_noise", False)  # DPFedAvg's: noise from OS entropy
        replay = replayable_noise(self.random_state, opt_in, type(self).__name__)
        self._noise_rng = np.random.default_rng(seeds[m + 2] if replay else None)
        self.global_model_ = self._make(
            seeds[m + 1], data.classes, data.X_clients[0], data.y_clients[0]
        )
        self._clients = [
            self._make(seeds[1 + i], data.classes, data.X_clients[i], data.y_clients[i])
            for i in range(m)
        ]
        self._trained: dict[int, float] = {}
        self._start_privacy()
        self._data = data
        self._n_samples = np.array([len(yi) for yi in data.y_clients], dtype=np.float64)
        self._global_w = self.global_model_.get_weights(trainable_only=True)
        self.history_ = History()
        self.stopped_reason_ = None
        start, finished = 1, False
        if resume and checkpoint is not None and checkpoint.checkpointer.latest():
            start, finished = checkpoint.restore()
        try:
            with make_runtime(self.n_jobs) as runtime:
                self._runtime = runtime
                if not finished:
                    self.stopped_reason_ = run_rounds(
                        self,
                        self._run_round,
                        lambda: sample_clients(self._sampler, m, self.participation),
                        self.rounds,
                        self.history_,
                        own=[None if checkpoint is None else checkpoint.callback()],
                        early_stopping=getattr(self, "early_stopping", None),
                        start=start,
                    )
        finally:  # the fitted model keeps no private data
            self.__dict__.pop("_data", None)
            self.__dict__.pop("_runtime", None)
        self.n_rounds_ = len(self.history_)
        return self

    def _run_round(self, t: int, sampled: np.ndarray) -> RoundRecord:
        """Round ``t``: local training of the sampled clients, then the server's step."""
        start = time.perf_counter()
        data, global_w = self._data, self._global_w
        tasks = [
            (self._clients[i], global_w, data.X_clients[i], data.y_clients[i], data.X_eval)
            for i in sampled
        ]
        results = self._runtime.map(_local_step, tasks)
        locals_ = [r[1] for r in results]
        for i, r in zip(sampled, results, strict=True):
            self._clients[i] = r[0]
        self._round_clients = [int(i) for i in sampled]  # whose weights locals_ are
        if self.compression_ is None:
            bytes_down = weights_nbytes(global_w) * len(sampled)
            bytes_up = sum(weights_nbytes(w) for w in locals_)
            global_w = self._aggregate(global_w, locals_, self._n_samples[sampled])
        else:  # compressed updates with residuals (cotrain.compression)
            counts = self._n_samples[sampled] if self.weighted else None
            global_w, bytes_up, bytes_down = self.compression_.round(
                global_w, locals_, [int(i) for i in sampled], counts
            )
        self._global_w = global_w
        self.global_model_.set_weights(global_w)
        self._account_round()
        learner_time = sum(r[3] for r in results)
        scores: dict[str, Any] = {}
        if data.X_eval is not None and data.y_eval_codes is not None:
            for i, r in zip(sampled, results, strict=True):
                self._trained[int(i)] = accuracy(
                    np.searchsorted(data.classes, r[2]), data.y_eval_codes
                )
            t0 = time.perf_counter()
            pred = self.global_model_.predict(data.X_eval)
            learner_time += time.perf_counter() - t0
            acc = accuracy(np.searchsorted(data.classes, pred), data.y_eval_codes)
            scores = {
                "client_accuracy": dict(sorted(self._trained.items())),
                "mean_accuracy": acc,
                "std_accuracy": 0.0,
                "consensus_accuracy": acc,
            }
        return RoundRecord(
            round=t,
            clients=tuple(int(i) for i in sampled),
            bytes_up=bytes_up + self._extra_bytes_up(t),
            bytes_down=bytes_down,
            time_s=time.perf_counter() - start,
            learner_time_s=learner_time,
            epsilon=self._spent_epsilon(),
            **{**self._epsilon_meaning(), **self._consensus_fields(), **scores},
        )

    # hooks for DPFedAvg
    def _spent_epsilon(self) -> float | None:
        return None

    def _epsilon_meaning(self) -> dict[str, str]:
        """The record's ``epsilon_unit`` and ``epsilon_adversary`` (none without privacy)."""
        return {}

    def _check_extra_params(self) -> None:
        return None

    def _start_privacy(self) -> None:
        return None

    def _account_round(self) -> None:
        return None

    def _extra_bytes_up(self, t: int) -> int:
        """Bytes the clients send in round ``t`` besides their weights (FedAUX's scorers)."""
        return 0

    def _consensus_fields(self) -> dict[str, Any]:
        """Record fields of a method with a consensus on a public pool (FedDF's targets)."""
        return {}

    # checkpoints (cotrain.baselines.resume)
    def _checkpoint_blocker(self) -> str | None:
        """Why this run's state cannot be checkpointed, or None."""
        if getattr(self, "compression", None) is not None:
            return "the compression residuals are not written to checkpoints yet"
        return None

    def _fingerprint_data(self, data: Any) -> Any:
        return data

    def _checkpoint_state(self) -> dict[str, Any]:
        """The running state besides the learners, as JSON values and arrays."""
        return {
            "sampler": self._sampler.bit_generator.state,
            "noise_rng": self._noise_rng.bit_generator.state,
            "global_weights": dict(self._global_w),
            "trained": [[i, acc] for i, acc in sorted(self._trained.items())],
            "history": [record.to_json() for record in self.history_],
            **self._extra_state(),
        }

    def _load_checkpoint_state(self, state: dict[str, Any]) -> None:
        self._sampler.bit_generator.state = state["sampler"]
        self._noise_rng.bit_generator.state = state["noise_rng"]
        self._global_w = {k: np.asarray(v) for k, v in state["global_weights"].items()}
        self._trained = {int(i): float(acc) for i, acc in state["trained"]}
        for record in state["history"]:
            self.history_.append(RoundRecord.from_json(record))
        self.stopped_reason_ = state["stopped_reason"]
        self._load_extra_state(state)

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        return None

    def _aggregate(
        self,
        global_w: dict[str, np.ndarray],
        locals_: list[dict[str, np.ndarray]],
        counts: np.ndarray,
    ) -> dict[str, np.ndarray]:
        return average_weights(locals_, counts if self.weighted else None)

    # ----------------------------------------------------------------- predict
    @property
    def clients_(self) -> list[Any]:
        """The clients' local models after their last local training."""
        check_is_fitted(self, "history_")
        return list(self._clients)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predictions of the global model, in the caller's label values."""
        return self.global_model_.predict(check_predict_inputs(self, X, [self.global_model_]))

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Probabilities of the global model, columns in ``classes_`` order."""
        return self.global_model_.predict_proba(check_predict_inputs(self, X, [self.global_model_]))


def _epsilons(noise_multiplier: float, q: float, rounds: int, delta: float) -> list[float]:
    """ε after each of ``rounds`` rounds of the (subsampled) Gaussian mechanism, RDP."""
    if noise_multiplier == 0:
        return [math.inf] * rounds
    try:
        import dp_accounting
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "DPFedAvg's privacy accounting needs dp-accounting: pip install dp-accounting"
        ) from err
    event = dp_accounting.GaussianDpEvent(noise_multiplier)
    if q < 1:
        event = dp_accounting.PoissonSampledDpEvent(q, event)
    accountant = dp_accounting.rdp.RdpAccountant()
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)  # RDP orders that fail to converge are dropped, noisily
    try:
        out = []
        for _ in range(rounds):
            accountant.compose(event, 1)
            out.append(float(accountant.get_epsilon(delta)))
    finally:
        absl.setLevel(level)
    return out


class DPFedAvg(FedAvg):
    """User-level differentially private FedAvg (DP-FedAvg, McMahan et al. 2018).

    As :class:`FedAvg`, but the server bounds every client's influence: the update
    ``Δ_i = w_i − w`` of each sampled client is clipped to L2 norm ``clip_norm`` (over
    all trainable parameters), Gaussian noise ``N(0, (noise_multiplier·clip_norm)²)``
    is added to the sum of the clipped updates, and the sum is divided by the number of
    sampled clients (uniform weights, so that one client's contribution is bounded).
    The guarantee is for adding or removing one whole client (user-level DP),
    assuming a trusted server that adds the noise.

    Parameters
    ----------
    estimator : torch learner
        As for :class:`FedAvg`.
    rounds, local_epochs, participation, n_jobs, random_state, verbose
        As for :class:`FedAvg`.
    checkpoint_dir, callbacks
        As for :class:`FedAvg`.
    clip_norm : float, default=1.0
        L2 bound C of one client's update.
    noise_multiplier : float, default=1.0
        σ: the noise on the summed updates (from the OS's entropy) has standard deviation
        σ·C. 0 gives no privacy (ε = inf).
    delta : float, default=1e-5
        δ of the reported (ε, δ) guarantee.
    reproducible_noise : bool, default=False
        Seed the noise from ``random_state``, so anyone who knows it can replay it (warns).

    Attributes
    ----------
    epsilon_ : list of float
        ε reached after each round (RDP accountant of dp-accounting), at ``delta``.
    global_model_, clients_, classes_, history_, n_rounds_, stopped_reason_
        As for :class:`FedAvg`.

    Notes
    -----
    Accounting: each round is a Gaussian mechanism with noise multiplier σ; with
    ``participation < 1`` it is treated as Poisson subsampling with rate
    ``q = k / m`` (k clients of m sampled), the usual approximation for the
    fixed-size sampling done here; ``rounds`` rounds compose in the RDP accountant.
    The ε after each round is in ``epsilon_`` and in every record's ``epsilon``
    (:class:`~cotrain.RoundRecord`); ``privacy_report()["epsilon"]`` is the last one.

    Examples
    --------
    >>> import pytest
    >>> torch = pytest.importorskip("torch")
    >>> from sklearn.datasets import load_digits
    >>> from learners import TorchClassifier
    >>> from cotrain.baselines import DPFedAvg
    >>> X, y = load_digits(return_X_y=True)
    >>> dp = DPFedAvg(TorchClassifier(), rounds=2, noise_multiplier=1.0, random_state=0)
    >>> dp = dp.fit([X[:100] / 16, X[100:200] / 16], [y[:100], y[100:200]])
    >>> len(dp.epsilon_), dp.epsilon_[1] > dp.epsilon_[0]
    (2, True)
    """

    def __init__(
        self,
        estimator: Any,
        *,
        rounds: int = 20,
        local_epochs: int = 1,
        participation: float = 1.0,
        clip_norm: float = 1.0,
        noise_multiplier: float = 1.0,
        delta: float = 1e-5,
        n_jobs: int | None = None,
        random_state: int | None = None,
        verbose: int = 0,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        callbacks: list[Any] | None = None,
        reproducible_noise: bool = False,
    ) -> None:
        self.reproducible_noise = reproducible_noise
        self.estimator = estimator
        self.rounds = rounds
        self.local_epochs = local_epochs
        self.participation = participation
        self.clip_norm = clip_norm
        self.noise_multiplier = noise_multiplier
        self.delta = delta
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint_dir = checkpoint_dir
        self.callbacks = callbacks

    def _check_extra_params(self) -> None:
        for name, low_open in (("clip_norm", True), ("noise_multiplier", False)):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, Real)
                or not math.isfinite(value)
                or value < 0
                or (low_open and value == 0)
            ):
                need = "> 0" if low_open else ">= 0"
                raise ValueError(f"{name} must be a finite number {need}, got {value!r}")
        check_delta(self.delta)

    def _start_privacy(self) -> None:
        m = len(self._clients)
        k = len(sample_clients(np.random.default_rng(0), m, self.participation))
        self.sampling_rate_ = k / m
        self._all_epsilons = _epsilons(
            float(self.noise_multiplier), self.sampling_rate_, self.rounds, float(self.delta)
        )
        self.epsilon_: list[float] = []

    def _account_round(self) -> None:
        self.epsilon_.append(self._all_epsilons[len(self.epsilon_)])

    def _extra_state(self) -> dict[str, Any]:
        return {"epsilon": list(self.epsilon_)}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.epsilon_ = [float(e) for e in state["epsilon"]]

    def _spent_epsilon(self) -> float | None:
        return self.epsilon_[-1]

    def _epsilon_meaning(self) -> dict[str, str]:
        # user-level DP: the server adds the noise to the summed updates, so the guarantee
        # covers all of one client's data against whoever sees the global model
        return {"epsilon_unit": "client", "epsilon_adversary": "global model observers"}

    def _aggregate(
        self,
        global_w: dict[str, np.ndarray],
        locals_: list[dict[str, np.ndarray]],
        counts: np.ndarray,
    ) -> dict[str, np.ndarray]:
        new, _ = dp_aggregate(
            global_w,
            locals_,
            float(self.clip_norm),
            float(self.noise_multiplier),
            self._noise_rng,
        )
        return new

    def privacy_report(self) -> dict[str, Any]:
        """The (ε, δ) guarantee reached, and what it is computed from.

        Returns
        -------
        dict
            ``epsilon`` (after the last round), ``delta``, ``epsilon_per_round``,
            ``rounds``, ``noise_multiplier``, ``clip_norm``, ``sampling_rate``,
            ``accountant`` and ``unit`` (what a neighbouring dataset differs in).
        """
        check_is_fitted(self, "history_")
        return {
            "epsilon": self.epsilon_[-1] if self.epsilon_ else 0.0,
            "delta": float(self.delta),
            "epsilon_per_round": list(self.epsilon_),
            "rounds": len(self.epsilon_),
            "noise_multiplier": float(self.noise_multiplier),
            "clip_norm": float(self.clip_norm),
            "sampling_rate": self.sampling_rate_,
            "accountant": "RDP (dp_accounting.rdp.RdpAccountant)"
            + (", Poisson-subsampled Gaussian" if self.sampling_rate_ < 1 else ", Gaussian"),
            "unit": "one client (user-level DP, add/remove one client)",
        }
