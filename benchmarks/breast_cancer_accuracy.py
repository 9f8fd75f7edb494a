"""FedCT on breast cancer with the paper's split: accuracy against FedCT Tables 3 and 6.

5 clients (iid over 85 labelled rows), |U| = 370, 114 test rows, 10 rounds, mean over
seeds. Reports the mean local-model test accuracy (what the paper reports), the
consensus accuracy, local-only (round-1 clients: no communication yet) and centralised.

    python benchmarks/breast_cancer_accuracy.py --seeds 5
    python benchmarks/breast_cancer_accuracy.py --seeds 5 --method fedct  # the paper's FedCT

``--method default`` runs the trainer's defaults (``trust="auto"``, ``consensus="auto"``),
``--method fedct`` the paper's FedCT (``trust=None, consensus="majority"``); the result
file is ``breast_cancer_accuracy.txt`` for the default and ``breast_cancer_accuracy_fedct.txt``
for FedCT. Under the table, each client's mean test accuracy over the seeds after the last
round ("per site").
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _common import record
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from cotrain.demo import mixed_estimators, run_seed
from learners import RuleFitClassifier, XGBoostClassifier

CONFIGS = {
    "DT": (lambda: [DecisionTreeClassifier(min_samples_split=2) for _ in range(5)], 0.89),
    "RuleFit": (lambda: [RuleFitClassifier(tree_size=4, max_rules=200) for _ in range(5)], 0.92),
    "XGBoost": (lambda: [XGBoostClassifier() for _ in range(5)], 0.93),
    "RandomForest": (lambda: [RandomForestClassifier() for _ in range(5)], 0.90),
    "mixed DT,RF,RuleFit,XGB,RF": (mixed_estimators, 0.95),
}


#: what each ``--method`` passes to the trainer
METHODS: dict[str, dict[str, object]] = {
    "default": {},
    "fedct": {"trust": None, "consensus": "majority"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS))
    parser.add_argument("--method", choices=tuple(METHODS), default="default")
    args = parser.parse_args()
    rows, per_site = [], []
    for name in args.configs:
        make, paper = CONFIGS[name]
        start = time.perf_counter()
        seeds = [
            run_seed(make, s, rounds=args.rounds, **METHODS[args.method]) for s in range(args.seeds)
        ]
        runs = pd.DataFrame([row for row, _ in seeds])
        sites = np.mean([list(t.history_[-1].client_accuracy.values()) for _, t in seeds], axis=0)
        per_site.append(f"{name}: " + " ".join(f"{a:.3f}" for a in sites))

        def cell(col: str, runs: pd.DataFrame = runs) -> str:
            return f"{runs[col].mean():.3f} ± {runs[col].std(ddof=0):.3f}"

        fedct, local = runs.fedct_mean_client.mean(), runs.local_mean_client.mean()
        rows.append(
            {
                "clients": name,
                "paper FedCT": paper,
                "FedCT mean client": cell("fedct_mean_client"),
                "FedCT consensus": cell("fedct_consensus"),
                "local only": cell("local_mean_client"),
                "centralised": f"{runs.centralised.mean():.3f}",
                "meets paper": "yes" if fedct >= paper else "no",
                "beats local": "yes" if fedct > local else "no",
                "wall s": f"{time.perf_counter() - start:.0f}",
            }
        )
    table = pd.DataFrame(rows).to_string(index=False)
    name = "breast_cancer_accuracy" + ("" if args.method == "default" else "_fedct")
    text = (
        f"seeds 0..{args.seeds - 1}, {args.rounds} rounds, {args.method}: "
        f"{METHODS[args.method] or 'the trainer defaults'}\n\n{table}\n\n"
        "per site (mean test accuracy over the seeds after the last round, clients in order)\n"
        + "\n".join(per_site)
    )
    record(name, text)


if __name__ == "__main__":
    main()
