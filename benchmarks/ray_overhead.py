"""Per-round runtime overhead: Ray vs joblib (n_jobs=2) vs sequential, 100 light clients.

100 clients, each a DecisionTreeClassifier(max_depth=3) on 20 private rows, |U| = 1,000
public rows, 10 features, 2 classes, full participation. Each runtime runs the real
:class:`cotrain.FederatedCoTrainer` (round 1 is the warm-up and is not counted).

Ray runs with its default ``batch_size="auto"`` (about four calls per CPU, as joblib
batches); the ``batch_size=1`` row (one Ray call per client, what a timeout uses) is
shown for comparison.

Overhead of a round = wall time of ``runtime.map`` − (summed client work / workers),
where client work is each step's own duration timed inside the worker and workers is 1
(sequential) or 2 (joblib n_jobs=2, Ray num_cpus=2): the time a perfect runtime with no
scheduling, serialisation or transfer cost would need. Also checks that every runtime
gives the same pseudo-labels and predictions as sequential.

Each runtime is wrapped to time the clients' own work and passed as
``FederatedCoTrainer(runtime=...)``.

    python benchmarks/ray_overhead.py [--rounds 6] [--actors]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from _common import record
from sklearn.datasets import make_classification
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer, partition
from cotrain.runtime import JoblibRuntime, RayRuntime, SequentialRuntime

N_CLIENTS = 100


def _timed(fn: Any, *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


class Timed:
    """Wraps a runtime; records each map's wall time and the summed client work."""

    def __init__(self, inner: Any, workers: int) -> None:
        self.inner, self.workers = inner, workers
        self.rounds: list[tuple[float, float]] = []  # (wall, summed work)

    def __enter__(self) -> Timed:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.inner.__exit__(*exc_info)

    def map(self, fn: Any, tasks: Any, timeout: float | None = None) -> list[Any]:
        start = time.perf_counter()
        out = self.inner.map(_timed, [(fn, *task) for task in tasks])
        wall = time.perf_counter() - start
        self.rounds.append((wall, sum(seconds for _, seconds in out)))
        return [result for result, _ in out]


def run(runtime: Timed, Xc, yc, U, X_test, rounds: int):
    trainer = FederatedCoTrainer(
        [DecisionTreeClassifier(max_depth=3, random_state=0) for _ in range(N_CLIENTS)],
        rounds=rounds,
        random_state=0,
        runtime=runtime,
    )
    trainer.fit(Xc, yc, X_public=U)
    counted = runtime.rounds[1:]  # round 1: warm-up
    wall = float(np.mean([w for w, _ in counted]))
    work = float(np.mean([s for _, s in counted]))
    overhead = wall - work / runtime.workers
    return wall, work, overhead, trainer.pseudo_labels_, trainer.predict(X_test)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--actors", action="store_true", help="also Ray with 2 actors")
    args = parser.parse_args()
    X, y = make_classification(
        n_samples=N_CLIENTS * 20 + 1_000 + 500, n_features=10, n_informative=5, random_state=0
    )
    n_lab = N_CLIENTS * 20
    X_lab, y_lab = X[:n_lab], y[:n_lab]
    U, X_test = X[n_lab : n_lab + 1_000], X[n_lab + 1_000 :]
    parts = partition.iid(y_lab, n_clients=N_CLIENTS, random_state=0)
    Xc, yc = [X_lab[p] for p in parts], [y_lab[p] for p in parts]

    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - t0
    runtimes = {
        "sequential": Timed(SequentialRuntime(), 1),
        "joblib n_jobs=2": Timed(JoblibRuntime(n_jobs=2), 2),
        "ray tasks, num_cpus=2": Timed(RayRuntime(), 2),
        "ray tasks, batch_size=1": Timed(RayRuntime(batch_size=1), 2),
    }
    if args.actors:
        runtimes["ray 2 actors"] = Timed(RayRuntime(actor_pool_size=2), 2)
    rows, ref = [], None
    for name, rt in runtimes.items():
        wall, work, overhead, pl, pred = run(rt, Xc, yc, U, X_test, args.rounds)
        if ref is None:
            ref = (pl, pred)
        same = np.array_equal(pl, ref[0]) and np.array_equal(pred, ref[1])
        rows.append((name, wall, work, overhead, same))
    ray.shutdown()
    overhead_of = {name: o for name, _, _, o, _ in rows}
    ratio = overhead_of["ray tasks, num_cpus=2"] / overhead_of["joblib n_jobs=2"]
    lines = [
        f"{N_CLIENTS} DecisionTree(max_depth=3) clients x 20 rows, |U| = 1,000, 10 features, "
        f"{args.rounds} rounds (round 1 = warm-up, not counted); ms per round",
        "overhead = map wall - summed client work / workers",
        f"ray.init(num_cpus=2) once before the runs: {ray_start:.1f} s (not counted)",
        "",
        f"{'runtime':<24}{'map wall':>10}{'client work':>13}{'overhead':>10}  same as sequential",
    ]
    for name, wall, work, overhead, same in rows:
        lines.append(
            f"{name:<24}{wall * 1e3:>10.1f}{work * 1e3:>13.1f}{overhead * 1e3:>10.1f}  {same}"
        )
    lines += [
        "",
        f"Ray overhead / joblib overhead: {ratio:.2f}x (target <= 2x): "
        f"{'met' if ratio <= 2 else 'NOT met'}",
        f"same pseudo-labels and predictions as sequential: {all(same for *_, same in rows)}",
    ]
    record("ray_overhead", "\n".join(lines))


if __name__ == "__main__":
    main()
