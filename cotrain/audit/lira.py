"""Likelihood-ratio membership attack (LiRA) on a client's released labels on the public pool.

What it measures
----------------
The adversary is the (honest-but-curious) server. It observes what a FedCT client actually
uploads: the client's hard labels on the public pool ``U`` (after the client's privacy
mechanism, if any) — never the model, which stays at the client, and with ``U`` the real
pool, not forged (to audit a forged pool, pass the forged pool as ``X_public``). It holds
``U`` and its own *population* data from the client's distribution (disjoint from the client's
data) and knows the client's learner, its release procedure (mechanism included) and the size
of its data. For a target record ``(x, y)`` it decides "x is in the client's private data".

The attack is online LiRA (Carlini et al. 2022, "Membership inference attacks from first
principles"), adapted to label-only releases:

1. *Reference clients.* ``n_reference`` times, the attacker builds a dataset that holds each
   target with probability 1/2 (balanced: every target is IN for exactly ``n_reference // 2``
   of them, OUT for the rest), filled up with population records to the client's data size,
   and calls the client's release procedure on it (a fresh mechanism draw each call).
2. *Per-target statistic.* A release is a label for each public point, so the statistic of
   target ``(x, y)`` is read from the public points nearest to ``x``: the vector
   ``a_j = 1[released label of x's j-th nearest public point == y]``, ``j = 1..n_neighbors``
   (:func:`neighbor_agreement`). A member pulls the labels of the public points around it
   towards its own label (for a 1-NN client exactly those of its Voronoi cell); a record the
   client never saw does not.
3. *Likelihood ratio.* From the reference releases the attacker estimates, per target, the
   distribution of the statistic when the target is IN and when it is OUT, and scores the
   client's real release by ``log p(a | IN) − log p(a | OUT)``:

   - ``model="bernoulli"`` (default): each ``a_j`` is a Bernoulli variable with its own IN and
     OUT rate per target (estimated with add-½ smoothing), the ``a_j`` independent given
     membership: the score is ``Σ_j log`` of the per-neighbour rate ratios. This is the exact
     likelihood ratio of the binary statistic under that independence assumption; Gaussians
     fit poorly to a handful of 0/1 values (the per-target variance is often 0).
   - ``model="gaussian"``: Carlini et al.'s parametric form on a scalar, the logit-scaled
     agreement ``φ = log((A + ½) / (k − A + ½))`` with ``A = Σ_j a_j``: a Gaussian per target
     for IN and for OUT. With few reference clients the variances are not estimated per target
     but pooled over all targets (``fix_variance``, by default when ``n_reference < 64``, as
     Carlini et al. recommend for few reference models); the means are always per target.

Members scored are the client's records, non-members records of the same distribution it
never saw; the result carries the AUC and the TPR at 0.1 % / 1 % FPR
(:class:`~cotrain.audit.metrics.AuditResult`, ``attack="lira"``). A high TPR at low FPR is
evidence of leakage about *specific* records, which the Yeom attack's AUC cannot show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.neighbors import NearestNeighbors

from cotrain.audit.metrics import AuditResult
from learners.checks import check_int

__all__ = ["LIRA_MODELS", "lira_attack", "neighbor_agreement"]

LIRA_MODELS = ("bernoulli", "gaussian")
"""Likelihood models of :func:`lira_attack` for the per-target statistic."""


def _features(X: Any, name: str) -> np.ndarray:
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of numeric features, got shape {arr.shape}")
    return arr


def _labels(y: Any, n: int, name: str) -> np.ndarray:
    arr = np.asarray(y)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
    return arr


def _public_neighbours(X: np.ndarray, X_public: np.ndarray, n_neighbors: int) -> np.ndarray:
    nn = NearestNeighbors(n_neighbors=n_neighbors).fit(X_public)
    return nn.kneighbors(X, return_distance=False)


def _released(release: Callable[[Any, Any], Any], X: Any, y: Any, n_public: int) -> np.ndarray:
    labels = np.asarray(release(X, y))
    if labels.shape != (n_public,):
        raise ValueError(
            f"release(X, y) must return one label per public point, shape ({n_public},); "
            f"got {labels.shape}"
        )
    return labels


def neighbor_agreement(
    released: Any, X: Any, y: Any, X_public: Any, *, n_neighbors: int = 1
) -> np.ndarray:
    """Whether the released labels of each record's nearest public points equal its label.

    Parameters
    ----------
    released : array-like of shape (n_public,)
        One release: a label for each public point.
    X : array-like of shape (n, n_features)
        Records (targets or canaries).
    y : array-like of shape (n,)
        Their labels.
    X_public : array-like of shape (n_public, n_features)
        The public pool the labels were released on.
    n_neighbors : int, default=1
        How many nearest public points (Euclidean) to read per record.

    Returns
    -------
    ndarray of bool, shape (n, n_neighbors)
        ``[i, j]``: the released label of record ``i``'s ``j``-th nearest public point is
        ``y[i]`` (nearest first).

    Examples
    --------
    >>> import numpy as np
    >>> X_public = np.array([[0.0], [1.0], [5.0]])
    >>> neighbor_agreement(["a", "a", "b"], [[0.1], [4.0]], ["a", "a"], X_public, n_neighbors=2)
    array([[ True,  True],
           [False,  True]])
    """
    Xp = _features(X_public, "X_public")
    Xr = _features(X, "X")
    labels = _labels(released, len(Xp), "released")
    y = _labels(y, len(Xr), "y")
    k = check_int(n_neighbors, "n_neighbors", 1, len(Xp))
    nb = _public_neighbours(Xr, Xp, k)
    return labels[nb] == y[:, None]


def _balanced_masks(n_reference: int, n_targets: int, rng: np.random.Generator) -> np.ndarray:
    """(n_reference, n_targets) bool: each column has exactly n_reference // 2 True."""
    keys = rng.random((n_reference, n_targets))
    ranks = keys.argsort(axis=0).argsort(axis=0)
    return ranks < n_reference // 2


