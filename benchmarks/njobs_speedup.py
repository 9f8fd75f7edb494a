"""Parallel clients: what n_jobs=2 buys over n_jobs=1, for the trainer and for resident pools.

1. Trainer (``--part trainer``): 10 random-forest clients with n_jobs=1 versus n_jobs=2 on
   synthetic data (make_classification): 10 clients × 2,000 rows, |U| = 5,000, 20
   features, 3 rounds. Checks that both runs give identical pseudo-labels and predictions.
2. Pools (``--part pools``, issue 11 item 3): 10 RandomForestClassifier(n_estimators=200)
   clients on breast cancer (27 labelled rows each, |U| = 370), 3 rounds of client
   steps (fit on private + pseudo-labelled public rows, label the public pool, upload
   packed hard labels; majority vote here between rounds), run three ways:

   - ``InProcessPool``: the clients in this process (n_jobs=1);
   - ``map`` over 2 loky workers (``JoblibRuntime(2)``, through ``host_objects``'
     fallback): every round ships each client (model, private data, public pool) down
     and back up: the behaviour before resident pools;
   - ``ProcessPool(2)``: the clients resident in 2 workers; per round only the
     broadcast goes down and the uploads come up. An idle worker steals a client
     step not yet started from the other (the client moves with it);
   - ``ProcessPool(2, steal_after=None)``: the same with the static placement
     (client i always in worker i % 2), to show what stealing changes.

   Times the rounds (pool start-up and the final pull of the models reported apart),
   counts the pickled bytes that cross per round and the clients that stealing moved,
   and checks that all four give identical uploads and final models. The machine may
   be shared: the load average before and after is recorded with the figures.

    python benchmarks/njobs_speedup.py              # both parts
    python benchmarks/njobs_speedup.py --part pools
"""

from __future__ import annotations

import argparse
import os
import pickle
import time

import numpy as np
from _common import record
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.ensemble import RandomForestClassifier

from consensus import MajorityVote
from cotrain import FederatedCoTrainer, partition
from cotrain.messages import HardLabels
from cotrain.pools import InProcessPool, ProcessPool, host_objects
from cotrain.runtime import JoblibRuntime


# ------------------------------------------------------------------ 1. the trainer
def run(n_jobs: int, X_clients, y_clients, U, X_test, rounds: int):
    trainer = FederatedCoTrainer(
        [RandomForestClassifier(n_estimators=100) for _ in range(10)],
        rounds=rounds,
        n_jobs=n_jobs,
        random_state=0,
    )
    start = time.perf_counter()
    trainer.fit(X_clients, y_clients, X_public=U)
    return time.perf_counter() - start, trainer.pseudo_labels_, trainer.predict(X_test)


def trainer_part(rounds: int) -> str:
    X, y = make_classification(
        n_samples=26_000, n_features=20, n_informative=10, n_classes=3, random_state=0
    )
    X_lab, y_lab, U, X_test = X[:20_000], y[:20_000], X[20_000:25_000], X[25_000:]
    parts = partition.iid(y_lab, n_clients=10, random_state=0)
    Xc, yc = [X_lab[p] for p in parts], [y_lab[p] for p in parts]
    run(2, Xc, yc, U, X_test, rounds=1)  # start the worker pool once (not timed)
    t1, pl1, pred1 = run(1, Xc, yc, U, X_test, rounds)
    t2, pl2, pred2 = run(2, Xc, yc, U, X_test, rounds)
    same = np.array_equal(pl1, pl2) and np.array_equal(pred1, pred2)
    return (
        f"## FederatedCoTrainer: 10 RandomForest(100) clients × 2,000 rows, |U| = 5,000, "
        f"{rounds} rounds\n\n"
        f"n_jobs=1: {t1:.2f} s\nn_jobs=2: {t2:.2f} s\nspeed-up: {t1 / t2:.2f}x (target >= 1.6x)\n"
        f"identical pseudo-labels and predictions: {same}\n"
    )


# -------------------------------------------------------------------- 2. the pools
class ForestClient:
    """A client as it lives in a worker: private rows, a reference to U, its forest."""

    def __init__(self, seed: int, X: np.ndarray, y: np.ndarray, X_public: np.ndarray) -> None:
        self.model = RandomForestClassifier(n_estimators=200, random_state=seed)
        self.X, self.y, self.X_public = X, y, X_public

    def step(self, broadcast: bytes | None) -> tuple[bytes, float]:
        """Fit on D_i ∪ P, label U; returns the upload (packed hard labels), fit seconds."""
        X, y = self.X, self.y
        if broadcast is not None:
            pseudo = HardLabels.from_bytes(broadcast).codes
            keep = pseudo >= 0
            X = np.concatenate([X, self.X_public[keep]])
            y = np.concatenate([y, pseudo[keep]])
        start = time.perf_counter()
        self.model.fit(X, y)
        seconds = time.perf_counter() - start
        return HardLabels(self.model.predict(self.X_public), 2).to_bytes(), seconds


def breast_cancer_clients(n_clients: int = 10, rows: int = 27, n_public: int = 370):
    X, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    public, rest = order[:n_public], order[n_public:]
    U = X[public]
    clients = []
    for i in range(n_clients):  # 27 of the 199 non-public rows each (clients overlap)
        own = np.random.default_rng(100 + i).choice(rest, size=rows, replace=False)
        clients.append(ForestClient(i, X[own], y[own], U))
    return clients, U


