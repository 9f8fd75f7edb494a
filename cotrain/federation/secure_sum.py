"""The server's side of teacher votes summed under secure aggregation (in-process).

:func:`sum_shares_in_process` stands in for Flower's SecAgg+ in a simulation: it takes the sites'
share vectors and hands back **only their sum** (and who contributed), or nothing when fewer sites
contributed than the noise plan needs — so the server object of a simulated run, like a
deployed ServerApp, never holds one site's histogram. It is not cryptography (everything runs
in one process); it fixes the interface the server code sees.

:class:`VoteSums` is what the server does with sums, from public information only: it chooses
each round's queries (:func:`choose_queries`), keeps the queries whose noisy check clears the
threshold (:func:`confident_answers`, Confident-GNMax), and turns the answer sum into the
consensus. All of it is post-processing of released sums.

Examples
--------
>>> import numpy as np
>>> shares = {0: np.array([[3, 1], [0, 4]]), 1: np.array([[2, 2], [1, 3]])}
>>> summed = sum_shares_in_process(shares, min_sites=2)
>>> summed.total.tolist(), summed.sites
([[5, 3], [1, 7]], (0, 1))
>>> sum_shares_in_process(shares, min_sites=3) is None      # too few sites: the sum is not revealed
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "SummedShares",
    "VoteSums",
    "choose_queries",
    "confident_answers",
    "decode_share",
    "encode_share",
    "sum_shares_in_process",
]

#: shares travel as little-endian int32 (votes plus Skellam noise stay far inside its range)
SHARE_DTYPE = np.dtype("<i4")


def encode_share(share: Any) -> bytes:
    """A site's share ``(n, C)`` as bytes (little-endian int32, row-major).

    Examples
    --------
    >>> len(encode_share(np.zeros((3, 2), dtype=np.int64)))
    24
    """
    share = np.asarray(share)
    info = np.iinfo(SHARE_DTYPE)
    if share.size and (share.min() < info.min or share.max() > info.max):
        raise ValueError("a vote share does not fit in int32; lower the noise")
    return share.astype(SHARE_DTYPE).tobytes()


def decode_share(data: Any, n_rows: int, n_classes: int) -> NDArray[np.int64]:
    """The ``(n_rows, n_classes)`` int64 share in ``data``.

    Raises
    ------
    ValueError
        If ``data`` is not bytes of exactly that many int32 values.

    Examples
    --------
    >>> decode_share(encode_share([[1, -2]]), 1, 2)
    array([[ 1, -2]])
    >>> decode_share(b"abc", 1, 2)
    Traceback (most recent call last):
    ...
    ValueError: a vote share must be 8 bytes (1 x 2 int32), got 3
    """
    expected = n_rows * n_classes * SHARE_DTYPE.itemsize
    if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) != expected:
        size = len(data) if isinstance(data, (bytes, bytearray, memoryview)) else type(data)
        raise ValueError(
            f"a vote share must be {expected} bytes ({n_rows} x {n_classes} int32), got {size}"
        )
    flat = np.frombuffer(bytes(data), dtype=SHARE_DTYPE)
    return flat.astype(np.int64).reshape(n_rows, n_classes)


@dataclass(frozen=True)
class SummedShares:
    """What secure aggregation reveals: the sum, and which sites contributed."""

    total: NDArray[np.int64]
    sites: tuple[int, ...]


def sum_shares_in_process(shares: Mapping[int, Any], min_sites: int) -> SummedShares | None:
    """The sum of the sites' shares, or None when fewer than ``min_sites`` contributed.

    The in-process stand-in for secure aggregation: its caller hands the server only the
    result. Shares must have one shape.
    """
    if len(shares) < min_sites or not shares:
        return None
    sites = tuple(sorted(int(i) for i in shares))
    total = np.sum([np.asarray(shares[i], dtype=np.int64) for i in sites], axis=0)
    return SummedShares(np.asarray(total, dtype=np.int64), sites)


def confident_answers(
    check: Any, threshold: float | None, n_votes: int, slots: int
) -> NDArray[np.intp]:
    """Positions of the queries to answer: those whose noisy top count reaches
    ``threshold · n_votes``, at most ``slots`` of them (the largest top counts first, ties
    to the earlier query); every query up to ``slots`` when ``threshold`` is None.

    Examples
    --------
    >>> check = np.array([[9, 1], [5, 5], [0, 10], [7, 3]])
    >>> confident_answers(check, 0.7, 10, slots=3).tolist()
    [0, 2, 3]
    >>> confident_answers(check, 0.7, 10, slots=2).tolist()   # the two largest top counts
    [0, 2]
    """
    check = np.asarray(check)
    top = check.max(axis=1)
    if threshold is None:
        keep = np.arange(check.shape[0])
    else:
        keep = np.flatnonzero(top >= threshold * n_votes)
    if keep.size > slots:
        order = np.argsort(-top[keep], kind="stable")[:slots]
        keep = np.sort(keep[order])
    return keep.astype(np.intp)


def choose_queries(
    n_public: int, n_queries: int, margin: Any, rng: np.random.Generator
) -> NDArray[np.intp]:
    """The round's queries from public information: every example when ``n_queries`` covers
    U; else first the examples never answered (NaN margin, in a random order), then those
    whose last released sum had the smallest margin.

    Examples
    --------
    >>> margin = np.array([0.9, np.nan, 0.1, 0.5])
    >>> choose_queries(4, 2, margin, np.random.default_rng(0)).tolist()
    [1, 2]
    """
    if n_queries >= n_public:
        return np.arange(n_public, dtype=np.intp)
    margin = np.asarray(margin, dtype=np.float64)
    priority = np.where(np.isnan(margin), -1.0, margin)
    tiebreak = rng.permutation(n_public)
    order = np.lexsort((tiebreak, priority))
    return np.sort(order[:n_queries]).astype(np.intp)


class VoteSums:
    """The consensus a secure-sum run builds from released sums.

    Parameters
    ----------
    n_public : int
        Size of U.
    seed : int, optional
        Seeds the order in which never-answered examples are asked (public).

    Attributes
    ----------
    codes : ndarray of int64, (n_public,)
        The consensus: the last answered label of each example, -1 where none.
    margin : ndarray of float, (n_public,)
        The last released sum's margin (top minus second count, over all votes) per
        example; NaN where never answered.

    Examples
    --------
    >>> sums = VoteSums(3)
    >>> sums.answer(np.array([0, 2]), np.array([[8, 2], [1, 9]]))
    >>> sums.codes.tolist(), sums.margin.round(2).tolist()
    ([0, -1, 1], [0.6, nan, 0.8])
    """

    def __init__(self, n_public: int, seed: int | None = None) -> None:
        self.codes = np.full(n_public, -1, dtype=np.int64)
        self.margin = np.full(n_public, np.nan)
        self.rng = np.random.default_rng(seed)

    def queries(self, n_queries: int) -> NDArray[np.intp]:
        """This round's queries (:func:`choose_queries`)."""
        return choose_queries(self.codes.size, n_queries, self.margin, self.rng)

    def answer(self, rows: Any, total: Any) -> None:
        """Label ``rows`` of U with the argmax of their summed votes ``total``."""
        total = np.asarray(total, dtype=np.float64)
        rows = np.asarray(rows, dtype=np.intp)
        if rows.size == 0:
            return
        self.codes[rows] = total.argmax(axis=1)
        ordered = np.sort(total, axis=1)
        runner_up = ordered[:, -2] if total.shape[1] > 1 else np.zeros(rows.size)
        votes = np.maximum(np.abs(total).sum(axis=1), 1.0)
        self.margin[rows] = (ordered[:, -1] - runner_up) / votes

    def state_dict(self) -> dict[str, Any]:
        """The consensus, the margins and the query order's generator state."""
        return {
            "codes": self.codes.tolist(),
            "margin": [None if np.isnan(m) else float(m) for m in self.margin],
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        self.codes = np.asarray(state["codes"], dtype=np.int64)
        self.margin = np.array([np.nan if m is None else m for m in state["margin"]])
        self.rng.bit_generator.state = state["rng"]
