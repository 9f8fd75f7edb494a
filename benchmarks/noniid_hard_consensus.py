"""Hard-label consensus on pathological non-iid digits: quality-aware vote vs majority.

FedCT Table 2 shape (``experiments/table2_digits_quality.toml``: 10 TorchMLP clients, digits,
two_alpha splits (100, 2) mild, (100, 0.01) strong, (0.01, 0.01) pathological, 30 rounds):
majority vote against ``consensus.QualityVote``, hard votes weighted by
``(s_i(x) / max_j s_j(x))^power`` with ``s_i`` a FedAUX certainty scorer of client ``i``
(exact scores, and DP scores: (0.5, 1e-5)-DP per private record against the server).
``--ablation`` adds the pathological split at other sharpening settings (power 1 is FedAUX's
plain certainty-weighted vote, ``top_k = 1`` lets only the most certain client vote).
Accuracy = mean test accuracy of the 10 local models, mean ± std over seeds.

    python benchmarks/noniid_hard_consensus.py --seeds 3 --ablation
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from _common import record

from cotrain.experiment.config import Run, load_experiment
from cotrain.experiment.run import run_one

EXPERIMENT = Path(__file__).parent.parent / "experiments" / "table2_digits_quality.toml"

#: (label, method overrides) of the pathological ablation
ABLATION = [
    ("(0.01,0.01) quality power 1 (= FedAUX certainty-weighted vote)", {"power": 1}),
    ("(0.01,0.01) quality power 4", {"power": 4}),
    ("(0.01,0.01) quality power 64", {"power": 64}),
    ("(0.01,0.01) quality top_k 1 (most certain client decides)", {"power": 1, "top_k": 1}),
    ("(0.01,0.01) quality top_k 3, power 1", {"power": 1, "top_k": 3}),
]


def ablation_runs(runs: list[Run], seeds: list[int]) -> list[Run]:
    """The pathological FedAUX-scored variant with other ``power`` / ``top_k``."""
    base = next(r for r in runs if r.variant == "(0.01,0.01) FedCT quality, FedAUX scores")
    out = []
    for label, overrides in ABLATION:
        config = copy.deepcopy(base.config)
        config["method"].update(overrides)
        out += [Run(label, seed, config) for seed in seeds]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--ablation", action="store_true", help="also the pathological ablation")
    parser.add_argument("--only", default="", help="run only variants whose label contains this")
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    _, runs = load_experiment(EXPERIMENT)
    labels = list(dict.fromkeys(r.variant for r in runs))
    todo = [Run(r.variant, s, r.config) for r in runs if r.seed == 0 for s in seeds]
    if args.ablation:
        todo += ablation_runs(runs, seeds)
        labels += [label for label, _ in ABLATION]
    todo = [r for r in todo if args.only in r.variant]
    acc: dict[str, list[float]] = {}
    wall: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for run in todo:
            start = time.perf_counter()
            result = run_one(run, Path(tmp) / run.key)
            acc.setdefault(run.variant, []).append(result["accuracy"])
            wall[run.variant] = wall.get(run.variant, 0.0) + time.perf_counter() - start
            print(f"{run.variant} seed {run.seed}: {result['accuracy']:.3f}", flush=True)
    lines = [
        f"digits, 10 TorchMLP clients, 30 rounds, seeds {seeds}; mean test accuracy of the "
        "local models, mean ± std (ddof 0) over seeds",
        "",
        "| variant | accuracy | per seed | wall s |",
        "| --- | --- | --- | --- |",
    ]
    for label in labels:
        if label not in acc:
            continue
        a = np.array(acc[label])
        per_seed = ", ".join(f"{v:.3f}" for v in a)
        lines.append(
            f"| {label} | {a.mean():.3f} ± {a.std():.3f} | {per_seed} | {wall[label]:.0f} |"
        )
    record("noniid_hard_consensus", "\n".join(lines))


if __name__ == "__main__":
    main()
