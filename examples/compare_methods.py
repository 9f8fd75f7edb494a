"""FedCT against the methods it is compared with, on scikit-learn's digits.

Methods: FedCT (hard labels, majority vote), distributed distillation (DD: soft labels,
mean), FedAvg (parameter averaging), FedAvg with sparse ternary compression (STC, 3x the
rounds: it needs more rounds to reach FedAvg's accuracy), FedDF / FedDS / FedAUX (FedAvg
plus server-side distillation on the public pool: unweighted, entropy-weighted with a
rotation loss, certainty-weighted with (0.1, 1e-5)-DP scorers per private record against
the server), PATE (noisy teacher vote, one student), local-only and centralised training.
Neural clients (an MLP or a small CNN via ``learners.TorchClassifier``), 5 clients, iid or
Dirichlet splits; the table reports mean ± std over seeds of the test accuracy
(FedCT/DD/local: mean of the local models; FedAvg: the global model; FedDF/FedDS/FedAUX:
the server's student; PATE: the student; centralised: the pooled model), uplink bytes per
round per client, and wall time. A second part runs a mixed federation (2 neural clients,
a decision tree, a random forest and XGBoost) against each client's local-only accuracy.

Run::

    python examples/compare_methods.py                 # iid and Dirichlet(0.5), 3 seeds
    python examples/compare_methods.py --model cnn --seeds 1 --plot compare.png
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer, partition
from cotrain.baselines import (
    PATE,
    Centralized,
    DistributedDistillation,
    FedAUX,
    FedAvg,
    FedDF,
    FedDS,
    LocalOnly,
)
from cotrain.compression import SparseTernaryCompression
from cotrain.datasets.loaders import load_digits_split
from learners import MLP, SmallCNN, TorchClassifier, XGBoostClassifier

N_CLIENTS = 5


def neural(model: str, seed: int, max_epochs: int, epochs_per_fit: int) -> TorchClassifier:
    """The neural client: an MLP (64-128-10) or a small CNN on the 8x8 images."""
    if model == "cnn":
        return TorchClassifier(
            SmallCNN,
            module_params={"image_size": 8},
            max_epochs=max_epochs,
            epochs_per_fit=epochs_per_fit,
            lr=3e-3,
            random_state=seed,
            n_threads=1,
        )
    return TorchClassifier(
        MLP,
        module_params={"hidden": (128,)},
        max_epochs=max_epochs,
        epochs_per_fit=epochs_per_fit,
        lr=3e-3,
        random_state=seed,
        n_threads=1,
    )


def run_methods(
    split: dict, parts: list[np.ndarray], args: argparse.Namespace, seed: int
) -> list[dict[str, Any]]:
    """Every method on one split; one result row per method."""
    X = [split["X_labeled"][p] for p in parts]
    y = [split["y_labeled"][p] for p in parts]
    test = (split["X_test"], split["y_test"])
    E, B = args.max_epochs, args.epochs_per_round

    def clients() -> list[TorchClassifier]:
        return [neural(args.model, seed * 100 + i, E, B) for i in range(N_CLIENTS)]

    def distilled(cls: type) -> Callable[[], Any]:
        """FedDF, FedDS or FedAUX: FedAvg's settings, distilling on the public pool."""
        return lambda: cls(
            neural(args.model, seed, B, B),
            rounds=args.fedavg_rounds,
            local_epochs=B,
            random_state=seed,
        ).fit(X, y, X_public=split["X_public"], eval_set=test)

    methods: dict[str, Callable[[], Any]] = {
        "FedCT": lambda: FederatedCoTrainer(clients(), rounds=args.rounds, random_state=seed).fit(
            X, y, X_public=split["X_public"], eval_set=test
        ),
        "DD": lambda: DistributedDistillation(clients(), rounds=args.rounds, random_state=seed).fit(
            X, y, X_public=split["X_public"], eval_set=test
        ),
        "FedAvg": lambda: FedAvg(
            neural(args.model, seed, B, B),
            rounds=args.fedavg_rounds,
            local_epochs=B,
            random_state=seed,
        ).fit(X, y, eval_set=test),
        "FedAvg + STC": lambda: FedAvg(
            neural(args.model, seed, B, B),
            rounds=3 * args.fedavg_rounds,
            local_epochs=B,
            compression=SparseTernaryCompression(sparsity=0.01),
            random_state=seed,
        ).fit(X, y, eval_set=test),
        **{
            name: distilled(cls)
            for name, cls in (("FedDF", FedDF), ("FedDS", FedDS), ("FedAUX", FedAUX))
        },
        "PATE": lambda: PATE(
            clients(),
            neural(args.model, seed, E, B),
            noise_sigma=args.pate_sigma,
            random_state=seed,
        ).fit(X, y, X_public=split["X_public"], eval_set=test),
        "local only": lambda: LocalOnly(clients()).fit(X, y, eval_set=test),
        "centralised": lambda: Centralized(neural(args.model, seed, E, B)).fit(X, y, eval_set=test),
    }
    rows = []
    for name, run in methods.items():
        start = time.perf_counter()
        fitted = run()
        wall = time.perf_counter() - start
        history = fitted.history_
        last = history[-1]
        rows.append(
            {
                "method": name,
                # PATE's model is its student (the consensus_accuracy of its one record)
                "accuracy": last.consensus_accuracy if name == "PATE" else last.mean_accuracy,
                "up bytes/round/client": np.mean(
                    [r.bytes_up / max(len(r.clients) - len(r.failed), 1) for r in history]
                ),
                "rounds": len(history),
                "wall s": wall,
                "curve": [r.mean_accuracy for r in history],
            }
        )
    return rows


