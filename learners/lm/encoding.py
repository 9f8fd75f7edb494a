"""Texts to token-id batches for :class:`learners.LMClassifier`, tokenised once.

A co-training client sees the same texts every round: its private data and the public
pool U. :class:`TokenCache` tokenises each distinct text once (truncated to the
classifier's ``max_length`` on its ``truncation_side``) and keeps the token ids; batches
are then padded only to their own longest text (dynamic padding). :func:`length_order`
sorts texts by length for prediction, so that a batch holds texts of similar length.

A text longer than ``max_length`` can instead be read whole (``long_texts="windows"``):
:func:`windows` cuts its token ids into overlapping windows, each framed by the special
tokens the tokenizer adds (:func:`special_affixes`: BERT's ``[CLS]`` ... ``[SEP]``,
Llama's ``<s>``, none for GPT-2), :func:`window_rows` lays the windows of all texts out as
model inputs, and :func:`pool_windows` averages each text's window probabilities.

torch is imported only by :func:`pad_batch`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "TokenCache",
    "as_texts",
    "batches",
    "length_order",
    "pad_batch",
    "pool_windows",
    "special_affixes",
    "window_rows",
    "window_starts",
    "windows",
]


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


def window_starts(
    n_tokens: int, width: int, stride: int, max_windows: int, truncation_side: str = "left"
) -> list[int]:
    """Where the windows of `width` tokens over a text of `n_tokens` tokens start.

    Windows start every `stride` tokens from the first, and the last one ends at the text's
    end (so it overlaps its predecessor more when `stride` does not divide the rest). When
    more than `max_windows` would be needed, `max_windows` windows are spread evenly from
    the first to the last (rounded starts; the text between them may then be skipped),
    and a single window is the one `truncation_side` keeps: the last (``"left"``, the text's
    left end is cut) or the first (``"right"``).

    Parameters
    ----------
    n_tokens : int
        Tokens of the text (special tokens excluded).
    width : int
        Text tokens per window (at least 1).
    stride : int
        Tokens between consecutive window starts, from 1 to `width`.
    max_windows : int
        Most windows (at least 1).
    truncation_side : {"left", "right"}, default="left"
        Which single window is kept when ``max_windows=1``.

    Returns
    -------
    list of int
        Increasing starts; ``[0]`` when the text fits one window.

    Raises
    ------
    ValueError
        If `width`, `stride` or `max_windows` is out of range.

    Examples
    --------
    >>> window_starts(10, width=4, stride=2, max_windows=8)
    [0, 2, 4, 6]
    >>> window_starts(11, width=4, stride=2, max_windows=8)  # the last ends at token 11
    [0, 2, 4, 6, 7]
    >>> window_starts(11, width=4, stride=2, max_windows=3)  # 3 spread over 0 .. 7
    [0, 4, 7]
    >>> window_starts(11, 4, 2, 1), window_starts(11, 4, 2, 1, "right"), window_starts(3, 4, 2, 8)
    ([7], [0], [0])
    """
    if width < 1:
        raise ValueError(f"width must be at least 1 token, got {width}")
    if not 1 <= stride <= width:
        raise ValueError(f"stride must be from 1 to width={width}, got {stride}")
    if max_windows < 1:
        raise ValueError(f"max_windows must be at least 1, got {max_windows}")
    last = n_tokens - width
    if last <= 0:
        return [0]
    starts = [*range(0, last, stride), last]
    if len(starts) <= max_windows:
        return starts
    if max_windows == 1:
        return [last] if truncation_side == "left" else [0]
    m = max_windows - 1
    return [(i * last + m // 2) // m for i in range(max_windows)]  # rounded i * last / m


def windows(
    ids: Sequence[int],
    max_tokens: int,
    stride: int,
    max_windows: int,
    prefix: Sequence[int] = (),
    suffix: Sequence[int] = (),
    truncation_side: str = "left",
) -> list[list[int]]:
    """Overlapping windows of a text's token ids, each framed by the special tokens.

    Every window holds at most `max_tokens` ids: `prefix`, then up to
    ``max_tokens - len(prefix) - len(suffix)`` consecutive text tokens (starts from
    :func:`window_starts`), then `suffix`. A text that fits gives one window, exactly the
    ids the tokenizer gives it untruncated.

    Parameters
    ----------
    ids : sequence of int
        The text's token ids without special tokens.
    max_tokens : int
        Most ids per window, special tokens included.
    stride, max_windows, truncation_side
        As in :func:`window_starts`.
    prefix, suffix : sequence of int, default=()
        The special tokens the tokenizer puts before and after a text (see
        :func:`special_affixes`).

    Returns
    -------
    list of list of int
        The windows, in the text's order.

    Raises
    ------
    ValueError
        If `max_tokens` leaves no room for a text token, or as :func:`window_starts`.

    Examples
    --------
    >>> windows(list(range(10)), max_tokens=4, stride=2, max_windows=8)
    [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7], [6, 7, 8, 9]]

    BERT-like framing: every window starts with [CLS] (101) and ends with [SEP] (102):

    >>> windows([1, 2, 3, 4, 5, 6, 7], 5, 2, 8, prefix=[101], suffix=[102])
    [[101, 1, 2, 3, 102], [101, 3, 4, 5, 102], [101, 5, 6, 7, 102]]
    >>> windows([1, 2], 5, 2, 8, prefix=[101], suffix=[102])
    [[101, 1, 2, 102]]
    """
    width = int(max_tokens) - len(prefix) - len(suffix)
    if width < 1:
        raise ValueError(
            f"max_tokens={max_tokens} leaves no room for a text token between the "
            f"{len(prefix) + len(suffix)} special tokens"
        )
    head, tail = list(prefix), list(suffix)
    return [
        head + list(ids[s : s + width]) + tail
        for s in window_starts(len(ids), width, stride, max_windows, truncation_side)
    ]


def special_affixes(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The special token ids a tokenizer puts before and after every single text.

    Found by encoding one word with and without special tokens: BERT's ``[CLS]`` and
    ``[SEP]``, Llama's ``<s>`` before, nothing for GPT-2 and the offline BPE tokenizer.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerBase
        The tokenizer.

    Returns
    -------
    prefix, suffix : list of int

    Raises
    ------
    ValueError
        If the special tokens are not a prefix and a suffix around the text's own ids.

    Examples
    --------
    >>> from learners.lm.tokenizer import train_bpe_tokenizer
    >>> special_affixes(train_bpe_tokenizer(["a good film"] * 5, vocab_size=300))
    ([], [])
    """
    bare = tokenizer("film", add_special_tokens=False)["input_ids"]
    full = tokenizer("film")["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return full[:start], full[start + len(bare) :]
    raise ValueError(
        f"long_texts='windows': {type(tokenizer).__name__} does not put its special tokens "
        "before and after a text; use long_texts='truncate'"
    )


def window_rows(
    per_text: Sequence[Sequence[Sequence[int]]],
) -> tuple[list[Sequence[int]], NDArray[np.intp], NDArray[np.intp]]:
    """The windows of all texts as one list of model inputs, with the text of each.

    Parameters
    ----------
    per_text : sequence of sequence of list of int
        The windows of each text (at least one per text).

    Returns
    -------
    rows : list of list of int
        The windows of the first text, then those of the second, ...
    owner : ndarray of shape (len(rows),)
        The text of each row.
    counts : ndarray of shape (len(per_text),)
        Windows per text.

    Examples
    --------
    >>> rows, owner, counts = window_rows([[[1, 2], [2, 3]], [[4]]])
    >>> rows, owner.tolist(), counts.tolist()
    ([[1, 2], [2, 3], [4]], [0, 0, 1], [2, 1])
    """
    counts = np.fromiter((len(w) for w in per_text), dtype=np.intp, count=len(per_text))
    rows = [w for text in per_text for w in text]
    return rows, np.repeat(np.arange(len(per_text), dtype=np.intp), counts), counts


def pool_windows(
    probs: NDArray[np.float64], owner: NDArray[np.intp], counts: NDArray[np.intp]
) -> NDArray[np.float64]:
    """Each text's mean of its windows' probabilities (rows still sum to 1).

    A text with one window gets that window's row unchanged.

    Examples
    --------
    >>> import numpy as np
    >>> probs = np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]])
    >>> pool_windows(probs, np.array([0, 0, 1]), np.array([2, 1])).tolist()
    [[0.7, 0.3], [0.2, 0.8]]
    """
    if len(owner) == len(counts):  # one window per text
        return probs
    out = np.zeros((len(counts), probs.shape[1]), dtype=probs.dtype)
    np.add.at(out, owner, probs)
    return out / counts[:, None]


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

    Windows of 2 tokens, 1 apart, over a text of 3 (this tokenizer adds no special tokens):

    >>> full = tok("a good film")["input_ids"]
    >>> cache.windows(["a good film"], 2, 1, 8, "left") == [[full[0:2], full[1:3]]]
    True
    """

    def __init__(self, tokenizer: Any, max_entries: int = 200_000) -> None:
        self.tokenizer = tokenizer
        self.max_entries = max_entries
        self._settings: tuple[Any, ...] | None = None
        self._ids: dict[str, Any] = {}  # token ids, or windows of token ids, per text
        self._affixes: tuple[list[int], list[int]] | None = None

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
        missing = self._missing(texts, settings)
        if missing:
            tok = self.tokenizer
            tok.truncation_side = truncation_side
            encoded = tok(self._inputs(missing), truncation=True, max_length=settings[0])
            self._ids.update(zip(missing, encoded["input_ids"], strict=True))
        return [self._ids[t] for t in texts]

    def windows(
        self,
        texts: Sequence[str],
        max_length: int,
        window_stride: int | None,
        max_windows: int,
        truncation_side: str,
    ) -> list[list[list[int]]]:
        """The windows of every text's token ids (see :func:`windows`), each text once.

        Each window holds at most `max_length` ids and starts and ends with the special
        tokens the tokenizer puts around a text (:func:`special_affixes`); a text that
        fits gets one window, the ids :meth:`ids` gives it.

        Parameters
        ----------
        texts : sequence of str
            Texts (an empty one as in :meth:`ids`).
        max_length : int
            Most ids per window, special tokens included.
        window_stride : int or None
            Text tokens between window starts; ``None``: half a window's text tokens.
        max_windows : int
            Most windows per text (spread evenly over a longer one).
        truncation_side : {"left", "right"}
            The window kept when ``max_windows=1``.

        Returns
        -------
        list of list of list of int
            The windows of each text, in order.

        Raises
        ------
        ValueError
            If `max_length` leaves no room between the special tokens, or `window_stride`
            is more than a window's text tokens.
        """
        if self._affixes is None:
            self._affixes = special_affixes(self.tokenizer)
        prefix, suffix = self._affixes
        width = int(max_length) - len(prefix) - len(suffix)
        if width < 1:
            raise ValueError(
                f"max_length={max_length} leaves no room for text between the tokenizer's "
                f"{len(prefix) + len(suffix)} special tokens"
            )
        stride = max(1, width // 2) if window_stride is None else int(window_stride)
        if stride > width:
            raise ValueError(
                f"window_stride must be at most a window's {width} text tokens "
                f"(max_length without the special tokens), got {window_stride}"
            )
        settings = ("windows", width, stride, int(max_windows), str(truncation_side))
        missing = self._missing(texts, settings)
        if missing:
            encoded = self.tokenizer(self._inputs(missing), add_special_tokens=False, verbose=False)
            for text, ids in zip(missing, encoded["input_ids"], strict=True):
                self._ids[text] = windows(
                    ids, max_length, stride, max_windows, prefix, suffix, truncation_side
                )
        return [self._ids[t] for t in texts]

    def _missing(self, texts: Sequence[str], settings: tuple[Any, ...]) -> list[str]:
        """The distinct texts not cached under `settings` (another setting empties it)."""
        if settings != self._settings:
            self._ids, self._settings = {}, settings
        missing = list(dict.fromkeys(t for t in texts if t not in self._ids))
        if len(self._ids) + len(missing) > self.max_entries:
            self._ids = {}
        return missing

    def _inputs(self, texts: list[str]) -> list[str]:
        eos = self.tokenizer.eos_token
        return [t if t or eos is None else eos for t in texts]


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
