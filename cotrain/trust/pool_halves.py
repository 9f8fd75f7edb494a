"""Pool halves: labels on U that no model fitted, for learners whose every fit is a training.

A torch or language-model site under the paper's FedCT trains on its rows plus the
pseudo-labelled pool U, then labels U with that model: with several epochs a round it fits
the pseudo-labels exactly and sends them back, so after one exchange the consensus no longer
changes (on an H100, 10 MiniLM sites at b = 5 agreed on 100 % of U from round 2 and
``changed`` stayed 0; docs/results.md Part 3). :class:`CrossFitTrust
<cotrain.trust.cross_fit.CrossFitTrust>` prevents this with cross-fits that start
afresh each round, too costly for such learners. :class:`PoolHalvesTrust` does it with two
models that *continue* their training (``warm_start``):

1. **Once**, U is split into two fixed halves ``U_0`` and ``U_1`` (seeded by
   ``random_state``).
2. **Round 1**: one model is fitted on the site's rows alone; both models start from it
   (a copy, no second training), and it labels all of U (it saw no pseudo-label).
3. **Every later round**: model ``k`` continues on all the site's rows plus the
   pseudo-labelled ``U_k`` only, and labels the *other* half. So every label the site sends
   comes from a model that never saw that row's pseudo-label, in this round or any before,
   and the consensus can keep moving.
4. The site predicts with the mean of both models (``alpha`` 1: plain co-training, no
   fallback toward the local model; see the warning below). No quality is sent.

Cost per round: two trainings, each on the site's rows plus half of U — for a site with as
many rows as U, 1.5× FedCT's rows a round; at most 2×. Memory: two models.

This is the cure for the lock-in, not a safeguard: a site's predictor is co-trained at full
weight, as in the paper's FedCT. :class:`~cotrain.trust.holdout.HoldoutTrust` adds the
held-out fallback instead (and keeps the lock-in).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from sklearn.base import clone

from cotrain.trust.pool import pool_targets
from cotrain.trust.protocol import TrustRound
from learners import ClassAlignedClassifier
from learners.blend import BlendedClassifier

__all__ = ["PoolHalvesTrust", "pool_halves"]


def pool_halves(n_public: int, random_state: int | None) -> np.ndarray:
    """Which half of the pool each row is in: a seeded, balanced 0/1 array.

    Examples
    --------
    >>> half = pool_halves(5, random_state=0)
    >>> sorted(half.tolist())
    [0, 0, 0, 1, 1]
    """
    half = np.arange(n_public) % 2
    return np.random.default_rng(random_state).permutation(half)


class PoolHalvesTrust:
    """Two continuing models per site, each on the site's rows plus one fixed half of U,
    each labelling the other half (see the module docstring).

    Parameters
    ----------
    random_state : int, optional
        Seeds the halves; the trainer derives it from its ``random_state`` and the client.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int)
    >>> U = rng.normal(size=(40, 2))
    >>> trust, state, classes = PoolHalvesTrust(random_state=0), {}, np.array([0, 1])
    >>> first = trust.fit_round(LogisticRegression(), X, y, U, None, classes, state)
    >>> first.alpha, first.quality, len(first.model.cotrained)
    (1.0, None, 2)
    >>> pseudo = (U[:, 0] > 0).astype(int)
    >>> later = trust.fit_round(LogisticRegression(), X, y, U, pseudo, classes, state)
    >>> later.on_public.shape
    (40, 2)
    """

    #: the pool rows a model trains on have weight 1
    weight = 1.0

    def __init__(self, *, random_state: int | None = None) -> None:
        self.random_state = random_state

    def __repr__(self) -> str:
        return f"PoolHalvesTrust(random_state={self.random_state!r})"

    @property
    def fits_per_round(self) -> int:
        """Fits per round: two, each on the site's rows plus half of the pool."""
        return 2

    def check(self) -> PoolHalvesTrust:
        """Validate the parameters (nothing to check but the seed's type); returns self.

        Examples
        --------
        >>> PoolHalvesTrust(random_state="a").check()
        Traceback (most recent call last):
        ...
        ValueError: trust random_state must be None or an int, got 'a'
        """
        seed = self.random_state
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
            raise ValueError(f"trust random_state must be None or an int, got {seed!r}")
        return self

    def resume(self, model: Any, state: dict[str, Any]) -> None:
        """Take both models back from a restored client's predictor (a checkpoint keeps the
        :class:`~learners.BlendedClassifier`)."""
        if isinstance(model, BlendedClassifier) and len(model.cotrained) == 2:
            state["models"] = list(model.cotrained)
            state["local"] = model.local

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
        """One round at a client: continue both models, each labels the other half.

        The parameters are those of :meth:`Trust.fit_round
        <cotrain.trust.protocol.Trust.fit_round>` (the trust protocol).
        The returned :class:`~cotrain.trust.protocol.TrustRound` has
        ``on_public`` with each half labelled by the model that never trained on it,
        ``quality`` None and ``alpha`` 1.
        """
        if "half" not in state or len(state["half"]) != len(X_public):
            state["half"] = pool_halves(len(X_public), self.random_state)
        half: np.ndarray = state["half"]
        held = np.isin(classes, y)
        spent = 0.0
        if pseudo is None or "models" not in state:  # round 1, or restored without models
            first = ClassAlignedClassifier(clone(estimator), classes=classes).fit(X, y)
            spent += first.fit_time_
            state["local"] = first
            state["models"] = [copy.deepcopy(first), copy.deepcopy(first)]
            if pseudo is None:
                on_public = first.predict_proba(X_public)
                blend = BlendedClassifier(
                    first, cotrained=state["models"], alpha=1.0, held=held
                ).fit_blend()
                return TrustRound(on_public, blend, None, 1.0, spent)
        models: list[ClassAlignedClassifier] = state["models"]
        labelled, y_private, y_pool = pool_targets(y, pseudo, classes)
        on_public = np.empty((len(X_public), len(classes)))
        for k, model in enumerate(models):
            mine = labelled & (half == k)
            model.fit(
                np.concatenate([X, X_public[mine]]),
                np.concatenate([y_private, y_pool[half[labelled] == k]]),
            )
            spent += model.fit_time_
            others = half != k
            on_public[others] = model.predict_proba(X_public[others])
        blend = BlendedClassifier(
            state["local"], cotrained=models, alpha=1.0, held=held
        ).fit_blend()
        return TrustRound(on_public, blend, None, 1.0, spent)
