"""The data of one run: the dataset, its split, and the clients' shares of the labelled rows."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.experiment.errors import InvalidValue

__all__ = [
    "BUNDLED",
    "PARTITIONS",
    "SHARED",
    "check_split",
    "client_parts",
    "data_path",
    "dataset_rows",
    "load_data",
]

#: datasets that come with scikit-learn
BUNDLED = ("breast_cancer", "digits")
#: datasets read from ``../shared/data`` (or ``data_home``)
SHARED = ("wine_quality", "adult")
#: how the labelled rows are shared out among the clients
PARTITIONS = ("iid", "dirichlet", "two_alpha")
#: rows of the bundled datasets
BUNDLED_ROWS = {"breast_cancer": 569, "digits": 1797}
#: the split of digits when a size is not given (the labelled rows are the rest)
DIGITS_DEFAULTS = {"n_test": 360, "n_public": 700}


def data_path(data: dict[str, Any], base: str | Path | None = None) -> Path:
    """The file of ``[data] path``: a relative path is read from ``base``, the experiment
    file's folder (not the current directory).

    Examples
    --------
    >>> data_path({"path": "mine.csv"}, "/exp").as_posix()
    '/exp/mine.csv'
    >>> data_path({"path": "/data/mine.csv"}, "/exp").as_posix()
    '/data/mine.csv'
    """
    path = Path(data["path"]).expanduser()
    return path if path.is_absolute() or base is None else Path(base) / path


def dataset_rows(data: dict[str, Any], base: str | Path | None = None) -> int:
    """How many rows the dataset of a ``[data]`` table has (reading the file once).

    Raises
    ------
    InvalidValue
        A data file that is missing (the message names the path tried), without the
        target column, or a shared dataset whose folder is not found.

    Examples
    --------
    >>> dataset_rows({"dataset": "digits"}), dataset_rows({"dataset": "breast_cancer"})
    (1797, 569)
    """
    name = data.get("dataset")
    if name in BUNDLED_ROWS:
        return BUNDLED_ROWS[name]
    if name is not None:
        try:
            return _shared_rows(name, data.get("data_home"))
        except (FileNotFoundError, ValueError) as err:
            keys = ("data", "data_home" if "data_home" in data else "dataset")
            raise InvalidValue(keys, f"dataset {name!r}: {err}") from None
    X, _ = _read_table(data_path(data, base), data.get("target"), data.get("header", True))
    return len(X)


@lru_cache(maxsize=4)
def _shared_rows(name: str, home: str | None) -> int:
    from cotrain import datasets

    if name == "wine_quality":
        return len(datasets.load_wine_quality(home, target="color")[1])
    return len(datasets.load_adult(home)[1])


def load_data(config: dict[str, Any], seed: int, base: str | Path | None = None) -> Any:
    """The split for one run: ``X_labeled``, ``y_labeled``, ``X_public``, ``X_test``, …

    Parameters
    ----------
    config : dict
        A resolved configuration (its ``data`` and ``split`` tables are read).
    seed : int
        The run's seed: which rows go where.
    base : str or Path, optional
        The experiment file's folder: a relative ``[data] path`` is read from there.

    Returns
    -------
    Bunch
        ``X_labeled``, ``y_labeled``, ``X_public``, ``X_test``, ``y_test`` (and
        ``y_public`` where known).

    Raises
    ------
    InvalidValue
        A data file that does not exist or lacks the target column, or a data file
        without all three split sizes.

    Examples
    --------
    >>> config = {"data": {"dataset": "digits"},
    ...           "split": {"n_public": 500, "n_labeled": 100, "n_test": 300}}
    >>> data = load_data(config, seed=0)
    >>> data.X_labeled.shape, data.X_public.shape, data.X_test.shape
    ((100, 64), (500, 64), (300, 64))
    """
    from cotrain import datasets

    data, split = config["data"], config["split"]
    sizes = {k: split[k] for k in ("n_public", "n_labeled", "n_test") if k in split}
    name = data.get("dataset")
    if name == "digits":
        out = datasets.load_digits_split(
            random_state=seed,
            n_test=sizes.get("n_test", DIGITS_DEFAULTS["n_test"]),
            n_public=sizes.get("n_public", DIGITS_DEFAULTS["n_public"]),
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
    X, y = _read_table(data_path(data, base), data.get("target"), data.get("header", True))
    missing = {"n_public", "n_labeled", "n_test"} - set(sizes)
    if missing:
        raise InvalidValue(("split",), f"a data file needs split sizes {sorted(missing)}")
    out = datasets.paper_split(X, y, random_state=seed, **sizes)
    if data.get("standardize", True):
        mean, std = out.X_public.mean(axis=0), out.X_public.std(axis=0)
        std[std == 0] = 1.0
        for part in ("X_labeled", "X_public", "X_test"):
            out[part] = (out[part] - mean) / std
    return out


def _read_table(
    path: Path, target: str | int | None, header: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    if not path.is_file():
        raise InvalidValue(
            ("data", "path"),
            f"data file not found: looked for {path.resolve()} (a relative path is read "
            "from the experiment file's folder)",
        )
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as f:
            return f["X"], f["y"]
    if path.suffix == ".npy":
        arr = np.load(path, allow_pickle=False)
        return arr[:, :-1], arr[:, -1]
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        frame = pd.read_csv(path, header=0 if header else None)
    if isinstance(target, int):
        n = frame.shape[1]
        if not -n <= target < n:
            raise InvalidValue(
                ("data", "target"),
                f"target = {target} but {path} has {n} columns (0 to {n - 1}, or -1 for the last)",
            )
        target = frame.columns[target]
    elif target not in frame.columns:
        raise InvalidValue(
            ("data", "target"),
            f"{path} has no column {target!r} (columns: {list(frame.columns)}); a file "
            "without a header row needs header = false and target = a column index",
        )
    y = frame.pop(target).to_numpy()
    X = pd.get_dummies(frame).to_numpy(dtype=np.float64)
    return X, y


def check_split(config: dict[str, Any], base: str | Path | None = None) -> None:
    """Check the split sizes of a resolved configuration against the rows of its data.

    Raises
    ------
    InvalidValue
        Sizes that add up to more rows than the dataset has (or leave no labelled rows),
        a data file without all three sizes, or more clients than labelled rows.

    Examples
    --------
    >>> check_split({"data": {"dataset": "breast_cancer"},
    ...              "split": {"n_public": 370, "n_clients": 5}})
    >>> try:
    ...     check_split({"data": {"dataset": "breast_cancer"},
    ...                  "split": {"n_public": 5000, "n_clients": 5}})
    ... except InvalidValue as err:
    ...     print(err.keys, str(err)[:60])
    ('split', 'n_public') split.n_public = 5000 + n_labeled = 85 + n_test = 114 = 5199
    """
    from cotrain.datasets.loaders import PAPER_SPLITS

    data, split = config["data"], config["split"]
    keys = ("n_public", "n_labeled", "n_test")
    given = {k: split[k] for k in keys if k in split}
    n = dataset_rows(data, base)
    what = f"{data['dataset']!r}" if "dataset" in data else str(data["path"])
    if "path" in data and len(given) < 3:
        missing = [f"split.{k}" for k in keys if k not in given]
        raise InvalidValue(("split",), f"a data file needs {', '.join(missing)}")
    if data.get("dataset") == "digits":
        sizes = {**DIGITS_DEFAULTS, **given}
        sizes.setdefault("n_labeled", n - sizes["n_test"] - sizes["n_public"])
    elif "dataset" in data:
        sizes = {**PAPER_SPLITS[data["dataset"]], **given}
        if not given:  # the paper's sizes; the library shrinks n_labeled (documented)
            return _check_clients(
                split, min(sizes["n_labeled"], n - sizes["n_public"] - sizes["n_test"])
            )
    else:
        sizes = given
    total = sum(sizes[k] for k in keys)
    if total > n or sizes["n_labeled"] < 1:
        blame = max(given, key=given.get) if given else "n_public"
        terms = " + ".join(f"{k} = {sizes[k]}" for k in keys)
        raise InvalidValue(
            ("split", blame),
            f"split.{terms} = {total}, but the data ({what}) has {n} rows",
        )
    _check_clients(split, sizes["n_labeled"])


def _check_clients(split: dict[str, Any], n_labeled: int) -> None:
    if split["n_clients"] > n_labeled:
        raise InvalidValue(
            ("split", "n_clients"),
            f"split.n_clients = {split['n_clients']} clients but only {n_labeled} labelled rows",
        )


def client_parts(config: dict[str, Any], y: np.ndarray, seed: int) -> list[np.ndarray]:
    """Indices of each client's rows of the labelled data.

    ``split.partition`` (one of :data:`PARTITIONS`, default ``"iid"``) and ``split.alpha``
    say how; ``split.n_clients`` how many.

    Examples
    --------
    >>> y = np.repeat([0, 1], 10)
    >>> parts = client_parts({"split": {"n_clients": 4}}, y, seed=0)
    >>> [len(p) for p in parts], sorted(np.concatenate(parts).tolist()) == list(range(20))
    ([5, 5, 5, 5], True)
    """
    from cotrain import partition

    split = config["split"]
    n, kind = split["n_clients"], split.get("partition", "iid")
    if kind == "dirichlet":
        return partition.dirichlet(y, n, alpha=float(split["alpha"]), random_state=seed)
    if kind == "two_alpha":
        a1, a2 = split["alpha"]
        return partition.two_alpha(y, n, float(a1), float(a2), random_state=seed)
    return partition.iid(y, n, random_state=seed)
