"""Adapters that make learners behave under co-training.

- :func:`align_proba` puts a learner's probability columns into the global class order;
- :func:`expand_soft_targets` turns soft targets into weighted hard-labelled rows;
- :class:`ClassAlignedClassifier` wraps any classifier so that it trains on clients that lack
  classes (or hold one), takes soft targets, continues training across rounds, and always
  answers in the global label space;
- :class:`XGBoostClassifier` and :class:`RuleFitClassifier` adapt xgboost and imodels' RuleFit.

xgboost and imodels are imported only when a model is fitted, so ``import learners`` is fast
and works without them.

Examples
--------
>>> import numpy as np
>>> from sklearn.tree import DecisionTreeClassifier
>>> from learners import ClassAlignedClassifier
>>> clf = ClassAlignedClassifier(DecisionTreeClassifier(), classes=["a", "b", "c"])
>>> clf.fit(np.array([[0.0], [1.0]]), ["a", "c"]).predict_proba(np.array([[1.0]]))
array([[0., 0., 1.]])
"""

from ._aligned import ClassAlignedClassifier
from ._alignment import align_proba
from ._soft_targets import expand_soft_targets
from .rulefit import RuleFitClassifier
from .xgboost import XGBoostClassifier

__all__ = [
    "ClassAlignedClassifier",
    "RuleFitClassifier",
    "XGBoostClassifier",
    "align_proba",
    "expand_soft_targets",
]
