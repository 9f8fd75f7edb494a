"""Soft consensus: mean of probabilities (distributed distillation) and FedDS entropy weighting."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._base import Consensus
from ._kernels import count_votes
from ._validation import Checked, check_inputs, check_k

__all__ = ["EntropyWeighted", "SoftMean", "entropy_weighted", "soft_mean"]


def _normalise(num: NDArray[np.float64], den: NDArray[np.float64]) -> NDArray[np.float64]:
    """``num / den[:, None]`` with a NaN row wherever ``den <= 0`` (nobody voted)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den[:, None]
    out[den <= 0] = np.nan
    return out


def vote_shares(checked: Checked) -> NDArray[np.float64]:
    """Weighted vote shares of hard votes (= mean of one-hot votes), NaN row if nobody voted."""
    counts = count_votes(checked.values, checked.n_classes, checked.weights)
    return _normalise(counts, counts.sum(axis=1))


def _client_coefficients(checked: Checked) -> NDArray[np.float64]:
    """``(m, n)`` weight of each client on each example: weight times presence."""
    m, n = checked.values.shape[:2]
    w = checked.weights
    coef = (
        np.ones((m, n)) if w is None else np.broadcast_to(w if w.ndim == 2 else w[:, None], (m, n))
    )
    if checked.present is not None:
        coef = coef * checked.present
    return coef


def weighted_mean(checked: Checked) -> NDArray[np.float64]:
    """``Σ_i w_i p_i / Σ_i w_i`` over the clients present on each example (soft input)."""
    probs = checked.values
    m, n = probs.shape[:2]
    w = checked.weights
    if checked.present is None and (w is None or w.ndim == 1):
        if w is None:
            return _normalise(probs.sum(axis=0), np.full(n, float(m)))
        # scaled so the largest weight is 1: tiny (subnormal) weights keep their precision
        w = w / w.max() if w.size and w.max() > 0 else w
        return _normalise(np.tensordot(w, probs, axes=(0, 0)), np.full(n, w.sum()))
    coef = _client_coefficients(checked)
    # scaled per example so the largest coefficient is 1 (see above); the mean is unchanged
    top = coef.max(axis=0) if m else np.zeros(n)
    coef = coef / np.where(top > 0, top, 1.0)
    return _normalise(np.einsum("mn,mnc->nc", coef, probs), coef.sum(axis=0))


def soft_mean(
    labels: ArrayLike, n_classes: int, weights: ArrayLike | None = None
) -> NDArray[np.float64]:
    """Mean of the clients' probabilities: distributed distillation (DD).

    Parameters
    ----------
    labels : array-like
        Probabilities ``(m, n, n_classes)`` (an all-NaN row means "did not vote"), or hard
        votes ``(m, n)`` with -1 for "did not vote", which count as one-hot rows.
    n_classes : int
        Number of classes C.
    weights : array-like of shape (m,) or (m, n), optional
        Non-negative weights, per client or per client per example: the result is then
        ``Σ_i w_i p_i / Σ_i w_i`` over the clients that voted.

    Returns
    -------
    targets : ndarray of float64, shape (n, n_classes)
        Soft targets; a row of NaN where nobody voted (or every voter has weight 0). For hard
        votes these are the (weighted) vote shares.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import soft_mean
    >>> probs = np.array([[[0.8, 0.2], [0.5, 0.5]],
    ...                   [[0.4, 0.6], [np.nan, np.nan]]])
    >>> soft_mean(probs, n_classes=2)
    array([[0.6, 0.4],
           [0.5, 0.5]])
    >>> soft_mean(np.array([[0, 1], [1, 1], [1, -1], [1, -1]]), n_classes=2)
    array([[0.25, 0.75],
           [0.  , 1.  ]])
    """
    checked = check_inputs(labels, n_classes, weights)
    if checked.kind == "hard":
        return vote_shares(checked)
    return weighted_mean(checked)


def _entropy(probs: np.ndarray) -> NDArray[np.float64]:
    """Shannon entropy (natural log) of each row, with 0·log 0 = 0."""
    logp = np.log(np.where(probs > 0, probs, 1.0))
    plogp: NDArray[np.float64] = np.einsum("mnc,mnc->mn", probs, logp)
    return -plogp


