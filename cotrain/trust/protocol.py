"""What a model trust offers a client: the :class:`Trust` protocol and its :class:`TrustRound`.

A *weight* trust (:class:`~cotrain.trust.weights.FixedTrust`,
:class:`~cotrain.trust.weights.PseudoLabelTrust`) only tells the client how much the
pseudo-labelled pool counts in the fit the client makes itself. A *model* trust takes the
whole round over: it fits the site's models, labels the pool U and builds the site's
predictor (:class:`~cotrain.trust.cross_fit.CrossFitTrust`,
:class:`~cotrain.trust.holdout.HoldoutTrust`, :class:`~cotrain.trust.pool_halves.PoolHalvesTrust`).
The client (:meth:`cotrain.federation.client.Client.run_round`) tells the two apart by this
protocol, and hands a model trust its learner, its rows and a ``state`` dict it keeps for
the trust between rounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np

from learners.blend import BlendedClassifier

__all__ = ["Trust", "TrustRound"]


@dataclass
class TrustRound:
    """What one round of a model trust produced at a client.

    Attributes
    ----------
    on_public : ndarray
        The labels the client sends: probabilities ``(n_public, C)``.
    model : learners.BlendedClassifier
        The client's predictor after the round.
    quality : float or None
        Out-of-fold (or held-out) accuracy of the sending models on the private rows
        (None: not measured).
    alpha : float
        The co-trained models' weight in ``model``.
    fit_time : float
        Seconds spent fitting.
    """

    on_public: np.ndarray
    model: BlendedClassifier
    quality: float | None
    alpha: float
    fit_time: float


@runtime_checkable
class Trust(Protocol):
    """A model trust: it fits a site's models, labels the pool and builds its predictor.

    A client whose trust satisfies this protocol does not fit its learner itself: every
    round it calls :meth:`fit_round` and sends the returned labels. The library's model
    trusts are :data:`~cotrain.trust.MODEL_TRUSTS`; ``trust=`` accepts those (checked by
    :func:`~cotrain.trust.get_trust`).

    Attributes
    ----------
    random_state : int or None
        Seeds the trust's splits; :func:`~cotrain.trust.get_trust` fills it in from the
        client's seed when None.
    fits_per_round : int
        Fits the trust makes per round (read-only), instead of FedCT's one.
    """

    random_state: int | None

    @property
    def fits_per_round(self) -> int:
        """Fits per round, instead of FedCT's one."""
        ...

    def check(self) -> Self:
        """Validate the parameters (ValueError naming the one at fault).

        Returns
        -------
        Trust
            ``self``.
        """
        ...

    def resume(self, model: Any, state: dict[str, Any]) -> None:
        """Take the trust's models back from a restored client's predictor.

        Parameters
        ----------
        model : classifier
            The predictor a checkpoint kept (a :class:`~learners.BlendedClassifier` when the
            trust built it; anything else is ignored).
        state : dict
            The client's ``trust_cache``, filled in place.
        """
        ...

    def fit_round(
        self,
        estimator: Any,
        X: np.ndarray,
        y: np.ndarray,
        X_public: np.ndarray,
        pseudo: np.ndarray | None,
        classes: np.ndarray,
        state: dict[str, Any],
    ) -> TrustRound:
        """One round at a client: fit its models, label the pool, build its predictor.

        Parameters
        ----------
        estimator : classifier
            The client's learner (unfitted prototype; cloned, never fitted itself).
        X, y : ndarray
            The private rows and their labels (values from ``classes``).
        X_public : ndarray
            The public pool U.
        pseudo : ndarray or None
            The consensus: codes ``(n_public,)`` with -1 for abstain, or soft targets
            ``(n_public, C)`` with NaN rows for abstain; None before the first consensus.
        classes : ndarray
            The global classes.
        state : dict
            What the client keeps for the trust between rounds (its ``trust_cache``);
            the client puts the round number in ``state["round"]`` before each call.

        Returns
        -------
        TrustRound
            The labels to send, the site's predictor, its quality and ``alpha``.
        """
        ...
