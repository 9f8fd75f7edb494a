"""Hostile and faulty clients, for testing that one bad site never stops a federation.

:mod:`~cotrain.robustness.hostile` wraps any classifier so that it lies
(:class:`HostileClassifier`), crashes (:class:`CrashingClassifier`) or hangs
(:class:`HangingClassifier`); label corruption of a client's private rows is
:func:`cotrain.partition.label_noise` and :func:`cotrain.partition.make_byzantine`.

Examples
--------
>>> from sklearn.tree import DecisionTreeClassifier
>>> from cotrain.robustness import HostileClassifier
>>> HostileClassifier(DecisionTreeClassifier(), behavior="constant")
HostileClassifier(behavior='constant', estimator=DecisionTreeClassifier())
"""

from cotrain.robustness.hostile import (
    BEHAVIOURS,
    CrashingClassifier,
    FitCounter,
    HangingClassifier,
    HostileClassifier,
    make_hostile,
)

__all__ = [
    "BEHAVIOURS",
    "CrashingClassifier",
    "FitCounter",
    "HangingClassifier",
    "HostileClassifier",
    "make_hostile",
]
