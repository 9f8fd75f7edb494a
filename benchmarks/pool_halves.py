"""Does PoolHalvesTrust break FedCT's lock-in for torch sites, and does that pay?

5 sites with a ``TorchClassifier`` MLP on digits, each trained 5 epochs a round (as the
paper's b = 5), a public pool of 500 rows, 500 test rows, 8 rounds, majority vote. Each
row of the table is a site size and a seed: the paper's FedCT (``trust=None``) against
``PoolHalvesTrust`` — mean client test accuracy after round 1 and after the last round,
the consensus accuracy on U in the last round, and how many pool labels the consensus
changed in rounds 2-8 (0 from some round on: locked in).

    python benchmarks/pool_halves.py --seeds 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _common import record
from sklearn.datasets import load_digits

from cotrain import FederatedCoTrainer
from cotrain.trust.pool_halves import PoolHalvesTrust
from learners import TorchClassifier
from learners.modules import MLP


def run(seed: int, rows: int, trust: object, sites: int = 5) -> dict:
    """One federation; its figures."""
    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(X))
    test, pool, labelled = order[:500], order[500:1000], order[1000 : 1000 + sites * rows]
    parts = np.array_split(labelled, sites)
    settings = dict(max_epochs=60, epochs_per_fit=5, lr=3e-3, n_threads=1)
    learners = [
        TorchClassifier(
            MLP, module_params={"hidden": (64,)}, random_state=seed * 10 + i, **settings
        )
        for i in range(sites)
    ]
    trainer = FederatedCoTrainer(
        learners, rounds=8, trust=trust, consensus="majority", random_state=seed
    )
    start = time.perf_counter()
    trainer.fit(
        [X[p] for p in parts],
        [y[p] for p in parts],
        X_public=X[pool],
        y_public=y[pool],
        eval_set=(X[test], y[test]),
    )
    history = trainer.history_
    return {
        "round 1": history[0].mean_accuracy,
        "last": history[-1].mean_accuracy,
        "U acc last": history[-1].pseudo_label_accuracy,
        "changed rounds 2-8": " ".join(str(r.changed) for r in history[1:]),
        "s": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rows", type=int, nargs="*", default=[40, 100])
    args = parser.parse_args()
    rows = []
    for n in args.rows:
        for seed in range(args.seeds):
            for name, trust in (("FedCT", None), ("PoolHalves", PoolHalvesTrust())):
                rows.append({"rows/site": n, "seed": seed, "trust": name, **run(seed, n, trust)})
    table = pd.DataFrame(rows)
    means = table.groupby(["rows/site", "trust"])[["round 1", "last", "U acc last", "s"]].mean()
    text = (
        f"{table.round(3).to_string(index=False)}\n\nmeans over seeds 0-{args.seeds - 1}:\n"
        f"{means.round(3).to_string()}"
    )
    record("pool_halves", text)


if __name__ == "__main__":
    main()
