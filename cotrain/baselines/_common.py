"""Helpers shared by the baselines: input checks, seeding, sampling, bytes and scores.

Nothing here imports torch or dp-accounting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from cotrain._validation import (
    FitData,
    check_features,
    check_labels,
    encode_labels,
    label_family,
    resolve_classes,
    split_clients,
)
from cotrain.messages import HardLabels
from cotrain.trainer import seeded_clone

__all__ = [
    "check_client_data",
    "label_bytes",
    "sample_clients",
    "seeded",
    "weights_nbytes",
]

seeded = seeded_clone
"""Clone an estimator and seed every ``random_state`` it leaves as None (as the trainer does)."""


def _n_rows(X: Any) -> int:
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else len(X)


def _as_inputs(X: Any, name: str, features: str) -> Any:
    """Numeric 2-D features (``features="numeric"``), or anything with rows (``"any"``):
    arrays of any rank (images) or sequences of texts, passed to the learner as they are."""
    if features == "numeric":
        return check_features(X, name)
    if X is None or isinstance(X, str | bytes) or np.isscalar(X):
        raise TypeError(f"{name} must be an array-like with one row per example, got {X!r:.40}")
    if hasattr(X, "iloc"):
        X = X.to_numpy()
    if isinstance(X, list | tuple):
        if len(X) == 0:
            raise ValueError(f"{name} is empty")
        return np.asarray(X) if not isinstance(X[0], str) else list(X)
    if _n_rows(X) == 0:
        raise ValueError(f"{name} is empty")
    return X


def check_client_data(
    X: Any,
    y: Any,
    *,
    groups: Any = None,
    n_estimators: int | None = None,
    classes: Any = None,
    eval_set: Any = None,
    features: str = "numeric",
) -> FitData:
    """Validate per-client training data when there is no public pool.

    Like :func:`cotrain._validation.check_fit_inputs` (whose building blocks it uses),
    with the first client's features as the reference feature space. With
    ``features="any"`` inputs are only checked for their number of rows (and a common
    trailing shape for arrays), so that e.g. texts or images reach a torch learner.
    The returned ``FitData`` has ``X_public=None``.
    """
    X_list, y_list = split_clients(X, y, groups)
    if n_estimators is not None and len(X_list) != n_estimators:
        raise ValueError(
            f"estimators has {n_estimators} entries but the data has {len(X_list)} clients; "
            "give one estimator per client"
        )
    X_clients, y_clients, families = [], [], {}
    reference = None
    for i, (Xi, yi) in enumerate(zip(X_list, y_list, strict=True)):
        name = f"X[{i}] (client {i})"
        if Xi is None or (hasattr(Xi, "__len__") and len(Xi) == 0):
            raise ValueError(f"client {i} has no training data (X[{i}] is empty)")
        Xi_arr = _as_inputs(Xi, name, features)
        trailing = getattr(Xi_arr, "shape", (None,))[1:]
        if reference is None:
            reference = trailing
        elif trailing != reference:
            raise ValueError(
                f"{name} has rows of shape {trailing} but client 0 has {reference}; all "
                "clients must share one feature space"
            )
        yi_arr = check_labels(yi, f"y[{i}] (client {i})", _n_rows(Xi_arr))
        families.setdefault(label_family(yi_arr, f"y[{i}]"), []).append(i)
        X_clients.append(Xi_arr)
        y_clients.append(yi_arr)
    if len(families) > 1:
        detail = "; ".join(f"{fam}: clients {ids}" for fam, ids in families.items())
        raise TypeError(f"y: clients use labels of different types ({detail})")
    classes_arr = resolve_classes(classes, y_clients)
    X_eval, y_eval_codes = None, None
    if eval_set is not None:
        if not isinstance(eval_set, list | tuple) or len(eval_set) != 2:
            raise TypeError("eval_set must be a pair (X_eval, y_eval)")
        X_eval = _as_inputs(eval_set[0], "eval_set[0] (X_eval)", features)
        trailing = getattr(X_eval, "shape", (None,))[1:]
        if trailing != reference:
            raise ValueError(
                f"eval_set[0] (X_eval) has rows of shape {trailing}, expected {reference}"
            )
        y_eval = check_labels(eval_set[1], "eval_set[1] (y_eval)", _n_rows(X_eval))
        y_eval_codes = encode_labels(y_eval, classes_arr, unknown=-2)
    return FitData(X_clients, y_clients, None, classes_arr, X_eval, y_eval_codes, None, None)


def check_predict_inputs(model: Any, X: Any, features: str = "numeric") -> Any:
    """Check that ``model`` is fitted and ``X`` matches its training features."""
    check_is_fitted(model, "history_")
    X = _as_inputs(X, "X", features)
    expected = getattr(model, "_row_shape", None)
    shape = getattr(X, "shape", (None,))[1:]
    if expected is not None and shape != expected:
        if features == "numeric":
            raise ValueError(f"X has {shape[0]} features, expected {expected[0]}")
        raise ValueError(f"X has rows of shape {shape}, expected {expected}")
    return X


def concat_rows(parts: list[Any]) -> Any:
    """Stack the clients' inputs (arrays, or lists of texts)."""
    if all(isinstance(p, list) for p in parts):
        return [row for p in parts for row in p]
    return np.concatenate([np.asarray(p) for p in parts])


def sample_clients(rng: np.random.Generator, n_clients: int, participation: float) -> np.ndarray:
    """The clients asked this round, as ``FederatedCoTrainer`` samples them (at least one)."""
    k = max(1, round(participation * n_clients))
    if k >= n_clients:
        return np.arange(n_clients)
    return np.sort(rng.choice(n_clients, size=k, replace=False))


def label_bytes(codes: np.ndarray, n_classes: int) -> int:
    """Exact size of a hard-label message carrying ``codes``."""
    return len(HardLabels(np.asarray(codes, dtype=np.int64), n_classes).to_bytes())


def weights_nbytes(weights: Mapping[str, Any]) -> int:
    """Bytes of a parameter message: the float32 arrays that are actually sent."""
    return int(sum(np.asarray(w, dtype=np.float32).nbytes for w in weights.values()))


def accuracy(codes: np.ndarray, y_codes: np.ndarray) -> float:
    """Share of ``codes`` equal to the true codes (unknown true labels count as wrong)."""
    return float(np.mean(np.asarray(codes) == y_codes))
