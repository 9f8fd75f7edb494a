"""FedAUX's DP mechanisms: certainty scorers and FedAUXfdp's softmax head.

A client's *certainty scorer* says how much a public example looks like the client's private
data (FedAUX, Sattler et al. 2021, eq. 4-6). It is an L2-regularised
logistic regression that separates the client's private features (label +1) from a public
negative set ``D⁻`` (label -1), released with Gaussian noise so that the released weights are
(ε, δ)-differentially private with respect to the private data. Its scores
``s_i(x) = sigmoid(<w̃_i, h̃(x)>) + 1e-8`` weight client ``i``'s votes in
:class:`consensus.CertaintyWeighted`.

Objective and calibration (``N = |D_i| + |D⁻|``, features ``‖h̃(x)‖ ≤ 1``)::

    J(w) = (1/N) Σ_x log(1 + exp(-t_x <w, h̃(x)>)) + (λ/2) ‖w‖²
    Δ₂ = 2 / (λ N)                                  (Chaudhuri et al. 2011; FedAUX Thm. 1)
    σ² = 8 ln(1.25/δ) / (ε² λ² N²)                  (Gaussian mechanism, 0 < ε < 1)

In scikit-learn terms ``C = 1/(λN)``. The official FedAUX code passes ``C = 1/λ``: the model it
fits is regularised N times too weakly, so its sensitivity is ``2/λ`` while the noise is
calibrated for ``2/(λN)`` -- N times too little noise. This module uses ``C = 1/(λN)``.

The one-shot mode (:func:`cotrain.baselines.fedaux_one_shot.one_shot_fedaux`, after FedAUXfdp,
Hoech et al. 2022; a baseline round) adds a DP multinomial logistic head per client
(:class:`DPSoftmaxHead`, sensitivity ``2√C/(λ|D|)``); the clients' DP soft labels on the
public pool are averaged with their DP certainty scores and a student is trained on the result.
Privacy composes basically: ``ε = ε_scores + ε_labels``, ``δ = δ_scores + δ_labels`` per client.

The noise is drawn from the operating system's entropy: ``random_state`` never seeds it unless
the caller opts into ``reproducible_noise=True`` (simulations only; warns), since whoever knows
the seed could replay the noise and recover the exact non-private weights
(:mod:`cotrain.privacy.fedaux.noise`).

Examples
--------
>>> import numpy as np
>>> from cotrain.privacy.fedaux import CertaintyScorer
>>> rng = np.random.default_rng(0)
>>> X_private = rng.normal(loc=2.0, size=(200, 2))
>>> X_negative = rng.normal(size=(400, 2))
>>> scorer = CertaintyScorer(lam=0.1, dp=False).fit(X_private, X_negative)
>>> s = scorer.certainty(np.array([[2.0, 2.0], [-2.0, -2.0]]))
>>> bool(s[0] > s[1])
True
"""

from cotrain.privacy.fedaux.head import DPSoftmaxHead
from cotrain.privacy.fedaux.scorer import (
    CALIBRATIONS,
    SCORE_EPS,
    CertaintyScorer,
    certainty_scores,
    check_privacy,
    fedaux_features,
    fedaux_sigma,
    fedaux_weights,
)

__all__ = [
    "CALIBRATIONS",
    "SCORE_EPS",
    "CertaintyScorer",
    "DPSoftmaxHead",
    "certainty_scores",
    "check_privacy",
    "fedaux_features",
    "fedaux_sigma",
    "fedaux_weights",
]
