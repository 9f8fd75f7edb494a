"""Helpers shared by the baselines: input checks, seeding, local fits, bytes and scores.

Nothing here imports torch or dp-accounting.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from cotrain._validation import (
    FitData,
    check_fit_inputs,
    check_predict_features,
)
from cotrain.wire.messages import HardLabels

__all__ = [
    "check_client_data",
    "fit_local",
    "label_bytes",
    "weights_nbytes",
]


def check_client_data(
    X: Any,
    y: Any,
    *,
    groups: Any = None,
    n_estimators: int | None = None,
    classes: Any = None,
    eval_set: Any = None,
    learners: Sequence[Any] | None = None,
) -> FitData:
    """Validate per-client training data when there is no public pool.

    :func:`cotrain._validation.check_fit_inputs` with client 0's features as the
    reference feature space (tables, image tensors or texts); ``X_public`` is None.
    ``learners``: the learner of each client, or one learner every client's rows reach;
    NaN is accepted where they take it (:func:`cotrain._validation.nan_allowed`), refused
    everywhere without them.
    """
    n = len(X) if n_estimators is None and isinstance(X, list | tuple) else n_estimators
    if n is None:  # arrays plus groups: as many clients as groups
        n = len(np.unique(np.asarray(groups))) if groups is not None else 0
    if learners is not None and len(learners) == 1:  # one learner reaches every client
        learners = list(learners) * n
    return check_fit_inputs(
        X,
        y,
        None,
        groups=groups,
        n_estimators=n,
        classes=classes,
        eval_set=eval_set,
        y_public=None,
        require_public=False,
        estimators=learners,
    )


def check_predict_inputs(model: Any, X: Any, learners: Sequence[Any] = ()) -> Any:
    """Check that ``model`` is fitted and ``X`` matches its training features; NaN only
    where every one of ``learners`` (the models that will see ``X``) takes it."""
    check_is_fitted(model, "history_")
    return check_predict_features(X, model._row_shape, learners)


def concat_rows(parts: list[Any]) -> Any:
    """Stack the clients' inputs (arrays, or lists of texts)."""
    if all(isinstance(p, list) for p in parts):
        return [row for p in parts for row in p]
    return np.concatenate([np.asarray(p) for p in parts])


def fit_local(model: Any, X: Any, y: Any, X_eval: Any = None) -> tuple[Any, Any, float]:
    """Fit one client's model; return it, its test predictions and the learner time.

    The unit of work that :class:`~cotrain.baselines.LocalOnly`,
    :class:`~cotrain.baselines.Centralized` and :class:`~cotrain.baselines.PATE` hand to
    a runtime (one call per client, or one for the pooled data).

    Parameters
    ----------
    model : learners.ClassAlignedClassifier
        The unfitted model; it is fitted in place (and returned, since a process-based
        runtime returns a copy).
    X, y : array-like
        Its training data.
    X_eval : array-like, optional
        Test features to predict after fitting.

    Returns
    -------
    model : learners.ClassAlignedClassifier
        The fitted model.
    pred : ndarray or None
        Its predictions on `X_eval` (None without `X_eval`).
    learner_time : float
        Seconds spent fitting and predicting.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.naive_bayes import GaussianNB
    >>> from learners import ClassAlignedClassifier
    >>> from cotrain.baselines._common import fit_local
    >>> X, y = np.array([[0.0], [0.1], [1.0], [1.1]]), np.array([0, 0, 1, 1])
    >>> model = ClassAlignedClassifier(GaussianNB(), classes=[0, 1, 2])
    >>> model, pred, seconds = fit_local(model, X, y, X_eval=np.array([[1.05]]))
    >>> pred.tolist(), seconds >= 0
    ([1], True)
    """
    model.fit(X, y)
    start = time.perf_counter()
    pred = None if X_eval is None else model.predict(X_eval)
    return model, pred, model.fit_time_ + time.perf_counter() - start


def label_bytes(codes: np.ndarray, n_classes: int) -> int:
    """Exact size of a hard-label message carrying ``codes``."""
    return len(HardLabels(np.asarray(codes, dtype=np.int64), n_classes).to_bytes())


def weights_nbytes(weights: Mapping[str, Any]) -> int:
    """Bytes of a parameter message: the float32 arrays that are actually sent."""
    return int(sum(np.asarray(w, dtype=np.float32).nbytes for w in weights.values()))


def accuracy(codes: np.ndarray, y_codes: np.ndarray) -> float:
    """Share of ``codes`` equal to the true codes (unknown true labels count as wrong)."""
    return float(np.mean(np.asarray(codes) == y_codes))