def _bernoulli_scores(agree: np.ndarray, masks: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Σ_j log p(a_j | IN) / p(a_j | OUT), add-½ smoothed rates per target and neighbour."""
    n_in = masks.sum(axis=0)[:, None]  # (T, 1)
    n_out = (~masks).sum(axis=0)[:, None]
    a = agree.astype(np.float64)
    hits_in = np.einsum("rt,rtk->tk", masks.astype(np.float64), a)
    hits_out = np.einsum("rt,rtk->tk", (~masks).astype(np.float64), a)
    p_in = (hits_in + 0.5) / (n_in + 1.0)
    p_out = (hits_out + 0.5) / (n_out + 1.0)
    llr = np.where(observed, np.log(p_in / p_out), np.log((1 - p_in) / (1 - p_out)))
    return llr.sum(axis=1)


def _logit_agreement(agree: np.ndarray) -> np.ndarray:
    k = agree.shape[-1]
    hits = agree.sum(axis=-1)
    return np.log((hits + 0.5) / (k - hits + 0.5))


def _gaussian_scores(
    agree: np.ndarray, masks: np.ndarray, observed: np.ndarray, fix_variance: bool
) -> np.ndarray:
    stat = _logit_agreement(agree)  # (R, T)
    obs = _logit_agreement(observed)  # (T,)
    w_in = masks.astype(np.float64)
    w_out = 1.0 - w_in
    mu_in = (w_in * stat).sum(0) / w_in.sum(0)
    mu_out = (w_out * stat).sum(0) / w_out.sum(0)
    var_in = (w_in * (stat - mu_in) ** 2).sum(0) / w_in.sum(0)
    var_out = (w_out * (stat - mu_out) ** 2).sum(0) / w_out.sum(0)
    pooled = float(np.mean(np.r_[var_in, var_out]))
    floor = max(0.01 * pooled, 1e-6)  # a target whose statistic never varies
    if fix_variance:
        var_in = var_out = np.full_like(mu_in, max(pooled, 1e-6))
    else:
        var_in, var_out = np.maximum(var_in, floor), np.maximum(var_out, floor)

    def log_pdf(v: np.ndarray, mu: np.ndarray, var: np.ndarray) -> np.ndarray:
        return -0.5 * (np.log(2 * np.pi * var) + (v - mu) ** 2 / var)

    return log_pdf(obs, mu_in, var_in) - log_pdf(obs, mu_out, var_out)


def lira_attack(
    release: Callable[[Any, Any], Any],
    X_members: Any,
    y_members: Any,
    X_nonmembers: Any,
    y_nonmembers: Any,
    X_population: Any,
    y_population: Any,
    X_public: Any,
    *,
    n_reference: int = 16,
    n_neighbors: int = 10,
    model: str = "bernoulli",
    fix_variance: bool | None = None,
    target_release: Any = None,
    random_state: int | np.random.Generator | None = None,
) -> AuditResult:
    """Online LiRA with reference clients against a client's released labels on ``U``.

    See :mod:`cotrain.audit.lira` for the threat model and the statistic.

    Parameters
    ----------
    release : callable
        ``release(X, y) -> labels`` of shape ``(n_public,)``: the client's release procedure
        (fit its learner on ``(X, y)``, label ``X_public``, apply its privacy mechanism with a
        **fresh** random draw on every call).
    X_members, y_members : array-like
        The client's private data (the targets that are members).
    X_nonmembers, y_nonmembers : array-like
        Targets from the same distribution the client never saw.
    X_population, y_population : array-like
        The attacker's own data, disjoint from all targets, used to fill the reference
        datasets up to the client's data size (may be empty, shape ``(0, n_features)``).
    X_public : array-like of shape (n_public, n_features)
        The public pool the labels are released on.
    n_reference : int, default=16
        Reference clients (>= 2); each target is IN for ``n_reference // 2`` of them.
    n_neighbors : int, default=10
        Public points read per target (:func:`neighbor_agreement`).
    model : {"bernoulli", "gaussian"}, default="bernoulli"
        Likelihood model of the statistic (module docstring).
    fix_variance : bool, optional
        Gaussian model only: pool the variance over targets (default: when
        ``n_reference < 64``).
    target_release : array-like of shape (n_public,), optional
        The labels the client actually released; default ``release(X_members, y_members)``.
    random_state : int or Generator, optional
        Seeds the IN/OUT assignment and the population fill (not the mechanism, whose
        freshness is ``release``'s business).

    Returns
    -------
    AuditResult
        ``attack="lira"``, with the AUC and TPR at 0.1 % / 1 % FPR.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.neighbors import KNeighborsClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = rng.integers(0, 2, 500)   # labels are pure noise
    >>> X_pub = rng.normal(size=(300, 2))
    >>> def release(X_, y_):
    ...     return KNeighborsClassifier(1).fit(X_, y_).predict(X_pub)
    >>> res = lira_attack(release, X[:100], y[:100], X[100:200], y[100:200], X[200:], y[200:],
    ...                   X_pub, n_reference=16, random_state=0)
    >>> res.attack, res.auc > 0.7
    ('lira', True)
    """
    if not callable(release):
        raise TypeError("release must be callable: release(X, y) -> labels on X_public")
    Xp = _features(X_public, "X_public")
    Xm = _features(X_members, "X_members")
    Xn = _features(X_nonmembers, "X_nonmembers")
    Xpop = _features(X_population, "X_population")
    for name, arr in (("X_members", Xm), ("X_nonmembers", Xn), ("X_population", Xpop)):
        if arr.shape[1] != Xp.shape[1]:
            raise ValueError(f"{name} has {arr.shape[1]} features, X_public has {Xp.shape[1]}")
    ym = _labels(y_members, len(Xm), "y_members")
    yn = _labels(y_nonmembers, len(Xn), "y_nonmembers")
    ypop = _labels(y_population, len(Xpop), "y_population")
    if len(ym) == 0 or len(yn) == 0:
        raise ValueError("lira_attack needs at least one member and one non-member")
    n_reference = check_int(n_reference, "n_reference", 2)
    k = check_int(n_neighbors, "n_neighbors", 1, len(Xp))
    if model not in LIRA_MODELS:
        raise ValueError(f"model must be one of {LIRA_MODELS}, got {model!r}")
    if fix_variance is None:
        fix_variance = n_reference < 64
    rng = np.random.default_rng(random_state)

    X_t = np.concatenate([Xm, Xn])
    y_t = np.concatenate([ym, yn])
    nb = _public_neighbours(X_t, Xp, k)  # (T, k)
    if target_release is None:
        observed_labels = _released(release, X_members, y_members, len(Xp))
    else:
        observed_labels = _labels(target_release, len(Xp), "target_release")
    observed = observed_labels[nb] == y_t[:, None]

    masks = _balanced_masks(n_reference, len(y_t), rng)
    n_train = len(ym)
    agree = np.empty((n_reference, len(y_t), k), dtype=bool)
    for r in range(n_reference):
        inside = np.flatnonzero(masks[r])
        n_fill = min(max(n_train - inside.size, 0), len(ypop))
        fill = rng.choice(len(ypop), size=n_fill, replace=False)
        X_ref = np.concatenate([X_t[inside], Xpop[fill]])
        y_ref = np.concatenate([y_t[inside], ypop[fill]])
        order = rng.permutation(len(y_ref))  # no learner sees targets first by construction
        labels = _released(release, X_ref[order], y_ref[order], len(Xp))
        agree[r] = labels[nb] == y_t[:, None]

    if model == "bernoulli":
        scores = _bernoulli_scores(agree, masks, observed)
    else:
        scores = _gaussian_scores(agree, masks, observed, bool(fix_variance))
    return AuditResult.from_scores(scores[: len(ym)], scores[len(ym) :], attack="lira")
