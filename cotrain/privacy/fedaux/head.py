"""The one-shot FedAUX round: a DP softmax head per client, weighted by DP certainty scores.

After FedAUXfdp (Hoech et al. 2022): every client fits a DP multinomial logistic head
(:class:`DPSoftmaxHead`, sensitivity ``2√C/(λ|D|)``) on features of a public-only extractor;
the clients' DP soft labels on the public pool are averaged with their DP certainty scores
(:mod:`cotrain.privacy.fedaux.scorer`) and a student is trained on the result
(:func:`one_shot_fedaux`). Privacy composes basically: ``ε = ε_scores + ε_labels``,
``δ = δ_scores + δ_labels`` per client.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.linear_model import LogisticRegression
from sklearn.utils import Bunch

from consensus import certainty_weighted
from cotrain.privacy.fedaux.noise import (
    REPLAYABLE_WARNING,
    as_seed_sequence,
    noise_generator,
    replayable_noise,
)
from cotrain.privacy.fedaux.scorer import (
    CertaintyScorer,
    as_2d_float,
    certainty_scores,
    check_privacy,
    fedaux_features,
    fedaux_sigma,
)

__all__ = ["DPSoftmaxHead", "one_shot_fedaux"]


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


# ---------------------------------------------------------------------------- one shot
def one_shot_fedaux(
    heads: DPSoftmaxHead | Sequence[DPSoftmaxHead] | None,
    X_clients: Sequence[ArrayLike],
    y_clients: Sequence[ArrayLike],
    X_negative: ArrayLike,
    X_public: ArrayLike,
    *,
    lam: float = 0.1,
    epsilon_scores: float = 0.1,
    epsilon_labels: float = 0.5,
    delta: float = 1e-5,
    classes: ArrayLike | None = None,
    feature_map: Any = None,
    student: Any = None,
    confidence_weights: bool = False,
    random_state: Any = None,
    reproducible_noise: bool = False,
) -> Bunch:
    """One round of fully private FedAUX (in the spirit of FedAUXfdp), with a student.

    Each client ``i`` releases, once: (a) a DP certainty scorer
    (:class:`CertaintyScorer`, ``(ε_scores, δ)``) and (b) a DP multinomial head
    (:class:`DPSoftmaxHead`, ``(ε_labels, δ)``) fitted on its private data. From them come the
    certainty scores ``s_i(U)`` and the soft labels ``p_i(U)`` on the public pool (both
    post-processing). The server forms the certainty-weighted mean
    ``Σ_i s_i p_i / Σ_i s_i`` (:func:`consensus.certainty_weighted`) and trains ``student`` on
    ``(U, argmax)``. Each client's data is ``(ε_scores + ε_labels, 2δ)``-DP by basic composition
    (FedAUXfdp adds them: 0.1 + 0.5 = 0.6, δ = 2e-5 with the defaults).

    Parameters
    ----------
    heads : DPSoftmaxHead, sequence of DPSoftmaxHead, or None
        Unfitted head template(s) (cloned; one template for all clients or one per client).
        ``None``: ``DPSoftmaxHead(lam=lam, epsilon=epsilon_labels, delta=delta)``. A head's
        own ``lam``, ``epsilon`` and ``delta`` are used and reported. Arbitrary scikit-learn
        estimators are refused: their labels carry no DP guarantee.
    X_clients, y_clients : sequence of array-like
        The clients' private data.
    X_negative : array-like
        Public negatives for the scorers.
    X_public : array-like of shape (n_public, n_features)
        The public pool the student is trained on.
    lam : float, default=0.1
        λ of the scorers (and of the default heads).
    epsilon_scores, epsilon_labels, delta : float
        Per-client budgets of the scorer and of the default head.
    classes : array-like, optional
        Global label space; default: the union of the clients' labels.
    feature_map : callable or fitted transformer, optional
        Public-fitted extractor used by the scorers and the default heads. The student sees
        ``X_public`` as given.
    student : classifier, optional
        Trained on the public pool; default ``LogisticRegression(max_iter=1000)``.
    confidence_weights : bool, default=False
        Pass the consensus probability of the chosen class as ``sample_weight``.
    random_state : int or None, default=None
        Seeds the privacy noise only with ``reproducible_noise=True``: client ``i``'s
        noise then comes from ``SeedSequence(random_state).spawn(m)[i]`` (spawned again into
        its scorer's and its head's).
    reproducible_noise : bool, default=False
        False: every client draws the noise of its scorer and of its head from the operating
        system's entropy, so the server, who knows ``random_state``, cannot replay it. True
        (simulations only; warns once): seeded from ``random_state``, so that whoever knows
        it recovers every client's exact non-private scorer and head.

    Returns
    -------
    sklearn.utils.Bunch
        ``student`` (fitted), ``pseudo_labels`` (n_public,) in label values,
        ``soft_labels`` (n_public, C), ``scores`` (m, n_public), ``classes``, ``scorers``,
        ``heads``, ``epsilon_total`` (m,), ``delta_total`` (m,), ``epsilon_scores`` (m,),
        ``epsilon_labels`` (m,), ``noise_replayable`` (True when the noise was seeded from
        ``random_state``: the ε then does not hold against whoever knows it).

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.privacy.fedaux import one_shot_fedaux
    >>> rng = np.random.default_rng(0)
    >>> def blob(c, n):
    ...     return rng.normal(c, size=(n, 2))
    >>> Xc = [np.vstack([blob(-2, 300), blob(2, 30)]), np.vstack([blob(2, 300), blob(-2, 30)])]
    >>> yc = [np.repeat([0, 1], [300, 30]), np.repeat([1, 0], [300, 30])]
    >>> X_pub = np.vstack([blob(-2, 100), blob(2, 100)])
    >>> res = one_shot_fedaux(None, Xc, yc, rng.normal(size=(500, 2)), X_pub, lam=1.0)
    >>> float(res.epsilon_total[0]), float(res.delta_total[0]), res.noise_replayable
    (0.6, 2e-05, False)
    >>> bool((res.student.predict(X_pub) == np.repeat([0, 1], 100)).mean() > 0.9)
    True
    """
    m = len(X_clients)
    if m == 0 or len(y_clients) != m:
        raise ValueError(
            f"one_shot_fedaux needs one y per X and at least one client; got {m} X and "
            f"{len(y_clients)} y"
        )
    if heads is None:
        templates = [
            DPSoftmaxHead(lam=lam, epsilon=epsilon_labels, delta=delta, feature_map=feature_map)
        ] * m
    elif isinstance(heads, DPSoftmaxHead):
        templates = [heads] * m
    else:
        templates = list(heads)
        if len(templates) != m:
            raise ValueError(f"got {len(templates)} heads for {m} clients")
    for h in templates:
        if not isinstance(h, DPSoftmaxHead):
            raise TypeError(
                "one_shot_fedaux releases DP soft labels and needs DPSoftmaxHead heads (or "
                f"None); got {type(h).__name__}, whose labels carry no DP guarantee"
            )
    y_all = [np.asarray(yi) for yi in y_clients]
    classes_arr = np.unique(np.concatenate(y_all)) if classes is None else np.asarray(classes)
    X_public_arr = as_2d_float(X_public, "X_public")
    replay = replayable_noise(random_state, reproducible_noise, "one_shot_fedaux")
    seeds = as_seed_sequence(random_state).spawn(m) if replay else [None] * m
    scorers, fitted, probs = [], [], []
    for Xi, yi, template, seed in zip(X_clients, y_all, templates, seeds, strict=True):
        # replayable noise only: client i's seed spawns its scorer's and its head's
        s_rng, h_rng = (None, None) if seed is None else map(np.random.default_rng, seed.spawn(2))
        with warnings.catch_warnings():  # warned once above
            warnings.filterwarnings("ignore", message=REPLAYABLE_WARNING, category=UserWarning)
            scorers.append(
                CertaintyScorer(
                    lam=lam,
                    epsilon=epsilon_scores,
                    delta=delta,
                    feature_map=feature_map,
                    random_state=s_rng,
                    reproducible_noise=replay,
                ).fit(Xi, X_negative)
            )
            # a shallow re-construction, not sklearn.clone: clone would un-fit a fitted
            # estimator-valued feature_map (e.g. a public PCA)
            head = type(template)(**template.get_params(deep=False)).set_params(
                classes=classes_arr, random_state=h_rng, reproducible_noise=replay
            )
            fitted.append(head.fit(Xi, yi))
        probs.append(head.predict_proba(X_public_arr))
    scores = certainty_scores(scorers, X_public_arr)
    soft = certainty_weighted(np.stack(probs), classes_arr.size, scores)
    codes = np.argmax(soft, axis=1)
    pseudo = classes_arr[codes]
    student_ = LogisticRegression(max_iter=1000) if student is None else clone(student)
    if confidence_weights:
        student_.fit(X_public_arr, pseudo, sample_weight=soft[np.arange(len(codes)), codes])
    else:
        student_.fit(X_public_arr, pseudo)
    eps_s = np.array([s.epsilon_ for s in scorers])
    eps_l = np.array([h.epsilon_ for h in fitted])
    delta_tot = np.array([s.delta_ + h.delta_ for s, h in zip(scorers, fitted, strict=True)])
    return Bunch(
        student=student_,
        pseudo_labels=pseudo,
        soft_labels=soft,
        scores=scores,
        classes=classes_arr,
        scorers=scorers,
        heads=fitted,
        epsilon_scores=eps_s,
        epsilon_labels=eps_l,
        epsilon_total=eps_s + eps_l,
        delta_total=delta_tot,
        noise_replayable=replay,
    )
