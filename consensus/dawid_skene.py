"""Dawid–Skene vote: learn from the votes alone how far to believe each client, per class.

A plain majority lets weak clients outvote a strong one; `reliability_vote` fixes that with
each client's accuracy *on its own rows*, which a private client does not send and which
says nothing about where (on U) or on which classes a client errs. Dawid and Skene (1979;
STAPLE, Warfield, Zou and Wells 2004, is the same model for segmentations, and the FedCT
paper names it as the next step) estimate, from the votes on the public pool alone, each
client's confusion matrix ``π_i[k, l] = P(client i says l | true class k)`` and the class
prior, by expectation–maximisation:

- **E-step**: ``P(y_j = k | votes) ∝ prior_k · Π_i π_i[k, v_ij]`` (clients assumed to err
  independently given the true class);
- **M-step**: ``π_i[k, l] ∝ a_kl + Σ_j P(y_j = k) · [v_ij = l]``,
  ``prior_k ∝ α + Σ_j P(y_j = k)``: Dirichlet pseudo-counts ``a`` (``α`` votes per row, a
  share ``prior_accuracy`` on the diagonal) keep every entry positive and keep a small
  pool from EM's degenerate answer.

It starts from the (weighted) plurality and stops when no posterior moves by more than
``tol``. Soft votes (probabilities) enter as fractional counts. The estimated accuracy of
each client, ``Σ_k prior_k π_i[k, k]``, comes with the posterior: a consensus whose accuracy
is estimated without labels. No labels of U are used.

Examples
--------
>>> import numpy as np
>>> from consensus.dawid_skene import dawid_skene_vote
>>> votes = np.array([[0, 1, 1, -1], [0, 1, 0, 1], [0, 1, 1, 1]])
>>> dawid_skene_vote(votes, n_classes=2).tolist()
[0, 1, 1, 1]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._base import Consensus
from ._validation import check_inputs

__all__ = ["DawidSkene", "DawidSkeneFit", "dawid_skene", "dawid_skene_vote"]


@dataclass(frozen=True)
class DawidSkeneFit:
    """What `dawid_skene` estimated from the votes.

    Attributes
    ----------
    posterior : ndarray of shape (n, C)
        ``P(y_j = k | votes)``; a NaN row where nobody voted.
    confusion : ndarray of shape (m, C, C)
        Each client's ``π_i[k, l] = P(says l | true class k)`` (rows sum to 1).
    prior : ndarray of shape (C,)
    accuracy : ndarray of shape (m,)
        Each client's estimated accuracy on the pool, ``Σ_k prior_k π_i[k, k]``.
    n_iter : int
        EM iterations run.
    unanimous : ndarray of int64, shape (n,)
        The class every voting client (weight > 0) gives an example (each client's argmax
        for soft votes), -1 where they disagree or nobody voted.
    """

    posterior: NDArray[np.float64]
    confusion: NDArray[np.float64]
    prior: NDArray[np.float64]
    accuracy: NDArray[np.float64]
    n_iter: int
    unanimous: NDArray[np.int64]


def _counts(checked: Any) -> NDArray[np.float64]:
    """One-hot (hard) or probability (soft) votes ``(m, n, C)``, times the weights."""
    values, n_classes = checked.values, checked.n_classes
    if checked.kind == "hard":
        onehot = (values[..., None] == np.arange(n_classes)).astype(np.float64)
    else:
        onehot = np.asarray(values, dtype=np.float64)
        if checked.present is not None:
            onehot = onehot * checked.present[..., None]
    if checked.weights is not None:  # relative weights: the largest counts 1, so that only
        w = checked.weights  # their ratios matter against the priors' pseudo-votes
        top = w.max() if w.size else 0.0
        w = w / top if top > 0 else w
        onehot = onehot * (w[:, None, None] if w.ndim == 1 else w[..., None])
    return np.asarray(onehot, dtype=np.float64)


def dawid_skene(
    labels: ArrayLike,
    n_classes: int,
    weights: ArrayLike | None = None,
    *,
    max_iter: int = 50,
    tol: float = 1e-6,
    alpha: float = 4.0,
    prior_accuracy: float = 0.7,
) -> DawidSkeneFit:
    """Dawid–Skene EM on the clients' votes (see the module docstring).

    Parameters
    ----------
    labels : array-like
        Hard votes ``(m, n)`` (-1 = did not vote) or probabilities ``(m, n, n_classes)``
        (all-NaN row = did not vote).
    n_classes : int
        Number of classes C.
    weights : array-like of shape (m,) or (m, n), optional
        Non-negative weight of each vote (a tempered likelihood), relative: the largest
        counts 1; None: all 1.
    max_iter : int, default=50
        Most EM iterations (>= 1).
    tol : float, default=1e-6
        Stop when no posterior entry moves by more than this (> 0).
    alpha : float, default=4.0
        Strength of the priors, in pseudo-votes (> 0): each confusion row starts from
        ``alpha`` votes, a share ``prior_accuracy`` of them for the true class, and the class
        prior from ``alpha`` examples per class. On a small pool they keep EM from the
        degenerate answer (one class everywhere, every client uninformative); on a large
        one the votes outweigh them.
    prior_accuracy : float, default=0.7
        The accuracy the confusion prior gives every client, in (1/C, 1) (any value in
        (0, 1) when there is one class: every vote is that class).

    Returns
    -------
    DawidSkeneFit

    Raises
    ------
    ValueError
        If the inputs or a parameter are invalid.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.integers(0, 2, 2000)
    >>> right = rng.random((5, 2000)) < np.array([[0.95], [0.6], [0.6], [0.6], [0.6]])
    >>> votes = np.where(right, truth, 1 - truth)
    >>> fit = dawid_skene(votes, n_classes=2)
    >>> np.round((votes == truth).mean(axis=1), 2).tolist()   # each client's true accuracy
    [0.95, 0.6, 0.61, 0.59, 0.61]
    >>> np.round(fit.accuracy, 2).tolist()   # estimated from the votes alone
    [0.88, 0.61, 0.63, 0.62, 0.63]
    >>> float((fit.posterior.argmax(axis=1) == truth).mean())   # the plain majority: 0.7985
    0.9435
    """
    checked = check_inputs(labels, n_classes, weights)
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    for name, value in (("tol", tol), ("alpha", alpha), ("prior_accuracy", prior_accuracy)):
        if isinstance(value, bool) or not np.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if checked.n_classes > 1 and not 1.0 / checked.n_classes < prior_accuracy < 1.0:
        raise ValueError(
            f"prior_accuracy must lie in (1/n_classes, 1) = ({1 / checked.n_classes:.3g}, 1), "
            f"got {prior_accuracy!r}"
        )
    counts = _counts(checked)  # (m, n, C)
    m, n, c = counts.shape
    votes_per_example = counts.sum(axis=(0, 2))
    voted = votes_per_example > 0
    start = counts.sum(axis=0)  # the (weighted) plurality's vote shares
    posterior = np.where(
        voted[:, None], start / np.where(voted, votes_per_example, 1.0)[:, None], 1.0 / c
    )
    confusion = np.full((m, c, c), 1.0 / c)
    # the Dirichlet prior of every confusion row: `alpha` pseudo-votes, a share
    # `prior_accuracy` of them on the diagonal (better than chance), the rest spread
    pseudo = np.full((c, c), alpha * (1.0 - prior_accuracy) / max(c - 1, 1))
    np.fill_diagonal(pseudo, alpha * prior_accuracy)
    prior = np.full(c, 1.0 / c)
    n_iter = 0
    while n_iter < int(max_iter):
        n_iter += 1
        # M-step: confusion matrices and the prior from the current posterior
        seen = np.einsum("jk,ijl->ikl", posterior[voted], counts[:, voted]) + pseudo
        confusion = seen / seen.sum(axis=2, keepdims=True)
        prior = posterior[voted].sum(axis=0) + alpha
        prior = prior / prior.sum()
        # E-step: the posterior of every example's class
        log_post = np.log(prior)[None, :] + np.einsum("ijl,ikl->jk", counts, np.log(confusion))
        log_post -= log_post.max(axis=1, keepdims=True)
        new = np.exp(log_post)
        new /= new.sum(axis=1, keepdims=True)
        new[~voted] = 1.0 / c
        moved = float(np.max(np.abs(new - posterior))) if n else 0.0
        posterior = new
        if moved <= tol:
            break
    posterior[~voted] = np.nan  # a fresh array (each E-step makes one)
    accuracy = np.einsum("k,ikk->i", prior, confusion)
    present = counts.sum(axis=2) > 0
    said = counts.argmax(axis=2)
    low = np.where(present, said, c).min(axis=0, initial=c)
    high = np.where(present, said, -1).max(axis=0, initial=-1)
    unanimous = np.where(voted & (low == high), low, -1).astype(np.int64)
    return DawidSkeneFit(posterior, confusion, prior, accuracy, n_iter, unanimous)


def dawid_skene_vote(
    labels: ArrayLike,
    n_classes: int,
    weights: ArrayLike | None = None,
    *,
    max_iter: int = 50,
    tol: float = 1e-6,
    alpha: float = 4.0,
    prior_accuracy: float = 0.7,
) -> NDArray[np.int64]:
    """The most probable class of each example under `dawid_skene` (ties to the smallest
    code), -1 where nobody voted. Where every voting client agrees, their label, whatever
    the model (EM may judge a client worse than chance and read its votes inverted: a
    unanimous vote is never overturned).

    Examples
    --------
    >>> import numpy as np
    >>> dawid_skene_vote(np.array([[1, -1], [1, -1]]), n_classes=2).tolist()
    [1, -1]
    """
    fit = dawid_skene(
        labels, n_classes, weights, max_iter=max_iter, tol=tol, alpha=alpha,
        prior_accuracy=prior_accuracy,
    )  # fmt: skip
    out = np.full(fit.posterior.shape[0], -1, dtype=np.int64)
    voted = ~np.isnan(fit.posterior[:, 0])
    out[voted] = np.argmax(fit.posterior[voted], axis=1)
    agreed = fit.unanimous >= 0
    out[agreed] = fit.unanimous[agreed]
    return out


class DawidSkene(Consensus):
    """Hard-label consensus by Dawid–Skene EM on the votes; see `dawid_skene`.

    Parameters
    ----------
    max_iter : int, default=50
    tol : float, default=1e-6
    alpha : float, default=4.0
    prior_accuracy : float, default=0.7
        As `dawid_skene`.

    Attributes
    ----------
    output : "hard"

    Examples
    --------
    >>> import numpy as np
    >>> rule = DawidSkene()
    >>> rule(np.array([[0, 1, 1], [0, 1, 0], [0, 1, 1]]), n_classes=2).tolist()
    [0, 1, 1]
    >>> rule
    DawidSkene(alpha=4.0, max_iter=50, prior_accuracy=0.7, tol=1e-06)
    """

    output: ClassVar[Literal["hard", "soft"]] = "hard"

    def __init__(
        self,
        *,
        max_iter: int = 50,
        tol: float = 1e-6,
        alpha: float = 4.0,
        prior_accuracy: float = 0.7,
    ) -> None:
        self.max_iter = max_iter
        self.tol = tol
        self.alpha = alpha
        self.prior_accuracy = prior_accuracy

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[Any]:
        return dawid_skene_vote(
            labels, n_classes, weights, max_iter=self.max_iter, tol=self.tol, alpha=self.alpha,
            prior_accuracy=self.prior_accuracy,
        )  # fmt: skip
