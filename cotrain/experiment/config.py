"""The schema of an experiment file and its validation, with ``file:line: reason`` errors.

:func:`load_experiment` reads a file, checks every key and type against :data:`SCHEMA`,
resolves each ``[[variant]]`` over the base configuration, checks what the values mean
(datasets, partitions, methods, learners, sizes) and returns one :class:`Run` per
(variant, seed). tomllib gives no positions, so a :class:`~cotrain.experiment.locate.Locator`
finds the line of the key an error is about. Nothing is written and nothing runs before
every variant has passed, including ``[[clients]]`` blocks that every variant overrides
(a warning says that no run uses them).
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotrain.experiment.data import BUNDLED, DATA_SUFFIXES, PARTITIONS, SHARED, check_split
from cotrain.experiment.errors import ExperimentError, ExperimentWarning, InvalidValue
from cotrain.experiment.learners import check_learner
from cotrain.experiment.locate import Locator
from cotrain.experiment.methods import (
    CERTAINTY_CONSENSUS,
    METHODS,
    QUALITY_CONSENSUS,
    check_method,
)
from cotrain.params import did_you_mean

__all__ = [
    "CERTAINTY_KEYS",
    "CLIENT_KEYS",
    "PRIVACY_KEYS",
    "SCHEMA",
    "Run",
    "load_experiment",
    "slug",
]

#: top-level keys and section keys with their types (a tuple: any of them)
SCHEMA: dict[str, Any] = {
    "name": str,
    "description": str,
    "paper_dataset": str,
    "seeds": list,
    "data": {
        "dataset": str,
        "path": str,
        "target": (str, int),
        "header": bool,
        "na_values": list,
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
        "power": (int, float),
        "quality_power": (int, float),
        "top_k": int,
        "certainty": dict,
        "trust": (str, int, float),
        "reproducible_noise": bool,
    },
    "clients": list,
    "variant": list,
}
#: the keys of one ``[[clients]]`` entry
CLIENT_KEYS = {"learner": str, "params": dict, "count": int}
#: the keys of ``[method.privacy]``
PRIVACY_KEYS = {
    "mechanism": str,
    "epsilon": (int, float),
    "sensitivity": (int, float),
    "unit": str,
    "n_teachers": int,
    "sigma": (int, float),
    "noise_multiplier": (int, float),
    "max_grad_norm": (int, float),
    "sampling_rate": (int, float),
    "steps": int,
    "delta": float,
}
#: the keys of ``[method.certainty]``: FedAUX certainty scorers fitted on each client's data
#: (``cotrain.privacy.fedaux.fedaux_weights``) for ``consensus = "quality"`` or ``"certainty"``
CERTAINTY_KEYS = {
    "lam": (int, float),
    "dp": bool,
    "epsilon": (int, float),
    "delta": float,
}


def slug(label: str) -> str:
    """A variant label as a folder name.

    Examples
    --------
    >>> slug("FedCT trees"), slug("5xDT (Table 3)"), slug("///")
    ('FedCT_trees', '5xDT_Table_3', 'run')
    """
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or "run"


@dataclass
class Run:
    """One (variant, seed) of an experiment, with its fully resolved configuration.

    Attributes
    ----------
    variant : str
        The label of its results row (a centralised variant over mixed clients becomes
        one row per learner: ``"<label> (<learner>)"``).
    seed : int
    config : dict
        The resolved configuration.
    paper : float, optional
        The paper's number for the row.
    origin : str, optional
        The ``[[variant]]`` label it comes from, where it differs from ``variant``.
    base : Path, optional
        The experiment file's folder: a relative ``[data] path`` is read from there.

    Examples
    --------
    >>> run = Run("FedCT trees", 3, {"method": {"name": "fedct"}}, paper=0.89)
    >>> run.key, run.group
    ('FedCT_trees/seed-3', 'FedCT trees')
    """

    variant: str
    seed: int
    config: dict[str, Any]
    paper: float | None = None
    origin: str | None = None
    base: Path | None = None

    @property
    def group(self) -> str:
        """The ``[[variant]]`` label this run comes from (what ``--variant`` selects)."""
        return self.origin or self.variant

    @property
    def key(self) -> str:
        """The run's folder below ``runs/``: ``<variant>/seed-<seed>``."""
        return f"{slug(self.variant)}/seed-{self.seed}"


