"""The offline tokenizer of every language-model learner: byte-level BPE, trained on texts.

When :class:`~learners.LMClassifier` (or its presets) builds a randomly initialised model
from a configuration (GPT-2, Llama, BERT, ...) and no tokenizer is given, it trains this
one on the texts of the first ``fit``: GPT-2's byte-level scheme, whatever the family, so
any text can be encoded and nothing is downloaded. tokenizers and transformers are
imported only when a tokenizer is trained.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedTokenizerBase

__all__ = ["EOS_TOKEN", "train_bpe_tokenizer"]

#: The offline tokenizer's one special token (end of text, unknown and padding; GPT-2's
#: spelling of it).
EOS_TOKEN = "<|endoftext|>"
_N_BYTES = 256


def train_bpe_tokenizer(
    texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2
) -> PreTrainedTokenizerBase:
    """Train a small byte-level BPE tokenizer (GPT-2's scheme) offline, on `texts`.

    The tokenizer has GPT-2's pre-tokenisation (bytes mapped to printable characters,
    splitting on spaces and punctuation) and one special token, ``<|endoftext|>`` (id 0),
    which serves as end-of-text, unknown and padding token. Its vocabulary holds the 256
    byte symbols, the special token, and at most ``vocab_size - 257`` merges learned from
    `texts`, so any text can be encoded, even one with characters never seen in training.

    Parameters
    ----------
    texts : iterable of str
        Training texts.
    vocab_size : int
        Largest vocabulary size (at least 257); use the model's ``config.vocab_size``.
    min_frequency : int, default=2
        Minimum count of a pair of symbols for it to be merged.

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        The tokenizer (``len(tokenizer) <= vocab_size``).

    Examples
    --------
    >>> from learners.lm.tokenizer import train_bpe_tokenizer
    >>> tok = train_bpe_tokenizer(["a good film", "a bad film"] * 5, vocab_size=300)
    >>> tok.pad_token, tok.pad_token_id, len(tok) <= 300
    ('<|endoftext|>', 0, True)
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int | np.integer):
        raise TypeError(f"vocab_size must be an integer, got {vocab_size!r}")
    if vocab_size < _N_BYTES + 1:
        raise ValueError(
            f"vocab_size must be at least {_N_BYTES + 1} for a byte-level BPE tokenizer "
            f"(256 bytes + {EOS_TOKEN}), got {vocab_size}"
        )
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=int(vocab_size),
        min_frequency=min_frequency,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator((str(t) for t in texts), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS_TOKEN,
        eos_token=EOS_TOKEN,
        unk_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
    )
