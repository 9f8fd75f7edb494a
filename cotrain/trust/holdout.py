"""Held-out co-training: the cheap safeguard for learners whose every fit is a training.

:class:`HoldoutTrust` is what ``trust="auto"`` gives a client without a privacy mechanism
whose learner sets ``cross_validated_trust = False`` (torch and language-model learners:
each fit is a full training that continues from the previous weights, ``warm_start``), for
which the ``n_folds`` + ``local_folds`` extra fits of
:class:`~cotrain.trust.cross_fit.CrossFitTrust` would cost several trainings a round.
It keeps the promise "never worse than alone" with one split instead of K refits:

1. **Once**, a fixed stratified share ``holdout`` of the site's rows is set aside (seeded
   by ``random_state``, the same split every round), and the *local* model is the learner
   fitted on the remaining *training part* alone.
2. **Every round**, ONE *co-trained* model — a persistent
   :class:`~learners.ClassAlignedClassifier`, so a ``warm_start`` learner continues its
   training — is fitted on the training part plus the pseudo-labelled pool rows (as
   FedCT's model is; abstentions dropped; under a soft consensus the private rows are
   one-hot). Its labels on the pool U are what the site sends: they are **not
   cross-fitted** (the model saw those rows' pseudo-labels, as in the paper's FedCT), so
   this trust does not prevent round-1 lock-in; it only protects the site.
3. Its accuracy on the held-out rows is sent as the upload's ``quality`` (for the
   reliability-weighted consensus), and the site's predictor is a
   :class:`~learners.BlendedClassifier` of the local and co-trained models whose weight
   ``alpha`` is chosen on the held-out rows by
   :func:`~cotrain.trust.cross_fit.pick_alpha` (the smallest ``alpha`` whose Brier
   score is within ``z`` standard errors of the best): where the held-out rows show the pool
   hurts, the site keeps its own model.

In round 1 (no consensus yet) the co-trained model is fitted on the training part alone; the
local model is a copy of it (no second training), the site sends its labels and predicts with
the local model (``alpha`` 0). With fewer than ``min_rows`` rows, or no held-out row left by
the stratified split (every class too rare), nothing is held out: the site trains on all its
rows, sends no quality and predicts with the co-trained model (``alpha`` 1: plain
co-training).

Cost: one training per round on the training part plus the pool, as FedCT's (on
``1 - holdout`` of the private rows); no extra training (the local model is a copy of the
round-1 fit); and, every round, a prediction on the held-out rows (plus once by the local
model). The held-out rows are not trained on by the site's models: that is the price of the
check (about ``holdout`` of its labelled rows).
"""

from __future__ import annotations

import copy
import numbers
from typing import Any

import numpy as np
from sklearn.base import clone

from cotrain.trust.cross_fit import ALPHAS, check_alpha_grid, pick_alpha
from cotrain.trust.pool import pool_targets
from cotrain.trust.protocol import TrustRound
from learners import ClassAlignedClassifier
from learners.blend import BlendedClassifier
from learners.checks import check_int

__all__ = ["HoldoutTrust", "holdout_split"]


def holdout_split(y: np.ndarray, holdout: float, random_state: int | None) -> np.ndarray:
    """A stratified held-out mask: ``round(holdout · n_c)`` rows of each class ``c``, at
    most ``n_c - 1`` (no class leaves the training part).

    Parameters
    ----------
    y : ndarray of shape (n,)
        The site's labels.
    holdout : float
        The share held out, in ``(0, 1)``.
    random_state : int, optional
        Seeds which rows.

    Returns
    -------
    ndarray of bool, shape (n,)
        True for a held-out row.

    Examples
    --------
    >>> import numpy as np
    >>> mask = holdout_split(np.array([0] * 10 + [1] * 5 + [2]), 0.2, random_state=0)
    >>> int(mask[:10].sum()), int(mask[10:15].sum()), bool(mask[15])
    (2, 1, False)
    """
    rng = np.random.default_rng(random_state)
    held = np.zeros(len(y), dtype=bool)
    for c in np.unique(y):
        rows = np.flatnonzero(y == c)
        n_hold = min(int(np.floor(holdout * len(rows) + 0.5)), len(rows) - 1)
        held[rng.permutation(rows)[:n_hold]] = True
    return held


