"""Per-round runtime overhead: sequential vs joblib (n_jobs=2) vs Ray, 100 light clients.

100 clients, each a DecisionTreeClassifier(max_depth=3) on 20 private rows, |U| = 1,000
public rows, 10 features, 2 classes, full participation. Each runtime runs the real
:class:`cotrain.FederatedCoTrainer` (``runtime=...``); round 1 is the warm-up and is
not counted.

What is timed is what the trainer does: it hosts the clients once with
``runtime.host(clients)`` (a resident pool: in this process for sequential, two
long-lived worker processes for joblib, one Ray actor per CPU, here 2, for Ray) and
each round calls ``pool.call("run_round", ...)``, which sends only each sampled
client's downlink (the round's broadcast) down and the clients' results up. Each runtime is
wrapped so that ``host`` returns its real pool wrapped to time

- the wall time of every ``call("run_round", ...)`` in the trainer's process, and
- each client's own work, timed inside the worker: the hosted objects are the clients
  wrapped in :class:`TimedClient`, whose ``run_round`` times the client's whole
  ``run_round`` (decoding the broadcast, building D_i ∪ P, fit, predict, encoding)
  and returns ``(result, seconds)``; the wrapped pool hands the trainer the client's
  own :class:`~cotrain.federation.site.StepResult`, untouched. (``StepResult.learner_time_s``
  is not used: it covers only fit and predict, not the decoding and encoding.)
  ``TimedClient`` is defined in ``__main__``, so cloudpickle sends its class by value
  (about 0.1 ms) with each placement and each joblib work-stealing move of a client:
  a small upward bias on the joblib resident row; a plain client class goes by name.

Overhead of a round = call wall − (summed client work / workers), workers being 1
(sequential) or 2 (joblib n_jobs=2, Ray with 2 CPUs): the time a perfect runtime with
no scheduling, serialisation or transfer cost would need. Hosting the clients (starting
the workers, placing the clients) and pulling the fitted clients back at the end are
once per fit, outside the rounds; they are shown in their own column.

For comparison, the old shipping path: a runtime with only ``map`` (no ``host``), which
the trainer serves through :func:`cotrain.runtime.pools.host_objects` by keeping the clients
here and shipping each client to a worker and back with every call, every round (what
the earlier figures in docs/guide/runtimes.md measured). Its wall is the ``runtime.map`` of
each round and its client work is timed inside the worker around the same ``run_round``.
``--actors`` adds the Ray rows of that old path (tasks, and ``actor_pool_size=2``);
the resident Ray row already uses 2 actors (one per CPU).

Also checks that every row gives the same pseudo-labels and predictions as sequential.

    python benchmarks/ray_overhead.py [--rounds 6] [--actors]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from _common import record
from sklearn.datasets import make_classification
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer, partition
from cotrain.runtime.ray_runtime import RayRuntime
from cotrain.runtime.runtimes import JoblibRuntime, SequentialRuntime
from cotrain.runtime.straggler import Straggler

N_CLIENTS = 100


class TimedClient:
    """A hosted client whose ``run_round`` also returns its own duration.

    Picklable (module level; only ``client`` in its state), so it lives wherever the
    pool keeps it. Every other method (``state_dict`` for checkpoints, ...) goes to the
    client unchanged.
    """

    def __init__(self, client: Any) -> None:
        self.client = client

    def run_round(self, *args: Any) -> tuple[Any, float]:
        start = time.perf_counter()
        result = self.client.run_round(*args)
        return result, time.perf_counter() - start

    def __getattr__(self, name: str) -> Any:
        client = self.__dict__.get("client")  # not there while unpickling
        if client is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(client, name)


class TimedPool:
    """A runtime's real pool of :class:`TimedClient`; records each ``run_round`` call's
    wall and summed client work, and hands the trainer the clients' own results."""

    def __init__(self, inner: Any, runtime: Resident) -> None:
        self.inner, self.runtime = inner, runtime

    def __enter__(self) -> TimedPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def call(
        self, method: str, args: Mapping[int, tuple], shared: tuple = (), timeout: Any = None
    ) -> dict[int, Any]:
        start = time.perf_counter()
        out = self.inner.call(method, args, shared, timeout)
        wall = time.perf_counter() - start
        if method != "run_round":
            return out
        done = [r for r in out.values() if not isinstance(r, Straggler)]
        self.runtime.rounds.append((wall, sum(seconds for _, seconds in done)))
        return {i: r if isinstance(r, Straggler) else r[0] for i, r in out.items()}

    def get(self, ids: Sequence[int] | None = None) -> list[Any]:
        start = time.perf_counter()
        out = [proxy.client for proxy in self.inner.get(ids)]
        self.runtime.once += time.perf_counter() - start  # the fitted clients come back
        return out

    def put(self, objects: Mapping[int, Any]) -> None:
        self.inner.put({i: TimedClient(obj) for i, obj in objects.items()})

    def close(self) -> None:
        self.inner.close()


class Resident:
    """Wraps a runtime: ``host`` returns its real pool of :class:`TimedClient`, timed."""

    path = "resident"

    def __init__(self, inner: Any, workers: int) -> None:
        self.inner, self.workers = inner, workers
        self.rounds: list[tuple[float, float]] = []  # (call wall, summed client work)
        self.once: float | None = 0.0  # host + final get

    def __enter__(self) -> Resident:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.inner.__exit__(*exc_info)

    def map(self, fn: Any, tasks: Any, timeout: float | None = None) -> list[Any]:
        raise AssertionError("the trainer hosts its clients; map should not be called")

    def host(self, objects: Sequence[Any]) -> TimedPool:
        start = time.perf_counter()
        pool = self.inner.host([TimedClient(obj) for obj in objects])
        self.once += time.perf_counter() - start  # start the workers, place the clients
        return TimedPool(pool, self)


