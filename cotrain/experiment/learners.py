"""The clients' learners of an experiment: short names (:data:`LEARNERS`) or class paths."""

from __future__ import annotations

import importlib
from typing import Any

from cotrain.params import did_you_mean

__all__ = ["LEARNERS", "check_learner", "client_learners", "make_learner"]

#: short name -> (module, class, default parameters); the FedCT paper's learners first
LEARNERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "DT": ("sklearn.tree", "DecisionTreeClassifier", {}),
    "RF": ("sklearn.ensemble", "RandomForestClassifier", {"n_estimators": 100}),
    "ET": ("sklearn.ensemble", "ExtraTreesClassifier", {"n_estimators": 100}),
    "XGBoost": ("learners", "XGBoostClassifier", {}),
    "RuleFit": ("learners", "RuleFitClassifier", {"tree_size": 4, "max_rules": 200}),
    "MLP": (
        "sklearn.neural_network",
        "MLPClassifier",
        {"hidden_layer_sizes": (100,), "max_iter": 300},
    ),
    "LR": ("sklearn.linear_model", "LogisticRegression", {"max_iter": 1000}),
    "KNN": ("sklearn.neighbors", "KNeighborsClassifier", {}),
    "NB": ("sklearn.naive_bayes", "GaussianNB", {}),
    "TorchMLP": (
        "learners",
        "TorchClassifier",
        {"module_params": {"hidden": (64,)}, "n_threads": 1},
    ),
}


def make_learner(name: str, params: dict[str, Any] | None = None) -> Any:
    """A learner from its short name (see :data:`LEARNERS`) or a dotted class path.

    Parameters
    ----------
    name : str
        A key of :data:`LEARNERS` (its default parameters apply) or ``module.Class``.
    params : dict, optional
        Constructor parameters, over the defaults.

    Returns
    -------
    estimator
        A new, unfitted learner.

    Raises
    ------
    ValueError
        An unknown name, or a class path that cannot be imported.
    TypeError
        Parameters the class does not take.

    Examples
    --------
    >>> make_learner("DT", {"max_depth": 3})
    DecisionTreeClassifier(max_depth=3)
    >>> make_learner("sklearn.naive_bayes.GaussianNB")
    GaussianNB()
    >>> make_learner("xgbost")
    Traceback (most recent call last):
    ...
    ValueError: unknown learner 'xgbost'; did you mean 'XGBoost'?: one of DT, RF, ET, XGBoost, \
RuleFit, MLP, LR, KNN, NB, TorchMLP or a class path
    """
    params = dict(params or {})
    if name in LEARNERS:
        module_name, cls_name, defaults = LEARNERS[name]
        params = {**defaults, **params}
    elif "." in name:
        module_name, _, cls_name = name.rpartition(".")
    else:
        raise ValueError(
            f"unknown learner {name!r}{did_you_mean(name, LEARNERS)}: one of "
            f"{', '.join(LEARNERS)} or a class path"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(
            f"learner {name!r}: cannot import {module_name}.{cls_name}: {err}"
        ) from None
    cls = getattr(module, cls_name, None)
    if cls is None:
        public = [n for n in dir(module) if not n.startswith("_")]
        raise ValueError(
            f"learner {name!r}: {module_name} has no {cls_name!r}{did_you_mean(cls_name, public)}"
        )
    try:
        return cls(**params)
    except TypeError as err:
        raise TypeError(f"learner {name!r}: bad params {params}: {err}") from None


def check_learner(name: str, params: dict[str, Any] | None = None) -> Any:
    """Build a learner and check its parameters as its own ``fit`` would, without data.

    scikit-learn estimators check their parameters only when fitted; this asks them now
    (``_validate_params``), so that ``max_depth = "3"`` is refused before any run starts.

    Raises
    ------
    ValueError
        An unknown name, a class path that cannot be imported, or a parameter value the
        learner refuses.
    TypeError
        Parameters the class does not take.

    Examples
    --------
    >>> check_learner("DT", {"max_depth": 3})
    DecisionTreeClassifier(max_depth=3)
    >>> try:
    ...     check_learner("DT", {"max_depth": "3"})
    ... except ValueError as err:
    ...     print(str(err)[:40])
    learner 'DT': bad params {'max_depth': '
    """
    learner = make_learner(name, params)
    validate = getattr(learner, "_validate_params", None)
    if callable(validate) and hasattr(learner, "_parameter_constraints"):
        try:
            validate()
        except (TypeError, ValueError) as err:  # InvalidParameterError is a ValueError
            raise ValueError(f"learner {name!r}: bad params {dict(params or {})}: {err}") from None
    return learner


def client_learners(config: dict[str, Any]) -> list[Any]:
    """One new learner per client, from the ``clients`` list of a resolved configuration.

    A single ``[[clients]]`` entry without ``count`` stands for all ``split.n_clients``.

    Examples
    --------
    >>> config = {"clients": [{"learner": "NB"}], "split": {"n_clients": 2}}
    >>> client_learners(config)
    [GaussianNB(), GaussianNB()]
    >>> config["clients"] = [{"learner": "NB"}, {"learner": "DT", "count": 1}]
    >>> client_learners(config)
    [GaussianNB(), DecisionTreeClassifier()]
    """
    clients = config["clients"]
    if len(clients) == 1 and "count" not in clients[0]:
        clients = [{**clients[0], "count": config["split"]["n_clients"]}]
    return [
        make_learner(c["learner"], c.get("params", {}))
        for c in clients
        for _ in range(c.get("count", 1))
    ]
