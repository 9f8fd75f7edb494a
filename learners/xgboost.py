"""XGBoostClassifier: gradient boosting with a fixed global class set that keeps training.

xgboost is imported only inside ``fit``/``predict_proba``, so importing this module is cheap and
works without xgboost installed.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._alignment import check_classes, label_indices
from .checks import check_int
from .sklearn_checks import WARM_START_REFIT

__all__ = ["XGBoostClassifier"]

_RESERVED_PARAMS = frozenset({"objective", "num_class"})


def _import_xgboost() -> Any:
    try:
        import xgboost
    except ImportError as exc:
        raise ImportError(
            'XGBoostClassifier needs xgboost: pip install "cotrain[xgboost]"'
        ) from exc
    return xgboost


#: how X is checked: a 2-D float32 array or CSR matrix, NaN marking a missing value (as in
#: xgboost); infinite, complex or non-numeric values are refused
_X_CHECKS: dict[str, Any] = {
    "accept_sparse": "csr",
    "dtype": np.float32,
    "ensure_all_finite": "allow-nan",
}


class XGBoostClassifier(ClassifierMixin, BaseEstimator):
    """Gradient-boosted trees over xgboost's native API, for co-training.

    Unlike ``xgboost.XGBClassifier`` this always trains ``multi:softprob`` with
    ``num_class = len(classes)``: a client whose data lacks some global classes (or holds
    a single one) still trains, and always answers with one probability column per global
    class. With ``warm_start=True`` each later ``fit`` continues boosting from the previous
    booster, adding `continue_rounds` rounds on the new data (``h_t = A(D ∪ P, h_{t-1})``).

    Parameters
    ----------
    n_estimators : int, default=100
        Boosting rounds of the first fit (each round grows one tree per class).
    continue_rounds : int, default=10
        Rounds added by each later fit when `warm_start` is true.
    warm_start : bool, default=True
        Continue from the previous booster instead of training a new one.
    max_depth : int, default=6
        Maximum tree depth.
    learning_rate : float, default=0.3
        Shrinkage (xgboost ``eta``).
    subsample : float, default=0.8
        Fraction of rows sampled for each tree.
    colsample_bytree : float, default=1.0
        Fraction of features sampled for each tree.
    colsample_bynode : float, default=0.1
        Fraction of features sampled for each split (at least one), as a random forest
        does. With xgboost's own defaults (all features at every split, all rows) a client
        of a few rows grows every tree on the one feature that separates its rows: on the
        FedCT breast-cancer split (17 rows per client, 30 features) the 100 trees of a
        client split on a single feature. ``subsample=0.8, colsample_bynode=0.1`` were
        chosen by leave-one-out cross-validation on the clients' private rows only (see
        ``docs/results.md``, breast cancer); ``subsample=1.0, colsample_bynode=1.0``
        restores xgboost's defaults.
    reg_lambda : float, default=1.0
        L2 regularisation of leaf weights (xgboost ``lambda``).
    min_child_weight : float, default=1.0
        Minimum sum of instance hessian in a child.
    tree_method : str, default="hist"
        xgboost tree construction algorithm.
    n_jobs : int, default=1
        Threads used by xgboost; ``None`` or ``-1`` lets xgboost use all cores.
    random_state : int, RandomState or None, default=None
        Seed of xgboost's sampling (``seed``); ``None`` keeps xgboost's default seed (0).
        A continued fit reseeds from it plus the rounds already boosted, so it draws the
        same rows and features whatever the process ran before (a resumed run continues
        exactly).
    classes : array-like, optional
        The global classes, sorted and unique; defaults to the labels of `y`.
    params : dict, optional
        Extra native xgboost parameters (they override the ones above; ``objective`` and
        ``num_class`` are fixed and may not be given; a value of ``None`` removes a
        parameter). The intercept is uniform (``base_score=0.5`` for every class) so that
        a class missing from the first fit is not held back in later, continued fits;
        ``params={"base_score": None}`` restores xgboost's estimate from the data.

    Attributes
    ----------
    booster_ : xgboost.Booster
        The trained booster.
    classes_ : ndarray of shape (n_classes,)
        The classes, in the order of the probability columns.
    n_classes_ : int
        Number of classes.
    n_features_in_ : int
        Number of features seen in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from learners import XGBoostClassifier
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> clf = XGBoostClassifier(n_estimators=5, classes=[0, 1, 2], random_state=0)
    >>> clf.fit(X, [0, 0, 1, 1]).predict_proba(X).shape  # class 2 absent, still 3 columns
    (4, 3)
    >>> clf.fit(X, [0, 1, 1, 1]).booster_.num_boosted_rounds()  # 5 + 10 continued rounds
    15
    """

    continues_training: ClassVar[bool] = True

    def __init__(
        self,
        *,
        n_estimators: int = 100,
        continue_rounds: int = 10,
        warm_start: bool = True,
        max_depth: int = 6,
        learning_rate: float = 0.3,
        subsample: float = 0.8,
        colsample_bytree: float = 1.0,
        colsample_bynode: float = 0.1,
        reg_lambda: float = 1.0,
        min_child_weight: float = 1.0,
        tree_method: str = "hist",
        n_jobs: int | None = 1,
        random_state: int | np.random.RandomState | None = None,
        classes: ArrayLike | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.continue_rounds = continue_rounds
        self.warm_start = warm_start
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.colsample_bynode = colsample_bynode
        self.reg_lambda = reg_lambda
        self.min_child_weight = min_child_weight
        self.tree_method = tree_method
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.classes = classes
        self.params = params

    def _native_params(self, n_classes: int) -> dict[str, Any]:
        extra = dict(self.params or {})
        reserved = _RESERVED_PARAMS.intersection(extra)
        if reserved:
            raise ValueError(f"params may not set {sorted(reserved)}: they are fixed")
        params: dict[str, Any] = {
            "objective": "multi:softprob",
            "num_class": n_classes,
            "max_depth": self.max_depth,
            "eta": self.learning_rate,
            "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree,
            "colsample_bynode": self.colsample_bynode,
            "lambda": self.reg_lambda,
            "min_child_weight": self.min_child_weight,
            "tree_method": self.tree_method,
            # a uniform intercept: xgboost would otherwise estimate one from the first fit's
            # class frequencies and keep it for good, so a class missing from the first fit
            # would start ~13 logits behind in every later, continued fit
            "base_score": 0.5,
        }
        if self.n_jobs is not None and self.n_jobs != -1:
            params["nthread"] = self.n_jobs
        if self.random_state is not None:
            seed = self.random_state
            if not isinstance(seed, int | np.integer):
                seed = check_random_state(seed).randint(np.iinfo(np.int32).max)
            params["seed"] = int(seed)
        params.update(extra)
        return {key: value for key, value in params.items() if value is not None}

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> XGBoostClassifier:
        """Train a booster, or continue the previous one when `warm_start` is true.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Training inputs (NaN marks a missing value).
        y : array-like of shape (n_samples,)
            Labels, each one of `classes`.
        sample_weight : array-like of shape (n_samples,), optional
            Per-sample weights.

        Returns
        -------
        self : XGBoostClassifier
            The fitted classifier.
        """
        for name, low in (("n_estimators", 1), ("continue_rounds", 0)):
            check_int(getattr(self, name), name, low)
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        previous = getattr(self, "booster_", None) if self.warm_start else None
        # reset only for a new booster: a continued fit must have the features it was built
        # for (scikit-learn's "X has 3 features, but ... is expecting 4" otherwise)
        Xm, y_arr = validate_data(self, X, y, reset=previous is None, **_X_CHECKS)
        check_classification_targets(y_arr)
        classes = np.unique(y_arr) if self.classes is None else check_classes(self.classes)
        if classes.size < 2:
            raise ValueError(
                "XGBoostClassifier needs at least 2 classes, got 1 class; pass the global "
                "classes as classes="
            )
        codes = label_indices(y_arr, classes, name="y")
        weight = None
        if sample_weight is not None:
            weight = _check_sample_weight(
                sample_weight, Xm, dtype=np.float32, ensure_non_negative=True
            )

        if previous is not None and not np.array_equal(classes, self.classes_):
            raise ValueError(
                f"warm_start: classes changed from {self.classes_.tolist()!r} to "
                f"{classes.tolist()!r}; use warm_start=False or fixed classes="
            )
        xgb = _import_xgboost()
        params = self._native_params(classes.size)
        dtrain = xgb.DMatrix(Xm, label=codes, weight=weight, nthread=params.get("nthread", -1))
        rounds = self.continue_rounds if previous is not None else self.n_estimators
        if previous is not None:
            previous, params = _continuation(xgb, previous, params)
        booster = xgb.train(params, dtrain, num_boost_round=rounds, xgb_model=previous)
        self.booster_ = booster
        self.classes_ = classes
        self.n_classes_ = int(classes.size)
        return self

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Class probabilities, one column per class of ``classes_``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Probabilities; rows sum to 1.
        """
        check_is_fitted(self)
        Xm = validate_data(self, X, reset=False, **_X_CHECKS)
        # in place: the same values as predicting on a DMatrix, without building one (which
        # costs ~15 ms a call on small inputs and dominated a co-training round's time)
        proba = self.booster_.inplace_predict(Xm)
        return np.asarray(proba, dtype=np.float64).reshape(Xm.shape[0], self.n_classes_)

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """Most probable class of each sample.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(X)  # first: NotFittedError before classes_ is read
        return self.classes_[proba.argmax(axis=1)]

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    def _expected_failed_checks(self) -> dict[str, str]:
        """The scikit-learn checks this classifier fails, and why (see
        :func:`learners.sklearn_checks.expected_failed_checks`)."""
        reason = (
            "row and feature subsampling, and xgboost's weighted quantile sketch: a row of "
            "weight 2 is not the row repeated twice"
        )
        failed = {
            "check_sample_weight_equivalence_on_dense_data": reason,
            "check_sample_weight_equivalence_on_sparse_data": reason,
        }
        if self.warm_start:
            failed.update(WARM_START_REFIT)
        return failed


def _continuation(xgb: Any, previous: Any, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The booster and parameters a continued fit starts from, so that it draws the same
    rows and features wherever it runs.

    xgboost's row and feature sampler is one generator per process, seeded when a booster
    is configured; a booster continued in memory is not configured again, so its draws
    depend on every xgboost fit the process ran before (a run resumed from a checkpoint,
    or a fit in another worker, drew differently). A copy loaded from the booster's bytes
    is configured afresh and reseeds the sampler from ``seed``, offset by the rounds
    already boosted so that each continuation draws anew. The previous booster is left
    untouched.
    """
    copy = xgb.Booster(model_file=bytearray(previous.save_raw()))
    seed = (int(params.get("seed", 0)) + copy.num_boosted_rounds()) % 2**31
    return copy, {**params, "seed": seed}
