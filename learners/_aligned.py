"""ClassAlignedClassifier: makes any scikit-learn-style classifier behave under co-training."""

from __future__ import annotations

import copy
import time
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.dummy import DummyClassifier
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.validation import check_is_fitted, has_fit_parameter

from ._alignment import align_proba, check_classes, label_indices
from ._soft_targets import check_soft_targets, expand_soft_targets, n_rows
from .sklearn_checks import WARM_START_REFIT, expected_failed_checks, input_tags_of

__all__ = ["ClassAlignedClassifier", "continues_training"]


def continues_training(estimator: Any) -> bool:
    """Whether a later fit of `estimator` continues from its previous fit.

    True for an estimator that says so with a true ``continues_training`` attribute (as
    :class:`XGBoostClassifier`, or :class:`TorchClassifier` with ``warm_start=True``, do),
    or has the scikit-learn parameter ``warm_start=True``. Co-training then starts each
    round's fit from the previous round's model, ``h_t = A(D ∪ P, h_{t-1})``, and a
    deployment must keep the model between rounds; any other estimator starts afresh.

    Parameters
    ----------
    estimator : object
        A scikit-learn-style estimator (fitted or not).

    Returns
    -------
    bool

    Examples
    --------
    >>> from sklearn.linear_model import SGDClassifier
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from learners import XGBoostClassifier, continues_training
    >>> continues_training(SGDClassifier(warm_start=True))
    True
    >>> continues_training(DecisionTreeClassifier()), continues_training(XGBoostClassifier())
    (False, True)
    """
    get_params = getattr(estimator, "get_params", None)
    params = get_params(deep=False) if callable(get_params) else {}
    return _continues_training(estimator, params)


def _continues_training(estimator: Any, params: dict[str, Any]) -> bool:
    """`continues_training` with the parameters of `estimator` already read."""
    return bool(getattr(estimator, "continues_training", False)) or params.get("warm_start") is True


