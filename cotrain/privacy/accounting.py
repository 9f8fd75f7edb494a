"""Privacy accounting across rounds: the total (ε, δ) of a list of privacy events.

Every round a client takes part in, it releases its labels on the public pool once through a
label mechanism (:mod:`cotrain.privacy.mechanisms`); ``mechanism.dp_event(C, |U|)`` describes
that one release as a ``dp_accounting`` event. :func:`epsilon_spent` composes a client's list
of events into the smallest ε such that the whole run is (ε, δ)-DP with respect to one record
of the client's private data (replace-one neighbours).

Accountant choice (``accountant="auto"``, the default):

* **only randomized-response events of one kind** (``RandomizedResponse`` and
  ``XORMechanism`` produce these, see :func:`rr_event`): exact composition. The privacy loss
  of N compositions of K-ary randomized response is a sum of N independent per-label losses in
  ``{+ε₀, 0, −ε₀}``; its distribution is computed on that lattice (binomial for K = 2, FFT
  otherwise) and ``δ(ε) = E[(1 − e^{ε − L})₊]`` is inverted by bisection. This is the exact
  optimal composition: dp-accounting's PLD accountant gives an upper bound of it that is far
  looser when ε₀ is tiny (XOR with a large s*: per-bit ε₀ = ε/s* is below its discretisation
  interval), and it silently ignores the repeat count of a ``SelfComposedDpEvent`` wrapping a
  ``RandomizedResponseDpEvent`` (the PLD pitfall), which this module never relies on;
* **only Gaussian events**: exact. N Gaussian mechanisms with noise multipliers z_i compose to
  one Gaussian mechanism with ``z = (Σ z_i⁻²)^{-1/2}``, whose ε at δ is the analytic Gaussian
  formula of Balle & Wang (2018), :func:`gaussian_epsilon`;
* **a mix of the two**: dp-accounting's PLD built per distinct event with
  ``PrivacyLossDistribution.from_randomized_response(...).self_compose(count)`` (the count is
  applied explicitly, never through the accountant; ``REPLACE_ONE``) or
  ``from_gaussian_mechanism`` (its default relation: the mechanisms' Δ₂ is already the
  replace-one sensitivity, which dp-accounting's ``REPLACE_ONE`` would double), then
  composed; a valid, somewhat loose upper bound;
* **any other event** (e.g. a sampled Gaussian): dp-accounting's ``PLDAccountant`` fed the
  list, falling back to its ``RdpAccountant``;
* **without dp-accounting**, or when no accountant supports an event: basic composition
  (:func:`basic_composition`), the sum of per-event ε — each randomized-response label is
  ε₀-DP, each Gaussian gets an equal share of δ — with a ``RuntimeWarning`` saying so.

``accountant="pld"``, ``"rdp"`` or ``"basic"`` forces one of dp-accounting's accountants (the
list is expanded into single events, so no repeat count is ever ignored) or basic composition.

Examples
--------
>>> from cotrain.privacy import RandomizedResponse, epsilon_spent
>>> rr = RandomizedResponse(epsilon=1.0)
>>> event = rr.dp_event(n_classes=10, n_labels=1000)
>>> round(epsilon_spent([event], delta=1e-5), 3)      # one round: ε (minus a sliver of δ)
1.0
>>> ten = epsilon_spent([event] * 10, delta=1e-5)
>>> 1.0 < ten < 10.0                                  # better than basic composition
True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any, Literal

import numpy as np
from scipy import optimize, stats

__all__ = [
    "GaussianEvent",
    "NoOpEvent",
    "RandomizedResponseEvent",
    "SelfComposedEvent",
    "basic_composition",
    "epsilon_spent",
    "gaussian_epsilon",
    "gaussian_event",
    "gaussian_noise_multiplier",
    "is_accounted",
    "noop_event",
    "rr_epsilon",
    "rr_event",
    "self_composed",
]


# --------------------------------------------------------------------------------------------
# events: dp_accounting's when installed, otherwise light stand-ins with the same attributes
# --------------------------------------------------------------------------------------------


def _dp() -> Any:
    """The ``dp_accounting`` module, or None when it is not installed."""
    try:
        import dp_accounting
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return dp_accounting


@dataclass(frozen=True)
class RandomizedResponseEvent:
    """Stand-in for ``dp_accounting.RandomizedResponseDpEvent`` (used without dp-accounting)."""

    noise_parameter: float
    num_buckets: int


@dataclass(frozen=True)
class GaussianEvent:
    """Stand-in for ``dp_accounting.GaussianDpEvent`` (used without dp-accounting)."""

    noise_multiplier: float


@dataclass(frozen=True)
class SelfComposedEvent:
    """Stand-in for ``dp_accounting.SelfComposedDpEvent`` (used without dp-accounting)."""

    event: Any
    count: int


@dataclass(frozen=True)
class NoOpEvent:
    """Stand-in for ``dp_accounting.NoOpDpEvent`` (used without dp-accounting)."""


def rr_event(noise_parameter: float, num_buckets: int) -> Any:
    """A randomized-response event: with prob. ``noise_parameter`` output a uniformly random
    bucket out of ``num_buckets`` (possibly the true one), else the true value.

    Examples
    --------
    >>> rr_event(0.5, 2)
    RandomizedResponseDpEvent(noise_parameter=0.5, num_buckets=2)
    """
    dp = _dp()
    if dp is None:  # pragma: no cover
        return RandomizedResponseEvent(float(noise_parameter), int(num_buckets))
    return dp.RandomizedResponseDpEvent(float(noise_parameter), int(num_buckets))


def gaussian_event(noise_multiplier: float) -> Any:
    """A Gaussian-mechanism event (noise std / L2 sensitivity = ``noise_multiplier``).

    Examples
    --------
    >>> gaussian_event(2.0)
    GaussianDpEvent(noise_multiplier=2.0)
    """
    dp = _dp()
    if dp is None:  # pragma: no cover
        return GaussianEvent(float(noise_multiplier))
    return dp.GaussianDpEvent(float(noise_multiplier))


def self_composed(event: Any, count: int) -> Any:
    """``count`` independent repetitions of ``event`` (``event`` itself when count == 1).

    Examples
    --------
    >>> self_composed(gaussian_event(1.0), 3)
    SelfComposedDpEvent(event=GaussianDpEvent(noise_multiplier=1.0), count=3)
    """
    if count == 1:
        return event
    dp = _dp()
    if dp is None:  # pragma: no cover
        return SelfComposedEvent(event, int(count))
    return dp.SelfComposedDpEvent(event, int(count))


def noop_event() -> Any:
    """An event that releases nothing private (ε = 0).

    Examples
    --------
    >>> noop_event()
    NoOpDpEvent()
    """
    dp = _dp()
    if dp is None:  # pragma: no cover
        return NoOpEvent()
    return dp.NoOpDpEvent()


_RR_NAMES = {"RandomizedResponseDpEvent", "RandomizedResponseEvent"}
_GAUSS_NAMES = {"GaussianDpEvent", "GaussianEvent"}
_NOOP_NAMES = {"NoOpDpEvent", "NoOpEvent"}
_SELF_NAMES = {"SelfComposedDpEvent", "SelfComposedEvent"}
_COMPOSED_NAMES = {"ComposedDpEvent"}


def _flatten(events: Iterable[Any]) -> tuple[dict[tuple[str, tuple[float, ...]], int], list]:
    """Count the leaf events: ``{("rr", (q, K)) | ("gauss", (z,)): count}`` and the others."""
    known: dict[tuple[str, tuple[float, ...]], int] = {}
    other: list[tuple[Any, int]] = []

    def visit(event: Any, count: int) -> None:
        name = type(event).__name__
        if count == 0 or name in _NOOP_NAMES:
            return
        if name in _SELF_NAMES:
            visit(event.event, count * int(event.count))
        elif name in _COMPOSED_NAMES:
            for e in event.events:
                visit(e, count)
        elif name in _RR_NAMES:
            if int(event.num_buckets) <= 1:
                return
            key = ("rr", (float(event.noise_parameter), float(int(event.num_buckets))))
            known[key] = known.get(key, 0) + count
        elif name in _GAUSS_NAMES:
            key = ("gauss", (float(event.noise_multiplier),))
            known[key] = known.get(key, 0) + count
        else:
            other.append((event, count))

    for ev in events:
        visit(ev, 1)
    return known, other


# --------------------------------------------------------------------------------------------
# closed forms
# --------------------------------------------------------------------------------------------


def rr_epsilon(noise_parameter: float, num_buckets: int) -> float:
    """Pure ε of one randomized-response release: ``ln(1 + K(1 − q)/q)``.

    Examples
    --------
    >>> import math
    >>> K, eps = 10, 1.0
    >>> q = K / (math.exp(eps) + K - 1)
    >>> round(rr_epsilon(q, K), 12)
    1.0
    """
    q, k = float(noise_parameter), int(num_buckets)
    if k <= 1:
        return 0.0
    if q <= 0:
        return math.inf
    return math.log1p(k * (1.0 - q) / q)


def _rr_probs(noise_parameter: float, num_buckets: int) -> tuple[float, float, float, float]:
    """Per-label privacy-loss law of RR on a changed label: (ε₀, P(+ε₀), P(−ε₀), P(0))."""
    q, k = float(noise_parameter), int(num_buckets)
    minus = q / k
    plus = 1.0 - q + minus
    zero = max(0.0, 1.0 - plus - minus)
    return rr_epsilon(q, k), plus, minus, zero


def _log_delta_gauss(eps: float, mu: float) -> float:
    """log δ(ε) of the Gaussian mechanism with ``mu = Δ/σ`` (Balle & Wang 2018, Thm. 8)."""
    a = stats.norm.logcdf(mu / 2.0 - eps / mu)
    b = eps + stats.norm.logcdf(-mu / 2.0 - eps / mu)
    if b >= a:
        return -math.inf
    return a + math.log1p(-math.exp(b - a))


def gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    """Exact ε at ``delta`` of the Gaussian mechanism with noise std = ``noise_multiplier`` × Δ₂.

    Analytic Gaussian mechanism (Balle & Wang 2018): the smallest ε ≥ 0 with
    ``Φ(1/(2z) − εz) − e^ε Φ(−1/(2z) − εz) ≤ δ``, found by bisection.

    Examples
    --------
    >>> round(gaussian_epsilon(1.0, 1e-5), 3)
    4.377
    >>> gaussian_epsilon(1e-3, 1e-5) > 1000
    True
    """
    z = float(noise_multiplier)
    if z <= 0:
        return math.inf
    mu = 1.0 / z
    log_delta = math.log(delta)
    if _log_delta_gauss(0.0, mu) <= log_delta:
        return 0.0
    hi = 1.0
    while _log_delta_gauss(hi, mu) > log_delta:
        hi *= 2.0
    return float(
        optimize.brentq(lambda e: _log_delta_gauss(e, mu) - log_delta, 0.0, hi, xtol=1e-12)
    )


def gaussian_noise_multiplier(epsilon: float, delta: float) -> float:
    """Smallest noise multiplier σ/Δ₂ for which the Gaussian mechanism is (ε, δ)-DP.

    The analytic calibration of Balle & Wang (2018), valid for every ε > 0 (the classic
    ``sqrt(2 ln(1.25/δ))/ε`` is valid only for ε < 1 and is larger).

    Examples
    --------
    >>> z = gaussian_noise_multiplier(1.0, 1e-5)
    >>> round(z, 4)
    3.7306
    >>> z < math.sqrt(2 * math.log(1.25 / 1e-5)) / 1.0
    True
    >>> round(gaussian_epsilon(z, 1e-5), 6)
    1.0
    """
    log_delta = math.log(delta)

    def excess(log_z: float) -> float:
        return _log_delta_gauss(epsilon, math.exp(-log_z)) - log_delta

    lo, hi = -10.0, 1.0
    while excess(hi) > 0:
        hi += 2.0
    while excess(lo) < 0 and lo > -60:
        lo -= 5.0
    return float(math.exp(optimize.brentq(excess, lo, hi, xtol=1e-13)))


def _rr_loss_pmf(
    plus: float, minus: float, zero: float, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """Law of (#plus − #minus) over ``count`` iid labels: support (ints) and probabilities."""
    if zero <= 1e-15:  # binary: #plus ~ Binomial(count, plus / (plus + minus))
        i = np.arange(count + 1)
        pmf = stats.binom.pmf(i, count, plus / (plus + minus))
        return 2 * i - count, pmf
    size = 1 << math.ceil(math.log2(2 * count + 1))
    omega = 2.0 * np.pi * np.arange(size) / size
    # characteristic function of one label's step in {-1, 0, +1}, raised to the count
    phi = zero + plus * np.exp(-1j * omega) + minus * np.exp(1j * omega)
    pmf = np.fft.ifft(phi**count).real  # φ(ω) = E[e^{-iωS}], so index j holds P(S ≡ j)
    support = np.arange(-count, count + 1)
    probs = np.clip(pmf[support % size], 0.0, None)
    return support, probs


def _rr_exact_epsilon(noise_parameter: float, num_buckets: int, count: int, delta: float) -> float:
    """Exact ε at δ of ``count`` compositions of K-ary RR on a changed label."""
    eps0, plus, minus, zero = _rr_probs(noise_parameter, num_buckets)
    if math.isinf(eps0):
        return math.inf
    if eps0 == 0.0:
        return 0.0
    support, probs = _rr_loss_pmf(plus, minus, zero, count)
    keep = (support > 0) & (probs > 0)
    loss = eps0 * support[keep]
    probs = probs[keep]

    def delta_of(eps: float) -> float:
        return float(np.sum(probs * -np.expm1(np.minimum(eps - loss, 0.0))))

    if delta_of(0.0) <= delta:
        return 0.0
    hi = eps0 * count
    if delta_of(hi) > delta:  # pragma: no cover - numerically impossible (δ(max loss) = 0)
        return hi
    return float(optimize.brentq(lambda e: delta_of(e) - delta, 0.0, hi, xtol=1e-12))


def basic_composition(events: Sequence[Any], delta: float) -> float:
    """Basic composition: the sum of the per-event ε (an upper bound on any accountant).

    Randomized response counts ``rr_epsilon`` per repetition (pure DP, δ = 0); Gaussian
    events share ``delta`` equally and count :func:`gaussian_epsilon` at their share each.

    Examples
    --------
    >>> e = rr_event(2 / (math.e + 1), 2)      # binary RR, ε = 1
    >>> round(basic_composition([e] * 3, 1e-5), 10)
    3.0
    """
    known, other = _flatten(events)
    if other:
        names = sorted({type(e).__name__ for e, _ in other})
        raise ValueError(f"no ε is known for privacy events of type {', '.join(names)}")
    n_gauss = sum(c for (kind, _), c in known.items() if kind == "gauss")
    total = 0.0
    for (kind, params), count in known.items():
        if kind == "rr":
            total += count * rr_epsilon(params[0], int(params[1]))
        else:
            total += count * gaussian_epsilon(params[0], delta / n_gauss)
    return total


# --------------------------------------------------------------------------------------------
# dp-accounting accountants
# --------------------------------------------------------------------------------------------


def _expanded(known: dict, other: list) -> list[Any]:
    """Single events, one per repetition (so no accountant ever sees a repeat count)."""
    out: list[Any] = []
    for (kind, params), count in known.items():
        leaf = rr_event(params[0], int(params[1])) if kind == "rr" else gaussian_event(params[0])
        out.extend([leaf] * count)
    for event, count in other:
        out.extend([event] * count)
    return out


def _pld_by_leaf(dp: Any, known: dict, delta: float) -> float:
    """PLD per distinct leaf with an explicit ``self_compose(count)``, then composed."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    relation = dp.NeighboringRelation.REPLACE_ONE
    total = None
    for (kind, params), count in known.items():
        if kind == "rr":
            pld = pld_lib.from_randomized_response(
                noise_parameter=params[0],
                num_buckets=int(params[1]),
                neighboring_relation=relation,
            ).self_compose(count)
        else:
            # our Δ₂ is already the replace-one sensitivity: dp-accounting's REPLACE_ONE
            # would double it, so the Gaussian PLD is built for its default relation
            pld = pld_lib.from_gaussian_mechanism(standard_deviation=params[0] / math.sqrt(count))
        total = pld if total is None else total.compose(pld)
    return 0.0 if total is None else float(total.get_epsilon_for_delta(delta))


def _accountant_epsilon(dp: Any, kind: str, events: list[Any], delta: float) -> float:
    """ε from dp-accounting's PLD (REPLACE_ONE) or RDP accountant fed single events."""
    import logging

    # RR events need REPLACE_ONE; a GaussianDpEvent's noise multiplier is relative to the
    # sensitivity we computed for replace-one neighbours, which dp-accounting's REPLACE_ONE
    # would double: Gaussian-only lists use ADD_OR_REMOVE_ONE (mixed lists stay conservative)
    has_rr = any(type(e).__name__ in _RR_NAMES for e in events)
    rel = dp.NeighboringRelation
    relation = rel.REPLACE_ONE if has_rr else rel.ADD_OR_REMOVE_ONE
    if kind == "pld":
        acc = dp.pld.PLDAccountant(relation)
    else:
        acc = dp.rdp.RdpAccountant(neighboring_relation=relation)
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        for e in events:
            acc.compose(e, 1)
        return float(acc.get_epsilon(delta))
    finally:
        absl.setLevel(level)


def _check_delta(delta: Any) -> float:
    if isinstance(delta, bool) or not isinstance(delta, Real) or not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
    return float(delta)


def epsilon_spent(
    events: Sequence[Any],
    delta: float,
    *,
    accountant: Literal["auto", "pld", "rdp", "basic"] = "auto",
) -> float:
    """Total ε, at ``delta``, of the composition of ``events`` (one client's releases).

    Parameters
    ----------
    events : sequence of DpEvent
        One event per release, e.g. ``[mechanism.dp_event(C, n)] * rounds``. Nested
        ``SelfComposedDpEvent`` / ``ComposedDpEvent`` are expanded with their counts.
    delta : float
        δ in (0, 1) at which ε is reported.
    accountant : {"auto", "pld", "rdp", "basic"}, default="auto"
        See the module docstring: "auto" is exact for randomized-response-only and
        Gaussian-only lists, uses dp-accounting's PLD otherwise, and falls back to basic
        composition (with a ``RuntimeWarning``) when dp-accounting is missing or supports no
        accountant for an event. "pld" / "rdp" feed dp-accounting's ``PLDAccountant``
        / ``RdpAccountant`` the list expanded into single events (so the repeat count of
        randomized response is never dropped; slow for very long lists), with
        ``REPLACE_ONE`` when the list holds randomized response and ``ADD_OR_REMOVE_ONE``
        for Gaussian-only lists (Δ₂ is already a replace-one sensitivity).
        "basic" is :func:`basic_composition`.

    Returns
    -------
    float
        ε ≥ 0 (``inf`` for a non-private event); 0.0 for an empty list.

    Examples
    --------
    >>> from cotrain.privacy import GaussianSoftLabels, XORMechanism
    >>> xor = XORMechanism(epsilon=1.0, sensitivity=20)
    >>> e = xor.dp_event(n_classes=10, n_labels=500)
    >>> round(epsilon_spent([e] * 50, 1e-5), 2)             # exact; basic composition: 50
    7.49
    >>> g = GaussianSoftLabels(epsilon=1.0, sensitivity=10).dp_event(10, 500)
    >>> round(epsilon_spent([g], 1e-5), 6)                   # calibrated to ε = 1 at δ
    1.0
    >>> epsilon_spent([g] * 4, 1e-5) < epsilon_spent([g] * 4, 1e-5, accountant="rdp")
    True
    """
    delta = _check_delta(delta)
    if accountant not in ("auto", "pld", "rdp", "basic"):
        raise ValueError(f"accountant must be 'auto', 'pld', 'rdp' or 'basic', got {accountant!r}")
    known, other = _flatten(list(events))
    if not known and not other:
        return 0.0
    if accountant == "basic":
        return basic_composition(events, delta)
    dp = _dp()
    if accountant in ("pld", "rdp"):
        if dp is None:
            raise ImportError(f"accountant={accountant!r} needs dp-accounting")
        return _accountant_epsilon(dp, accountant, _expanded(known, other), delta)

    # auto
    if not other and len(known) == 1:
        (((kind, params), count),) = known.items()
        if kind == "rr":
            return _rr_exact_epsilon(params[0], int(params[1]), count, delta)
    if not other and all(kind == "gauss" for kind, _ in known):
        inv = sum(c / p[0] ** 2 if p[0] > 0 else math.inf for (_, p), c in known.items())
        return gaussian_epsilon(1.0 / math.sqrt(inv), delta) if inv < math.inf else math.inf
    if dp is not None:
        if not other:
            return _pld_by_leaf(dp, known, delta)
        for kind in ("pld", "rdp"):
            try:
                return _accountant_epsilon(dp, kind, _expanded(known, other), delta)
            except dp.UnsupportedEventError:
                continue
    warnings.warn(
        "dp-accounting is not installed or supports none of these events; reporting ε by "
        "basic composition (sum of per-event ε), an upper bound",
        RuntimeWarning,
        stacklevel=2,
    )
    return basic_composition(events, delta)


# --------------------------------------------------------------------------------------------
# what has privacy to account
# --------------------------------------------------------------------------------------------


def is_accounted(mechanism: Any) -> bool:
    """Whether ``mechanism`` releases labels whose privacy the ledger must account.

    The trainer and the Flower server ask this of the client-side mechanism
    (``privacy=``) and of the consensus. Both base classes declare the answer as the
    property ``accountable``: a :class:`~cotrain.privacy.LabelMechanism` is always
    accountable, a :class:`consensus.Consensus` only when it adds noise
    (:class:`consensus.NoisyArgmax` with ``sigma > 0``). An object outside those classes
    (a duck-typed mechanism) is accountable when it has a ``dp_event`` method and does not
    declare ``accountable = False``. An accountable object also has ``dp_event``,
    ``delta`` and ``budget``.

    Parameters
    ----------
    mechanism : object or None
        A label mechanism, a consensus rule, or None (nothing to account).

    Returns
    -------
    bool

    Raises
    ------
    ValueError
        If the object's parameters needed to decide are invalid (e.g. a negative ``sigma``
        of :class:`consensus.NoisyArgmax`).

    Examples
    --------
    >>> from consensus import MajorityVote, NoisyArgmax
    >>> from cotrain.privacy import RandomizedResponse
    >>> is_accounted(RandomizedResponse(epsilon=1.0)), is_accounted(None)
    (True, False)
    >>> is_accounted(NoisyArgmax(sigma=4.0)), is_accounted(NoisyArgmax(sigma=0.0))
    (True, False)
    >>> is_accounted(MajorityVote())
    False
    """
    if mechanism is None or not callable(getattr(mechanism, "dp_event", None)):
        return False
    return bool(getattr(mechanism, "accountable", True))
