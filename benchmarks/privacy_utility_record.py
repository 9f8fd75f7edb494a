"""Record-level privacy-utility of FedCT with subsample-and-aggregate inside every client.

Each client releases, every round, the GNMax aggregate of ``n_teachers`` teachers (clones of
its own learner) trained on disjoint random shards of its private data ∪ the pseudo-labelled
public rows (:class:`cotrain.privacy.mechanisms.teachers.SubsampleAndAggregate`). The guarantee is
(ε, δ)-DP **with respect to one private training record of a client, against the server** (the
noise is added at the client), for any learner, composed over all rounds; ε is the trainer's
``privacy_report()["max_epsilon"]`` at δ = 1e-5. The noise σ of a point is calibrated so that
the whole run (``rounds`` releases of |U| labels) spends the target total ε:
``σ = z(ε_total, δ)·sqrt(rounds)·sqrt(2·|U|)``.

Beside it, on the same splits and learners: local-only (no communication) and non-private
FedCT (same rounds), and the teachers' clean majority (σ ≈ 0, NOT private: the cost of
sharding alone, apart from the noise). Metric: mean test accuracy of the clients' own models
after the last round (they train on their private data ∪ the consensus; they never leave the
site). Teachers per client: adult 100 (40 private rows each), digits 8 (9 rows each: a
client holds only 74 rows).

Datasets: UCI Adult (/work/shared/data/adult via cotrain.datasets; 5 clients, mixed trees,
|U| = 1,000) and digits (10 clients, mixed trees, |U| = 700). One seed (runtime ≤ 15 min on
2 cores).

    python benchmarks/privacy_utility_record.py
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cotrain import FederatedCoTrainer, partition
from cotrain.baselines import LocalOnly
from cotrain.datasets.loaders import load_digits_split, load_paper_split
from cotrain.privacy import gaussian_noise_multiplier
from cotrain.privacy.mechanisms.teachers import SubsampleAndAggregate

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "privacy_utility_record.json"
PLOT = ROOT / "docs" / "privacy_utility_record.png"
DELTA = 1e-5

#: per dataset: federation, split sizes, rounds, teachers per client, total ε targets
CONFIGS: dict[str, dict[str, Any]] = {
    "adult": {
        "n_clients": 5,
        "n_per_client": 4000,
        "n_public": 1000,
        "n_test": 5000,
        "rounds": 2,
        "n_teachers": 100,
        "epsilons": [2.0, 4.0, 8.0, 32.0],
    },
    "digits": {
        "n_clients": 10,
        "n_public": 700,
        "n_test": 360,
        "rounds": 2,
        "n_teachers": 8,
        "epsilons": [1.0, 2.0, 4.0, 8.0, 32.0, 128.0, 1024.0],
    },
}


def learners(n: int, seed: int) -> list[Any]:
    """Mixed trees: DecisionTree, RandomForest(20), ExtraTrees(20), repeated."""
    kinds = [
        lambda s: DecisionTreeClassifier(min_samples_leaf=2, random_state=s),
        lambda s: RandomForestClassifier(n_estimators=20, random_state=s, n_jobs=1),
        lambda s: ExtraTreesClassifier(n_estimators=20, random_state=s, n_jobs=1),
    ]
    return [kinds[i % 3](seed * 100 + i) for i in range(n)]


def load(name: str, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """The split and the clients' shares of the labelled rows."""
    if name == "adult":
        split = load_paper_split(
            "adult",
            random_state=seed,
            sizes={
                "n_public": cfg["n_public"],
                "n_labeled": cfg["n_clients"] * cfg["n_per_client"],
                "n_test": cfg["n_test"],
            },
        )
    else:
        split = load_digits_split(random_state=seed, n_test=cfg["n_test"], n_public=cfg["n_public"])
    parts = partition.iid(split.y_labeled, cfg["n_clients"], random_state=seed)
    return {
        "X": [split.X_labeled[p] for p in parts],
        "y": [split.y_labeled[p] for p in parts],
        "X_public": split.X_public,
        "test": (split.X_test, split.y_test),
        # the dataset's label space: public configuration, which a private run needs
        "classes": np.unique(np.concatenate([split.y_labeled, split.y_test])),
    }


