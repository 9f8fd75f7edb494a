"""The statistics of a one-run canary audit: p-value, empirical ε lower bound, power.

Steinke, Nasr & Jagielski (2023, "Privacy auditing with one (1) training run"): if a release
is (ε, δ)-DP with respect to the neighbouring relation that separates "canary i included"
from "canary i excluded", the number ``V`` of correct membership guesses out of ``r`` is
stochastically dominated by ``Binomial(r, e^ε / (1 + e^ε))`` (plus a δ term). This module
holds the arithmetic only; :mod:`cotrain.audit.canary` runs the experiment.

- :func:`canary_p_value` — the p-value of ``v`` correct guesses out of ``r`` under (ε, δ)-DP;
- :func:`canary_epsilon_lower_bound` — the largest ε those guesses reject at level β;
- :func:`max_certifiable_epsilon` — the **power** of a design: the largest ε that ``r``
  guesses among ``m`` canaries can ever certify (all guesses right). An audit of a claimed
  ε at or above it cannot fail, whatever the mechanism does.

Examples
--------
>>> round(max_certifiable_epsilon(500, 250), 2)     # 250 guesses cannot certify ε = 8
4.42
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np
from scipy import optimize, stats

from learners.checks import check_int

__all__ = [
    "canary_epsilon_lower_bound",
    "canary_p_value",
    "check_probability",
    "max_certifiable_epsilon",
]


def check_probability(value: Any, name: str, *, closed_low: bool) -> float:
    """``value`` as a float in [0, 1) (``closed_low``) or (0, 1), or a ValueError naming it.

    Examples
    --------
    >>> check_probability(0.05, "beta", closed_low=False)
    0.05
    """
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))
    low_ok = ok and (float(value) >= 0.0 if closed_low else float(value) > 0.0)
    if not (low_ok and float(value) < 1.0):
        side = "[0, 1)" if closed_low else "(0, 1)"
        raise ValueError(f"{name} must be a number in {side}, got {value!r}")
    return float(value)


def _counts(n_guesses: Any, n_correct: Any, n_canaries: Any) -> tuple[int, int, int]:
    r = check_int(n_guesses, "n_guesses", 0)
    v = check_int(n_correct, "n_correct", 0)
    m = r if n_canaries is None else check_int(n_canaries, "n_canaries", 0)
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
    delta = check_probability(delta, "delta", closed_low=True)
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
    beta = check_probability(beta, "beta", closed_low=False)
    delta = check_probability(delta, "delta", closed_low=True)
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


def max_certifiable_epsilon(
    n_canaries: int, n_guesses: int, *, beta: float = 0.05, delta: float = 0.0
) -> float:
    """The largest ε an audit with ``n_guesses`` guesses among ``n_canaries`` can certify.

    The lower bound of :func:`canary_epsilon_lower_bound` when every guess is right:
    ``sup{ε : canary_p_value(r, r, ε, δ, m) < β}``. No outcome of the audit gives more
    (for ``2 m δ <= 1`` the p-value falls as correct guesses rise: with
    ``α(v) = max_i P[v − i <= B < v] / i`` one has ``α(v + 1) − α(v) <= P[B = v]``, so
    ``p(v) − p(v + 1) >= P[B = v] (1 − 2 m δ) >= 0``; for ``2 m δ > 1`` every ``v`` is
    tried). A claimed ε at or above this value **cannot be refuted** by the design, however
    badly the mechanism leaks: such an audit cannot fail. With δ = 0,
    ``β^{1/r} = q``, so ``ε_max = logit(β^{1/r}) ≈ ln(r / ln(1/β))``: at β = 0.05
    certifying ε = 2 needs 24 guesses, ε = 8 about 8,950. With δ > 0 the term
    ``2 m δ α`` lowers it, sharply once ``2 m δ`` nears β.

    Parameters
    ----------
    n_canaries : int
        ``m``, all canaries (only the δ term uses it).
    n_guesses : int
        ``r = k_plus + k_minus`` (>= 1, <= ``n_canaries``).
    beta : float, default=0.05
        Confidence level of the audit (bound holds with probability >= 1 − β).
    delta : float, default=0.0
        δ of the (ε, δ) guarantee the audit would test.

    Returns
    -------
    float
        ε_max in nats (0.0 when even all-correct guesses reject nothing, e.g. a δ term
        ``2 m δ`` above β).

    Examples
    --------
    >>> round(max_certifiable_epsilon(500, 250), 3)          # the old benchmark's design
    4.418
    >>> round(max_certifiable_epsilon(1000, 1000, delta=1e-5), 3)
    5.782
    >>> round(max_certifiable_epsilon(100_000, 1000, delta=1e-4), 3)   # 2 m δ = 20
    0.569
    """
    m = check_int(n_canaries, "n_canaries", 1)
    r = check_int(n_guesses, "n_guesses", 1)
    if r > m:
        raise ValueError(f"n_guesses ({r}) cannot exceed n_canaries ({m})")
    beta = check_probability(beta, "beta", closed_low=False)
    delta = check_probability(delta, "delta", closed_low=True)
    if 2.0 * m * delta <= 1.0:
        return canary_epsilon_lower_bound(r, r, beta=beta, delta=delta, n_canaries=m)
    return max(
        canary_epsilon_lower_bound(r, v, beta=beta, delta=delta, n_canaries=m)
        for v in range(1, r + 1)
    )
