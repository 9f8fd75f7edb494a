"""Flower round latency on localhost: a SuperLink and 3 SuperNodes as real processes.

Three breast-cancer sites with small scikit-learn learners (a depth-4 tree, a logistic
regression, a 3-NN; 20 private rows each, |U| = 300) run the example app in
``examples/flower`` through :class:`cotrain.flower.localhost.LocalFederation`. The
ServerApp records, per round, when it pushed the messages and when the last reply came
back, and each site reports when its handler started and ended and its learner time
(one clock: everything runs on this machine).

Reported per round (median over rounds 2..N; round 1 also imports the app):

- round: push of the broadcast → last upload back (what a federation waits);
- training: the slowest site's learner time (fit + predict);
- beyond training: round − training (the figure the issue targets: ≤ 3 s);
- split of that overhead: push → last handler start (Flower's SuperNode polling, the
  SuperExec task poll and the start of a fresh ``flwr-clientapp`` process that imports
  cotrain and scikit-learn), the handler's own non-learner time (decode, encode, load the
  site), and handler end → server (SuperNode push + our 50 ms server poll).

Also checks that the run's final consensus equals the in-process trainer's.

    python benchmarks/flower_latency.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import record
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.flower.localhost import LocalFederation
from cotrain.flower.site import write_sites

APP = Path(__file__).resolve().parents[1] / "examples" / "flower"


def learners() -> list:
    return [
        DecisionTreeClassifier(max_depth=4),
        LogisticRegression(max_iter=300),
        KNeighborsClassifier(n_neighbors=3),
    ]


def split() -> tuple[list, list, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    X = (X - X[60:360].mean(axis=0)) / X[60:360].std(axis=0)
    parts = np.array_split(np.arange(60), 3)
    return [X[p] for p in parts], [y[p] for p in parts], X[60:360]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()

    X_clients, y_clients, X_public = split()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = write_sites(folder / "sites", X_clients, y_clients, X_public, learners())
        np.save(folder / "public.npy", X_public)
        configs = [{"site": str(p)} for p in paths]
        started = time.perf_counter()
        with LocalFederation(folder / "home", 3, configs) as federation:
            startup = time.perf_counter() - started
            run_config = {
                "public-pool": str(folder / "public.npy"),
                "output-dir": str(folder / "out"),
                "rounds": args.rounds,
                "min-nodes": 3,
                "random-state": 0,
            }
            done = federation.run(APP, run_config, timeout=600)
        if done.returncode != 0:
            raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
        timings = json.loads((folder / "out" / "timings.json").read_text())
        codes = np.load(folder / "out" / "consensus_codes.npy")

    local = FederatedCoTrainer(learners(), rounds=args.rounds, random_state=0).fit(
        X_clients, y_clients, X_public=X_public
    )
    equal = bool(np.array_equal(codes[-1], local.pseudo_label_codes_))

    lines = [
        "Flower 1.41 on localhost, 3 SuperNodes (insecure), small sklearn sites, "
        f"{args.rounds} rounds; SuperLink + nodes up in {startup:.1f} s",
        "",
        "| round | round s | training s | beyond training s | to handler s | "
        "handler − training s | back to server s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in timings:
        lines.append(
            f"| {t['round']} | {t['exchange_s']:.2f} | {t['learner_s']:.2f} | "
            f"{t['exchange_s'] - t['learner_s']:.2f} | {t['to_handler_s']:.2f} | "
            f"{t['handler_s'] - t['learner_s']:.2f} | {t['from_handler_s']:.2f} |"
        )
    later = timings[1:]
    beyond = statistics.median(t["exchange_s"] - t["learner_s"] for t in later)
    to_handler = statistics.median(t["to_handler_s"] for t in later)
    lines += [
        "",
        f"median over rounds 2..{args.rounds}: {beyond:.2f} s beyond training per round "
        f"(target ≤ 3 s: {'met' if beyond <= 3 else 'NOT met'}); of it {to_handler:.2f} s "
        "before the site's handler starts",
        f"final consensus equal to the in-process trainer: {equal}",
    ]
    record("flower_latency", "\n".join(lines))


if __name__ == "__main__":
    main()
