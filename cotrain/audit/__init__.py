"""Privacy audits of what a client releases: membership inference and ε lower bounds.

Three strengths of evidence, weakest first (each module's docstring states precisely what
its attack measures and against which observation):

- :mod:`cotrain.audit.membership` — single-observation attacks on a (forged) public pool:
  the Yeom gap attack ``1[label == y]`` (AUC = 0.5 + generalisation gap / 2, at most
  0.5 + test error / 2), label noise, confidence, one-model reference calibration;
- :mod:`cotrain.audit.lira` — the likelihood-ratio attack (LiRA, Carlini et al. 2022) with
  reference clients, against the labels the client really releases on the public pool U;
- :mod:`cotrain.audit.canary` — one-run auditing with canaries (Steinke, Nasr & Jagielski
  2023): an empirical lower bound on the record-level ε of a release, at confidence 1 − β,
  under the neighbouring relation the experiment realises (canary absent: add/remove),
  checked against an :class:`EpsilonClaim` of the same relation and δ
  (:mod:`cotrain.audit.claims`); its statistics,
  including the largest ε a design can certify (:func:`max_certifiable_epsilon`), are in
  :mod:`cotrain.audit.canary_bound`.

Beside the attacks, :mod:`cotrain.audit.sensitivity_search` looks for a client's worst
neighbours: :func:`sensitivity_lower_bound` refits the client along its co-training trajectory
with one record replaced and returns an empirical *lower* bound on its sensitivity s* (it can
refute a claimed s*, never certify one).

All attacks report the ROC AUC and the TPR at 0.1 % and 1 % FPR
(:mod:`cotrain.audit.metrics`).

Examples
--------
>>> from cotrain.audit import AuditResult, lira_attack, canary_epsilon_lower_bound
>>> round(canary_epsilon_lower_bound(n_guesses=100, n_correct=100, beta=0.05), 3)
3.493
>>> from cotrain.audit import max_certifiable_epsilon
>>> round(max_certifiable_epsilon(n_canaries=100, n_guesses=100), 3)   # the same: all right
3.493
"""

from cotrain.audit.canary import (
    CanaryAudit,
    audit_from_scores,
    make_canaries,
    one_run_audit,
)
from cotrain.audit.canary_bound import (
    canary_epsilon_lower_bound,
    canary_p_value,
    max_certifiable_epsilon,
)
from cotrain.audit.claims import EpsilonClaim, declares_gaussian
from cotrain.audit.lira import LIRA_MODELS, lira_attack, neighbor_agreement
from cotrain.audit.membership import (
    ATTACKS,
    ClientsAudit,
    audit_clients,
    audit_labels,
    audit_model,
    label_privatizer,
    membership_scores,
)
from cotrain.audit.metrics import (
    LOW_FPRS,
    AuditResult,
    membership_auc,
    membership_metrics,
    tpr_at_fpr,
)
from cotrain.audit.sensitivity_search import (
    SensitivityLowerBound,
    sensitivity_lower_bound,
)

__all__ = [
    "ATTACKS",
    "LIRA_MODELS",
    "LOW_FPRS",
    "AuditResult",
    "CanaryAudit",
    "ClientsAudit",
    "EpsilonClaim",
    "SensitivityLowerBound",
    "audit_clients",
    "audit_from_scores",
    "audit_labels",
    "audit_model",
    "canary_epsilon_lower_bound",
    "canary_p_value",
    "declares_gaussian",
    "label_privatizer",
    "lira_attack",
    "make_canaries",
    "max_certifiable_epsilon",
    "membership_auc",
    "membership_metrics",
    "membership_scores",
    "neighbor_agreement",
    "one_run_audit",
    "sensitivity_lower_bound",
    "tpr_at_fpr",
]


def __dir__() -> list[str]:
    return sorted(__all__)