def load_experiment(
    path: str | Path, *, check_data: bool = True
) -> tuple[dict[str, Any], list[Run]]:
    """Read and validate an experiment file; returns the config and its runs.

    Every value is checked before anything runs: keys and types, datasets, partitions,
    methods, consensus names and their parameters, privacy mechanisms, learners and
    their parameters (in every ``[[clients]]`` block, also one that every variant
    overrides: it warns with :class:`ExperimentWarning` that no run uses it) and the split
    sizes against the rows of the data.

    Parameters
    ----------
    path : str or Path
        The experiment file (TOML).
    check_data : bool, default=True
        Read the data to check the split sizes (a relative ``[data] path`` is read from
        the file's folder); False checks the file alone.

    Returns
    -------
    config : dict
        The file as read.
    runs : list of Run
        One per (variant, seed), in the file's order; a ``centralised`` variant whose
        clients use several learners gives one run per distinct learner.

    Raises
    ------
    ExperimentError
        ``path:line: reason`` for TOML syntax errors, unknown keys, wrong types, unknown
        datasets, learners, methods, consensus names or partitions, and sizes the data
        cannot give.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "exp.toml"
    >>> _ = path.write_text('''name = "tiny"
    ... seeds = [0, 1]
    ... [data]
    ... dataset = "digits"
    ... [split]
    ... n_clients = 3
    ... [method]
    ... name = "fedct"
    ... [[clients]]
    ... learner = "DT"
    ... ''')
    >>> config, runs = load_experiment(path)
    >>> [run.key for run in runs]
    ['tiny/seed-0', 'tiny/seed-1']
    >>> _ = path.write_text(path.read_text().replace('"fedct"', '"fedsgd"'))
    >>> try:
    ...     load_experiment(path)
    ... except ExperimentError as err:  # doctest: +ELLIPSIS
    ...     print(str(err).removeprefix(str(path)))
    :8: method.name must be one of ..., got 'fedsgd'; did you mean 'fedavg'? (variant 'tiny')
    """
    path = Path(path)
    if not path.is_file():
        raise ExperimentError(f"{path}: no such experiment file")
    text = path.read_text()
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ExperimentError(f"{path}: {err}") from None
    where = Locator(path, text)
    base = path.resolve().parent
    _check_table(config, SCHEMA, (), where)
    given = config.get("variant")
    everywhere = bool(given) and all(isinstance(v, dict) and "clients" in v for v in given)
    for key in ("name", "seeds", "data", "split", "method", "clients"):
        if key not in config and not (key == "clients" and everywhere):
            what = " (a [[clients]] block, or clients in every [[variant]])" * (key == "clients")
            raise ExperimentError(f"{path}:1: missing required key '{key}'{what}")
    seeds = config["seeds"]
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ExperimentError(f"{where.line('seeds')}: seeds must be a non-empty list of integers")
    variants = given if given else [{"label": config["name"]}]
    if "clients" in config:
        _check_clients(config["clients"], (), where, "")
    if everywhere and "clients" in config:
        warnings.warn(
            f"{where.line('clients', 0)}: every [[variant]] sets its own clients, so no run "
            "uses the top-level [[clients]] blocks (remove them)",
            ExperimentWarning,
            stacklevel=2,
        )
    runs: list[Run] = []
    checked: set[str] = set()  # (data, split) pairs already checked against the data
    announced: set[str] = set()  # data tables whose reading was announced (once each)
    seen_labels: dict[str, str] = {}  # the variants' labels so far, by folder name
    for v_index, variant in enumerate(variants):
        at = ("variant", v_index) if given else ()
        if not isinstance(variant, dict) or "label" not in variant:
            raise ExperimentError(f"{where.line(*at, 'label')}: every [[variant]] needs a label")
        for key in ("name", "description", "paper_dataset", "variant"):
            if key in variant:
                raise ExperimentError(
                    f"{where.line(*at, key)}: '{key}' cannot be set inside a [[variant]]"
                )
        label = str(variant["label"])
        if slug(label) in seen_labels:
            first = seen_labels[slug(label)]
            raise ExperimentError(
                f"{where.line(*at, 'label')}: variant label {label!r} repeats {first!r} (as a "
                f"folder name: {slug(label)!r}); every [[variant]] needs its own label"
            )
        seen_labels[slug(label)] = label
        context = f" (variant {label!r})"
        overrides = {k: v for k, v in variant.items() if k not in ("label", "paper", "seeds")}
        _check_table(overrides, SCHEMA, at, where, context)
        if "clients" in overrides:
            _check_clients(overrides["clients"], at, where, context)
        resolved = _merge(copy.deepcopy(config), overrides)
        resolved.pop("variant", None)
        try:
            _check_semantics(resolved)
            pair = json.dumps([resolved["data"], resolved["split"]], sort_keys=True)
            if check_data and pair not in checked:
                table = json.dumps(resolved["data"], sort_keys=True)
                check_split(resolved, base, announce=table not in announced)
                checked.add(pair)
                announced.add(table)
        except InvalidValue as err:
            keys = _origin(err.keys, variant, at)
            raise ExperimentError(f"{where.line(*keys)}: {err}{context}") from None
        variant_seeds = variant.get("seeds", seeds)  # e.g. fewer seeds for a slow learner
        if not variant_seeds or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in variant_seeds
        ):
            raise ExperimentError(
                f"{where.line(*at, 'seeds')}: a variant's seeds must be a non-empty list of "
                "integers"
            )
        resolved["seeds"] = list(variant_seeds)
        for row_label, row_config in _rows(label, resolved):
            origin = None if row_label == label else label
            for seed in variant_seeds:
                runs.append(Run(row_label, seed, row_config, variant.get("paper"), origin, base))
    labels = list(dict.fromkeys(run.variant for run in runs))
    if len(set(map(slug, labels))) != len(labels):
        raise ExperimentError(
            f"{where.line('variant', 0, 'label')}: variant labels repeat (as folder names: "
            f"{', '.join(map(slug, labels))})"
        )
    return config, runs