def entropy_weighted(
    labels: ArrayLike, n_classes: int, k: float = 5.0, weights: ArrayLike | None = None
) -> NDArray[np.float64]:
    """FedDS entropy-weighted consensus: confident clients count more.

    For each example x, client c gets ``w_c(x) = softmax_c(-k · H(p_c(x)))`` over the clients
    that voted on x, and the target is ``Σ_c w_c(x) p_c(x)``.

    Parameters
    ----------
    labels : array-like
        Probabilities ``(m, n, n_classes)`` (all-NaN row = did not vote), or hard votes
        ``(m, n)`` (-1 = did not vote). Hard votes are one-hot, so every entropy is 0 and the
        result is the (weighted) vote shares, whatever ``k``.
    n_classes : int
        Number of classes C.
    k : float, default=5.0
        Inverse temperature, finite and >= 0. ``k=0`` is the plain mean (`soft_mean`); FedDS
        reports ~0.1 best for iid clients and ~8 for non-iid ones.
    weights : array-like of shape (m,) or (m, n), optional
        Extra non-negative weights, multiplied into ``exp(-k·H)`` before normalising.

    Returns
    -------
    targets : ndarray of float64, shape (n, n_classes)
        A row of NaN where nobody voted (or every voter has weight 0).

    Notes
    -----
    Computed stably as ``exp(z - max z)`` with ``z = -k·H + log w``. Beware (FedDS's own
    analysis): a confidently *wrong* client gets a large weight.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import entropy_weighted
    >>> probs = np.array([[[1.0, 0.0]],
    ...                   [[0.5, 0.5]]])
    >>> entropy_weighted(probs, n_classes=2, k=1.0)  # weights ∝ 1 : exp(-log 2), i.e. 2/3 : 1/3
    array([[0.83333333, 0.16666667]])
    >>> entropy_weighted(probs, n_classes=2, k=0.0)
    array([[0.75, 0.25]])
    """
    k = check_k(k)
    checked = check_inputs(labels, n_classes, weights)
    if checked.kind == "hard":
        return vote_shares(checked)
    probs = checked.values
    m, n = probs.shape[:2]
    if m == 0:
        return np.full((n, checked.n_classes), np.nan)
    z = -k * _entropy(probs)
    w = checked.weights
    if w is not None:
        with np.errstate(divide="ignore"):
            z += np.log(w if w.ndim == 2 else w[:, None])
    if checked.present is not None:
        z[~checked.present] = -np.inf
    top = z.max(axis=0)
    top[~np.isfinite(top)] = 0.0  # nobody (with positive weight) voted: all exp() are 0
    e = np.exp(z - top)
    return _normalise(np.einsum("mn,mnc->nc", e, probs), e.sum(axis=0))


class SoftMean(Consensus):
    """Mean of probabilities (distributed distillation, DD); see `soft_mean`.

    Soft output: ``(n, n_classes)`` targets, NaN row where nobody voted.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import SoftMean
    >>> SoftMean()(np.array([[[0.9, 0.1]], [[0.5, 0.5]]]), n_classes=2)
    array([[0.7, 0.3]])
    """

    output: ClassVar[Literal["hard", "soft"]] = "soft"

    def __init__(self) -> None:
        pass

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        return soft_mean(labels, n_classes, weights)


class EntropyWeighted(Consensus):
    """FedDS entropy-weighted consensus; see `entropy_weighted`.

    Parameters
    ----------
    k : float, default=5.0
        Inverse temperature (>= 0; 0 = plain mean); validated when called.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import EntropyWeighted
    >>> rule = EntropyWeighted(k=1.0)
    >>> rule
    EntropyWeighted(k=1.0)
    >>> rule(np.array([[[1.0, 0.0]], [[0.5, 0.5]]]), n_classes=2)
    array([[0.83333333, 0.16666667]])
    """

    output: ClassVar[Literal["hard", "soft"]] = "soft"

    def __init__(self, *, k: float = 5.0) -> None:
        self.k = k

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        return entropy_weighted(labels, n_classes, k=self.k, weights=weights)
