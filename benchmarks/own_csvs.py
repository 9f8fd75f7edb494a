"""Six public CSV files through ``cotrain run``, as a new user would run them (issue 41).

Each file is given to the experiment runner in its published form — no header where it has
none, UCI's ``", "`` separators and ``?`` markers, categorical columns, its own label
column — with the getting-started template's clients (a decision tree, two random forests,
XGBoost, a logistic regression) and its three variants: the paper's FedCT (the runner's
default), each client alone (``local``) and Python's defaults (``trust = "auto"``,
``consensus = "auto"``). The command is ``cotrain run`` itself, in a subprocess, timed.

- ``adult``: UCI Adult, training file (32,561 rows, 14 features, ``?`` for missing);
- ``pima``: Pima Indians Diabetes (768 rows; zeros stand for missing values);
- ``abalone``: 4,177 rows, sex categorical, the label is the number of rings (28 classes);
- ``oil_spill``: 937 rows, 49 features, 41 positives;
- ``wine_quality``: UCI Wine Quality, red (1,599 rows, quality 3..8);
- ``wine``: scikit-learn's wine (178 rows, 3 classes), written with a header row.

The first five are read from the shared data folder (``--data``, default ``../shared/data``).

Run::

    python benchmarks/own_csvs.py --out /tmp/own-csvs [--seeds 0,1,2] [--only adult,wine]

It prints, per dataset, the wall time and each client's test accuracy alone, with FedCT
and with Python's defaults (means over the seeds, from ``summary.csv``), and the clients
that ended below their local model.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
#: name -> (file under --data or None, [data] keys, [split] sizes)
DATASETS = {
    "adult": (
        "adult/adult-train.csv",
        'header = false\ntarget = -1\nna_values = ["?"]',
        (1000, 250, 2000),
    ),
    "pima": (
        "pima_diabetes/pima-indians-diabetes.csv",
        "header = false\ntarget = -1",
        (300, 200, 268),
    ),
    "abalone": ("abalone/abalone.csv", "header = false\ntarget = -1", (1500, 250, 1000)),
    "oil_spill": ("oil_spill/oil-spill.csv", "header = false\ntarget = -1", (400, 200, 337)),
    "wine_quality": (
        "wine_quality/winequality-red.csv",
        "header = false\ntarget = -1",
        (600, 300, 698),
    ),
    "wine": (None, 'header = true\ntarget = "target"', (80, 50, 48)),
}

TEMPLATE = """\
name = "{name}"
seeds = [{seeds}]

[data]
path = "{path}"
{data}

[split]
n_public = {n_public}
n_labeled = {n_labeled}
n_test = {n_test}
n_clients = 5
partition = "iid"

[method]
name = "fedct"
rounds = 5

[[clients]]
learner = "DT"

[[clients]]
learner = "RF"
count = 2

[[clients]]
learner = "XGBoost"

[[clients]]
learner = "LR"

[[variant]]
label = "FedCT"

[[variant]]
label = "local only"
method = {{ name = "local" }}

[[variant]]
label = "Python defaults"
method = {{ name = "fedct", trust = "auto", consensus = "auto" }}
"""
LEARNERS = ["DT", "RF", "RF", "XGBoost", "LR"]


def _wine_csv(folder: Path) -> Path:
    from sklearn.datasets import load_wine

    frame = load_wine(as_frame=True).frame
    path = folder / "wine.csv"
    frame.to_csv(path, index=False)
    return path


def run_one(name: str, data_home: Path, out: Path, seeds: str) -> str:
    """Write the experiment file, run ``cotrain run`` and summarise its results."""
    source, data, (n_public, n_labeled, n_test) = DATASETS[name]
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    path = _wine_csv(folder) if source is None else (data_home / source).resolve()
    toml = folder / f"{name}.toml"
    toml.write_text(
        TEMPLATE.format(
            name=name,
            seeds=seeds,
            path=path,
            data=data,
            n_public=n_public,
            n_labeled=n_labeled,
            n_test=n_test,
        )
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cotrain", "run", str(toml), "--out", str(folder / "results"),
         "--quiet"], capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    lines = [f"## {name} ({path.name}): cotrain run exit {done.returncode}, {wall:.0f} s"]
    lines += [f"  {w.strip()[:220]}" for w in warnings[:6]]
    if done.returncode != 0:
        return "\n".join([*lines, done.stderr[-1500:]])
    summary = pd.read_csv(folder / "results" / "summary.csv").set_index("variant")
    lines.append(
        "mean accuracy: "
        + ", ".join(f"{v} {summary.loc[v, 'accuracy']:.3f}" for v in summary.index)
    )
    lines.append("client  learner   alone   FedCT   Python defaults")
    below = []
    for i, learner in enumerate(LEARNERS):
        cells = [summary.loc[v, f"client_{i}_accuracy"] for v in
                 ("local only", "FedCT", "Python defaults")]  # fmt: skip
        lines.append(f"{i:>6}  {learner:<8} {cells[0]:.3f}   {cells[1]:.3f}   {cells[2]:.3f}")
        below += [f"{v} client {i} ({c - cells[0]:+.3f})" for v, c in
                  (("FedCT", cells[1]), ("Python defaults", cells[2])) if c < cells[0]]  # fmt: skip
    lines.append("below their local model: " + (", ".join(below) or "none"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--only", default=",".join(DATASETS))
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(DATASETS))
    if unknown:
        parser.error(f"--only: unknown datasets {unknown}; known: {sorted(DATASETS)}")
    seeds = ", ".join(s.strip() for s in args.seeds.split(","))
    for name in names:
        print(run_one(name, args.data, args.out, seeds), flush=True)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
