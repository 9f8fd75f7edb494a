"""Framework overhead: share of a run's wall time spent outside the learners.

A 5-client, 10-round run; the learners' own fit/predict/predict_proba time is measured
inside each client (``history_[t].learner_time_s``); everything else (validation,
cloning, composing D ∪ P, encoding and decoding messages, consensus, records) is
framework overhead.

    python benchmarks/overhead.py
"""

from __future__ import annotations

import argparse
import time

from _common import record
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer, partition
from cotrain.datasets.loaders import load_breast_cancer_split
from cotrain.demo import mixed_estimators


def measure(make, eval_on: bool, repeats: int) -> tuple[float, float]:
    best = None
    for _ in range(repeats):
        data = load_breast_cancer_split(random_state=0)
        parts = partition.iid(data.y_labeled, n_clients=5, random_state=0)
        trainer = FederatedCoTrainer(make(), rounds=10, random_state=0)
        extra = dict(eval_set=(data.X_test, data.y_test), y_public=data.y_public) if eval_on else {}
        start = time.perf_counter()
        trainer.fit(
            [data.X_labeled[p] for p in parts],
            [data.y_labeled[p] for p in parts],
            X_public=data.X_public,
            **extra,
        )
        wall = time.perf_counter() - start
        learner = sum(r.learner_time_s for r in trainer.history_)
        if best is None or wall - learner < best[0] - best[1]:
            best = (wall, learner)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    lines = [
        f"{'federation':38s} {'eval':>5s} {'wall s':>8s} {'learners s':>11s} "
        f"{'overhead s':>11s} {'overhead %':>11s}"
    ]
    for name, make in [
        ("mixed DT,RF,RuleFit,XGB,RF", mixed_estimators),
        (
            "5 decision trees (fastest learner)",
            lambda: [DecisionTreeClassifier() for _ in range(5)],
        ),
    ]:
        for eval_on in (False, True):
            wall, learner = measure(make, eval_on, args.repeats)
            lines.append(
                f"{name:38s} {'yes' if eval_on else 'no':>5s} {wall:8.3f} "
                f"{learner:11.3f} {wall - learner:11.3f} "
                f"{100 * (wall - learner) / wall:10.1f}%"
            )
    record(
        "overhead",
        "breast cancer paper split, 5 clients, 10 rounds, sequential "
        f"(best of {args.repeats})\n\n" + "\n".join(lines),
    )


if __name__ == "__main__":
    main()