def _origin(keys: tuple[str | int, ...], variant: dict[str, Any], at: tuple) -> tuple:
    """Where a value of a resolved configuration is written: inside the variant where it
    overrides it, else at the top level."""
    if not at:
        return keys
    if keys[:1] == ("clients",):  # a variant's clients replace the whole list
        return at + keys if "clients" in variant else keys
    node: Any = variant
    for key in keys:
        if not (isinstance(node, dict) and key in node):
            return keys
        node = node[key]
    return at + keys


def _rows(label: str, config: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One results row per distinct learner of a centralized variant, else the variant."""
    clients = config["clients"]
    distinct = list(
        dict.fromkeys(
            json.dumps([c["learner"], c.get("params", {})], sort_keys=True) for c in clients
        )
    )
    if config["method"]["name"] != "centralized" or len(distinct) == 1:
        return [(label, config)]
    names = [json.loads(d)[0] for d in distinct]
    rows = []
    for entry, name in zip(distinct, names, strict=True):
        learner, params = json.loads(entry)
        shown = name.rpartition(".")[2]
        if names.count(name) > 1:  # the same learner with other parameters
            shown += " " + ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
        one = copy.deepcopy(config)
        client = {"learner": learner, "count": config["split"]["n_clients"]}
        one["clients"] = [client | ({"params": params} if params else {})]
        rows.append((f"{label} ({shown})", one))
    return rows


def _check_table(
    table: dict[str, Any],
    schema: dict[str, Any],
    prefix: tuple[str | int, ...],
    where: Locator,
    context: str = "",
) -> None:
    for key, value in table.items():
        name = _dotted(prefix, key)
        if key not in schema:
            allowed = ", ".join(sorted(schema))
            hint = did_you_mean(key, schema)
            raise ExperimentError(
                f"{where.line(*prefix, key)}: unknown key '{name}'{hint} (allowed: {allowed})"
                f"{context}"
            )
        expected = schema[key]
        if isinstance(expected, dict):
            if not isinstance(value, dict):
                raise ExperimentError(f"{where.line(*prefix, key)}: '{name}' must be a table")
            _check_table(value, expected, (*prefix, key), where, context)
        elif not _is(value, expected):
            raise ExperimentError(
                f"{where.line(*prefix, key)}: '{name}' must be {_type_name(expected)}, "
                f"got {value!r}{context}"
            )
    method = table.get("method", {}) if "method" in schema else {}
    for key, keys in (("privacy", PRIVACY_KEYS), ("certainty", CERTAINTY_KEYS)):
        if isinstance(method.get(key), dict):
            _check_table(method[key], keys, (*prefix, "method", key), where, context)


def _check_clients(
    clients: Any, prefix: tuple[str | int, ...], where: Locator, context: str
) -> None:
    """Keys, types, learner names and parameters of a list of [[clients]] blocks."""
    if not isinstance(clients, list) or not clients:
        raise ExperimentError(f"{where.line(*prefix, 'clients')}: clients must be a list of tables")
    for index, client in enumerate(clients):
        at = (*prefix, "clients", index)
        if not isinstance(client, dict):
            raise ExperimentError(f"{where.line(*at)}: every client must be a table{context}")
        _check_table(client, CLIENT_KEYS, at, where, context)
        if "learner" not in client:
            raise ExperimentError(f"{where.line(*at)}: every client needs a learner{context}")
        if client.get("count", 1) < 1:
            raise ExperimentError(f"{where.line(*at, 'count')}: count must be >= 1{context}")
        try:
            check_learner(client["learner"], client.get("params", {}))
        except (ValueError, TypeError, ImportError) as err:
            key = "params" if isinstance(err, TypeError) or "param" in str(err) else "learner"
            key = key if key in client else "learner"
            raise ExperimentError(f"{where.line(*at, key)}: {err}{context}") from None


def _check_semantics(config: dict[str, Any]) -> None:
    """What the values of a resolved configuration mean (the data itself is not read)."""
    data, split, method = config["data"], config["split"], config["method"]
    if ("dataset" in data) == ("path" in data):
        raise InvalidValue(
            ("data", "dataset" if "dataset" in data else "path"),
            f"[data] needs exactly one of 'dataset' (one of {', '.join(BUNDLED + SHARED)}) "
            "or 'path' (a CSV, NumPy or Parquet file)",
        )
    if "dataset" in data and data["dataset"] not in BUNDLED + SHARED:
        raise InvalidValue(
            ("data", "dataset"),
            f"unknown dataset {data['dataset']!r}{did_you_mean(data['dataset'], BUNDLED + SHARED)}"
            f"; bundled: {', '.join(BUNDLED)}; from ../shared/data: {', '.join(SHARED)}",
        )
    suffix = Path(data.get("path", "")).suffix
    if "path" in data and suffix not in DATA_SUFFIXES:
        raise InvalidValue(
            ("data", "path"),
            f"data file {data['path']!r}: the file is read by its extension, one of "
            f"{', '.join(DATA_SUFFIXES)}; got {suffix or 'none'!r}",
        )
    if "path" in data and suffix in (".csv", ".parquet") and "target" not in data:
        raise InvalidValue(("data", "path"), "a table file needs 'target' (a column)")
    if "header" in data and suffix != ".csv":
        raise InvalidValue(("data", "header"), "header applies to a CSV file ([data] path)")
    if "na_values" in data and suffix != ".csv":
        raise InvalidValue(("data", "na_values"), "na_values applies to a CSV file ([data] path)")
    if "na_values" in data and not all(isinstance(v, str) for v in data["na_values"]):
        raise InvalidValue(
            ("data", "na_values"),
            f"na_values must be a list of strings (the cells that mean missing, e.g. "
            f'["?"]), got {data["na_values"]!r}',
        )
    if data.get("header") is False and not isinstance(data.get("target"), int):
        raise InvalidValue(
            ("data", "target"),
            "with header = false, target is a column index (0 = first column, -1 = last), "
            f"got {data.get('target')!r}",
        )
    for key in ("n_clients", "n_public", "n_labeled", "n_test"):
        if key in split and split[key] < 1:
            raise InvalidValue(("split", key), f"split.{key} must be >= 1")
    if "n_clients" not in split:
        raise InvalidValue(("split",), "split.n_clients is required")
    partition = split.get("partition", "iid")
    if partition not in PARTITIONS:
        raise InvalidValue(
            ("split", "partition"),
            f"unknown partition {partition!r}{did_you_mean(partition, PARTITIONS)} (one of "
            f"{', '.join(PARTITIONS)})",
        )
    alpha = split.get("alpha")
    if partition == "dirichlet" and not isinstance(alpha, int | float):
        raise InvalidValue(("split", "partition"), "dirichlet needs alpha = a number")
    if partition == "two_alpha" and not (isinstance(alpha, list) and len(alpha) == 2):
        raise InvalidValue(("split", "partition"), "two_alpha needs alpha = [a1, a2]")
    name = method.get("name")
    if name not in METHODS:
        raise InvalidValue(
            ("method", "name"),
            f"method.name must be one of {', '.join(METHODS)}, got {name!r}"
            f"{did_you_mean(str(name), METHODS)}",
        )
    for key in METHODS[name].requires:
        if key not in method:
            raise InvalidValue(("method", "name"), f"{name} needs [method.{key}]")
    consensus = method.get("consensus", "majority")
    for key in ("power", "quality_power", "top_k"):
        if key in method and consensus not in QUALITY_CONSENSUS:
            raise InvalidValue(("method", key), f'method.{key} needs consensus = "quality"')
    if "certainty" in method and consensus not in CERTAINTY_CONSENSUS:
        raise InvalidValue(
            ("method", "certainty"),
            '[method.certainty] needs consensus = "quality" or "certainty"',
        )
    if consensus in CERTAINTY_CONSENSUS and consensus not in QUALITY_CONSENSUS:
        if "certainty" not in method:
            raise InvalidValue(
                ("method", "consensus"),
                f"consensus = {consensus!r} needs [method.certainty] (its clients' certainty "
                "scores)",
            )
    if method.get("rounds", 1) < 1:
        raise InvalidValue(("method", "rounds"), "method.rounds must be >= 1")
    clients = config["clients"]
    total = sum(c.get("count", 1) for c in clients)
    single = len(clients) == 1 and "count" not in clients[0]
    if total != split["n_clients"] and not single:  # one learner without count: all clients
        at = next((i for i, c in enumerate(clients) if "count" in c), None)
        raise InvalidValue(
            ("clients", 0) if at is None else ("clients", at, "count"),
            f"the clients' counts add up to {total} but split.n_clients = {split['n_clients']}",
        )
    check_method(method, split["n_clients"])


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


def _dotted(prefix: tuple[str | int, ...], key: str) -> str:
    if prefix[:1] == ("variant",):  # a variant's override names the key it overrides
        prefix = prefix[2:]
    return ".".join([str(k) for k in prefix if isinstance(k, str)] + [key])
