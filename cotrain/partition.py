"""Split labeled data over clients.

Every splitter returns a ``list`` of ``int64`` index arrays into ``y``, one per client. Each
array is sorted ascending, the arrays are pairwise disjoint, and together they cover every
index ``0 .. len(y) - 1``. Labels may be any hashable values (numbers, strings, ...); only
their equality matters.

Randomness comes from ``random_state`` (``None``, an ``int`` seed or a
:class:`numpy.random.Generator`) through :func:`numpy.random.default_rng`: the same seed gives
the same split.

The protocols are those of the papers:

- :func:`iid` — a random permutation cut into near-equal parts;
- :func:`dirichlet` — the balanced Dirichlet split of FedAUX (Sattler et al., App. B, after
  Hsu et al. 2019);
- :func:`two_alpha` — FedCT's non-iid protocol (Table 2): half the data with ``Dir(alpha1)``,
  half with ``Dir(alpha2)``;
- :func:`shards` — the "sort by label and deal out shards" split of McMahan et al.

plus :func:`label_distribution` to inspect a split. The label corruption of the robustness
experiments of FedDS (noisy and hostile clients),
:func:`~cotrain.robustness.corruption.label_noise` and
:func:`~cotrain.robustness.corruption.make_byzantine`, lives in
:mod:`cotrain.robustness.corruption`.

Examples
--------
>>> import numpy as np
>>> from cotrain import partition
>>> parts = partition.iid(np.repeat([0, 1], 5), 2, random_state=0)
>>> [len(p) for p in parts]
[5, 5]
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from cotrain.datasets.labels import (
    RandomState,
    as_generator,
    check_label_array,
    factorize,
    label_codes,
)
from learners.checks import check_int

__all__ = [
    "dirichlet",
    "iid",
    "label_distribution",
    "shards",
    "two_alpha",
]


# --------------------------------------------------------------------------------------------
# argument checks of the splitters
# --------------------------------------------------------------------------------------------


def _n_clients(n_clients: Any, n: int) -> int:
    if isinstance(n_clients, bool) or not isinstance(n_clients, numbers.Integral):
        raise TypeError(f"n_clients must be an int, got {type(n_clients).__name__}")
    if not 1 <= int(n_clients) <= n:
        raise ValueError(
            f"n_clients must be between 1 and the number of samples ({n}), got {int(n_clients)}"
        )
    return int(n_clients)


def _alpha(alpha: Any, name: str = "alpha") -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"{name} must be a positive float, got {type(alpha).__name__}")
    alpha = float(alpha)
    if not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {alpha!r}")
    return alpha


def _sorted_parts(parts: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


# --------------------------------------------------------------------------------------------
# splitters
# --------------------------------------------------------------------------------------------


def iid(y: Any, n_clients: int, random_state: RandomState = None) -> list[np.ndarray]:
    """Split samples uniformly at random into ``n_clients`` near-equal parts.

    Parameters
    ----------
    y : array-like of shape (n_samples,) or int
        The labels (only their number is used), or the number of samples itself.
    n_clients : int
        Number of parts, ``1 <= n_clients <= n_samples``.
    random_state : None, int or numpy.random.Generator, default=None
        Seed or generator for the permutation.

    Returns
    -------
    list of ndarray of int64
        One sorted index array per client. Sizes differ by at most one.

    Examples
    --------
    >>> from cotrain.partition import iid
    >>> parts = iid(10, 3, random_state=0)
    >>> [len(p) for p in parts]
    [4, 3, 3]
    >>> sorted(int(i) for p in parts for i in p) == list(range(10))
    True
    """
    if isinstance(y, numbers.Integral) and not isinstance(y, bool):
        n = int(y)
        if n < 1:
            raise ValueError(f"y must be a positive number of samples, got {n}")
    else:
        n = check_label_array(y).size
    n_clients = _n_clients(n_clients, n)
    rng = as_generator(random_state)
    return _sorted_parts(np.array_split(rng.permutation(n), n_clients))


def _log_dirichlet(rng: np.random.Generator, alpha: float, shape: tuple[int, int]) -> np.ndarray:
    """Log of Dirichlet(alpha) draws along the last axis, finite even for tiny ``alpha``.

    Uses ``Gamma(alpha) = Gamma(alpha + 1) * U**(1/alpha)``, so ``log`` of the gamma variates
    is computed without underflow (for ``alpha = 0.01`` plain gamma draws are often exactly 0).
    ``U = 1 - random()`` lies in ``(0, 1]``, so the logarithm is always finite.
    """
    log_g = np.log(rng.gamma(alpha + 1.0, size=shape)) + np.log1p(-rng.random(size=shape)) / alpha
    return log_g - _lse(log_g, axis=-1)[..., None]


def _lse(x: np.ndarray, axis: int) -> np.ndarray:
    """``log(sum(exp(x), axis))`` for finite ``x``, without overflow."""
    top = x.max(axis=axis, keepdims=True)
    return np.log(np.exp(x - top).sum(axis=axis)) + np.squeeze(top, axis=axis)


def _balance(
    log_p: np.ndarray, class_counts: np.ndarray, n_clients: int, max_iter: int, tol: float = 1e-9
) -> np.ndarray:
    """Sinkhorn-balance ``P`` (classes x clients) in the log domain.

    Returns ``Q`` with row sums ``M_j`` (the class counts) and column sums ``n / n_clients``
    (up to ``tol`` relative, or after ``max_iter`` iterations), ending on a row normalisation
    so that every class row is exact.
    """
    log_rows = np.log(class_counts.astype(float))
    log_target = np.log(float(class_counts.sum()) / n_clients)
    log_q = log_p + log_rows[:, None]
    log_cols = _lse(log_q, axis=0)
    for _ in range(max_iter):
        log_q -= (log_cols - log_target)[None, :]
        log_q -= (_lse(log_q, axis=1) - log_rows)[:, None]
        log_cols = _lse(log_q, axis=0)
        if np.max(np.abs(np.expm1(log_cols - log_target))) <= tol:
            break
    return np.exp(log_q)


def _largest_remainder(quota: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
    """Round non-negative ``quota`` to integers summing to ``total`` (ties broken at random)."""
    base = np.floor(quota).astype(np.int64)
    base = np.minimum(base, total)
    rest = total - int(base.sum())
    if rest > 0:
        frac = quota - np.floor(quota)
        order = np.lexsort((rng.random(quota.size), -frac))
        base[order[:rest]] += 1
    elif rest < 0:  # only possible through floating-point excess; take from the largest
        order = np.argsort(-base, kind="stable")
        base[order[:-rest]] -= 1
    return base


def _dirichlet_codes(
    codes: np.ndarray,
    n_classes: int,
    n_clients: int,
    alpha: float,
    rng: np.random.Generator,
    max_iter: int,
) -> list[np.ndarray]:
    """Balanced Dirichlet split of positions ``0..len(codes)-1`` given integer class codes."""
    if codes.size == 0:
        return [np.empty(0, dtype=np.int64) for _ in range(n_clients)]
    counts = np.bincount(codes, minlength=n_classes)
    present = np.flatnonzero(counts)
    log_p = _log_dirichlet(rng, alpha, (present.size, n_clients))
    q = _balance(log_p, counts[present], n_clients, max_iter)
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate(([0], np.cumsum(counts)))
    pieces: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    for row, j in enumerate(present):
        members = rng.permutation(order[starts[j] : starts[j + 1]])
        take = _largest_remainder(q[row], int(counts[j]), rng)
        bounds = np.cumsum(take)[:-1]
        for i, chunk in enumerate(np.split(members, bounds)):
            pieces[i].append(chunk)
    return _sorted_parts([np.concatenate(p) if p else np.empty(0, dtype=np.int64) for p in pieces])


def dirichlet(
    y: Any,
    n_clients: int,
    alpha: float,
    random_state: RandomState = None,
    max_iter: int = 1000,
) -> list[np.ndarray]:
    """Balanced Dirichlet split: label skew controlled by ``alpha``, near-equal client sizes.

    The protocol of FedAUX (Sattler et al., App. B, after Hsu et al. 2019):

    1. For every class ``j`` draw ``p_j ~ Dir(alpha)`` over the clients; stack into ``P``
       of shape ``(n_classes, n_clients)``.
    2. Balance ``P`` by alternately normalising columns and rows (Sinkhorn iterations, at most
       ``max_iter``, stopping once the column sums agree to a relative ``1e-9``): every class
       row sums to ``M_j`` (the number of examples of class ``j``) and every client column
       sums to ``n / n_clients``. With equally frequent classes this is exactly the paper's
       "rows sum to one, columns sum to the same total"; with unequal classes it still gives
       clients of (near) equal size.
    3. Client ``i`` receives ``round(P_ji * M_j)`` examples of class ``j``, rounded per class
       by the largest-remainder method so that the counts add up exactly to ``M_j``; which
       examples of the class it receives is random.

    The Dirichlet draws are made in the log domain (``Gamma(a) = Gamma(a + 1) * U**(1/a)``),
    so that even ``alpha = 0.01`` produces no exact zeros and the balancing always converges.
    Small ``alpha`` gives each client data from few classes (at ``alpha = 0.01`` typically one
    or two); large ``alpha`` (100) gives every client nearly the global class shares. Each
    client's size is within ``n_classes`` of ``n / n_clients`` whenever the balancing has
    converged.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels (any hashable values).
    n_clients : int
        Number of clients, ``1 <= n_clients <= n_samples``.
    alpha : float
        Dirichlet concentration, ``> 0``; FedAUX's grid is
        0.01, 0.04, 0.16, 0.64, 2.56, 10.24, 100.
    random_state : None, int or numpy.random.Generator, default=None
        Seed or generator.
    max_iter : int, default=1000
        Maximum number of row/column normalisation rounds.

    Returns
    -------
    list of ndarray of int64
        One sorted index array per client (possibly empty for very small data sets).

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.partition import dirichlet, label_distribution
    >>> y = np.repeat([0, 1, 2, 3], 250)
    >>> parts = dirichlet(y, 4, alpha=0.01, random_state=0)
    >>> [len(p) for p in parts]
    [250, 250, 250, 250]
    >>> counts = label_distribution(y, parts)
    >>> bool((counts.max(axis=1) >= 0.9 * 250).all())  # each client: mostly one class
    True
    """
    y = check_label_array(y)
    n_clients = _n_clients(n_clients, y.size)
    alpha = _alpha(alpha)
    max_iter = check_int(max_iter, "max_iter", 1)
    rng = as_generator(random_state)
    classes, codes = factorize(y)
    return _dirichlet_codes(codes, classes.size, n_clients, alpha, rng, max_iter)


def two_alpha(
    y: Any,
    n_clients: int,
    alpha1: float,
    alpha2: float,
    random_state: RandomState = None,
    max_iter: int = 1000,
) -> list[np.ndarray]:
    """FedCT's non-iid split: half the data with ``Dir(alpha1)``, half with ``Dir(alpha2)``.

    A random half of the examples (``n // 2`` of them) is split with :func:`dirichlet` at
    ``alpha1`` and the rest at ``alpha2``; client ``i`` receives the union of its part of each
    half. FedCT (Table 2) uses ``(100, 2)`` for mild, ``(100, 0.01)`` for strong and
    ``(0.01, 0.01)`` for pathological heterogeneity.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels (any hashable values).
    n_clients : int
        Number of clients, ``1 <= n_clients <= n_samples``.
    alpha1, alpha2 : float
        Dirichlet concentrations (``> 0``) of the first and of the second half.
    random_state : None, int or numpy.random.Generator, default=None
        Seed or generator.
    max_iter : int, default=1000
        Maximum number of balancing iterations of each Dirichlet split.

    Returns
    -------
    list of ndarray of int64
        One sorted index array per client.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.partition import two_alpha
    >>> y = np.tile(np.arange(10), 100)
    >>> parts = two_alpha(y, 5, 100.0, 0.01, random_state=0)
    >>> sum(len(p) for p in parts)
    1000
    >>> np.array_equal(np.sort(np.concatenate(parts)), np.arange(1000))
    True
    """
    y = check_label_array(y)
    n_clients = _n_clients(n_clients, y.size)
    alpha1 = _alpha(alpha1, "alpha1")
    alpha2 = _alpha(alpha2, "alpha2")
    max_iter = check_int(max_iter, "max_iter", 1)
    rng = as_generator(random_state)
    classes, codes = factorize(y)
    perm = rng.permutation(y.size)
    halves = (perm[: y.size // 2], perm[y.size // 2 :])
    parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    for half, alpha in zip(halves, (alpha1, alpha2), strict=True):
        sub = _dirichlet_codes(codes[half], classes.size, n_clients, alpha, rng, max_iter)
        for i, local in enumerate(sub):
            parts[i].append(half[local])
    return _sorted_parts([np.concatenate(p) for p in parts])


def shards(
    y: Any,
    n_clients: int,
    shards_per_client: int = 2,
    random_state: RandomState = None,
) -> list[np.ndarray]:
    """Pathological label skew: sort by label, cut into shards, deal shards out at random.

    The examples are sorted by label (ties in random order), cut into
    ``n_clients * shards_per_client`` contiguous shards of near-equal size, and every client
    receives ``shards_per_client`` shards chosen at random. When every class has at least a
    shard's worth of examples, a client sees at most ``2 * shards_per_client`` classes (one more
    per shard that straddles a class boundary), and typically ``shards_per_client``.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels (any hashable values).
    n_clients : int
        Number of clients, ``1 <= n_clients <= n_samples``.
    shards_per_client : int, default=2
        Shards per client; ``n_clients * shards_per_client`` must not exceed ``n_samples``.
    random_state : None, int or numpy.random.Generator, default=None
        Seed or generator.

    Returns
    -------
    list of ndarray of int64
        One sorted index array per client.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.partition import shards, label_distribution
    >>> y = np.repeat(np.arange(10), 100)
    >>> parts = shards(y, 5, shards_per_client=2, random_state=0)
    >>> (label_distribution(y, parts) > 0).sum(axis=1).tolist()
    [2, 2, 2, 2, 2]
    """
    y = check_label_array(y)
    n_clients = _n_clients(n_clients, y.size)
    shards_per_client = check_int(shards_per_client, "shards_per_client", 1)
    n_shards = n_clients * shards_per_client
    if n_shards > y.size:
        raise ValueError(
            f"n_clients * shards_per_client ({n_shards}) must not exceed the number of "
            f"samples ({y.size})"
        )
    rng = as_generator(random_state)
    _, codes = factorize(y)
    perm = rng.permutation(y.size)
    by_label = perm[np.argsort(codes[perm], kind="stable")]
    pieces = np.array_split(by_label, n_shards)
    deal = rng.permutation(n_shards).reshape(n_clients, shards_per_client)
    return _sorted_parts([np.concatenate([pieces[s] for s in row]) for row in deal])


# --------------------------------------------------------------------------------------------
# inspection
# --------------------------------------------------------------------------------------------


def label_distribution(y: Any, parts: Sequence[Any], classes: Any = None) -> np.ndarray:
    """Count the examples of every class held by every client.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels.
    parts : sequence of array-like of int
        Index arrays into ``y``, one per client (as returned by the splitters).
    classes : array-like, optional
        Column order; defaults to ``np.unique(y)``.

    Returns
    -------
    ndarray of int64, shape (n_clients, n_classes)
        ``counts[i, j]`` is the number of examples of ``classes[j]`` in ``parts[i]``.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.partition import label_distribution
    >>> y = np.array(["a", "b", "b", "c"])
    >>> label_distribution(y, [np.array([0, 1]), np.array([2, 3])]).tolist()
    [[1, 1, 0], [0, 1, 1]]
    """
    y = check_label_array(y)
    classes, codes = label_codes(y, classes)
    if isinstance(parts, np.ndarray) and parts.ndim == 1 and parts.dtype != object:
        raise TypeError("parts must be a sequence of index arrays, one per client")
    counts = np.zeros((len(parts), classes.size), dtype=np.int64)
    for i, part in enumerate(parts):
        idx = np.asarray(part)
        if idx.size == 0:
            continue
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise TypeError(f"parts[{i}] must be a 1-D array of integer indices")
        if idx.min() < -y.size or idx.max() >= y.size:
            raise ValueError(f"parts[{i}] contains indices outside 0..{y.size - 1}")
        counts[i] = np.bincount(codes[idx], minlength=classes.size)
    return counts
