"""The schema of an experiment file and its validation, with ``file:line: reason`` errors.

:func:`load_experiment` reads a file, checks every key and type against :data:`SCHEMA`,
resolves each ``[[variant]]`` over the base configuration, checks what the values mean
(datasets, partitions, methods, learners, sizes) and returns one :class:`Run` per
(variant, seed). tomllib gives no positions, so a locator finds the line of the key an
error is about.
"""

from __future__ import annotations

import copy
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotrain.experiment.data import BUNDLED, PARTITIONS, SHARED
from cotrain.experiment.errors import ExperimentError
from cotrain.experiment.learners import make_learner
from cotrain.experiment.methods import CERTAINTY_CONSENSUS, METHODS, QUALITY_CONSENSUS

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
        "power": (int, float),
        "quality_power": (int, float),
        "top_k": int,
        "certainty": dict,
        "trust": (str, int, float),
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

    Examples
    --------
    >>> run = Run("FedCT trees", 3, {"method": {"name": "fedct"}}, paper=0.89)
    >>> run.key
    'FedCT_trees/seed-3'
    """

    variant: str
    seed: int
    config: dict[str, Any]
    paper: float | None = None

    @property
    def key(self) -> str:
        """The run's folder below ``runs/``: ``<variant>/seed-<seed>``."""
        return f"{slug(self.variant)}/seed-{self.seed}"


def load_experiment(path: str | Path) -> tuple[dict[str, Any], list[Run]]:
    """Read and validate an experiment file; returns the config and its runs.

    Parameters
    ----------
    path : str or Path
        The experiment file (TOML).

    Returns
    -------
    config : dict
        The file as read.
    runs : list of Run
        One per (variant, seed), in the file's order.

    Raises
    ------
    ExperimentError
        ``path:line: reason`` for TOML syntax errors, unknown keys, wrong types, unknown
        datasets, learners, methods or partitions, and inconsistent sizes.

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
    :8: method.name must be one of fedct, dp-fedct, ..., got 'fedsgd' (variant 'tiny')
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
    if len(set(map(slug, labels))) != len(labels):
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


def _check_table(
    table: dict[str, Any], schema: dict[str, Any], prefix: str, where: _Locator
) -> None:
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
    certainty = table.get("method", {}).get("certainty") if "method" in schema else None
    if certainty is not None:
        _check_table(certainty, CERTAINTY_KEYS, "method.certainty", where)


def _check_semantics(config: dict[str, Any], where: _Locator, label: str) -> None:
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
    name = method.get("name")
    if name not in METHODS:
        raise ExperimentError(
            f"{where.line('name', section='method')}: method.name must be one of "
            f"{', '.join(METHODS)}, got {name!r}{context}"
        )
    for key in METHODS[name].requires:
        if key not in method:
            raise ExperimentError(
                f"{where.line('name', section='method')}: {name} needs [method.{key}]"
            )
    consensus = method.get("consensus", "majority")
    for key in ("power", "quality_power", "top_k"):
        if key in method and consensus not in QUALITY_CONSENSUS:
            raise ExperimentError(
                f'{where.line(key)}: method.{key} needs consensus = "quality"{context}'
            )
    if "certainty" in method and consensus not in CERTAINTY_CONSENSUS:
        raise ExperimentError(
            f'{where.line("certainty")}: [method.certainty] needs consensus = "quality" or '
            f'"certainty"{context}'
        )
    if consensus in CERTAINTY_CONSENSUS and consensus not in QUALITY_CONSENSUS:
        if "certainty" not in method:
            raise ExperimentError(
                f"{where.line('consensus')}: consensus = {consensus!r} needs [method.certainty] "
                f"(its clients' certainty scores){context}"
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