class HoldoutTrust:
    """Co-training checked on a fixed held-out split of the site's rows (see the module
    docstring): one training per round, as FedCT.

    Parameters
    ----------
    holdout : float, default=0.2
        Share of the site's rows held out (stratified, fixed for the run), in ``(0, 1)``.
    alphas : sequence of float, default=(0, 0.25, 0.5, 0.75, 1)
        Candidate weights of the co-trained model, each in ``[0, 1]``.
    z : float, default=1.0
        A larger ``alpha`` is taken only if the smaller ones are more than ``z`` standard
        errors (of the paired per-row difference in Brier score) worse than the best.
    min_rows : int, default=10
        Fewest private rows to hold any out: below it the site trains on all its rows,
        ``alpha`` is 1 (plain co-training) and no quality is sent.
    random_state : int, optional
        Seeds the split; the trainer derives it from its ``random_state`` and the client.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2)); y = (X[:, 0] > 0).astype(int)
    >>> U = rng.normal(size=(300, 2))
    >>> lr = LogisticRegression(warm_start=True)  # each fit starts from the last one
    >>> trust, state, classes = HoldoutTrust(random_state=0), {}, np.array([0, 1])
    >>> first = trust.fit_round(lr, X, y, U, None, classes, state)
    >>> first.alpha, int(state["held_out"].sum())  # round 1: the local model; 20 rows held
    (0.0, 20)
    >>> wrong = (U[:, 0] < 0).astype(int)  # a consensus that is always wrong
    >>> trust.fit_round(lr, X, y, U, wrong, classes, state).alpha  # it keeps its own model
    0.0
    >>> right = (U[:, 0] > 0).astype(int)
    >>> trust.fit_round(lr, X, y, U, right, classes, state).alpha > 0
    True
    """

    #: the pool rows are never down-weighted: every pseudo-label has weight 1
    weight = 1.0

    def __init__(
        self,
        *,
        holdout: float = 0.2,
        alphas: tuple[float, ...] = ALPHAS,
        z: float = 1.0,
        min_rows: int = 10,
        random_state: int | None = None,
    ) -> None:
        self.holdout = holdout
        self.alphas = alphas
        self.z = z
        self.min_rows = min_rows
        self.random_state = random_state

    def __repr__(self) -> str:
        return (
            f"HoldoutTrust(holdout={self.holdout!r}, alphas={tuple(self.alphas)!r}, "
            f"z={self.z!r}, min_rows={self.min_rows!r}, random_state={self.random_state!r})"
        )

    @property
    def fits_per_round(self) -> int:
        """Fits per round: one, as FedCT (on the training part plus the pool)."""
        return 1

    def check(self) -> HoldoutTrust:
        """Validate the parameters (ValueError naming the one at fault); returns self.

        Examples
        --------
        >>> HoldoutTrust(holdout=1.0).check()
        Traceback (most recent call last):
        ...
        ValueError: trust holdout must be a number in (0, 1), got 1.0
        """
        h = self.holdout
        if isinstance(h, bool) or not isinstance(h, numbers.Real) or not 0 < h < 1:
            raise ValueError(f"trust holdout must be a number in (0, 1), got {h!r}")
        check_int(self.min_rows, "trust min_rows", 2)
        check_alpha_grid(self.alphas, self.z)
        return self

    def resume(self, model: Any, state: dict[str, Any]) -> None:
        """Take the local and co-trained models back from a restored client's predictor
        (a checkpoint keeps the :class:`~learners.BlendedClassifier`)."""
        if isinstance(model, BlendedClassifier):
            state["local"] = model.local
            if len(model.cotrained) == 1:
                state["co"] = model.cotrained[0]

    def _split(self, y: np.ndarray, state: dict[str, Any]) -> np.ndarray | None:
        """The fixed held-out mask (None: nothing held out), made once per run."""
        if "held_out" not in state:
            held = None
            if len(y) >= self.min_rows:
                held = holdout_split(y, float(self.holdout), self.random_state)
                held = held if held.any() else None
            state["held_out"] = held
        return state["held_out"]

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
        """One round at a client: fit the co-trained model, label the pool, choose ``alpha``.

        The parameters are those of :meth:`Trust.fit_round
        <cotrain.trust.protocol.Trust.fit_round>` (the trust protocol).

        Returns
        -------
        TrustRound
            ``on_public`` from the co-trained model (not cross-fitted), ``quality`` its
            held-out accuracy.
        """
        held_out = self._split(y, state)
        train = np.ones(len(y), bool) if held_out is None else ~held_out
        if state.get("co") is None:  # the one co-trained model, kept (and continued) all run
            state["co"] = ClassAlignedClassifier(clone(estimator), classes=classes)
        co: ClassAlignedClassifier = state["co"]
        spent = 0.0
        if pseudo is None or not hasattr(co, "estimator_"):  # round 1 (or a fresh restore)
            co.fit(X[train], y[train])
            spent += co.fit_time_
            if "local" not in state:  # fitted on the training part alone: the local model
                state["local"] = copy.deepcopy(co)
        elif "local" not in state:  # restored without the local model: fit it again
            state["local"] = ClassAlignedClassifier(clone(estimator), classes=classes)
            state["local"].fit(X[train], y[train])
            spent += state["local"].fit_time_
        local: ClassAlignedClassifier = state["local"]
        if pseudo is not None:
            labelled, y_private, y_pool = pool_targets(y[train], pseudo, classes)
            co.fit(
                np.concatenate([X[train], X_public[labelled]]),
                np.concatenate([y_private, y_pool]),
            )
            spent += co.fit_time_
        on_public = co.predict_proba(X_public)
        held = np.isin(classes, y)
        if held_out is None:  # nothing to measure on: plain co-training
            alpha = 0.0 if pseudo is None else 1.0
            blend = BlendedClassifier(local, cotrained=[co], alpha=alpha, held=held).fit_blend()
            return TrustRound(on_public, blend, None, alpha, spent)
        codes = np.searchsorted(classes, y[held_out])
        co_proba = co.predict_proba(X[held_out])
        quality = float(np.mean(co_proba.argmax(axis=1) == codes))
        if pseudo is None:  # round 1: the local model (the co model is a copy of it)
            blend = BlendedClassifier(local, cotrained=[co], alpha=0.0).fit_blend()
            return TrustRound(on_public, blend, quality, 0.0, spent)
        if "local_held_out" not in state:
            state["local_held_out"] = local.predict_proba(X[held_out])
        alphas, z = tuple(self.alphas), float(self.z)
        alpha = pick_alpha(co_proba, state["local_held_out"], codes, alphas, z, held)
        blend = BlendedClassifier(local, cotrained=[co], alpha=alpha, held=held).fit_blend()
        return TrustRound(on_public, blend, quality, alpha, spent)
