"""FedAUX's DP certainty scorers: how much a public example looks like a client's data.

A client's *certainty scorer* (FedAUX, Sattler et al. 2021, eq. 4-6) is an L2-regularised
logistic regression that separates the client's private features (label +1) from a public
negative set ``D⁻`` (label -1), released with Gaussian noise so that the released weights are
(ε, δ)-differentially private with respect to the private data. Its scores
``s_i(x) = sigmoid(<w̃_i, h̃(x)>) + 1e-8`` weight client ``i``'s votes in
:class:`consensus.CertaintyWeighted`. The objective, the noise calibration and why
``C = 1/(λN)`` are in :mod:`cotrain.privacy.fedaux`; the one-shot head that uses these
scorers is in :mod:`cotrain.privacy.fedaux.head`.

Examples
--------
>>> import numpy as np
>>> from cotrain.privacy.fedaux import CertaintyScorer
>>> rng = np.random.default_rng(0)
>>> scorer = CertaintyScorer(lam=0.1, dp=False).fit(rng.normal(2.0, size=(200, 2)),
...                                                 rng.normal(size=(400, 2)))
>>> s = scorer.certainty(np.array([[2.0, 2.0], [-2.0, -2.0]]))
>>> bool(s[0] > s[1])
True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from numbers import Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.linear_model import LogisticRegression

from cotrain.privacy.accounting.epsilon import gaussian_noise_multiplier
from cotrain.privacy.fedaux.noise import (
    REPLAYABLE_WARNING,
    client_noise_seeds,
    noise_generator,
    replayable_noise,
)

__all__ = [
    "CALIBRATIONS",
    "SCORE_EPS",
    "CertaintyScorer",
    "as_2d_float",
    "certainty_scores",
    "check_privacy",
    "fedaux_features",
    "fedaux_sigma",
    "fedaux_weights",
]

#: Noise calibrations of the scorers: FedAUX's classic Gaussian mechanism (ε < 1) or the
#: analytic Gaussian mechanism of Balle & Wang (2018), valid for every ε > 0.
CALIBRATIONS = ("classic", "analytic")

#: Additive constant of FedAUX's score (``ξ`` in the paper), for a stable weighted mean.
SCORE_EPS = 1e-8


# ------------------------------------------------------------------------------- helpers
def check_privacy(
    lam: Any, epsilon: Any, delta: Any, dp: bool = True, calibration: Any = "classic"
) -> tuple[float, float, float]:
    """Validate a scorer's λ (always) and ε, δ, calibration (when ``dp``).

    Raises a ``ValueError`` naming the argument and what was expected, before any fit;
    FedAUX calls it on its own parameters for the same rule.

    Returns
    -------
    (lam, epsilon, delta) : tuple of float
        ``epsilon = inf`` and ``delta = 0.0`` when ``dp`` is False.

    Examples
    --------
    >>> from cotrain.privacy.fedaux import check_privacy
    >>> check_privacy(0.1, 2.0, 1e-5, calibration="analytic")
    (0.1, 2.0, 1e-05)
    >>> check_privacy(0.1, 2.0, 1e-5)
    Traceback (most recent call last):
    ...
    ValueError: epsilon must satisfy 0 < epsilon < 1 for the classic Gaussian-mechanism calibration sigma = sqrt(2 ln(1.25/delta)) * sensitivity / epsilon (use calibration='analytic' for epsilon >= 1); got 2.0
    """  # noqa: E501
    lam_f = _real(lam, "lam")
    if not math.isfinite(lam_f) or lam_f <= 0:
        raise ValueError(f"lam must be a finite number > 0; got {lam!r}")
    if not dp:
        return lam_f, float("inf"), 0.0
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be 'classic' or 'analytic'; got {calibration!r}")
    eps_f, delta_f = _real(epsilon, "epsilon"), _real(delta, "delta")
    if calibration == "analytic":
        if not (math.isfinite(eps_f) and eps_f > 0):
            raise ValueError(f"epsilon must be a finite number > 0; got {epsilon!r}")
    elif not 0 < eps_f < 1:
        raise ValueError(
            f"epsilon must satisfy 0 < epsilon < 1 for the classic Gaussian-mechanism "
            f"calibration sigma = sqrt(2 ln(1.25/delta)) * sensitivity / epsilon (use "
            f"calibration='analytic' for epsilon >= 1); got {epsilon!r}"
        )
    if not 0 < delta_f < 1:
        raise ValueError(f"delta must satisfy 0 < delta < 1; got {delta!r}")
    return lam_f, eps_f, delta_f


def _real(value: Any, name: str) -> float:
    """``float(value)`` for a real number (not a bool or a string), else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a number; got {value!r}")
    return float(value)


