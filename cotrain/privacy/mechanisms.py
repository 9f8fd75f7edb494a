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

The label randomisers (:class:`RandomizedResponse` here,
:class:`~cotrain.privacy.xor.XORMechanism` and
:class:`~cotrain.privacy.soft_labels.GaussianSoftLabels`) are record-level only through the
sensitivity ``s*``: the number of released values one private record can change. Without
``sensitivity`` they take the trivial bound that holds for every learner — all |U| labels (2|U|
bits, all rows) — which is honest but noisy. A smaller ``sensitivity`` is *your claim*: no
function can compute it for a general learner (:func:`cotrain.privacy.sensitivity_lower_bound`
only finds a lower bound). Record-level DP by construction, for any learner, comes from
:class:`cotrain.privacy.SubsampleAndAggregate` (teachers on disjoint shards of D) or from DP-SGD
training of a torch client (:class:`cotrain.privacy.DPSGD`).

One release per round; rounds compose (:func:`cotrain.privacy.epsilon_spent`), and
``dp_event(C, |U|)`` is the privacy event of one round that the trainer's ledger composes.

Parameters follow scikit-learn's convention: ``__init__`` stores them untouched, they are
validated on first use (``randomize``, ``dp_event``, or an explicit ``validate()``), and
``get_params`` / ``set_params`` work.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal, Self

import numpy as np
from numpy.typing import NDArray

from consensus import ParamsMixin
from cotrain.privacy.accounting import noop_event, rr_event, self_composed
from cotrain.privacy.param_checks import (
    check_delta,
    check_hard_codes,
    check_n_classes,
    check_n_labels,
    check_positive,
    check_sensitivity_for_unit,
    check_unit,
)

__all__ = ["LabelMechanism", "RandomizedResponse"]


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
        check_positive(self.budget, "budget", allow_none=True)
        check_delta(self.delta)
        check_unit(self.unit)

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
        check_positive(self.epsilon, "epsilon")
        check_sensitivity_for_unit(self.sensitivity, self.unit, 1, "labels")
        super()._check_params()

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
        return max(1, check_n_labels(n_labels))

    def label_epsilon(self, n_labels: int | None = None) -> float:
        """Per-label ε' = epsilon / s* (s* = 1 for ``unit="label"``)."""
        self._check_params()
        return float(self.epsilon) / self._changed_labels(n_labels)

    def keep_probability(self, n_classes: int, n_labels: int | None = None) -> float:
        """Probability that a label is released unchanged: ``e^{ε'}/(e^{ε'} + K − 1)``
        (``n_labels``: labels released per round, needed when s* defaults to all of them)."""
        k = check_n_classes(n_classes)
        eps = self.label_epsilon(n_labels)
        return float(1.0 / (1.0 + (k - 1) * math.exp(-eps)))

    def randomize(
        self, labels: np.ndarray, n_classes: int, rng: np.random.Generator
    ) -> NDArray[np.int64]:
        """Randomize hard labels: int64 codes ``(n,)`` in ``0..C-1`` → noisy codes ``(n,)``.

        A label is kept with probability :meth:`keep_probability`, else shifted by a uniform
        offset in ``1..C-1`` (modulo C), i.e. replaced by a uniformly random other class.
        """
        k = check_n_classes(n_classes)
        codes = check_hard_codes(labels, k)
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
        k = check_n_classes(n_classes)
        n = check_n_labels(n_labels)
        if k == 1 or n == 0:
            return noop_event()
        eps = self.label_epsilon(n)
        count = min(self._changed_labels(n), n)
        q = k * math.exp(-eps) / (1.0 + (k - 1) * math.exp(-eps))
        return self_composed(rr_event(q, k), count)
