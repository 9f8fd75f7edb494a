"""FedDF, FedDS and FedAUX: FedAvg plus server-side ensemble distillation on the public pool.

All three run FedAvg's round (:class:`~cotrain.baselines.FedAvg`: clients start from the
server model, train ``local_epochs`` on their data and send their weights), and then the
server distils the ensemble of the returned client models into a *student* on the public
pool ``U``; the student is the server model that starts the next round:

- :class:`FedDF` (Lin et al. 2020): the student starts from the weighted average of the
  client weights and learns the *mean* of the clients' soft predictions (KL divergence);
- :class:`FedDS` (FedDS paper, Alg. 1): *entropy-weighted* targets
  (:func:`consensus.entropy_weighted`, ``k = 5``), learnt jointly with the rotation
  self-supervised loss (γ = 300/64, see :mod:`cotrain.baselines.server_distillation`);
  by default the student starts from the previous server model (``B_AVG = false``);
- :class:`FedAUX` (Sattler et al. 2021): an optional pretrained initialisation, and
  *certainty-weighted* targets (:func:`consensus.certainty_weighted`) with each client's
  (ε, δ)-DP certainty scorer (:class:`cotrain.privacy.fedaux.CertaintyScorer`), fitted once.

Targets are weighted means of the clients' *probabilities* (the library's consensus rules);
FedDF and FedAUX's papers average logits before the softmax (their eq. 2-3): a documented
difference. Nothing here imports torch at import time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from numbers import Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from consensus import certainty_weighted, entropy_weighted, soft_mean
from cotrain._validation import check_features, describe_shape, feature_shape
from cotrain.baselines.aggregation import average_weights
from cotrain.baselines.fedavg import FedAvg
from learners.checks import check_int

__all__ = ["FedDF", "FedDS", "check_number", "distillation_targets"]

#: FedDS's γ = 300 on summed batch losses of the server's batch size 64, as a mean-loss weight.
FEDDS_GAMMA = 300.0 / 64.0


def distillation_targets(
    probs: Any, rule: str = "mean", *, k: float = 5.0, scores: Any = None
) -> np.ndarray:
    """Soft targets of ensemble distillation from the clients' probabilities.

    Parameters
    ----------
    probs : array-like of shape (m, n, n_classes)
        Client ``i``'s probabilities on the public pool.
    rule : {"mean", "entropy", "certainty"}, default="mean"
        ``"mean"``: FedDF's plain mean (:func:`consensus.soft_mean`); ``"entropy"``: FedDS's
        ``Σ_c softmax_c(−k·H(p_c)) p_c`` (:func:`consensus.entropy_weighted`);
        ``"certainty"``: FedAUX's ``Σ_i s_i p_i / Σ_i s_i``
        (:func:`consensus.certainty_weighted`).
    k : float, default=5.0
        FedDS's inverse temperature (rule ``"entropy"``).
    scores : array-like of shape (m, n), optional
        Certainty scores ``s_i(x)`` (rule ``"certainty"``).

    Returns
    -------
    ndarray of shape (n, n_classes)

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([[[1.0, 0.0]], [[0.5, 0.5]]])
    >>> distillation_targets(p).tolist()
    [[0.75, 0.25]]
    >>> distillation_targets(p, "entropy", k=1.0).round(4).tolist()  # weights 2/3, 1/3
    [[0.8333, 0.1667]]
    >>> distillation_targets(p, "certainty", scores=[[3.0], [1.0]]).round(4).tolist()
    [[0.875, 0.125]]
    """
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 3:
        raise ValueError(f"probs must have shape (m, n, n_classes), got {probs.shape}")
    n_classes = probs.shape[2]
    if rule == "mean":
        return soft_mean(probs, n_classes)
    if rule == "entropy":
        return entropy_weighted(probs, n_classes, k=k)
    if rule == "certainty":
        if scores is None:
            raise ValueError("rule='certainty' needs scores of shape (m, n)")
        return certainty_weighted(probs, n_classes, weights=scores)
    raise ValueError(f"rule must be 'mean', 'entropy' or 'certainty', got {rule!r}")


class FedDF(FedAvg):
    """Federated ensemble distillation (FedDF, Lin et al. 2020) of torch learners.

    Each round is :class:`~cotrain.baselines.FedAvg`'s, then the server trains a student
    on the public pool ``X_public`` to match the mean of the sampled clients' soft
    predictions (KL divergence, ``distill_epochs`` epochs of Adam); the student starts
    from the weighted average of the client weights and is the global model that the
    next round starts from.

    Parameters
    ----------
    estimator : torch learner
        As for :class:`~cotrain.baselines.FedAvg` (clients share one architecture).
    rounds : int, default=20
    local_epochs : int, default=1
    distill_epochs : int, default=5
        Server epochs over the public pool per round.
    distill_lr : float, default=1e-3
        Adam's learning rate for the student (a fresh optimizer every round).
    distill_batch_size : int, default=64
    start_from_average : bool, default=True
        The student starts from the client average (True: FedDF, FedDS's ``B_AVG``) or
        from the previous server model (False).
    init_weights : dict of str to array, fitted torch learner or nn.Module, optional
        Pretrained weights of (part of) the network, loaded into the server model before
        round 1 so that every client starts from them (FedAUX's "+P" baselines: an
        extractor pretrained on the public pool only); parameters not named keep their
        random initialisation.
    participation, weighted, n_jobs, random_state, verbose
        As for :class:`~cotrain.baselines.FedAvg`.
    early_stopping : int, default=None
        Stop once the distillation targets' argmax on the public pool (the ensemble's
        consensus, ``history_[t].changed``) has not changed for this many rounds.
    checkpoint_dir, callbacks
        As for :class:`~cotrain.baselines.FedAvg`; a checkpoint also holds the
        distillation's generator, losses and last targets.

    Attributes
    ----------
    global_model_ : estimator
        The last student; ``predict`` uses it.
    history_ : History
        FedAvg's records: ``bytes_up`` the sampled clients' float32 weights,
        ``bytes_down`` the server model sent to them; accuracies are the student's;
        ``changed`` the public examples whose target argmax differs from the previous
        round's (None in round 1).
    distill_loss_ : list of float
        The student's last-epoch loss of every round.
    classes_, clients_, n_rounds_, stopped_reason_
        As for FedAvg.

    Examples
    --------
    >>> import pytest
    >>> torch = pytest.importorskip("torch")
    >>> from sklearn.datasets import load_digits
    >>> from learners import TorchClassifier
    >>> from cotrain.baselines import FedDF
    >>> X, y = load_digits(return_X_y=True)
    >>> X = X / 16
    >>> df = FedDF(TorchClassifier(), rounds=2, distill_epochs=1, random_state=0)
    >>> df = df.fit([X[:100], X[100:200]], [y[:100], y[100:200]], X_public=X[200:400])
    >>> len(df.history_), df.predict(X[-3:]).shape
    (2, (3,))
    """

    rule = "mean"

    def __init__(
        self,
        estimator: Any,
        *,
        rounds: int = 20,
        local_epochs: int = 1,
        distill_epochs: int = 5,
        distill_lr: float = 1e-3,
        distill_batch_size: int = 64,
        start_from_average: bool = True,
        init_weights: Any = None,
        participation: float = 1.0,
        weighted: bool = True,
        n_jobs: int | None = None,
        random_state: int | None = None,
        verbose: int = 0,
        early_stopping: int | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        callbacks: list[Any] | None = None,
    ) -> None:
        self.estimator = estimator
        self.rounds = rounds
        self.local_epochs = local_epochs
        self.distill_epochs = distill_epochs
        self.distill_lr = distill_lr
        self.distill_batch_size = distill_batch_size
        self.start_from_average = start_from_average
        self.init_weights = init_weights
        self.participation = participation
        self.weighted = weighted
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
        self.early_stopping = early_stopping
        self.checkpoint_dir = checkpoint_dir
        self.callbacks = callbacks

    # ------------------------------------------------------------------ checks
    def _check_extra_params(self) -> None:
        for name in ("distill_epochs", "distill_batch_size"):
            check_int(getattr(self, name), name, 1)
        check_number("distill_lr", self.distill_lr, low=0.0, low_open=True)
        if not isinstance(self.start_from_average, bool | np.bool_):
            raise TypeError(
                f"start_from_average must be True or False, got {self.start_from_average!r}"
            )
        iw = self.init_weights
        if not (
            iw is None
            or isinstance(iw, Mapping)
            or callable(getattr(iw, "get_weights", None))
            or callable(getattr(iw, "named_parameters", None))
        ):
            raise TypeError(
                "init_weights must be None, a dict of parameter arrays, a fitted torch "
                f"learner or an nn.Module, got {type(iw).__name__}"
            )

    def fit(
        self,
        X: ArrayLike | Sequence[ArrayLike],
        y: ArrayLike | Sequence[ArrayLike] | None = None,
        *,
        X_public: Any = None,
        groups: ArrayLike | None = None,
        eval_set: tuple[ArrayLike, ArrayLike] | None = None,
        resume: bool = False,
    ) -> FedDF:
        """Run federated averaging with server-side ensemble distillation on ``X_public``.

        Parameters
        ----------
        X, y : list of array-like, or arrays with ``groups``
            The clients' data, as for :meth:`FedAvg.fit`.
        X_public : array-like
            The unlabeled public pool (same feature shape as the clients' data).
        groups : array-like, optional
            Client of each row when X and y are single arrays.
        eval_set : (X_eval, y_eval), optional
            Test data scored every round (the student's accuracy).
        resume : bool, default=False
            Continue from the last round checkpointed in ``checkpoint_dir``, as for
            :meth:`FedAvg.fit`.

        Returns
        -------
        self
        """
        if X_public is None:
            raise ValueError(f"{type(self).__name__} needs X_public, the unlabeled public pool")
        U = check_features(X_public, "X_public")
        if len(U) == 0:
            raise ValueError("X_public is empty")
        first = X[0] if isinstance(X, list | tuple) and len(X) else X
        expected = feature_shape(np.asarray(first))
        if feature_shape(U) != expected:
            raise ValueError(
                f"X_public has {describe_shape(feature_shape(U))}, the clients' data has "
                f"{describe_shape(expected)}"
            )
        self._U = U.astype(np.float32)
        self.distill_loss_: list[float] = []
        self._target_codes: np.ndarray | None = None
        self._changed: int | None = None
        super().fit(X, y, groups=groups, eval_set=eval_set, resume=resume)
        return self

    # ------------------------------------------------------------------ hooks
    def _start_privacy(self) -> None:
        """Server preparation before round 1 (FedAvg's hook): seeds and the distillation pool."""
        m = len(self._clients)
        seed = np.random.SeedSequence(self.random_state).spawn(m + 4)[m + 3]
        self._distill_rng = np.random.default_rng(seed)
        self._X_distill = self._U
        if self.init_weights is not None:
            self.global_model_.set_weights(self._initial_weights())
        self._prepare()

    def _initial_weights(self) -> dict[str, np.ndarray]:
        iw = self.init_weights
        if isinstance(iw, Mapping):
            return {k: np.asarray(v, dtype=np.float32) for k, v in iw.items()}
        if callable(getattr(iw, "get_weights", None)):
            return iw.get_weights(trainable_only=False)
        return {k: p.detach().cpu().numpy() for k, p in iw.named_parameters()}

    def _prepare(self) -> None:
        return None

    def _consensus_fields(self) -> dict[str, Any]:
        return {"changed": self._changed}

    def _fingerprint_data(self, data: Any) -> Any:
        return replace(data, X_public=self._U)

    def _extra_state(self) -> dict[str, Any]:
        return {
            "distill_rng": self._distill_rng.bit_generator.state,
            "distill_loss": list(self.distill_loss_),
            "target_codes": self._target_codes,
            "changed": self._changed,
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._distill_rng.bit_generator.state = state["distill_rng"]
        self.distill_loss_ = [float(v) for v in state["distill_loss"]]
        codes = state["target_codes"]
        self._target_codes = None if codes is None else np.asarray(codes)
        self._changed = state["changed"]

    def _targets(self, probs: np.ndarray, participants: list[int]) -> np.ndarray:
        return distillation_targets(probs, self.rule)

    def _ssl(self) -> dict[str, Any]:
        return {}

    def _aggregate(
        self,
        global_w: dict[str, np.ndarray],
        locals_: list[dict[str, np.ndarray]],
        counts: np.ndarray,
    ) -> dict[str, np.ndarray]:
        from cotrain.baselines.server_distillation import distill_module

        who = self._round_clients  # the sampled clients, in the order of locals_
        probs = np.stack([self._clients[i].predict_proba(self._X_distill) for i in who])
        targets = self._targets(probs, who)
        codes = np.argmax(targets, axis=1)
        if self._target_codes is not None:
            self._changed = int(np.count_nonzero(codes != self._target_codes))
        self._target_codes = codes
        if self.start_from_average:
            start = average_weights(locals_, counts if self.weighted else None)
        else:
            start = global_w
        student = self.global_model_
        student.set_weights(start)
        losses = distill_module(
            student.module_,
            self._X_distill,
            targets,
            epochs=int(self.distill_epochs),
            batch_size=int(self.distill_batch_size),
            lr=float(self.distill_lr),
            seed=int(self._distill_rng.integers(2**31 - 1)),
            n_threads=getattr(student, "n_threads", None),
            **self._ssl(),
        )
        self.distill_loss_.append(losses[-1])
        return student.get_weights(trainable_only=True)


class FedDS(FedDF):
    """FedDS: entropy-weighted ensemble distillation jointly with rotation self-supervision.

    As :class:`FedDF`, but the targets are FedDS's entropy-weighted mean
    ``Σ_c w_c(x) p_c(x)``, ``w_c(x) = softmax_c(−k·H(p_c(x)))``
    (:func:`consensus.entropy_weighted`), and the student minimises
    ``KL + γ · L_rot``, the rotation-prediction loss (FedDS Alg. 4: the 4 rotations by
    90° of every public image, predicted by a server-only rotation head on the input of
    the network's last linear layer; see :mod:`cotrain.baselines.server_distillation`).
    ``gamma=0`` is the paper's FedD (EED without SSL).

    Parameters
    ----------
    estimator : torch learner
        As for FedDF; inputs must be square images (``(n, C, H, W)``, or flat rows that
        the network reshapes, e.g. 8×8 digits) unless ``gamma=0``.
    rounds, local_epochs, distill_epochs, distill_lr, distill_batch_size
        As for FedDF.
    k : float, default=5.0
        Entropy temperature (FedDS: k = 5).
    gamma : float, default=300/64
        Weight of the rotation loss on batch-mean losses: FedDS's γ = 300 on losses
        summed over its batch of 64.
    image_shape : tuple of int, optional
        ``(C, H, W)`` of one input for the rotations; default: the rows' own 3-D shape,
        the network's ``in_channels``/``image_size``, or a 1-channel square.
    start_from_average : bool, default=False
        FedDS's ``B_AVG`` (false in the paper: start from the previous server model).
    init_weights : optional
        As for FedDF.
    participation, weighted, n_jobs, random_state, verbose
        As for FedAvg.
    early_stopping, checkpoint_dir, callbacks
        As for FedDF; a checkpoint also holds the rotation head's weights.

    Attributes
    ----------
    rotation_head_ : RotationHead or None
        The server's SSL head (never sent to clients).
    global_model_, history_, distill_loss_, classes_, clients_, n_rounds_
        As for FedDF.

    Notes
    -----
    FedDS's own caveat: a client that is *confidently* wrong gets a large weight; entropy
    weighting only suppresses an unreliable client whose predictions are uncertain.

    Examples
    --------
    >>> import pytest
    >>> torch = pytest.importorskip("torch")
    >>> from sklearn.datasets import load_digits
    >>> from learners import SmallCNN, TorchClassifier
    >>> from cotrain.baselines import FedDS
    >>> X, y = load_digits(return_X_y=True)
    >>> X = X / 16
    >>> ds = FedDS(TorchClassifier(SmallCNN, module_params={"width": 4}), rounds=2,
    ...            distill_epochs=1, random_state=0)
    >>> ds = ds.fit([X[:100], X[100:200]], [y[:100], y[100:200]], X_public=X[200:400])
    >>> ds.rotation_head_.linear.out_features
    4
    """

    rule = "entropy"

    def __init__(
        self,
        estimator: Any,
        *,
        rounds: int = 20,
        local_epochs: int = 1,
        distill_epochs: int = 5,
        distill_lr: float = 1e-3,
        distill_batch_size: int = 64,
        k: float = 5.0,
        gamma: float = FEDDS_GAMMA,
        image_shape: tuple[int, int, int] | None = None,
        start_from_average: bool = False,
        init_weights: Any = None,
        participation: float = 1.0,
        weighted: bool = True,
        n_jobs: int | None = None,
        random_state: int | None = None,
        verbose: int = 0,
        early_stopping: int | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        callbacks: list[Any] | None = None,
    ) -> None:
        super().__init__(
            estimator,
            rounds=rounds,
            local_epochs=local_epochs,
            distill_epochs=distill_epochs,
            distill_lr=distill_lr,
            distill_batch_size=distill_batch_size,
            start_from_average=start_from_average,
            init_weights=init_weights,
            participation=participation,
            weighted=weighted,
            n_jobs=n_jobs,
            random_state=random_state,
            verbose=verbose,
            early_stopping=early_stopping,
            checkpoint_dir=checkpoint_dir,
            callbacks=callbacks,
        )
        self.k = k
        self.gamma = gamma
        self.image_shape = image_shape

    def _check_extra_params(self) -> None:
        super()._check_extra_params()
        check_number("k", self.k, low=0.0)
        check_number("gamma", self.gamma, low=0.0)
        shape = self.image_shape
        if shape is not None and (
            not isinstance(shape, tuple | list)
            or len(shape) != 3
            or not all(isinstance(s, int | np.integer) and s >= 1 for s in shape)
        ):
            raise ValueError(f"image_shape must be None or (C, H, W) positive ints, got {shape!r}")

    def _prepare(self) -> None:
        from cotrain.baselines.server_distillation import (
            RotationHead,
            feature_layer,
            image_shape_of,
        )

        self.rotation_head_ = None
        if self.gamma == 0:
            return
        module = self.global_model_.module_
        shape = self.image_shape or image_shape_of(self._U.shape[1:], module)
        self._image_shape = tuple(int(s) for s in shape)
        if int(np.prod(self._image_shape)) != int(np.prod(self._U.shape[1:])):
            raise ValueError(
                f"image_shape {self._image_shape} does not hold inputs of shape {self._U.shape[1:]}"
            )
        # server-only head; seeded from the same stream as the distillation batches
        import torch

        torch_state = torch.random.get_rng_state()
        torch.manual_seed(int(self._distill_rng.integers(2**31 - 1)))
        try:
            self.rotation_head_ = RotationHead(feature_layer(module).in_features)
        finally:
            torch.random.set_rng_state(torch_state)

    def _targets(self, probs: np.ndarray, participants: list[int]) -> np.ndarray:
        return distillation_targets(probs, "entropy", k=float(self.k))

    def _extra_state(self) -> dict[str, Any]:
        state = super()._extra_state()
        head = self.rotation_head_
        if head is not None:  # the server-only head's weights (its optimizer is per round)
            state["rotation_head"] = {
                k: v.detach().cpu().numpy() for k, v in head.state_dict().items()
            }
        return state

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        super()._load_extra_state(state)
        if self.rotation_head_ is not None:
            import torch

            saved = state["rotation_head"]
            self.rotation_head_.load_state_dict({k: torch.from_numpy(v) for k, v in saved.items()})

    def _ssl(self) -> dict[str, Any]:
        if self.rotation_head_ is None:
            return {}
        return {
            "gamma": float(self.gamma),
            "rotation_head": self.rotation_head_,
            "image_shape": self._image_shape,
        }


def check_number(name: str, value: Any, *, low: float, low_open: bool = False) -> None:
    """Raise ValueError naming ``name`` unless ``value`` is a finite real ``>= low`` (``> low``).

    Examples
    --------
    >>> check_number("k", 5.0, low=0.0)
    >>> check_number("k", -1, low=0.0)
    Traceback (most recent call last):
    ...
    ValueError: k must be a finite number >= 0, got -1
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not math.isfinite(value)
        or value < low
        or (low_open and value == low)
    ):
        need = f"> {low:g}" if low_open else f">= {low:g}"
        raise ValueError(f"{name} must be a finite number {need}, got {value!r}")