def _timed(fn: Any, *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


class Shipping:
    """Wraps a runtime as one with only ``map`` (the old path, through ``host_objects``).

    The pool ``host_objects`` makes calls ``map(fn, [(client, method, shared, args)])``
    with ``fn`` calling ``getattr(client, method)(*shared, *args)`` and returning the
    result and the updated client; each task is timed inside the worker.
    """

    path = "shipping"

    def __init__(self, inner: Any, workers: int) -> None:
        self.inner, self.workers = inner, workers
        self.rounds: list[tuple[float, float]] = []  # (map wall, summed client work)
        self.once = None  # nothing is placed: every round ships the clients

    def __enter__(self) -> Shipping:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.inner.__exit__(*exc_info)

    def map(self, fn: Any, tasks: Any, timeout: float | None = None) -> list[Any]:
        tasks = list(tasks)
        start = time.perf_counter()
        out = self.inner.map(_timed, [(fn, *task) for task in tasks], timeout=timeout)
        wall = time.perf_counter() - start
        if tasks and "run_round" in [arg for arg in tasks[0] if isinstance(arg, str)]:
            work = sum(r[1] for r in out if not isinstance(r, Straggler))
            self.rounds.append((wall, work))
        return [r if isinstance(r, Straggler) else r[0] for r in out]


def run(runtime: Resident | Shipping, Xc, yc, U, X_test, rounds: int):
    trainer = FederatedCoTrainer(
        [DecisionTreeClassifier(max_depth=3, random_state=0) for _ in range(N_CLIENTS)],
        rounds=rounds,
        random_state=0,
        runtime=runtime,
    )
    trainer.fit(Xc, yc, X_public=U)
    assert len(runtime.rounds) == rounds, (len(runtime.rounds), rounds)
    counted = runtime.rounds[1:]  # round 1: warm-up
    wall = float(np.mean([w for w, _ in counted]))
    work = float(np.mean([s for _, s in counted]))
    overhead = wall - work / runtime.workers
    return wall, work, overhead, trainer.pseudo_labels_, trainer.predict(X_test)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument(
        "--actors", action="store_true", help="also Ray through the old shipping path"
    )
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
    runtimes: list[tuple[str, Resident | Shipping]] = [
        ("sequential", Resident(SequentialRuntime(), 1)),
        ("joblib n_jobs=2", Resident(JoblibRuntime(n_jobs=2), 2)),
        ("ray, 2 actors", Resident(RayRuntime(), 2)),
        ("joblib n_jobs=2", Shipping(JoblibRuntime(n_jobs=2), 2)),
    ]
    if args.actors:
        runtimes += [
            ("ray tasks", Shipping(RayRuntime(), 2)),
            ("ray, 2 actors", Shipping(RayRuntime(actor_pool_size=2), 2)),
        ]
    rows, ref = [], None
    for name, rt in runtimes:
        wall, work, overhead, pl, pred = run(rt, Xc, yc, U, X_test, args.rounds)
        if ref is None:
            ref = (pl, pred)
        same = np.array_equal(pl, ref[0]) and np.array_equal(pred, ref[1])
        rows.append((name, rt.path, wall, work, overhead, rt.once, same))
    ray.shutdown()
    overhead_of = {(name, path): o for name, path, _, _, o, _, _ in rows}
    ratio = overhead_of["ray, 2 actors", "resident"] / overhead_of["joblib n_jobs=2", "resident"]
    lines = [
        f"{N_CLIENTS} DecisionTree(max_depth=3) clients x 20 rows, |U| = 1,000, 10 features, "
        f"{args.rounds} rounds (round 1 = warm-up, not counted); ms per round",
        "resident: the trainer's path, runtime.host(clients) once, then "
        'pool.call("run_round") each round',
        "shipping: the old path, a runtime with only map (host_objects ships every client "
        "down and back each round)",
        "wall = pool.call (resident) or runtime.map (shipping); client work = each client's "
        "whole run_round, timed in the worker",
        "overhead = wall - summed client work / workers; once = host + final get, per fit "
        "(not in the rounds)",
        f"ray.init(num_cpus=2) once before the runs: {ray_start:.1f} s (not counted)",
        "",
        f"{'runtime':<18}{'path':<11}{'wall':>8}{'client work':>13}{'overhead':>10}"
        f"{'once':>8}  same as sequential",
    ]
    for name, path, wall, work, overhead, once, same in rows:
        lines.append(
            f"{name:<18}{path:<11}{wall * 1e3:>8.1f}{work * 1e3:>13.1f}{overhead * 1e3:>10.1f}"
            f"{'-' if once is None else f'{once * 1e3:.0f}':>8}  {same}"
        )
    lines += [
        "",
        f"Ray overhead / joblib overhead (resident): {ratio:.2f}x (target <= 2x): "
        f"{'met' if ratio <= 2 else 'NOT met'}",
        f"same pseudo-labels and predictions as sequential: {all(r[-1] for r in rows)}",
    ]
    record("ray_overhead", "\n".join(lines))


if __name__ == "__main__":
    main()
