"""Public datasets and the FedCT paper's data splits.

Federated co-training needs three disjoint parts of a dataset: the clients' private *labeled*
data (all clients together; split further among clients with :mod:`cotrain.partition`), an
*unlabeled public pool* ``U`` that every client and the server hold, and a held-out *test* set.
This module loads the public tabular datasets of the FedCT paper (Abourayya et al.) and cuts
them the way the paper did:

===============  ===========  =====================  ======
dataset          public |U|   labeled (all clients)  test
===============  ===========  =====================  ======
breast_cancer    370          85                     114
wine_quality     4,100        136                    1,059
adult            10,000       31,073                 7,769
===============  ===========  =====================  ======

Breast cancer ships with scikit-learn. Wine quality and adult income are read from the shared
data folder (see :func:`data_home`), because the machines that run this project cannot download
anything.

Features are standardised with a :class:`~sklearn.preprocessing.StandardScaler` fitted on the
**public pool only**: the pool is shared by everybody, so its statistics may inform a shared
preprocessing step, whereas the clients' private data must never leave them, not even as means
and variances.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.utils import Bunch

__all__ = [
    "ADULT_COLUMNS",
    "PAPER_SPLITS",
    "WINE_FEATURES",
    "data_home",
    "load_adult",
    "load_breast_cancer_split",
    "load_paper_split",
    "load_wine_quality",
    "paper_split",
]

#: Name of the environment variable that points at the shared data folder.
ENV_VAR = "COTRAIN_DATA"

#: The FedCT paper's tabular protocol (Table 3 and App. E: 5 clients, iid).
PAPER_SPLITS: dict[str, dict[str, int]] = {
    "breast_cancer": {"n_public": 370, "n_labeled": 85, "n_test": 114},
    "wine_quality": {"n_public": 4100, "n_labeled": 136, "n_test": 1059},
    "adult": {"n_public": 10000, "n_labeled": 31073, "n_test": 7769},
}

#: The eleven physico-chemical features of the wine quality data (Cortez et al. 2009).
WINE_FEATURES: tuple[str, ...] = (
    "fixed acidity",
    "volatile acidity",
    "citric acid",
    "residual sugar",
    "chlorides",
    "free sulfur dioxide",
    "total sulfur dioxide",
    "density",
    "pH",
    "sulphates",
    "alcohol",
)

#: Column names of UCI Adult, from the dataset's documentation (``adult.names``).
ADULT_COLUMNS: tuple[str, ...] = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)

_ADULT_CATEGORICAL: tuple[str, ...] = (
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native-country",
)


# --------------------------------------------------------------------------------------------
# where the data lives
# --------------------------------------------------------------------------------------------


def data_home(path: str | os.PathLike[str] | None = None) -> Path:
    """Locate the folder that holds the shared public datasets.

    The folder is looked up in this order, and the first rule that applies wins:

    1. ``path``, when given (it must exist: an explicit path is never silently replaced);
    2. the environment variable ``COTRAIN_DATA``, when set (it must exist as well);
    3. ``../shared/data`` relative to the current working directory (the layout used when
       working from the project root);
    4. ``<repository root>/../shared/data``, found relative to this file (works from any
       working directory when the package is used from a source checkout).

    Parameters
    ----------
    path : str or path-like, optional
        An explicit data folder.

    Returns
    -------
    pathlib.Path
        The resolved, existing data folder.

    Raises
    ------
    FileNotFoundError
        If no candidate exists. The message lists every location tried and how to point the
        library at the data.

    Examples
    --------
    >>> from cotrain.datasets.loaders import data_home
    >>> data_home()  # doctest: +SKIP
    PosixPath('/work/shared/data')
    >>> data_home("/data/public")  # doctest: +SKIP
    PosixPath('/data/public')
    """
    hint = (
        f"Pass the folder explicitly (data_home='/path/to/data') or set the environment "
        f"variable {ENV_VAR}=/path/to/data. The folder should contain e.g. "
        f"'wine_quality/winequality-red.csv' and 'adult/adult-train.csv'."
    )
    if path is not None:
        p = Path(path).expanduser()
        if p.is_dir():
            return p.resolve()
        raise FileNotFoundError(
            f"data folder not found: data_home={str(path)!r} (tried {p}) does not exist or is "
            f"not a directory. {hint}"
        )
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env).expanduser()
        if p.is_dir():
            return p.resolve()
        raise FileNotFoundError(
            f"data folder not found: environment variable {ENV_VAR}={env!r} points at {p}, "
            f"which does not exist or is not a directory. {hint}"
        )
    candidates = [
        Path.cwd() / ".." / "shared" / "data",
        Path(__file__).resolve().parents[2].parent / "shared" / "data",
    ]
    for p in candidates:
        if p.is_dir():
            return p.resolve()
    tried = "; ".join(str(p) for p in candidates)
    raise FileNotFoundError(
        f"data folder not found. Tried: no data_home argument, {ENV_VAR} not set, {tried}. {hint}"
    )


def _data_file(home: str | os.PathLike[str] | None, *parts: str) -> Path:
    root = data_home(home)
    f = root.joinpath(*parts)
    if not f.is_file():
        raise FileNotFoundError(
            f"{'/'.join(parts)} not found in the data folder {root} (looked for {f}). "
            f"Place the file there, or point data_home= / {ENV_VAR} at a folder that has it."
        )
    return f


# --------------------------------------------------------------------------------------------
# splitting
# --------------------------------------------------------------------------------------------


def _can_stratify(y: np.ndarray, n_first: int, n_second: int) -> bool:
    """Whether a stratified split of ``y`` into sizes ``n_first``/``n_second`` is possible."""
    _, counts = np.unique(y, return_counts=True)
    n_classes = len(counts)
    return n_classes > 1 and counts.min() >= 2 and n_first >= n_classes and n_second >= n_classes


def _split(
    idx: np.ndarray,
    y: np.ndarray,
    n_first: int,
    n_second: int,
    rng: np.random.RandomState,
    stratify: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Split ``idx`` into two disjoint index arrays of exact sizes ``n_first``, ``n_second``."""
    seed = rng.randint(np.iinfo(np.int32).max)
    if n_first == 0 or n_second == 0:
        perm = np.random.RandomState(seed).permutation(idx)
        return perm[:n_first], perm[n_first : n_first + n_second]
    strat = None
    if stratify:
        if _can_stratify(y[idx], n_first, n_second):
            strat = y[idx]
        else:
            warnings.warn(
                "paper_split: a stratified split is impossible here (a class has fewer than "
                "2 members, or a part is smaller than the number of classes); "
                "splitting without stratification",
                UserWarning,
                stacklevel=3,
            )
    a, b = train_test_split(
        idx, train_size=n_first, test_size=n_second, random_state=seed, stratify=strat
    )
    return np.asarray(a), np.asarray(b)


