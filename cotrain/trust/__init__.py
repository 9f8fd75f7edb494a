"""How much a client trusts the pseudo-labelled pool, and how it guards itself against it.

- :mod:`cotrain.trust.protocol` — the :class:`Trust` protocol of a *model* trust (it fits a
  site's models, labels the pool and builds the site's predictor) and its :class:`TrustRound`;
- :mod:`cotrain.trust.cross_fit` — :class:`CrossFitTrust`, the default: cross-fitted labels
  and a predictor that falls back toward the local model;
- :mod:`cotrain.trust.holdout` — :class:`HoldoutTrust`: one held-out check, one training a
  round (for learners whose every fit is a training);
- :mod:`cotrain.trust.pool_halves` — :class:`PoolHalvesTrust`: two continuing models, each
  labelling the half of the pool it never trained on;
- :mod:`cotrain.trust.weights` — *weight* trusts: :class:`FixedTrust` and
  :class:`PseudoLabelTrust` (the pool's sample weight chosen by cross-validation);
- :mod:`cotrain.trust.pool` — the pseudo-labelled pool P and the training set D ∪ P;
- :mod:`cotrain.trust.parameter` — what ``trust=...`` gives each client
  (:func:`get_trust`, :func:`client_trust`).

This package sits below :mod:`cotrain.federation`: it reads :mod:`cotrain.privacy` (a
client's mechanism decides which trusts it may use) and never the federation.

Examples
--------
>>> from cotrain.trust import MODEL_TRUSTS, Trust, get_trust
>>> isinstance(get_trust("auto", random_state=0), Trust), isinstance(get_trust(None), Trust)
(True, False)
>>> all(isinstance(t(), Trust) for t in MODEL_TRUSTS)
True
"""

from cotrain.trust.cross_fit import CrossFitTrust, pick_alpha
from cotrain.trust.holdout import HoldoutTrust
from cotrain.trust.parameter import DEFAULT_TRUST, MODEL_TRUSTS, client_trust, get_trust
from cotrain.trust.pool import pseudo_labeled_rows, with_pseudo_labels
from cotrain.trust.pool_halves import PoolHalvesTrust
from cotrain.trust.protocol import Trust, TrustRound
from cotrain.trust.weights import (
    FixedTrust,
    PseudoLabelTrust,
    TrustChoice,
    pick_weight,
    weighted_training_set,
)

__all__ = [
    "DEFAULT_TRUST",
    "MODEL_TRUSTS",
    "CrossFitTrust",
    "FixedTrust",
    "HoldoutTrust",
    "PoolHalvesTrust",
    "PseudoLabelTrust",
    "Trust",
    "TrustChoice",
    "TrustRound",
    "client_trust",
    "get_trust",
    "pick_alpha",
    "pick_weight",
    "pseudo_labeled_rows",
    "weighted_training_set",
    "with_pseudo_labels",
]
