"""Experiments as data: ``cotrain run EXPERIMENT.toml`` and ``cotrain report DIR...``.

An experiment file names the data, the split, the clients' learners, the method and the
seeds; optional ``[[variant]]`` tables each override part of it (one results row per
variant: the columns of a paper's table). Example::

    name = "table3_breast_cancer"
    description = "FedCT Table 3, breast cancer: 5 clients of one learner"
    seeds = [0, 1, 2, 3, 4]

    [data]
    dataset = "breast_cancer"     # bundled: breast_cancer, digits; ../shared/data:
                                  # wine_quality, adult; or path = "my.csv" + target = "y"
    [split]
    n_public = 370                # |U|
    n_labeled = 85                # labelled rows over all clients
    n_test = 114
    n_clients = 5
    partition = "iid"             # iid | dirichlet (alpha) | two_alpha (alpha = [a1, a2])

    [method]
    name = "fedct"                # fedct | dp-fedct | dd | fedavg | dp-fedavg | pate | local
                                  # | centralised
    consensus = "majority"
    rounds = 10

    [[clients]]
    learner = "DT"                # a name from LEARNERS, or a class path
    count = 5                     # params = { max_depth = 5 } passes parameters

    [[variant]]
    label = "DT"
    paper = 0.89                  # the paper's number, shown beside ours
                                  # (seeds = [0, 1] here would run this variant on fewer)
    clients = [{ learner = "DT", count = 5 }]

``run`` writes a results folder: ``runs/<variant>/seed-<s>/`` with ``history.csv``
and ``result.json`` (and a checkpoint while a FedCT run is going), ``summary.csv``,
``summary.md`` and ``accuracy.png``; with ``resume`` it skips finished runs and
continues an interrupted FedCT run from its last round. An invalid file is refused
before anything runs, with the line and the reason.
"""

from __future__ import annotations

import copy
import json
import re
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.checkpoint import fingerprint

METHODS = ("fedct", "dp-fedct", "dd", "fedavg", "dp-fedavg", "pate", "local", "centralised")
PARTITIONS = ("iid", "dirichlet", "two_alpha")
BUNDLED = ("breast_cancer", "digits")
SHARED = ("wine_quality", "adult")

#: top-level keys and section keys with their types (a tuple: any of them)
SCHEMA: dict[str, Any] = {
    "name": str,
    "description": str,
    "seeds": list,
    "data": {
        "dataset": str,
        "path": str,
        "target": str,
        "standardize": bool,
        "data_home": str,
    },
    "split": {
        "n_public": int,
        "n_labeled": int,
        "n_test": int,
        "n_clients": int,
        "partition": str,
        "alpha": (int, float, list),
    },
    "method": {
        "name": str,
        "consensus": str,
        "quorum": (int, float),
        "rounds": int,
        "share": str,
        "participation": (int, float),
        "early_stopping": int,
        "local_epochs": int,
        "noise_sigma": (int, float),
        "clip_norm": (int, float),
        "noise_multiplier": (int, float),
        "privacy": dict,
        "audit": bool,
    },
    "clients": list,
    "variant": list,
}
CLIENT_KEYS = {"learner": str, "params": dict, "count": int}
PRIVACY_KEYS = {"mechanism": str, "epsilon": (int, float), "sensitivity": (int, float)}


class ExperimentError(ValueError):
    """An invalid experiment file: the message starts with ``file:line:``."""


@dataclass
class Run:
    """One (variant, seed) of an experiment, with its fully resolved configuration."""

    variant: str
    seed: int
    config: dict[str, Any]
    paper: float | None = None

    @property
    def key(self) -> str:
        return f"{_slug(self.variant)}/seed-{self.seed}"


