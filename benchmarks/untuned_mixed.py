"""Does co-training help every site on tabular data the library was not tuned on? (issue 28)

Four iid sites — decision tree, random forest, XGBoost, logistic regression — on seven
public tabular datasets that played no part in choosing the library's defaults:

- ``pima``: Pima Indians Diabetes, 768 rows, 8 features, 2 classes;
- ``oil_spill``: oil slicks in radar images, 937 rows, 48 features (the first column, an
  index, is dropped), 2 classes with 41 positives;
- ``abalone``: 4,177 rows, sex one-hot, rings binned into 3 classes (≤ 8, 9–10, ≥ 11);
- ``adult``: UCI Adult (income > 50K), one-hot, rows with a missing value dropped;
- ``wine_quality``: UCI Wine Quality, red and white, quality ≥ 6 against < 6;
- ``breast_cancer``: scikit-learn's Breast Cancer Wisconsin, 569 rows;
- ``digits``: scikit-learn's 8×8 digits, 1,797 rows, 10 classes.

Pima, oil spill and abalone are read from the shared data folder
(:func:`cotrain.datasets.paths.data_home`, e.g. ``../shared/data``), adult and wine quality
with :mod:`cotrain.datasets.loaders`; labels are label-encoded.

Splits, per seed (stratified random cuts, so every site sees every class of oil spill):

- datasets of 2,000 rows or more: 4 sites of ``--rows`` labelled rows, a public pool U of
  10 × ``--rows`` rows and a test set of min(2,000, the rest) rows;
- the small datasets (pima, oil spill, breast cancer, digits) cannot give |U| ≥ 10 × the
  site rows: there the test set is 25 % of the rows, the sites hold 100 rows each (75 for
  breast cancer) and U is what is left (176 rows for pima, 303 for oil spill, 127 for
  breast cancer, 948 for digits) — **|U| is below 10 × the site rows** on these four.

Features are standardised with a scaler fitted on U only.

Methods, for each dataset and seed:

- ``local``: every site's learner fitted on its own rows alone;
- ``fedct``: ``FederatedCoTrainer(..., trust=None, consensus="majority")``, the paper's FedCT;
- ``default``: ``FederatedCoTrainer(learners, rounds=R, random_state=seed)``, whatever the
  library's defaults are when the benchmark runs.

A federated run records each site's test accuracy, the consensus's test accuracy
(``trainer.predict``), the test accuracy of ``trainer.distill(RandomForestClassifier())``
(one model fitted on U with the final consensus), the wall time of ``fit`` and, when
``fit`` accepts ``y_public``, the history's per-round accuracy of the pseudo-labels on U
(``pseudo_label_accuracy`` and any history column whose name contains ``public``). The
report ends with the checks of issue 40:

(a) every site's mean default accuracy ≥ its local-only accuracy − 0.005, on every dataset;
(b) the mean over sites of (default − local), averaged over datasets, ≥ FedCT's;
(c) the default run's consensus test accuracy, and its ``distill()`` model's, ≥ the best
    site's local-only accuracy − 0.005 on every dataset;
(d) the wall-time ratio default / FedCT ≤ 1.5 on every dataset.

The text goes to ``benchmarks/results/<name>.txt`` and the raw rows to ``<name>.json``
(``<name>`` defaults to ``untuned_mixed_<rows>rows``)::

    python benchmarks/untuned_mixed.py --seeds 3
    python benchmarks/untuned_mixed.py --seeds 1 --rounds 2 --datasets pima breast_cancer \\
        --methods local default --name scratch
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import RESULTS, record
from joblib import Parallel, delayed
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.preprocessing import LabelEncoder, StandardScaler
from sklearn.tree import DecisionTreeClassifier

try:
    import cotrain  # noqa: F401
except ModuleNotFoundError:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cotrain import FederatedCoTrainer
from cotrain.datasets.paths import data_home
from cotrain.datasets.tabular import load_adult, load_wine_quality
from learners import XGBoostClassifier

SITES = ("DT", "RF", "XGB", "LR")
DATASETS = ("pima", "oil_spill", "abalone", "adult", "wine_quality", "breast_cancer", "digits")
METHODS = ("local", "fedct", "default")
#: datasets under this many rows use the small-data split (test 25 %, U the rest)
SMALL = 2000
#: tolerance of checks (a) and (c), and the floor of check (b)
TOLERANCE, MAX_TIME_RATIO = 0.005, 1.5
#: the rows of a run that are not sites
FEDERATION = ("consensus", "distill")


def site_learners(seed: int) -> list[Any]:
    """The four sites' learners: DT, RF, XGBoost and logistic regression.

    Examples
    --------
    >>> [type(e).__name__ for e in site_learners(0)]
    ['DecisionTreeClassifier', 'RandomForestClassifier', 'XGBoostClassifier', 'LogisticRegression']
    """
    return [
        DecisionTreeClassifier(random_state=seed),
        RandomForestClassifier(random_state=seed),
        XGBoostClassifier(random_state=seed),
        LogisticRegression(max_iter=2000),
    ]


def load(name: str, folder: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Features (float) and label-encoded labels of one of :data:`DATASETS`.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    folder : str, optional
        The shared data folder; :func:`~cotrain.datasets.paths.data_home` finds it if omitted.

    Returns
    -------
    X : ndarray of shape (n_rows, n_features)
    y : ndarray of shape (n_rows,), int, the classes numbered 0, 1, ...

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`DATASETS`.
    FileNotFoundError
        If a dataset read from the data folder is not there.

    Examples
    --------
    >>> X, y = load("breast_cancer")
    >>> X.shape, sorted(set(y.tolist()))
    ((569, 30), [0, 1])
    """
    if name == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
    elif name == "digits":
        X, y = load_digits(return_X_y=True)
    elif name == "adult":
        X, y, _ = load_adult(folder)
    elif name == "wine_quality":
        X, y, _ = load_wine_quality(folder, target="quality")
        y = (y >= 6).astype(int)
    elif name == "pima":
        a = np.loadtxt(
            data_home(folder) / "pima_diabetes" / "pima-indians-diabetes.csv", delimiter=","
        )
        X, y = a[:, :-1], a[:, -1].astype(int)
    elif name == "oil_spill":
        a = np.loadtxt(data_home(folder) / "oil_spill" / "oil-spill.csv", delimiter=",")
        X, y = a[:, 1:-1], a[:, -1].astype(int)  # column 0 is a row index
    elif name == "abalone":
        df = pd.read_csv(data_home(folder) / "abalone" / "abalone.csv", header=None)
        X = pd.get_dummies(df.iloc[:, :-1], columns=[0]).to_numpy(dtype=float)
        y = np.digitize(df.iloc[:, -1].to_numpy(), [8.5, 10.5])  # ≤ 8, 9–10, ≥ 11 rings
    else:
        raise ValueError(f"name must be one of {DATASETS}, got {name!r}")
    return np.asarray(X, dtype=np.float64), LabelEncoder().fit_transform(y)