def fedaux_sigma(
    n_samples: int,
    lam: float,
    epsilon: float,
    delta: float,
    n_classes: int = 1,
    calibration: str = "classic",
) -> float:
    """Gaussian noise scale of a DP L2-regularised logistic regression (FedAUX / FedAUXfdp).

    ``σ = sqrt(8 · n_classes · ln(1.25/δ)) / (ε · λ · n_samples)``, i.e. the Gaussian
    mechanism ``σ = Δ₂ · sqrt(2 ln(1.25/δ)) / ε`` with sensitivity
    ``Δ₂ = 2 · sqrt(n_classes) / (λ · n_samples)``. ``n_classes=1`` is the binary scorer
    (one weight vector, ``Δ₂ = 2/(λN)``); ``n_classes=C`` is the multinomial head.

    Parameters
    ----------
    n_samples : int
        Number of terms averaged in the objective (``N = |D_i| + |D⁻|`` for the scorer,
        ``|D_i|`` for the head).
    lam : float
        Regularisation strength λ > 0.
    epsilon : float
        Privacy parameter, ``0 < ε < 1``.
    delta : float
        Privacy parameter, ``0 < δ < 1``.
    n_classes : int, default=1
        Number of weight vectors released (1 for the binary scorer).
    calibration : {"classic", "analytic"}, default="classic"
        ``"classic"``: the formula above (FedAUX's; ``ε < 1``). ``"analytic"``: ``σ = z(ε, δ) ·
        Δ₂`` with the smallest multiplier ``z`` of the analytic Gaussian mechanism
        (Balle & Wang 2018, :func:`cotrain.privacy.gaussian_noise_multiplier`), valid for
        every ``ε > 0`` and smaller than the classic σ (0.635 of it at ε = 0.1, δ = 1e-5).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``ε`` is not in ``(0, 1)`` (classic) or not positive (analytic), ``δ`` not in
        ``(0, 1)``, or λ, n_samples, n_classes are not positive.

    Examples
    --------
    >>> from cotrain.privacy.fedaux import fedaux_sigma
    >>> round(fedaux_sigma(1000, lam=0.1, epsilon=0.1, delta=1e-5), 6)
    0.968961
    >>> round(fedaux_sigma(1000, lam=0.1, epsilon=0.1, delta=1e-5, calibration="analytic"), 6)
    0.614991
    >>> round(fedaux_sigma(2500, lam=0.1, epsilon=1.0, delta=1e-5, calibration="analytic"), 6)
    0.029845
    """
    lam, epsilon, delta = check_privacy(lam, epsilon, delta, dp=True, calibration=calibration)
    if int(n_samples) < 1 or int(n_classes) < 1:
        raise ValueError(f"n_samples and n_classes must be >= 1; got {n_samples!r}, {n_classes!r}")
    if calibration == "analytic":
        sensitivity = 2.0 * math.sqrt(n_classes) / (lam * n_samples)
        return gaussian_noise_multiplier(epsilon, delta) * sensitivity
    return math.sqrt(8.0 * n_classes * math.log(1.25 / delta)) / (epsilon * lam * n_samples)


