"""The mechanism a client calls, from whatever the user passed as ``privacy=``.

:func:`as_mechanism` is the one entry point: a :class:`~cotrain.privacy.LabelMechanism`
(the protocol of :mod:`cotrain.privacy.mechanisms`) is used as it is. A mechanism written for
the earlier protocol — an ``applies_to`` string the client switched on, or a bare object with
``randomize`` and ``dp_event`` — keeps working for one release: it is wrapped in a
:class:`LegacyMechanism` that maps each value of ``applies_to`` onto the hooks of the protocol,
and a ``DeprecationWarning`` names the hooks to implement instead. Anything else is refused
with a ``TypeError`` that says what to implement.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from cotrain.privacy.mechanisms import ClientRound, LabelMechanism, Release

__all__ = ["LegacyMechanism", "as_mechanism"]

#: the values of the earlier protocol's ``applies_to``
KINDS = ("hard", "soft", "data", "model")


def as_mechanism(privacy: Any) -> Any:
    """The mechanism object the client and the server call for ``privacy``.

    Parameters
    ----------
    privacy : LabelMechanism, legacy mechanism or None
        What the user passed as ``privacy=``.

    Returns
    -------
    LabelMechanism, LegacyMechanism or None
        ``privacy`` itself when it follows the protocol; a :class:`LegacyMechanism` around it
        (with a ``DeprecationWarning``) when it follows the earlier one; None for None.

    Raises
    ------
    TypeError
        For an object that follows neither protocol, or an unknown ``applies_to``.

    Examples
    --------
    >>> from cotrain.privacy import RandomizedResponse
    >>> rr = RandomizedResponse(epsilon=1.0)
    >>> as_mechanism(rr) is rr, as_mechanism(None)
    (True, None)
    >>> as_mechanism("rr")
    Traceback (most recent call last):
    ...
    TypeError: privacy must be a cotrain.privacy.LabelMechanism (implement dp_event and \
randomize or release_round), got str
    """
    if privacy is None or isinstance(privacy, LegacyMechanism):
        return privacy
    legacy = hasattr(privacy, "applies_to")
    if isinstance(privacy, LabelMechanism) and not legacy:
        return privacy
    duck = callable(getattr(privacy, "randomize", None)) and callable(
        getattr(privacy, "dp_event", None)
    )
    if not (legacy or duck):
        raise TypeError(
            "privacy must be a cotrain.privacy.LabelMechanism (implement dp_event and "
            f"randomize or release_round), got {type(privacy).__name__}"
        )
    kind = getattr(privacy, "applies_to", None)
    if kind is not None and kind not in KINDS:
        raise TypeError(
            f"privacy: {type(privacy).__name__}.applies_to must be one of {KINDS}, got "
            f"{kind!r}; better, subclass cotrain.privacy.LabelMechanism"
        )
    warnings.warn(
        f"{type(privacy).__name__} follows the old privacy protocol "
        f"({'applies_to=' + repr(kind) if legacy else 'randomize without LabelMechanism'}), "
        "which will be removed in the next release: subclass cotrain.privacy.LabelMechanism "
        "and implement its hooks (shares, prepare, before_fit, release_round, dp_event; "
        "see cotrain.privacy.mechanisms) instead of applies_to",
        DeprecationWarning,
        stacklevel=3,
    )
    return LegacyMechanism(privacy)


class LegacyMechanism:
    """A mechanism of the earlier protocol, seen through the hooks of the current one.

    Each value of the old ``applies_to`` maps onto the hooks: ``"hard"`` / ``"soft"``
    release ``randomize(labels, C, rng)`` of that kind of labels; ``"data"`` releases
    ``release(model, X, y, X_public, classes, rng, X_extra=, y_extra=)`` and needs a hard
    consensus; ``"model"`` prepares the estimator (``prepare``), seeds the training noise
    (``seed_noise``), releases the labels unchanged with the client's ``round_event`` and
    allows no cross-validated trust. An object without ``applies_to`` randomises whatever
    labels the run shares. Every other attribute (``budget``, ``delta``, ``unit``, ...) is
    the wrapped object's.

    Parameters
    ----------
    inner : object
        The mechanism of the earlier protocol.

    Examples
    --------
    >>> import numpy as np, warnings
    >>> class Keep:
    ...     applies_to = "soft"
    ...     delta, budget = 1e-5, None
    ...     def randomize(self, labels, n_classes, rng):
    ...         return labels
    ...     def dp_event(self, n_classes, n_labels):
    ...         return None
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     mech = as_mechanism(Keep())
    >>> mech.shares, mech.reports_events, mech.delta
    (('soft',), False, 1e-05)
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.kind = getattr(inner, "applies_to", None)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return repr(self.inner)

    @property
    def shares(self) -> tuple[str, ...]:
        """``("hard",)`` for "hard" and "data", ``("soft",)`` for "soft", both otherwise."""
        if self.kind in ("hard", "data"):
            return ("hard",)
        if self.kind == "soft":
            return ("soft",)
        return ("hard", "soft")

    @property
    def reports_events(self) -> bool:
        """True for "model": the client reports each round's event."""
        return self.kind == "model"

    @property
    def cross_validated_trust(self) -> bool:
        """False for "model": its client trains at full weight."""
        return self.kind != "model"

    def check_federation(self, consensus: Any, estimators: list[Any]) -> None:
        """ "data": a hard consensus; "model": every estimator can be prepared."""
        if self.kind == "data" and getattr(consensus, "output", "hard") != "hard":
            raise ValueError(
                f"privacy={type(self.inner).__name__} trains its teachers on hard "
                f"pseudo-labels; consensus={type(consensus).__name__} outputs "
                f"{consensus.output!r} labels: use a hard consensus (e.g. 'majority')"
            )
        if self.kind == "model":
            from sklearn.base import clone

            for i, est in enumerate(estimators):
                try:
                    self.inner.prepare(clone(est))
                except (TypeError, ValueError) as err:
                    raise type(err)(f"client {i}: {err}") from err

    def prepare(self, estimator: Any) -> Any:
        """ "model": the wrapped ``prepare(estimator)``; otherwise the estimator."""
        return self.inner.prepare(estimator) if self.kind == "model" else estimator

    def before_fit(self, model: Any, seed: int | None) -> None:
        """ "model": the wrapped ``seed_noise(model, seed)``."""
        if self.kind == "model":
            self.inner.seed_noise(model, seed)

    def release_round(self, step: ClientRound, rng: np.random.Generator) -> Release:
        """The release of the wrapped mechanism, by its ``applies_to``."""
        if self.kind == "model":
            return Release(step.labels, self.inner.round_event(step.model.estimator_))
        if self.kind == "data":
            codes = self.inner.release(
                step.model, step.X, step.y, step.X_public, step.classes, rng,
                X_extra=step.X_pool, y_extra=step.y_pool,
            )  # fmt: skip
            return Release(codes)
        return Release(self.inner.randomize(step.labels, step.n_classes, rng))
