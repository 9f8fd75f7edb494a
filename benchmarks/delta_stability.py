"""Do delta-coded uploads keep their savings under the defaults? (issue 40)

Delta coding (``encoding="delta"``) sends only the labels that changed since a client's
last upload, so its savings depend on how stable the labels are. This runs 5 decision-tree
sites on scikit-learn's digits (10 classes; per seed: 5 × 100 labelled rows, |U| = 1,000,
the rest as test rows, stratified), 12 rounds, ``encoding="delta"``, once with the
trainer's defaults and once with the paper's FedCT (``trust=None, consensus="majority"``),
and reports the uplink bytes of every round (all clients together, mean over seeds), round
12 as a share of round 1, and the mean client test accuracy; and the default before issue
40 (``CrossFitTrust(pool="cross_fit", refit="all", z=1.0, prefer="local")``,
``consensus="reliability"``)::

    python benchmarks/delta_stability.py --seeds 3
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import record
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer, partition
from cotrain.trust import CrossFitTrust

METHODS: dict[str, dict[str, object]] = {
    "default": {},
    "fedct": {"trust": None, "consensus": "majority"},
    # the default before issue 40: the pool cut into folds too, both models refitted every
    # round, the smallest blend weight within one standard error of the best
    "cut pool (before)": {
        "trust": CrossFitTrust(pool="cross_fit", refit="all", z=1.0, prefer="local"),
        "consensus": "reliability",
    },
}


def run(method: str, seed: int, rounds: int) -> tuple[list[int], float]:
    """Uplink bytes per round and the last round's mean client test accuracy."""
    X, y = load_digits(return_X_y=True)
    X_sites, X_rest, y_sites, y_rest = train_test_split(
        X, y, train_size=500, stratify=y, random_state=seed
    )
    X_public, X_test, _, y_test = train_test_split(
        X_rest, y_rest, train_size=1000, stratify=y_rest, random_state=seed
    )
    parts = partition.iid(y_sites, n_clients=5, random_state=seed)
    trainer = FederatedCoTrainer(
        [DecisionTreeClassifier(random_state=seed + i) for i in range(5)],
        rounds=rounds,
        encoding="delta",
        random_state=seed,
        **METHODS[method],
    ).fit(
        [X_sites[p] for p in parts],
        [y_sites[p] for p in parts],
        X_public=X_public,
        eval_set=(X_test, y_test),
    )
    return [r.bytes_up for r in trainer.history_], trainer.history_[-1].mean_accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    lines = [
        f"digits, 5 decision-tree sites x 100 rows, |U| = 1000, {args.rounds} rounds, "
        f'encoding="delta", seeds 0..{args.seeds - 1}; uplink bytes per round (all clients, '
        "mean over seeds)",
        "",
    ]
    for method in METHODS:
        runs = [run(method, seed, args.rounds) for seed in range(args.seeds)]
        per_round = np.mean([bytes_up for bytes_up, _ in runs], axis=0)
        accuracy = np.mean([acc for _, acc in runs])
        lines += [
            f"{method}: " + " ".join(f"{b:.0f}" for b in per_round),
            f"  round {args.rounds} / round 1: {per_round[-1] / per_round[0]:.1%}; "
            f"total {per_round.sum():.0f} bytes; mean client test accuracy {accuracy:.3f}",
        ]
    record("delta_stability", "\n".join(lines))


if __name__ == "__main__":
    main()