# ---------------------------------------------------------------- loading
def load_experiment(path: str | Path) -> tuple[dict[str, Any], list[Run]]:
    """Read and validate an experiment file; returns the config and its runs.

    Raises
    ------
    ExperimentError
        ``path:line: reason`` for TOML syntax errors, unknown keys, wrong types, unknown
        datasets, learners, methods or partitions, and inconsistent sizes.
    """
    path = Path(path)
    if not path.is_file():
        raise ExperimentError(f"{path}: no such experiment file")
    text = path.read_text()
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ExperimentError(f"{path}: {err}") from None
    where = _Locator(path, text)
    _check_table(config, SCHEMA, "", where)
    for key in ("name", "seeds", "data", "split", "method", "clients"):
        if key not in config:
            raise ExperimentError(f"{path}:1: missing required key '{key}'")
    seeds = config["seeds"]
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ExperimentError(f"{where.line('seeds')}: seeds must be a non-empty list of integers")
    variants = config.get("variant", [{"label": config["name"]}])
    runs = []
    for v_index, variant in enumerate(variants):
        if not isinstance(variant, dict) or "label" not in variant:
            raise ExperimentError(
                f"{where.line('label', section='variant', occurrence=v_index)}: every "
                "[[variant]] needs a label"
            )
        for key in ("name", "description", "variant"):
            if key in variant:
                raise ExperimentError(
                    f"{where.line(key, section='variant', occurrence=v_index)}: '{key}' cannot "
                    "be set inside a [[variant]]"
                )
        overrides = {k: v for k, v in variant.items() if k not in ("label", "paper", "seeds")}
        _check_table(overrides, SCHEMA, "variant", where)
        resolved = _merge(copy.deepcopy(config), overrides)
        resolved.pop("variant", None)
        _check_semantics(resolved, where, str(variant["label"]))
        paper = variant.get("paper")
        variant_seeds = variant.get("seeds", seeds)  # e.g. fewer seeds for a slow learner
        if not variant_seeds or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in variant_seeds
        ):
            raise ExperimentError(
                f"{where.line('seeds', section='variant', occurrence=v_index)}: a variant's "
                "seeds must be a non-empty list of integers"
            )
        resolved["seeds"] = list(variant_seeds)
        for seed in variant_seeds:
            runs.append(Run(str(variant["label"]), seed, resolved, paper))
    labels = [str(v["label"]) for v in variants]
    if len(set(map(_slug, labels))) != len(labels):
        raise ExperimentError(f"{where.line('label', section='variant')}: variant labels repeat")
    return config, runs


