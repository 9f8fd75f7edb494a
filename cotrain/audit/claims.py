"""What a canary audit checks: an accounting's ε per neighbouring relation, at its δ.

An :class:`EpsilonClaim` is the claim of one release (or one run): record-level ε (one
private record of the client, against whoever sees the release) under each neighbouring
relation the accounting covers — ``"add_or_remove"`` (the headline of every record-level ε in
cotrain) and/or ``"replace_one"`` — at one δ, and whether a Gaussian event is part of it
(then δ must be > 0). :meth:`EpsilonClaim.of_mechanism` reads it from a label mechanism's
events under each relation (:meth:`cotrain.privacy.LabelMechanism.relation_event`), composed
as the ledger composes them. :func:`cotrain.audit.one_run_audit` compares its bound only with
the ε of the relation its experiment realises.

Examples
--------
>>> from cotrain.privacy import RandomizedResponse
>>> rr = RandomizedResponse(epsilon=2.0, sensitivity=3)   # s* = 3 under add/remove, 6 replace-one
>>> claim = EpsilonClaim.of_mechanism(rr, 10, 100)  # at the mechanism's δ = 1e-5
>>> {k: round(v, 3) for k, v in claim.epsilon.items()}, claim.delta, claim.gaussian
({'add_or_remove': 1.998, 'replace_one': 3.621}, 1e-05, False)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any, Literal, cast

from cotrain.audit.canary_bound import check_probability
from cotrain.privacy.accounting.composition import RELATIONS, check_relation
from learners.checks import check_int

__all__ = ["EpsilonClaim", "declares_gaussian"]


def declares_gaussian(events: Any) -> bool:
    """Whether a privacy event (or a list of them) contains a Gaussian mechanism.

    Walks ``dp_accounting`` events and cotrain's stand-ins by their structure: any event
    whose class name contains ``Gaussian`` (``GaussianDpEvent``, the sampled Gaussian of
    DP-SGD inside ``PoissonSampledDpEvent``...), looking inside ``event``, ``events`` and
    ``sampled_event``. A Gaussian event is never pure ε-DP, so its audit needs δ > 0.

    Parameters
    ----------
    events : DpEvent or iterable of DpEvent

    Returns
    -------
    bool

    Examples
    --------
    >>> from cotrain.privacy import RandomizedResponse
    >>> from cotrain.privacy.accounting.epsilon import gaussian_event, self_composed
    >>> declares_gaussian([self_composed(gaussian_event(2.0), 3)])
    True
    >>> declares_gaussian(RandomizedResponse(epsilon=1.0).dp_event(10, 100))
    False
    """
    stack = list(events) if isinstance(events, Iterable) else [events]
    while stack:
        event = stack.pop()
        if "Gaussian" in type(event).__name__:
            return True
        for attr in ("event", "sampled_event"):
            if getattr(event, attr, None) is not None:
                stack.append(getattr(event, attr))
        stack.extend(getattr(event, "events", None) or ())
    return False


@dataclass(frozen=True)
class EpsilonClaim:
    """What an accounting claims for the audited release: ε per relation, at δ.

    Record-level (one private record of the client), against whoever sees the release —
    the audit checks exactly that. ``epsilon`` maps each neighbouring relation the
    accounting covers to its ε (the ledger's ``{"add_or_remove": …, "replace_one": …}``
    form); a canary audit compares its bound only with the ε of its own relation.

    Parameters
    ----------
    epsilon : mapping of {"add_or_remove", "replace_one"} to float
        ε (>= 0) per relation; at least one.
    delta : float
        The δ of the claim, in [0, 1); the audit's bound is computed at it.
    gaussian : bool, default=False
        Whether the mechanism has a Gaussian event (:func:`declares_gaussian`); then δ
        must be > 0 (a Gaussian mechanism is not ε-DP at δ = 0 for any finite ε).

    Examples
    --------
    >>> claim = EpsilonClaim({"add_or_remove": 2.0, "replace_one": 4.0}, delta=1e-5)
    >>> claim.epsilon_for("add_or_remove")
    2.0
    >>> EpsilonClaim({"add_or_remove": 1.0}, delta=0.0, gaussian=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: delta must be > 0 for a mechanism with a Gaussian event ...
    """

    epsilon: Mapping[str, float]
    delta: float
    gaussian: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.epsilon, Mapping) or not self.epsilon:
            raise TypeError(
                "epsilon must be a mapping {relation: ε}, e.g. {'add_or_remove': 2.0}, "
                f"got {self.epsilon!r}"
            )
        clean = {}
        for rel, eps in self.epsilon.items():
            check_relation(rel, "each key of epsilon")
            ok = isinstance(eps, Real) and not isinstance(eps, bool) and float(eps) >= 0
            if not ok or math.isnan(float(eps)):
                raise ValueError(f"epsilon[{rel!r}] must be a number >= 0, got {eps!r}")
            clean[rel] = float(eps)
        object.__setattr__(self, "epsilon", clean)
        delta = check_probability(self.delta, "delta", closed_low=True)
        if not isinstance(self.gaussian, bool):
            raise TypeError(f"gaussian must be a bool, got {self.gaussian!r}")
        if self.gaussian and delta == 0.0:
            raise ValueError(
                "delta must be > 0 for a mechanism with a Gaussian event "
                f"(it is not ε-DP at δ = 0), got {self.delta!r}"
            )
        object.__setattr__(self, "delta", delta)

    def epsilon_for(self, relation: str) -> float:
        """The claimed ε under ``relation``; a ValueError when the claim states none.

        Examples
        --------
        >>> claim = EpsilonClaim({"replace_one": 3.0}, delta=0.0)
        >>> claim.epsilon_for("add_or_remove")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: the claim states no 'add_or_remove' ε (it covers replace_one): ...
        """
        relation = check_relation(relation)
        if relation not in self.epsilon:
            raise ValueError(
                f"the claim states no {relation!r} ε (it covers {', '.join(self.epsilon)}): "
                f"an audit under {relation} cannot be compared with it; state the {relation} ε "
                "of the mechanism, or audit under the relation it covers"
            )
        return self.epsilon[relation]

    @classmethod
    def of_mechanism(
        cls,
        mechanism: Any,
        n_classes: int,
        n_labels: int,
        *,
        rounds: int = 1,
        delta: float | None = None,
    ) -> EpsilonClaim:
        """The claim a label mechanism's accounting makes for ``rounds`` releases.

        For each relation, ``mechanism.relation_event(C, n, relation)`` (skipped where it is
        None: the mechanism states no bound for that relation) composed ``rounds`` times by
        :func:`cotrain.privacy.epsilon_spent` under that relation, at ``delta`` (default the
        mechanism's ``delta``); ``gaussian`` from :func:`declares_gaussian`. A mechanism with
        only ``dp_event`` is read under its declared ``neighbors`` (add/remove by default).

        Parameters
        ----------
        mechanism : LabelMechanism
        n_classes, n_labels : int
            As for ``dp_event``: the label space and the labels released per round.
        rounds : int, default=1
            Releases composed (the canary experiment audits them as one).
        delta : float, optional
            δ in (0, 1) of the claim; default ``mechanism.delta``.

        Returns
        -------
        EpsilonClaim

        Examples
        --------
        >>> from cotrain.privacy import SubsampleAndAggregate
        >>> sa = SubsampleAndAggregate(n_teachers=10, epsilon=2.0, delta=1e-5)
        >>> claim = EpsilonClaim.of_mechanism(sa, 10, 50)
        >>> round(claim.epsilon_for("add_or_remove"), 3), claim.gaussian
        (2.0, True)
        """
        from cotrain.privacy import epsilon_spent  # the audit reads privacy, never the reverse

        rounds = check_int(rounds, "rounds", 1)
        delta = getattr(mechanism, "delta", None) if delta is None else delta
        if delta is None:
            raise ValueError("delta is required: the mechanism states none")
        delta = check_probability(delta, "delta", closed_low=False)
        events: list[Any] = []
        epsilon: dict[str, float] = {}
        for relation in RELATIONS:
            if hasattr(mechanism, "relation_event"):
                event = mechanism.relation_event(n_classes, n_labels, relation)
            else:
                declared = getattr(mechanism, "neighbors", "add_or_remove")
                event = mechanism.dp_event(n_classes, n_labels) if relation == declared else None
            if event is not None:
                events.append(event)
                rel = cast(Literal["add_or_remove", "replace_one"], relation)
                epsilon[relation] = epsilon_spent([event] * rounds, delta, relation=rel)
        if not epsilon:
            raise ValueError(f"{type(mechanism).__name__} states no privacy event to audit")
        return cls(epsilon, delta=delta, gaussian=declares_gaussian(events))
