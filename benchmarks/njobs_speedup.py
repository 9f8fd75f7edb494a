"""Parallel clients: 10 random-forest clients with n_jobs=1 versus n_jobs=2.

Synthetic data (make_classification): 10 clients × 2,000 rows, |U| = 5,000, 20
features, 3 rounds. Checks that both runs give identical pseudo-labels and predictions.

    python benchmarks/njobs_speedup.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import record
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

from cotrain import FederatedCoTrainer, partition


def run(n_jobs: int, X_clients, y_clients, U, X_test, rounds: int):
    trainer = FederatedCoTrainer(
        [RandomForestClassifier(n_estimators=100) for _ in range(10)],
        rounds=rounds,
        n_jobs=n_jobs,
        random_state=0,
    )
    start = time.perf_counter()
    trainer.fit(X_clients, y_clients, X_public=U)
    return time.perf_counter() - start, trainer.pseudo_labels_, trainer.predict(X_test)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    X, y = make_classification(
        n_samples=26_000, n_features=20, n_informative=10, n_classes=3, random_state=0
    )
    X_lab, y_lab, U, X_test = X[:20_000], y[:20_000], X[20_000:25_000], X[25_000:]
    parts = partition.iid(y_lab, n_clients=10, random_state=0)
    Xc, yc = [X_lab[p] for p in parts], [y_lab[p] for p in parts]
    run(2, Xc, yc, U, X_test, rounds=1)  # start the worker pool once (not timed)
    t1, pl1, pred1 = run(1, Xc, yc, U, X_test, args.rounds)
    t2, pl2, pred2 = run(2, Xc, yc, U, X_test, args.rounds)
    same = np.array_equal(pl1, pl2) and np.array_equal(pred1, pred2)
    record(
        "njobs_speedup",
        f"10 RandomForest(100) clients × 2,000 rows, |U| = 5,000, {args.rounds} rounds\n\n"
        f"n_jobs=1: {t1:.2f} s\nn_jobs=2: {t2:.2f} s\nspeed-up: {t1 / t2:.2f}x (target >= 1.6x)\n"
        f"identical pseudo-labels and predictions: {same}",
    )


if __name__ == "__main__":
    main()