class _Locator:
    """Finds the line of a key in the file text (tomllib gives no positions)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line(self, key: str, section: str = "", occurrence: int = 0) -> str:
        current, seen = "", -1
        head = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-]+)\s*\]?\]")
        for number, raw in enumerate(self.lines, 1):
            match = head.match(raw)
            if match:
                current = match.group(1)
                if section and current == section:
                    seen += 1
                continue
            in_section = (not section) or (current == section and seen == occurrence)
            if in_section and re.match(rf"^\s*{re.escape(key)}\s*=", raw):
                return f"{self.path}:{number}"
            if section and re.search(rf"\b{re.escape(key)}\s*=", raw) and current == section:
                return f"{self.path}:{number}"
        for number, raw in enumerate(self.lines, 1):  # inline tables, variants
            if re.search(rf"\b{re.escape(key)}\s*=", raw):
                return f"{self.path}:{number}"
        for number, raw in enumerate(self.lines, 1):  # a [table] or [[array]] header
            if re.match(rf"^\s*\[\[?\s*{re.escape(key)}\s*\]", raw):
                return f"{self.path}:{number}"
        return f"{self.path}:1"


def _check_table(table: dict[str, Any], schema: dict[str, Any], prefix: str, where: Any) -> None:
    for key, value in table.items():
        if key not in schema:
            allowed = ", ".join(sorted(schema))
            raise ExperimentError(
                f"{where.line(key)}: unknown key '{_dotted(prefix, key)}' (allowed: {allowed})"
            )
        expected = schema[key]
        if isinstance(expected, dict):
            if not isinstance(value, dict):
                raise ExperimentError(
                    f"{where.line(key)}: '{_dotted(prefix, key)}' must be a table"
                )
            _check_table(value, expected, _dotted(prefix, key), where)
        elif not _is(value, expected):
            raise ExperimentError(
                f"{where.line(key)}: '{_dotted(prefix, key)}' must be {_type_name(expected)}, "
                f"got {value!r}"
            )
    for client in table.get("clients", []) if "clients" in schema else []:
        if not isinstance(client, dict):
            raise ExperimentError(f"{where.line('clients')}: every client must be a table")
        _check_table(client, CLIENT_KEYS, "clients", where)
        if "learner" not in client:
            raise ExperimentError(f"{where.line('clients')}: every client needs a learner")
    privacy = table.get("method", {}).get("privacy") if "method" in schema else None
    if privacy is not None:
        _check_table(privacy, PRIVACY_KEYS, "method.privacy", where)


def _check_semantics(config: dict[str, Any], where: Any, label: str) -> None:
    data, split, method = config["data"], config["split"], config["method"]
    context = f" (variant {label!r})"
    if ("dataset" in data) == ("path" in data):
        raise ExperimentError(
            f"{where.line('dataset')}: [data] needs exactly one of 'dataset' (one of "
            f"{', '.join(BUNDLED + SHARED)}) or 'path' (a CSV, NumPy or Parquet file){context}"
        )
    if "dataset" in data and data["dataset"] not in BUNDLED + SHARED:
        raise ExperimentError(
            f"{where.line('dataset')}: unknown dataset {data['dataset']!r}; bundled: "
            f"{', '.join(BUNDLED)}; from ../shared/data: {', '.join(SHARED)}{context}"
        )
    if (
        "path" in data
        and Path(data["path"]).suffix in (".csv", ".parquet")
        and "target" not in data
    ):
        raise ExperimentError(f"{where.line('path')}: a table file needs 'target'{context}")
    for key in ("n_clients", "n_public", "n_labeled", "n_test"):
        if key in split and split[key] < 1:
            raise ExperimentError(f"{where.line(key)}: split.{key} must be >= 1{context}")
    if "n_clients" not in split:
        raise ExperimentError(f"{where.line('split')}: split.n_clients is required{context}")
    partition = split.get("partition", "iid")
    if partition not in PARTITIONS:
        raise ExperimentError(
            f"{where.line('partition')}: unknown partition {partition!r} (one of "
            f"{', '.join(PARTITIONS)}){context}"
        )
    alpha = split.get("alpha")
    if partition == "dirichlet" and not isinstance(alpha, int | float):
        raise ExperimentError(f"{where.line('partition')}: dirichlet needs alpha = a number")
    if partition == "two_alpha" and not (isinstance(alpha, list) and len(alpha) == 2):
        raise ExperimentError(f"{where.line('partition')}: two_alpha needs alpha = [a1, a2]")
    if method.get("name") not in METHODS:
        raise ExperimentError(
            f"{where.line('name', section='method')}: method.name must be one of "
            f"{', '.join(METHODS)}, got {method.get('name')!r}{context}"
        )
    if method["name"] == "dp-fedct" and "privacy" not in method:
        raise ExperimentError(
            f"{where.line('name', section='method')}: dp-fedct needs [method.privacy]"
        )
    if method.get("rounds", 1) < 1:
        raise ExperimentError(f"{where.line('rounds')}: method.rounds must be >= 1{context}")
    total = sum(c.get("count", 1) for c in config["clients"])
    single = len(config["clients"]) == 1 and "count" not in config["clients"][0]
    if total != split["n_clients"] and not single:  # one learner without count: all clients
        at = "count" if any("count" in c for c in config["clients"]) else "clients"
        raise ExperimentError(
            f"{where.line(at)}: the clients' counts add up to {total} but "
            f"split.n_clients = {split['n_clients']}{context}"
        )
    for client in config["clients"]:
        try:
            make_learner(client["learner"], client.get("params", {}))
        except (ValueError, TypeError, ImportError) as err:
            raise ExperimentError(f"{where.line('learner')}: {err}{context}") from None


# ---------------------------------------------------------------- learners
def make_learner(name: str, params: dict[str, Any] | None = None) -> Any:
    """A learner from its short name (see :data:`LEARNERS`) or a dotted class path.

    Examples
    --------
    >>> make_learner("DT", {"max_depth": 3})
    DecisionTreeClassifier(max_depth=3)
    >>> make_learner("sklearn.naive_bayes.GaussianNB")
    GaussianNB()
    """
    import importlib

    params = dict(params or {})
    if name in LEARNERS:
        module_name, cls_name, defaults = LEARNERS[name]
        params = {**defaults, **params}
    elif "." in name:
        module_name, _, cls_name = name.rpartition(".")
    else:
        raise ValueError(f"unknown learner {name!r}: one of {', '.join(LEARNERS)} or a class path")
    try:
        cls = getattr(importlib.import_module(module_name), cls_name)
    except (ImportError, AttributeError) as err:
        raise ValueError(
            f"learner {name!r}: cannot import {module_name}.{cls_name}: {err}"
        ) from None
    try:
        return cls(**params)
    except TypeError as err:
        raise TypeError(f"learner {name!r}: bad params {params}: {err}") from None


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


# -------------------------------------------------------------------- data
def load_data(config: dict[str, Any], seed: int) -> Any:
    """The split for one run: ``X_labeled``, ``y_labeled``, ``X_public``, ``X_test``, …"""
    from cotrain import datasets

    data, split = config["data"], config["split"]
    sizes = {k: split[k] for k in ("n_public", "n_labeled", "n_test") if k in split}
    name = data.get("dataset")
    if name == "digits":
        out = datasets.load_digits_split(
            random_state=seed,
            n_test=sizes.get("n_test", 360),
            n_public=sizes.get("n_public", 700),
        )
        if "n_labeled" in sizes:
            keep = np.random.default_rng(seed).permutation(len(out.y_labeled))[: sizes["n_labeled"]]
            out.X_labeled, out.y_labeled = out.X_labeled[keep], out.y_labeled[keep]
        return out
    if name in ("breast_cancer", *SHARED):
        full = {**datasets.PAPER_SPLITS.get(name, {}), **sizes}
        return datasets.load_paper_split(
            name,
            data_home=data.get("data_home"),
            random_state=seed,
            standardize=data.get("standardize", True),
            sizes=full,
        )
    X, y = _read_table(Path(data["path"]), data.get("target"))
    missing = {"n_public", "n_labeled", "n_test"} - set(sizes)
    if missing:
        raise ExperimentError(f"a data file needs split sizes {sorted(missing)}")
    out = datasets.paper_split(X, y, random_state=seed, **sizes)
    if data.get("standardize", True):
        mean, std = out.X_public.mean(axis=0), out.X_public.std(axis=0)
        std[std == 0] = 1.0
        for part in ("X_labeled", "X_public", "X_test"):
            out[part] = (out[part] - mean) / std
    return out


def _read_table(path: Path, target: str | None) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    if not path.is_file():
        raise ExperimentError(f"data file {path} does not exist")
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as f:
            return f["X"], f["y"]
    if path.suffix == ".npy":
        arr = np.load(path, allow_pickle=False)
        return arr[:, :-1], arr[:, -1]
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    if target not in frame.columns:
        raise ExperimentError(f"{path} has no column {target!r} (columns: {list(frame.columns)})")
    y = frame.pop(target).to_numpy()
    X = pd.get_dummies(frame).to_numpy(dtype=np.float64)
    return X, y


def client_parts(config: dict[str, Any], y: np.ndarray, seed: int) -> list[np.ndarray]:
    """Indices of each client's rows of the labelled data."""
    from cotrain import partition

    split = config["split"]
    n, kind = split["n_clients"], split.get("partition", "iid")
    if kind == "dirichlet":
        return partition.dirichlet(y, n, alpha=float(split["alpha"]), random_state=seed)
    if kind == "two_alpha":
        a1, a2 = split["alpha"]
        return partition.two_alpha(y, n, float(a1), float(a2), random_state=seed)
    return partition.iid(y, n, random_state=seed)


