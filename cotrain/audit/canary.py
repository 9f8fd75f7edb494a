"""One-run privacy auditing with canaries: an empirical lower bound on a release's ε.

What it measures
----------------
Steinke, Nasr & Jagielski (2023, "Privacy auditing with one (1) training run"): ``m`` canary
records are each put into the client's private data independently with probability 1/2;
the client releases **once** (one call of its release procedure, or one federated run); the
auditor — here the server, which sees the released labels on the public pool ``U`` — scores
every canary from the release, guesses IN for the ``k_plus`` highest scores, OUT for the
``k_minus`` lowest and abstains on the rest. If the release is ε-DP with respect to one
record of the client's data (*record-level* ε, the unit every ε in cotrain is stated in
unless marked otherwise), the number ``V`` of correct guesses out of ``r = k_plus + k_minus``
is stochastically dominated by ``Binomial(r, e^ε / (1 + e^ε))``. Observing ``v`` correct
guesses therefore rejects "ε-DP" at level β whenever ``P[Binomial(r, q_ε) ≥ v] < β``; the
largest such ε is the **empirical lower bound** :func:`canary_epsilon_lower_bound` — with
probability at least 1 − β (over the canary coin flips and the mechanism) it does not exceed
the true ε of the release. A bound *above* an accounted ε is proof, at confidence 1 − β, that
the accounting (or the implementation) is wrong.

With δ > 0, the (ε, δ)-DP form of their theorem, as in their reference code, adds
``2 m δ · max_{i=1..v} P[v − i ≤ Binomial(r, q_ε) < v] / i`` to the p-value
(:func:`canary_p_value`). With δ = 0 the bound is exact for pure ε-DP mechanisms such as
randomized response; for an (ε, δ) mechanism give its δ.

The bound is a lower bound for the *one* canary design used; it is loose by design (one run,
``m`` canaries bound it by roughly ``log(m)``), and a value of 0 means "no evidence of
leakage", not "private".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy import optimize, stats

from cotrain.audit.lira import neighbor_agreement
from cotrain.audit.metrics import AuditResult

__all__ = [
    "CanaryAudit",
    "canary_epsilon_lower_bound",
    "canary_p_value",
    "make_canaries",
    "one_run_audit",
]


def _int(value: Any, name: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _prob(value: Any, name: str, *, closed_low: bool) -> float:
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))
    low_ok = ok and (float(value) >= 0.0 if closed_low else float(value) > 0.0)
    if not (low_ok and float(value) < 1.0):
        side = "[0, 1)" if closed_low else "(0, 1)"
        raise ValueError(f"{name} must be a number in {side}, got {value!r}")
    return float(value)


def _counts(n_guesses: Any, n_correct: Any, n_canaries: Any) -> tuple[int, int, int]:
    r = _int(n_guesses, "n_guesses")
    v = _int(n_correct, "n_correct")
    m = r if n_canaries is None else _int(n_canaries, "n_canaries")
    if v > r:
        raise ValueError(f"n_correct ({v}) cannot exceed n_guesses ({r})")
    if r > m:
        raise ValueError(f"n_guesses ({r}) cannot exceed n_canaries ({m})")
    return r, v, m


def canary_p_value(
    n_guesses: int,
    n_correct: int,
    epsilon: float,
    *,
    delta: float = 0.0,
    n_canaries: int | None = None,
) -> float:
    """P-value of ``n_correct`` correct guesses out of ``n_guesses`` under (ε, δ)-DP.

    ``P[Binomial(r, q) ≥ v] + 2 m δ · max_{i=1..v} P[v − i ≤ Binomial(r, q) < v] / i`` with
    ``q = e^ε / (1 + e^ε)``, capped at 1 (Steinke, Nasr & Jagielski 2023).

    Parameters
    ----------
    n_guesses : int
        ``r``: canaries guessed (not abstained on).
    n_correct : int
        ``v``: correct guesses.
    epsilon : float
        The ε of the null hypothesis "the release is (ε, δ)-DP" (>= 0).
    delta : float, default=0.0
        The δ of the null hypothesis.
    n_canaries : int, optional
        ``m``, all canaries (guessed or not); only the δ term uses it. Default ``n_guesses``.

    Returns
    -------
    float

    Examples
    --------
    >>> round(canary_p_value(10, 10, 0.0), 6)       # ten right coin flips: 2**-10
    0.000977
    >>> canary_p_value(10, 0, 1.0)
    1.0
    """
    r, v, m = _counts(n_guesses, n_correct, n_canaries)
    if isinstance(epsilon, bool) or not isinstance(epsilon, Real) or not float(epsilon) >= 0:
        raise ValueError(f"epsilon must be a number >= 0, got {epsilon!r}")
    delta = _prob(delta, "delta", closed_low=True)
    q = 1.0 / (1.0 + math.exp(-float(epsilon)))
    p = float(stats.binom.sf(v - 1, r, q))
    if delta > 0.0 and v > 0:
        below = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)  # P[B = v-1], P[B = v-2], ...
        alpha = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
        p += 2.0 * m * delta * alpha
    return min(p, 1.0)


def canary_epsilon_lower_bound(
    n_guesses: int,
    n_correct: int,
    *,
    beta: float = 0.05,
    delta: float = 0.0,
    n_canaries: int | None = None,
) -> float:
    """Largest ε that ``n_correct`` of ``n_guesses`` correct canary guesses reject at level β.

    ``sup{ε ≥ 0 : canary_p_value(r, v, ε, δ) < β}``, 0.0 when even ε = 0 is not rejected.
    With δ = 0 it is computed in closed form: ``logit(q)`` for the one-sided Clopper-Pearson
    lower confidence limit ``q`` of the guessing accuracy (``P[Binomial(r, q) ≥ v] = β``);
    with δ > 0 by root finding on :func:`canary_p_value`.

    Parameters
    ----------
    n_guesses, n_correct : int
        ``r`` and ``v``.
    beta : float, default=0.05
        The bound holds with probability >= 1 − β.
    delta : float, default=0.0
        δ of the (ε, δ) guarantee audited.
    n_canaries : int, optional
        ``m`` (δ term only); default ``n_guesses``.

    Returns
    -------
    float
        The empirical ε lower bound (same unit as the DP guarantee of the audited release:
        one canary = one private record).

    Examples
    --------
    >>> round(canary_epsilon_lower_bound(100, 100), 3)        # 0.05 ** (1 / 100) = q
    3.493
    >>> canary_epsilon_lower_bound(100, 50)
    0.0
    >>> round(canary_epsilon_lower_bound(1000, 900), 3)
    2.021
    >>> round(canary_epsilon_lower_bound(1000, 900, delta=1e-3, n_canaries=1000), 3)
    1.928
    """
    r, v, m = _counts(n_guesses, n_correct, n_canaries)
    beta = _prob(beta, "beta", closed_low=False)
    delta = _prob(delta, "delta", closed_low=True)
    if v == 0:
        return 0.0
    if delta == 0.0:
        q = float(stats.beta.ppf(beta, v, r - v + 1))
        return float(math.log(q / (1.0 - q))) if q > 0.5 else 0.0
    if canary_p_value(r, v, 0.0, delta=delta, n_canaries=m) >= beta:
        return 0.0

    def excess(eps: float) -> float:
        return canary_p_value(r, v, eps, delta=delta, n_canaries=m) - beta

    high = 1.0
    while excess(high) < 0.0:
        high *= 2.0
        if high > 1e3:  # pragma: no cover - all guesses right with a vanishing β
            return high
    return float(optimize.brentq(excess, 0.0, high, xtol=1e-10))


def make_canaries(
    X_public: Any, classes: Any, n_canaries: int, *, random_state: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Canaries for a label release on ``U``: copies of distinct public points, random labels.

    A canary sits exactly on a public point, so the released label of that point is the
    natural place to read it (``n_neighbors=1`` in :func:`one_run_audit`), and carries a
    label drawn uniformly from ``classes`` (the auditor needs no true label of ``U``): a
    member canary pulls its public point towards a label the point would otherwise get with
    probability about 1/C.

    Parameters
    ----------
    X_public : array-like of shape (n_public, n_features)
    classes : array-like
        The labels to draw from.
    n_canaries : int
        ``m`` <= n_public.
    random_state : int or Generator, optional

    Returns
    -------
    X_canaries : ndarray of shape (m, n_features)
    y_canaries : ndarray of shape (m,)

    Examples
    --------
    >>> import numpy as np
    >>> Xc, yc = make_canaries(np.eye(4), [0, 1], 3, random_state=0)
    >>> Xc.shape, sorted(set(yc.tolist()) - {0, 1})
    ((3, 4), [])
    """
    Xp = np.asarray(X_public, dtype=np.float64)
    if Xp.ndim != 2:
        raise ValueError(f"X_public must be 2-D, got shape {Xp.shape}")
    m = _int(n_canaries, "n_canaries", 1)
    if m > len(Xp):
        raise ValueError(f"n_canaries ({m}) cannot exceed the public points ({len(Xp)})")
    classes = np.asarray(classes)
    if classes.ndim != 1 or classes.size < 2:
        raise ValueError("classes must list at least two labels")
    rng = np.random.default_rng(random_state)
    rows = rng.choice(len(Xp), size=m, replace=False)
    return Xp[rows].copy(), classes[rng.integers(0, classes.size, size=m)]


