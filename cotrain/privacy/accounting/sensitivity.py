"""Sensitivity s* of a client's label release: what can and cannot be said about it.

s* is the largest number of released values that replacing ONE private record can change:
``max over neighbours D, D' of ‖f(D) ⊕ f(D')‖_F²`` for the one-hot bit matrix ``f(D)`` of a
client's labels on the public pool U (DP-FedCT, fedct §4), in every round of the co-training
trajectory. For one-hot rows each changed label flips exactly two bits, so s* in bits = 2 × s*
in labels. :class:`XORMechanism` takes bits; :class:`RandomizedResponse` and
:class:`GaussianSoftLabels` take labels.

Nothing here gives s*:

* the only s* valid for every learner is the trivial one: |U| labels, 2|U| bits;
* :func:`cotrain.audit.sensitivity_lower_bound` (an audit: it reads the learner, not the
  mechanism) searches for adversarial neighbours and returns a *lower* bound — it refutes a
  claimed s* that is too small, it never certifies one; with ``strategies=("random_copy",)``
  and ``n_rounds=1`` it is the paper's benign version of that search: a lower bound too, and
  a weak one;
* :func:`analytic_sensitivity_bound` (FedCT Prop. 2) holds only under assumptions that a
  learner rarely meets, in expectation over random data, and fails with probability ρ that
  must be added to δ.

Record-level DP for any learner comes by construction, without s*, from subsample-and-aggregate
(:class:`cotrain.privacy.mechanisms.teachers.SubsampleAndAggregate`).
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, Literal, Self

from scipy import stats

from learners.checks import check_int

__all__ = ["SensitivityBound", "analytic_sensitivity_bound"]


def _check_unit(unit: Any) -> int:
    if unit not in ("bits", "labels"):
        raise ValueError(f"unit must be 'bits' or 'labels', got {unit!r}")
    return 2 if unit == "bits" else 1


class SensitivityBound(int):
    """An s* bound that holds only with probability ``1 − failure_probability``.

    An ``int`` (the bound, in ``unit``), so it can be passed where an s* is expected, carrying
    the failure probability ρ it holds with: a mechanism calibrated to it is at best
    (ε, δ + ρ)-DP — add ``failure_probability`` to δ (:meth:`total_delta`). Arithmetic on it
    gives a plain ``int`` (ρ is dropped).

    Examples
    --------
    >>> b = SensitivityBound(236, unit="bits", failure_probability=0.05)
    >>> b, int(b), b.sensitivity, b.failure_probability
    (SensitivityBound(236, unit='bits', failure_probability=0.05), 236, 236, 0.05)
    >>> round(b.total_delta(1e-5), 10)
    0.05001
    """

    unit: str
    failure_probability: float

    def __new__(cls, value: int, *, unit: str, failure_probability: float) -> Self:
        obj = super().__new__(cls, value)
        obj.unit = unit
        obj.failure_probability = float(failure_probability)
        return obj

    def __getnewargs_ex__(self) -> tuple[tuple[int], dict[str, Any]]:
        return (int(self),), {"unit": self.unit, "failure_probability": self.failure_probability}

    def __repr__(self) -> str:
        return (
            f"SensitivityBound({int(self)}, unit={self.unit!r}, "
            f"failure_probability={self.failure_probability!r})"
        )

    @property
    def sensitivity(self) -> int:
        """The bound as a plain ``int``."""
        return int(self)

    def total_delta(self, delta: float) -> float:
        """δ of a mechanism calibrated to this s* at ``delta``: ``delta + failure_probability``."""
        return float(delta) + self.failure_probability


def analytic_sensitivity_bound(
    n_public: int,
    stability: float,
    rho: float = 0.05,
    *,
    unit: Literal["bits", "labels"] = "bits",
) -> SensitivityBound:
    """FedCT Prop. 2: an s* bound for a stable learner that fails with probability ``rho``.

    Prop. 2 (Abourayya et al., FedCT, §4 and App. B) says: if the learner
    is on-average-replace-one stable with rate ``ε_stab`` for a loss that upper-bounds the 0-1
    loss, then with probability at least ``1 − rho`` one replaced record changes at most
    (Short's binomial quantile bound)::

        ceil(n·p + z·sqrt(n·p·(1 − p)) + (z² + 2)/3),   n = |U|, p = ε_stab, z = Φ⁻¹(1 − ρ)

    labels on U, capped at the trivial bound n. (The paper prints z²/3 for the last term; the
    digest's (z² + 2)/3 is used, which is never smaller.) ``unit="bits"`` (default) doubles it.

    What it assumes, and why it is not a DP sensitivity:

    * **stability is an expectation**: on-average-replace-one stability bounds the change of
      loss *averaged* over a random training set S ~ 𝒟ⁿ, a random replacement z' ~ 𝒟 and a
      random index i. DP needs the worst case over every pair of neighbours, including a
      replacement chosen by an adversary (:func:`~cotrain.audit.sensitivity_lower_bound` finds
      such neighbours changing many times more labels than random ones);
    * **independence**: the proof moves the stability of the loss at the replaced training
      point to every public point and treats the |U| label changes as independent
      Bernoulli(ε_stab) trials (a binomial); changes on nearby public points are strongly
      correlated, so the tail can be far heavier;
    * **a known rate**: ε_stab must hold for the actual learner at size |D ∪ U| along the
      warm-started co-training trajectory; it is known for regularised convex ERM, not for
      trees, forests or neural networks in practice;
    * **failure probability**: even granting all this, the bound fails with probability
      ``rho`` (over the data, not over the mechanism's coins). A mechanism calibrated to it
      is at best **(ε, δ + ρ)-DP**: ρ must be added to δ. With the default ρ = 0.05 that is a
      δ of at least 0.05, which protects nobody; use ρ well below 1/|D| (e.g. 1e-6).

    The only s* valid for every learner is the trivial one, |U| labels (2|U| bits); record-level
    DP for any learner comes by construction from subsample-and-aggregate
    (:class:`cotrain.privacy.mechanisms.teachers.SubsampleAndAggregate`).

    Parameters
    ----------
    n_public : int
        |U| (>= 1).
    stability : float
        The stability rate ε_stab(|D ∪ U|) in [0, 1].
    rho : float, default=0.05
        Failure probability in (0, 1); add it to δ.
    unit : {"bits", "labels"}, default="bits"

    Returns
    -------
    SensitivityBound
        An ``int`` subclass (usable as an s*, and equal to the old return value) with
        ``.sensitivity`` (the bound), ``.failure_probability`` (= ``rho``), ``.unit`` and
        :meth:`SensitivityBound.total_delta`.

    Examples
    --------
    n = 10000, p = 0.01, ρ = 0.05: z = 1.6449, 100 + 1.6449·9.9499 + (2.7055 + 2)/3
    = 100 + 16.366 + 1.568 = 117.93 → 118 labels, 236 bits, failing with probability 0.05:

    >>> analytic_sensitivity_bound(10_000, 0.01, unit="labels")
    SensitivityBound(118, unit='labels', failure_probability=0.05)
    >>> b = analytic_sensitivity_bound(10_000, 0.01)
    >>> b == 236, b.failure_probability, round(b.total_delta(1e-5), 10)  # (ε, 0.05001)-DP
    (True, 0.05, 0.05001)

    At ρ = 1e-6, z = 4.7534: 100 + 4.7534·9.9499 + (22.595 + 2)/3 = 155.49 → 156 labels:

    >>> analytic_sensitivity_bound(10_000, 0.01, rho=1e-6, unit="labels").sensitivity
    156
    """
    factor = _check_unit(unit)
    check_int(n_public, "n_public", 1)
    if (
        isinstance(stability, bool)
        or not isinstance(stability, Real)
        or not (0.0 <= float(stability) <= 1.0)
    ):
        raise ValueError(f"stability must be a number in [0, 1], got {stability!r}")
    if isinstance(rho, bool) or not isinstance(rho, Real) or not 0.0 < float(rho) < 1.0:
        raise ValueError(f"rho must be a number in (0, 1), got {rho!r}")
    n, p = int(n_public), float(stability)
    z = float(stats.norm.ppf(1.0 - float(rho)))
    bound = math.ceil(n * p + z * math.sqrt(n * p * (1.0 - p)) + (z * z + 2.0) / 3.0)
    return SensitivityBound(
        factor * min(n, max(bound, 0)), unit=unit, failure_probability=float(rho)
    )
