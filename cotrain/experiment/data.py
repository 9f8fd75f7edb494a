"""The data of one run: the dataset, its split, and the clients' shares of the labelled rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cotrain.experiment.errors import ExperimentError

__all__ = ["BUNDLED", "PARTITIONS", "SHARED", "client_parts", "load_data"]

#: datasets that come with scikit-learn
BUNDLED = ("breast_cancer", "digits")
#: datasets read from ``../shared/data`` (or ``data_home``)
SHARED = ("wine_quality", "adult")
#: how the labelled rows are shared out among the clients
PARTITIONS = ("iid", "dirichlet", "two_alpha")


def load_data(config: dict[str, Any], seed: int) -> Any:
    """The split for one run: ``X_labeled``, ``y_labeled``, ``X_public``, ``X_test``, …

    Parameters
    ----------
    config : dict
        A resolved configuration (its ``data`` and ``split`` tables are read).
    seed : int
        The run's seed: which rows go where.

    Returns
    -------
    Bunch
        ``X_labeled``, ``y_labeled``, ``X_public``, ``X_test``, ``y_test`` (and
        ``y_public`` where known).

    Raises
    ------
    ExperimentError
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
