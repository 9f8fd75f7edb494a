"""What trust="auto" (the default) costs: the breast-cancer demo and each learner kind.

1. The `cotrain demo` federation (DT, RF, RuleFit, XGBoost, RF on the FedCT paper's
   breast-cancer split, 10 rounds), fitted with ``trust=None`` (the paper's FedCT) and
   ``trust="auto"`` alternately, ``--repeats`` times each, in one process; reports the
   wall time of each fit, the ratio of the medians, and both runs' accuracies.
2. Per learner kind (``--per-learner``): four sites of the same learner on Adult (150
   labelled rows each, |U| = 1,500), ``--rounds`` rounds, ``trust=None`` against
   ``trust="auto"`` (both with the default consensus), alternately, ``--repeats`` times
   each; the ratio of the median wall times.

    python benchmarks/trust_cost.py --repeats 2 --per-learner
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
    parser.add_argument("--per-learner", action="store_true")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if args.per_learner:
        record("trust_cost_per_learner", per_learner(args.repeats, args.rounds, args.seed))
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


def per_learner(repeats: int, rounds: int, seed: int) -> str:
    """The wall-time ratio of trust="auto" to trust=None for each learner kind."""
    import time

    import numpy as np
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier
    from untuned_mixed import load, split, split_sizes

    from cotrain import FederatedCoTrainer
    from learners import RuleFitClassifier, XGBoostClassifier

    X, y = load("adult")
    Xs, ys, U, _, _, _ = split(X, y, split_sizes("adult", len(y)), seed)
    kinds = {
        "DT": lambda: DecisionTreeClassifier(random_state=seed),
        "RF": lambda: RandomForestClassifier(random_state=seed),
        "XGBoost": lambda: XGBoostClassifier(random_state=seed),
        "LR": lambda: LogisticRegression(max_iter=2000),
        "RuleFit": lambda: RuleFitClassifier(random_state=seed),
    }
    lines = [
        f"4 sites of one learner kind, Adult, 150 labelled rows each, |U| = 1,500, {rounds} "
        f"rounds, seed {seed}, {repeats} fits each, alternating",
        "",
        "| learner | trust=None (s) | trust='auto' (s) | ratio of medians |",
        "| --- | --- | --- | --- |",
    ]
    for name, make in kinds.items():
        times: dict[str, list[float]] = {"None": [], "auto": []}
        for _ in range(repeats):
            for label, trust in (("None", None), ("auto", "auto")):
                start = time.perf_counter()
                FederatedCoTrainer(
                    [make() for _ in range(4)], trust=trust, rounds=rounds, random_state=seed
                ).fit(Xs, ys, X_public=U)
                times[label].append(time.perf_counter() - start)
        ratio = np.median(times["auto"]) / np.median(times["None"])
        lines.append(
            f"| {name} | {', '.join(f'{t:.1f}' for t in times['None'])} | "
            f"{', '.join(f'{t:.1f}' for t in times['auto'])} | {ratio:.2f}× |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
