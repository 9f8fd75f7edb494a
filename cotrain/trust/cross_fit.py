"""Cross-fitted co-training: honest reliabilities, and a site never worse than alone.

:class:`CrossFitTrust` is the default way a client without a privacy mechanism trains
(``trust="auto"``). It does three things the paper's FedCT (``trust=None``) does not:

1. **Out-of-fold models.** The client's private rows are cut into ``n_folds`` fixed folds.
   Model ``k`` is fitted on the private rows outside fold ``k`` plus the pseudo-labelled
   pool, so that it can be measured on private fold ``k``. With ``pool="whole"`` (the
   default) every model trains on the whole pool, as FedCT's does, and the client sends the
   mean of their predictions on U: labels as strong and as stable as FedCT's. With
   ``pool="cross_fit"`` the pool is cut into folds too and model ``k`` labels pool fold
   ``k``, which it did not train on: a client never sends back a pseudo-label its model
   was fitted to, so the consensus keeps moving (each model sees half the pool and half
   the rows; measured, it gains less, see docs/guide/when_cotraining_helps.md). A bagged
   learner (a random forest: :func:`out_of_bag`) needs no cross-fits: it is fitted once on
   all its rows and the pseudo-labelled pool, its out-of-bag probabilities (from the
   members that did not draw a row) serve as the out-of-fold estimate on the private rows
   and, with ``pool="cross_fit"``, as its labels on U.
2. **An honest reliability.** Model ``k`` predicts private fold ``k``, which it did not
   see: the out-of-fold accuracy is sent as the upload's ``quality`` (a consensus such as
   :class:`consensus.ReliabilityVote` weights the client's votes by it).
3. **Never worse than alone, beyond noise.** Once, the client fits its learner on its own
   rows (the *local* model) and measures it by ``local_folds``-fold cross-validation. Every
   round it chooses the weight ``alpha`` of the co-trained models in its own predictor
   (:class:`learners.BlendedClassifier`: ``alpha · mean_k p_k + (1 - alpha) · p_local``)
   on the grid ``alphas`` by the out-of-fold Brier score on its rows: with
   ``prefer="local"`` (the default) the *smallest* ``alpha`` whose score is within ``z``
   standard errors of the best — a site moves to the co-trained models only as far as its
   own rows show, beyond noise, that they help; ``prefer="cotrained"`` takes the largest
   such ``alpha`` (a small site then keeps the pool unless its rows show harm: measured,
   it gained more on tabular data but left a text site 0.14 below alone, see
   docs/guide/when_cotraining_helps.md). What it *sends* stays the co-trained models'
   honest prediction.

Cost per round: with ``refit="one"`` (the default) the first co-training round fits all
``n_folds`` models (default 2) and every later round round ``t`` refits model ``t mod
n_folds`` only, keeping the others from earlier rounds — one fit a round on the pool and
``(n_folds - 1) / n_folds`` of the private rows, as FedCT makes one on all of them; the
labels sent are still the mean of all the models (``refit="all"``: every model every
round). Plus, once, ``local_folds + 1`` fits on the private rows alone, and every
prediction made by the ``n_folds + 1`` models of the blend. A bagged learner makes one fit
per round, as in FedCT, and one (out-of-bag) local fit.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import KFold, StratifiedKFold

from cotrain.trust.protocol import TrustRound
from learners import ClassAlignedClassifier, align_proba, continues_training
from learners.blend import BlendedClassifier, blend_proba
from learners.checks import check_int

__all__ = ["CrossFitTrust", "check_alpha_grid", "out_of_bag", "pick_alpha"]

#: the default grid of co-trained weights a site chooses from
ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)

#: what each cross-fitted model trains on, and which of its labels it sends
POOLS = ("whole", "cross_fit")

#: which cross-fitted models a round refits
REFITS = ("one", "all")

#: which way pick_alpha resolves a difference within z standard errors
PREFER = ("local", "cotrained")


class CrossFitTrust:
    """Cross-fitted co-training with a local fallback (see the module docstring).

    Parameters
    ----------
    n_folds : int, default=2
        Folds of the private rows (and, with ``pool="cross_fit"``, of the pool): one model
        per fold.
    pool : {"whole", "cross_fit"}, default="whole"
        "whole": every model trains on the whole pseudo-labelled pool, and the client sends
        the mean of their predictions on U. "cross_fit": model ``k`` trains on the pool
        outside fold ``k`` and labels fold ``k`` (labels never fitted to themselves).
    refit : {"one", "all"}, default="one"
        "one": after the first co-training round, round ``t`` refits model ``t mod
        n_folds`` only (the others stay as earlier rounds fitted them); "all": every
        model every round.
    local_folds : int, default=5
        Folds of the one-time cross-validation of the local model.
    alphas : sequence of float, default=(0, 0.25, 0.5, 0.75, 1)
        Candidate weights of the co-trained models, each in ``[0, 1]``.
    z : float, default=1.0
        How far, in standard errors of the paired per-row difference in Brier score, an
        ``alpha`` may be from the best one's score and still be taken (0: the best).
    prefer : {"local", "cotrained"}, default="local"
        Among the weights within ``z`` standard errors of the best, take the smallest
        ("local": the site moves to the co-trained models only as far as its rows show,
        beyond noise, that they help) or the largest ("cotrained": it leaves them only as
        far as its rows show they hurt).
    min_rows : int, default=10
        Fewest private rows to measure anything on: below it the co-trained models use all
        private rows, ``alpha`` is 1 (plain co-training) and no quality is sent.
    random_state : int, optional
        Seeds the folds; the trainer derives it from its ``random_state`` and the client.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int)
    >>> U = rng.normal(size=(200, 2))
    >>> trust = CrossFitTrust(random_state=0)
    >>> state = {}
    >>> wrong = (U[:, 0] < 0).astype(int)  # a consensus that is always wrong
    >>> out = trust.fit_round(LogisticRegression(), X, y, U, wrong, np.array([0, 1]), state)
    >>> out.alpha  # the site's own rows show the pool hurts: it keeps its own model
    0.0
    >>> right = (U[:, 0] > 0).astype(int)
    >>> trust.fit_round(LogisticRegression(), X, y, U, right, np.array([0, 1]), state).alpha > 0
    True
    """

    #: the pool rows are never down-weighted: every pseudo-label has weight 1
    weight = 1.0

    def __init__(
        self,
        *,
        n_folds: int = 2,
        pool: str = "whole",
        refit: str = "one",
        local_folds: int = 5,
        alphas: tuple[float, ...] = ALPHAS,
        z: float = 1.0,
        prefer: str = "local",
        min_rows: int = 10,
        random_state: int | None = None,
    ) -> None:
        self.n_folds = n_folds
        self.pool = pool
        self.refit = refit
        self.local_folds = local_folds
        self.alphas = alphas
        self.z = z
        self.prefer = prefer
        self.min_rows = min_rows
        self.random_state = random_state

    def __repr__(self) -> str:
        return (
            f"CrossFitTrust(n_folds={self.n_folds!r}, pool={self.pool!r}, "
            f"refit={self.refit!r}, local_folds={self.local_folds!r}, "
            f"alphas={tuple(self.alphas)!r}, z={self.z!r}, prefer={self.prefer!r}, "
            f"min_rows={self.min_rows!r}, "
            f"random_state={self.random_state!r})"
        )

    @property
    def keeps_models(self) -> bool:
        """Whether a round goes on from earlier rounds' models (``refit="one"``): a
        deployed site must then store its model between rounds."""
        return self.refit == "one"

    @property
    def fits_per_round(self) -> int:
        """Fits in a round after the first co-training one, instead of FedCT's one (that
        round itself makes ``n_folds``)."""
        return 1 if self.refit == "one" else int(self.n_folds)

    def check(self) -> CrossFitTrust:
        """Validate the parameters (ValueError naming the one at fault); returns self."""
        for name in ("n_folds", "local_folds", "min_rows"):
            check_int(getattr(self, name), f"trust {name}", 2)
        if not isinstance(self.pool, str) or self.pool not in POOLS:
            raise ValueError(f"trust pool must be one of {POOLS}, got {self.pool!r}")
        if not isinstance(self.refit, str) or self.refit not in REFITS:
            raise ValueError(f"trust refit must be one of {REFITS}, got {self.refit!r}")
        if not isinstance(self.prefer, str) or self.prefer not in PREFER:
            raise ValueError(f"trust prefer must be one of {PREFER}, got {self.prefer!r}")
        check_alpha_grid(self.alphas, self.z)
        return self

    # ------------------------------------------------------------------ folds
    def _folds(self, y: np.ndarray, k: int, salt: int) -> np.ndarray:
        """Fold index of every row (stratified where every class has ``k`` rows)."""
        _, counts = np.unique(y, return_counts=True)
        seed = None if self.random_state is None else (int(self.random_state) + salt) % 2**32
        splitter = (StratifiedKFold if counts.min() >= k else KFold)(
            k, shuffle=True, random_state=seed
        )
        fold = np.empty(len(y), dtype=np.int64)
        for i, (_, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
            fold[test] = i
        return fold

    def _start(
        self,
        estimator: Any,
        X: np.ndarray,
        y: np.ndarray,
        classes: np.ndarray,
        n_public: int,
        state: dict[str, Any],
    ) -> float:
        """The once-per-run part: folds, the local model and its out-of-fold probabilities.
        Returns the seconds spent fitting."""
        spent = 0.0
        if "d_fold" not in state:
            measurable = len(y) >= max(self.min_rows, 2 * self.n_folds, 2 * self.local_folds)
            state["measurable"] = measurable
            state["d_fold"] = self._folds(y, self.n_folds, 0) if measurable else None
            rng = np.random.default_rng(self.random_state)
            state["u_fold"] = rng.permutation(np.arange(n_public) % self.n_folds)
        bagged = out_of_bag(estimator)
        if "local" not in state:
            local = ClassAlignedClassifier(
                _oob_clone(estimator) if bagged else clone(estimator), classes=classes
            ).fit(X, y)
            spent += local.fit_time_
            state["local"] = local
        if "local_oof" not in state and state["measurable"] and bagged:
            # its out-of-bag probabilities (kept by a restored model too): no refits
            state["local_oof"] = _oob_proba(state["local"], X, classes)
        if "local_oof" not in state and state["measurable"]:
            oof = np.zeros((len(y), len(classes)))
            fold = self._folds(y, self.local_folds, 1)
            for k in range(self.local_folds):
                model = ClassAlignedClassifier(clone(estimator), classes=classes)
                model.fit(X[fold != k], y[fold != k])
                spent += model.fit_time_
                oof[fold == k] = model.predict_proba(X[fold == k])
            state["local_oof"] = oof
        return spent

    def resume(self, model: Any, state: dict[str, Any]) -> None:
        """Take the local and co-trained models back from a restored client's predictor
        (a checkpoint keeps the :class:`~learners.BlendedClassifier`)."""
        if isinstance(model, BlendedClassifier):
            state["local"] = model.local
            if len(model.cotrained) == self.n_folds:
                state["folds"] = list(model.cotrained)

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
        """One round at a client: fit, label the pool (cross-fitted), choose ``alpha``.

        The parameters are those of :meth:`Trust.fit_round
        <cotrain.trust.protocol.Trust.fit_round>` (the trust protocol).

        Returns
        -------
        TrustRound
            ``on_public`` cross-fitted, ``quality`` the out-of-fold accuracy.
        """
        spent = self._start(estimator, X, y, classes, len(X_public), state)
        local: ClassAlignedClassifier = state["local"]
        measurable = state["measurable"]
        if pseudo is None:  # round 1: the local model labels the pool
            model = BlendedClassifier(local, cotrained=(), alpha=0.0).fit_blend()
            quality = None
            if measurable:
                quality = float(np.mean(state["local_oof"].argmax(axis=1) == _codes(y, classes)))
            return TrustRound(local.predict_proba(X_public), model, quality, 0.0, spent)
        labelled = ~np.isnan(pseudo).any(axis=1) if pseudo.ndim == 2 else pseudo >= 0
        if pseudo.ndim == 1 and out_of_bag(estimator):
            return self._out_of_bag_round(estimator, X, y, X_public, pseudo, classes, state, spent)
        targets = pseudo if pseudo.ndim == 2 else None
        y_private = y
        if targets is not None:  # soft consensus: private rows one-hot
            y_private = (y[:, None] == classes[None, :]).astype(np.float64)
        refits = range(self.n_folds)
        if self.refit == "one" and state.get("folds") and state.get("round") is not None:
            refits = range(int(state["round"]) % self.n_folds, self.n_folds, self.n_folds)
        folds = state.get("folds") or [
            ClassAlignedClassifier(clone(estimator), classes=classes) for _ in range(self.n_folds)
        ]
        state["folds"] = folds
        on_public = np.zeros((len(X_public), len(classes)))
        oof = np.zeros((len(y), len(classes)))
        u_fold, d_fold = state["u_fold"], state["d_fold"]
        whole = self.pool == "whole"
        for k, model in enumerate(folds):
            rows = labelled if whole else labelled & (u_fold != k)
            train = np.ones(len(y), bool) if d_fold is None else d_fold != k
            if k in refits:
                y_pool = pseudo[rows] if targets is not None else classes[pseudo[rows]]
                model.fit(
                    np.concatenate([X[train], X_public[rows]]),
                    np.concatenate([y_private[train], y_pool]),
                )
                spent += model.fit_time_
            # every model predicts every round, refitted or not, so that a run resumed from a
            # checkpoint makes the same calls (a learner may draw randomness when it
            # predicts); the pool rows it labels and its held-out rows in one call
            asked = X_public if whole else X_public[u_fold == k]
            proba = model.predict_proba(np.concatenate([asked, X[~train]]))
            if whole:
                on_public += proba[: len(asked)] / len(folds)
            else:
                on_public[u_fold == k] = proba[: len(asked)]
            if d_fold is not None:
                oof[d_fold == k] = proba[len(asked) :]
        return self._finish(folds, on_public, oof if measurable else None, y, classes, state, spent)

    def _out_of_bag_round(
        self,
        estimator: Any,
        X: np.ndarray,
        y: np.ndarray,
        X_public: np.ndarray,
        pseudo: np.ndarray,
        classes: np.ndarray,
        state: dict[str, Any],
        spent: float,
    ) -> TrustRound:
        """A bagged learner's round: one fit on all private rows and pseudo-labelled pool
        rows, whose out-of-bag probabilities (from the members that did not see a row) are
        its out-of-fold estimate on its own rows and, with ``pool="cross_fit"``, the labels
        it sends (``pool="whole"``: its predictions on U, as FedCT's model would send)."""
        labelled = pseudo >= 0
        model = ClassAlignedClassifier(_oob_clone(estimator), classes=classes)
        model.fit(
            np.concatenate([X, X_public[labelled]]),
            np.concatenate([y, classes[pseudo[labelled]]]),
        )
        spent += model.fit_time_
        train = np.concatenate([X, X_public[labelled]])
        oob = _oob_proba(model, train, classes)
        if self.pool == "whole":
            on_public = model.predict_proba(X_public)
        else:
            on_public = np.empty((len(X_public), len(classes)))
            on_public[labelled] = oob[len(y) :]
            if not labelled.all():  # abstained rows were not trained on: plain predictions
                on_public[~labelled] = model.predict_proba(X_public[~labelled])
        oof = oob[: len(y)] if state["measurable"] else None
        return self._finish([model], on_public, oof, y, classes, state, spent)

    def _finish(
        self,
        models: list[Any],
        on_public: np.ndarray,
        oof: np.ndarray | None,
        y: np.ndarray,
        classes: np.ndarray,
        state: dict[str, Any],
        spent: float,
    ) -> TrustRound:
        """The site's blend and quality from the co-trained models' out-of-fold
        probabilities on its rows (None: too few rows to measure: plain co-training)."""
        held = np.isin(classes, y)
        if oof is None:
            blend = BlendedClassifier(
                state["local"], cotrained=models, alpha=1.0, held=held
            ).fit_blend()
            return TrustRound(on_public, blend, None, 1.0, spent)
        codes = _codes(y, classes)
        alphas, z = tuple(self.alphas), float(self.z)
        alpha = pick_alpha(oof, state["local_oof"], codes, alphas, z, held, self.prefer)
        quality = float(np.mean(oof.argmax(axis=1) == codes))
        blend = BlendedClassifier(
            state["local"], cotrained=models, alpha=alpha, held=held
        ).fit_blend()
        return TrustRound(on_public, blend, quality, alpha, spent)


def out_of_bag(estimator: Any) -> bool:
    """Whether a learner gives out-of-bag probabilities instead of needing cross-fits: a
    bagged ensemble (an ``oob_score`` parameter, ``bootstrap=True``: a random forest, extra
    trees with bootstrap, bagging) that refits from scratch.

    Examples
    --------
    >>> from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
    >>> out_of_bag(RandomForestClassifier()), out_of_bag(ExtraTreesClassifier())
    (True, False)
    """
    params = estimator.get_params(deep=False) if hasattr(estimator, "get_params") else {}
    return (
        "oob_score" in params
        and params.get("bootstrap", True) is True
        and not continues_training(estimator)
    )


def _oob_clone(estimator: Any) -> Any:
    return clone(estimator).set_params(oob_score=True)


def _oob_proba(model: Any, X: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Out-of-bag probabilities of a fitted bagged ``model`` (a ClassAlignedClassifier) on
    its training rows ``X``, columns in ``classes``; a row no member left out (or a model
    that could not bag, e.g. a single-class fit) gets its plain prediction."""
    inner = model.estimator_
    oob = getattr(inner, "oob_decision_function_", None)
    if oob is None:
        return model.predict_proba(X)
    out = align_proba(np.asarray(oob, dtype=np.float64), inner.classes_, classes)
    missing = ~np.isfinite(out).all(axis=1) | (out.sum(axis=1) == 0)
    if missing.any():
        out[missing] = model.predict_proba(X[missing])
    return out


def _codes(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    return np.searchsorted(classes, y)


def check_alpha_grid(alphas: Any, z: Any) -> None:
    """Check :func:`pick_alpha`'s ``alphas`` and ``z`` as a trust's parameters.

    Examples
    --------
    >>> check_alpha_grid((0.0, 1.5), 1.0)
    Traceback (most recent call last):
    ...
    ValueError: trust alphas must lie in [0, 1], got 1.5
    """
    if isinstance(alphas, str | bytes) or not hasattr(alphas, "__len__") or not alphas:
        raise ValueError(f"trust alphas must be a non-empty sequence, got {alphas!r}")
    for a in alphas:
        if isinstance(a, bool) or not isinstance(a, numbers.Real) or not 0 <= float(a) <= 1:
            raise ValueError(f"trust alphas must lie in [0, 1], got {a!r}")
    if isinstance(z, bool) or not isinstance(z, numbers.Real) or z < 0:
        raise ValueError(f"trust z must be a number >= 0, got {z!r}")


def pick_alpha(
    cotrained: np.ndarray,
    local: np.ndarray,
    y: np.ndarray,
    alphas: tuple[float, ...] = ALPHAS,
    z: float = 1.0,
    held: np.ndarray | None = None,
    prefer: str = "local",
) -> float:
    """The smallest (``prefer="local"``) or largest (``prefer="cotrained"``) co-trained
    weight whose out-of-fold Brier score is within ``z`` standard errors of the best one's.

    Parameters
    ----------
    cotrained, local : ndarray of shape (n, C)
        Out-of-fold probabilities of the co-trained and the local models on the private rows.
    y : ndarray of shape (n,)
        Class codes of those rows.
    alphas : tuple of float
        Candidates in ``[0, 1]``.
    z : float
        Standard errors of the paired per-row difference a smaller weight may lose by.
    held : ndarray of bool, optional
        The classes the site holds rows of (see :func:`learners.blend.blend_proba`).
    prefer : {"local", "cotrained"}, default="local"
        Which way a difference within ``z`` standard errors is resolved.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0, 0, 1, 1])
    >>> good = np.eye(2)[y] * 0.8 + 0.1  # right, confidently
    >>> poor = np.full((4, 2), 0.5)
    >>> pick_alpha(good, poor, y, z=0.0), pick_alpha(poor, good, y, z=0.0)
    (1.0, 0.0)
    """
    onehot = np.eye(local.shape[1])[y]
    grid = sorted(float(a) for a in alphas)
    losses = np.array(
        [((blend_proba(cotrained, local, a, held) - onehot) ** 2).sum(axis=1) for a in grid]
    )
    best = int(np.argmin(losses.mean(axis=1)))
    order = range(best + 1) if prefer == "local" else range(len(grid) - 1, best - 1, -1)
    for j in order:
        diff = losses[j] - losses[best]
        se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else 0.0
        if diff.mean() <= z * se + 1e-12:
            return grid[j]
    return grid[best]  # pragma: no cover - j == best always qualifies