def _take(X: Any, idx: np.ndarray) -> Any:
    if isinstance(X, pd.DataFrame | pd.Series):
        return X.iloc[idx]
    return X[idx]


def paper_split(
    X: Any,
    y: Any,
    *,
    n_labeled: int,
    n_public: int,
    n_test: int,
    random_state: int | np.random.RandomState | None = None,
    stratify: bool = True,
) -> Bunch:
    """Cut a dataset into labeled (private), public (unlabeled) and test parts of exact sizes.

    The test set is drawn first, then the labeled set and the public pool from the rest (two
    calls of :func:`sklearn.model_selection.train_test_split`). Rows beyond
    ``n_labeled + n_public + n_test`` are left unused. Each split is stratified by ``y`` when
    ``stratify`` is true and stratification is possible (every class has at least two members
    and every part has at least one row per class); otherwise a :class:`UserWarning` is issued
    and the split is uniform.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Features (numpy array or pandas frame; frames are sliced with ``iloc``).
    y : array-like of shape (n_samples,)
        Labels.
    n_labeled : int
        Size of the labeled training data of all clients together.
    n_public : int
        Size of the unlabeled public pool ``U``.
    n_test : int
        Size of the test set.
    random_state : int, RandomState or None, default=None
        Seed of the split.
    stratify : bool, default=True
        Keep the class proportions in every part.

    Returns
    -------
    sklearn.utils.Bunch
        ``X_labeled, y_labeled, X_public, y_public, X_test, y_test`` and the row indices
        ``idx_labeled, idx_public, idx_test`` into the input. ``y_public`` is the hidden truth
        of the public pool, for evaluation only: a co-training run must not use it to train.

    Raises
    ------
    ValueError
        If a size is negative, if ``X`` and ``y`` have different lengths, or if the sizes add
        up to more rows than there are.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.datasets.loaders import paper_split
    >>> X = np.arange(200).reshape(100, 2)
    >>> y = np.repeat([0, 1], 50)
    >>> s = paper_split(X, y, n_labeled=20, n_public=50, n_test=30, random_state=0)
    >>> s.X_labeled.shape, s.X_public.shape, s.X_test.shape
    ((20, 2), (50, 2), (30, 2))
    >>> int(s.y_test.sum())
    15
    """
    for name, v in (("n_labeled", n_labeled), ("n_public", n_public), ("n_test", n_test)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise TypeError(f"paper_split: {name} must be an int, got {type(v).__name__}")
        if v < 0:
            raise ValueError(f"paper_split: {name} must be >= 0, got {v}")
    y_arr = np.asarray(y)
    if y_arr.ndim != 1:
        raise ValueError(f"paper_split: y must be 1-dimensional, got shape {y_arr.shape}")
    n = len(y_arr)
    if len(X) != n:
        raise ValueError(f"paper_split: X has {len(X)} rows but y has {n}")
    total = n_labeled + n_public + n_test
    if total > n:
        raise ValueError(
            f"paper_split: n_labeled={n_labeled} + n_public={n_public} + n_test={n_test} "
            f"= {total} exceeds the {n} rows available"
        )
    rng = (
        random_state
        if isinstance(random_state, np.random.RandomState)
        else np.random.RandomState(random_state)
    )
    idx = np.arange(n)
    # test first; the rest (labeled + public) from what remains
    idx_rest, idx_test = _split(idx, y_arr, n_labeled + n_public, n_test, rng, stratify)
    idx_lab, idx_pub = _split(idx_rest, y_arr, n_labeled, n_public, rng, stratify)
    return Bunch(
        X_labeled=_take(X, idx_lab),
        y_labeled=_take(y, idx_lab) if isinstance(y, pd.Series) else y_arr[idx_lab],
        X_public=_take(X, idx_pub),
        y_public=_take(y, idx_pub) if isinstance(y, pd.Series) else y_arr[idx_pub],
        X_test=_take(X, idx_test),
        y_test=_take(y, idx_test) if isinstance(y, pd.Series) else y_arr[idx_test],
        idx_labeled=idx_lab,
        idx_public=idx_pub,
        idx_test=idx_test,
    )


def _standardize_on_public(split: Bunch) -> StandardScaler:
    """Fit a scaler on the public pool only and apply it to all three parts (in place)."""
    scaler = StandardScaler().fit(np.asarray(split.X_public, dtype=float))
    for part in ("X_labeled", "X_public", "X_test"):
        split[part] = scaler.transform(np.asarray(split[part], dtype=float))
    return scaler


# --------------------------------------------------------------------------------------------
# loaders
# --------------------------------------------------------------------------------------------


def load_digits_split(random_state: int = 0, n_test: int = 360, n_public: int = 700) -> Bunch:
    """scikit-learn's digits scaled to [0, 1], cut into test, public pool and labelled rows.

    Two stratified cuts: ``n_test`` test rows first, then ``n_public`` rows of the rest
    become the public pool U; the remaining rows (737 by default) are the labelled data
    to partition over clients. Used by ``examples/compare_methods.py`` and
    ``examples/privacy_utility.py``.

    Returns
    -------
    Bunch
        ``X_labeled``, ``y_labeled``, ``X_public``, ``y_public`` (hidden truth, for
        evaluation only), ``X_test``, ``y_test``.

    Examples
    --------
    >>> split = load_digits_split(random_state=0)
    >>> split.X_labeled.shape, split.X_public.shape, split.X_test.shape
    ((737, 64), (700, 64), (360, 64))
    """
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    X_rest, X_test, y_rest, y_test = train_test_split(
        X, y, test_size=n_test, stratify=y, random_state=random_state
    )
    X_lab, X_pub, y_lab, y_pub = train_test_split(
        X_rest, y_rest, test_size=n_public, stratify=y_rest, random_state=random_state
    )
    return Bunch(
        X_labeled=X_lab,
        y_labeled=y_lab,
        X_public=X_pub,
        y_public=y_pub,
        X_test=X_test,
        y_test=y_test,
    )


def load_breast_cancer_split(random_state: int | None = 0, standardize: bool = True) -> Bunch:
    """The FedCT paper's split of scikit-learn's Breast Cancer Wisconsin data.

    569 rows, 30 features, 2 classes (0 = malignant, 1 = benign): 370 rows form the public
    pool ``U``, 85 the labeled data of all clients together, 114 the test set (stratified).
    The data has no duplicate rows, so the paper's de-duplication changes nothing.

    Parameters
    ----------
    random_state : int or None, default=0
        Seed of the split.
    standardize : bool, default=True
        Standardise all parts with a scaler fitted on the public pool only.

    Returns
    -------
    sklearn.utils.Bunch
        The parts of :func:`paper_split`, plus ``feature_names``, ``target_names``,
        ``description`` (a short summary), ``DESCR`` (scikit-learn's dataset card) and
        ``scaler`` (the fitted scaler, or ``None``).

    Examples
    --------
    >>> from cotrain.datasets.loaders import load_breast_cancer_split
    >>> d = load_breast_cancer_split(random_state=0)
    >>> d.X_public.shape, d.X_labeled.shape, d.X_test.shape
    ((370, 30), (85, 30), (114, 30))
    >>> d.target_names.tolist()
    ['malignant', 'benign']
    """
    from sklearn.datasets import load_breast_cancer

    raw = load_breast_cancer()
    sizes = PAPER_SPLITS["breast_cancer"]
    split = paper_split(raw.data, raw.target, random_state=random_state, **sizes)
    split.scaler = _standardize_on_public(split) if standardize else None
    split.feature_names = np.asarray(raw.feature_names)
    split.target_names = np.asarray(raw.target_names)
    split.DESCR = raw.DESCR
    split.description = (
        "Breast Cancer Wisconsin (diagnostic), scikit-learn bundle: 569 rows, 30 features, "
        "labels 0=malignant / 1=benign. FedCT paper split: |U|=370 public (unlabeled), "
        "85 labeled (all clients together), 114 test; "
        + (
            "standardised with a scaler fitted on the public pool only."
            if standardize
            else "not standardised."
        )
    )
    return split


def _read_wine_csv(path: Path) -> pd.DataFrame:
    """Read one wine quality file, whatever its separator (``;`` or ``,``) and header."""
    with open(path, encoding="utf-8") as fh:
        first = fh.readline()
    sep = ";" if first.count(";") > first.count(",") else ","
    first_field = first.split(sep)[0].strip().strip('"')
    try:
        float(first_field)
        header = None
    except ValueError:
        header = 0
    df = pd.read_csv(path, sep=sep, header=header)
    if df.shape[1] != 12:
        raise ValueError(
            f"{path}: expected 12 columns (11 features then quality), found {df.shape[1]}"
        )
    df.columns = [*WINE_FEATURES, "quality"]
    return df


def load_wine_quality(
    data_home: str | os.PathLike[str] | None = None,
    target: Literal["color", "quality"] = "color",
    standardize: bool = False,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Load UCI Wine Quality (red and white together), with duplicate rows removed.

    Reads ``wine_quality/winequality-red.csv`` (1,599 rows) and
    ``wine_quality/winequality-white.csv`` (4,898 rows) from the data folder. The files in the
    shared folder are comma-separated without a header; the original UCI files (``;`` and a
    quoted header row) are read as well. Duplicate rows (the 11 features, the quality and the
    colour all equal) are removed, as in the paper: 6,497 rows become 5,320.

    Which task? The paper describes the label as the quality score, but reports accuracies of
    0.92–0.98 from 136 labeled rows (Table 3). Predicting the 7-level quality score from these
    features reaches roughly 0.55–0.65 even with all data, while telling red from white wine is
    an easy task that reaches 0.95–0.99 — so the numbers imply the binary colour task, which is
    the default here. ``target="quality"`` gives the quality score instead, with the colour
    turned into a numeric feature ``is_red`` (the paper's "transform the categorical type
    attribute to a numerical value").

    Parameters
    ----------
    data_home : str or path-like, optional
        The data folder; see :func:`data_home`.
    target : {"color", "quality"}, default="color"
        ``"color"``: binary labels ``"red"``/``"white"``, 11 features.
        ``"quality"``: integer quality scores (3..9), 12 features (the 11 plus ``is_red``).
    standardize : bool, default=False
        Standardise every feature over the whole returned dataset. Off by default: the paper
        standardises, but for a federated split use :func:`load_paper_split`, which fits the
        scaler on the public pool only.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float
    y : ndarray of shape (n_samples,)
        Strings ``"red"``/``"white"``, or integer quality scores.
    feature_names : list of str

    Examples
    --------
    >>> from cotrain.datasets.loaders import load_wine_quality
    >>> X, y, names = load_wine_quality()  # doctest: +SKIP
    >>> X.shape, sorted(set(y))  # doctest: +SKIP
    ((5320, 11), ['red', 'white'])
    """
    if target not in ("color", "quality"):
        raise ValueError(f"load_wine_quality: target must be 'color' or 'quality', got {target!r}")
    red = _read_wine_csv(_data_file(data_home, "wine_quality", "winequality-red.csv"))
    white = _read_wine_csv(_data_file(data_home, "wine_quality", "winequality-white.csv"))
    red["color"] = "red"
    white["color"] = "white"
    df = pd.concat([red, white], ignore_index=True).drop_duplicates(ignore_index=True)
    if df[list(WINE_FEATURES)].isna().any().any():
        df = df.dropna(ignore_index=True)
    if target == "color":
        names = list(WINE_FEATURES)
        X = df[names].to_numpy(dtype=float)
        y = df["color"].to_numpy(dtype=object).astype(str)
    else:
        df["is_red"] = (df["color"] == "red").astype(float)
        names = [*WINE_FEATURES, "is_red"]
        X = df[names].to_numpy(dtype=float)
        y = df["quality"].to_numpy(dtype=np.int64)
    if standardize:
        X = StandardScaler().fit_transform(X)
    return X, y, names


def load_adult(
    data_home: str | os.PathLike[str] | None = None,
    missing: Literal["drop", "category"] = "drop",
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Load UCI Adult (census income 1994), train and test files together, one-hot encoded.

    Reads ``adult/adult-train.csv`` (32,561 rows) and ``adult/adult-test.csv`` (16,281 rows):
    no header, ``", "`` separators, ``?`` for a missing value (in workclass, occupation and
    native-country; 2,399 + 1,221 rows have one), test labels ending in ``"."``. Both files are
    concatenated (48,842 rows) and the 8 categorical columns one-hot encoded together
    (:func:`pandas.get_dummies`), so the columns are the same whatever rows are later picked.

    Parameters
    ----------
    data_home : str or path-like, optional
        The data folder; see :func:`data_home`.
    missing : {"drop", "category"}, default="drop"
        ``"drop"``: remove rows with a missing value (45,222 rows remain). ``"category"``: keep
        them, with ``"?"`` as a category of its own (48,842 rows; the paper's split sizes add
        up to exactly this number, so the paper appears to have kept them).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float
        6 numeric columns then the one-hot columns (``<column>_<value>``; 104 columns with
        ``missing="drop"``).
    y : ndarray of shape (n_samples,), str
        ``">50K"`` or ``"<=50K"`` (the test files' trailing dot removed).
    feature_names : list of str

    Examples
    --------
    >>> from cotrain.datasets.loaders import load_adult
    >>> X, y, names = load_adult()  # doctest: +SKIP
    >>> X.shape, sorted(set(y))  # doctest: +SKIP
    ((45222, 104), ['<=50K', '>50K'])
    """
    if missing not in ("drop", "category"):
        raise ValueError(f"load_adult: missing must be 'drop' or 'category', got {missing!r}")
    frames = []
    for name in ("adult-train.csv", "adult-test.csv"):
        f = _data_file(data_home, "adult", name)
        df = pd.read_csv(
            f,
            header=None,
            names=list(ADULT_COLUMNS),
            sep=",",
            skipinitialspace=True,
            na_values=["?"],
            keep_default_na=False,
            dtype=str,
            skip_blank_lines=True,
        )
        # the original adult.test starts with a line "|1x3 Cross validator"
        df = df[~df["age"].str.startswith("|", na=False)]
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    for c in df.columns:
        df[c] = df[c].str.strip()
    df = df.dropna(subset=["age", "income"])
    df["income"] = df["income"].str.rstrip(".")
    if missing == "drop":
        df = df.dropna().reset_index(drop=True)
    else:
        df = df.fillna("?").reset_index(drop=True)
    numeric = [c for c in ADULT_COLUMNS[:-1] if c not in _ADULT_CATEGORICAL]
    num = df[numeric].astype(float)
    cat = pd.get_dummies(df[list(_ADULT_CATEGORICAL)], dtype=float)
    Xdf = pd.concat([num, cat], axis=1)
    y = df["income"].to_numpy(dtype=object).astype(str)
    return Xdf.to_numpy(dtype=float), y, [str(c) for c in Xdf.columns]


# --------------------------------------------------------------------------------------------
# the paper's protocol in one call
# --------------------------------------------------------------------------------------------


def _fit_sizes(sizes: dict[str, int], n: int, name: str) -> dict[str, int]:
    """Adapt the paper's sizes to ``n`` rows: shrink the labeled set first (documented rule)."""
    total = sum(sizes.values())
    if total <= n:
        return dict(sizes)
    shortfall = total - n
    fitted = dict(sizes)
    fitted["n_labeled"] = sizes["n_labeled"] - shortfall
    if fitted["n_labeled"] < 1:
        raise ValueError(
            f"load_paper_split({name!r}): the paper's sizes {sizes} need {total} rows but only "
            f"{n} are available"
        )
    warnings.warn(
        f"load_paper_split({name!r}): the paper's sizes need {total} rows but {n} remain after "
        f"preprocessing; keeping n_public={sizes['n_public']} and n_test={sizes['n_test']} and "
        f"shrinking n_labeled from {sizes['n_labeled']} to {fitted['n_labeled']}",
        UserWarning,
        stacklevel=3,
    )
    return fitted


def load_paper_split(
    name: str,
    data_home: str | os.PathLike[str] | None = None,
    random_state: int | None = 0,
    *,
    standardize: bool = True,
    adult_missing: Literal["drop", "category"] = "drop",
    sizes: dict[str, int] | None = None,
) -> Bunch:
    """Load one of the FedCT tabular datasets and split it as the paper did.

    Applies :func:`paper_split` with the sizes in :data:`PAPER_SPLITS` and standardises all
    parts with a scaler fitted on the public pool only.

    Adult: dropping the rows with missing values (the default) leaves 45,222 rows, fewer than
    the paper's 10,000 + 31,073 + 7,769 = 48,842. The rule then is to keep the public pool and
    the test set at the paper's sizes and shrink the labeled set to the rest (27,453 rows; a
    :class:`UserWarning` says so). With ``adult_missing="category"`` the missing values become a
    category of their own and the paper's sizes are used exactly. The same rule applies to any
    dataset whose sizes do not fit.

    Parameters
    ----------
    name : {"breast_cancer", "wine_quality", "adult"}
        The dataset.
    data_home : str or path-like, optional
        The data folder (not needed for ``"breast_cancer"``); see :func:`data_home`.
    random_state : int or None, default=0
        Seed of the split.
    standardize : bool, default=True
        Standardise with a scaler fitted on the public pool only.
    adult_missing : {"drop", "category"}, default="drop"
        How :func:`load_adult` treats missing values.
    sizes : dict, optional
        Override the paper's sizes (keys ``n_public``, ``n_labeled``, ``n_test``), e.g. a
        smaller public pool for a quick run.

    Returns
    -------
    sklearn.utils.Bunch
        The parts of :func:`paper_split` plus ``feature_names``, ``classes`` (sorted label
        values), ``name``, ``sizes`` (the sizes used) and ``scaler``.

    Examples
    --------
    >>> from cotrain.datasets.loaders import load_paper_split
    >>> d = load_paper_split("breast_cancer", random_state=1)
    >>> len(d.y_public), len(d.y_labeled), len(d.y_test)
    (370, 85, 114)
    >>> w = load_paper_split("wine_quality")  # doctest: +SKIP
    >>> w.X_public.shape  # doctest: +SKIP
    (4100, 11)
    """
    if name not in PAPER_SPLITS:
        raise ValueError(
            f"load_paper_split: unknown dataset name={name!r}; expected one of "
            f"{sorted(PAPER_SPLITS)}"
        )
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        raw = load_breast_cancer()
        X, y, names = raw.data, raw.target, [str(f) for f in raw.feature_names]
    elif name == "wine_quality":
        X, y, names = load_wine_quality(data_home, target="color")
    else:
        X, y, names = load_adult(data_home, missing=adult_missing)
    wanted = dict(PAPER_SPLITS[name] if sizes is None else sizes)
    missing_keys = {"n_public", "n_labeled", "n_test"} - set(wanted)
    if missing_keys:
        raise ValueError(f"load_paper_split: sizes lacks {sorted(missing_keys)}")
    used = _fit_sizes(wanted, len(y), name)
    split = paper_split(X, y, random_state=random_state, **used)
    split.scaler = _standardize_on_public(split) if standardize else None
    split.feature_names = list(names)
    split.classes = np.unique(y)
    split.name = name
    split.sizes = used
    return split
