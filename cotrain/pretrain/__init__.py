"""Self-supervised pretraining on the public pool, at the server.

FedAUX's preparation phase P1 and FedDS's self-supervised loss as one reusable step: a
feature extractor is fitted on the unlabelled public pool U — **public data only**, no
client's data is seen and no privacy is spent — and clients start from it:

- images: :func:`pretrain_images` (SimCLR's NT-Xent with augmentations for small images,
  FedDS's 4-way rotation prediction, or both) fits a :class:`learners.SmallCNN` body;
- tabular rows: :func:`pretrain_tabular` (SCARF's feature-corruption contrastive loss) fits
  a :class:`learners.MLP` body;
- text: :func:`pretrain_text` continues next-token training of a GPT-2 (any causal LM) on
  U and saves a folder that ``GPT2Classifier(model=folder)`` loads.

A :class:`PretrainedExtractor` initialises neural clients,
``TorchClassifier(module=ext.module_factory())`` (the same architecture as a randomly
initialised ``TorchClassifier(SmallCNN, ...)``; every clone gets the same pretrained body),
and is an input transform for any other learner, :class:`PretrainedFeatures`.

torch and transformers are imported only when something is pretrained or built.

Examples
--------
>>> import pytest
>>> _ = pytest.importorskip("torch")
>>> from sklearn.datasets import load_digits
>>> from sklearn.linear_model import LogisticRegression
>>> from sklearn.pipeline import make_pipeline
>>> from cotrain.pretrain import PretrainedFeatures, pretrain_images
>>> X, y = load_digits(return_X_y=True)
>>> U = X[:300] / 16                            # the public pool, unlabelled
>>> ext = pretrain_images(U, epochs=2, width=4, random_state=0)
>>> neural = ext.classifier(max_epochs=2, random_state=0)         # a neural client
>>> other = make_pipeline(PretrainedFeatures(ext), LogisticRegression(max_iter=300))
>>> neural.fit(X[300:400] / 16, y[300:400]).predict(X[:2] / 16).shape
(2,)
"""

from __future__ import annotations

from cotrain.pretrain.extractor import ModuleFactory, PretrainedExtractor
from cotrain.pretrain.features import PretrainedFeatures
from cotrain.pretrain.images import IMAGE_METHODS, pretrain_images
from cotrain.pretrain.tabular import pretrain_tabular
from cotrain.pretrain.text import PretrainedLanguageModel, pretrain_text

__all__ = [
    "IMAGE_METHODS",
    "ModuleFactory",
    "PretrainedExtractor",
    "PretrainedFeatures",
    "PretrainedLanguageModel",
    "pretrain_images",
    "pretrain_tabular",
    "pretrain_text",
]


def __dir__() -> list[str]:
    return sorted(__all__)