class ClassAlignedClassifier(ClassifierMixin, BaseEstimator):
    """Wrap a classifier so that it trains and answers in a fixed, global label space.

    Under co-training a client's training set (its private data plus the current
    pseudo-labels) may lack some classes, hold a single class, or come as soft targets;
    and the client must still answer with one probability column per global class. This
    meta-estimator handles all of it around any scikit-learn-style classifier:

    - the probabilities of the inner model are aligned to `classes` (zeros for classes it
      never saw); a model without ``predict_proba`` answers with one-hot predictions;
    - a training set with a single class is fitted with a constant
      :class:`~sklearn.dummy.DummyClassifier` instead (one ``UserWarning`` per fit), unless
      the model takes the global classes itself (a ``classes`` parameter, as the adapters in
      this package have): then it trains as usual, so continued training is not broken;
    - soft targets ``(n, n_classes)`` are passed straight through to a model declaring
      ``accepts_soft_targets = True``, expanded into weighted rows
      (:func:`expand_soft_targets`) for a model whose ``fit`` takes ``sample_weight``, and
      otherwise reduced to their argmax (one ``UserWarning`` per fit);
    - a model that continues training across fits (``warm_start=True`` among its
      parameters, or a ``continues_training = True`` attribute) starts each later fit from
      a deep copy of the previous fitted model, so ``h_t = A(D ∪ P, h_{t-1})``; any other
      model starts from a fresh clone;
    - if the model has a ``classes`` parameter (as :class:`XGBoostClassifier` and
      :class:`RuleFitClassifier` do) it is set to the global classes before fitting.

    The wrapped `estimator` itself is never fitted or changed.

    Parameters
    ----------
    estimator : classifier
        An unfitted scikit-learn-style classifier (``fit`` and ``predict``).
    classes : array-like of shape (n_classes,), optional
        The global classes, sorted and unique, of any label type. Defaults to the labels of
        `y` in ``fit`` (required when `y` holds soft targets).

    Attributes
    ----------
    estimator_ : classifier
        The fitted inner model (a ``DummyClassifier`` after a single-class fit).
    classes_ : ndarray of shape (n_classes,)
        The global classes.
    n_classes_ : int
        Number of global classes.
    fit_time_ : float
        Seconds spent in the inner model's own ``fit`` during the last fit (the time
        spent preparing it, e.g. copying a model to continue, is not included).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from learners import ClassAlignedClassifier
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> clf = ClassAlignedClassifier(LogisticRegression(), classes=[0, 1, 2])
    >>> clf.fit(X, [0, 0, 2, 2]).predict_proba(X).shape
    (4, 3)
    >>> clf.predict_proba(X)[:, 1].tolist()  # class 1 was never seen
    [0.0, 0.0, 0.0, 0.0]
    """

    def __init__(self, estimator: Any, *, classes: ArrayLike | None = None) -> None:
        self.estimator = estimator
        self.classes = classes

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> ClassAlignedClassifier:
        """Fit a copy of the estimator (or continue the previous fit) on `X`, `y`.

        Parameters
        ----------
        X : array-like, sparse matrix, DataFrame or list of shape (n_samples, ...)
            Training inputs, passed to the inner estimator as they are.
        y : array-like of shape (n_samples,) or (n_samples, n_classes)
            Labels (values from `classes`), or soft targets with one column per class. A
            column vector ``(n_samples, 1)`` is read as labels, with a
            ``DataConversionWarning`` (as scikit-learn's classifiers do).
        sample_weight : array-like of shape (n_samples,), optional
            Per-sample weights; the inner estimator's ``fit`` must accept them.

        Returns
        -------
        self : ClassAlignedClassifier
            The fitted wrapper. If the inner fit raises, the previous ``estimator_``
            (if any) is left in place.
        """
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        if not hasattr(X, "shape") and not hasattr(X, "__len__"):
            X = np.asarray(X)  # an array-like known only by its __array__
        y_arr = np.asarray(y)
        if y_arr.ndim == 2 and y_arr.shape[1] == 1:
            warnings.warn(
                "A column-vector y was passed when a 1d array was expected; it is read as "
                "labels. Please change the shape of y to (n_samples,).",
                DataConversionWarning,
                stacklevel=2,
            )
            y_arr = y_arr.ravel()
        n = n_rows(X)
        if y_arr.shape[:1] != (n,):
            raise ValueError(f"y has {y_arr.shape[:1]} rows but X has {n}")
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != (n,):
                raise ValueError(f"sample_weight must have shape ({n},), got {sample_weight.shape}")

        if y_arr.ndim == 1:
            if y_arr.dtype.kind in "fc" and not np.all(np.isfinite(y_arr)):
                raise ValueError("Input y contains NaN or infinity: labels must be finite")
            classes = np.unique(y_arr) if self.classes is None else check_classes(self.classes)
        elif y_arr.ndim == 2:
            if self.classes is None:
                raise ValueError("classes must be given when y holds soft targets (2-D y)")
            classes = check_classes(self.classes)
            y_arr = check_soft_targets(y_arr, classes.size)
        else:
            raise ValueError(f"y must be 1-D labels or 2-D soft targets, got shape {y_arr.shape}")

        proto = self.estimator
        fit_X, fit_y, fit_w = X, y_arr, sample_weight
        if y_arr.ndim == 2 and not getattr(proto, "accepts_soft_targets", False):
            if has_fit_parameter(proto, "sample_weight"):
                fit_X, fit_y, fit_w = expand_soft_targets(X, y_arr, classes, sample_weight)
            else:
                warnings.warn(
                    f"soft targets were reduced to hard labels (argmax) because "
                    f"{type(proto).__name__}.fit has no sample_weight",
                    UserWarning,
                    stacklevel=2,
                )
                fit_y = classes[y_arr.argmax(axis=1)]

        present = (
            np.flatnonzero(fit_y.sum(axis=0) > 0)
            if fit_y.ndim == 2
            else np.unique(label_indices(fit_y, classes, name="y"))
        )
        if present.size == 0:
            raise ValueError("y holds no training signal (no samples, or all-zero soft targets)")
        # learners with a fixed global label space (a `classes` parameter: XGBoost, RuleFit,
        # torch and GPT-2 adapters) train on one class themselves and keep continuing
        fixed_classes = "classes" in proto.get_params(deep=False)
        if present.size == 1 and not fixed_classes:
            label = classes[present[0]]
            warnings.warn(
                f"the training set holds a single class ({label!r}); fitting a constant "
                f"DummyClassifier instead of {type(proto).__name__}",
                UserWarning,
                stacklevel=2,
            )
            # "most_frequent" of one label: a "constant" must be an int, str or array-like,
            # which a float label such as np.float64(1.0) is not
            est = DummyClassifier(strategy="most_frequent")
            fit_y = classes[np.full(n_rows(fit_X), present[0])]
        else:
            if fit_w is not None and not has_fit_parameter(proto, "sample_weight"):
                raise TypeError(f"{type(proto).__name__}.fit does not accept sample_weight")
            est = self._start_estimator(classes)

        start = time.perf_counter()
        if fit_w is None:
            est.fit(fit_X, fit_y)
        else:
            est.fit(fit_X, fit_y, sample_weight=fit_w)
        self.fit_time_ = time.perf_counter() - start
        self.estimator_ = est
        self.classes_ = classes
        self.n_classes_ = int(classes.size)
        return self

    @classmethod
    def from_fitted(
        cls, estimator: Any, classes: ArrayLike, fit_time: float = 0.0
    ) -> ClassAlignedClassifier:
        """A fitted wrapper around an already fitted ``estimator`` whose ``classes_`` are
        ``classes`` (e.g. a :class:`~learners.BlendedClassifier` built by co-training).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.tree import DecisionTreeClassifier
        >>> tree = DecisionTreeClassifier().fit([[0], [1]], [0, 1])
        >>> ClassAlignedClassifier.from_fitted(tree, [0, 1]).predict([[1]])
        array([1])
        """
        classes = check_classes(classes)
        model = cls(estimator, classes=classes)
        model.estimator_ = estimator
        model.classes_ = classes
        model.n_classes_ = int(classes.size)
        model.fit_time_ = float(fit_time)
        return model

    def _start_estimator(self, classes: NDArray[Any]) -> Any:
        """The unfitted clone, or a copy of the previous model to continue, for this fit."""
        prev = getattr(self, "estimator_", None)
        params = self.estimator.get_params(deep=False)
        if (
            prev is not None
            and type(prev) is type(self.estimator)
            and _continues_training(self.estimator, params)
        ):
            est = copy.deepcopy(prev)
            # carry over hyper-parameters changed on the prototype since the last fit,
            # but never replace fitted sub-estimators with unfitted ones
            est.set_params(**{k: v for k, v in params.items() if not hasattr(v, "get_params")})
        else:
            est = clone(self.estimator)
        if "classes" in params:
            est.set_params(classes=classes)
        return est

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Class probabilities with one column per global class.

        Parameters
        ----------
        X : array-like, sparse matrix, DataFrame or list of shape (n_samples, ...)
            Inputs, passed to the inner estimator as they are.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns ordered as ``classes_``; zeros for classes the model never saw.
            One-hot predictions if the inner model has no ``predict_proba``.
        """
        check_is_fitted(self)
        est = self.estimator_
        if hasattr(est, "predict_proba"):
            proba = est.predict_proba(X)
            return align_proba(proba, getattr(est, "classes_", self.classes_), self.classes_)
        codes = label_indices(est.predict(X), self.classes_, name="predictions")
        out = np.zeros((codes.size, self.n_classes_), dtype=np.float64)
        out[np.arange(codes.size), codes] = 1.0
        return out

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """Predicted labels, in the caller's label values (from ``classes_``).

        Parameters
        ----------
        X : array-like, sparse matrix, DataFrame or list of shape (n_samples, ...)
            Inputs, passed to the inner estimator as they are.

        Returns
        -------
        ndarray of shape (n_samples,)
            The inner model's predictions, as elements of ``classes_``.
        """
        check_is_fitted(self)
        pred = np.asarray(self.estimator_.predict(X))
        return self.classes_[label_indices(pred.ravel(), self.classes_, name="predictions")]

    @property
    def n_features_in_(self) -> int:
        """Number of features the inner model saw in ``fit`` (when it records them).

        Raises ``AttributeError`` before ``fit``, and for an inner model that does not
        record it (e.g. a text classifier), as scikit-learn's meta-estimators do.
        """
        check_is_fitted(self)
        return int(self.estimator_.n_features_in_)

    def __sklearn_tags__(self) -> Any:
        """The inner estimator's input tags (what ``X`` may be: sparse, NaN, text, ...)."""
        return input_tags_of(super().__sklearn_tags__(), self.estimator)

    def _expected_failed_checks(self) -> dict[str, str]:
        """The scikit-learn checks the wrapper fails: those its inner estimator fails, and a
        refit that continues when the inner estimator continues training (see
        :func:`learners.sklearn_checks.expected_failed_checks`)."""
        failed = expected_failed_checks(self.estimator)
        if continues_training(self.estimator):
            failed.update(WARM_START_REFIT)
            failed["check_fit_idempotent"] = (
                "the inner model continues training across fits (the check turns "
                "warm_start off on the wrapper's own parameters only)"
            )
        return failed