def client_learners(config: dict[str, Any]) -> list[Any]:
    clients = config["clients"]
    if len(clients) == 1 and "count" not in clients[0]:
        clients = [{**clients[0], "count": config["split"]["n_clients"]}]
    return [
        make_learner(c["learner"], c.get("params", {}))
        for c in clients
        for _ in range(c.get("count", 1))
    ]


# --------------------------------------------------------------------- run
def run_one(run: Run, folder: Path) -> dict[str, Any]:
    """Fit one (variant, seed); write ``history.csv`` and ``result.json``; return the result."""
    import warnings

    from sklearn.base import clone

    from cotrain import FederatedCoTrainer
    from cotrain.baselines import (
        PATE,
        Centralised,
        DistributedDistillation,
        DPFedAvg,
        FedAvg,
        LocalOnly,
    )

    config, seed = run.config, run.seed
    folder.mkdir(parents=True, exist_ok=True)
    data = load_data(config, seed)
    parts = client_parts(config, data.y_labeled, seed)
    X = [data.X_labeled[p] for p in parts]
    y = [data.y_labeled[p] for p in parts]
    learners = client_learners(config)
    method = config["method"]
    name, rounds = method["name"], method.get("rounds", 10)
    common = {"rounds": rounds, "random_state": seed}
    eval_set = (data.X_test, data.y_test)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name in ("fedct", "dp-fedct"):
            consensus = method.get("consensus", "majority")
            if consensus in ("qualified", "qualified_majority") and "quorum" in method:
                from consensus import QualifiedMajority

                consensus = QualifiedMajority(quorum=float(method["quorum"]))
            model = FederatedCoTrainer(
                learners,
                consensus=consensus,
                share=method.get("share", "hard"),
                participation=float(method.get("participation", 1.0)),
                early_stopping=method.get("early_stopping"),
                privacy=_privacy(method.get("privacy")) if name == "dp-fedct" else None,
                checkpoint_dir=folder / "checkpoint" if _checkpointable(learners) else None,
                **common,
            )
            resume = (
                model.checkpoint_dir is not None and (folder / "checkpoint" / "LATEST").exists()
            )
            model.fit(
                X,
                y,
                X_public=data.X_public,
                eval_set=eval_set,
                y_public=data.get("y_public"),
                resume=resume,
            )
        elif name == "dd":
            model = DistributedDistillation(learners, **common)
            model.fit(
                X, y, X_public=data.X_public, eval_set=eval_set, y_public=data.get("y_public")
            )
        elif name == "fedavg":
            model = FedAvg(learners[0], local_epochs=method.get("local_epochs", 1), **common)
            model.fit(X, y, eval_set=eval_set)
        elif name == "dp-fedavg":
            model = DPFedAvg(
                learners[0],
                local_epochs=method.get("local_epochs", 1),
                clip_norm=float(method.get("clip_norm", 1.0)),
                noise_multiplier=float(method.get("noise_multiplier", 1.0)),
                **common,
            )
            model.fit(X, y, eval_set=eval_set)
        elif name == "pate":
            model = PATE(
                learners,
                clone(learners[0]),
                noise_sigma=float(method.get("noise_sigma", 1.0)),
                random_state=seed,
            )
            model.fit(X, y, X_public=data.X_public, eval_set=eval_set)
        elif name == "local":
            model = LocalOnly(learners, random_state=seed).fit(X, y, eval_set=eval_set)
        else:
            model = Centralised(learners[0], random_state=seed).fit(X, y, eval_set=eval_set)
    wall = time.perf_counter() - start
    last = model.history_[-1]
    # the model a method delivers: the clients' own models, or PATE's one student
    accuracy = last.consensus_accuracy if name == "pate" else last.mean_accuracy
    result = {
        "variant": run.variant,
        "seed": seed,
        "method": name,
        "accuracy": _num(accuracy),
        "consensus_accuracy": _num(last.consensus_accuracy),
        "rounds": len(model.history_),
        "wall_s": wall,
        "epsilon": _num(last.epsilon),
        "paper": run.paper,
        "config": run_fingerprint(run),
    }
    if method.get("audit"):
        from cotrain.audit import audit_clients, label_privatizer

        members = list(zip(X, y, strict=True))
        noise = {}
        if name == "dp-fedct":  # the server sees the randomised labels of every round
            noise = {
                "privatize": label_privatizer(model.privacy, model.classes_, seed),
                "n_releases": model.n_rounds_,
            }
        result["vul"] = float(audit_clients(model, members, eval_set, **noise).mean_auc)
    model.history_.to_frame().to_csv(folder / "history.csv")
    (folder / "result.json").write_text(json.dumps(result, indent=1))
    return result


