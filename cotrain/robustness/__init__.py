"""Hostile and faulty clients, and label corruption, for robustness experiments.

:mod:`~cotrain.robustness.hostile` wraps any classifier so that it lies
(:class:`HostileClassifier`), crashes (:class:`CrashingClassifier`) or hangs
(:class:`HangingClassifier`), for testing that one bad site never stops a federation;
:mod:`~cotrain.robustness.corruption` corrupts a client's private labels instead
(:func:`label_noise`, :func:`make_byzantine`; also importable from :mod:`cotrain.partition`).

Examples
--------
>>> from sklearn.tree import DecisionTreeClassifier
>>> from cotrain.robustness import HostileClassifier
>>> HostileClassifier(DecisionTreeClassifier(), behavior="constant")
HostileClassifier(behavior='constant', estimator=DecisionTreeClassifier())
"""

from cotrain.robustness.corruption import BYZANTINE_KINDS, label_noise, make_byzantine
from cotrain.robustness.hostile import (
    BEHAVIORS,
    CrashingClassifier,
    FitCounter,
    HangingClassifier,
    HostileClassifier,
    make_hostile,
)

__all__ = [
    "BEHAVIORS",
    "BYZANTINE_KINDS",
    "CrashingClassifier",
    "FitCounter",
    "HangingClassifier",
    "HostileClassifier",
    "label_noise",
    "make_byzantine",
    "make_hostile",
]


def __dir__() -> list[str]:
    return sorted(__all__)
