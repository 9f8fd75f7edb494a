"""Does joining make any client worse? Mixed federations with and without trust.

Four clients — decision tree, random forest, XGBoost, logistic regression — of
``--rows`` labelled rows each (iid), a public pool of 1,000 rows and a test set of
2,000 rows (what is left, for breast cancer), on five tabular datasets (public or generated):

- ``synthetic5``: ``make_classification`` with 5 numeric features, 2 classes, 10 % label
  noise (where the paper's FedCT falls below local training);
- ``digits``: scikit-learn's 8×8 digits, 10 classes;
- ``adult``: UCI Adult (income > 50K), one-hot, from the project's data folder;
- ``wine_quality``: UCI Wine Quality, quality ≥ 6 against < 6, 12 features;
- ``synthetic3c``: ``make_classification`` with 10 features (4 informative), 3 classes,
  5 % label noise.

For each seed and dataset it trains every client alone (local-only), and runs
``FederatedCoTrainer`` for ``--rounds`` rounds with ``trust=None`` and a majority vote (the
paper's FedCT), ``trust="auto"`` (the default: each client picks the pool weight by 3-fold
CV on its own rows) with a majority vote, and ``trust="auto"`` with
``consensus="quality"`` (votes weighted by the clients' out-of-fold accuracy). It reports
each client's mean test accuracy over the seeds, the
mean over clients, and the wall time of the runs.

    python benchmarks/trust_mixed.py --seeds 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _common import record
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.datasets import load_digits, make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import LabelEncoder, StandardScaler
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.datasets.tabular import load_adult, load_wine_quality
from learners import XGBoostClassifier

CLIENTS = ("DT", "RF", "XGB", "LR")
#: (name, trust, consensus) of the federated runs
METHODS = (
    ("fedct", None, "majority"),
    ("trust", "auto", "majority"),
    ("trust+quality", "auto", "quality"),
)
NAMES = ("local", "fedct", "trust", "trust+quality")


def learners() -> list:
    return [
        DecisionTreeClassifier(),
        RandomForestClassifier(),
        XGBoostClassifier(),
        LogisticRegression(max_iter=2000),
    ]


def dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "synthetic5":
        return make_classification(
            8000, 5, n_informative=3, n_redundant=1, flip_y=0.1, random_state=1
        )
    if name == "digits":
        return load_digits(return_X_y=True)
    if name == "adult":
        X, y, _ = load_adult()
        return X, y
    if name == "wine_quality":
        X, y, _ = load_wine_quality(target="quality")
        return X, (y >= 6).astype(int)
    if name == "synthetic3c":
        return make_classification(
            8000, 10, n_informative=4, n_classes=3, n_clusters_per_class=1, flip_y=0.05,
            random_state=2,
        )  # fmt: skip
    raise ValueError(f"unknown dataset {name!r}")


def split(X, y, seed: int, rows: int, n_public: int = 1000, n_test: int = 2000):
    """4 iid clients of ``rows`` rows, a public pool and a test set; standardised on U."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    y = LabelEncoder().fit_transform(y)
    labelled, rest = order[: 4 * rows], order[4 * rows :]
    n_public = min(n_public, len(rest) // 2)
    public, test = rest[:n_public], rest[n_public : n_public + n_test]
    scaler = StandardScaler().fit(X[public])
    X = scaler.transform(X).astype(np.float64)
    parts = np.array_split(labelled, 4)
    return [X[p] for p in parts], [y[p] for p in parts], X[public], X[test], y[test]


def run(name: str, seed: int, rows: int, rounds: int) -> list[dict]:
    X, y = dataset(name)
    Xc, yc, U, X_test, y_test = split(X, y, seed, rows)
    out = []
    local = [
        clone(e).set_params(**_seed(e, seed)).fit(Xi, yi)
        for e, Xi, yi in zip(learners(), Xc, yc, strict=True)
    ]
    for c, model in zip(CLIENTS, local, strict=True):
        out.append(dict(dataset=name, seed=seed, method="local", client=c,
                        accuracy=float(np.mean(model.predict(X_test) == y_test))))  # fmt: skip
    for method, trust, consensus in METHODS:
        start = time.perf_counter()
        trainer = FederatedCoTrainer(
            learners(), trust=trust, consensus=consensus, rounds=rounds, random_state=seed
        )
        trainer.fit(Xc, yc, X_public=U)
        seconds = time.perf_counter() - start
        weights = [trainer.history_[-1].trust.get(i) for i in range(4)]
        for i, (c, model) in enumerate(zip(CLIENTS, trainer.clients_, strict=True)):
            out.append(dict(dataset=name, seed=seed, method=method, client=c,
                            accuracy=float(np.mean(model.predict(X_test) == y_test)),
                            seconds=seconds, last_trust=weights[i]))  # fmt: skip
    return out


def _seed(estimator, seed: int) -> dict:
    return {"random_state": seed} if "random_state" in estimator.get_params() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rows", type=int, default=150)
    parser.add_argument(
        "--datasets", nargs="*",
        default=["synthetic5", "synthetic3c", "digits", "adult", "wine_quality"],
    )  # fmt: skip
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    jobs = [(d, s) for d in args.datasets for s in range(args.seeds)]
    rows = Parallel(n_jobs=args.n_jobs)(delayed(run)(d, s, args.rows, args.rounds) for d, s in jobs)
    df = pd.DataFrame([r for chunk in rows for r in chunk])
    text = [report(df, args)]
    record(f"trust_mixed_{args.rows}rows", "\n".join(text))


def report(df: pd.DataFrame, args) -> str:
    lines = [
        f"{args.seeds} seeds, 4 iid clients of {args.rows} rows, {args.rounds} rounds, "
        "majority vote; test accuracy mean ± std over seeds",
        "",
    ]
    table = df.groupby(["dataset", "client", "method"]).accuracy.agg(["mean", "std"])
    gains = []
    for name in args.datasets:
        lines.append(f"## {name}")
        lines.append("| client | local only | FedCT (trust=None) | trust='auto' | "
                     "trust='auto', quality vote | trust − local | quality − local | "
                     "last-round pool weight |")  # fmt: skip
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for c in [*CLIENTS, "mean"]:
            if c == "mean":
                sub = df[df.dataset == name].groupby(["method", "seed"]).accuracy.mean()
                cell = {m: (sub[m].mean(), sub[m].std()) for m in NAMES}
                w = ""
            else:
                cell = {m: tuple(table.loc[(name, c, m)]) for m in NAMES}
                ws = df[(df.dataset == name) & (df.client == c) & (df.method == "trust")]
                w = ", ".join(f"{v:g}" for v in ws.last_trust)
            diff = cell["trust"][0] - cell["local"][0]
            qdiff = cell["trust+quality"][0] - cell["local"][0]
            if c == "mean":
                gains.append((cell["fedct"][0] - cell["local"][0], diff, qdiff))
            lines.append(
                f"| {c} | " + " | ".join(f"{cell[m][0]:.3f} ± {cell[m][1]:.3f}" for m in NAMES)
                + f" | {diff:+.3f} | {qdiff:+.3f} | {w} |"
            )  # fmt: skip
        secs = df[df.dataset == name].groupby("method").seconds.mean()
        lines.append(f"\nwall time per run: FedCT {secs['fedct']:.1f} s, trust "
                     f"{secs['trust']:.1f} s ({secs['trust'] / secs['fedct']:.1f}×)\n")  # fmt: skip
    fedct, trust, quality = np.mean(gains, axis=0)
    lines.append(
        f"mean over clients minus local-only, averaged over datasets: FedCT {fedct:+.4f}, "
        f"trust {trust:+.4f}, trust + quality vote {quality:+.4f}"
    )
    worst = (
        df[df.method != "local"].groupby(["method", "dataset", "client"]).accuracy.mean()
        - df[df.method == "local"].groupby(["dataset", "client"]).accuracy.mean()
    )
    for method in NAMES[1:]:
        lowest = worst[method]
        lines.append(
            f"worst client (mean over seeds) minus its local-only, {method}: "
            f"{lowest.min():+.4f} ({' '.join(map(str, lowest.idxmin()))})"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
