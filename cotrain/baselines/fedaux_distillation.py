"""FedAUX (Sattler et al. 2021) as a complete algorithm: FedDF with pretraining and DP scores.

Preparation (once, before round 1): the server model may start from pretrained weights
(FedAUX P1: an extractor trained on the public pool only); the public pool is split at
random into negatives ``D⁻`` (``negative_fraction``, 20 % in the paper) and the distillation
set; every client fits an (ε, δ)-DP certainty scorer
(:class:`cotrain.privacy.fedaux.CertaintyScorer`, P2-P3) on features of a public-only
extractor and sends its released weights to the server, which scores the distillation set.
Each round is then :class:`~cotrain.baselines.FedDF`'s, with the clients' probabilities
weighted by their certainty scores (:func:`consensus.certainty_weighted`, eq. 3).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.decomposition import PCA
from sklearn.utils.validation import check_is_fitted

from cotrain.baselines._common import check_client_data
from cotrain.baselines.ensemble_distillation import FedDF, distillation_targets
from cotrain.privacy.fedaux import CertaintyScorer, certainty_scores, check_privacy
from cotrain.privacy.fedaux.noise import (
    REPLAYABLE_WARNING,
    client_noise_seeds,
    replayable_noise,
)

__all__ = ["FedAUX"]


class FedAUX(FedDF):
    """FedAUX: pretrained initialisation, DP certainty scores, weighted ensemble distillation.

    Parameters
    ----------
    estimator : torch learner
        As for :class:`~cotrain.baselines.FedDF` (clients share one architecture).
    rounds, local_epochs, distill_epochs, distill_lr, distill_batch_size
        As for FedDF. FedAUX distils one epoch with Adam at lr 5e-5, batch 128, on
        ResNet-8 and 80 % of tens of thousands of public images; small networks on small
        pools need more (the benchmark's settings are in docs/results).
    init_weights : dict of str to array, fitted torch learner or nn.Module, optional
        Pretrained weights of (part of) the network, loaded into the server model before
        round 1, so that every client starts from them (FedAUX P1: an extractor pretrained
        on the public pool only); as for FedDF.
    feature_map : "auto", callable or fitted transformer, default="auto"
        The public-only feature extractor of the scorers, applied to flattened rows.
        ``"auto"``: the penultimate features of the (pretrained) initial network when
        ``init_weights`` is given, as in FedAUX, else a PCA (16 components) fitted on the
        public pool. With :mod:`cotrain.pretrain`, pass the extractor itself:
        ``FedAUX(ext.classifier(), feature_map=ext)`` for ``ext = pretrain_images(U)``
        (the estimator then carries the pretrained body, and ``init_weights`` stays None).
    negative_fraction : float, default=0.2
        Share of the public pool used as the scorers' negatives ``D⁻`` (not distilled on),
        with ``negatives="split"``.
    lam, epsilon, delta : float, default=0.1, 0.1, 1e-5
        The scorers' regularisation λ and privacy (ε, δ), FedAUX's defaults (ε < 1 with
        ``calibration="classic"``).
    dp : bool, default=True
        Release the scorers with noise (False: exact scores, no guarantee).
    noise_random_state : int, optional
        Seeds the scorers' noise, for reproducible simulations only (it warns: whoever knows
        it can replay the noise and recover the exact non-private scorers): by default every
        client draws it from fresh entropy, so that the server (who knows ``random_state``)
        cannot replay it.
    start_from_average : bool, default=True
        The student starts from the client average (FedDF's and FedAUX's rule).
    participation, weighted, n_jobs, random_state, verbose
        As for FedAvg.
    negatives : {"split", "pool"}, default="split"
        ``"split"``: ``D⁻`` is ``negative_fraction`` of the pool, disjoint from the
        distillation set (the paper). ``"pool"``: the whole pool is both ``D⁻`` and the
        distillation set (they overlap, which the paper avoids; ``D⁻`` is public, so the
        guarantee is unchanged). The larger ``D⁻`` raises ``N = |D_i| + |D⁻|`` and lowers the
        noise ``σ ∝ 1/(ελN)``, which matters on small pools.
    calibration : {"classic", "analytic"}, default="classic"
        How the scorers' Gaussian noise is calibrated to ``(ε, δ)`` for the sensitivity
        ``2/(λN)``. ``"classic"``: FedAUX's ``σ = sqrt(2 ln(1.25/δ))·Δ₂/ε``, valid for
        ``ε < 1`` only. ``"analytic"``: the analytic Gaussian mechanism (Balle & Wang 2018,
        :func:`cotrain.privacy.gaussian_noise_multiplier`), valid for every ε > 0 and
        smaller than the classic σ where both apply (0.63 of it at ε = 0.1, δ = 1e-5).
    early_stopping, checkpoint_dir, callbacks
        As for :class:`~cotrain.baselines.FedDF`, but a ``checkpoint_dir`` raises
        ``NotImplementedError``: the scorers, fitted once on the clients' private data
        before round 1, are not written to checkpoints yet.

    Attributes
    ----------
    scores_ : ndarray of shape (n_clients, n_distill)
        The certainty scores on the distillation set.
    scorers_ : list of CertaintyScorer
        The released scorers (weights ``coef_``, noise ``sigma_``).
    history_ : History
        FedDF's records; round 1's ``bytes_up`` also carries the scorers' released
        weights (float64, as released), once per client; every record's ``epsilon`` is the
        scorers' ε (unit ``"record"``, adversary ``"server"``).
    global_model_, distill_loss_, classes_, clients_, n_rounds_, stopped_reason_
        As for FedDF.

    Notes
    -----
    The ε protects one private record of a client against the server, for the *scores*
    only (FedAUX §3.5); the client models sent every round carry no DP guarantee here, as
    in FedAvg, so the total cost is the scorers' ε plus that of the model updates.

    Examples
    --------
    >>> import pytest
    >>> torch = pytest.importorskip("torch")
    >>> from sklearn.datasets import load_digits
    >>> from learners import TorchClassifier
    >>> from cotrain.baselines import FedAUX
    >>> X, y = load_digits(return_X_y=True)
    >>> X = X / 16
    >>> aux = FedAUX(TorchClassifier(), rounds=2, distill_epochs=1, random_state=0)
    >>> aux = aux.fit([X[:100], X[100:200]], [y[:100], y[100:200]], X_public=X[200:400])
    >>> aux.scores_.shape, aux.privacy_report()["epsilon"]
    ((2, 160), 0.1)
    """

    rule = "certainty"

    def __init__(
        self,
        estimator: Any,
        *,
        rounds: int = 20,
        local_epochs: int = 1,
        distill_epochs: int = 5,
        distill_lr: float = 1e-3,
        distill_batch_size: int = 64,
        init_weights: Any = None,
        feature_map: Any = "auto",
        negative_fraction: float = 0.2,
        lam: float = 0.1,
        epsilon: float = 0.1,
        delta: float = 1e-5,
        dp: bool = True,
        noise_random_state: int | None = None,
        start_from_average: bool = True,
        participation: float = 1.0,
        weighted: bool = True,
        n_jobs: int | None = None,
        random_state: int | None = None,
        verbose: int = 0,
        negatives: str = "split",
        calibration: str = "classic",
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
        self.feature_map = feature_map
        self.negative_fraction = negative_fraction
        self.lam = lam
        self.epsilon = epsilon
        self.delta = delta
        self.dp = dp
        self.noise_random_state = noise_random_state
        self.negatives = negatives
        self.calibration = calibration

    def _check_extra_params(self) -> None:
        super()._check_extra_params()
        f = self.negative_fraction
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0 < f < 1:
            raise ValueError(f"negative_fraction must be a number in (0, 1), got {f!r}")
        if self.negatives not in ("split", "pool"):
            raise ValueError(f"negatives must be 'split' or 'pool', got {self.negatives!r}")
        if not isinstance(self.dp, bool | np.bool_):
            raise TypeError(f"dp must be True or False, got {self.dp!r}")
        # ε and δ are checked even when dp=False, so that switching dp on cannot fail later
        check_privacy(self.lam, self.epsilon, self.delta, calibration=self.calibration)
        fm = self.feature_map
        if not ((isinstance(fm, str) and fm == "auto") or callable(fm) or hasattr(fm, "transform")):
            raise TypeError(
                "feature_map must be 'auto', a callable or a fitted transformer, "
                f"got {type(fm).__name__}"
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
    ) -> FedAUX:
        """Prepare the scorers, then run FedDF's rounds with certainty-weighted targets.

        Parameters
        ----------
        X, y, X_public, groups, eval_set, resume
            As for :meth:`FedDF.fit` (``resume`` needs a checkpoint, which FedAUX refuses).

        Returns
        -------
        self
        """
        data = check_client_data(X, y, groups=groups)
        self._X_private = [np.asarray(x, dtype=np.float64) for x in data.X_clients]
        try:
            return super().fit(
                X, y, X_public=X_public, groups=groups, eval_set=eval_set, resume=resume
            )
        finally:
            del self._X_private  # the server object keeps no private data

    # ------------------------------------------------------------------ preparation
    def _scorer_features(self) -> Any:
        from cotrain.baselines.server_distillation import ExtractorFeatures

        fm = self.feature_map
        if not (isinstance(fm, str) and fm == "auto"):
            return fm
        if self.init_weights is not None:
            return ExtractorFeatures(self.global_model_.module_, self._U.shape[1:])
        flat = self._U.reshape(len(self._U), -1)
        n_comp = int(min(16, flat.shape[1], flat.shape[0]))
        return PCA(n_components=n_comp, random_state=0).fit(flat).transform

    def _prepare(self) -> None:
        n = len(self._U)
        perm = self._distill_rng.permutation(n)
        if self.negatives == "pool":  # the whole pool: negatives, and distilled on
            X_neg = self._U.reshape(n, -1)
            self._X_distill = self._U
        else:
            n_neg = min(n - 1, max(1, round(float(self.negative_fraction) * n)))
            X_neg = self._U[perm[:n_neg]].reshape(n_neg, -1)
            self._X_distill = self._U[np.sort(perm[n_neg:])]
        features = self._scorer_features()
        m = len(self._X_private)
        # a given noise_random_state is the explicit opt-in: it warns, once
        replay = replayable_noise(self.noise_random_state, True, "FedAUX", bool(self.dp))
        seeds = client_noise_seeds(self.noise_random_state, m, replay)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=REPLAYABLE_WARNING, category=UserWarning)
            self.scorers_ = [
                CertaintyScorer(
                    lam=self.lam,
                    epsilon=self.epsilon,
                    delta=self.delta,
                    dp=bool(self.dp),
                    feature_map=features,
                    random_state=seed,
                    calibration=self.calibration,
                    reproducible_noise=replay,
                ).fit(X.reshape(len(X), -1), X_neg)
                for X, seed in zip(self._X_private, seeds, strict=True)
            ]
        flat = self._X_distill.reshape(len(self._X_distill), -1)
        self.scores_ = certainty_scores(self.scorers_, flat)
        # what travels: each client's released weight vector, float64 as released
        self._scorer_bytes = int(
            sum(np.asarray(s.coef_, dtype=np.float64).nbytes for s in self.scorers_)
        )

    def _targets(self, probs: np.ndarray, participants: list[int]) -> np.ndarray:
        return distillation_targets(probs, "certainty", scores=self.scores_[participants])

    def _checkpoint_blocker(self) -> str | None:
        return (
            "its certainty scorers (fitted once on the clients' private data, before round 1) "
            "are not written to checkpoints yet"
        )

    def _extra_bytes_up(self, t: int) -> int:
        return self._scorer_bytes if t == 1 else 0

    # ------------------------------------------------------------------ privacy
    def _spent_epsilon(self) -> float | None:
        return float(self.epsilon) if self.dp else math.inf

    def _epsilon_meaning(self) -> dict[str, str]:
        return {"epsilon_unit": "record", "epsilon_adversary": "server"}

    def privacy_report(self) -> dict[str, Any]:
        """The scorers' (ε, δ) guarantee and what it is computed from.

        Returns
        -------
        dict
            ``epsilon`` and ``delta`` (per client, spent once: the scores are
            post-processing of the released weights), ``unit`` and ``adversary``,
            per-client ``sigma``, ``n_samples`` (``|D_i| + |D⁻|``) and ``sensitivity``
            (``2/(λN)``), ``lam``, ``dp``, ``negatives``, ``calibration``, and a ``note`` on
            what is not covered.

        Examples
        --------
        >>> import pytest
        >>> torch = pytest.importorskip("torch")
        >>> from sklearn.datasets import load_digits
        >>> from learners import TorchClassifier
        >>> from cotrain.baselines import FedAUX
        >>> X, y = load_digits(return_X_y=True)
        >>> aux = FedAUX(TorchClassifier(), rounds=1, distill_epochs=1, random_state=0)
        >>> aux = aux.fit([X[:50] / 16, X[50:100] / 16], [y[:50], y[50:100]],
        ...               X_public=X[100:200] / 16)
        >>> r = aux.privacy_report()
        >>> r["unit"], r["adversary"], r["n_samples"]
        ('record', 'server', [70, 70])
        """
        check_is_fitted(self, "history_")
        return {
            "epsilon": float(self.epsilon) if self.dp else math.inf,
            "delta": float(self.delta) if self.dp else 0.0,
            "unit": "record",
            "adversary": "server",
            "sigma": [float(s.sigma_) for s in self.scorers_],
            "n_samples": [int(s.n_samples_) for s in self.scorers_],
            "sensitivity": [float(s.sensitivity_) for s in self.scorers_],
            "lam": float(self.lam),
            "dp": bool(self.dp),
            "negatives": self.negatives,
            "calibration": self.calibration,
            "note": (
                "covers the certainty scores only (one private record of a client, against "
                "the server); the client models uploaded every round are not DP, so the "
                "total cost is this ε plus that of the model updates (FedAUX §3.5)"
            ),
        }
