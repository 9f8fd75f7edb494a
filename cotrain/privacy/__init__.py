"""Privacy for federated co-training: mechanisms, accounting, sensitivity.

Every ε this package reports says what it protects — ``unit="record"``: one private
training record of a client (the default everywhere), or ``unit="label"``: one released
public label (kept for comparison; no guarantee about private data) — and against whom —
``adversary="server"`` for noise drawn at the client, ``"broadcast observers"`` for noise
the server adds — and under which neighbouring relation (:data:`RELATIONS`):
``"add_or_remove"`` (one record added or removed; the headline everywhere) and, where it
differs, ``"replace_one"`` (one record replaced), both printed by the ledger's report. Every
mechanism declares ``neighbors`` (the relation of its ``dp_event``) and
``relation_event(C, n, relation)``. See ``docs/privacy.md``.

Passed as ``FederatedCoTrainer(privacy=...)``, a mechanism acts on each client before
anything leaves it:

* :class:`SubsampleAndAggregate` — record-level DP **by construction, for any learner**:
  teachers on disjoint shards of the client's data, a noisy argmax of their votes (GNMax) or
  randomized response on the winner; with ``threshold``, Confident-GNMax (a site answers only
  its confident examples and abstains on the rest);
* :class:`SecureTeacherVotes` — the same teachers, their vote histograms summed across sites
  under secure aggregation with each site's share of Skellam noise, so the noise is paid once
  for the federation (:class:`SecurePlan`: the public noise plan and its exact ε);
* :class:`DPSGD` — DP-SGD training of a torch client with Opacus; its labels are
  post-processing of a DP model;
* :class:`RandomizedResponse`, :class:`XORMechanism` (DP-FedCT), :class:`GaussianSoftLabels`
  — noise on the labels; record-level only through a sensitivity s* (default: the trivial
  bound, every released label), or label-level with ``unit="label"``.

Every mechanism is an object the client calls at each step of its round (``prepare`` once,
``before_fit``, ``release_round``): the protocol is documented in
:mod:`cotrain.privacy.mechanisms.base`; :func:`as_mechanism` refuses anything else with a
``TypeError``.

GNMax on the server is a consensus, :class:`consensus.NoisyArgmax` (against broadcast
observers only). FedAUX certainty weighting: :class:`CertaintyScorer` and
:func:`fedaux_weights` feed ``consensus.CertaintyWeighted(scores, scorer_epsilon=...,
scorer_delta=...)``, whose one-off cost enters the ledger (the one-round, fully private variant,
FedAUXfdp, is a baseline: :func:`cotrain.baselines.fedaux_one_shot.one_shot_fedaux`).
:func:`epsilon_spent` and :class:`RunningComposition` compose events exactly (a
:class:`PrivacyLedger` does it per client during a run).
:func:`cotrain.audit.sensitivity_lower_bound` searches adversarial neighbours for an
*empirical lower bound* on s*; no function gives s* for a general learner.

The package has four rooms: :mod:`cotrain.privacy.mechanisms` (what a client releases and
its noise), :mod:`cotrain.privacy.accounting` (events, their composition, the sensitivity),
:mod:`cotrain.privacy.ledgers` (who counts the releases and enforces the budget) and
:mod:`cotrain.privacy.fedaux` (FedAUX's DP certainty scorers and softmax head).

Privacy noise is drawn at each client from the operating system's entropy: nobody who knows
the run's ``random_state`` can replay it (``reproducible_noise=True`` is a warned opt-in for
simulations).

Examples
--------
>>> import numpy as np
>>> from cotrain.privacy import RandomizedResponse, epsilon_spent
>>> rr = RandomizedResponse(epsilon=1.0, unit="label")   # one released label, for comparison
>>> noisy = rr.randomize(np.array([0, 1, 2, 1]), 3, np.random.default_rng(0))
>>> noisy.shape
(4,)
>>> 2.99 < epsilon_spent([rr.dp_event(3, 4)] * 3, rr.delta) <= 3.0   # 3 rounds of ε = 1
True
"""

from cotrain.privacy.accounting.composition import RELATIONS, RunningComposition
from cotrain.privacy.accounting.epsilon import (
    basic_composition,
    epsilon_spent,
    gaussian_epsilon,
    gaussian_noise_multiplier,
    is_accounted,
)
from cotrain.privacy.accounting.sensitivity import (
    SensitivityBound,
    analytic_sensitivity_bound,
)
from cotrain.privacy.fedaux import (
    CertaintyScorer,
    DPSoftmaxHead,
    certainty_scores,
    fedaux_features,
    fedaux_sigma,
    fedaux_weights,
)
from cotrain.privacy.ledgers.ledger import PrivacyLedger
from cotrain.privacy.mechanisms.base import (
    ClientRound,
    LabelMechanism,
    RandomizedResponse,
    Release,
    as_mechanism,
)
from cotrain.privacy.mechanisms.dpsgd import DPSGD, dpsgd_epsilon
from cotrain.privacy.mechanisms.secure_plan_rule import SuggestedPlan, suggest_secure_plan
from cotrain.privacy.mechanisms.secure_votes import SecurePlan, SecureTeacherVotes
from cotrain.privacy.mechanisms.shards import teacher_shards
from cotrain.privacy.mechanisms.soft_labels import GaussianSoftLabels
from cotrain.privacy.mechanisms.teacher_counts import teacher_votes
from cotrain.privacy.mechanisms.teachers import SubsampleAndAggregate
from cotrain.privacy.mechanisms.xor import XORMechanism

__all__ = [
    "DPSGD",
    "RELATIONS",
    "CertaintyScorer",
    "ClientRound",
    "DPSoftmaxHead",
    "GaussianSoftLabels",
    "LabelMechanism",
    "PrivacyLedger",
    "RandomizedResponse",
    "Release",
    "RunningComposition",
    "SecurePlan",
    "SecureTeacherVotes",
    "SensitivityBound",
    "SubsampleAndAggregate",
    "SuggestedPlan",
    "XORMechanism",
    "analytic_sensitivity_bound",
    "as_mechanism",
    "basic_composition",
    "certainty_scores",
    "dpsgd_epsilon",
    "epsilon_spent",
    "fedaux_features",
    "fedaux_sigma",
    "fedaux_weights",
    "gaussian_epsilon",
    "gaussian_noise_multiplier",
    "is_accounted",
    "suggest_secure_plan",
    "teacher_shards",
    "teacher_votes",
]


def __dir__() -> list[str]:
    return sorted(__all__)