def split_sizes(name: str, n_rows: int, rows: int = 150, n_sites: int = 4) -> dict[str, int]:
    """Rows per site, public pool size and test size for a dataset of ``n_rows`` rows.

    Datasets of :data:`SMALL` rows or more: ``rows`` per site, |U| = 10 × ``rows``, test =
    min(2000, the rest). Smaller ones: test = 25 % of the rows, 100 rows per site (75 for
    breast cancer) and U the rest, which is less than 10 × the site rows.

    Raises
    ------
    ValueError
        If the dataset is too small for the split (no public or test rows left).

    Examples
    --------
    >>> split_sizes("abalone", 4177)
    {'site': 150, 'public': 1500, 'test': 2000}
    >>> split_sizes("pima", 768)
    {'site': 100, 'public': 176, 'test': 192}
    >>> split_sizes("breast_cancer", 569)
    {'site': 75, 'public': 127, 'test': 142}
    """
    if n_rows < SMALL:
        site = 75 if name == "breast_cancer" else 100
        test = n_rows // 4
        public = n_rows - test - n_sites * site
    else:
        site, public = rows, 10 * rows
        test = min(2000, n_rows - n_sites * site - public)
    if public < 1 or test < 1:
        raise ValueError(
            f"rows={rows} is too large for {name!r} ({n_rows} rows): {n_sites} sites of {site} "
            f"rows leave {public} public and {test} test rows; expected at least 1 of each"
        )
    return {"site": site, "public": public, "test": test}


