"""Reference points without federation: local-only training and centralized training."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from consensus import majority_vote, soft_mean
from cotrain._validation import check_estimators
from cotrain.baselines._common import (
    accuracy,
    check_client_data,
    check_predict_inputs,
    concat_rows,
    fit_local,
)
from cotrain.federation.seeding import seeded_clone
from cotrain.history import History, RoundRecord
from cotrain.runtime.runtimes import make_runtime
from learners import ClassAlignedClassifier

__all__ = ["Centralized", "LocalOnly"]


class LocalOnly(ClassifierMixin, BaseEstimator):
    """No communication: every client trains on its own data only.

    The lower reference of federated learning ("no communication" in FedCT Table 1).
    The history holds one record, with each client's test accuracy and their mean and
    standard deviation (the number FedCT reports for its own local models).

    Parameters
    ----------
    estimators : list of classifiers
        One scikit-learn-style classifier per client (cloned, never mutated).
    classes : array-like, default=None
        The global label space; default: the union of all clients' labels.
    n_jobs : int, default=None
        Joblib workers for the clients' fits.
    random_state : int, default=None
        Seeds every client estimator whose ``random_state`` is None, as
        :class:`~cotrain.FederatedCoTrainer` does (same seed, same client seeds).

    Attributes
    ----------
    classes_ : ndarray
        Global classes.
    clients_ : list of estimators
        The fitted local models.
    history_ : History
        One :class:`~cotrain.RoundRecord` (round 1, no bytes).

    Notes
    -----
    ``predict`` is the majority vote of the local models (ties to the smallest class),
    ``predict_proba`` the mean of their probabilities; the record's
    ``consensus_accuracy`` is the accuracy of that vote. Neither is a model any client
    could use without communication: the per-client accuracies are the baseline.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain.baselines import LocalOnly
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> local = LocalOnly([DecisionTreeClassifier()] * 2, random_state=0)
    >>> local = local.fit([X[:50], X[50:100]], [y[:50], y[50:100]], eval_set=(X[400:], y[400:]))
    >>> sorted(local.history_[0].client_accuracy)
    [0, 1]
    """

    def __init__(
        self,
        estimators: list[Any],
        *,
        classes: ArrayLike | None = None,
        n_jobs: int | None = None,
        random_state: int | None = None,
    ) -> None:
        self.estimators = estimators
        self.classes = classes
        self.n_jobs = n_jobs
        self.random_state = random_state

    def fit(
        self,
        X: ArrayLike | Sequence[ArrayLike],
        y: ArrayLike | Sequence[ArrayLike] | None = None,
        *,
        groups: ArrayLike | None = None,
        eval_set: tuple[ArrayLike, ArrayLike] | None = None,
    ) -> LocalOnly:
        """Fit every client's model on its own data.

        Parameters
        ----------
        X, y : list of array-like, or arrays with ``groups``
            The clients' data, as for :meth:`cotrain.FederatedCoTrainer.fit`.
        groups : array-like, optional
            Client of each row when X and y are single arrays.
        eval_set : (X_eval, y_eval), optional
            Test data for the history's accuracies.

        Returns
        -------
        self
        """
        estimators = check_estimators(self.estimators, "hard")
        data = check_client_data(
            X,
            y,
            groups=groups,
            n_estimators=len(estimators),
            classes=self.classes,
            eval_set=eval_set,
            learners=estimators,
        )
        self.classes_ = data.classes
        self._row_shape = data.X_clients[0].shape[1:]
        self.n_features_in_ = self._row_shape[0]
        seeds = np.random.SeedSequence(self.random_state).spawn(len(estimators) + 1)[1:]
        start = time.perf_counter()
        tasks = [
            (
                ClassAlignedClassifier(seeded_clone(est, s), classes=data.classes),
                Xi,
                yi,
                data.X_eval,
            )
            for est, s, Xi, yi in zip(
                estimators, seeds, data.X_clients, data.y_clients, strict=True
            )
        ]
        with make_runtime(self.n_jobs) as runtime:
            results = runtime.map(fit_local, tasks)
        self._models = [r[0] for r in results]
        record: dict[str, Any] = {}
        if data.X_eval is not None and data.y_eval_codes is not None:
            codes = np.stack([np.searchsorted(data.classes, r[1]) for r in results])
            acc = {i: accuracy(row, data.y_eval_codes) for i, row in enumerate(codes)}
            record = {
                "client_accuracy": acc,
                "mean_accuracy": float(np.mean(list(acc.values()))),
                "std_accuracy": float(np.std(list(acc.values()))),
                "consensus_accuracy": accuracy(
                    majority_vote(codes, len(data.classes)), data.y_eval_codes
                ),
            }
        self.history_ = History()
        self.history_.append(
            RoundRecord(
                round=1,
                clients=tuple(range(len(estimators))),
                time_s=time.perf_counter() - start,
                learner_time_s=sum(r[2] for r in results),
                **record,
            )
        )
        return self

    @property
    def clients_(self) -> list[Any]:
        """The fitted local models, one per client."""
        check_is_fitted(self, "history_")
        return [m.estimator_ for m in self._models]

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Majority vote of the local models (ties to the smallest class)."""
        X = check_predict_inputs(self, X, self._models)
        codes = np.stack([np.searchsorted(self.classes_, m.predict(X)) for m in self._models])
        return self.classes_[majority_vote(codes, len(self.classes_))]

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Mean of the local models' probabilities, columns in ``classes_`` order."""
        X = check_predict_inputs(self, X, self._models)
        return soft_mean(np.stack([m.predict_proba(X) for m in self._models]), len(self.classes_))


