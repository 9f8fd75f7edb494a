"""Incremental, exact composition of privacy events: :class:`RunningComposition`.

A client's releases are privacy events (``mechanism.dp_event(C, |U|)``, one per round);
``RunningComposition(delta)`` keeps their composed state, so asking ε after each of T rounds
costs one round's work each time, never a recomputation from round 1. ε is with respect to
one record of the client's private data, for whoever sees all the composed releases, under
the neighbouring relation ``relation`` (below).

What the state is, and how ε is found (``accountant="auto"``):

* **randomized response** (``RandomizedResponseDpEvent(q, K)``, the leaves of
  ``RandomizedResponse`` and ``XORMechanism`` events): the exact law of the summed privacy
  loss, on the lattice ``ε₀·ℤ`` of each distinct per-label ε₀; composing ``count`` more
  labels convolves it with their exact law (``cotrain.privacy.accounting._privacy_loss``). Leaves
  with different ε₀ are combined by the outer sum of their supports, dropping probabilities
  below δ·1e-20 (they move δ(ε) by less than 1e-13 of δ); beyond 2·10⁶ points, by the PLD
  route below;
* **Gaussian** (``GaussianDpEvent(z)``, noise std / Δ₂ of the relation's reading): the sum
  ``μ² = Σ count·(r/z)²`` with ``r = 1`` under add/remove and ``r = 2`` under replace-one;
  any number of them is one Gaussian pair with that μ;
* ε is then exact: the smallest ε with ``δ(ε) = E[(1 − e^{ε − L})₊] ≤ delta`` for
  ``L = L_RR + L_Gauss`` (independent), i.e. ``δ(ε) = Σ_j P(ℓ_j)·δ_Gauss(ε − ℓ_j)``, the
  hockey-stick divergence of the product of the worst-case pairs, found by bisection;
* **any other event** (e.g. ``PoissonSampledDpEvent`` of DP-SGD) is kept as (event, count)
  and accounted with dp-accounting's PLD, together with the exact parts turned into PLDs
  (see :func:`pld_interval` for the discretisation), falling back to its RDP accountant, and
  without dp-accounting (or when neither supports an event) to basic composition with a
  ``RuntimeWarning``. dp-accounting reads such an event under ``relation``.

Neighbouring relation (``relation``): every event is read as dp-accounting reads it under
that ``NeighboringRelation`` — ``"add_or_remove"`` (``ADD_OR_REMOVE_ONE``, the default and the
headline of every record-level ε in cotrain) or ``"replace_one"`` (``REPLACE_ONE``). So a
``GaussianDpEvent(z)`` is a Gaussian pair at distance ``1/z`` under add/remove and ``2/z``
under replace-one (replacing = removing then adding: twice the sensitivity, as dp-accounting
doubles it), and a Poisson-sampled Gaussian gets dp-accounting's replace-one PLD. A
``RandomizedResponseDpEvent`` is read the same under both relations: it is one randomised
value, and whatever relation changed that value, the pair of output laws is the same
(dp-accounting accepts it only under ``REPLACE_ONE``). A mechanism therefore gives, for each
relation, the event whose dp-accounting reading bounds that relation
(:meth:`cotrain.privacy.LabelMechanism.relation_event`).

``accountant="pld"`` forces that PLD route for every event, ``"rdp"`` dp-accounting's
``RdpAccountant`` (each leaf composed once with its count: ``RdpAccountant.compose(event,
count)`` multiplies the Rényi divergence by the count, for randomized response too), and
``"basic"`` the sum of per-event ε (each randomized-response label ε₀, each Gaussian event
its ε at an equal share of δ).

Examples
--------
>>> from cotrain.privacy import RandomizedResponse
>>> from consensus import NoisyArgmax
>>> acc = RunningComposition(delta=1e-5)
>>> rr = RandomizedResponse(epsilon=2.0, sensitivity=4).dp_event(n_classes=10, n_labels=100)
>>> gnmax = NoisyArgmax(sigma=40.0).dp_event(n_classes=10, n_labels=100)
>>> for round_ in range(1, 4):                   # ε of RR + GNMax after each round, exact
...     _ = acc.compose(rr).compose(gnmax)
...     print(round_, f"{acc.epsilon():.4f}")
1 2.5455
2 3.7705
3 4.7460
"""

from __future__ import annotations

import math
import warnings
from numbers import Real
from typing import Any, Literal

import numpy as np

from cotrain.privacy.accounting._privacy_loss import (
    LatticeLaw,
    cross_support,
    epsilon_for_delta,
    rr_lattice_law,
    rr_step,
)
from learners.checks import check_int

