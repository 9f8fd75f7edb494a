"""FedCT on breast cancer with the paper's split: accuracy against FedCT Tables 3 and 6.

5 clients (iid over 85 labelled rows), |U| = 370, 114 test rows, 10 rounds, mean over
seeds. Reports the mean local-model test accuracy (what the paper reports), the
consensus accuracy, local-only (round-1 clients: no communication yet) and centralised.

    python benchmarks/breast_cancer_accuracy.py --seeds 5
    python benchmarks/breast_cancer_accuracy.py --seeds 5 --trust none  # the paper's FedCT

``--trust`` is the trainer's ``trust`` ("auto", the default, or "none"); the result file
is ``breast_cancer_accuracy.txt`` for the default and ``breast_cancer_accuracy_trust_none.txt``
otherwise.
"""

from __future__ import annotations

import argparse
import time

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS))
    parser.add_argument("--trust", choices=("auto", "none"), default="auto")
    args = parser.parse_args()
    trust = None if args.trust == "none" else args.trust
    rows = []
    for name in args.configs:
        make, paper = CONFIGS[name]
        start = time.perf_counter()
        runs = pd.DataFrame(
            [run_seed(make, s, rounds=args.rounds, trust=trust)[0] for s in range(args.seeds)]
        )

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
    name = "breast_cancer_accuracy" + ("" if args.trust == "auto" else "_trust_none")
    text = f"seeds 0..{args.seeds - 1}, {args.rounds} rounds, trust={args.trust}\n\n{table}"
    record(name, text)


if __name__ == "__main__":
    main()
