"""Texts to token-id batches for :class:`learners.LMClassifier`, tokenised once.

A co-training client sees the same texts every round: its private data and the public
pool U. :class:`TokenCache` tokenises each distinct text once (truncated to the
classifier's ``max_length`` on its ``truncation_side``) and keeps the token ids; batches
are then padded only to their own longest text (dynamic padding). :func:`length_order`
sorts texts by length for prediction, so that a batch holds texts of similar length.

torch is imported only by :func:`pad_batch`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["TokenCache", "as_texts", "batches", "length_order", "pad_batch"]


def as_texts(X: Any) -> list[str]:
    """X (list, tuple, 1-D array, Series, or one-column 2-D array of strings) as a list.

    Parameters
    ----------
    X : sequence of str
        Texts.

    Returns
    -------
    list of str

    Raises
    ------
    TypeError
        If `X` is a single string or holds something other than strings.
    ValueError
        If `X` is not one-dimensional.

    Examples
    --------
    >>> import numpy as np
    >>> as_texts(np.array([["a good film"], ["a bad one"]], dtype=object))
    ['a good film', 'a bad one']
    """
    if isinstance(X, str | bytes):
        raise TypeError("X must be a sequence of texts, got a single string")
    if hasattr(X, "iloc") and getattr(X, "ndim", 1) == 2:  # one-column DataFrame
        X = X.to_numpy()
    arr = np.asarray(X, dtype=object)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"X must be a 1-D sequence of texts, got shape {arr.shape}")
    texts = arr.tolist()
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"X must hold strings; X[{i}] is {type(t).__name__}")
    return texts


def batches(n: int, size: int) -> Iterator[slice]:
    """Consecutive slices of at most `size` items covering ``range(n)``.

    Examples
    --------
    >>> list(batches(5, 2))
    [slice(0, 2, None), slice(2, 4, None), slice(4, 5, None)]
    """
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


class TokenCache:
    """Token ids of texts, each distinct text tokenised once per setting.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
        The tokenizer (its ``truncation_side`` is set at every call).
    max_entries : int, default=200_000
        Texts kept; the cache is emptied when it would hold more.

    Examples
    --------
    >>> from learners.lm.tokenizer import train_bpe_tokenizer
    >>> tok = train_bpe_tokenizer(["a good film", "a bad film"] * 5, vocab_size=300)
    >>> cache = TokenCache(tok)
    >>> ids = cache.ids(["a good film", "a good film"], max_length=2, truncation_side="left")
    >>> len(ids), ids[0] == ids[1], len(ids[0]), len(cache)
    (2, True, 2, 1)
    """

    def __init__(self, tokenizer: Any, max_entries: int = 200_000) -> None:
        self.tokenizer = tokenizer
        self.max_entries = max_entries
        self._settings: tuple[int, str] | None = None
        self._ids: dict[str, list[int]] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def ids(self, texts: Sequence[str], max_length: int, truncation_side: str) -> list[list[int]]:
        """The token ids of every text (special tokens included), truncated.

        Parameters
        ----------
        texts : sequence of str
            Texts; an empty one is read as the tokenizer's end-of-text token where it has
            one (a decoder needs at least one token to classify).
        max_length : int
            Most tokens kept per text.
        truncation_side : {"left", "right"}
            Which end of a longer text is cut.

        Returns
        -------
        list of list of int
            One list of ids per text, in order.
        """
        settings = (int(max_length), str(truncation_side))
        if settings != self._settings:
            self._ids, self._settings = {}, settings
        missing = list(dict.fromkeys(t for t in texts if t not in self._ids))
        if missing:
            if len(self._ids) + len(missing) > self.max_entries:
                self._ids = {}
            tok = self.tokenizer
            tok.truncation_side = truncation_side
            eos = tok.eos_token
            inputs = [t if t or eos is None else eos for t in missing]
            encoded = tok(inputs, truncation=True, max_length=settings[0], padding=False)
            self._ids.update(zip(missing, encoded["input_ids"], strict=True))
        return [self._ids[t] for t in texts]


def length_order(ids: Sequence[Sequence[int]]) -> NDArray[np.intp]:
    """Indices that sort token-id lists by length (stable), for length-bucketed batches.

    Examples
    --------
    >>> length_order([[1, 2, 3], [1], [1, 2]]).tolist()
    [1, 2, 0]
    """
    return np.argsort(
        np.fromiter((len(i) for i in ids), dtype=np.intp, count=len(ids)), kind="stable"
    )


def pad_batch(ids: Sequence[Sequence[int]], pad_id: int, device: Any) -> dict[str, Any]:
    """Right-pad token-id lists to the longest of them, as torch tensors.

    Parameters
    ----------
    ids : sequence of sequence of int
        One list of token ids per text (at least one non-empty).
    pad_id : int
        The padding token's id.
    device : str or torch.device
        Where the tensors go.

    Returns
    -------
    dict
        ``input_ids`` and ``attention_mask`` (int64, shape ``(len(ids), longest)``).

    Examples
    --------
    >>> batch = pad_batch([[5, 6, 7], [8]], pad_id=0, device="cpu")
    >>> batch["input_ids"].tolist(), batch["attention_mask"].tolist()
    ([[5, 6, 7], [8, 0, 0]], [[1, 1, 1], [1, 0, 0]])
    """
    import torch

    width = max(1, max((len(i) for i in ids), default=1))
    input_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for row, seq in enumerate(ids):
        input_ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    return {
        "input_ids": torch.from_numpy(input_ids).to(device),
        "attention_mask": torch.from_numpy(mask).to(device),
    }
