"""Sparse ternary compression (STC) against dense and sparse FedAvg on digits.

Sattler's thesis, ch. 3–4: STC (top-k, ternarised to ±μ, error accumulation, Golomb-coded
positions, compressed downstream) needs far fewer bits than FedAvg to reach a target
accuracy (Table 4.2), and degrades more gracefully than FedAvg's sparse variants under
non-iid data (Fig. 4.1, 4.3). Setup: scikit-learn digits (1437 training rows = the
labelled rows and the public pool of ``load_digits_split``, 360 test rows), 10 clients,
the MLP 64-128-10 of ``examples/compare_methods.py`` (Adam, lr 3e-3, batch 64), every
client in every round. Accuracy is the global model's test accuracy.

(a) iid: dense FedAvg (1 local epoch a round) against STC at sparsity p (same local work
    per round, more rounds allowed): bytes uploaded per client until the global model's
    accuracy (mean of 5 consecutive rounds) first reaches the target = dense FedAvg's
    final accuracy (mean of its last 5 rounds) minus 1 point.
(b) the same budget of local training (``--epochs`` epochs per client, 3 mini-batch steps
    an epoch) spent in different ways, on iid and Dirichlet(α) splits: dense FedAvg (1
    epoch a round), FedAvg with n local epochs a round (the thesis's communication delay:
    fewer, larger updates), and, communicating after every mini-batch step as the thesis
    does for STC (ν = 1, §4.2): top-k sparsified updates without residuals (FedAvg's naive
    sparse variant), top-k with residuals (upstream only, the thesis's most robust existing
    method) and STC. Accuracy = the maximum over rounds (as Fig. 4.3). The shape:
    STC loses less accuracy from iid to non-iid than FedAvg's sparse variants.

    nice -n 19 python benchmarks/stc_fedavg.py --seeds 3
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np
from _common import record

from cotrain import partition
from cotrain.baselines import FedAvg
from cotrain.compression import SparseTernaryCompression, TopK
from cotrain.datasets.loaders import load_digits_split
from learners import MLP, TorchClassifier

N_CLIENTS = 10


def learner(seed: int) -> TorchClassifier:
    """The MLP client of examples/compare_methods.py."""
    return TorchClassifier(
        MLP,
        module_params={"hidden": (128,)},
        lr=3e-3,
        random_state=seed,
        n_threads=1,
        classes=list(range(10)),
    )


def data(seed: int, alpha: float | None) -> tuple[list, list, tuple]:
    """Ten clients' data (iid, or Dirichlet(alpha)) and the test set."""
    split = load_digits_split(random_state=seed)
    X = np.concatenate([split.X_labeled, split.X_public]).astype(np.float32)
    y = np.concatenate([split.y_labeled, split.y_public])
    if alpha is None:
        parts = partition.iid(y, N_CLIENTS, random_state=seed)
    else:
        parts = partition.dirichlet(y, N_CLIENTS, alpha, random_state=seed)
    return [X[p] for p in parts], [y[p] for p in parts], (split.X_test, split.y_test)


def run(
    seed: int,
    alpha: float | None,
    rounds: int,
    epochs: int,
    compression: Any,
    steps: int | None = None,
) -> dict:
    """One FedAvg run (``steps``: mini-batch steps a round instead of ``epochs``)."""
    X, y, test = data(seed, alpha)
    start = time.perf_counter()
    fitted = FedAvg(
        learner(seed).set_params(steps_per_fit=steps),
        rounds=rounds,
        local_epochs=epochs,
        compression=compression,
        random_state=seed,
    ).fit(X, y, eval_set=test)
    h = fitted.history_
    return {
        "acc": np.array([r.mean_accuracy for r in h]),
        "up": np.cumsum([r.bytes_up for r in h]) / N_CLIENTS,
        "down": np.cumsum([r.bytes_down for r in h]) / N_CLIENTS,
        "down_later": np.mean([r.bytes_down for r in h[1:]]) / N_CLIENTS,
        "wall": time.perf_counter() - start,
    }


def smoothed(acc: np.ndarray, width: int = 5) -> np.ndarray:
    """Trailing mean over ``width`` rounds (the thesis smooths its curves with 5)."""
    c = np.cumsum(np.insert(acc, 0, 0.0))
    out = np.empty(len(acc))
    for t in range(len(acc)):
        lo = max(0, t + 1 - width)
        out[t] = (c[t + 1] - c[lo]) / (t + 1 - lo)
    return out


def to_target(r: dict, target: float) -> tuple[float, float]:
    """(round, uplink bytes per client) when the smoothed accuracy first reaches target."""
    hit = np.flatnonzero(smoothed(r["acc"]) >= target - 1e-12)
    if hit.size == 0:
        return np.nan, np.nan
    return float(hit[0] + 1), float(r["up"][hit[0]])


def mean_std(values: list[float], fmt: str = "{:.3f}") -> str:
    v = np.asarray(values, dtype=float)
    if np.isnan(v).any():
        return f"n.a. ({int(np.isnan(v).sum())}/{len(v)} seeds miss)"
    return f"{fmt.format(v.mean())} ± {fmt.format(v.std())}"


