"""Baselines to compare federated co-training against, with the same per-round records.

- :class:`FedAvg` and :class:`DPFedAvg`: parameter averaging of torch learners (McMahan
  et al. 2017; user-level DP-FedAvg, McMahan et al. 2018);
- :class:`PATE`: teachers vote on the public pool with GNMax noise, one student learns;
- :func:`DistributedDistillation`: clients share soft labels and train on their mean
  (a configuration of :class:`~cotrain.FederatedCoTrainer`);
- :class:`LocalOnly` and :class:`Centralised`: no communication, and all data pooled.

Every baseline is a scikit-learn-style classifier whose ``history_`` is a
:class:`~cotrain.History` of :class:`~cotrain.RoundRecord` with exact byte counts, so
that its run tabulates and plots beside a FedCT run. Nothing here imports torch or
dp-accounting at import time.

Examples
--------
>>> from sklearn.naive_bayes import GaussianNB
>>> from cotrain.baselines import DistributedDistillation
>>> dd = DistributedDistillation([GaussianNB()] * 3, rounds=5)
>>> dd.share, dd.consensus
('soft', 'mean')
"""

from __future__ import annotations

from typing import Any

from cotrain.baselines.fedavg import DPFedAvg, FedAvg, average_weights
from cotrain.baselines.pate import PATE, gnmax
from cotrain.baselines.reference import Centralised, LocalOnly
from cotrain.trainer import FederatedCoTrainer

__all__ = [
    "PATE",
    "Centralised",
    "DPFedAvg",
    "DistributedDistillation",
    "FedAvg",
    "LocalOnly",
    "average_weights",
    "gnmax",
]


def DistributedDistillation(
    estimators: list[Any], rounds: int = 20, **kwargs: Any
) -> FederatedCoTrainer:
    """Distributed distillation (DD): co-training with soft labels and their mean.

    Each round every client uploads its class probabilities on the public pool, the
    server averages them (:class:`consensus.SoftMean`), and every client trains on its
    private data plus the public pool with the averaged soft labels as targets
    (learners without soft-target support train on weighted rows, see
    :class:`learners.ClassAlignedClassifier`). The clients really train on the average:
    the reference implementation only logged it, which made its "DD" local training.

    This is exactly ``FederatedCoTrainer(estimators, consensus="mean", share="soft",
    rounds=rounds, **kwargs)``; it is not a separate implementation.

    Parameters
    ----------
    estimators : list of classifiers
        One classifier with ``predict_proba`` per client.
    rounds : int, default=20
        Communication rounds.
    **kwargs
        Any other :class:`~cotrain.FederatedCoTrainer` parameter (``participation``,
        ``soft_dtype``, ``random_state``, ...), except ``consensus`` and ``share``.

    Returns
    -------
    FederatedCoTrainer
        Unfitted, configured for DD.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.naive_bayes import GaussianNB
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> dd = DistributedDistillation([GaussianNB()] * 2, rounds=2, random_state=0)
    >>> dd = dd.fit([X[:50], X[50:100]], [y[:50], y[50:100]], X_public=X[100:400])
    >>> dd.history_[0].bytes_up  # 2 clients x (10-byte header + 300 x 2 float32)
    4820
    """
    for fixed in ("consensus", "share"):
        if fixed in kwargs:
            raise TypeError(
                f"DistributedDistillation fixes {fixed}= (consensus='mean', share='soft'); "
                "use FederatedCoTrainer for other settings"
            )
    return FederatedCoTrainer(estimators, consensus="mean", share="soft", rounds=rounds, **kwargs)