@dataclass(frozen=True)
class CanaryAudit:
    """Outcome of :func:`one_run_audit`.

    Attributes
    ----------
    epsilon_lower_bound : float
        Empirical record-level ε lower bound at confidence ``1 − beta``.
    beta, delta : float
        Confidence parameter and the δ audited.
    n_canaries, n_included : int
        ``m`` and how many canaries the coin flips put into the client's data.
    n_guesses, n_correct : int
        ``r = k_plus + k_minus`` and the correct guesses ``v``.
    membership : AuditResult
        The canary scores as a membership attack (``attack="canary"``): AUC and TPR at
        0.1 % / 1 % FPR of included against excluded canaries.

    Examples
    --------
    >>> CanaryAudit(0.0, 0.05, 0.0, 10, 5, 4, 2, AuditResult(0.5, "canary", 5, 5)).accuracy
    0.5
    """

    epsilon_lower_bound: float
    beta: float
    delta: float
    n_canaries: int
    n_included: int
    n_guesses: int
    n_correct: int
    membership: AuditResult

    @property
    def accuracy(self) -> float:
        """Share of correct guesses ``v / r``."""
        return self.n_correct / self.n_guesses if self.n_guesses else float("nan")

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (for JSON)."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "membership"}
        out["membership"] = self.membership.as_dict()
        return out