def as_2d_float(X: ArrayLike, name: str) -> NDArray[np.float64]:
    """``X`` as a finite, non-empty 2-D float64 array, else a ValueError naming ``name``.

    Examples
    --------
    >>> as_2d_float([[1, 2]], "X").dtype
    dtype('float64')
    """
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def fedaux_features(
    X: ArrayLike, feature_map: Callable[[Any], Any] | Any | None = None
) -> NDArray[np.float64]:
    """FedAUX's normalised features ``h̃(x)``: map, append a constant 1, clip to norm ≤ 1.

    The constant feature replaces an unregularised intercept (which would break the
    sensitivity bound); every row is then scaled by ``min(1, 1/‖row‖)`` so that
    ``‖h̃(x)‖₂ ≤ 1``. The clipping is per row and data-independent (FedAUXfdp's eq. 4 divides
    by the maximum norm over the private data, which itself depends on the private data).
    Because the appended constant is 1, every row has norm ≥ 1 before clipping, so in effect
    ``h̃(x) = (h(x), 1) / sqrt(1 + ‖h(x)‖²)``: a unit vector, injective in ``h(x)`` (the last
    coordinate encodes ``‖h(x)‖``). Inputs of large norm are compressed towards their direction;
    a ``feature_map`` that scales them down keeps more of their radial information.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Inputs (already standardised, or raw inputs of ``feature_map``).
    feature_map : callable or fitted transformer, optional
        A feature extractor fitted on public data only (e.g. a PCA fitted on the public pool):
        an object with ``transform`` or a callable. Default: identity.

    Returns
    -------
    ndarray of shape (n_samples, n_features_out + 1)

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.privacy.fedaux import fedaux_features
    >>> fedaux_features(np.array([[0.0, 0.0], [3.0, 0.0]])).round(3)
    array([[0.   , 0.   , 1.   ],
           [0.949, 0.   , 0.316]])
    """
    if feature_map is None:
        H = X
    elif hasattr(feature_map, "transform"):
        H = feature_map.transform(X)
    elif callable(feature_map):
        H = feature_map(X)
    else:
        raise TypeError(
            "feature_map must be None, a fitted transformer with .transform, or a callable; "
            f"got {type(feature_map).__name__}"
        )
    H = as_2d_float(H, "features")
    H = np.hstack([H, np.ones((H.shape[0], 1))])
    norms = np.linalg.norm(H, axis=1, keepdims=True)
    return H * np.minimum(1.0, 1.0 / norms)  # norms >= 1e-300: the constant column is 1


