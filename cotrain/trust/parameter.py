"""The ``trust`` parameter: what ``trust=...`` gives each client.

``FederatedCoTrainer(trust=...)`` and a Flower site's ``trust`` take ``"auto"`` (the default,
:data:`DEFAULT_TRUST`), None (the paper's FedCT: every pseudo-label at full weight), a pool
weight in ``[0, 1]`` or a trust object. :func:`get_trust` turns that into the trust object,
and :func:`client_trust` does so for one client: seeded from the client's seed, and refused
where the client's privacy mechanism allows no such trust.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from cotrain.trust.cross_fit import CrossFitTrust
from cotrain.trust.holdout import HoldoutTrust
from cotrain.trust.pool_halves import PoolHalvesTrust
from cotrain.trust.weights import FixedTrust, PseudoLabelTrust

#: the library's model trusts (:class:`~cotrain.trust.protocol.Trust`): they fit a site's
#: models, label the pool and build its predictor themselves
#: (:meth:`cotrain.federation.client.Client.run_round`)
MODEL_TRUSTS = (CrossFitTrust, HoldoutTrust, PoolHalvesTrust)
_EXPECTED = "'auto', None, a weight in [0, 1], a PseudoLabelTrust, " + ", ".join(
    f"a {t.__name__}" for t in MODEL_TRUSTS
)

#: the trainer's (and a deployment site's) default ``trust``
DEFAULT_TRUST: Any = "auto"

__all__ = ["DEFAULT_TRUST", "MODEL_TRUSTS", "client_trust", "get_trust"]


def get_trust(
    trust: Any, random_state: int | None = None, estimator: Any = None
) -> FixedTrust | PseudoLabelTrust | CrossFitTrust | HoldoutTrust | PoolHalvesTrust:
    """The trust object for a ``trust`` parameter.

    Parameters
    ----------
    trust : "auto", None, float, PseudoLabelTrust, CrossFitTrust, HoldoutTrust or PoolHalvesTrust
        ``"auto"``: :class:`~cotrain.trust.cross_fit.CrossFitTrust` with its defaults
        (cross-fitted labels on the pool, a predictor that falls back toward the local
        model) — except for a learner whose class sets ``cross_validated_trust = False``
        (torch and language-model learners: each extra fit would be a full training), which
        gets full weight: the held-out check (:class:`~cotrain.trust.holdout.HoldoutTrust`,
        an explicit option) left MiniLM sites below their local-only accuracy (0.588
        against 0.636, where full weight reaches 0.663; docs/results.md);
        None: every pseudo-label at full weight (the paper's FedCT); a float: that fixed
        pool weight; an object: used as it is (its ``random_state`` filled in when None).
    random_state : int, optional
        Seed for a cross-validated trust without its own.
    estimator : classifier, optional
        The client's learner (for ``"auto"``).

    Returns
    -------
    FixedTrust, PseudoLabelTrust, CrossFitTrust, HoldoutTrust or PoolHalvesTrust

    Examples
    --------
    >>> get_trust(None)
    FixedTrust(1.0)
    >>> get_trust("auto", random_state=3).random_state
    3
    >>> get_trust(PseudoLabelTrust(), random_state=3)
    PseudoLabelTrust(weights=(0.0, 1.0), cv=3, z=2.0, random_state=3)
    """
    if trust is None:
        return FixedTrust(1.0)
    if isinstance(trust, str):
        if trust != "auto":
            raise ValueError(f"trust must be {_EXPECTED}, got {trust!r}")
        if not getattr(estimator, "cross_validated_trust", True):
            return FixedTrust(1.0)
        return CrossFitTrust(random_state=random_state)
    if isinstance(trust, numbers.Real) and not isinstance(trust, bool):
        return FixedTrust(trust)
    if isinstance(trust, FixedTrust):
        return trust
    if isinstance(trust, (PseudoLabelTrust, *MODEL_TRUSTS)):
        trust.check()
        if trust.random_state is None:
            return _with_seed(trust, random_state)
        return trust
    raise TypeError(f"trust must be {_EXPECTED}, got {type(trust).__name__}")


def _with_seed(trust: Any, random_state: int | None) -> Any:
    """A copy of a trust object with ``random_state`` set."""
    params = {k: v for k, v in vars(trust).items() if k != "random_state"}
    return type(trust)(**params, random_state=random_state)


def client_trust(
    trust: Any,
    privacy: Any,
    seed: np.random.SeedSequence | int | None,
    estimator: Any = None,
) -> FixedTrust | PseudoLabelTrust | CrossFitTrust | HoldoutTrust | PoolHalvesTrust:
    """One client's trust object: :func:`get_trust` seeded from the client's seed (a
    seed sequence as the trainer holds it, or its int as a Flower site receives it: the
    same trust either way).

    A client whose mechanism allows no cross-validated trust (``cross_validated_trust``
    False: its guarantee covers only its private training, e.g. DP-SGD) trains every row at
    weight 1: ``"auto"`` gives ``FixedTrust(1.0)``, and any trust other than None, 1 or
    ``"auto"`` is refused (ValueError naming ``trust`` and the mechanism), before any
    training — in-process and at a Flower site alike. A weight below 1 applies to the pool
    rows of the classes the client holds, so the weights of every pool row would depend on
    its private labels (removing its only record of a class changes many rows' weights),
    outside the training's privacy proof; choosing the weight by cross-validation would look
    at its private records outside the accounted ε.

    Examples
    --------
    >>> seed = np.random.SeedSequence(1)
    >>> client_trust("auto", None, seed).random_state == client_trust(
    ...     "auto", None, int(seed.generate_state(1)[0])).random_state
    True
    >>> from cotrain.privacy import DPSGD
    >>> client_trust(0.5, DPSGD(sampling_rate=0.1, steps=20), seed)
    Traceback (most recent call last):
    ...
    ValueError: trust=0.5 cannot be combined with DPSGD, which trains the model privately: \
every training row must have weight 1 (a pool weight below 1 applies to the classes the \
client holds, so the weights would depend on its private labels, outside the accounted ε); \
use trust=None
    """
    name = type(privacy).__name__
    if privacy is not None:
        from cotrain.privacy.mechanisms.base import as_mechanism

        privacy = as_mechanism(privacy)
    private_training = privacy is not None and not privacy.cross_validated_trust
    if private_training:
        if isinstance(trust, PseudoLabelTrust):
            raise ValueError(
                "trust: a PseudoLabelTrust cannot be combined with a privacy mechanism that "
                f"trains the model privately ({name}): its cross-validation "
                "would use the private records outside the accounted ε; use trust=None"
            )
        if isinstance(trust, str) and trust == "auto":
            return FixedTrust(1.0)
    # a mechanism whose uploads never come from the client's own model (its sites' models
    # stay home, e.g. SecureTeacherVotes) lets the site build its predictor as it likes
    model_trusts = bool(getattr(privacy, "model_trusts", False))
    if privacy is not None and not model_trusts and isinstance(trust, MODEL_TRUSTS):
        raise ValueError(
            f"trust: a {type(trust).__name__} cannot be combined with a privacy mechanism "
            f"({name}): a private client releases its mechanism's labels, not its co-trained "
            "model's; use "
            "trust='auto' (a PseudoLabelTrust for a private client) or None"
        )
    if seed is not None:  # the client's seed (an int, as a Flower site gets it) -> its own
        if isinstance(seed, np.random.SeedSequence):
            seed = int(seed.generate_state(1)[0])
        seed = int(np.random.SeedSequence([int(seed), 0x7275_7374]).generate_state(1)[0])
    if privacy is not None and not model_trusts and isinstance(trust, str) and trust == "auto":
        trust = PseudoLabelTrust()  # a private client's labels come from its mechanism
    chosen = get_trust(trust, seed, estimator)
    if private_training and not (isinstance(chosen, FixedTrust) and chosen.weight == 1.0):
        raise ValueError(
            f"trust={trust!r} cannot be combined with {name}, which trains the model "
            "privately: every training row must have weight 1 (a pool weight below 1 applies "
            "to the classes the client holds, so the weights would depend on its private "
            "labels, outside the accounted ε); use trust=None"
        )
    return chosen
