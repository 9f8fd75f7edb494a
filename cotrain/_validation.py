"""Checks of everything ``FederatedCoTrainer.fit`` is given, before any training.

Every problem raises a ``ValueError`` or ``TypeError`` that names the argument, the
client where one is concerned, and what was expected.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.utils import check_array, get_tags
from sklearn.utils.multiclass import type_of_target

# the trainer's parameters are declared once, in cotrain.params; check_params and
# PARAM_DEFAULTS stay importable from here for the callers that know them
from cotrain.params import check_params as check_params
from cotrain.params import param_defaults

_LABEL_FAMILIES = {
    "integer": "numeric",
    "floating": "numeric",
    "mixed-integer-float": "numeric",
    "decimal": "numeric",
    "string": "string",
    "bytes": "bytes",
    "boolean": "boolean",
}


@dataclass
class FitData:
    """Validated inputs of one ``fit`` call."""

    X_clients: list[np.ndarray]
    y_clients: list[np.ndarray]
    X_public: np.ndarray | None
    classes: np.ndarray
    X_eval: np.ndarray | None
    y_eval_codes: np.ndarray | None
    y_public_codes: np.ndarray | None
    feature_names: np.ndarray | None

    @property
    def pool(self) -> np.ndarray:
        """The public pool, for a caller that required one (``require_public=True``)."""
        if self.X_public is None:
            raise ValueError("this fit has no public pool (X_public)")
        return self.X_public


def is_text(X: Any) -> bool:
    """Whether ``X`` is raw text: a 1-D sequence of strings (one document per example)."""
    if X is None or isinstance(X, str | bytes) or np.isscalar(X):
        return False
    arr = np.asarray(X, dtype=object) if isinstance(X, list | tuple) else np.asarray(X)
    return arr.ndim == 1 and arr.size > 0 and pd.api.types.infer_dtype(arr) == "string"


def check_text(X: Any, name: str, *, allow_empty: bool = False) -> np.ndarray:
    """Return raw-text inputs as a 1-D object array of str, or raise naming ``name``."""
    if X is None or isinstance(X, str | bytes) or np.isscalar(X):
        raise TypeError(f"{name} must be a 1-D sequence of strings (the public pool is text)")
    arr = np.asarray(X, dtype=object) if isinstance(X, list | tuple) else np.asarray(X)
    arr = arr.astype(object)
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D sequence of strings (the public pool is text), "
            f"got an array of shape {arr.shape}"
        )
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty: expected at least one document")
    if arr.size and pd.api.types.infer_dtype(arr) != "string":
        raise TypeError(f"{name}: every example must be a string (the public pool is text)")
    return arr


def feature_shape(X: np.ndarray) -> tuple[int, ...]:
    """Shape of one example: ``()`` for text, ``(n_features,)`` for tables, ``(C, H, W)``..."""
    return tuple(X.shape[1:])


def describe_shape(shape: tuple[int, ...]) -> str:
    """Human wording of a feature shape for error messages."""
    if not shape:
        return "text"
    return f"{shape[0]} features" if len(shape) == 1 else f"feature shape {shape}"


def check_features(
    X: Any,
    name: str,
    *,
    allow_empty: bool = False,
    text: bool = False,
    allow_nan: bool = False,
    nan_refused_by: str = "",
) -> np.ndarray:
    """Return ``X`` as a float array with one row per example, or raise naming ``name``.

    Tables are 2-D; image tensors ``(n, C, H, W)`` keep their shape; with ``text=True``
    the inputs are raw documents (:func:`check_text`). Infinite values are refused; NaN
    (missing values) only where ``allow_nan`` is False, i.e. where a learner that will
    see ``X`` cannot take them (``nan_refused_by`` names it in the error).
    """
    if text:
        return check_text(X, name, allow_empty=allow_empty)
    if X is None:
        raise TypeError(f"{name} is required: expected a 2-D array of numeric features")
    if isinstance(X, str | bytes) or np.isscalar(X):
        raise TypeError(f"{name} must be a 2-D array-like of features, got {type(X).__name__}")
    if _ndim(X) == 1:  # scikit-learn's message would print the whole array
        raise ValueError(
            f"{name} must be a 2D array (examples x features), got a 1-D array of "
            f"{_n_rows(X)} values; use .reshape(-1, 1) for a single feature or "
            ".reshape(1, -1) for a single example"
        )
    try:
        arr = check_array(
            X,
            dtype="numeric",
            ensure_all_finite="allow-nan",
            ensure_2d=True,
            allow_nd=True,
            ensure_min_samples=0 if allow_empty else 1,
            input_name=name,
        )
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None
    except TypeError as err:
        raise TypeError(f"{name}: {err}") from None
    if not allow_nan and arr.dtype.kind == "f" and np.isnan(arr).any():
        who = nan_refused_by or "the learner"
        raise ValueError(
            f"{name} contains NaN (missing values), which {who} cannot take (its scikit-learn "
            "tags say allow_nan=False): impute them (e.g. make_pipeline(SimpleImputer(), "
            "learner) as the client's estimator) or use a learner that handles them, such as "
            "HistGradientBoostingClassifier or XGBoostClassifier"
        )
    return arr


def _ndim(X: Any) -> int | None:
    """Dimensions of ``X`` without trusting ragged lists (None when unknown)."""
    ndim = getattr(X, "ndim", None)
    if ndim is None and isinstance(X, list | tuple):
        try:
            ndim = np.asarray(X).ndim
        except ValueError:  # ragged: check_array reports it
            return None
    return ndim if isinstance(ndim, int) else None


def nan_allowed(estimator: Any) -> bool:
    """Whether ``estimator`` takes NaN in its inputs, by its scikit-learn tags
    (``allow_nan``); False for a learner without tags.

    A ``Pipeline`` is followed step by step, since scikit-learn's ``Pipeline`` tags leave
    ``allow_nan`` at False even after an imputer: every step must take NaN until one that
    removes it (an imputer or ``MissingIndicator`` of :mod:`sklearn.impute`); steps after
    it see no NaN. A transformer that takes NaN but keeps it, such as ``StandardScaler``,
    passes it on to the next step. A custom imputer is judged as keeping NaN.

    Examples
    --------
    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> from sklearn.impute import SimpleImputer
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> nan_allowed(HistGradientBoostingClassifier()), nan_allowed(LogisticRegression())
    (True, False)
    >>> nan_allowed(make_pipeline(SimpleImputer(), LogisticRegression()))
    True
    >>> nan_allowed(make_pipeline(StandardScaler(), LogisticRegression()))
    False
    >>> nan_allowed(make_pipeline(StandardScaler(), SimpleImputer(), LogisticRegression()))
    True
    """
    from sklearn.pipeline import Pipeline

    from learners import ClassAlignedClassifier
    from learners.blend import BlendedClassifier

    # the library's own wrappers take what the learner they wrap takes (a blend's co-trained
    # models are clones of its local model's learner)
    if isinstance(estimator, BlendedClassifier):
        return nan_allowed(estimator.local)
    if isinstance(estimator, ClassAlignedClassifier):
        return nan_allowed(estimator.estimator)
    if isinstance(estimator, Pipeline):
        steps = [s for _, s in estimator.steps if s is not None and s != "passthrough"]
        for step in steps:
            if not nan_allowed(step):
                return False
            if removes_nan(step):
                return True
        return bool(steps)
    try:
        return bool(get_tags(estimator).input_tags.allow_nan)
    except (AttributeError, TypeError):
        return False


def removes_nan(step: Any) -> bool:
    """Whether a pipeline step's output holds no NaN whatever its input: the imputers and
    ``MissingIndicator`` of :mod:`sklearn.impute`, or a ``Pipeline`` containing one.

    Examples
    --------
    >>> from sklearn.impute import KNNImputer
    >>> from sklearn.preprocessing import StandardScaler
    >>> removes_nan(KNNImputer()), removes_nan(StandardScaler())
    (True, False)
    """
    from sklearn.pipeline import Pipeline

    if isinstance(step, Pipeline):
        return any(removes_nan(s) for _, s in step.steps if s is not None and s != "passthrough")
    return type(step).__module__.startswith("sklearn.impute")


def refusing_nan(estimators: Sequence[Any], allow_nan: Sequence[bool]) -> str:
    """Words naming the clients whose learner cannot take NaN ("" if none).

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> refusing_nan([None, LogisticRegression()], [True, False])
    'client 1 (LogisticRegression)'
    """
    who = [
        f"client {i} ({type(e).__name__})"
        for i, (e, ok) in enumerate(zip(estimators, allow_nan, strict=True))
        if not ok
    ]
    return ", ".join(who[:3]) + (f" and {len(who) - 3} more" if len(who) > 3 else "")


def check_predict_features(X: Any, shape: tuple[int, ...], models: Sequence[Any]) -> np.ndarray:
    """``X`` given to a fitted model's ``predict``: its features as :func:`check_features`
    reads them, in the feature shape the model was fitted on (``shape``; ``()`` for texts),
    NaN only where every one of ``models`` (the fitted models that will see ``X``) takes it.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> check_predict_features([[1.0, float("nan")]], (2,), [DecisionTreeClassifier()]).shape
    (1, 2)
    >>> check_predict_features([[1.0, 2.0, 3.0]], (2,), [DecisionTreeClassifier()])
    Traceback (most recent call last):
    ...
    ValueError: X has 3 features, expected 2 features
    """
    allow_nan = [nan_allowed(m) for m in models]
    X = check_features(
        X,
        "X",
        text=shape == (),
        allow_nan=bool(models) and all(allow_nan),
        nan_refused_by=refusing_nan(models, allow_nan) or "its model",
    )
    if feature_shape(X) != shape:
        raise ValueError(
            f"X has {describe_shape(feature_shape(X))}, expected {describe_shape(shape)}"
        )
    return X


def _as_array(value: Any, name: str, what: str) -> np.ndarray:
    """``np.asarray(value)``, with a ragged nested sequence reported under ``name``."""
    try:
        return np.asarray(value)
    except ValueError as err:  # numpy: "setting an array element with a sequence ..."
        raise ValueError(
            f"{name} must be {what}; could not convert it to an array: {err}"
        ) from None


def _unique(values: np.ndarray, name: str, **kwargs: Any) -> Any:
    """``np.unique``, with values that cannot be ordered (mixed types) reported under ``name``."""
    try:
        return np.unique(values, **kwargs)
    except TypeError as err:
        raise TypeError(
            f"{name} mixes values that cannot be compared with each other ({err}); "
            "use values of one type"
        ) from None


def check_labels(y: Any, name: str, n_samples: int) -> np.ndarray:
    """Return ``y`` as a 1-D array of ``n_samples`` valid labels, or raise naming ``name``."""
    if y is None:
        raise TypeError(f"{name} is required: expected a 1-D array of class labels")
    if isinstance(y, str | bytes) or np.isscalar(y):
        raise TypeError(f"{name} must be a 1-D array-like of labels, got {type(y).__name__}")
    y = _as_array(y, name, "a 1-D array-like of labels")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one label per row), got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(f"{name} has {y.shape[0]} labels but its features have {n_samples} rows")
    family = label_family(y, name)
    if family == "numeric" and not np.all(np.isfinite(y.astype(float))):
        raise ValueError(f"{name} contains NaN or infinite labels")
    if family == "numeric" and y.size and type_of_target(y).startswith("continuous"):
        values = y.astype(float)
        example = values[np.mod(values, 1) != 0][0]
        raise ValueError(
            f"{name} holds continuous values (e.g. {example:g}): co-training needs class "
            "labels, as a classifier does; bin a regression target into classes first"
        )
    return y


def label_family(y: np.ndarray, name: str) -> str:
    """Classify labels as numeric, string, bytes or boolean; raise on mixtures and missing."""
    if y.size == 0:
        return "empty"
    kind = pd.api.types.infer_dtype(y, skipna=False)
    family = _LABEL_FAMILIES.get(kind)
    if family is None:
        if kind in {"mixed", "mixed-integer", "unknown-array"} or "na" in kind:
            raise TypeError(
                f"{name} mixes label types or contains missing values (inferred {kind!r}); "
                "labels must all be numbers or all be strings"
            )
        raise TypeError(f"{name}: unsupported label type {kind!r}")
    return family


def split_clients(X: Any, y: Any, groups: Any) -> tuple[list[Any], list[Any]]:
    """Turn ``(X, y)`` lists, or arrays plus ``groups``, into per-client lists."""
    if groups is not None:
        if isinstance(X, list | tuple) or isinstance(y, list | tuple):
            raise TypeError("groups= is given, so X and y must be single arrays, not lists")
        if y is None:
            raise TypeError("y is required when groups= is given")
        groups = _as_array(groups, "groups", "a 1-D array with one client per row of X")
        n = len(X)
        if groups.ndim != 1 or groups.shape[0] != n:
            raise ValueError(
                f"groups must be 1-D with one entry per row of X ({n}), got shape {groups.shape}"
            )
        names, inverse = _unique(groups, "groups", return_inverse=True)
        rows = [np.flatnonzero(inverse == k) for k in range(len(names))]
        take = (lambda a, r: a.iloc[r]) if hasattr(X, "iloc") else (lambda a, r: np.asarray(a)[r])
        take_y = (lambda a, r: a.iloc[r]) if hasattr(y, "iloc") else (lambda a, r: np.asarray(a)[r])
        return [take(X, r) for r in rows], [take_y(y, r) for r in rows]
    if not isinstance(X, list | tuple):
        raise TypeError(
            "X must be a list with one feature array per client, or a single array "
            f"together with groups=; got {type(X).__name__} without groups"
        )
    if not isinstance(y, list | tuple):
        raise TypeError(f"y must be a list with one label array per client, got {type(y).__name__}")
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} clients but y has {len(y)}")
    if len(X) == 0:
        raise ValueError("X and y are empty: expected at least one client")
    return list(X), list(y)


def _n_rows(X: Any) -> int | None:
    """Rows of ``X`` without converting it (None if unknown; sparse matrices have no len)."""
    shape = getattr(X, "shape", None)
    if isinstance(shape, tuple) and shape:
        return shape[0]
    try:
        return len(X)
    except TypeError:
        return None


def _columns(X: Any) -> np.ndarray | None:
    return np.asarray(X.columns, dtype=object) if hasattr(X, "columns") else None


def check_fit_inputs(
    X: Any,
    y: Any,
    X_public: Any,
    *,
    groups: Any,
    n_estimators: int,
    classes: Any,
    eval_set: Any,
    y_public: Any,
    require_public: bool = True,
    estimators: Sequence[Any] | None = None,
) -> FitData:
    """Validate all data given to ``fit``; return arrays ready for training.

    Baselines without a public pool pass ``X_public=None`` with ``require_public=False``;
    client 0's inputs then fix the feature space. With ``estimators``, NaN is accepted
    where the learners that see the data take it (:func:`nan_allowed`): in a client's own
    rows if its learner does, in the public pool and the evaluation set if every learner
    does; without ``estimators`` NaN is refused everywhere.
    """
    X_list, y_list = split_clients(X, y, groups)
    if len(X_list) != n_estimators:
        raise ValueError(
            f"estimators has {n_estimators} entries but the data has {len(X_list)} clients; "
            "give one estimator per client"
        )
    if estimators is None:
        estimators = [None] * n_estimators
    allow_nan = [e is not None and nan_allowed(e) for e in estimators]
    # the public pool and the evaluation set reach every learner: NaN only if all take it
    shared_allow_nan = all(allow_nan)
    shared_refused_by = refusing_nan(estimators, allow_nan)
    # the public pool fixes the feature space; without one (FedAvg, local-only), client 0
    if X_public is not None or require_public:
        text = is_text(X_public)
        pool = check_features(
            X_public,
            "X_public",
            text=text,
            allow_nan=shared_allow_nan,
            nan_refused_by=shared_refused_by,
        )
        X_public_arr: np.ndarray | None = pool
        shape: tuple[int, ...] | None = feature_shape(pool)
        reference = "X_public"
    else:
        text, X_public_arr, shape, reference = is_text(X_list[0]), None, None, "client 0"
    names = _columns(X_public)

    X_clients: list[np.ndarray] = []
    y_clients: list[np.ndarray] = []
    families: dict[str, list[int]] = {}
    for i, (Xi, yi) in enumerate(zip(X_list, y_list, strict=True)):
        if Xi is None or _n_rows(Xi) == 0:
            raise ValueError(f"client {i} has no training data (X[{i}] is empty)")
        Xi_arr = check_features(
            Xi,
            f"X[{i}] (client {i})",
            text=text,
            allow_nan=allow_nan[i],
            nan_refused_by=(
                "its learner"
                if estimators[i] is None
                else f"its learner ({type(estimators[i]).__name__})"
            ),
        )
        if shape is None:
            shape = feature_shape(Xi_arr)
        elif feature_shape(Xi_arr) != shape:
            raise ValueError(
                f"X[{i}] (client {i}) has {describe_shape(feature_shape(Xi_arr))} but "
                f"{reference} has {describe_shape(shape)}; all clients and the public pool "
                "must share one feature space"
            )
        cols = _columns(Xi)
        if names is not None and cols is not None and not np.array_equal(cols, names):
            raise ValueError(
                f"X[{i}] (client {i}) has different column names from X_public; "
                "order the columns identically"
            )
        yi_arr = check_labels(yi, f"y[{i}] (client {i})", Xi_arr.shape[0])
        families.setdefault(label_family(yi_arr, f"y[{i}]"), []).append(i)
        X_clients.append(Xi_arr)
        y_clients.append(yi_arr)
    if shape is None:  # no client at all (check_estimators refuses an empty list)
        raise ValueError("the data has no clients")
    if len(families) > 1:
        detail = "; ".join(f"{fam}: clients {ids}" for fam, ids in families.items())
        raise TypeError(f"y: clients use labels of different types ({detail})")

    classes_arr = resolve_classes(classes, y_clients)
    if classes is None:
        _warn_stray_classes(y_clients)
    X_eval, y_eval_codes = None, None
    if eval_set is not None:
        if not isinstance(eval_set, list | tuple) or len(eval_set) != 2:
            raise TypeError("eval_set must be a pair (X_eval, y_eval)")
        X_eval = check_features(
            eval_set[0],
            "eval_set[0] (X_eval)",
            text=text,
            allow_nan=shared_allow_nan,
            nan_refused_by=shared_refused_by,
        )
        if feature_shape(X_eval) != shape:
            raise ValueError(
                f"eval_set[0] (X_eval) has {describe_shape(feature_shape(X_eval))}, "
                f"expected {describe_shape(shape)}"
            )
        y_eval = check_labels(eval_set[1], "eval_set[1] (y_eval)", X_eval.shape[0])
        _check_same_label_kind(y_eval, "eval_set[1] (y_eval)", families)
        y_eval_codes = class_indices(y_eval, classes_arr, unknown=-2)
        _warn_unseen(y_eval, y_eval_codes, "eval_set[1] (y_eval)")
    y_public_codes = None
    if y_public is not None:
        if X_public_arr is None:
            raise ValueError("y_public is given but there is no public pool (X_public)")
        y_pub = check_labels(y_public, "y_public", X_public_arr.shape[0])
        _check_same_label_kind(y_pub, "y_public", families)
        y_public_codes = class_indices(y_pub, classes_arr, unknown=-2)
        _warn_unseen(y_pub, y_public_codes, "y_public")
    return FitData(
        X_clients, y_clients, X_public_arr, classes_arr, X_eval, y_eval_codes, y_public_codes, names
    )


#: fewest labelled rows over all clients at which a class seen once is called stray
STRAY_MIN_ROWS = 20


def _warn_stray_classes(y_clients: list[np.ndarray]) -> None:
    """A class with one labelled row among many (a typo such as ``"yes "``, a stray code)
    becomes a class every client may predict: say so once, naming it and its client."""
    y_all = np.concatenate(y_clients)
    if len(y_all) < STRAY_MIN_ROWS:
        return
    values, counts = np.unique(y_all, return_counts=True)
    for value in values[counts == 1][:5]:
        client = next(i for i, yi in enumerate(y_clients) if np.any(yi == value))
        shown = value.item() if isinstance(value, np.generic) else value
        warnings.warn(
            f"y[{client}] (client {client}) has the only row of class {shown!r} among "
            f"{len(y_all)} labelled rows: if it is a typo or a stray code, fix the labels "
            "(it stays a class every client may predict); if it is real, give classes= "
            "(the whole label space) to silence this",
            UserWarning,
            stacklevel=4,
        )


def _warn_unseen(y: np.ndarray, codes: np.ndarray, name: str) -> None:
    """Scoring labels outside the classes can never be predicted: say so once."""
    unseen = codes == -2
    if unseen.any():
        warnings.warn(
            f"{name} has {int(unseen.sum())} of {len(y)} labels never seen in training "
            f"({np.unique(y[unseen])[:5].tolist()}); no client can predict them, so they "
            "count as errors in every accuracy",
            UserWarning,
            stacklevel=4,
        )


def _check_same_label_kind(y: np.ndarray, name: str, families: dict[str, list[int]]) -> None:
    """Scoring labels must be comparable with the clients' (numbers vs strings vs bytes);
    otherwise every one of them would silently count as an unknown class."""
    comparable = {"boolean": "numeric"}  # booleans compare equal to 0 and 1
    kind = label_family(y, name)
    kind = comparable.get(kind, kind)
    clients = {comparable.get(f, f) for f in families} - {"empty"}
    if kind != "empty" and clients and kind not in clients:
        raise TypeError(
            f"{name} has {kind} labels but the clients' labels are {', '.join(sorted(clients))}"
        )


def require_public_classes(classes: Any, privacy: Any, where: str = "classes") -> None:
    """With a privacy mechanism the label space is public configuration: refuse ``None``.

    The clients' labels are not: one record, a client's only one of a class, changes them.

    Examples
    --------
    >>> require_public_classes(None, privacy=None)
    >>> require_public_classes(None, privacy="RR")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: classes is required with privacy=...: ...
    """
    if privacy is not None and classes is None:
        raise ValueError(
            f"{where} is required with privacy=...: the label space is public configuration "
            "(pass every class label); taking it from the clients' labels would release "
            "which classes their private records hold, outside the privacy guarantee"
        )


def resolve_classes(classes: Any, y_clients: list[np.ndarray]) -> np.ndarray:
    """The global label space: ``classes`` if given, else the union of all clients' labels."""
    seen = np.unique(np.concatenate(y_clients))
    if classes is None:
        result = seen
    else:
        result = _as_array(classes, "classes", "a 1-D array-like of class labels")
        if result.ndim != 1:
            raise ValueError(f"classes must be 1-D, got shape {result.shape}")
        if len(_unique(result, "classes")) != len(result):
            raise ValueError("classes contains duplicates")
        result = np.unique(result)
        for i, yi in enumerate(y_clients):  # found here, at the client: never sent
            unknown = np.setdiff1d(yi, result)
            if unknown.size:
                raise ValueError(
                    f"y[{i}] (client {i}) contains labels not listed in classes: "
                    f"{unknown[:5].tolist()}"
                )
    if len(result) < 2:
        raise ValueError(
            f"need at least 2 classes over all clients, found {len(result)}: {result.tolist()}"
        )
    return result