# ------------------------------------------------------------------------ certainty scorer
class CertaintyScorer(BaseEstimator):
    """Differentially private FedAUX certainty scorer of one client.

    Fits ``w* = argmin J(w)`` with

    ``J(w) = (1/N) Σ_{x ∈ D_i ∪ D⁻} log(1 + exp(-t_x <w, h̃(x)>)) + (λ/2) ‖w‖²``,

    ``t_x = +1`` on the private data ``D_i`` and ``-1`` on the public negatives ``D⁻``,
    ``N = |D_i| + |D⁻|``, features ``h̃`` from :func:`fedaux_features` (constant feature
    appended, no unregularised intercept, rows clipped to norm ≤ 1), and releases
    ``w̃ = w* + N(0, σ² I)``, ``σ² = 8 ln(1.25/δ) / (ε² λ² N²)`` (or the analytic calibration).

    Parameters
    ----------
    lam : float, default=0.1
        Regularisation λ (FedAUX: 0.1; 0.01 for text). Larger λ, less noise.
    epsilon : float, default=0.1
        Privacy ε, ``0 < ε < 1`` with the classic calibration; any ε > 0 with the analytic one.
    delta : float, default=1e-5
        Privacy δ.
    dp : bool, default=True
        Release with noise. ``False`` gives the exact minimiser and no privacy guarantee.
    feature_map : callable or fitted transformer, optional
        Feature extractor fitted on *public* data only (never on private data). Default:
        identity on already-standardised inputs.
    random_state : int, numpy Generator or None, default=None
        Seeds the scorer's non-private randomness (its fit has none: the solver is
        deterministic). It seeds the privacy noise only with ``reproducible_noise=True``.
    calibration : {"classic", "analytic"}, default="classic"
        The noise calibration of :func:`fedaux_sigma`: FedAUX's classic Gaussian mechanism,
        or the analytic one (Balle & Wang 2018; every ε > 0, less noise at equal (ε, δ)).
    reproducible_noise : bool, default=False
        False: the noise is drawn from the operating system's entropy, so nobody who knows
        ``random_state`` (the server, a reader of the run's configuration) can replay it and
        subtract it from ``coef_``. True (simulations only; warns): the noise is seeded from
        ``random_state``, so a fit can be repeated exactly — and whoever knows the seed
        recovers the non-private weights exactly, with no privacy left against them.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features_out + 1,)
        The released (noisy when ``dp``) weights; the last entry multiplies the constant
        feature. The noise-free minimiser is not kept.
    sigma_ : float
        Noise standard deviation (0.0 when ``dp=False``).
    n_samples_ : int
        ``N = |D_i| + |D⁻|``.
    sensitivity_ : float
        ``2 / (λ N)``.
    epsilon_, delta_ : float
        The guarantee of ``coef_`` (``inf`` and 0.0 when ``dp=False``).
    noise_replayable_ : bool
        True when the noise was seeded from ``random_state`` (``reproducible_noise=True``):
        then ``(epsilon_, delta_)`` does not hold against whoever knows the seed.
    n_features_in_ : int
        Number of input columns.

    Notes
    -----
    The fit uses ``LogisticRegression(C=1/(λN), fit_intercept=False, l1_ratio=0,
    solver="lbfgs")``. scikit-learn's lbfgs solver minimises
    ``mean_x loss(x) + ½ · (1/(C·N)) · ‖w‖²`` (its ``l2_reg_strength = 1/(C·n_samples)``), which
    with ``C = 1/(λN)`` is exactly ``J(w)``; equivalently, the documented objective
    ``C · Σ loss + ½ ‖w‖²`` equals ``N · C · J(w) = J(w)/λ``, with the same minimiser. The
    solver's gradient tolerance therefore applies to ``∇J`` directly.

    ``certainty`` is named so as not to clash with scikit-learn's ``score`` (a metric).
    Scores of public points are post-processing of ``coef_`` and cost no further privacy.
    The guarantee is per client, for replace-one neighbouring of ``D_i`` (``D⁻`` is public).

    Utility needs a large ``N``: the signal ``‖w*‖`` is at most ``1/λ`` while
    ``σ ∝ 1/(ελN)``, so the signal-to-noise ratio grows like ``εN`` and raising λ does not
    help beyond a point. At the defaults (ε = 0.1) ``N`` of a few hundred gives scores that are
    mostly noise; FedAUX's experiments use tens of thousands of examples.

    ``sklearn.base.clone`` re-creates an unfitted copy of an estimator-valued
    ``feature_map``; pass a callable such as ``pca.transform`` if the scorer is to be cloned.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.privacy.fedaux import CertaintyScorer
    >>> rng = np.random.default_rng(0)
    >>> X_priv, X_neg = rng.normal(2.0, size=(500, 3)), rng.normal(size=(2000, 3))
    >>> sc = CertaintyScorer(lam=0.1, epsilon=0.5).fit(X_priv, X_neg)
    >>> sc.n_samples_, round(sc.sigma_, 5), sc.noise_replayable_
    (2500, 0.07752, False)
    >>> sc.certainty(X_priv[:3]).shape
    (3,)
    """

    def __init__(
        self,
        *,
        lam: float = 0.1,
        epsilon: float = 0.1,
        delta: float = 1e-5,
        dp: bool = True,
        feature_map: Any = None,
        random_state: Any = None,
        calibration: str = "classic",
        reproducible_noise: bool = False,
    ) -> None:
        self.lam = lam
        self.epsilon = epsilon
        self.delta = delta
        self.dp = dp
        self.feature_map = feature_map
        self.random_state = random_state
        self.calibration = calibration
        self.reproducible_noise = reproducible_noise

    def fit(self, X_private: ArrayLike, X_negative: ArrayLike) -> CertaintyScorer:
        """Fit the scorer on private data against public negatives and release ``coef_``.

        Parameters
        ----------
        X_private : array-like of shape (n_private, n_features)
            The client's private inputs (label +1).
        X_negative : array-like of shape (n_negative, n_features)
            Public negative inputs ``D⁻`` (label -1), disjoint from the pool being scored.

        Returns
        -------
        self
        """
        lam, epsilon, delta = check_privacy(
            self.lam, self.epsilon, self.delta, self.dp, self.calibration
        )
        replay = replayable_noise(
            self.random_state, self.reproducible_noise, "CertaintyScorer", bool(self.dp)
        )
        X_private = as_2d_float(X_private, "X_private")
        X_negative = as_2d_float(X_negative, "X_negative")
        if X_private.shape[1] != X_negative.shape[1]:
            raise ValueError(
                f"X_private has {X_private.shape[1]} features but X_negative has "
                f"{X_negative.shape[1]}"
            )
        H = np.vstack(
            [
                fedaux_features(X_private, self.feature_map),
                fedaux_features(X_negative, self.feature_map),
            ]
        )
        t = np.concatenate([np.ones(len(X_private)), -np.ones(len(X_negative))])
        n = H.shape[0]
        w = _fit_binary_logistic(H, t, C=1.0 / (lam * n))
        self.n_features_in_ = X_private.shape[1]
        self.n_samples_ = n
        self.sensitivity_ = 2.0 / (lam * n)
        if self.dp:
            self.sigma_ = fedaux_sigma(n, lam, epsilon, delta, calibration=self.calibration)
            noise = noise_generator(self.random_state, replay)
            w = w + noise.normal(0.0, self.sigma_, size=w.shape)
        else:
            self.sigma_ = 0.0
        self.epsilon_, self.delta_ = epsilon, delta
        self.noise_replayable_ = replay
        self.coef_ = w
        return self

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """``<w̃, h̃(x)>`` for each row of ``X``; shape ``(n,)``."""
        if not hasattr(self, "coef_"):
            raise AttributeError("CertaintyScorer is not fitted yet; call fit first")
        return fedaux_features(X, self.feature_map) @ self.coef_

    def certainty(self, X: ArrayLike) -> NDArray[np.float64]:
        """FedAUX certainty ``s(x) = sigmoid(<w̃, h̃(x)>) + 1e-8``, in ``(0, 1 + 1e-8]``.

        Parameters
        ----------
        X : array-like of shape (n, n_features)

        Returns
        -------
        ndarray of shape (n,)
        """
        return expit(self.decision_function(X)) + SCORE_EPS