def mixed_federation(
    split: dict, parts: list[np.ndarray], args: argparse.Namespace, seed: int
) -> pd.DataFrame:
    """2 neural clients + DT + RF + XGBoost: each client's FedCT vs local-only accuracy."""
    X = [split["X_labeled"][p] for p in parts]
    y = [split["y_labeled"][p] for p in parts]
    test = (split["X_test"], split["y_test"])
    ests = [
        neural("cnn", seed, args.max_epochs, args.epochs_per_round),
        neural("mlp", seed + 1, args.max_epochs, args.epochs_per_round),
        DecisionTreeClassifier(random_state=seed),
        RandomForestClassifier(random_state=seed),
        XGBoostClassifier(n_estimators=50, random_state=seed),
    ]
    fedct = FederatedCoTrainer(ests, rounds=args.rounds, random_state=seed).fit(
        X, y, X_public=split["X_public"], eval_set=test
    )
    local = fedct.history_[0].client_accuracy  # round 1: private data only
    final = fedct.history_[-1].client_accuracy
    names = ["CNN", "MLP", "DT", "RF", "XGBoost"]
    return pd.DataFrame(
        {
            "client": names,
            "local only": [local[i] for i in range(5)],
            "FedCT": [final[i] for i in range(5)],
        }
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--seeds", type=int, default=3, help="runs per split, seeds 0..SEEDS-1 (default 3)")
    add(
        "--model",
        choices=["mlp", "cnn"],
        default="mlp",
        help="every neural client's network: an MLP 64-128-10 or a small CNN (default mlp)",
    )
    add(
        "--rounds",
        type=int,
        default=30,
        help="communication rounds of FedCT and distributed distillation (default 30)",
    )
    add("--fedavg-rounds", type=int, default=30, help="communication rounds of FedAvg (default 30)")
    add(
        "--max-epochs",
        type=int,
        default=60,
        help="epochs of a client's first fit on its own data (default 60)",
    )
    add(
        "--epochs-per-round",
        type=int,
        default=2,
        help="local epochs between label exchanges (communication period b; FedAvg: local "
        "epochs between weight averages) (default 2)",
    )
    add(
        "--pate-sigma",
        type=float,
        default=1.0,
        help="PATE: std of the Gaussian noise added to the teachers' vote counts (default 1.0)",
    )
    add(
        "--alpha",
        type=float,
        default=0.5,
        help="label skew of the non-iid split, Dirichlet(alpha): smaller is more skewed "
        "(default 0.5)",
    )
    add("--plot", metavar="FILE", help="save test accuracy per round (seed 0) to this image")
    add(
        "--no-mixed",
        action="store_true",
        help="skip the second part (the mixed federation of neural and tree clients)",
    )
    args = parser.parse_args(argv)

    results, curves = [], {}
    for split_name in ["iid", f"dirichlet({args.alpha})"]:
        for seed in range(args.seeds):
            split = load_digits_split(random_state=seed)
            parts = (
                partition.iid(split["y_labeled"], N_CLIENTS, random_state=seed)
                if split_name == "iid"
                else partition.dirichlet(
                    split["y_labeled"], N_CLIENTS, args.alpha, random_state=seed
                )
            )
            for row in run_methods(split, parts, args, seed):
                curves.setdefault((split_name, row["method"]), row.pop("curve"))
                results.append({"split": split_name, "seed": seed, **row})
    frame = pd.DataFrame(results)
    table = frame.groupby(["split", "method"], sort=False).agg(
        accuracy=("accuracy", "mean"),
        std=("accuracy", "std"),
        up_bytes=("up bytes/round/client", "mean"),
        rounds=("rounds", "first"),
        wall_s=("wall s", "mean"),
    )
    pd.set_option("display.width", 120)
    print(f"digits, {N_CLIENTS} {args.model.upper()} clients, mean over {args.seeds} seeds")
    print(table.round(4).to_string())
    if not args.no_mixed:
        split = load_digits_split(random_state=0)
        parts = partition.iid(split["y_labeled"], N_CLIENTS, random_state=0)
        mixed = mixed_federation(split, parts, args, seed=0)
        print("\nmixed federation (seed 0): test accuracy of each client")
        print(mixed.round(3).to_string(index=False))
        local, fedct = mixed["local only"].mean(), mixed["FedCT"].mean()
        print(f"mean: local only {local:.3f}, FedCT {fedct:.3f}")
    if args.plot:
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for ax, split_name in zip(axes, ["iid", f"dirichlet({args.alpha})"], strict=True):
            for (s, method), curve in curves.items():
                if s == split_name and len(curve) > 1:
                    ax.plot(range(1, len(curve) + 1), curve, label=method)
            ax.set_title(f"{split_name}, seed 0")
            ax.set_xlabel("round")
        axes[0].set_ylabel("test accuracy")
        axes[1].legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"plot saved to {args.plot}")


if __name__ == "__main__":
    main()