def sigma_for(total_epsilon: float, rounds: int, n_public: int) -> float:
    """σ per vote count so that ``rounds`` releases of ``n_public`` labels spend ε in all."""
    z = gaussian_noise_multiplier(total_epsilon, DELTA) * math.sqrt(rounds)
    return z * math.sqrt(2.0 * n_public)


def run_dataset(name: str, cfg: dict[str, Any], seed: int, n_jobs: int) -> list[dict[str, Any]]:
    data = load(name, cfg, seed)
    n, rounds = cfg["n_clients"], cfg["rounds"]
    fit_kw = {"X_public": data["X_public"], "eval_set": data["test"]}
    rows: list[dict[str, Any]] = []
    sizes = [len(y) for y in data["y"]]

    def add(method: str, acc: float, eps: float | None, wall: float, **extra: Any) -> None:
        row = {"dataset": name, "method": method, "accuracy": float(acc), "epsilon": eps}
        row.update(extra, wall_s=round(wall, 1))
        rows.append(row)
        shown = "—" if eps is None else f"{eps:.3g}"
        print(f"  {name:<6} {method:<28} acc {acc:.4f}  ε {shown:>6}  {wall:5.0f} s", flush=True)

    t0 = time.perf_counter()
    local = LocalOnly(learners(n, seed), random_state=seed)
    local.fit(data["X"], data["y"], eval_set=data["test"])
    add("local-only", local.history_[0].mean_accuracy, None, time.perf_counter() - t0)

    t0 = time.perf_counter()
    fedct = FederatedCoTrainer(learners(n, seed), rounds=rounds, random_state=seed, n_jobs=n_jobs)
    fedct.fit(data["X"], data["y"], **fit_kw)
    add(
        "FedCT (no privacy)",
        fedct.history_[-1].mean_accuracy,
        None,
        time.perf_counter() - t0,
        consensus_accuracy=fedct.history_[-1].consensus_accuracy,
    )

    def with_teachers(sigma: float) -> tuple[Any, dict[str, Any], float]:
        mech = SubsampleAndAggregate(n_teachers=cfg["n_teachers"], sigma=sigma, delta=DELTA)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*reproducible_noise.*")
            trainer = FederatedCoTrainer(
                learners(n, seed),
                rounds=rounds,
                random_state=seed,
                n_jobs=n_jobs,
                privacy=mech,
                classes=data["classes"],
                reproducible_noise=True,
            ).fit(data["X"], data["y"], **fit_kw)
        return trainer, trainer.privacy_report(), time.perf_counter() - t0

    # the cost of sharding alone: teachers' clean majority (σ = 1e-3 only breaks ties)
    trainer, _, wall = with_teachers(1e-3)
    add(
        "FedCT + S&A, σ≈0 (NOT private)",
        trainer.history_[-1].mean_accuracy,
        None,
        wall,
        sigma=1e-3,
        consensus_accuracy=trainer.history_[-1].consensus_accuracy,
    )
    for target in cfg["epsilons"]:
        sigma = sigma_for(target, rounds, len(data["X_public"]))
        trainer, report, wall = with_teachers(sigma)
        add(
            f"FedCT + S&A (ε={target:g})",
            trainer.history_[-1].mean_accuracy,
            float(report["max_epsilon"]),
            wall,
            target_epsilon=target,
            sigma=sigma,
            unit=report.get("unit"),
            adversary=report.get("adversary"),
            consensus_accuracy=trainer.history_[-1].consensus_accuracy,
        )
    for row in rows:
        row.update(
            n_clients=n,
            rows_per_client=sizes,
            n_public=len(data["X_public"]),
            rounds=rounds,
            n_teachers=cfg["n_teachers"],
        )
    return rows


