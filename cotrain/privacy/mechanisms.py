"""Privacy mechanisms applied on a client before its labels on the public pool U leave it.

What is protected
-----------------
A client's release in one round is ``f(D)``: the labels its model, trained on its private data
D (and the pseudo-labelled pool), gives the public examples U. Every mechanism declares

* its **unit** — ``"record"``: differential privacy with respect to one record of D
  (replace-one neighbours D, D′: the whole release of a round changes little when one private
  training record is replaced), the guarantee a hospital or a bank reads an ε as; or
  ``"label"``: with respect to one *released public label* (each label of U protected on its
  own). A label-level ε is NOT a guarantee about any private record — one record can change
  many released labels — and is kept only for comparison with the literature; it is never
  summed or tabulated with record-level ε;
* its **adversary** — ``"server"``: the noise is drawn at the client (from the operating
  system's entropy, so no seed known to the server can replay it), so the guarantee holds
  against the server and everyone downstream of it; ``"broadcast observers"``: the noise is
  added by the server (GNMax, :class:`consensus.NoisyArgmax`), which itself sees clean votes.

The randomisers below (:class:`RandomizedResponse`, :class:`XORMechanism`,
:class:`GaussianSoftLabels`) are record-level only through the sensitivity ``s*``: the number
of released values one private record can change. Without ``sensitivity`` they take the
trivial bound that holds for every learner — all |U| labels (2|U| bits, all rows) — which
is honest but noisy. A smaller ``sensitivity`` is *your claim*: no function can compute it
for a general learner (:func:`cotrain.privacy.sensitivity_lower_bound` only finds a lower
bound). Record-level DP by construction, for any learner, comes from
:class:`cotrain.privacy.SubsampleAndAggregate` (teachers on disjoint shards of D) or from
DP-SGD training of a torch client (:class:`cotrain.privacy.DPSGD`).

One release per round; rounds compose (:func:`cotrain.privacy.epsilon_spent`), and
``dp_event(C, |U|)`` is the privacy event of one round that the trainer's ledger composes.

Parameters follow scikit-learn's convention: ``__init__`` stores them untouched, they are
validated on first use (``randomize``, ``dp_event``, or an explicit ``validate()``), and
``get_params`` / ``set_params`` work.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from numbers import Integral, Real
from typing import Any, ClassVar, Literal, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

from consensus import ParamsMixin
from cotrain.privacy.accounting import (
    gaussian_event,
    gaussian_noise_multiplier,
    noop_event,
    rr_event,
    self_composed,
)

__all__ = ["GaussianSoftLabels", "LabelMechanism", "RandomizedResponse", "XORMechanism"]


# --------------------------------------------------------------------------------------------
# parameter checks
# --------------------------------------------------------------------------------------------


def _positive(value: Any, name: str, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not math.isfinite(float(value))
        or float(value) <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _sensitivity(value: Any, *, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    ok = not isinstance(value, bool) and (
        isinstance(value, Integral)
        or (isinstance(value, Real) and math.isfinite(float(value)) and float(value).is_integer())
    )
    if not ok or int(value) < 1:
        raise ValueError(
            f"sensitivity must be an integer >= 1 (the number of released values one private "
            f"record can change), got {value!r}"
        )
    return int(value)


UNITS = ("record", "label")


def _unit(value: Any) -> str:
    if value not in UNITS:
        raise ValueError(
            f"unit must be 'record' (one private training record) or 'label' (one released "
            f"public label), got {value!r}"
        )
    return str(value)


def _delta(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 < float(value) < 1.0:
        raise ValueError(f"delta must be a number in (0, 1), got {value!r}")
    return float(value)


def _n_classes(n_classes: Any) -> int:
    if isinstance(n_classes, bool) or not isinstance(n_classes, Integral) or n_classes < 1:
        raise ValueError(f"n_classes must be an integer >= 1, got {n_classes!r}")
    return int(n_classes)


def _n_labels(n_labels: Any) -> int:
    if isinstance(n_labels, bool) or not isinstance(n_labels, Integral) or n_labels < 0:
        raise ValueError(f"n_labels must be an integer >= 0, got {n_labels!r}")
    return int(n_labels)


def _hard_codes(labels: ArrayLike, n_classes: int) -> NDArray[np.int64]:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"labels must be a 1-D array of class codes, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"labels must be integer class codes, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= n_classes):
        raise ValueError(
            f"labels must be class codes in 0..{n_classes - 1}; found values in "
            f"[{arr.min()}, {arr.max()}]"
        )
    return arr


# --------------------------------------------------------------------------------------------
# base class
# --------------------------------------------------------------------------------------------


class LabelMechanism(ParamsMixin, ABC):
    """Base class of label-privacy mechanisms (``FederatedCoTrainer(privacy=...)``).

    Subclasses store their ``__init__`` arguments untouched (validated in ``_check_params``
    on first use) and implement `randomize` and `dp_event`. Parameters work the
    scikit-learn way for every mechanism, through :class:`consensus._params.ParamsMixin`
    (shared with the consensus rules): ``get_params`` / ``set_params`` / ``repr`` and
    ``sklearn.base.clone(mechanism, safe=False)``.

    The privacy-accounting hooks are declared here, with the same names as on a noisy
    consensus (:class:`consensus.NoisyArgmax`), so that the trainer's ledger treats both
    alike (:func:`cotrain.privacy.accounting.is_accounted`): `accountable` (True: every
    mechanism adds noise), `dp_event`, `delta` and `budget`.

    Attributes
    ----------
    applies_to : {"hard", "soft", "data", "model"}
        ``"hard"``: ``randomize`` takes and returns int64 codes ``(n,)`` in ``0..C-1``;
        ``"soft"``: it takes and returns probabilities ``(n, C)``; ``"data"``: the client
        calls ``release`` with its learner and private data (subsample-and-aggregate);
        ``"model"``: the client trains its model privately (``prepare``) and reports each
        round's ``round_event``; its labels are post-processing.
    unit : {"record", "label"}
        What one ε protects: one private training record of the client, or one released
        public label (see the module docstring).
    adversary : {"server", "broadcast observers"}
        Against whom the guarantee holds: client-side noise holds against the server.
    budget : float or None
        Total ε per client over the whole run (None = no limit); the trainer stops before a
        round that would exceed it.
    delta : float
        δ at which the total ε is reported (and, for Gaussian noise, calibrated).

    Examples
    --------
    >>> import numpy as np
    >>> class Flip(LabelMechanism):
    ...     applies_to = "hard"
    ...     def __init__(self, budget=None, delta=1e-5):
    ...         self.budget = budget
    ...         self.delta = delta
    ...     def randomize(self, labels, n_classes, rng):
    ...         return (np.asarray(labels) + 1) % n_classes
    ...     def dp_event(self, n_classes, n_labels):
    ...         return noop_event()
    >>> Flip().randomize(np.array([0, 1]), 2, np.random.default_rng(0))
    array([1, 0])
    >>> Flip(budget=3.0)
    Flip(budget=3.0, delta=1e-05)
    >>> Flip().accountable
    True
    """

    applies_to: ClassVar[Literal["hard", "soft", "data", "model"]] = "hard"
    adversary: ClassVar[str] = "server"

    budget: float | None = None
    delta: float
    unit: str = "record"

    @abstractmethod
    def randomize(self, labels: np.ndarray, n_classes: int, rng: np.random.Generator) -> np.ndarray:
        """Return the noisy labels the client releases (vectorised, no per-example loop)."""

    @abstractmethod
    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """The privacy event of ONE client's release of ``n_labels`` labels in ONE round,
        with respect to one record of its private data."""

    @property
    def accountable(self) -> bool:
        """Whether the mechanism's releases must be accounted: always True for a mechanism
        (the same hook as :attr:`consensus.Consensus.accountable`).

        Examples
        --------
        >>> RandomizedResponse(epsilon=1.0).accountable
        True
        """
        return True

    def _check_params(self) -> None:
        _positive(self.budget, "budget", allow_none=True)
        _delta(self.delta)
        _unit(self.unit)

    def guarantee(self) -> dict[str, str]:
        """What the ε of this mechanism protects and against whom.

        Examples
        --------
        >>> RandomizedResponse(epsilon=1.0).guarantee()
        {'unit': 'record', 'adversary': 'server'}
        >>> RandomizedResponse(epsilon=1.0, unit="label").guarantee()["unit"]
        'label'
        """
        self._check_params()
        return {"unit": str(self.unit), "adversary": str(self.adversary)}

    def validate(self) -> Self:
        """Check the parameters now (they are otherwise checked on first use); return self."""
        self._check_params()
        return self


# --------------------------------------------------------------------------------------------
# K-ary randomized response
# --------------------------------------------------------------------------------------------


class RandomizedResponse(LabelMechanism):
    """K-ary randomized response on each released hard label.

    Each label is kept with probability ``e^{ε'}/(e^{ε'} + K − 1)`` and otherwise replaced
    by a uniformly random *other* class.

    What is protected depends on ``unit``:

    * ``unit="record"`` (the default): one round's release is ``epsilon``-DP (δ = 0) with
      respect to one private training record of the client, against the server. One record
      can change at most ``s*`` released labels, so each label gets ``ε' = epsilon / s*``
      and group privacy over the changed labels gives ``epsilon``. ``s*`` is
      ``sensitivity`` when given (your claim; see the module docstring) and otherwise every
      released label — the trivial bound, valid for any learner and very noisy for a large
      pool (at δ > 0 the accountant reports less than ``epsilon`` for it: the loss of many
      tiny independent steps concentrates).
    * ``unit="label"``: each released public label is ``epsilon``-DP on its own
      (``ε' = epsilon``). This protects no private record and is kept only to compare with
      the literature; the trainer warns when it is used.

    Rounds compose (see ``dp_event``).

    Parameters
    ----------
    epsilon : float
        ε of one round's release (> 0), in the unit of ``unit``.
    sensitivity : int, optional
        s* in *labels* for ``unit="record"``: how many released labels one private record can
        change (>= 1); None = all released labels. Must be None or 1 for ``unit="label"``.
    budget : float, optional
        Total ε per client over the run; None = no limit.
    delta : float, default=1e-5
        δ at which the composed ε is reported.
    unit : {"record", "label"}, default="record"
        What ``epsilon`` protects.

    Examples
    --------
    >>> import numpy as np
    >>> rr = RandomizedResponse(epsilon=2.0, unit="label")
    >>> round(rr.keep_probability(n_classes=10), 4)         # e^2 / (e^2 + 9)
    0.4509
    >>> noisy = rr.randomize(np.zeros(100_000, dtype=np.int64), 10, np.random.default_rng(0))
    >>> bool(abs((noisy == 0).mean() - 0.4509) < 0.01)
    True
    >>> rr.dp_event(n_classes=10, n_labels=1000)  # doctest: +ELLIPSIS
    RandomizedResponseDpEvent(noise_parameter=0.6101..., num_buckets=10)

    Record level with a claimed sensitivity of 50 labels: ε' = 2/50 per label; without a
    claim, all 1000 released labels: ε' = 2/1000.

    >>> round(RandomizedResponse(2.0, sensitivity=50).keep_probability(10), 4)
    0.1037
    >>> round(RandomizedResponse(2.0).keep_probability(10, n_labels=1000), 4)
    0.1002
    """

    applies_to: ClassVar[Literal["hard", "soft", "data", "model"]] = "hard"

    def __init__(
        self,
        epsilon: float,
        sensitivity: int | None = None,
        budget: float | None = None,
        delta: float = 1e-5,
        unit: str = "record",
    ) -> None:
        self.epsilon = epsilon
        self.sensitivity = sensitivity
        self.budget = budget
        self.delta = delta
        self.unit = unit

    def _check_params(self) -> None:
        _positive(self.epsilon, "epsilon")
        s = _sensitivity(self.sensitivity, allow_none=True)
        super()._check_params()
        if self.unit == "label" and s not in (None, 1):
            raise ValueError(
                f"sensitivity={s!r} is a number of labels one private RECORD changes; with "
                "unit='label' each label is protected on its own: leave sensitivity=None, or "
                "use unit='record'"
            )

    def _changed_labels(self, n_labels: int | None) -> int:
        """s*: how many released labels one unit of protection covers."""
        if self.unit == "label":
            return 1
        if self.sensitivity is not None:
            return int(self.sensitivity)
        if n_labels is None:
            raise ValueError(
                "n_labels is needed: with unit='record' and sensitivity=None, s* is the number "
                "of released labels"
            )
        return max(1, _n_labels(n_labels))

    def label_epsilon(self, n_labels: int | None = None) -> float:
        """Per-label ε' = epsilon / s* (s* = 1 for ``unit="label"``)."""
        self._check_params()
        return float(self.epsilon) / self._changed_labels(n_labels)

    def keep_probability(self, n_classes: int, n_labels: int | None = None) -> float:
        """Probability that a label is released unchanged: ``e^{ε'}/(e^{ε'} + K − 1)``
        (``n_labels``: labels released per round, needed when s* defaults to all of them)."""
        k = _n_classes(n_classes)
        eps = self.label_epsilon(n_labels)
        return float(1.0 / (1.0 + (k - 1) * math.exp(-eps)))

    def randomize(
        self, labels: np.ndarray, n_classes: int, rng: np.random.Generator
    ) -> NDArray[np.int64]:
        """Randomize hard labels: int64 codes ``(n,)`` in ``0..C-1`` → noisy codes ``(n,)``.

        A label is kept with probability :meth:`keep_probability`, else shifted by a uniform
        offset in ``1..C-1`` (modulo C), i.e. replaced by a uniformly random other class.
        """
        k = _n_classes(n_classes)
        codes = _hard_codes(labels, k)
        if k == 1 or codes.size == 0:
            return codes.copy()
        keep_p = self.keep_probability(k, codes.size)
        flip = rng.random(codes.size) >= keep_p
        shift = rng.integers(1, k, size=codes.size)
        return np.where(flip, (codes + shift) % k, codes).astype(np.int64)

    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """Privacy event of one round: ``min(s*, n_labels)`` compositions of K-ary RR at ε'.

        ``RandomizedResponseDpEvent(q, K)`` with ``q = K/(e^{ε'} + K − 1)`` (dp-accounting's
        RR outputs a uniform bucket with prob. q) is exactly one label's release; a changed
        record affects at most ``min(s*, n_labels)`` labels, so one round is their
        self-composition (``SelfComposedDpEvent``). Its ε at δ = 0 is ``epsilon`` (or less
        when n_labels < s*). For ``unit="label"`` it is one label's event. Compose with
        :func:`cotrain.privacy.epsilon_spent`, which applies the repeat count
        (dp-accounting's PLD accountant would silently drop it).
        """
        k = _n_classes(n_classes)
        n = _n_labels(n_labels)
        if k == 1 or n == 0:
            return noop_event()
        eps = self.label_epsilon(n)
        count = min(self._changed_labels(n), n)
        q = k * math.exp(-eps) / (1.0 + (k - 1) * math.exp(-eps))
        return self_composed(rr_event(q, k), count)


# --------------------------------------------------------------------------------------------
# XOR mechanism (DP-FedCT)
# --------------------------------------------------------------------------------------------


class XORMechanism(LabelMechanism):
    """The XOR mechanism of DP-FedCT on one-hot label bit matrices (Ji et al. 2021).

    The release ``f(D)`` is seen as a bit matrix ``(n, C)`` (one-hot rows). It is XORed with
    independent ``Bernoulli(p)`` bits, i.e. every bit is flipped independently with
    probability ``p``. The sensitivity ``s*`` is the largest number of **bits** that replacing
    one private record can flip, ``max ‖f(D) ⊕ f(D')‖_F²`` (= 2 × the number of changed
    labels for one-hot rows). For any output B, the likelihood ratio is
    ``((1−p)/p)^{d(B,f(D')) − d(B,f(D))} ≤ ((1−p)/p)^{s*}``, so calibrating

        p = 1 / (1 + e^{ε/s*})

    makes each round's release ``epsilon``-DP w.r.t. one private record (per bit it is binary
    randomized response at ε/s*). Unlike the reference code, s* is not hard-coded: estimate it
    (:func:`cotrain.privacy.estimate_sensitivity` returns bits) or bound it. With
    ``sensitivity=1`` the guarantee is only per bit, less than label-level.

    Reported ε: ``epsilon`` is the *pure* (δ = 0) guarantee of one round. At δ > 0 the
    accountant reports less when s* is large: the privacy loss is a sum of s* independent
    ±ε/s* terms, which concentrates (e.g. s* = 3000, ε = 1: about 0.05 per round at
    δ = 1e-5, and about 0.27 after 20 rounds). This is exact, not an approximation.

    Decoding (post-processing, so it keeps DP): the noisy bit matrix is turned back into a hard
    label per row for the message — the class whose bit is 1 when exactly one bit is 1; a
    uniformly random choice among the 1-bits when several are; a uniformly random class when
    none is. :meth:`randomize_bits` returns the bit matrix itself.

    Parameters
    ----------
    epsilon : float
        ε of one round's release w.r.t. one private record (> 0).
    sensitivity : int, optional
        s* in **bits** (>= 1) for ``unit="record"`` — your claim; None = the trivial bound
        2·|U| (each changed one-hot row flips exactly two bits), valid for any learner. With
        ``unit="label"`` it must be None or 2 (one label's two bits).
    budget : float, optional
        Total ε per client over the run; None = no limit.
    delta : float, default=1e-5
        δ at which the composed ε is reported.
    unit : {"record", "label"}, default="record"
        What ``epsilon`` protects: one private record, or one released label.

    Examples
    --------
    The flip rate for realistic sensitivities — the reference code's s* = 3000 flips
    essentially half of all bits at any usable ε, so the labels carry almost no signal:

    >>> for s in (2, 20, 3000):
    ...     print(s, f"{XORMechanism(epsilon=1.0, sensitivity=s).flip_probability():.5f}")
    2 0.37754
    20 0.48750
    3000 0.49992
    >>> round(XORMechanism(epsilon=8.0, sensitivity=2).flip_probability(), 5)
    0.01799
    >>> xor = XORMechanism(epsilon=8.0, sensitivity=2)
    >>> round(xor.keep_probability(n_classes=10), 4)   # decoded label unchanged
    0.9078
    >>> import numpy as np
    >>> xor.randomize(np.array([0, 1, 2]), 3, np.random.default_rng(0)).shape
    (3,)
    """

    applies_to: ClassVar[Literal["hard", "soft"]] = "hard"

    def __init__(
        self,
        epsilon: float,
        sensitivity: int | None = None,
        budget: float | None = None,
        delta: float = 1e-5,
        unit: str = "record",
    ) -> None:
        self.epsilon = epsilon
        self.sensitivity = sensitivity
        self.budget = budget
        self.delta = delta
        self.unit = unit

    def _check_params(self) -> None:
        _positive(self.epsilon, "epsilon")
        s = _sensitivity(self.sensitivity, allow_none=True)
        super()._check_params()
        if self.unit == "label" and s not in (None, 2):
            raise ValueError(
                f"sensitivity={s!r} bits is what one private RECORD changes; with unit='label' "
                "one label's two bits are protected: leave sensitivity=None, or use "
                "unit='record'"
            )

    def _changed_bits(self, n_labels: int | None) -> int:
        if self.unit == "label":
            return 2
        if self.sensitivity is not None:
            return int(self.sensitivity)
        if n_labels is None:
            raise ValueError(
                "n_labels is needed: with unit='record' and sensitivity=None, s* is 2 bits per "
                "released label"
            )
        return max(2, 2 * _n_labels(n_labels))

    def flip_probability(self, n_labels: int | None = None) -> float:
        """Bit-flip probability ``p = 1/(1 + e^{ε/s*})`` (``n_labels`` when s* is the
        trivial 2·|U|)."""
        self._check_params()
        return float(expit(-float(self.epsilon) / self._changed_bits(n_labels)))

    def keep_probability(self, n_classes: int, n_labels: int | None = None) -> float:
        """Probability that the *decoded* label equals the true one.

        With ``q = 1 − p``: ``q(1 − q^K)/(K p) + p q^{K−1}/K`` (true bit kept and j of the other
        K−1 bits set, picked with prob. 1/(j+1); or no bit set and a uniform pick).
        """
        k = _n_classes(n_classes)
        p = self.flip_probability(n_labels)
        q = 1.0 - p
        if p == 0.0:
            return 1.0
        return float(q * -math.expm1(k * math.log(q)) / (k * p) + p * q ** (k - 1) / k)

    def randomize_bits(
        self, labels: np.ndarray, n_classes: int, rng: np.random.Generator
    ) -> NDArray[np.bool_]:
        """One-hot bit matrix ``(n, C)`` of ``labels`` XOR independent Bernoulli(p) bits."""
        k = _n_classes(n_classes)
        codes = _hard_codes(labels, k)
        p = self.flip_probability(max(codes.size, 1))
        bits = np.zeros((codes.size, k), dtype=bool)
        bits[np.arange(codes.size), codes] = True
        return bits ^ (rng.random(bits.shape) < p)

    @staticmethod
    def decode(bits: np.ndarray, rng: np.random.Generator) -> NDArray[np.int64]:
        """Hard labels from noisy bit rows: a uniform choice among the 1-bits, or among all
        classes when a row has none (post-processing; vectorised).

        Examples
        --------
        >>> import numpy as np
        >>> bits = np.array([[0, 1, 0], [1, 0, 0]], dtype=bool)
        >>> XORMechanism.decode(bits, np.random.default_rng(0))
        array([1, 0])
        """
        bits = np.asarray(bits, dtype=bool)
        n, k = bits.shape
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        candidates = bits | ~bits.any(axis=1, keepdims=True)  # empty row -> all classes
        # random priority per cell; the candidate with the largest priority wins (uniform)
        priority = np.where(candidates, rng.random((n, k)), -1.0)
        return priority.argmax(axis=1).astype(np.int64)

    def randomize(
        self, labels: np.ndarray, n_classes: int, rng: np.random.Generator
    ) -> NDArray[np.int64]:
        """Randomize hard labels: ``decode(randomize_bits(labels))``, codes ``(n,)``."""
        return self.decode(self.randomize_bits(labels, n_classes, rng), rng)

    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """Privacy event of one round: ``min(s*, 2·n_labels)`` compositions of binary RR.

        Each flipped bit is binary randomized response at ε/s*:
        ``RandomizedResponseDpEvent(2p, 2)`` (uniform bit with prob. 2p = flip with prob. p).
        At most ``min(s*, 2·n_labels)`` bits differ between neighbours, and the other bits'
        noise carries no privacy loss, so one round is their self-composition (ε ≤ epsilon at
        δ = 0). Compose with :func:`cotrain.privacy.epsilon_spent` (exact for this event).
        """
        k = _n_classes(n_classes)
        n = _n_labels(n_labels)
        if k == 1 or n == 0:
            return noop_event()
        p = self.flip_probability(n)
        count = min(self._changed_bits(n), 2 * n)
        return self_composed(rr_event(2.0 * p, 2), count)


# --------------------------------------------------------------------------------------------
# Gaussian noise on soft labels
# --------------------------------------------------------------------------------------------


class GaussianSoftLabels(LabelMechanism):
    """Gaussian mechanism on a client's soft labels (probability matrix ``(n, C)``).

    L2 sensitivity: two probability rows differ by at most ``sqrt(2)`` in L2 norm, so if one
    private record changes at most ``s*`` rows, ``Δ₂ = sqrt(2·s*)``. Soft outputs of most
    models move on *every* row when the training data change, so the default
    ``sensitivity=None`` takes all rows (``Δ₂ = sqrt(2·n)``); a smaller s* needs a model whose
    outputs provably change on few rows.

    Noise ``N(0, σ²)`` is added to every entry; σ is given directly (``sigma``) or calibrated
    from (``epsilon``, ``delta``) with the analytic Gaussian mechanism (Balle & Wang 2018):
    ``σ = z(ε, δ)·Δ₂``, z the smallest noise multiplier with
    ``Φ(1/(2z) − εz) − e^ε Φ(−1/(2z) − εz) ≤ δ`` (:func:`gaussian_noise_multiplier`). The
    noisy matrix is then post-processed (keeps DP): entries clipped to [0, 1], rows
    renormalised to sum to 1 (a row clipped to all zeros becomes uniform). Rows that are
    all-NaN ("no prediction") stay NaN.

    Parameters
    ----------
    sigma : float, optional
        Noise standard deviation (> 0). Exactly one of ``sigma`` and ``epsilon``.
    epsilon : float, optional
        ε of one round's release at ``delta`` (> 0); σ is calibrated from it.
    sensitivity : int, optional
        s* in rows (labels) one private record can change; None = all released rows.
    budget : float, optional
        Total ε per client over the run; None = no limit.
    delta : float, default=1e-5
        δ for calibration and reporting.
    unit : {"record", "label"}, default="record"
        ``"label"``: one released row protected on its own (Δ₂ = sqrt(2); ``sensitivity``
        must then be None or 1).

    Examples
    --------
    >>> import numpy as np
    >>> g = GaussianSoftLabels(epsilon=1.0, sensitivity=10)
    >>> round(g.l2_sensitivity(n_labels=500), 4)                 # sqrt(2 * 10)
    4.4721
    >>> round(g.noise_std(n_labels=500), 3)                      # 3.7306 * 4.4721
    16.684
    >>> probs = np.full((4, 3), 1 / 3)
    >>> noisy = g.randomize(probs, 3, np.random.default_rng(0))
    >>> noisy.shape, bool(np.allclose(noisy.sum(axis=1), 1.0))
    ((4, 3), True)
    >>> GaussianSoftLabels(sigma=0.5).dp_event(n_classes=3, n_labels=8)   # 0.5 / sqrt(16)
    GaussianDpEvent(noise_multiplier=0.125)
    """

    applies_to: ClassVar[Literal["hard", "soft"]] = "soft"

    def __init__(
        self,
        sigma: float | None = None,
        epsilon: float | None = None,
        sensitivity: int | None = None,
        budget: float | None = None,
        delta: float = 1e-5,
        unit: str = "record",
    ) -> None:
        self.sigma = sigma
        self.epsilon = epsilon
        self.sensitivity = sensitivity
        self.budget = budget
        self.delta = delta
        self.unit = unit

    def _check_params(self) -> None:
        _positive(self.sigma, "sigma", allow_none=True)
        _positive(self.epsilon, "epsilon", allow_none=True)
        if (self.sigma is None) == (self.epsilon is None):
            raise ValueError(
                "give exactly one of sigma (the noise std) and epsilon (to calibrate it), "
                f"got sigma={self.sigma!r}, epsilon={self.epsilon!r}"
            )
        s = _sensitivity(self.sensitivity, allow_none=True)
        super()._check_params()
        if self.unit == "label" and s not in (None, 1):
            raise ValueError(
                f"sensitivity={s!r} rows is what one private RECORD changes; with unit='label' "
                "one row is protected on its own: leave sensitivity=None, or use unit='record'"
            )

    def l2_sensitivity(self, n_labels: int) -> float:
        """``Δ₂ = sqrt(2·min(s*, n_labels))`` (s* = n_labels when ``sensitivity`` is None)."""
        self._check_params()
        n = _n_labels(n_labels)
        if self.unit == "label":
            rows = min(1, n)
        else:
            rows = n if self.sensitivity is None else min(int(self.sensitivity), n)
        return math.sqrt(2.0 * rows)

    def noise_std(self, n_labels: int) -> float:
        """σ: ``sigma``, or the analytic calibration ``z(ε, δ)·Δ₂``."""
        self._check_params()
        if self.sigma is not None:
            return float(self.sigma)
        z = gaussian_noise_multiplier(float(self.epsilon), float(self.delta))
        return z * self.l2_sensitivity(n_labels)

    def randomize(
        self, labels: np.ndarray, n_classes: int, rng: np.random.Generator
    ) -> NDArray[np.float64]:
        """Noisy soft labels ``(n, C)``: + N(0, σ²), clip to [0, 1], renormalise rows."""
        k = _n_classes(n_classes)
        probs = np.asarray(labels, dtype=np.float64)
        if probs.ndim != 2 or probs.shape[1] != k:
            raise ValueError(
                f"labels must be probabilities of shape (n, {k}), got shape {probs.shape}"
            )
        sigma = self.noise_std(probs.shape[0])
        absent = np.isnan(probs).all(axis=1)
        noisy = np.clip(probs + rng.normal(0.0, sigma, size=probs.shape), 0.0, 1.0)
        sums = noisy.sum(axis=1, keepdims=True)
        zero = (sums[:, 0] == 0) & ~absent
        noisy = np.divide(noisy, sums, out=np.full_like(noisy, 1.0 / k), where=sums > 0)
        noisy[zero] = 1.0 / k
        noisy[absent] = np.nan
        return noisy

    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """``GaussianDpEvent(noise_multiplier = σ/Δ₂)`` of one round's release."""
        _n_classes(n_classes)
        n = _n_labels(n_labels)
        if n == 0:
            return noop_event()
        return gaussian_event(self.noise_std(n) / self.l2_sensitivity(n))