def split(X: np.ndarray, y: np.ndarray, sizes: dict[str, int], seed: int, n_sites: int = 4):
    """Stratified random cut into sites, public pool and test set; standardised on U.

    Returns
    -------
    tuple
        ``(X_sites, y_sites, X_public, y_public, X_test, y_test)``, the sites as lists.

    Examples
    --------
    >>> X, y = load("breast_cancer")
    >>> Xs, ys, U, yU, Xt, yt = split(X, y, split_sizes("breast_cancer", len(y)), seed=0)
    >>> [len(v) for v in ys], len(U), len(yt), bool(abs(U.mean()) < 1e-9)
    ([75, 75, 75, 75], 127, 142, True)
    """
    idx = np.arange(len(y))
    labelled, rest = train_test_split(
        idx, train_size=n_sites * sizes["site"], stratify=y, random_state=seed
    )
    public, rest = train_test_split(
        rest, train_size=sizes["public"], stratify=y[rest], random_state=seed
    )
    if len(rest) > sizes["test"]:
        rest = train_test_split(
            rest, train_size=sizes["test"], stratify=y[rest], random_state=seed
        )[0]
    folds = StratifiedKFold(n_sites, shuffle=True, random_state=seed)
    parts = [labelled[f] for _, f in folds.split(labelled, y[labelled])]
    X = StandardScaler().fit(X[public]).transform(X)
    return [X[p] for p in parts], [y[p] for p in parts], X[public], y[public], X[rest], y[rest]


def public_history(trainer: FederatedCoTrainer) -> dict[str, list[float | None]]:
    """Per-round accuracy on U from the history: ``pseudo_label_accuracy`` and ``*public*``."""
    frame = trainer.history_.to_frame()
    columns = [c for c in frame.columns if c == "pseudo_label_accuracy" or "public" in c]
    return {
        c: [None if pd.isna(v) else float(v) for v in frame[c]]
        for c in columns
        if frame[c].notna().any()
    }


def run(name: str, seed: int, rows: int, rounds: int, methods: list[str], folder=None) -> list:
    """All methods on one dataset and seed: one raw row per site and method (and consensus)."""
    X, y = load(name, folder)
    sizes = split_sizes(name, len(y), rows)
    Xs, ys, U, yU, X_test, y_test = split(X, y, sizes, seed)
    base = dict(dataset=name, seed=seed, **{f"n_{k}": v for k, v in sizes.items()})
    out = []
    if "local" in methods:
        for site, model, Xi, yi in zip(SITES, site_learners(seed), Xs, ys, strict=True):
            acc = float(np.mean(model.fit(Xi, yi).predict(X_test) == y_test))
            out.append(dict(base, method="local", site=site, accuracy=acc))
    for method in [m for m in methods if m != "local"]:
        options = dict(trust=None, consensus="majority") if method == "fedct" else {}
        trainer = FederatedCoTrainer(
            site_learners(seed), rounds=rounds, random_state=seed, **options
        )
        extra = {"y_public": yU} if "y_public" in inspect.signature(trainer.fit).parameters else {}
        start = time.perf_counter()
        trainer.fit(Xs, ys, X_public=U, **extra)
        seconds = time.perf_counter() - start
        for site, model in zip(SITES, trainer.clients_, strict=True):
            acc = float(np.mean(np.asarray(model.predict(X_test)) == y_test))
            out.append(dict(base, method=method, site=site, accuracy=acc, seconds=seconds))
        acc = float(np.mean(np.asarray(trainer.predict(X_test)) == y_test))
        out.append(
            dict(
                base,
                method=method,
                site="consensus",
                accuracy=acc,
                seconds=seconds,
                rounds_run=len(trainer.history_),
                public=public_history(trainer),
            )
        )
        distilled = trainer.distill(RandomForestClassifier(random_state=seed))
        acc = float(np.mean(np.asarray(distilled.predict(X_test)) == y_test))
        out.append(dict(base, method=method, site="distill", accuracy=acc))
    return out


