"""Privacy accounting across rounds: the total (ε, δ) of a list of privacy events.

Every round a client takes part in, it releases its labels on the public pool once through a
label mechanism (:mod:`cotrain.privacy.mechanisms.base`); ``mechanism.dp_event(C, |U|)`` describes
that one release as a ``dp_accounting`` event. :func:`epsilon_spent` composes a client's list
of events into the smallest ε such that the whole run is (ε, δ)-DP with respect to one record
of the client's private data, for an adversary who sees every composed release, under a
neighbouring relation: ``relation="add_or_remove"`` (the headline of every record-level ε in
cotrain) or ``"replace_one"``; each event is read as dp-accounting reads it under that
relation (:mod:`cotrain.privacy.accounting.composition`). :class:`RunningComposition` does the same
incrementally — compose one round's events, ask ε, compose the next — without recomputing
from round 1; :func:`epsilon_spent` is one ``RunningComposition`` fed the whole list.

Accountant choice (``accountant="auto"``, the default), detailed in
:mod:`cotrain.privacy.accounting.composition`:

* **randomized-response events** (``RandomizedResponse`` and ``XORMechanism`` produce these,
  see :func:`rr_event`), **Gaussian events** (``GaussianSoftLabels``, GNMax's
  ``consensus.NoisyArgmax``), **and any mix of them**: exact. The privacy loss of N
  compositions of K-ary randomized response is a sum of N independent per-label losses in
  ``{+ε₀, 0, −ε₀}``, whose law is computed exactly on that lattice (binomial / multinomial
  log-pmf, tails included); Gaussians with noise multipliers z_i compose to one Gaussian with
  ``μ = (Σ z_i⁻²)^{1/2}`` (Balle & Wang 2018, :func:`gaussian_epsilon`); the mix has
  ``δ(ε) = Σ_j P(ℓ_j) δ_Gauss(ε − ℓ_j)``, inverted by bisection. This is the optimal
  composition of the worst-case pairs: dp-accounting's PLD accountant gives an upper bound of
  it that is far looser when ε₀ is tiny (XOR with a large s*), slow when the loss spans
  hundreds of nats, and it silently ignores the repeat count of a ``SelfComposedDpEvent``
  wrapping a ``RandomizedResponseDpEvent`` (the PLD pitfall), which this module never relies
  on. A Gaussian event's noise multiplier is relative to the add/remove Δ₂; under
  ``relation="replace_one"`` it is read as dp-accounting's ``REPLACE_ONE`` reads it (twice
  the sensitivity);
* **any other event** (e.g. a sampled Gaussian): dp-accounting's PLD, its discretisation set
  relative to the ε sought (:func:`cotrain.privacy.accounting.composition.pld_interval`), falling
  back to its ``RdpAccountant``;
* **without dp-accounting**, or when no accountant supports an event: basic composition
  (:func:`basic_composition`), the sum of per-event ε, with a ``RuntimeWarning`` saying so
  (randomized-response and Gaussian events never need dp-accounting).

``accountant="pld"``, ``"rdp"`` or ``"basic"`` forces dp-accounting's PLD (per leaf, at that
discretisation), its RDP (each leaf composed once with its repeat count) or basic composition.

Examples
--------
>>> from cotrain.privacy import RandomizedResponse, epsilon_spent
>>> rr = RandomizedResponse(epsilon=1.0, sensitivity=1)   # one record changes one label
>>> event = rr.dp_event(n_classes=10, n_labels=1000)
>>> round(epsilon_spent([event], delta=1e-5), 3)      # one round: ε (minus a sliver of δ)
1.0
>>> ten = epsilon_spent([event] * 10, delta=1e-5)
>>> 1.0 < ten < 10.0                                  # better than basic composition
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any, Literal

from scipy import optimize

from cotrain.privacy.accounting._privacy_loss import log_delta_gaussian
from cotrain.privacy.accounting.composition import RunningComposition, check_relation

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


def _log_delta_gauss(eps: float, mu: float) -> float:
    """log δ(ε) of the Gaussian mechanism with ``mu = Δ/σ`` (Balle & Wang 2018, Thm. 8)."""
    return float(log_delta_gaussian(eps, mu))


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
    return _composed(events, delta, "basic").epsilon()


def _composed(
    events: Iterable[Any], delta: Any, accountant: str, relation: str = "add_or_remove"
) -> RunningComposition:
    comp = RunningComposition(delta, accountant=accountant, relation=relation)  # type: ignore[arg-type]
    for event in events:
        comp.compose(event)
    return comp


def epsilon_spent(
    events: Sequence[Any],
    delta: float,
    *,
    accountant: Literal["auto", "pld", "rdp", "basic"] = "auto",
    relation: Literal["add_or_remove", "replace_one"] = "add_or_remove",
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
        See the module docstring: "auto" is exact for any list of randomized-response and
        Gaussian events, uses dp-accounting's PLD (discretised relative to ε) for other
        events, and falls back to basic composition (with a ``RuntimeWarning``) when
        dp-accounting is missing or supports no accountant for an event. "pld" forces
        dp-accounting's PLD built per leaf (the exact randomized-response law rounded once,
        the composed Gaussian at its own sensitivity, the other events), "rdp" its
        ``RdpAccountant`` fed each leaf once with its repeat count; "basic" is
        :func:`basic_composition`. The same as a :class:`RunningComposition` fed the list.
    relation : {"add_or_remove", "replace_one"}, default="add_or_remove"
        The neighbouring relation the events are read under (dp-accounting's meaning: a
        Gaussian event has twice its sensitivity under replace-one; a randomized-response
        event is the same under both). Give each relation the events a mechanism states for
        it (:meth:`cotrain.privacy.LabelMechanism.relation_event`).

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
    >>> round(epsilon_spent([gaussian_event(40 / 600**0.5)] * 2, 1e-5), 4)   # teachers' GNMax
    3.7086
    >>> round(epsilon_spent([gaussian_event(40 / 600**0.5)] * 2, 1e-5, relation="replace_one"), 4)
    8.3854
    """
    if isinstance(delta, bool) or not isinstance(delta, Real) or not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
    if accountant not in ("auto", "pld", "rdp", "basic"):
        raise ValueError(f"accountant must be 'auto', 'pld', 'rdp' or 'basic', got {accountant!r}")
    if accountant in ("pld", "rdp") and _dp() is None:
        raise ImportError(f"accountant={accountant!r} needs dp-accounting")
    return _composed(events, float(delta), accountant, check_relation(relation)).epsilon()


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