__all__ = ["RELATIONS", "RunningComposition", "check_relation", "pld_interval"]

Accountant = Literal["auto", "pld", "rdp", "basic"]
_RR_NAMES = {"RandomizedResponseDpEvent", "RandomizedResponseEvent"}
_GAUSS_NAMES = {"GaussianDpEvent", "GaussianEvent"}
_NOOP_NAMES = {"NoOpDpEvent", "NoOpEvent"}
_SELF_NAMES = {"SelfComposedDpEvent", "SelfComposedEvent"}
_COMPOSED_NAMES = {"ComposedDpEvent"}
_NONPRIVATE_NAMES = {"NonPrivateDpEvent"}

#: The neighbouring relations an ε can be stated in; the first is cotrain's headline.
RELATIONS = ("add_or_remove", "replace_one")


def _dp_accounting() -> Any:
    """The ``dp_accounting`` module, or None when it is not installed."""
    try:
        import dp_accounting
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return dp_accounting


def pld_interval(epsilon_estimate: float) -> float:
    """Discretisation interval of the PLDs this module builds: ``1e-3 · max(ε̂, 1)``.

    dp-accounting's default (1e-4) costs time in proportion to the loss range over the
    interval — minutes for hundreds of nats. The PLD's error in ε is of the order of the
    interval (its pessimistic rounding moves every loss up by less than one interval, once:
    the randomized-response part is rounded after exact composition), i.e. about 0.1 % of ε.
    ``ε̂`` is the exact ε of the randomized-response and Gaussian events when nothing else is
    composed, else the ε of a first, coarse PLD at 50 times the interval that exact ε gives
    (an upper bound, cheap).

    Examples
    --------
    >>> pld_interval(0.5), pld_interval(400.0)
    (0.001, 0.4)
    """
    if not math.isfinite(epsilon_estimate):
        return 1e-3
    return 1e-3 * max(float(epsilon_estimate), 1.0)


def _check_delta(delta: Any) -> float:
    if isinstance(delta, bool) or not isinstance(delta, Real) or not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
    return float(delta)


def check_relation(relation: Any, name: str = "relation") -> str:
    """``relation`` if it is one of :data:`RELATIONS`, else a ValueError naming ``name``.

    Examples
    --------
    >>> check_relation("replace_one")
    'replace_one'
    >>> check_relation("replace")
    Traceback (most recent call last):
    ...
    ValueError: relation must be 'add_or_remove' or 'replace_one', got 'replace'
    """
    if relation not in RELATIONS:
        raise ValueError(f"{name} must be 'add_or_remove' or 'replace_one', got {relation!r}")
    return str(relation)


def _dp_relation(dp: Any, relation: str) -> Any:
    """dp-accounting's ``NeighboringRelation`` of ``relation``."""
    rel = dp.NeighboringRelation
    return rel.REPLACE_ONE if relation == "replace_one" else rel.ADD_OR_REMOVE_ONE


