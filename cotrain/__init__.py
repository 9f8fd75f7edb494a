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

from cotrain import partition
from cotrain.client import Client
from cotrain.history import History, RoundRecord
from cotrain.trainer import FederatedCoTrainer

__all__ = ["Client", "FederatedCoTrainer", "History", "RoundRecord", "partition"]
__version__ = "0.1.0"