def class_indices(y: np.ndarray, classes: np.ndarray, unknown: int | None = None) -> np.ndarray:
    """Map labels to their index in ``classes``; unseen labels to ``unknown`` (or raise)."""
    try:
        codes = np.searchsorted(classes, y)
    except TypeError as err:
        raise TypeError(
            f"labels {y[:3].tolist()} cannot be compared with classes {classes[:3].tolist()}"
        ) from err
    codes = np.clip(codes, 0, len(classes) - 1)
    found = classes[codes] == y
    if not np.all(found):
        if unknown is None:
            raise ValueError(f"labels not in classes: {np.unique(y[~found])[:5].tolist()}")
        codes = np.where(found, codes, unknown)
    return codes.astype(np.int64)


def masked_labels(codes: np.ndarray, classes: np.ndarray) -> np.ma.MaskedArray:
    """Codes back to the caller's labels, masked where they are -1 (an abstention).

    >>> masked_labels(np.array([1, -1, 0]), np.array(["a", "b"])).tolist()
    ['b', None, 'a']
    """
    return np.ma.masked_array(classes[np.maximum(codes, 0)], mask=codes < 0)


def check_estimators(estimators: Any, share: str) -> list[Any]:
    """Every client estimator must offer fit/predict (and predict_proba for soft sharing)."""
    if not isinstance(estimators, list | tuple):
        raise TypeError(
            "estimators must be a list with one scikit-learn-style classifier per client, "
            f"got {type(estimators).__name__}"
        )
    if len(estimators) == 0:
        raise ValueError("estimators is empty: expected at least one client estimator")
    for i, est in enumerate(estimators):
        for method in ("fit", "predict"):
            if not callable(getattr(est, method, None)):
                raise TypeError(
                    f"estimators[{i}] ({type(est).__name__}) has no {method}() method; "
                    "each client needs a scikit-learn-style classifier"
                )
        kind = _estimator_type(est)
        if kind not in (None, "classifier"):
            raise TypeError(
                f"estimators[{i}] ({type(est).__name__}) is a {kind}, not a classifier; "
                "each client needs a classifier (co-training votes on class labels)"
            )
        if share == "soft" and not hasattr(est, "predict_proba"):
            raise TypeError(
                f"estimators[{i}] ({type(est).__name__}) has no predict_proba(), "
                "which share='soft' needs"
            )
    return list(estimators)


