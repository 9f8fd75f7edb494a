"""Label privacy for federated co-training: mechanisms, sensitivity, accounting.

Passed as ``FederatedCoTrainer(privacy=...)``, a mechanism randomises each client's labels on
the public pool before the message is encoded, so only noisy labels leave the client:

* :class:`RandomizedResponse` — K-ary randomized response on hard labels;
* :class:`XORMechanism` — DP-FedCT's XOR of one-hot bit matrices with Bernoulli noise
  calibrated to the sensitivity s*;
* :class:`GaussianSoftLabels` — Gaussian noise on soft labels.

GNMax (PATE: noise on the server's vote counts) is a consensus, :class:`consensus.NoisyArgmax`.
FedAUX certainty weighting: :class:`CertaintyScorer` (a DP logistic scorer per client, C =
1/(λN)) and :func:`fedaux_weights` feed ``consensus.CertaintyWeighted``; :func:`one_shot_fedaux`
is the one-round, fully private variant (FedAUXfdp).
:func:`estimate_sensitivity` / :func:`analytic_sensitivity_bound` give s*;
:func:`epsilon_spent` composes rounds into a total ε (a :class:`PrivacyLedger` does it per
client during a run) (dp-accounting is imported lazily; without
it, basic composition is used and a warning says so).

Examples
--------
>>> import numpy as np
>>> from cotrain.privacy import RandomizedResponse, epsilon_spent
>>> rr = RandomizedResponse(epsilon=1.0, sensitivity=1)
>>> noisy = rr.randomize(np.array([0, 1, 2, 1]), 3, np.random.default_rng(0))
>>> noisy.shape
(4,)
>>> 2.99 < epsilon_spent([rr.dp_event(3, 4)] * 3, rr.delta) <= 3.0   # 3 rounds of ε = 1
True
"""

from cotrain.privacy.accounting import (
    basic_composition,
    epsilon_spent,
    gaussian_epsilon,
    gaussian_noise_multiplier,
    is_accounted,
)
from cotrain.privacy.fedaux import (
    CertaintyScorer,
    DPSoftmaxHead,
    certainty_scores,
    fedaux_features,
    fedaux_sigma,
    fedaux_weights,
    one_shot_fedaux,
)
from cotrain.privacy.ledger import PrivacyLedger
from cotrain.privacy.mechanisms import (
    GaussianSoftLabels,
    LabelMechanism,
    RandomizedResponse,
    XORMechanism,
)
from cotrain.privacy.sensitivity import analytic_sensitivity_bound, estimate_sensitivity

__all__ = [
    "CertaintyScorer",
    "DPSoftmaxHead",
    "GaussianSoftLabels",
    "LabelMechanism",
    "PrivacyLedger",
    "RandomizedResponse",
    "XORMechanism",
    "analytic_sensitivity_bound",
    "basic_composition",
    "certainty_scores",
    "epsilon_spent",
    "estimate_sensitivity",
    "fedaux_features",
    "fedaux_sigma",
    "fedaux_weights",
    "gaussian_epsilon",
    "gaussian_noise_multiplier",
    "is_accounted",
    "one_shot_fedaux",
]