def verdict(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Best private accuracy at total ε ≤ 8 against local-only + 0.02."""
    mine = [r for r in rows if r["dataset"] == name]
    local = next(r["accuracy"] for r in mine if r["method"] == "local-only")
    fedct = next(r["accuracy"] for r in mine if r["method"] == "FedCT (no privacy)")
    clean = next(r["accuracy"] for r in mine if r["method"].startswith("FedCT + S&A, σ≈0"))
    private = [r for r in mine if r["epsilon"] is not None and r["epsilon"] <= 8.0 + 1e-9]
    best = max(private, key=lambda r: r["accuracy"]) if private else None
    gain = None if best is None else best["accuracy"] - local
    return {
        "local_only": local,
        "fedct_no_privacy": fedct,
        "teachers_clean_majority_not_private": clean,
        "best_private_at_eps_le_8": None if best is None else best["accuracy"],
        "its_epsilon": None if best is None else best["epsilon"],
        "gain_over_local": gain,
        "target_met": gain is not None and gain >= 0.02,
    }


def plot(rows: list[dict[str, Any]], names: list[str]) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        mine = [r for r in rows if r["dataset"] == name]
        priv = sorted((r for r in mine if r["epsilon"] is not None), key=lambda r: r["epsilon"])
        ax.plot(
            [r["epsilon"] for r in priv],
            [r["accuracy"] for r in priv],
            "o-",
            label="FedCT + subsample-and-aggregate",
        )
        for method, color, style in (
            ("FedCT (no privacy)", "k", "--"),
            ("FedCT + S&A, σ≈0 (NOT private)", "tab:blue", "-."),
            ("local-only", "gray", ":"),
        ):
            acc = next(r["accuracy"] for r in mine if r["method"] == method)
            ax.axhline(acc, color=color, ls=style, lw=1, label=method)
        ax.axvline(8.0, color="tab:red", lw=0.8, alpha=0.5)
        ax.set_xscale("log")
        ax.set_xticks([r["epsilon"] for r in priv])
        ax.set_xticklabels([f"{r['epsilon']:g}" for r in priv])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        r0 = mine[0]
        ax.set_xlabel(f"total ε over {r0['rounds']} rounds, one private record (δ = 1e-5)")
        ax.set_ylabel("mean client test accuracy")
        ax.set_title(
            f"{name}: {r0['n_clients']} clients, |U| = {r0['n_public']}, "
            f"{r0['n_teachers']} teachers"
        )
        ax.legend(fontsize=8)
    fig.tight_layout()
    PLOT.parent.mkdir(exist_ok=True)
    fig.savefig(PLOT, dpi=120)
    print(f"plot saved to {PLOT}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", nargs="*", default=["adult", "digits"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for name in args.datasets:
        rows.extend(run_dataset(name, CONFIGS[name], args.seed, args.n_jobs))
    verdicts = {name: verdict(rows, name) for name in args.datasets}
    wall = time.perf_counter() - start
    out = {
        "command": f"python {' '.join(sys.argv)}",
        "date": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "guarantee": "(ε, δ=1e-5)-DP w.r.t. one private training record of a client, against "
        "the server; ε total over all rounds (trainer.privacy_report())",
        "configs": {name: CONFIGS[name] for name in args.datasets},
        "seed": args.seed,
        "rows": rows,
        "verdict": verdicts,
        "wall_s": round(wall, 1),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nresults saved to {RESULTS}")
    for name, v in verdicts.items():
        print(
            f"{name}: local {v['local_only']:.4f}, FedCT {v['fedct_no_privacy']:.4f}, teachers' "
            f"clean majority {v['teachers_clean_majority_not_private']:.4f}, best "
            f"private at ε ≤ 8: {v['best_private_at_eps_le_8']} (ε {v['its_epsilon']}); "
            f"target (≥ local + 0.02) {'MET' if v['target_met'] else 'NOT met'}"
        )
    plot(rows, args.datasets)
    print(f"wall time {wall:.0f} s")
    return out


if __name__ == "__main__":
    main()