def run_fingerprint(run: Run) -> str:
    """What a run's result depends on (data, split, method, clients, seed): editing the
    name, the description or adding seeds keeps finished runs when resuming."""
    parts = {k: run.config[k] for k in ("data", "split", "method", "clients")}
    return fingerprint(json.dumps(parts, sort_keys=True, default=str), run.seed)


def _checkpointable(learners: list[Any]) -> bool:
    """Whether every learner can be checkpointed (otherwise a run restarts when resumed)."""
    from cotrain.trainer import _NOT_CHECKPOINTABLE

    return not any(type(est).__name__ in _NOT_CHECKPOINTABLE for est in learners)


def _privacy(spec: dict[str, Any]) -> Any:
    from cotrain import privacy

    mechanisms = {"randomized_response": privacy.RandomizedResponse, "xor": privacy.XORMechanism}
    kind = spec.get("mechanism", "randomized_response")
    if kind not in mechanisms:
        raise ExperimentError(f"method.privacy.mechanism must be one of {sorted(mechanisms)}")
    params = {k: v for k, v in spec.items() if k != "mechanism"}
    return mechanisms[kind](**params)


def run_experiment(
    path: str | Path, out: str | Path | None = None, *, resume: bool = False, verbose: int = 1
) -> Path:
    """Run every (variant, seed) of an experiment file; returns the results folder.

    Parameters
    ----------
    path : str or Path
        The experiment file.
    out : str or Path, optional
        The results folder (default ``results/<name>``).
    resume : bool, default=False
        Keep finished runs and continue interrupted ones; without it an existing
        results folder with runs in it is refused.
    verbose : int, default=1
        0: silent; 1: a progress bar and one line per finished run.
    """
    from tqdm.auto import tqdm

    config, runs = load_experiment(path)
    folder = Path(out) if out is not None else Path("results") / config["name"]
    if (folder / "runs").exists() and not resume:
        raise ExperimentError(
            f"{folder} already holds runs: pass resume=True (--resume) to continue them, or "
            "choose another output folder"
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "experiment.toml").write_text(Path(path).read_text())
    results, started = [], time.perf_counter()
    bar = tqdm(runs, disable=verbose < 1, desc=config["name"], unit="run")
    for run in bar:
        run_dir = folder / "runs" / run.key
        done = run_dir / "result.json"
        if resume and done.exists():
            result = json.loads(done.read_text())
            if result.get("config") == run_fingerprint(run):
                results.append(result)
                continue
        result = run_one(run, run_dir)
        results.append(result)
        if verbose:
            bar.write(
                f"{run.variant} seed {run.seed}: accuracy {result['accuracy']:.3f}, "
                f"{result['wall_s']:.1f} s"
            )
    write_summary(folder, config, results, time.perf_counter() - started)
    return folder


