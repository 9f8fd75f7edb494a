"""What trust="auto" (the default) costs: the breast-cancer demo with and without it.

The `cotrain demo` federation (DT, RF, RuleFit, XGBoost, RF on the FedCT paper's
breast-cancer split, 10 rounds), fitted with ``trust=None`` (the paper's FedCT) and
``trust="auto"`` alternately, ``--repeats`` times each, in one process; reports the
wall time of each fit, the ratio of the medians, and both runs' accuracies.

    python benchmarks/trust_cost.py --repeats 2
"""

from __future__ import annotations

import argparse
import statistics

from _common import record

from cotrain.demo import mixed_estimators, run_seed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"None": [], "auto": []}
    rows = {}
    for _ in range(args.repeats):
        for name, trust in (("None", None), ("auto", "auto")):
            row, trainer = run_seed(mixed_estimators, args.seed, trust=trust)
            times[name].append(row["fit_time_s"])
            weights = [sorted(set(r.trust.values())) for r in trainer.history_[1:]]
            rows[name] = (row, weights)
    lines = [
        f"breast-cancer demo federation (DT, RF, RuleFit, XGBoost, RF), seed {args.seed}, "
        f"10 rounds, {args.repeats} fits each, alternating",
        "",
        "| trust | fit wall time (s) | mean client accuracy | consensus accuracy |",
        "| --- | --- | --- | --- |",
    ]
    for name in times:
        row = rows[name][0]
        lines.append(
            f"| {name} | {', '.join(f'{t:.1f}' for t in times[name])} | "
            f"{row['fedct_mean_client']:.3f} | {row['fedct_consensus']:.3f} |"
        )
    ratio = statistics.median(times["auto"]) / statistics.median(times["None"])
    lines += ["", f"cost of trust='auto': {ratio:.2f}× the wall time of trust=None (medians)"]
    lines.append(f"pool weights chosen per round (auto): {rows['auto'][1]}")
    record("trust_cost", "\n".join(lines))


if __name__ == "__main__":
    main()