def _cell(values: pd.Series) -> str:
    if values.empty:
        return "–"
    std = values.std() if len(values) > 1 else 0.0
    return f"{values.mean():.3f} ± {std:.3f}"


def _diff(a: pd.Series, b: pd.Series) -> str:
    return "–" if a.empty or b.empty else f"{a.mean() - b.mean():+.3f}"


def _of(acc: pd.Series, method: str) -> pd.Series:
    """One method's mean accuracy per site (empty where the method did not run)."""
    return acc[method] if method in acc.index else pd.Series(dtype=float)


def _gap(d: pd.DataFrame, what: str, local: pd.Series) -> float:
    """The default run's ``what`` ("consensus" or "distill") − the best site's local."""
    rows = d[(d.site == what) & (d.method == "default")].accuracy
    return float(rows.mean() - local.max()) if len(rows) and len(local) else float("nan")


def summarise(df: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per dataset, the numbers the checks use (means over seeds; absent methods give NaN).

    Returns
    -------
    dict
        dataset -> ``{"site_gain": {site: default − local}, "mean_gain": float,
        "fedct_gain": FedCT's mean gain, "consensus_gap": consensus − best site local,
        "distill_gap": distill() − best site local, "best_site": str,
        "time_ratio": mean over seeds of default / FedCT wall time}``.

    Examples
    --------
    >>> df = pd.DataFrame(
    ...     [dict(dataset="d", seed=0, method=m, site=s, accuracy=a, seconds=t)
    ...      for m, a, t in [("local", 0.8, None), ("default", 0.85, 3.0), ("fedct", 0.82, 2.0)]
    ...      for s in ("DT", "LR")]
    ...     + [dict(dataset="d", seed=0, method=m, site="consensus", accuracy=0.9, seconds=t)
    ...        for m, t in [("default", 3.0), ("fedct", 2.0)]]
    ...     + [dict(dataset="d", seed=0, method="default", site="distill", accuracy=0.78)])
    >>> s = summarise(df)["d"]
    >>> round(s["mean_gain"], 3), round(s["fedct_gain"], 3), s["time_ratio"]
    (0.05, 0.02, 1.5)
    >>> round(s["consensus_gap"], 3), round(s["distill_gap"], 3)
    (0.1, -0.02)
    """
    out: dict[str, dict[str, Any]] = {}
    for name, d in df.groupby("dataset", sort=False):
        acc = d[~d.site.isin(FEDERATION)].groupby(["method", "site"]).accuracy.mean()
        local = _of(acc, "local")
        gain = (_of(acc, "default") - local).dropna()
        fedct_gain = (_of(acc, "fedct") - local).dropna()
        best = local.idxmax() if len(local) else None
        ratio = float("nan")
        timed = d[d.site == "consensus"]
        if {"default", "fedct"} <= set(timed.method):
            per_seed = timed.pivot_table("seconds", "seed", "method")
            ratio = float((per_seed["default"] / per_seed["fedct"]).mean())
        out[str(name)] = {
            "site_gain": gain.to_dict(),
            "mean_gain": float(gain.mean()) if len(gain) else float("nan"),
            "fedct_gain": float(fedct_gain.mean()) if len(fedct_gain) else float("nan"),
            "consensus_gap": _gap(d, "consensus", local),
            "distill_gap": _gap(d, "distill", local),
            "best_site": best,
            "time_ratio": ratio,
        }
    return out


def checks(summary: dict[str, dict[str, Any]]) -> list[str]:
    """The issue's checks (a)–(d) as ``PASS``/``FAIL``/``SKIP`` lines.

    Examples
    --------
    >>> ok = dict(site_gain={"DT": 0.02, "LR": -0.001}, mean_gain=0.02, fedct_gain=0.015,
    ...           consensus_gap=0.0, distill_gap=0.001, best_site="LR", time_ratio=1.4)
    >>> bad = dict(ok, site_gain={"DT": -0.03}, mean_gain=-0.03, distill_gap=-0.01,
    ...            time_ratio=2.5)
    >>> [line.split(":")[0] for line in checks({"x": ok})]
    ['PASS (a)', 'PASS (b)', 'PASS (c)', 'PASS (d)']
    >>> for line in checks({"x": ok, "y": bad}):
    ...     print(line)
    FAIL (a): every site default >= local - 0.005 on every dataset; failures: y/DT -0.0300
    FAIL (b): mean over sites of (default - local), over datasets = -0.0050, FedCT's +0.0150
    FAIL (c): default consensus and distill() >= best site local - 0.005 per dataset; \
failures: y distill -0.0100
    FAIL (d): wall time default / FedCT <= 1.5 per dataset; failures: y 2.50x
    """
    lines = []
    gains = [(n, site, g) for n, s in summary.items() for site, g in s["site_gain"].items()]
    if gains:
        fails = [f"{n}/{site} {g:+.4f}" for n, site, g in gains if g < -TOLERANCE]
        lines.append(
            f"{'FAIL' if fails else 'PASS'} (a): every site default >= local - "
            f"{TOLERANCE} on every dataset" + (f"; failures: {', '.join(fails)}" if fails else "")
        )
    else:
        lines.append("SKIP (a): needs the methods local and default")
    pairs = [
        (s["mean_gain"], s["fedct_gain"])
        for s in summary.values()
        if np.isfinite(s["mean_gain"]) and np.isfinite(s["fedct_gain"])
    ]
    if pairs:
        avg, fedct = np.mean(pairs, axis=0)
        lines.append(
            f"{'PASS' if avg >= fedct else 'FAIL'} (b): mean over sites of "
            f"(default - local), over datasets = {avg:+.4f}, FedCT's {fedct:+.4f}"
        )
    else:
        lines.append("SKIP (b): needs the methods local, fedct and default")
    gaps = [
        (n, what, s[f"{what}_gap"])
        for n, s in summary.items()
        for what in FEDERATION
        if np.isfinite(s[f"{what}_gap"])
    ]
    if gaps:
        fails = [f"{n} {what} {g:+.4f}" for n, what, g in gaps if g < -TOLERANCE]
        lines.append(
            f"{'FAIL' if fails else 'PASS'} (c): default consensus and distill() >= best "
            f"site local - {TOLERANCE} per dataset"
            + (f"; failures: {', '.join(fails)}" if fails else "")
        )
    else:
        lines.append("SKIP (c): needs the methods local and default")
    ratios = {n: s["time_ratio"] for n, s in summary.items() if np.isfinite(s["time_ratio"])}
    if ratios:
        fails = [f"{n} {r:.2f}x" for n, r in ratios.items() if r > MAX_TIME_RATIO]
        lines.append(
            f"{'FAIL' if fails else 'PASS'} (d): wall time default / FedCT <= "
            f"{MAX_TIME_RATIO:g} per dataset" + (f"; failures: {', '.join(fails)}" if fails else "")
        )
    else:
        lines.append("SKIP (d): needs the methods fedct and default")
    return lines


def report(df: pd.DataFrame, args: argparse.Namespace) -> str:
    """Markdown tables per dataset, then the checks."""
    seeds = sorted(df.seed.unique())
    lines = [
        f"{len(seeds)} seeds ({seeds[0]}..{seeds[-1]}), 4 iid sites (DT, RF, XGB, LR), "
        f"{args.rounds} rounds; test accuracy mean ± std over seeds; "
        f"default = FederatedCoTrainer's defaults at run time, FedCT = trust=None, majority",
        "",
    ]
    summary = summarise(df)
    for name in args.datasets:
        d = df[df.dataset == name]
        if d.empty:
            continue
        n = d.iloc[0]
        small = " — small dataset: |U| < 10 × site rows" if n.n_public < 10 * n.n_site else ""
        lines += [
            f"## {name}",
            f"sites 4 × {n.n_site} rows, |U| = {n.n_public}, test = {n.n_test}{small}",
            "",
            "| site | local | FedCT | default | default − local | FedCT − local |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        sites = d[~d.site.isin(FEDERATION)]
        for site in [*SITES, "mean"]:
            if site == "mean":
                per_seed = sites.groupby(["method", "seed"]).accuracy.mean()
                get = {
                    m: per_seed[m] if m in per_seed.index else pd.Series(dtype=float)
                    for m in METHODS
                }
            else:
                get = {
                    m: sites[(sites.site == site) & (sites.method == m)].accuracy for m in METHODS
                }
            lines.append(
                f"| {site} | "
                + " | ".join(_cell(get[m]) for m in METHODS)
                + f" | {_diff(get['default'], get['local'])}"
                + f" | {_diff(get['fedct'], get['local'])} |"
            )
        s = summary[name]
        cons = d[d.site == "consensus"]
        for method in ("default", "fedct"):
            c = cons[cons.method == method]
            if c.empty:
                continue
            lines.append("")
            for what in FEDERATION:
                rows = d[(d.site == what) & (d.method == method)]
                if rows.empty:
                    continue
                text = f"{what} on test ({method}): {_cell(rows.accuracy)}"
                if s["best_site"] is not None:
                    best = sites[(sites.method == "local") & (sites.site == s["best_site"])]
                    text += (
                        f"; best single site local-only: {s['best_site']} "
                        f"{best.accuracy.mean():.3f}; difference "
                        f"{rows.accuracy.mean() - best.accuracy.mean():+.3f}"
                    )
                lines.append(text)
            for column, values in _per_round(c).items():
                lines.append(f"  {column} per round ({method}): {values}")
        if np.isfinite(s["time_ratio"]):
            secs = cons.groupby("method").seconds.mean()
            lines.append(
                f"wall time of fit: FedCT {secs['fedct']:.1f} s, default "
                f"{secs['default']:.1f} s, ratio default/FedCT (mean over seeds) "
                f"{s['time_ratio']:.2f}"
            )
        lines.append("")
    lines += ["## checks (issue 40)", *checks(summary)]
    return "\n".join(lines)


def _per_round(consensus_rows: pd.DataFrame) -> dict[str, str]:
    """Mean over seeds, per round, of each public-pool history column."""
    out = {}
    columns = {c for p in consensus_rows.public for c in (p or {})}
    for column in sorted(columns):
        series = [p[column] for p in consensus_rows.public if column in (p or {})]
        length = max(len(s) for s in series)
        table = np.full((len(series), length), np.nan)
        for i, s in enumerate(series):
            table[i, : len(s)] = [np.nan if v is None else v for v in s]
        out[column] = " ".join(f"{v:.3f}" for v in np.nanmean(table, axis=0))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    parser.add_argument("--seed-offset", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds R (default 10)")
    parser.add_argument(
        "--rows",
        type=int,
        default=150,
        help="rows per site on datasets of >= 2000 rows (default 150)",
    )
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--n-jobs", type=int, default=2, help="parallel (dataset, seed) jobs")
    parser.add_argument("--data-home", default=None, help="the shared data folder")
    parser.add_argument(
        "--name", default=None, help="results file name (default untuned_mixed_<rows>rows)"
    )
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.rounds < 1 or args.rows < 1:
        parser.error("--seeds, --rounds and --rows must be positive integers")
    name = args.name or f"untuned_mixed_{args.rows}rows"
    seeds = range(args.seed_offset, args.seed_offset + args.seeds)
    jobs = [(d, s) for d in args.datasets for s in seeds]
    chunks = Parallel(n_jobs=args.n_jobs)(
        delayed(run)(d, s, args.rows, args.rounds, args.methods, args.data_home) for d, s in jobs
    )
    raw = [r for chunk in chunks for r in chunk]
    record(name, report(pd.DataFrame(raw), args))
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"args": vars(args), "rows": raw}, indent=1) + "\n")
    print(f"(raw rows saved to {path})")


if __name__ == "__main__":
    main()
