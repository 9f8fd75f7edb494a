"""Gaussian noise on a client's soft labels (record-level through the number of rows one
record can change; see :mod:`cotrain.privacy.mechanisms.base` for units)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from cotrain.privacy.accounting.composition import check_relation
from cotrain.privacy.accounting.epsilon import (
    gaussian_event,
    gaussian_noise_multiplier,
    noop_event,
)
from cotrain.privacy.mechanisms.base import LabelMechanism
from cotrain.privacy.mechanisms.param_checks import (
    check_epsilon,
    check_n_classes,
    check_n_labels,
    check_positive,
    check_sensitivity_for_unit,
)

__all__ = ["GaussianSoftLabels"]


class GaussianSoftLabels(LabelMechanism):
    """Gaussian mechanism on a client's soft labels (probability matrix ``(n, C)``).

    L2 sensitivity: two probability rows differ by at most ``sqrt(2)`` in L2 norm, so if one
    private record changes at most ``s*`` rows, ``Δ₂ = sqrt(2·s*)``. Soft outputs of most
    models move on *every* row when the training data change, so the default
    ``sensitivity=None`` takes all rows (``Δ₂ = sqrt(2·n)``); a smaller s* needs a model whose
    outputs provably change on few rows.

    Neighbouring relation: a claimed s* is a bound under add/remove (one record added or
    removed); replace-one (removal then addition) changes at most ``min(2·s*, n)`` rows,
    ``Δ₂ = sqrt(2·min(2·s*, n))``. The trivial bound (all rows) holds for any two data sets,
    so it is the same under both relations (:meth:`relation_event`). ``epsilon=`` calibrates σ
    for add/remove, the headline relation.

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
        Total ε per client over the run; None = no limit in process; a deployed
        site's ledger then stops at
        :data:`~cotrain.privacy.ledgers.site_ledger.DEFAULT_SITE_BUDGET`, and ``math.inf``
        means no limit there either.
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

    shares: ClassVar[tuple[str, ...]] = ("soft",)

    def __init__(
        self,
        *,
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
        check_positive(self.sigma, "sigma", allow_none=True)
        check_epsilon(self.epsilon, "epsilon", allow_none=True)
        if (self.sigma is None) == (self.epsilon is None):
            raise ValueError(
                "give exactly one of sigma (the noise std) and epsilon (to calibrate it), "
                f"got sigma={self.sigma!r}, epsilon={self.epsilon!r}"
            )
        check_sensitivity_for_unit(self.sensitivity, self.unit, 1, "rows")
        super()._check_params()

    def l2_sensitivity(self, n_labels: int, relation: str = "add_or_remove") -> float:
        """``Δ₂ = sqrt(2·min(s*, n_labels))`` (s* = n_labels when ``sensitivity`` is None);
        under ``relation="replace_one"`` a claimed s* counts twice.

        Examples
        --------
        >>> g = GaussianSoftLabels(sigma=1.0, sensitivity=2)
        >>> g.l2_sensitivity(100), g.l2_sensitivity(100, "replace_one")   # sqrt(4), sqrt(8)
        (2.0, 2.8284271247461903)
        """
        self._check_params()
        n = check_n_labels(n_labels)
        if self.unit == "label":
            rows = min(1, n)
        elif self.sensitivity is None:
            rows = n
        else:
            twice = check_relation(relation) == "replace_one"
            rows = min((2 if twice else 1) * int(self.sensitivity), n)
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
        k = check_n_classes(n_classes)
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
        check_n_classes(n_classes)
        n = check_n_labels(n_labels)
        if n == 0:
            return noop_event()
        return gaussian_event(self.noise_std(n) / self.l2_sensitivity(n))

    def relation_event(self, n_classes: int, n_labels: int, relation: str) -> Any:
        """One round's event under ``relation``, read as dp-accounting reads it: under
        replace-one a ``GaussianDpEvent(z)`` has Δ₂ = 2/z, so the event is
        ``GaussianDpEvent(2σ / Δ₂_replace)`` with Δ₂_replace of :meth:`l2_sensitivity`.

        Examples
        --------
        >>> g = GaussianSoftLabels(sigma=4.0)                 # trivial bound: both the same
        >>> from cotrain.privacy.accounting.epsilon import epsilon_spent
        >>> a = epsilon_spent([g.relation_event(3, 8, "add_or_remove")], 1e-5)
        >>> r = epsilon_spent([g.relation_event(3, 8, "replace_one")], 1e-5,
        ...                   relation="replace_one")
        >>> bool(abs(a - r) < 1e-9)
        True
        """
        if check_relation(relation) == "add_or_remove":
            return self.dp_event(n_classes, n_labels)
        check_n_classes(n_classes)
        n = check_n_labels(n_labels)
        if n == 0:
            return noop_event()
        return gaussian_event(2.0 * self.noise_std(n) / self.l2_sensitivity(n, relation))