def write_summary(folder: Path, config: dict[str, Any], results: list[dict], wall: float) -> None:
    """``summary.csv``, ``summary.md`` and ``accuracy.png`` of a results folder."""
    import pandas as pd

    frame = pd.DataFrame(results)
    order = list(dict.fromkeys(frame["variant"]))
    rows = []
    for variant in order:
        part = frame[frame["variant"] == variant]
        row = {
            "variant": variant,
            "method": part["method"].iloc[0],
            "seeds": len(part),
            "accuracy": part["accuracy"].mean(),
            "accuracy_std": part["accuracy"].std(ddof=0),
            "consensus_accuracy": part["consensus_accuracy"].mean(),
            "paper": part["paper"].iloc[0],
            "wall_s": part["wall_s"].sum(),
        }
        for extra in ("vul", "epsilon"):
            if extra in part and part[extra].notna().any():
                row[extra] = part[extra].mean()
        rows.append(row)
    summary = pd.DataFrame(rows)
    summary.to_csv(folder / "summary.csv", index=False)
    lines = [
        f"# {config['name']}",
        "",
        config.get("description", ""),
        "",
        f"seeds {config['seeds']}; total run time {wall:.0f} s",
        "",
        markdown_table(summary),
    ]
    (folder / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(folder, order)


def markdown_table(summary: Any) -> str:
    """Mean ± std accuracy per variant, with the paper's number and the gap."""
    has = {c for c in ("vul", "epsilon") if c in summary}
    head = "| variant | method | accuracy | consensus | paper | gap |"
    head += "".join(f" {c} |" for c in sorted(has)) + " time s (all seeds) |"
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for _, r in summary.iterrows():
        paper = r["paper"]
        has_paper = paper is not None and not (isinstance(paper, float) and np.isnan(paper))
        gap = f"{r['accuracy'] - paper:+.3f}" if has_paper else "—"
        cells = [
            str(r["variant"]).replace("|", "\\|"),
            str(r["method"]),
            f"{r['accuracy']:.3f} ± {r['accuracy_std']:.3f}",
            "—" if np.isnan(r["consensus_accuracy"]) else f"{r['consensus_accuracy']:.3f}",
            f"{paper:.3f}" if has_paper else "—",
            gap,
            *(f"{r[c]:.3f}" if not np.isnan(r[c]) else "—" for c in sorted(has)),
            f"{r['wall_s']:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plot(folder: Path, order: list[str]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import pandas as pd
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    colours = plt.get_cmap("tab20")
    for index, variant in enumerate(order):
        curves = [
            pd.read_csv(h)["mean_accuracy"].to_numpy(dtype=float)
            for h in sorted((folder / "runs" / _slug(variant)).glob("seed-*/history.csv"))
        ]
        length = min(len(c) for c in curves)
        if length > 1:
            mean = np.mean([c[:length] for c in curves], axis=0)
            style = ("-", "--", ":")[index // 20 % 3]  # 20 colours, then other line styles
            ax.plot(np.arange(1, length + 1), mean, style, color=colours(index % 20), label=variant)
    ax.set_xlabel("round")
    ax.set_ylabel("mean test accuracy of the clients")
    if ax.lines:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "accuracy.png", dpi=100)
    plt.close(fig)


def report(folders: list[str | Path]) -> str:
    """Several results folders side by side, as one Markdown document."""
    import pandas as pd

    parts = []
    for folder in map(Path, folders):
        summary_file = folder / "summary.csv"
        if not summary_file.is_file():
            raise ExperimentError(
                f"{folder} has no summary.csv: is it a `cotrain run` results folder?"
            )
        summary = pd.read_csv(summary_file)
        summary["paper"] = summary["paper"].astype(float)
        parts += [f"## {folder.name}", "", markdown_table(summary), ""]
    return "\n".join(parts)


# ----------------------------------------------------------------- helpers
def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def _is(value: Any, expected: Any) -> bool:
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _type_name(expected: Any) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    names = {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        list: "a list",
        dict: "a table",
    }
    return " or ".join(names.get(t, t.__name__) for t in types)


def _dotted(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or "run"


def _num(value: Any) -> float | None:
    return None if value is None else float(value)