def federate(pool, n_clients: int, rounds: int) -> tuple[list, float, int, int]:
    """Rounds of client steps with a majority vote between them; returns the uploads,
    the seconds the rounds took, and the last round's result and broadcast bytes."""
    uploads, broadcast, result_bytes, broadcast_bytes = [], None, 0, 0
    start = time.perf_counter()
    for _ in range(rounds):
        broadcast_bytes = len(pickle.dumps((broadcast,)))
        out = pool.call("step", {i: () for i in range(n_clients)}, shared=(broadcast,))
        messages = [out[i][0] for i in range(n_clients)]
        uploads.append(messages)
        result_bytes = len(pickle.dumps(out))
        votes = np.stack([HardLabels.from_bytes(m).codes for m in messages])
        consensus = MajorityVote()(votes, n_classes=2)
        broadcast = HardLabels(consensus, 2, allow_abstain=True).to_bytes()
    return uploads, time.perf_counter() - start, result_bytes, broadcast_bytes


def run_pool(kind: str, rounds: int) -> dict:
    clients, U = breast_cancer_clients()
    client_bytes = len(pickle.dumps(clients[0]))
    start = time.perf_counter()
    runtime = None
    if kind == "in-process":
        pool = InProcessPool(clients)
    elif kind == "map":
        runtime = JoblibRuntime(n_jobs=2).__enter__()
        runtime.map(abs, [(0,), (0,)])  # its loky workers start with the first map
        pool = host_objects(_MapOnly(runtime), clients)
    elif kind == "static":
        pool = ProcessPool(clients, n_workers=2, steal_after=None)
    else:
        pool = ProcessPool(clients, n_workers=2)
    started = time.perf_counter() - start
    uploads, rounds_s, result_bytes, broadcast_bytes = federate(pool, len(clients), rounds)
    start = time.perf_counter()
    fitted = pool.get()  # the end of a fit: the models come back
    pulled = time.perf_counter() - start
    placement = getattr(pool, "placement", None)
    moved = 0 if placement is None else sum(w != i % 2 for i, w in enumerate(placement))
    pool.close()
    if runtime is not None:
        runtime.__exit__(None, None, None)
    return {
        "start_s": started,
        "rounds_s": rounds_s,
        "get_s": pulled,
        "uploads": uploads,
        "predictions": [c.model.predict(U).tolist() for c in fitted],
        "result_bytes": result_bytes,
        "broadcast_bytes": broadcast_bytes,
        "client_bytes": client_bytes,
        "fitted_client_bytes": len(pickle.dumps(fitted[0])),
        "moved": moved,
    }


class _MapOnly:
    """A runtime seen through ``map`` alone, so ``host_objects`` takes its fallback."""

    def __init__(self, runtime: JoblibRuntime) -> None:
        self.runtime = runtime

    def map(self, fn, tasks, timeout=None):
        return self.runtime.map(fn, tasks, timeout=timeout)


def pools_part(rounds: int) -> str:
    runs = {kind: run_pool(kind, rounds) for kind in ("in-process", "map", "process", "static")}
    base = runs["in-process"]
    same = all(
        r["uploads"] == base["uploads"] and r["predictions"] == base["predictions"]
        for r in runs.values()
    )
    lines = [
        f"## Pools: 10 RandomForest(200) clients × 27 rows, breast cancer, |U| = 370, "
        f"{rounds} rounds",
        "",
        f"{'':<40}{'start s':>9}{'rounds s':>10}{'get s':>8}{'speed-up':>10}",
    ]
    names = {
        "in-process": "InProcessPool (n_jobs=1)",
        "map": "map, 2 loky workers (ship clients)",
        "process": "ProcessPool(2) (resident, stealing)",
        "static": "ProcessPool(2, steal_after=None)",
    }
    for kind, r in runs.items():
        lines.append(
            f"{names[kind]:<40}{r['start_s']:>9.2f}{r['rounds_s']:>10.2f}{r['get_s']:>8.2f}"
            f"{base['rounds_s'] / r['rounds_s']:>9.2f}x"
        )
    fitted, process = base["fitted_client_bytes"], runs["process"]

    def total(r: dict) -> float:
        return r["start_s"] + r["rounds_s"] + r["get_s"]

    lines += [
        "",
        f"speed-up of the rounds, ProcessPool(2) over InProcessPool: "
        f"{base['rounds_s'] / process['rounds_s']:.2f}x (ideal on 2 cores: 2x)",
        f"with start-up and the final pull of the models: {total(base) / total(process):.2f}x",
        f"clients moved by stealing (of 10): {process['moved']}; static placement: "
        f"{base['rounds_s'] / runs['static']['rounds_s']:.2f}x",
        f"bytes per round, resident clients: down {process['broadcast_bytes']} (the broadcast, "
        f"once per worker), up {process['result_bytes']:,} (10 uploads + fit times, pickled)",
        f"bytes per round, shipping clients: every client down and back up, "
        f"{base['client_bytes']:,} B unfitted, {fitted:,} B with its forest (× 10 clients)",
        f"identical uploads and final models in all four: {same}",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--part", choices=["all", "trainer", "pools"], default="all")
    args = parser.parse_args()
    parts, load = [], os.getloadavg()
    if args.part in ("all", "pools"):
        parts.append(pools_part(args.rounds))
    if args.part in ("all", "trainer"):
        parts.append(trainer_part(args.rounds))
    after = os.getloadavg()
    parts.append(
        "load average (1, 5, 15 min), shared machine: before "
        + ", ".join(f"{x:.2f}" for x in load)
        + "; after "
        + ", ".join(f"{x:.2f}" for x in after)
        + "\n"
    )
    name = "njobs_speedup" if args.part == "all" else f"njobs_speedup_{args.part}"
    record(name, "\n".join(parts))


if __name__ == "__main__":
    main()
