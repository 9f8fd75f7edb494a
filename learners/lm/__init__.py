"""Language-model learners: a pretrained model's sequence-classification head on raw text.

- :class:`LMClassifier` fine-tunes any causal or encoder language model (GPT-2, Llama, BERT,
  ...; optionally LoRA) loaded from a local directory (:mod:`learners.lm.classifier`);
- :class:`GPT2Classifier` is its GPT-2 preset (:mod:`learners.lm.gpt2`);
- :mod:`learners.lm.tokenizer` trains a byte-level BPE tokenizer offline for any of them;
- :func:`packaged_model_path` finds pretrained weights installed from the package index
  (:mod:`learners.lm.weights`).

The rest is how the classifier works inside: text encoding and batching
(:mod:`~learners.lm.encoding`), model families (:mod:`~learners.lm.families`), loading
(:mod:`~learners.lm.loading`) and saving (:mod:`~learners.lm.persistence`,
:mod:`~learners.lm.state`). torch and transformers are imported only when a model is built,
so importing this package is cheap.
"""

from .classifier import LMClassifier
from .gpt2 import GPT2Classifier
from .tokenizer import train_bpe_tokenizer
from .weights import PACKAGED_MODELS, packaged_model_path, packaged_models

__all__ = [
    "PACKAGED_MODELS",
    "GPT2Classifier",
    "LMClassifier",
    "packaged_model_path",
    "packaged_models",
    "train_bpe_tokenizer",
]


def __dir__() -> list[str]:
    return sorted(__all__)
