"""Privacy accounting: the ε of a list of privacy events, and the sensitivity it needs.

- :mod:`~cotrain.privacy.accounting.epsilon` — the events mechanisms report
  (:func:`rr_event`, :func:`gaussian_event`, ...) and the ε they spend
  (:func:`epsilon_spent`, :func:`gaussian_epsilon`, :func:`basic_composition`);
- :mod:`~cotrain.privacy.accounting.composition` — :class:`RunningComposition`, the exact,
  incremental composition under a neighbouring relation (:data:`RELATIONS`); its exact
  privacy-loss laws are a private helper module of this package;
- :mod:`~cotrain.privacy.accounting.sensitivity` — the sensitivity s* a label mechanism's
  record-level ε rests on (:class:`SensitivityBound`, :func:`analytic_sensitivity_bound`).
"""

from cotrain.privacy.accounting.composition import (
    RELATIONS,
    RunningComposition,
    check_relation,
    pld_interval,
)
from cotrain.privacy.accounting.epsilon import (
    GaussianEvent,
    NoOpEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    basic_composition,
    epsilon_spent,
    gaussian_epsilon,
    gaussian_event,
    gaussian_noise_multiplier,
    is_accounted,
    noop_event,
    rr_epsilon,
    rr_event,
    self_composed,
)
from cotrain.privacy.accounting.sensitivity import (
    SensitivityBound,
    analytic_sensitivity_bound,
)

__all__ = [
    "RELATIONS",
    "GaussianEvent",
    "NoOpEvent",
    "RandomizedResponseEvent",
    "RunningComposition",
    "SelfComposedEvent",
    "SensitivityBound",
    "analytic_sensitivity_bound",
    "basic_composition",
    "check_relation",
    "epsilon_spent",
    "gaussian_epsilon",
    "gaussian_event",
    "gaussian_noise_multiplier",
    "is_accounted",
    "noop_event",
    "pld_interval",
    "rr_epsilon",
    "rr_event",
    "self_composed",
]


def __dir__() -> list[str]:
    return sorted(__all__)
