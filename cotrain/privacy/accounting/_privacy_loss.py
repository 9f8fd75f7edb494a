"""Exact privacy-loss laws: randomized response on a lattice, the Gaussian in closed form.

The privacy loss of a mechanism's worst-case pair (P, Q) is ``L = log P(y)/Q(y)`` with
``y ~ P``; ``δ(ε) = E[(1 − e^{ε − L})₊]`` (the hockey-stick divergence), and independent
mechanisms compose by adding their losses. This module holds the laws that are known exactly:

* K-ary randomized response, ``RandomizedResponseDpEvent(q, K)``: one changed label's loss is
  ``+ε₀`` (prob. ``1 − q + q/K``), ``−ε₀`` (prob. ``q/K``) or 0 (the rest), with
  ``ε₀ = log(1 + K(1 − q)/q)``. N labels give the law of ``ε₀ · (#plus − #minus)`` on the
  lattice ``ε₀·ℤ``, computed from the binomial (K = 2) or multinomial (K > 2) log-pmf with
  ``gammaln`` — every probability is relatively exact, tails included (no FFT, whose rounding
  noise swamps probabilities below ~1e-16), and probabilities below 1e-300 are dropped;
* the Gaussian mechanism with ``μ = Δ/σ``: ``L ~ N(μ²/2, μ²)``, composing to
  ``μ = (Σ μ_i²)^{1/2}``, whose δ has the closed form of Balle & Wang (2018) for every real ε:
  ``δ_G(x) = Φ(μ/2 − x/μ) − e^x Φ(−μ/2 − x/μ)``.

A composition of both is ``δ(ε) = Σ_j P(ℓ_j) · δ_G(ε − ℓ_j)`` over the discrete support
``ℓ_j`` of the randomized-response part, summed in log space, and inverted for ε by bisection
(:func:`epsilon_for_delta`). All names here are helpers of
:mod:`cotrain.privacy.accounting.composition`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize
from scipy.special import gammaln, log_ndtr, logsumexp

#: probabilities below this are dropped from a law (they cannot move any δ ≥ 1e-290)
TINY = 1e-300
_LOG_TINY = math.log(TINY)
#: entries of one multinomial grid block (memory bound of :func:`rr_lattice_law`)
_BLOCK = 1 << 21
#: largest count whose multinomial law is summed directly (larger: halves convolved)
_GRID_MAX = 256


@dataclass(frozen=True)
class LatticeLaw:
    """A loss law on the lattice ``step·ℤ``: ``P(L = (start + i)·step) = probs[i]``."""

    step: float
    start: int
    probs: np.ndarray

    def losses(self) -> np.ndarray:
        """The loss value of every entry of ``probs``."""
        return self.step * np.arange(self.start, self.start + self.probs.size, dtype=np.float64)

    def convolve(self, other: LatticeLaw) -> LatticeLaw:
        """The law of the sum of two independent losses on the same lattice (exact: a direct
        convolution of non-negative terms keeps every entry's relative precision)."""
        return trimmed(self.step, self.start + other.start, np.convolve(self.probs, other.probs))


def trimmed(step: float, start: int, probs: np.ndarray) -> LatticeLaw:
    """A :class:`LatticeLaw` with entries below :data:`TINY` zeroed and dropped at both ends."""
    probs = np.where(probs >= TINY, probs, 0.0)
    nonzero = np.flatnonzero(probs)
    if nonzero.size == 0:  # pragma: no cover - a law always keeps its mode
        return LatticeLaw(step, 0, np.ones(1))
    lo, hi = int(nonzero[0]), int(nonzero[-1]) + 1
    return LatticeLaw(step, start + lo, np.ascontiguousarray(probs[lo:hi]))


def rr_step(noise_parameter: float, num_buckets: int) -> tuple[float, float, float, float]:
    """One changed label's loss law under K-ary RR: ``(ε₀, P(+ε₀), P(−ε₀), P(0))``."""
    q, k = float(noise_parameter), int(num_buckets)
    minus = q / k
    plus = 1.0 - q + minus
    zero = (k - 2) * q / k
    eps0 = math.inf if q <= 0 else math.log1p(k * (1.0 - q) / q)
    return eps0, plus, minus, zero


def clear_cache() -> None:
    """Forget the cached multinomial laws (for timings)."""
    _multinomial_law.cache_clear()


def rr_lattice_law(noise_parameter: float, num_buckets: int, count: int) -> LatticeLaw:
    """Exact law of the loss of ``count`` compositions of K-ary RR, on the lattice ``ε₀·ℤ``.

    K = 2: ``#plus ~ Binomial(count, 1 − q/2)`` and ``L = ε₀ (2·#plus − count)``. K > 2: the
    multinomial law of (#plus, #minus, #zero), summed over the pairs with the same
    ``#plus − #minus``; pairs whose probability is below 1e-336 are never formed (the
    number of nonzero labels M is kept where its binomial log-pmf is above that, #plus where
    Pinsker's inequality does not rule it out). Counts above 256 are split in two halves
    whose laws are convolved directly (non-negative sums: no cancellation).
    """
    eps0, plus, minus, _ = rr_step(noise_parameter, num_buckets)
    n = int(count)
    if int(num_buckets) > 2:
        return _multinomial_law(float(noise_parameter), int(num_buckets), n)
    a = np.arange(n + 1, dtype=np.float64)
    logp = gammaln(n + 1.0) - gammaln(a + 1) - gammaln(n - a + 1) + a * math.log(plus)
    logp += (n - a) * math.log(minus)
    probs = np.zeros(2 * n + 1)
    probs[::2] = np.exp(logp)  # index i holds j = i − n; j ≡ n (mod 2)
    return trimmed(eps0, -n, probs)


@lru_cache(maxsize=256)
def _multinomial_law(noise_parameter: float, num_buckets: int, n: int) -> LatticeLaw:
    """:func:`rr_lattice_law` for K > 2 (cached: halves are reused by larger counts)."""
    eps0, plus, minus, zero = rr_step(noise_parameter, num_buckets)
    if n > _GRID_MAX:  # two halves, each exact, convolved
        half = n // 2
        left = _multinomial_law(noise_parameter, num_buckets, half)
        return left.convolve(_multinomial_law(noise_parameter, num_buckets, n - half))
    lgn = gammaln(n + 1.0)
    log_r, log_zero = math.log(plus + minus), math.log(zero)
    m_all = np.arange(n + 1, dtype=np.float64)
    log_pm = lgn - gammaln(m_all + 1) - gammaln(n - m_all + 1) + m_all * log_r
    log_pm += (n - m_all) * log_zero
    kept = np.flatnonzero(log_pm >= _LOG_TINY - 36.0)
    m_lo, m_hi = int(kept[0]), int(kept[-1])
    t = plus / (plus + minus)
    probs = np.zeros(2 * n + 1)  # index i holds j = i − n
    width = 2 * int(math.sqrt(400.0 * m_hi)) + 8
    rows = max(1, min(_BLOCK // width, int(math.sqrt(_BLOCK))))
    for first in range(m_lo, m_hi + 1, rows):
        m = np.arange(first, min(first + rows, m_hi + 1), dtype=np.float64)[:, None]
        # Pinsker: P(#plus = a | M) ≤ exp(−2M(a/M − t)²) < 1e-336 beyond this half-width
        half = int(math.sqrt(400.0 * float(m[-1, 0]))) + 2
        a_lo = max(0, int(t * float(m[0, 0])) - half)
        a_hi = min(int(m[-1, 0]), int(t * float(m[-1, 0])) + half + 1)
        a = np.arange(a_lo, a_hi + 1, dtype=np.float64)[None, :]
        b = m - a
        ok = b >= 0
        b = np.where(ok, b, 0.0)
        logp = lgn - gammaln(a + 1) - gammaln(b + 1) - gammaln(n - m + 1)
        logp += a * math.log(plus) + b * math.log(minus) + (n - m) * log_zero
        weight = np.where(ok, np.exp(logp), 0.0)
        idx = np.broadcast_to((a - b).astype(np.int64) + n, weight.shape)
        probs += np.bincount(idx.ravel(), weights=weight.ravel(), minlength=2 * n + 1)
    return trimmed(eps0, -n, probs)


def cross_support(
    laws: list[LatticeLaw], floor: float = TINY, max_points: int = 2_000_000
) -> tuple[np.ndarray, np.ndarray] | None:
    """Discrete support (losses, probs) of the sum of independent lattice laws.

    Laws on different lattices are combined by the outer sum of their supports, dropping
    probabilities below ``floor`` (with ``floor = δ·1e-20`` the dropped mass, at most
    ``max_points·floor``, moves δ(ε) by less than 1e-13 of δ); None when the outer sum would
    exceed ``max_points`` points.
    """
    losses = np.zeros(1)
    probs = np.ones(1)
    for law in laws:
        keep = law.probs >= floor
        values, weights = law.losses()[keep], law.probs[keep]
        if losses.size * values.size > max_points:
            return None
        losses = (losses[:, None] + values[None, :]).ravel()
        probs = (probs[:, None] * weights[None, :]).ravel()
        keep = probs >= floor
        losses, probs = losses[keep], probs[keep]
    return losses, probs


def log_delta_gaussian(x: np.ndarray | float, mu: float) -> np.ndarray:
    """``log δ_G(x)`` of the Gaussian pair with ``μ = Δ/σ``, for every real x (vectorised).

    ``δ_G(x) = Φ(μ/2 − x/μ) − e^x Φ(−μ/2 − x/μ)``; at μ = 0 it is ``(1 − e^x)₊``.
    """
    x = np.asarray(x, dtype=np.float64)
    if mu == 0.0:
        with np.errstate(divide="ignore"):
            return np.where(x < 0, np.log(-np.expm1(np.minimum(x, 0.0))), -np.inf)
    if math.isinf(mu):
        return np.zeros_like(x)
    la = log_ndtr(mu / 2.0 - x / mu)
    lb = x + log_ndtr(-mu / 2.0 - x / mu)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = la + np.log1p(-np.exp(lb - la))
    return np.where(lb < la, out, -np.inf)


def log_delta(eps: float, losses: np.ndarray, log_probs: np.ndarray, mu: float) -> float:
    """``log δ(ε)`` of the discrete law (losses, probs) plus an independent Gaussian μ."""
    terms = log_probs + log_delta_gaussian(eps - losses, mu)
    return float(logsumexp(terms)) if terms.size else -math.inf


def epsilon_for_delta(losses: np.ndarray, probs: np.ndarray, mu: float, delta: float) -> float:
    """Smallest ε ≥ 0 with ``δ(ε) ≤ delta`` for the discrete law plus a Gaussian μ.

    ``δ(ε)`` is continuous and decreasing; it is inverted by Brent's method on
    ``log δ(ε) − log delta`` to an absolute tolerance of 1e-12 in ε.
    """
    if math.isinf(mu):
        return math.inf
    keep = probs > 0
    losses = np.asarray(losses, dtype=np.float64)[keep]
    log_probs = np.log(np.asarray(probs, dtype=np.float64)[keep])
    log_target = math.log(delta)

    def excess(eps: float) -> float:
        return max(log_delta(eps, losses, log_probs, mu), -5000.0) - log_target

    if excess(0.0) <= 0:
        return 0.0
    hi = max(float(losses.max(initial=0.0)), 0.0) + 1.0
    while excess(hi) > 0:
        hi = 2.0 * hi + mu * mu
    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12, rtol=1e-15, maxiter=400))