def _fit_binary_logistic(H: NDArray[np.float64], t: NDArray[np.float64], C: float) -> NDArray:
    """Exact minimiser of ``mean log(1+exp(-t<w,h>)) + ½ ‖w‖²/(C·n)`` (sklearn lbfgs)."""
    model = LogisticRegression(
        C=C, l1_ratio=0.0, fit_intercept=False, solver="lbfgs", tol=1e-10, max_iter=10_000
    )
    model.fit(H, t)
    # classes_ == [-1, 1]: coef_ is the weight vector of the positive (private) class
    return model.coef_.ravel().astype(np.float64)


def certainty_scores(scorers: Sequence[CertaintyScorer], X_public: ArrayLike) -> NDArray:
    """Stack the clients' certainties on the public pool: shape ``(n_clients, n_public)``.

    Feed the result to ``consensus.CertaintyWeighted(scores=...)`` (row ``i`` = client ``i``).

    Parameters
    ----------
    scorers : sequence of fitted CertaintyScorer
        One per client, in client-id order.
    X_public : array-like of shape (n_public, n_features)

    Returns
    -------
    ndarray of shape (n_clients, n_public)

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.privacy.fedaux import CertaintyScorer, certainty_scores
    >>> rng = np.random.default_rng(0)
    >>> X_neg = rng.normal(size=(100, 2))
    >>> a = CertaintyScorer(dp=False).fit(rng.normal(3, size=(50, 2)), X_neg)
    >>> b = CertaintyScorer(dp=False).fit(rng.normal(-3, size=(50, 2)), X_neg)
    >>> S = certainty_scores([a, b], [[3.0, 3.0], [-3.0, -3.0]])
    >>> S.shape, bool(S[0, 0] > S[1, 0]), bool(S[1, 1] > S[0, 1])
    ((2, 2), True, True)
    """
    if len(scorers) == 0:
        raise ValueError("certainty_scores needs at least one scorer")
    return np.vstack([s.certainty(X_public) for s in scorers])