class Centralized(ClassifierMixin, BaseEstimator):
    """One model trained on all clients' data pooled: the upper reference.

    Parameters
    ----------
    estimator : classifier
        A scikit-learn-style classifier (cloned, never mutated).
    classes : array-like, default=None
        The global label space; default: the union of all labels.
    random_state : int, default=None
        Seeds the estimator if its ``random_state`` is None.

    Attributes
    ----------
    classes_ : ndarray
        Global classes.
    model_ : estimator
        The fitted model.
    history_ : History
        One :class:`~cotrain.RoundRecord`: round 1, all clients, no bytes (the data are
        assumed to be pooled already; the cost of moving them is not counted).

    Notes
    -----
    There is one model, so the record has an empty ``client_accuracy``; its test
    accuracy is stored as ``mean_accuracy`` and ``consensus_accuracy``, with
    ``std_accuracy`` 0, so that it tabulates beside the federated runs.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain.baselines import Centralized
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> central = Centralized(DecisionTreeClassifier(), random_state=0)
    >>> central = central.fit([X[:50], X[50:100]], [y[:50], y[50:100]])
    >>> central.predict(X[400:403]).shape
    (3,)
    """

    def __init__(
        self, estimator: Any, *, classes: Any = None, random_state: int | None = None
    ) -> None:
        self.estimator = estimator
        self.classes = classes
        self.random_state = random_state

    def fit(
        self,
        X: ArrayLike | Sequence[ArrayLike],
        y: ArrayLike | Sequence[ArrayLike] | None = None,
        *,
        groups: ArrayLike | None = None,
        eval_set: tuple[ArrayLike, ArrayLike] | None = None,
    ) -> Centralized:
        """Fit one model on the union of the clients' data.

        Parameters
        ----------
        X, y : list of array-like, arrays with ``groups``, or plain arrays
            The clients' data as for :meth:`cotrain.FederatedCoTrainer.fit`; a single
            array pair without ``groups`` is taken as already pooled.
        groups : array-like, optional
            Client of each row when X and y are single arrays.
        eval_set : (X_eval, y_eval), optional
            Test data for the history's accuracy.

        Returns
        -------
        self
        """
        check_estimators([self.estimator], "hard")
        pooled = groups is None and not isinstance(X, list | tuple)  # one client: all rows
        data = check_client_data(
            [X] if pooled else X,
            [y] if pooled else y,
            groups=groups,
            classes=self.classes,
            eval_set=eval_set,
            learners=[self.estimator],
        )
        self.classes_ = data.classes
        self._row_shape = data.X_clients[0].shape[1:]
        self.n_features_in_ = self._row_shape[0]
        seed = np.random.SeedSequence(self.random_state).spawn(1)[0]
        start = time.perf_counter()
        model = ClassAlignedClassifier(seeded_clone(self.estimator, seed), classes=data.classes)
        model, pred, learner_time = fit_local(
            model, concat_rows(data.X_clients), np.concatenate(data.y_clients), data.X_eval
        )
        self._model = model
        record: dict[str, Any] = {}
        if pred is not None and data.y_eval_codes is not None:
            acc = accuracy(np.searchsorted(data.classes, pred), data.y_eval_codes)
            record = {"mean_accuracy": acc, "std_accuracy": 0.0, "consensus_accuracy": acc}
        self.history_ = History()
        self.history_.append(
            RoundRecord(
                round=1,
                clients=tuple(range(len(data.X_clients))),
                time_s=time.perf_counter() - start,
                learner_time_s=learner_time,
                **record,
            )
        )
        return self

    @property
    def model_(self) -> Any:
        """The fitted model."""
        check_is_fitted(self, "history_")
        return self._model.estimator_

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predictions of the pooled model, in the caller's label values."""
        return self._model.predict(check_predict_inputs(self, X, [self._model]))

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Probabilities of the pooled model, columns in ``classes_`` order."""
        return self._model.predict_proba(check_predict_inputs(self, X, [self._model]))