def one_run_audit(
    release: Callable[[Any, Any], Any],
    X: Any,
    y: Any,
    X_canaries: Any,
    y_canaries: Any,
    X_public: Any,
    *,
    k_plus: int,
    k_minus: int = 0,
    n_neighbors: int = 1,
    beta: float = 0.05,
    delta: float = 0.0,
    random_state: Any = None,
) -> CanaryAudit:
    """Run the one-release canary experiment against ``release`` and bound its ε from below.

    Each canary joins the client's data ``(X, y)`` with probability 1/2 (independent coin
    flips); ``release`` is called **once** on the result; canary ``i`` is scored by the share
    of its ``n_neighbors`` nearest public points whose released label is ``y_canaries[i]``
    (:func:`~cotrain.audit.lira.neighbor_agreement`); the auditor guesses IN for the
    ``k_plus`` highest scores and OUT for the ``k_minus`` lowest (ties broken at random,
    independently of the coin flips), and :func:`canary_epsilon_lower_bound` turns the number
    of correct guesses into the bound. ``k_plus`` and ``k_minus`` must be fixed before the
    run: choosing them after seeing the scores voids the confidence level.

    Parameters
    ----------
    release : callable
        ``release(X, y) -> labels`` on ``X_public``, shape ``(n_public,)`` (the client's
        learner, its labelling of ``U`` and its privacy mechanism).
    X, y : array-like
        The client's own private data (always included).
    X_canaries, y_canaries : array-like
        The ``m`` canaries (e.g. from :func:`make_canaries`).
    X_public : array-like of shape (n_public, n_features)
    k_plus, k_minus : int
        Guesses IN and OUT (``k_plus + k_minus <= m``).
    n_neighbors : int, default=1
        Public points read per canary.
    beta : float, default=0.05
        Confidence: the bound holds with probability >= 1 − β.
    delta : float, default=0.0
        δ of the guarantee audited (0 for pure ε-DP mechanisms).
    random_state : int or Generator, optional
        Seeds the coin flips and the tie-breaking (not the mechanism).

    Returns
    -------
    CanaryAudit

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.neighbors import KNeighborsClassifier
    >>> rng = np.random.default_rng(0)
    >>> X_pub = rng.normal(size=(400, 5)); X = rng.normal(size=(100, 5))
    >>> y = rng.integers(0, 10, 100)
    >>> release = lambda X_, y_: KNeighborsClassifier(1).fit(X_, y_).predict(X_pub)
    >>> Xc, yc = make_canaries(X_pub, np.arange(10), 200, random_state=1)
    >>> audit = one_run_audit(release, X, y, Xc, yc, X_pub, k_plus=50, k_minus=50, random_state=2)
    >>> audit.n_correct, round(audit.epsilon_lower_bound, 2)
    (98, 2.72)
    """
    if not callable(release):
        raise TypeError("release must be callable: release(X, y) -> labels on X_public")
    Xd = np.asarray(X, dtype=np.float64)
    Xc = np.asarray(X_canaries, dtype=np.float64)
    Xp = np.asarray(X_public, dtype=np.float64)
    yd, yc = np.asarray(y), np.asarray(y_canaries)
    if Xd.ndim != 2 or Xc.ndim != 2 or Xp.ndim != 2:
        raise ValueError("X, X_canaries and X_public must be 2-D feature arrays")
    if len(yd) != len(Xd) or len(yc) != len(Xc):
        raise ValueError("X and y (X_canaries and y_canaries) must have the same length")
    if not (Xd.shape[1] == Xc.shape[1] == Xp.shape[1]):
        raise ValueError("X, X_canaries and X_public must have the same number of features")
    m = len(yc)
    kp = _int(k_plus, "k_plus")
    km = _int(k_minus, "k_minus")
    if kp + km == 0 or kp + km > m:
        raise ValueError(f"k_plus + k_minus must be in 1..{m} (the canaries), got {kp + km}")
    beta = _prob(beta, "beta", closed_low=False)
    delta = _prob(delta, "delta", closed_low=True)
    if isinstance(n_neighbors, bool) or not isinstance(n_neighbors, Integral):
        raise ValueError(f"n_neighbors must be an integer >= 1, got {n_neighbors!r}")
    rng = np.random.default_rng(random_state)

    included = rng.random(m) < 0.5
    X_run = np.concatenate([Xd, Xc[included]])
    y_run = np.concatenate([yd, yc[included]])
    order = rng.permutation(len(y_run))
    labels = np.asarray(release(X_run[order], y_run[order]))
    if labels.shape != (len(Xp),):
        raise ValueError(f"release must return shape ({len(Xp)},), got {labels.shape}")
    scores = neighbor_agreement(labels, Xc, yc, Xp, n_neighbors=n_neighbors).mean(axis=1)

    ranking = np.lexsort((rng.random(m), -scores))  # highest score first, random ties
    guess_in, guess_out = ranking[:kp], ranking[m - km :] if km else ranking[:0]
    correct = int(included[guess_in].sum() + (~included[guess_out]).sum())
    eps = canary_epsilon_lower_bound(kp + km, correct, beta=beta, delta=delta, n_canaries=m)
    if included.all() or not included.any():
        membership = AuditResult(
            float("nan"), "canary", int(included.sum()), int(m - included.sum())
        )
    else:
        membership = AuditResult.from_scores(scores[included], scores[~included], attack="canary")
    return CanaryAudit(
        epsilon_lower_bound=eps,
        beta=beta,
        delta=delta,
        n_canaries=m,
        n_included=int(included.sum()),
        n_guesses=kp + km,
        n_correct=correct,
        membership=membership,
    )