class RunningComposition:
    """The composed privacy of a growing list of events; ε on demand, never recomputed.

    Parameters
    ----------
    delta : float
        δ in (0, 1) at which :meth:`epsilon` reports ε.
    accountant : {"auto", "pld", "rdp", "basic"}, default="auto"
        "auto": exact for randomized-response and Gaussian events (and any mix of them),
        dp-accounting's PLD once another kind of event is composed; "pld" / "rdp" force
        dp-accounting's PLD (built per leaf, see the module docstring) or RDP; "basic" is the
        sum of per-event ε. See the module docstring.
    relation : {"add_or_remove", "replace_one"}, default="add_or_remove"
        The neighbouring relation the events are read under (dp-accounting's meaning; see
        the module docstring).

    Attributes
    ----------
    delta : float
    accountant : str
    relation : str

    Raises
    ------
    ValueError
        If ``delta`` or ``accountant`` is invalid.
    ImportError
        If "pld" or "rdp" is asked for without dp-accounting installed.

    Examples
    --------
    Ten rounds of a record-level randomized response (ε = 1 per round, 20 labels of ε' = 0.05
    per record), ε asked after every round — each call composes only the new round:

    >>> from cotrain.privacy import RandomizedResponse
    >>> event = RandomizedResponse(epsilon=1.0, sensitivity=20).dp_event(10, 500)
    >>> acc = RunningComposition(delta=1e-5)
    >>> eps = [acc.compose(event).epsilon() for _ in range(10)]
    >>> [round(e, 3) for e in eps[:3]], round(eps[-1], 3)   # basic composition: 1, 2, ..., 10
    ([0.35, 0.513, 0.638], 1.221)

    ``count`` composes an event several times at once, and ``copy`` forks the state:

    >>> fork = acc.copy().compose(event, count=10)
    >>> round(fork.epsilon(), 3), round(acc.epsilon(), 3)
    (1.786, 1.221)

    The same Gaussian event under both relations (replace-one: twice the sensitivity):

    >>> from cotrain.privacy.accounting.epsilon import gaussian_event
    >>> [round(RunningComposition(1e-5, relation=r).compose(gaussian_event(2.0)).epsilon(), 4)
    ...  for r in ("add_or_remove", "replace_one")]
    [1.9931, 4.3772]
    """

    def __init__(
        self,
        delta: float,
        *,
        accountant: Accountant = "auto",
        relation: Literal["add_or_remove", "replace_one"] = "add_or_remove",
    ) -> None:
        self.delta = _check_delta(delta)
        self.relation = check_relation(relation)
        self._scale2 = 4.0 if self.relation == "replace_one" else 1.0  # (Δ factor)²
        if accountant not in ("auto", "pld", "rdp", "basic"):
            raise ValueError(
                f"accountant must be 'auto', 'pld', 'rdp' or 'basic', got {accountant!r}"
            )
        if accountant in ("pld", "rdp") and _dp_accounting() is None:
            raise ImportError(f"accountant={accountant!r} needs dp-accounting")
        self.accountant: str = accountant
        self._rr: dict[tuple[float, int], int] = {}  # randomized-response leaves: count
        self._gauss: dict[float, int] = {}  # Gaussian leaves (noise multiplier): count
        self._mu2 = 0.0  # Σ count / z²
        self._other: list[tuple[Any, int]] = []
        self._nonprivate = False
        self._laws: dict[float, LatticeLaw] = {}  # exact loss law per lattice step ε₀
        self._pending: dict[tuple[float, int], int] = {}  # RR counts not yet in _laws
        self._support: tuple[np.ndarray, np.ndarray] | None = None
        self._eps: float | None = None

    # ------------------------------------------------------------------ state
    def compose(self, event: Any, count: int = 1) -> RunningComposition:
        """Add ``count`` independent repetitions of ``event``; return self (for chaining).

        ``event`` is a dp-accounting ``DpEvent`` (or one of cotrain's stand-ins, see
        :mod:`cotrain.privacy.accounting.epsilon`); ``SelfComposedDpEvent`` / ``ComposedDpEvent``
        are expanded with their counts, however nested. Cost: O(1) here; the new labels'
        loss law is folded into the state on the next :meth:`epsilon`.
        """
        self._visit(event, check_int(count, "count", 0))
        return self

    def _visit(self, event: Any, count: int) -> None:
        name = type(event).__name__
        if count == 0 or name in _NOOP_NAMES:
            return
        self._eps = None
        if name in _SELF_NAMES:
            self._visit(event.event, count * int(event.count))
        elif name in _COMPOSED_NAMES:
            for sub in event.events:
                self._visit(sub, count)
        elif name in _RR_NAMES:
            q, k = float(event.noise_parameter), int(event.num_buckets)
            eps0 = rr_step(q, k)[0] if k > 1 else 0.0
            if eps0 == 0.0:
                return  # one bucket, or q >= 1: the output does not depend on the label
            if math.isinf(eps0):  # q = 0: the label itself is released
                self._nonprivate = True
                return
            self._rr[(q, k)] = self._rr.get((q, k), 0) + count
            self._pending[(q, k)] = self._pending.get((q, k), 0) + count
            self._support = None
        elif name in _GAUSS_NAMES:
            z = float(event.noise_multiplier)
            self._gauss[z] = self._gauss.get(z, 0) + count
            self._mu2 += self._scale2 * count / z**2 if z > 0 else math.inf
        elif name in _NONPRIVATE_NAMES:
            self._nonprivate = True
        else:
            dp = _dp_accounting()
            if dp is not None and not isinstance(event, dp.DpEvent):
                raise TypeError(f"event must be a dp_accounting DpEvent, got {event!r}")
            self._other.append((event, count))

    def copy(self) -> RunningComposition:
        """An independent copy of the composed state (laws are shared, never mutated).

        Examples
        --------
        >>> from cotrain.privacy.accounting.epsilon import gaussian_event
        >>> a = RunningComposition(1e-5).compose(gaussian_event(2.0))
        >>> b = a.copy().compose(gaussian_event(2.0))
        >>> a.epsilon() < b.epsilon()
        True
        """
        new = RunningComposition.__new__(RunningComposition)
        new.__dict__.update(self.__dict__)
        for name in ("_rr", "_gauss", "_laws", "_pending"):
            setattr(new, name, dict(getattr(self, name)))
        new._other = list(self._other)
        return new

    def __repr__(self) -> str:
        rr = {f"q={q:.6g},K={k}": n for (q, k), n in self._rr.items()}
        return (
            f"RunningComposition(delta={self.delta!r}, accountant={self.accountant!r}, "
            f"relation={self.relation!r}, "
            f"randomized_response={rr}, gaussian_mu={math.sqrt(self._mu2):.6g}, "
            f"other={sum(c for _, c in self._other)})"
        )

    # ------------------------------------------------------------------ exact parts
    def _lattice_laws(self) -> list[LatticeLaw]:
        """The exact loss law of the randomized-response part, one per lattice step ε₀.

        K > 2 leaves: the pending labels' exact law is convolved into the running law of
        their lattice (incremental). K = 2 leaves: the binomial law of the leaf's total count
        is recomputed (O(count), cheaper than a convolution).
        """
        for (q, k), count in self._pending.items():
            if k > 2:
                law = rr_lattice_law(q, k, count)
                step = _same_step(self._laws, law.step)
                self._laws[step] = law if step not in self._laws else self._laws[step].convolve(law)
        self._pending = {}
        groups = dict(self._laws)
        for (q, k), count in self._rr.items():
            if k == 2:
                law = rr_lattice_law(q, k, count)
                step = _same_step(groups, law.step)
                groups[step] = law if step not in groups else groups[step].convolve(law)
        return list(groups.values())

    def _exact_support(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(losses, probs) of the randomized-response part (cached until the next compose);
        None when the outer sum of lattices with different steps would be too large."""
        if self._support is None:
            laws = self._lattice_laws()
            if len(laws) == 1:
                self._support = (laws[0].losses(), laws[0].probs)
            elif not laws:
                self._support = (np.zeros(1), np.ones(1))
            else:
                self._support = cross_support(laws, floor=self.delta * 1e-20)
        return self._support

    def _exact_epsilon(self) -> float | None:
        support = self._exact_support()
        if support is None:
            return None
        return epsilon_for_delta(support[0], support[1], math.sqrt(self._mu2), self.delta)

    # ------------------------------------------------------------------ epsilon
    def epsilon(self) -> float:
        """Total ε at :attr:`delta` of everything composed so far (cached until the next
        :meth:`compose`).

        Returns
        -------
        float
            ε ≥ 0; ``inf`` for a non-private event; 0.0 when nothing was composed.

        Examples
        --------
        >>> from cotrain.privacy.accounting.epsilon import gaussian_event
        >>> round(RunningComposition(1e-5).compose(gaussian_event(1.0)).epsilon(), 3)
        4.377
        """
        if self._eps is None:
            self._eps = self._compute()
        return self._eps

    def _compute(self) -> float:
        if self._nonprivate or math.isinf(self._mu2):
            return math.inf
        if not self._rr and not self._gauss and not self._other:
            return 0.0
        if self.accountant == "basic":
            return self._basic()
        if self.accountant == "rdp":
            return self._rdp(_dp_accounting())
        if self.accountant == "auto" and not self._other:
            exact = self._exact_epsilon()
            if exact is not None:
                return exact
        dp = _dp_accounting()
        if dp is not None:
            try:
                return self._pld(dp)
            except dp.UnsupportedEventError:
                if self.accountant == "pld":
                    raise
            try:
                return self._rdp(dp)
            except dp.UnsupportedEventError:
                pass
        warnings.warn(
            "dp-accounting is not installed or supports none of these events; reporting ε by "
            "basic composition (sum of per-event ε), an upper bound",
            RuntimeWarning,
            stacklevel=3,
        )
        return self._basic()

    def _basic(self) -> float:
        if self._other:
            names = sorted({type(e).__name__ for e, _ in self._other})
            raise ValueError(f"no ε is known for privacy events of type {', '.join(names)}")
        point = (np.zeros(1), np.ones(1))
        share = self.delta / max(1, sum(self._gauss.values()))
        total = sum(n * rr_step(q, k)[0] for (q, k), n in self._rr.items())
        for z, n in self._gauss.items():
            total += n * epsilon_for_delta(*point, math.sqrt(self._scale2) / z, share)
        return float(total)

    def _rdp(self, dp: Any) -> float:
        """dp-accounting's RDP: each leaf composed once with its count (REPLACE_ONE when
        randomized response is present; its Gaussian RDP does not depend on the relation, and
        μ² already holds the relation's factor); other events under :attr:`relation`."""
        rel = dp.NeighboringRelation
        main = dp.rdp.RdpAccountant(
            neighboring_relation=rel.REPLACE_ONE if self._rr else rel.ADD_OR_REMOVE_ONE
        )
        for (q, k), n in self._rr.items():
            main.compose(dp.RandomizedResponseDpEvent(q, k), n)
        if self._mu2 > 0:
            main.compose(dp.GaussianDpEvent(1.0 / math.sqrt(self._mu2)))
        if not self._other:
            return float(main.get_epsilon(self.delta))
        extra = (
            main
            if not self._rr and self.relation == "add_or_remove"
            else dp.rdp.RdpAccountant(neighboring_relation=_dp_relation(dp, self.relation))
        )
        for event, n in self._other:
            extra.compose(event, n)
        if extra is main:
            return float(main.get_epsilon(self.delta))
        rdp = main.rdp + extra.rdp
        return float(dp.rdp.rdp_privacy_accountant.compute_epsilon(main.orders, rdp, self.delta)[0])

    def _estimate(self, dp: Any) -> float:
        """ε̂ that sets the PLD interval: the exact ε of the randomized-response and Gaussian
        events, or (with other events, or lattices too large to combine exactly) a first PLD
        at 50 times the interval that exact ε, or 1, gives."""
        exact = self._exact_epsilon() if (self._rr or self._mu2 > 0) else 0.0
        if exact is not None and not self._other:
            return exact
        return self._pld(dp, 50.0 * pld_interval(1.0 if exact is None else exact))

    def _pld(self, dp: Any, interval: float | None = None) -> float:
        """dp-accounting's PLD at :func:`pld_interval` (ε̂): the exact randomized-response
        law of each lattice rounded up once (pessimistic), the composed Gaussian, and the
        other events, composed by dp-accounting."""
        from dp_accounting.pld import privacy_loss_distribution as pld_lib

        if interval is None:
            interval = pld_interval(self._estimate(dp))
        plds = [_other_pld(dp, pld_lib, e, n, interval, self.relation) for e, n in self._other]
        for law in self._lattice_laws():
            keep = law.probs > 0
            losses = law.losses()[keep]
            index = np.ceil(losses / interval)
            index -= (index - 1) * interval >= losses  # ceil's float noise: one less
            values, where = np.unique(index.astype(np.int64), return_inverse=True)
            mass = np.bincount(where, weights=law.probs[keep])
            plds.append(
                pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
                    dict(zip(values.tolist(), mass.tolist(), strict=True)), 0.0, interval
                )
            )
        if self._mu2 > 0:
            # μ² already holds the relation's factor (see _visit): one pair at distance μ
            plds.append(
                pld_lib.from_gaussian_mechanism(
                    standard_deviation=1.0 / math.sqrt(self._mu2),
                    value_discretization_interval=interval,
                )
            )
        total = plds[0]
        for pld in plds[1:]:
            total = total.compose(pld)
        return float(total.get_epsilon_for_delta(self.delta))