def fedaux_weights(
    X_clients: Sequence[ArrayLike],
    X_negative: ArrayLike,
    X_public: ArrayLike,
    lam: float = 0.1,
    epsilon: float = 0.1,
    delta: float = 1e-5,
    random_state: Any = None,
    *,
    dp: bool = True,
    feature_map: Any = None,
    reproducible_noise: bool = False,
) -> NDArray[np.float64]:
    """Fit one DP certainty scorer per client and score the public pool.

    Parameters
    ----------
    X_clients : sequence of array-like
        The clients' private inputs, one array per client.
    X_negative : array-like
        Public negatives ``D⁻`` (keep them apart from ``X_public`` if you can).
    X_public : array-like
        The public pool to score.
    lam, epsilon, delta : float
        See :class:`CertaintyScorer`.
    random_state : int, SeedSequence or None, default=None
        Seeds the privacy noise only with ``reproducible_noise=True``: client ``i``'s noise
        is then seeded with ``SeedSequence(random_state).spawn(m)[i]``.
    dp : bool, default=True
        Add the noise (False: exact, non-private scores).
    feature_map : callable or fitted transformer, optional
        Public-fitted feature extractor, see :class:`CertaintyScorer`.
    reproducible_noise : bool, default=False
        False: every client draws its noise from the operating system's entropy, so the
        server, who knows ``random_state``, cannot replay it. True (simulations only; warns
        once): the noise is seeded from ``random_state`` and whoever knows it recovers every
        client's exact non-private scorer.

    Returns
    -------
    ndarray of shape (n_clients, n_public)
        Each client's ``(ε, δ)``-DP certainty on the public pool (record-level, released to
        the server once), for ``consensus.CertaintyWeighted(scores=..., scorer_epsilon=ε,
        scorer_delta=δ)`` — with those two, the trainer's privacy ledger adds the scores'
        cost to every client's ε.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import CertaintyWeighted
    >>> from cotrain.privacy.fedaux import fedaux_weights
    >>> rng = np.random.default_rng(0)
    >>> clients = [rng.normal(2, size=(40, 3)), rng.normal(-2, size=(40, 3))]
    >>> S = fedaux_weights(clients, rng.normal(size=(200, 3)), rng.normal(size=(10, 3)))
    >>> S.shape
    (2, 10)
    >>> rule = CertaintyWeighted(scores=S, scorer_epsilon=0.1, scorer_delta=1e-5)
    """
    if len(X_clients) == 0:
        raise ValueError("fedaux_weights needs at least one client")
    replay = replayable_noise(random_state, reproducible_noise, "fedaux_weights", bool(dp))
    seeds = client_noise_seeds(random_state, len(X_clients), replay)
    with warnings.catch_warnings():  # warned once above
        warnings.filterwarnings("ignore", message=REPLAYABLE_WARNING, category=UserWarning)
        scorers = [
            CertaintyScorer(
                lam=lam,
                epsilon=epsilon,
                delta=delta,
                dp=dp,
                feature_map=feature_map,
                random_state=seed,
                reproducible_noise=replay,
            ).fit(Xi, X_negative)
            for Xi, seed in zip(X_clients, seeds, strict=True)
        ]
    return certainty_scores(scorers, X_public)
