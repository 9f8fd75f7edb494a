"""cotrain: federated co-training for any scikit-learn-style learner.

Clients keep their private data and their own model; they share only labels
(hard, or soft probabilities) on a public unlabeled pool. A server forms a
consensus and every client trains on its own data plus the pseudo-labeled pool,
round after round.

Examples
--------
>>> from sklearn.tree import DecisionTreeClassifier
>>> from cotrain import FederatedCoTrainer, partition
>>> trainer = FederatedCoTrainer([DecisionTreeClassifier()] * 3, rounds=5)
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Client", "FederatedCoTrainer", "History", "RoundRecord", "partition"]
__version__ = "0.1.0"

#: public name -> module holding it; imported on first use (PEP 562), so that importing a
#: light submodule (e.g. a Flower site's relay ClientApp) does not import scikit-learn
_LAZY = {
    "Client": "cotrain.federation.client",
    "FederatedCoTrainer": "cotrain.trainer",
    "History": "cotrain.history",
    "RoundRecord": "cotrain.history",
    "partition": "cotrain.partition",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'cotrain' has no attribute {name!r}")
    module = importlib.import_module(_LAZY[name])
    value = module if name == "partition" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])