def _estimator_type(estimator: Any) -> str | None:
    """scikit-learn's estimator type ("classifier", "regressor", ...); None without tags."""
    try:
        return get_tags(estimator).estimator_type
    except (AttributeError, TypeError):
        return None


def check_share_consensus(share: str, consensus: Any) -> None:
    """Say what a soft consensus rule does with hard labels (``share="hard"``).

    Examples
    --------
    >>> import warnings
    >>> from consensus import SoftMean
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     check_share_consensus("hard", SoftMean())
    >>> "share of the clients' votes" in str(caught[0].message)
    True
    """
    if share == "hard" and getattr(consensus, "output", None) == "soft":
        warnings.warn(
            f"consensus {consensus!r} is a soft rule but share='hard': clients send hard "
            "labels, so the pseudo-labels are soft targets equal to each class's share of "
            "the clients' votes (an entropy weighting has no effect on hard votes, every "
            "one is certain). Use share='soft' to combine the clients' probabilities, or a "
            "hard rule such as 'majority' for hard pseudo-labels",
            UserWarning,
            stacklevel=4,
        )


def pipeline_steps_before(estimator: Any, depth: int = 6) -> list[str]:
    """Names of the transforming steps of a scikit-learn ``Pipeline`` that is fitting
    ``estimator`` as its final step (found on the call stack), or [] when there is none.

    Such steps transform the rows of ``X`` only; a pipeline passes every other fit
    argument (``X_public``, ``eval_set``) to its final step untransformed.

    Examples
    --------
    >>> pipeline_steps_before(object())
    []
    """
    from sklearn.pipeline import Pipeline

    frame = sys._getframe(1)
    for _ in range(depth):
        caller = frame.f_back
        if caller is None:
            break
        frame = caller
        owner = frame.f_locals.get("self")
        if isinstance(owner, Pipeline) and owner.steps and owner.steps[-1][1] is estimator:
            return [n for n, step in owner.steps[:-1] if step not in (None, "passthrough")]
    return []


def check_not_after_transforms(estimator: Any) -> None:
    """Refuse a fit as the final step of a ``Pipeline`` with transforming steps before it.

    Those steps would transform the clients' rows but not ``X_public`` or ``eval_set``
    (a pipeline passes fit arguments through untransformed), so the clients would label a
    public pool in another feature space, silently; and they would be fitted on every
    client's rows pooled, which a federation cannot do. Each client's own pipeline as its
    estimator does it right.
    """
    steps = pipeline_steps_before(estimator, depth=7)
    if steps:
        raise ValueError(
            f"FederatedCoTrainer is the final step of a Pipeline after {steps}: those steps "
            "transform the clients' rows X but not X_public or eval_set, which would reach "
            "the clients untransformed (and they are fitted on all clients' rows pooled, "
            "which a federation cannot do). Give each client its own pipeline instead, e.g. "
            "FederatedCoTrainer([make_pipeline(StandardScaler(), LogisticRegression()), "
            "...]): every client then fits the transform on its own data and applies it to "
            "the public pool"
        )


#: Defaults of the parameters :func:`check_params` knows (derived from ``cotrain.params.PARAMS``).
PARAM_DEFAULTS: dict[str, Any] = param_defaults()
