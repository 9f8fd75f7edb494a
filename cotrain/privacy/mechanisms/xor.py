"""The XOR mechanism of DP-FedCT: Bernoulli noise on one-hot label bits (record-level
through the sensitivity s* in bits; see :mod:`cotrain.privacy.mechanisms.base` for units)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

from cotrain.privacy.accounting.composition import check_relation
from cotrain.privacy.accounting.epsilon import noop_event, rr_event, self_composed
from cotrain.privacy.mechanisms.base import LabelMechanism
from cotrain.privacy.mechanisms.param_checks import (
    check_epsilon,
    check_hard_codes,
    check_n_classes,
    check_n_labels,
    check_sensitivity_for_unit,
)

__all__ = ["XORMechanism"]


class XORMechanism(LabelMechanism):
    """The XOR mechanism of DP-FedCT on one-hot label bit matrices (Ji et al. 2021).

    The release ``f(D)`` is seen as a bit matrix ``(n, C)`` (one-hot rows). It is XORed with
    independent ``Bernoulli(p)`` bits, i.e. every bit is flipped independently with
    probability ``p``. The sensitivity ``s*`` is the largest number of **bits** that adding
    or removing one private record can flip, ``max ‖f(D) ⊕ f(D')‖_F²`` (= 2 × the number of
    changed labels for one-hot rows); replace-one neighbours flip at most ``2·s*`` bits
    (:meth:`relation_event`), and the trivial bound (all 2·|U| bits) holds for both.
    For any output B, the likelihood ratio is
    ``((1−p)/p)^{d(B,f(D')) − d(B,f(D))} ≤ ((1−p)/p)^{s*}``, so calibrating

        p = 1 / (1 + e^{ε/s*})

    makes each round's release ``epsilon``-DP w.r.t. one private record (per bit it is binary
    randomized response at ε/s*). Unlike the reference code, s* is not hard-coded: search for
    a lower bound on it (:func:`cotrain.audit.sensitivity_lower_bound`, in bits by default) or
    bound it. With
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
        Total ε per client over the run; None = no limit in process; a deployed
        site's ledger then stops at
        :data:`~cotrain.privacy.ledgers.site_ledger.DEFAULT_SITE_BUDGET`, and ``math.inf``
        means no limit there either.
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

    def __init__(
        self,
        *,
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
        check_epsilon(self.epsilon, "epsilon")
        check_sensitivity_for_unit(self.sensitivity, self.unit, 2, "bits")
        super()._check_params()

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
        return max(2, 2 * check_n_labels(n_labels))

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
        k = check_n_classes(n_classes)
        p = self.flip_probability(n_labels)
        q = 1.0 - p
        if p == 0.0:
            return 1.0
        return float(q * -math.expm1(k * math.log(q)) / (k * p) + p * q ** (k - 1) / k)

    def randomize_bits(
        self, labels: np.ndarray, n_classes: int, rng: np.random.Generator
    ) -> NDArray[np.bool_]:
        """One-hot bit matrix ``(n, C)`` of ``labels`` XOR independent Bernoulli(p) bits."""
        k = check_n_classes(n_classes)
        codes = check_hard_codes(labels, k)
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
        return self._event(n_classes, n_labels, 1)

    def relation_event(self, n_classes: int, n_labels: int, relation: str) -> Any:
        """One round's event under ``relation``: :meth:`dp_event` under add/remove; under
        replace-one, ``min(2·s*, 2·n_labels)`` bits when s* is a claimed ``sensitivity``
        (removal then addition), the same event for the trivial bound (all 2·|U| bits: any
        two data sets) and for ``unit="label"``.

        Examples
        --------
        >>> XORMechanism(epsilon=1.0, sensitivity=4).relation_event(10, 100, "replace_one").count
        8
        """
        twice = check_relation(relation) == "replace_one" and self.unit == "record"
        return self._event(n_classes, n_labels, 2 if twice else 1)

    def _event(self, n_classes: int, n_labels: int, factor: int) -> Any:
        """``min(factor·s*, 2·n_labels)`` binary RR at ε/s* each."""
        k = check_n_classes(n_classes)
        n = check_n_labels(n_labels)
        if k == 1 or n == 0:
            return noop_event()
        p = self.flip_probability(n)
        count = min(factor * self._changed_bits(n), 2 * n)
        return self_composed(rr_event(2.0 * p, 2), count)
