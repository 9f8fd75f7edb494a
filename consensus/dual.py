"""Dual distillation (Sattler's thesis, ch. 5.2.4): the server distils a model each round.

In compressed federated distillation the server does not broadcast the clients' averaged
soft labels directly. It first trains a model of its own on the public pool with them
(``θ_S ← train(θ_S, X_pub, Y_pub)``, eq. 5.13), then broadcasts *that model's* soft labels
on the public pool (eq. 5.14), which the federation's wire format may quantise (downstream
quantisation, ``soft_bits``). :class:`DualDistillation` is that server step as a consensus
rule wrapping any base rule (``"mean"``: distributed distillation, as in the thesis).

The rule needs the public pool: the federation binds it once before round 1
(:meth:`DualDistillation.bind_public`; :class:`cotrain.FederatedCoTrainer` does it). It
distils only in a server round, which the server announces by asking for the round's
weights (:meth:`DualDistillation.weights_for`, called by the server right before the
consensus); any other call — the federation's predictions on test data, which pass the
clients' probabilities on *those* rows — returns the base rule's consensus unchanged.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._base import Consensus
from .registry import get_consensus

__all__ = ["DualDistillation", "soft_targets_of"]

_TARGETS = ("auto", "soft", "weighted", "hard")
#: classes with less probability than this are left out of a weighted row expansion
_MIN_WEIGHT = 1e-3


def soft_targets_of(pseudo: ArrayLike, n_classes: int) -> NDArray[np.float64]:
    """Any consensus output as soft targets: hard codes become one-hot rows.

    Parameters
    ----------
    pseudo : array-like
        Hard pseudo-labels ``(n,)`` with -1 for abstain, or soft targets ``(n, n_classes)``
        with NaN rows for abstain.
    n_classes : int
        Number of classes C.

    Returns
    -------
    ndarray of float64, shape (n, n_classes)
        NaN rows where the consensus abstained.

    Examples
    --------
    >>> from consensus.dual import soft_targets_of
    >>> soft_targets_of([1, -1], n_classes=2)
    array([[ 0.,  1.],
           [nan, nan]])
    """
    arr = np.asarray(pseudo)
    if arr.ndim == 2:
        return arr.astype(np.float64, copy=True)
    codes = arr.astype(np.int64)
    out = np.zeros((codes.size, n_classes))
    voted = codes >= 0
    out[np.flatnonzero(voted), codes[voted]] = 1.0
    out[~voted] = np.nan
    return out


def _n_rows(X: Any) -> int:
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None else len(X)


def _take_rows(X: Any, rows: np.ndarray) -> Any:
    """Rows of arrays, sparse matrices, data frames or lists (of texts)."""
    if hasattr(X, "iloc"):
        return X.iloc[rows]
    if isinstance(X, list | tuple):
        return [X[i] for i in rows]
    return X[rows]


def _continues(model: Any) -> bool:
    """Whether a later fit of ``model`` continues from the previous one (warm start)."""
    get_params = getattr(model, "get_params", None)
    params = get_params(deep=False) if callable(get_params) else {}
    return bool(getattr(model, "continues_training", False)) or params.get("warm_start") is True


def _takes_sample_weight(model: Any) -> bool:
    try:
        return "sample_weight" in inspect.signature(model.fit).parameters
    except (TypeError, ValueError):
        return False


class DualDistillation(Consensus):
    """Dual distillation: a server model distilled on the public pool makes the broadcast.

    Each round the base rule forms the consensus of the clients' labels on the public pool
    U; the server fits ``server_model`` on (U, that consensus) and the rule returns the
    server model's probabilities on U, which become the broadcast. With the trainer's
    ``soft_bits`` the broadcast is quantised to that many bits per class (the thesis's
    downstream quantisation; with ``soft_bits`` uploads are quantised too), and
    ``history_`` counts its exact bytes in ``bytes_down``.

    How the server model learns from the consensus (``targets``):

    - ``"soft"`` — ``fit(U, targets)`` with ``(n, C)`` soft targets, for a learner that
      declares ``accepts_soft_targets = True`` (e.g. ``learners.TorchClassifier``);
    - ``"weighted"`` — every row once per class holding at least 0.1 % of its mass, weighted
      by that mass (``fit(..., sample_weight=...)``), as the clients' adapters do;
    - ``"hard"`` — the consensus argmax;
    - ``"auto"`` (default) — the first of these the learner takes.

    Rows where the base consensus abstained are left out of the fit; the server model still
    labels them. A server model with ``warm_start=True`` (or a true ``continues_training``
    attribute) keeps training across rounds, θ_S^t starting from θ_S^{t-1} as in the thesis
    (Alg. 8); any other is fitted afresh from a copy of ``server_model`` every round. A
    learner with a ``classes`` parameter is given the class indices ``0 .. C-1``.

    Parameters
    ----------
    server_model : classifier
        An unfitted scikit-learn-style classifier (``fit``, and ``predict_proba`` or
        ``predict``) that learns on the public pool's rows as given to the trainer. It is
        never fitted itself: the rule fits a copy.
    base : str or Consensus, default="mean"
        The consensus of the clients' labels the server model learns from: a registered
        name ("mean" is distributed distillation, the thesis's aggregate) or an instance.
    targets : {"auto", "soft", "weighted", "hard"}, default="auto"
        How the server model is fitted on the consensus (see above).

    Attributes
    ----------
    server_model_ : classifier
        The server model fitted in the last round (absent before the first).
    base_consensus_ : ndarray of float64, shape (n_public, n_classes)
        The base rule's consensus of the last round, as soft targets (NaN rows: abstained).
    n_fits_ : int
        Rounds in which the server model was fitted (a round whose consensus holds a single
        class sends that class everywhere without a fit).

    Notes
    -----
    The thesis's claims (ch. 5): dual distillation keeps clients synchronised under partial
    participation (Table 5.1: it closes the gap between clients re-initialised at random and
    clients starting from the previous model), and the server's soft labels can be
    quantised down to 1 bit at a small cost (Fig. 5.4: at most about 1 point on MNIST, iid).
    Clients of this library keep their own model between rounds; see
    ``docs/results/dual_distillation.md`` for what that changes.

    Checkpoints: a server model that is refitted every round needs no state (the next
    round refits it from the next consensus); one that keeps training across rounds cannot
    be written into a checkpoint's state and `state_dict` refuses it. The rule pickles
    (without the bound public pool, which the federation binds again).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.neighbors import KNeighborsClassifier
    >>> from consensus import DualDistillation
    >>> U = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> rule = DualDistillation(KNeighborsClassifier(n_neighbors=3))
    >>> rule.bind_public(U)
    >>> probs = np.array([[[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.1, 0.9]],
    ...                   [[0.7, 0.3], [0.2, 0.8], [0.2, 0.8], [0.2, 0.8]]])
    >>> weights = rule.weights_for([0, 1], n_public=4)  # the server announces its round
    >>> rule(probs, n_classes=2, weights=weights).round(3)  # 3-NN fitted to the mean's argmax
    array([[0.667, 0.333],
           [0.667, 0.333],
           [0.333, 0.667],
           [0.333, 0.667]])
    >>> rule.base_consensus_.round(2)  # the plain mean it learned from
    array([[0.8 , 0.2 ],
           [0.5 , 0.5 ],
           [0.25, 0.75],
           [0.15, 0.85]])
    >>> rule(probs, n_classes=2)  # not a server round (e.g. predicting): the base consensus
    array([[0.8 , 0.2 ],
           [0.5 , 0.5 ],
           [0.25, 0.75],
           [0.15, 0.85]])
    """

    output: ClassVar[Literal["hard", "soft"]] = "soft"

    def __init__(
        self, server_model: Any, *, base: str | Consensus = "mean", targets: str = "auto"
    ) -> None:
        self.server_model = server_model
        self.base = base
        self.targets = targets

    # ------------------------------------------------------------------ parameters

    def _base_rule(self) -> Consensus:
        """The base rule, built once per ``base`` value (a stateful base keeps its state)."""
        cached: tuple[Any, Consensus] | None = self.__dict__.get("_base_cache")
        if cached is not None and cached[0] is self.base:
            return cached[1]
        if isinstance(self.base, DualDistillation):
            raise ValueError("base must not itself be a DualDistillation")
        rule = get_consensus(self.base)
        self.__dict__["_base_cache"] = (self.base, rule)
        return rule

    def _check_params(self) -> str:
        model = self.server_model
        if (
            model is None
            or isinstance(model, str | Consensus)
            or not callable(getattr(model, "fit", None))
        ):
            raise TypeError(
                f"server_model must be a classifier with fit and predict_proba (or predict), "
                f"got {model!r}"
            )
        if not callable(getattr(model, "predict_proba", None)) and not callable(
            getattr(model, "predict", None)
        ):
            raise TypeError(f"server_model {type(model).__name__} has no predict_proba or predict")
        if not isinstance(self.targets, str) or self.targets not in _TARGETS:
            raise ValueError(f"targets must be one of {_TARGETS}, got {self.targets!r}")
        self._base_rule()
        return self._fit_mode(model)

    def _fit_mode(self, model: Any) -> str:
        if self.targets != "auto":
            if self.targets == "soft" and not getattr(model, "accepts_soft_targets", False):
                raise ValueError(
                    f"targets='soft' needs a server_model that accepts soft targets "
                    f"(accepts_soft_targets = True); {type(model).__name__} does not"
                )
            if self.targets == "weighted" and not _takes_sample_weight(model):
                raise ValueError(
                    f"targets='weighted' needs a server_model whose fit takes sample_weight; "
                    f"{type(model).__name__}.fit does not"
                )
            return self.targets
        if getattr(model, "accepts_soft_targets", False):
            return "soft"
        return "weighted" if _takes_sample_weight(model) else "hard"

    # ------------------------------------------------------------------ the public pool

    def bind_public(self, X_public: Any) -> None:
        """Give the rule the public pool U its server model learns on and labels.

        The federation calls this once before round 1 (see
        :func:`cotrain.federation.privacy_setup.bind_public`); the rows must be those the
        clients label, in the same order.

        Parameters
        ----------
        X_public : array-like, sparse matrix, DataFrame or list of shape (n_public, ...)

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from consensus import DualDistillation
        >>> rule = DualDistillation(LogisticRegression())
        >>> rule.bind_public(np.zeros((5, 2)))
        >>> rule.n_public
        5
        """
        self._check_params()
        self.__dict__["_X_public"] = X_public

    @property
    def n_public(self) -> int | None:
        """Rows of the bound public pool (None when none is bound)."""
        X = self.__dict__.get("_X_public")
        return None if X is None else _n_rows(X)

    def __getstate__(self) -> dict[str, Any]:
        # the public pool is the federation's data, not the rule's: pickles, copies and
        # saved federations leave it out, and the federation binds it again
        return {k: v for k, v in self.__dict__.items() if k not in ("_X_public", "_armed")}

    # ------------------------------------------------------------------ the round

    def weights_for(
        self, client_ids: ArrayLike, n_public: int, **kwargs: Any
    ) -> NDArray[np.float64] | None:
        """The base rule's weights; also marks the next call as a server round.

        The server calls this right before forming a round's consensus, so the next call
        on ``n_public`` rows distils the server model; other calls do not.

        Parameters
        ----------
        client_ids : array-like of int, shape (m,)
        n_public : int
        **kwargs
            Passed to the base rule (e.g. ``quality=`` for a base that uses it).

        Returns
        -------
        ndarray of shape (m,) or (m, n_public), or None

        Examples
        --------
        >>> from sklearn.linear_model import LogisticRegression
        >>> from consensus import DualDistillation
        >>> DualDistillation(LogisticRegression()).weights_for([0, 1], n_public=3) is None
        True
        """
        self.__dict__["_armed"] = int(n_public)
        return self._base_rule().weights_for(client_ids, n_public, **kwargs)

    @property
    def uses_quality(self) -> bool:  # type: ignore[override]
        """Whether the base rule weighs votes by the clients' own quality."""
        return bool(getattr(self._base_rule(), "uses_quality", False))

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        mode = self._check_params()
        pseudo = self._base_rule()(labels, n_classes=n_classes, weights=weights)
        targets = soft_targets_of(pseudo, n_classes)
        armed = self.__dict__.pop("_armed", None)
        n = targets.shape[0]
        if armed is None or armed != n:
            return targets  # not a server round (a dry run, or predictions on other rows)
        X = self.__dict__.get("_X_public")
        if X is None:
            raise ValueError(
                "DualDistillation needs the public pool, bound before round 1 by "
                "cotrain.federation.privacy_setup.bind_public(consensus, X_public) "
                "(FederatedCoTrainer and the Flower ServerApp do this)"
            )
        if _n_rows(X) != n:
            raise ValueError(
                f"the bound public pool has {_n_rows(X)} rows but the labels cover {n}"
            )
        self.base_consensus_ = targets
        out = self.distil(X, targets, mode)
        self.__dict__["_last_base"] = pseudo
        return out

    def observe(self, client_ids: ArrayLike, labels: ArrayLike, pseudo: ArrayLike) -> None:
        """Let a stateful base rule learn from the round, with its own consensus.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from consensus import DualDistillation
        >>> DualDistillation(LogisticRegression()).observe([0], np.zeros((1, 2)), None)
        """
        base_pseudo = self.__dict__.pop("_last_base", None)
        if base_pseudo is not None:
            self._base_rule().observe(client_ids, labels, base_pseudo)

    def distil(self, X: Any, targets: NDArray[np.float64], mode: str) -> NDArray[np.float64]:
        """Fit the server model on ``(X, targets)`` and return its probabilities on ``X``.

        Parameters
        ----------
        X : array-like of shape (n, ...)
            The public pool.
        targets : ndarray of shape (n, n_classes)
            Soft targets, NaN rows where the consensus abstained (left out of the fit).
        mode : {"soft", "weighted", "hard"}
            How the model learns from soft targets.

        Returns
        -------
        ndarray of float64, shape (n, n_classes)
            Rows summing to one; all NaN when the consensus abstained everywhere.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.tree import DecisionTreeClassifier
        >>> from consensus import DualDistillation
        >>> rule = DualDistillation(DecisionTreeClassifier())
        >>> X = np.array([[0.0], [1.0], [2.0]])
        >>> rule.distil(X, np.array([[1.0, 0.0], [np.nan, np.nan], [0.0, 1.0]]), "hard")
        array([[1., 0.],
               [1., 0.],
               [0., 1.]])
        """
        n, n_classes = targets.shape
        kept = np.flatnonzero(~np.isnan(targets).any(axis=1) & (np.nan_to_num(targets).sum(1) > 0))
        if kept.size == 0:
            return np.full((n, n_classes), np.nan)
        y = targets[kept]
        X_kept = _take_rows(X, kept)
        if mode == "soft":
            fit_args: tuple[Any, ...] = (X_kept, y)
            labels = np.flatnonzero(y.sum(axis=0) > 0)
        elif mode == "weighted":  # one row per class holding >= _MIN_WEIGHT of its mass
            keep = y >= _MIN_WEIGHT
            keep[np.arange(y.shape[0]), y.argmax(axis=1)] = True
            rows, cols = np.nonzero(keep)
            weight = y[rows, cols] / np.where(keep, y, 0.0).sum(axis=1)[rows]
            fit_args, labels = (_take_rows(X_kept, rows), cols), cols
        else:
            fit_args = (X_kept, y.argmax(axis=1))
            labels = fit_args[1]
        present = np.unique(labels)
        if present.size == 1 and mode != "soft":
            # one class only: most classifiers cannot fit it, so the server sends that class
            # everywhere without a fit (and keeps the model it had)
            out = np.zeros((n, n_classes))
            out[:, present[0]] = 1.0
            return out
        previous = getattr(self, "server_model_", None)
        if previous is not None and _continues(previous):
            model = previous
        else:
            model = copy.deepcopy(self.server_model)
        if "classes" in (model.get_params(deep=False) if hasattr(model, "get_params") else {}):
            model.set_params(classes=np.arange(n_classes))
        if mode == "weighted":
            model.fit(*fit_args, sample_weight=weight)
        else:
            model.fit(*fit_args)
        self.server_model_ = model
        self.n_fits_ = getattr(self, "n_fits_", 0) + 1
        return self.server_proba(X, n_classes)

    def server_proba(self, X: Any, n_classes: int) -> NDArray[np.float64]:
        """The fitted server model's probabilities on ``X``, one column per class index.

        Classes the model never saw get probability 0; a model without ``predict_proba``
        answers one-hot.

        Parameters
        ----------
        X : array-like of shape (n, ...)
        n_classes : int

        Returns
        -------
        ndarray of float64, shape (n, n_classes)

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.tree import DecisionTreeClassifier
        >>> from consensus import DualDistillation
        >>> rule = DualDistillation(DecisionTreeClassifier())
        >>> _ = rule.distil(np.array([[0.0], [1.0]]), np.eye(3)[[0, 2]], "hard")
        >>> rule.server_proba(np.array([[0.2]]), n_classes=3)
        array([[1., 0., 0.]])
        """
        model = self.server_model_
        n = _n_rows(X)
        out = np.zeros((n, n_classes))
        model_classes = getattr(model, "classes_", None)
        cols = np.arange(n_classes) if model_classes is None else np.asarray(model_classes)
        cols = cols.astype(np.int64)
        if callable(getattr(model, "predict_proba", None)):
            proba = np.asarray(model.predict_proba(X), dtype=np.float64)
            if proba.shape[1] == n_classes and model_classes is None:
                out[:] = proba
            else:
                out[:, cols] = proba
        else:
            out[np.arange(n), np.asarray(model.predict(X)).astype(np.int64)] = 1.0
        out = np.clip(np.nan_to_num(out), 0.0, None)
        total = out.sum(axis=1, keepdims=True)
        return np.where(total > 0, out / np.where(total > 0, total, 1.0), 1.0 / n_classes)

    # ------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        """The base rule's state and the number of fits, for checkpoints.

        Raises
        ------
        NotImplementedError
            If the server model keeps training across rounds (``warm_start``): its fitted
            state cannot go into a checkpoint.

        Examples
        --------
        >>> from sklearn.linear_model import LogisticRegression
        >>> from consensus import DualDistillation
        >>> DualDistillation(LogisticRegression()).state_dict()
        {'base': {}, 'n_fits': 0}
        """
        if _continues(self.server_model) and getattr(self, "server_model_", None) is not None:
            raise NotImplementedError(
                f"DualDistillation cannot checkpoint a server_model that keeps training "
                f"across rounds ({type(self.server_model).__name__} with warm_start): use one "
                "that is refitted every round, or run without checkpoint_dir"
            )
        return {"base": self._base_rule().state_dict(), "n_fits": int(getattr(self, "n_fits_", 0))}

    def load_state_dict(self, state: Any) -> None:
        """Restore what `state_dict` returned (the base rule's state and the fit count).

        Examples
        --------
        >>> from sklearn.linear_model import LogisticRegression
        >>> from consensus import DualDistillation
        >>> rule = DualDistillation(LogisticRegression())
        >>> rule.load_state_dict({"base": {}, "n_fits": 3})
        >>> rule.n_fits_
        3
        """
        if not isinstance(state, dict) or set(state) != {"base", "n_fits"}:
            raise ValueError(
                f"DualDistillation state must be a dict with keys 'base' and 'n_fits', "
                f"got {state!r}"
            )
        self._base_rule().load_state_dict(state["base"])
        self.n_fits_ = int(state["n_fits"])

    # ------------------------------------------------------------------ accounting

    @property
    def accountable(self) -> bool:
        """Whether the base rule adds noise to account (the server model is
        post-processing of the base consensus)."""
        return bool(self._base_rule().accountable)

    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """The base rule's privacy event (see `Consensus.dp_event`)."""
        return self._base_rule().dp_event(n_classes, n_labels)

    @property
    def delta(self) -> float | None:  # type: ignore[override]
        """The base rule's δ."""
        return self._base_rule().delta

    @property
    def budget(self) -> float | None:  # type: ignore[override]
        """The base rule's ε budget."""
        return self._base_rule().budget