def part_a(args: argparse.Namespace) -> str:
    lines = [
        f"(a) iid, 10 clients, 1 local epoch a round: dense FedAvg {args.rounds} rounds, "
        f"STC up to {args.stc_rounds} rounds; target = dense final accuracy - 1 point",
        "",
        "| method | final accuracy | rounds to target | uplink KB/client to target "
        "| x fewer than dense | uplink B/round/client | downlink B/round/client after round 1 "
        "| wall s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    dense = [run(s, None, args.rounds, 1, None) for s in args.seed_list]
    targets = [smoothed(r["acc"])[-1] - 0.01 for r in dense]
    configs = [("dense FedAvg", dense)]
    for p in args.sparsities:
        runs = [
            run(s, None, args.stc_rounds, 1, SparseTernaryCompression(sparsity=p))
            for s in args.seed_list
        ]
        configs.append((f"STC p={p:g}", runs))
    dense_bytes = [to_target(r, t)[1] for r, t in zip(dense, targets, strict=True)]
    for name, runs in configs:
        hits = [to_target(r, t) for r, t in zip(runs, targets, strict=True)]
        ratio = [d / h[1] for d, h in zip(dense_bytes, hits, strict=True)]
        n = [len(r["acc"]) for r in runs]
        lines.append(
            f"| {name} | {mean_std([smoothed(r['acc'])[-1] for r in runs])} "
            f"| {mean_std([h[0] for h in hits], '{:.0f}')} "
            f"| {mean_std([h[1] / 1e3 for h in hits], '{:.1f}')} "
            f"| {mean_std(ratio, '{:.0f}')} "
            f"| {np.mean([r['up'][-1] / k for r, k in zip(runs, n, strict=True)]):.0f} "
            f"| {np.mean([r['down_later'] for r in runs]):.0f} "
            f"| {np.mean([r['wall'] for r in runs]):.1f} |"
        )
    lines.append("targets (dense final - 0.01): " + ", ".join(f"{t:.3f}" for t in targets))
    lines.append(
        "round 1: every client downloads the dense initial model (38440 B), in all methods"
    )
    return "\n".join(lines)


def part_b(args: argparse.Namespace) -> str:
    E, p, S = args.epochs, args.sparsity_b, 3 * args.epochs
    methods: list[tuple[str, int, int, Any, int | None]] = [
        ("dense FedAvg, 1 epoch/round", E, 1, None, None),
        *[(f"FedAvg, {n} epochs/round", E // n, n, None, None) for n in args.delays],
        (f"top-k p={p:g}, no residuals, 1 step/round", S, 1, TopK(p, residuals=False), 1),
        (f"top-k p={p:g}, residuals, 1 step/round", S, 1, TopK(p), 1),
        (f"STC p={p:g}, 1 step/round", S, 1, SparseTernaryCompression(sparsity=p), 1),
    ]
    lines = [
        f"(b) {E} local epochs ({S} mini-batch steps) per client in all; iid vs "
        f"Dirichlet(alpha={args.alpha:g}); accuracy = maximum over rounds",
        "",
        "| method | rounds | uplink KB/client | iid | non-iid | drop (points) | wall s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    per_seed = []
    for name, rounds, epochs, comp, steps in methods:
        res = {
            split: [run(s, a, rounds, epochs, comp, steps) for s in args.seed_list]
            for split, a in (("iid", None), ("non-iid", args.alpha))
        }
        acc = {k: [float(r["acc"].max()) for r in v] for k, v in res.items()}
        per_seed.append(
            f"{name}: iid "
            + " ".join(f"{a:.3f}" for a in acc["iid"])
            + ", non-iid "
            + " ".join(f"{a:.3f}" for a in acc["non-iid"])
        )
        drop = [100 * (a - b) for a, b in zip(acc["iid"], acc["non-iid"], strict=True)]
        wall = np.mean([r["wall"] for v in res.values() for r in v])
        up = np.mean([r["up"][-1] for v in res.values() for r in v]) / 1e3
        lines.append(
            f"| {name} | {rounds} | {up:.1f} | {mean_std(acc['iid'])} "
            f"| {mean_std(acc['non-iid'])} | {mean_std(drop, '{:.1f}')} | {wall:.1f} |"
        )
    lines += ["", "per seed (seeds in order):", *per_seed]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--seeds", type=int, default=3, help="number of seeds (default 3: seeds 0, 1, 2)")
    add("--rounds", type=int, default=60, help="rounds of dense FedAvg in (a) (default 60)")
    add("--stc-rounds", type=int, default=130, help="most rounds of STC in (a) (default 130)")
    add(
        "--sparsities",
        type=float,
        nargs="+",
        default=[0.01],
        help="STC sparsity rates p in (a), fraction of entries sent (default 0.01)",
    )
    add("--epochs", type=int, default=60, help="local epochs per client in (b) (default 60)")
    add(
        "--delays",
        type=int,
        nargs="+",
        default=[10, 20, 60],
        help="FedAvg local epochs per round in (b) (default 10 20 60)",
    )
    add("--sparsity-b", type=float, default=0.01, help="sparsity p in (b) (default 0.01)")
    add("--alpha", type=float, default=0.1, help="Dirichlet alpha of (b) (default 0.1)")
    add("--part", choices=["a", "b", "both"], default="both", help="which part to run")
    add("--name", default="stc_fedavg", help="results file name (default stc_fedavg)")
    args = parser.parse_args()
    args.seed_list = list(range(args.seeds))
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    parts = []
    if args.part in ("a", "both"):
        parts.append(part_a(args))
    if args.part in ("b", "both"):
        parts.append(part_b(args))
    parts.append(f"seeds {args.seed_list}; total wall time {time.perf_counter() - start:.0f} s")
    record(args.name, "\n\n".join(parts))


if __name__ == "__main__":
    main()
