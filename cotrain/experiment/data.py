"""The data of one run: the dataset, its split, and the clients' shares of the labelled rows."""

from __future__ import annotations

import csv
import json
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.experiment.errors import ExperimentWarning, InvalidValue
from cotrain.params import did_you_mean

__all__ = [
    "BUNDLED",
    "PARTITIONS",
    "SHARED",
    "check_split",
    "client_parts",
    "data_path",
    "dataset_rows",
    "detect_header",
    "load_data",
    "read_table",
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
#: the data files ``[data] path`` reads, by suffix
DATA_SUFFIXES = (".csv", ".npz", ".npy", ".parquet")


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


def dataset_rows(
    data: dict[str, Any], base: str | Path | None = None, *, announce: bool = False
) -> int:
    """How many rows the dataset of a ``[data]`` table has (reading the file once).

    With ``announce``, a data file's reading is announced as :func:`read_table` says
    (the header row assumed where ``header`` is not stated, the one-hot encoded columns).

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
    X, _ = read_table(
        data_path(data, base),
        data.get("target"),
        data.get("header"),
        announce=announce,
        na_values=data.get("na_values"),
    )
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
    X, y = read_table(
        data_path(data, base),
        data.get("target"),
        data.get("header"),
        na_values=data.get("na_values"),
    )
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


def read_table(
    path: Path,
    target: str | int | None,
    header: bool | None = None,
    *,
    announce: bool = False,
    na_values: list[str] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The features and labels of a data file (``[data] path``): CSV, Parquet, NumPy.

    **CSV header row.** ``header = true`` under ``[data]`` reads the first row as the column
    names, ``header = false`` as data (the columns are then numbered from 0, and ``target``
    is a column index: 0 the first, -1 the last). Where ``header`` is not stated, it is
    detected (:func:`detect_header`): the first row is taken for column names when it
    holds text in a column whose other rows are numbers, and for data when it is numbers
    wherever the rows below are; when no column holds numbers, :class:`csv.Sniffer`
    guesses. Either way a warning (``cotrain run: warning: ...``) says which was assumed
    and how to state it, since a wrong guess silently loses the first row or turns
    names into a data row. A stated ``header`` is used as stated, with a warning when the
    detection contradicts it on the evidence of a numeric column (not on a guess): ``header
    = false`` on a file whose first row names numeric columns would one-hot encode them all.

    **Non-numeric columns.** A feature column that holds text (or categories) is one-hot
    encoded: one indicator column (0 or 1) per distinct value, named
    ``<column>_<value>``, and a missing value gives a row of zeros; numeric columns are
    used as they are. With ``announce``, a warning names every encoded column with its
    number of values, and the number of indicator columns they became (a column with
    about one value per row is likely an identifier: drop it from the file). The target
    column is never encoded: its values, text or numbers, are the class labels. Like every
    feature, indicator columns are then standardised with the public pool's mean and
    standard deviation unless ``standardize = false``.

    **NumPy files.** A ``.npz`` holds arrays ``X`` and ``y``; a ``.npy`` holds one array
    whose last column is the label.

    Parameters
    ----------
    path : Path
        The data file.
    target : str or int
        The label column: its name, or its index (0 = first, -1 = last).
    header : bool, optional
        Whether a CSV's first row names the columns; None detects it, with a warning.
    announce : bool, default=False
        Warn (:class:`~cotrain.experiment.ExperimentWarning`) about the one-hot encoded
        columns and the missing-value markers found. The header warning is given only
        with ``announce`` too (``cotrain run`` announces once, when it checks the file, not
        again for every run).
    na_values : list of str, optional
        The strings that mark a missing value in a CSV (``[data] na_values``, pandas'
        ``na_values``, besides pandas' own such as an empty cell or ``NA``): read as NaN.

    Returns
    -------
    X : ndarray of float64
    y : ndarray

    Raises
    ------
    InvalidValue
        A missing or unreadable file, or a target that is not a column of it.

    Examples
    --------
    >>> import tempfile, warnings
    >>> path = Path(tempfile.mkdtemp()) / "pets.csv"
    >>> _ = path.write_text("weight,colour,kind\\n4.1,red,cat\\n30.5,black,dog\\n"
    ...                     "3.9,black,cat\\n")
    >>> with warnings.catch_warnings(record=True) as said:
    ...     warnings.simplefilter("always")
    ...     X, y = read_table(path, "kind", announce=True)
    >>> X.tolist(), y.tolist()
    ([[4.1, 0.0, 1.0], [30.5, 1.0, 0.0], [3.9, 1.0, 0.0]], ['cat', 'dog', 'cat'])
    >>> for w in said:  # doctest: +ELLIPSIS
    ...     print(str(w.message).replace(str(path), "pets.csv"))
    pets.csv: header not stated: the first row (weight, colour, kind) is read as the column...
    pets.csv: 1 non-numeric feature column one-hot encoded into 2 indicator columns: ...
    """
    import pandas as pd

    if path.is_dir():
        raise InvalidValue(("data", "path"), f"{path} is a folder, not a data file")
    if not path.is_file():
        raise InvalidValue(
            ("data", "path"),
            f"data file not found: looked for {path.resolve()} (a relative path is read "
            "from the experiment file's folder)",
        )
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as f:
                return f["X"], f["y"]
        if path.suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
            return arr[:, :-1], arr[:, -1]
        if path.suffix == ".parquet":
            frame = pd.read_parquet(path)
        else:
            if header is None:
                header, because = detect_header(path)
                if not header and isinstance(target, str):
                    raise InvalidValue(
                        ("data", "target"),
                        f"{path}: header not stated, and {because}; so it has no column "
                        f"{target!r}: a file without a header row needs header = false and "
                        "target = a column index (header = true if its first row names the "
                        "columns)",
                    )
                if announce:
                    warnings.warn(_header_note(path, header, because), ExperimentWarning, 2)
            elif announce:
                detected, because = detect_header(path)
                if detected != header and "a guess" not in because:
                    warnings.warn(_stated_header_note(path, header, because), ExperimentWarning, 2)
            # spaces after a separator are skipped: UCI files write "39, State-gov, ?"
            frame = pd.read_csv(
                path, header=0 if header else None, na_values=na_values, skipinitialspace=True
            )
    except InvalidValue:
        raise
    except (KeyError, ValueError, OSError, UnicodeDecodeError) as err:
        what = {".npz": "a .npz with arrays X and y", ".npy": "a 2-D .npy"}.get(
            path.suffix, f"a {path.suffix.lstrip('.').upper() or 'CSV'} table"
        )
        raise InvalidValue(
            ("data", "path"), f"cannot read {path} as {what}: {type(err).__name__}: {err}"
        ) from None
    if isinstance(target, int):
        n = frame.shape[1]
        if not -n <= target < n:
            raise InvalidValue(
                ("data", "target"),
                f"target = {target} but {path} has {n} columns (0 to {n - 1}, or -1 for the last)",
            )
        target = frame.columns[target]
    elif target not in frame.columns:
        hint = did_you_mean(str(target), [str(c) for c in frame.columns])
        raise InvalidValue(
            ("data", "target"),
            f"{path} has no column {target!r}{hint} (columns: {list(frame.columns)}); a file "
            "without a header row needs header = false and target = a column index",
        )
    y = frame.pop(target).to_numpy()
    markers = numbers_with_markers(frame)
    if markers and announce:
        warnings.warn(_marker_note(path, markers), ExperimentWarning, stacklevel=2)
    encoded = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    X = pd.get_dummies(frame).to_numpy(dtype=np.float64)
    if encoded and announce:
        warnings.warn(_encoding_note(path, frame, encoded), ExperimentWarning, stacklevel=2)
    return X, y


#: at most this many distinct non-numeric strings, in at most this share of a column's
#: filled cells, make a column numbers with missing-value markers rather than categories
MARKERS, MARKER_SHARE = 3, 0.2


def numbers_with_markers(frame: Any) -> dict[Any, tuple[list[str], int]]:
    """Read, in place, each text column of ``frame`` that holds numbers but for a few
    markers (at most :data:`MARKERS` distinct strings in at most :data:`MARKER_SHARE` of
    its filled cells, such as ``?`` or ``-``) as numbers, its markers as NaN: a numeric
    column is never one-hot encoded because a few cells say "unknown". Returns, per such
    column, its markers and how many cells held them.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"pulse": ["72", "?", "88", "64", "90", "70"],
    ...                       "colour": ["red", "blue", "red", "red", "blue", "red"]})
    >>> numbers_with_markers(frame)
    {'pulse': (['?'], 1)}
    >>> frame["pulse"].tolist(), frame["colour"].tolist()[:2]
    ([72.0, nan, 88.0, 64.0, 90.0, 70.0], ['red', 'blue'])
    """
    import pandas as pd

    found = {}
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_numeric_dtype(values) or values.dtype == bool:
            continue
        text = values.astype("string").str.strip()
        numbers = pd.to_numeric(text, errors="coerce")
        marked = values.notna() & numbers.isna()
        filled = int(values.notna().sum())
        tokens = sorted(set(text[marked].astype(str)))
        few = len(tokens) <= MARKERS and marked.sum() <= MARKER_SHARE * filled
        if few and numbers.notna().any():
            frame[column] = numbers.astype("float64")
            if marked.any():
                found[column] = (tokens, int(marked.sum()))
    return found


def _marker_note(path: Path, markers: dict[Any, tuple[list[str], int]]) -> str:
    """What :func:`read_table` says about the missing-value markers it read as NaN."""
    parts = [f"{column!r}" if isinstance(column, str) else f"column {column}" for column in markers]
    cells = [
        f"{name} ({n} × {', '.join(map(repr, tokens))})"
        for name, (tokens, n) in zip(parts, markers.values(), strict=True)
    ]
    every = sorted({t for tokens, _ in markers.values() for t in tokens})
    return (
        f"{path}: {len(markers)} numeric column{'s' * (len(markers) > 1)} read with "
        f"missing-value markers as NaN: {', '.join(cells)}; write na_values = "
        f"{json.dumps(every)} under [data] to "
        "say so (a learner that cannot take NaN needs an imputer)"
    )


def _encoding_note(path: Path, frame: Any, encoded: list[Any]) -> str:
    """What :func:`read_table` says about the non-numeric columns it one-hot encoded."""
    values = {c: int(frame[c].nunique()) for c in encoded}
    names = [f"{c!r}" if isinstance(c, str) else f"column {c}" for c in encoded]
    parts = [f"{name} ({values[c]} values)" for name, c in zip(names, encoded, strict=True)]
    many = max(20, len(frame) // 2)  # about one value per row: an identifier?
    ids = [name for name, c in zip(names, encoded, strict=True) if values[c] > many]
    kept = frame.shape[1] - len(encoded)
    note = (
        f"{path}: {len(encoded)} non-numeric feature column{'s' * (len(encoded) > 1)} one-hot "
        f"encoded into {sum(values.values())} indicator columns: {', '.join(parts)}; "
        f"{kept} numeric column{'s' * (kept != 1)} used unchanged"
    )
    if ids:
        note += (
            f" ({', '.join(ids)}: about one value per row, an identifier? drop it from the file)"
        )
    return note


def _header_note(path: Path, header: bool, because: str) -> str:
    """The warning of a CSV whose ``header`` was detected, not stated."""
    said, other = ("true", "false if it is data") if header else ("false", "true if it names them")
    return (
        f"{path}: header not stated: {because}: write header = {said} under [data] to say "
        f"so (or header = {other})"
    )


def _stated_header_note(path: Path, header: bool, because: str) -> str:
    """The warning of a stated ``header`` that the file's first row contradicts."""
    looks = (
        because.replace("is read as data, not as", "looks like data, not")
        .replace("is read as", "looks like")
        .replace(", since it", ": it")
        .replace(" (the columns are numbered from 0)", "")
    )
    cost = (
        "read as data, it turns every numeric column into text, one-hot encoded"
        if not header
        else "read as names, one row of data is lost and the columns are named by numbers"
    )
    return f"{path}: header = {str(header).lower()}, but {looks}; {cost}. Check header"


def detect_header(path: Path, rows: int = 200) -> tuple[bool, str]:
    """Whether a CSV's first row names its columns, and why it is taken to.

    The first row is a header when it holds text in a column whose next rows (up to
    ``rows``) are all numbers; it is data when it is a number wherever they are. A file
    without any numeric column is left to :class:`csv.Sniffer` (a guess, and said so).

    Returns
    -------
    header : bool
    because : str
        What was assumed and why, for the warning.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "named.csv").write_text("a,b,y\\n1,2,0\\n3,4,1\\n")
    >>> _ = (folder / "bare.csv").write_text("1,2,0\\n3,4,1\\n")
    >>> header, because = detect_header(folder / "named.csv")
    >>> header
    True
    >>> print(because)  # doctest: +NORMALIZE_WHITESPACE
    the first row (a, b, y) is read as the column names, since it holds text where the rows
    below hold numbers
    >>> detect_header(folder / "bare.csv")[0]
    False
    """
    import pandas as pd

    raw = pd.read_csv(path, header=None, dtype=str, nrows=rows + 1, keep_default_na=False)
    first, rest = raw.iloc[0], raw.iloc[1:]
    shown = ", ".join(first.iloc[:5]) + (", ..." if len(first) > 5 else "")

    def numbers(cells: Any) -> Any:
        cells = cells.str.strip()
        return (cells == "") | pd.to_numeric(cells, errors="coerce").notna()

    filled = [c for c in raw if (rest[c].str.strip() != "").any()]
    numeric = [c for c in filled if numbers(rest[c]).all()]
    if numeric:
        if not numbers(first[numeric]).all():
            return True, (
                f"the first row ({shown}) is read as the column names, since it holds text "
                "where the rows below hold numbers"
            )
        return False, (
            f"the first row ({shown}) is read as data, not as column names, since it holds "
            "numbers where the rows below do (the columns are numbered from 0)"
        )
    with open(path, newline="") as f:
        sample = f.read(64 * 1024)
    try:
        header = csv.Sniffer().has_header(sample)
    except csv.Error:
        header = True
    guess = "the column names" if header else "data"
    return header, f"the first row ({shown}) is read as {guess}, a guess (no column holds numbers)"


def check_split(
    config: dict[str, Any], base: str | Path | None = None, *, announce: bool = False
) -> None:
    """Check the split sizes of a resolved configuration against the rows of its data.

    ``announce``: warn about how a data file is read (see :func:`read_table`).

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
    n = dataset_rows(data, base, announce=announce)
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
