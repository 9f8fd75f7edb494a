"""Baselines to compare federated co-training against, with the same per-round records.

- :class:`FedAvg` and :class:`DPFedAvg`: parameter averaging of torch learners (McMahan
  et al. 2017; user-level DP-FedAvg, McMahan et al. 2018);
- :class:`PATE`: teachers vote on the public pool with GNMax noise, one student learns;
- :class:`DistributedDistillation`: clients share soft labels and train on their mean
  (a :class:`~cotrain.FederatedCoTrainer` with ``share="soft"`` and ``consensus="mean"``);
- :class:`LocalOnly` and :class:`Centralized`: no communication, and all data pooled;
- :class:`FedDF`, :class:`FedDS` and :class:`FedAUX`: FedAvg plus server-side ensemble
  distillation on the public pool (plain mean; entropy-weighted with rotation
  self-supervision; DP certainty-weighted with a pretrained initialisation).

Every baseline is a scikit-learn-style classifier whose ``history_`` is a
:class:`~cotrain.History` of :class:`~cotrain.RoundRecord` with exact byte counts, so
that its run tabulates and plots beside a FedCT run. The federated ones run their rounds
on the library's one :class:`~cotrain.federation.loop.RoundLoop` (:mod:`.rounds`), so they
take the trainer's ``callbacks`` (e.g. :mod:`cotrain.tracking` loggers), ``verbose``
(a progress bar, a line per round) and, where their state allows, ``checkpoint_dir`` with
``fit(resume=True)`` (:mod:`.resume`). Nothing here imports torch or dp-accounting at
import time.

Examples
--------
>>> from sklearn.naive_bayes import GaussianNB
>>> from cotrain.baselines import DistributedDistillation
>>> dd = DistributedDistillation([GaussianNB()] * 3, rounds=5)
>>> dd.share, dd.consensus
('soft', 'mean')
"""

from __future__ import annotations

from cotrain.baselines.aggregation import average_weights
from cotrain.baselines.distillation import DistributedDistillation
from cotrain.baselines.ensemble_distillation import FedDF, FedDS
from cotrain.baselines.fedaux_distillation import FedAUX
from cotrain.baselines.fedavg import DPFedAvg, FedAvg
from cotrain.baselines.pate import PATE, gnmax
from cotrain.baselines.reference import Centralized, LocalOnly

__all__ = [
    "PATE",
    "Centralized",
    "DPFedAvg",
    "DistributedDistillation",
    "FedAUX",
    "FedAvg",
    "FedDF",
    "FedDS",
    "LocalOnly",
    "average_weights",
    "gnmax",
]


def __dir__() -> list[str]:
    return sorted(__all__)
