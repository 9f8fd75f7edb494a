"""FedAUXfdp's DP softmax head: a multinomial logistic head released with Gaussian noise.

After FedAUXfdp (Hoech et al. 2022): every client fits a DP multinomial logistic head
(:class:`DPSoftmaxHead`, sensitivity ``2√C/(λ|D|)``) on features of a public-only extractor;
its soft labels on the public pool are post-processing. The one-shot round that averages the
clients' heads with their DP certainty scores (:mod:`cotrain.privacy.fedaux.scorer`) is a
baseline, :func:`cotrain.baselines.fedaux_one_shot.one_shot_fedaux`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin

from cotrain.privacy.fedaux.noise import (
    noise_generator,
    replayable_noise,
)
from cotrain.privacy.fedaux.scorer import (
    as_2d_float,
    check_privacy,
    fedaux_features,
    fedaux_sigma,
)

__all__ = ["DPSoftmaxHead"]


# ---------------------------------------------------------------------- DP softmax head
class DPSoftmaxHead(ClassifierMixin, BaseEstimator):
    """Differentially private multinomial logistic head (FedAUXfdp, Thm. 1 and Alg. 1).

    Fits ``B* = argmin (1/|D|) Σ -log softmax(B h̃(x))_y + (λ/2) ‖B‖²_F`` over all ``C``
    classes (one row of ``B`` per class, constant feature appended, no unregularised
    intercept, ``‖h̃(x)‖ ≤ 1``) with scipy's L-BFGS, and releases
    ``B̃ = B* + N(0, σ² I)``, ``σ² = 8 C ln(1.25/δ) / (ε² λ² |D|²)``.

    Parameters
    ----------
    lam : float, default=0.1
        Regularisation λ.
    epsilon : float, default=0.5
        Privacy ε, ``0 < ε < 1``.
    delta : float, default=1e-5
        Privacy δ.
    dp : bool, default=True
        Release with noise.
    classes : array-like, optional
        The global label space (a client may hold only some classes; every class gets a
        row of ``B``). Default: the labels seen in ``fit``.
    feature_map : callable or fitted transformer, optional
        Public-fitted feature extractor, as in :class:`CertaintyScorer`.
    random_state : int, numpy Generator or None, default=None
        Seeds the head's non-private randomness (its fit has none: L-BFGS from zero is
        deterministic). It seeds the privacy noise only with ``reproducible_noise=True``.
    reproducible_noise : bool, default=False
        False: the noise is drawn from the operating system's entropy, so whoever knows
        ``random_state`` cannot replay it. True (simulations only; warns): the noise is
        seeded from ``random_state``, and whoever knows it recovers the exact non-private head.

    Attributes
    ----------
    classes_ : ndarray of shape (C,)
    coef_ : ndarray of shape (C, n_features_out + 1)
        The released (noisy) weights.
    sigma_, sensitivity_ : float
        Noise scale and the sensitivity ``2 √C / (λ |D|)``.
    n_samples_ : int
        ``|D|``.
    epsilon_, delta_ : float
        The guarantee of ``coef_`` (``inf``, 0.0 when ``dp=False``).
    noise_replayable_ : bool
        True when the noise was seeded from ``random_state`` (``reproducible_noise=True``).

    Notes
    -----
    Sensitivity (FedAUXfdp Thm. 1, after Chaudhuri et al. 2011), under replace-one
    neighbouring of ``D``: the per-example gradient of the log-softmax loss w.r.t. ``B`` is
    ``(p - e_y) h̃(x)ᵀ`` with Frobenius norm ``‖p - e_y‖ ‖h̃(x)‖``; the paper bounds it by
    ``√C`` using ``‖h̃(x)‖ ≤ 1`` (guaranteed here by clipping), and λ-strong convexity turns the
    difference of two such gradients (``≤ 2√C/|D|``) into ``‖B₁* - B₂*‖ ≤ 2√C/(λ|D|)``. The bound
    is conservative: ``‖p - e_y‖ ≤ √2`` for any C, so ``2√2/(λ|D|)`` would also be valid; the
    paper's ``√C`` is kept for fidelity. Soft labels computed from ``coef_`` are
    post-processing and cost no further privacy. Requires the exact minimiser (L-BFGS run to a
    gradient tolerance of 1e-10).

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.privacy.fedaux import DPSoftmaxHead
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(-2, size=(300, 2)), rng.normal(2, size=(300, 2))])
    >>> y = np.repeat([0, 1], 300)
    >>> head = DPSoftmaxHead(lam=0.5, epsilon=0.5, classes=[0, 1, 2])
    >>> head = head.fit(X, y)
    >>> head.coef_.shape, round(head.sigma_, 4)
    ((3, 3), 0.1119)
    >>> head.predict(np.array([[-2.0, -2.0], [2.0, 2.0]]))
    array([0, 1])
    """

    def __init__(
        self,
        *,
        lam: float = 0.1,
        epsilon: float = 0.5,
        delta: float = 1e-5,
        dp: bool = True,
        classes: ArrayLike | None = None,
        feature_map: Any = None,
        random_state: Any = None,
        reproducible_noise: bool = False,
    ) -> None:
        self.lam = lam
        self.epsilon = epsilon
        self.delta = delta
        self.dp = dp
        self.classes = classes
        self.feature_map = feature_map
        self.random_state = random_state
        self.reproducible_noise = reproducible_noise

    def fit(self, X: ArrayLike, y: ArrayLike) -> DPSoftmaxHead:
        """Fit on the private data and release the (noisy) head.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        y : array-like of shape (n,)

        Returns
        -------
        self
        """
        lam, epsilon, delta = check_privacy(self.lam, self.epsilon, self.delta, self.dp)
        replay = replayable_noise(
            self.random_state, self.reproducible_noise, "DPSoftmaxHead", bool(self.dp)
        )
        X = as_2d_float(X, "X")
        y = np.asarray(y)
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},); got {y.shape}")
        classes = np.unique(y) if self.classes is None else np.asarray(self.classes)
        if classes.ndim != 1 or classes.size == 0 or np.unique(classes).size != classes.size:
            raise ValueError("classes must be a 1-D array of distinct labels")
        order = np.argsort(classes, kind="stable")
        pos = np.searchsorted(classes[order], y)
        pos = np.clip(pos, 0, classes.size - 1)
        codes = order[pos]
        if not np.array_equal(classes[codes], y):
            raise ValueError("y contains labels that are not in classes")
        H = fedaux_features(X, self.feature_map)
        n, d = H.shape
        k = classes.size
        B = _fit_multinomial(H, codes, k, lam)
        self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        self.n_samples_ = n
        self.sensitivity_ = 2.0 * math.sqrt(k) / (lam * n)
        if self.dp:
            self.sigma_ = fedaux_sigma(n, lam, epsilon, delta, n_classes=k)
            noise = noise_generator(self.random_state, replay)
            B = B + noise.normal(0.0, self.sigma_, size=(k, d))
        else:
            self.sigma_ = 0.0
        self.epsilon_, self.delta_ = epsilon, delta
        self.noise_replayable_ = replay
        self.coef_ = B
        return self

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """Logits ``B̃ h̃(x)``; shape ``(n, C)``."""
        if not hasattr(self, "coef_"):
            raise AttributeError("DPSoftmaxHead is not fitted yet; call fit first")
        return fedaux_features(X, self.feature_map) @ self.coef_.T

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Soft labels ``softmax(B̃ h̃(x))``; shape ``(n, C)``, columns in ``classes_`` order."""
        return softmax(self.decision_function(X), axis=1)

    def predict(self, X: ArrayLike) -> NDArray:
        """Most probable class of each row."""
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]


def _multinomial_objective(b: NDArray, H: NDArray, Y: NDArray, lam: float) -> tuple[float, NDArray]:
    """``J(B)`` and its gradient for the flattened ``B`` of shape ``(C, d)``."""
    n, d = H.shape
    B = b.reshape(Y.shape[1], d)
    logp = log_softmax(H @ B.T, axis=1)
    value = -np.sum(Y * logp) / n + 0.5 * lam * np.dot(b, b)
    grad = (np.exp(logp) - Y).T @ H / n + lam * B
    return value, grad.ravel()


def _fit_multinomial(H: NDArray, codes: NDArray, k: int, lam: float) -> NDArray[np.float64]:
    Y = np.zeros((H.shape[0], k))
    Y[np.arange(H.shape[0]), codes] = 1.0
    res = minimize(
        _multinomial_objective,
        np.zeros(k * H.shape[1]),
        args=(H, Y, lam),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 10_000, "gtol": 1e-10, "ftol": 64 * np.finfo(float).eps},
    )
    return res.x.reshape(k, H.shape[1])