def _same_step(laws: dict[float, LatticeLaw], step: float) -> float:
    """The key of ``laws`` equal to ``step`` up to rounding (1e-12), else ``step``."""
    return next((s for s in laws if math.isclose(s, step, rel_tol=1e-12)), step)


def _other_pld(
    dp: Any, pld_lib: Any, event: Any, count: int, interval: float, relation: str
) -> Any:
    """PLD of an event cotrain does not compose exactly (dp-accounting's constructors), read
    under ``relation`` (a Laplace event under replace-one: at twice its sensitivity)."""
    inner = getattr(event, "event", None)
    twice = 2.0 if relation == "replace_one" else 1.0
    if isinstance(event, dp.PoissonSampledDpEvent) and isinstance(inner, dp.GaussianDpEvent):
        pld = pld_lib.from_gaussian_mechanism(
            standard_deviation=inner.noise_multiplier,
            sampling_prob=event.sampling_probability,
            value_discretization_interval=interval,
            neighboring_relation=_dp_relation(dp, relation),
        )
    elif (
        isinstance(event, dp.PoissonSampledDpEvent)
        and isinstance(inner, dp.LaplaceDpEvent)
        and relation == "add_or_remove"
    ):
        pld = pld_lib.from_laplace_mechanism(
            inner.noise_multiplier,
            sampling_prob=event.sampling_probability,
            value_discretization_interval=interval,
        )
    elif isinstance(event, dp.LaplaceDpEvent):
        pld = pld_lib.from_laplace_mechanism(
            event.noise_multiplier, sensitivity=twice, value_discretization_interval=interval
        )
    else:
        raise dp.UnsupportedEventError(f"no PLD for {event!r}")
    return pld.self_compose(count) if count > 1 else pld
