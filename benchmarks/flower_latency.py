"""Flower round latency on localhost: a SuperLink and 3 SuperNodes as real processes.

Three breast-cancer sites with small scikit-learn learners (a depth-4 tree, a logistic
regression, a 3-NN; 20 private rows each, |U| = 300) run the example app in
``examples/flower`` (the relay ClientApp, :mod:`cotrain.flower.relay`) through
:class:`cotrain.flower.local.localhost.LocalFederation`, twice in one run:

- **cold**: no site workers (``warm_workers=False``): every message's fresh
  ``flwr-clientapp`` process imports cotrain and scikit-learn (and torch for a torch
  site) and runs the round itself — the path before warm workers;
- **warm**: one warm worker per site (``cotrain site serve``): the ``flwr-clientapp``
  process imports only Flower and the relay and hands the message over a Unix socket.

``--torch`` replaces the 3-NN by a tiny torch MLP (``learners.TorchClassifier``, one
hidden layer of 16, 5 epochs then 1 per round), which continues training, so its model
is stored between rounds (skops).

Reported per round (median over rounds 2..N; round 1 follows the handshake):

- round: the ServerApp's push of the messages → last reply back;
- training: the slowest site's learner time (fit + predict);
- beyond training: round − training (the figure the issue targets);
- to handler / handler − training / back to server: from the sites' handler timestamps
  (one clock: everything runs on this machine);
- to handler split, for the site whose reply reached the SuperLink last, from its
  SuperNode's and the SuperLink's logs (lines timestamped as they appear, polled every
  5 ms; the push time is taken as that reply's arrival minus the round, ±0.05 s, the
  ServerApp's reply poll): *SuperNode poll* (push → the SuperNode receives the message:
  Flower's SuperNode sleeps 3 s after every empty pull) and *start* (→ the handler
  starts: the SuperExec's task poll, a new ``flwr-clientapp`` process importing Flower,
  pulling the task, installing the FAB and importing the app);
- and, measured alone on the same machine (median of 3 fresh interpreters), what a new
  ``flwr-clientapp`` process imports: Flower's own entry point, the relay app, and the
  full ClientApp (cotrain and scikit-learn) that the cold path imports.

Also checks that both runs' final consensus equals the in-process trainer's.

    python benchmarks/flower_latency.py [--rounds 6] [--torch]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from _common import record
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.flower.local.localhost import LocalFederation
from cotrain.flower.site import write_sites

APP = Path(__file__).resolve().parents[1] / "examples" / "flower"
_ROUND = re.compile(rb"ROUND (\d+)\]")
_PUSH = re.compile(rb"Push replies from node_id=(\d+)")
_MARKS = {b"Receiving: train": "recv", b"Sending: train": "send"}


def learners(torch: bool = False) -> list:
    third = KNeighborsClassifier(n_neighbors=3)
    if torch:
        from learners import TorchClassifier

        third = TorchClassifier(
            module_params={"hidden": (16,)},
            max_epochs=5,
            epochs_per_fit=1,
            n_threads=1,
            random_state=0,
        )
    return [DecisionTreeClassifier(max_depth=4), LogisticRegression(max_iter=300), third]


def split() -> tuple[list, list, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    X = (X - X[60:360].mean(axis=0)) / X[60:360].std(axis=0)
    parts = np.array_split(np.arange(60), 3)
    return [X[p] for p in parts], [y[p] for p in parts], X[60:360]


class LogWatch(threading.Thread):
    """Timestamps the log lines that mark a message's way through Flower, as they appear."""

    def __init__(self, nodes: list[Path], superlink: Path) -> None:
        super().__init__(daemon=True)
        self.files = [*nodes, superlink]
        self.events: dict[int, list[tuple[str, int, float]]] = {i: [] for i in range(len(nodes))}
        self.pushes: list[tuple[int, float]] = []  # (node id, time) at the SuperLink
        self.done = threading.Event()

    def run(self) -> None:
        offsets, rest = [0] * len(self.files), [b""] * len(self.files)
        rounds = [0] * len(self.files)
        while not self.done.is_set():
            for i, path in enumerate(self.files):
                try:
                    with path.open("rb") as f:
                        f.seek(offsets[i])
                        data = f.read()
                except FileNotFoundError:
                    continue
                now = time.time()
                offsets[i] += len(data)
                *lines, rest[i] = (rest[i] + data).split(b"\n")
                for line in lines:
                    if i == len(self.files) - 1:
                        if found := _PUSH.search(line):
                            self.pushes.append((int(found.group(1)), now))
                        continue
                    if found := _ROUND.search(line):
                        rounds[i] = int(found.group(1))
                    for mark, name in _MARKS.items():
                        if mark in line:
                            self.events[i].append((name, rounds[i], now))
            time.sleep(0.005)

    def breakdown(self, timings: list[dict], node_ids: dict[int, int]) -> list[dict]:
        """Per round: SuperNode poll and start of the site whose reply arrived last."""
        out = []
        for t in timings:
            r = t["round"]
            at = {
                i: {name: when for name, rr, when in ev if rr == r} for i, ev in self.events.items()
            }
            arrived = {}
            for i, a in at.items():
                if {"recv", "send"} <= set(a):
                    mine = [
                        when for n, when in self.pushes if n == node_ids[i] and when >= a["send"]
                    ]
                    arrived[i] = min(mine, default=a["send"])
            if not arrived or "to_handler_s" not in t:
                out.append({})
                continue
            last = max(arrived, key=arrived.get)
            poll = at[last]["recv"] - (arrived[last] - t["exchange_s"])
            out.append({"poll": poll, "start": t["to_handler_s"] - poll})
        return out


def federate(sites: list[Path], folder: Path, rounds: int, warm: bool) -> dict:
    """One run of the example app; its timings, breakdown and final consensus."""
    configs = [{"site": str(p)} for p in sites]
    out = folder / ("out-warm" if warm else "out-cold")
    with LocalFederation(folder / f"home-{warm}", 3, configs, warm_workers=warm) as federation:
        watch = LogWatch(
            [federation.log_dir / f"supernode-{i}.log" for i in range(3)],
            federation.log_dir / "superlink.log",
        )
        watch.start()
        run_config = {
            "public-pool": str(folder / "public.npy"),
            "output-dir": str(out),
            "rounds": rounds,
            "min-nodes": 3,
            "random-state": 0,
        }
        done = federation.run(APP, run_config, timeout=900)
        watch.done.set()
        node_ids = dict(federation.node_ids)
    if done.returncode != 0:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    timings = json.loads((out / "timings.json").read_text())
    return {
        "timings": timings,
        "split": watch.breakdown(timings, node_ids),
        "codes": np.load(out / "consensus_codes.npy")[-1],
    }


def table(name: str, result: dict) -> tuple[list[str], float]:
    lines = [
        f"{name}:",
        "",
        "| round | round s | training s | beyond training s | to handler s | "
        "handler − training s | back to server s | of to handler: SuperNode poll s | start s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t, s in zip(result["timings"], result["split"], strict=True):
        cells = [f"{s[k]:.2f}" if k in s else "–" for k in ("poll", "start")]
        lines.append(
            f"| {t['round']} | {t['exchange_s']:.2f} | {t['learner_s']:.2f} | "
            f"{t['exchange_s'] - t['learner_s']:.2f} | {t['to_handler_s']:.2f} | "
            f"{t['handler_s'] - t['learner_s']:.2f} | {t['from_handler_s']:.2f} | "
            + " | ".join(cells)
            + " |"
        )
    later = list(zip(result["timings"], result["split"], strict=True))[1:]
    med = {
        "beyond": statistics.median(t["exchange_s"] - t["learner_s"] for t, _ in later),
        "handler": statistics.median(t["to_handler_s"] for t, _ in later),
        "inside": statistics.median(t["handler_s"] - t["learner_s"] for t, _ in later),
        "back": statistics.median(t["from_handler_s"] for t, _ in later),
    }
    for key in ("poll", "start"):
        values = [s[key] for _, s in later if key in s]
        med[key] = statistics.median(values) if values else float("nan")
    lines += [
        "",
        f"median over rounds 2..{len(result['timings'])}: {med['beyond']:.2f} s beyond "
        f"training = to handler {med['handler']:.2f} s (SuperNode poll {med['poll']:.2f} + "
        f"start {med['start']:.2f}) + handler − training {med['inside']:.2f} s + back to "
        f"server {med['back']:.2f} s",
        "",
    ]
    return lines, med["beyond"]


def import_seconds(module: str, repeats: int = 3) -> float:
    """Median wall time of a fresh interpreter importing ``module`` (and exiting)."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", f"import {module}"], check=True, cwd=APP, capture_output=True
        )
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--torch", action="store_true", help="a torch MLP as the third site")
    args = parser.parse_args()

    X_clients, y_clients, X_public = split()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sites = write_sites(folder / "sites", X_clients, y_clients, X_public, learners(args.torch))
        np.save(folder / "public.npy", X_public)
        load = os.getloadavg()[0]
        cold = federate(sites, folder, args.rounds, warm=False)
        warm = federate(sites, folder, args.rounds, warm=True)
        load_after = os.getloadavg()[0]
    imports = {
        "Flower's flwr-clientapp entry point": "flwr.supernode.cli",
        "+ the relay app": "flwr.supernode.cli, cotrain_app.client_app",
        "+ the full ClientApp (cold path)": "flwr.supernode.cli, cotrain.flower.client_app",
    }
    if args.torch:
        imports["+ the full ClientApp and torch (cold, torch site)"] = (
            "flwr.supernode.cli, cotrain.flower.client_app, learners.torch, skops.io"
        )
    seconds = {name: import_seconds(module) for name, module in imports.items()}

    local = FederatedCoTrainer(learners(args.torch), rounds=args.rounds, random_state=0).fit(
        X_clients, y_clients, X_public=X_public
    )
    kind = "a torch MLP, a tree and a logistic regression" if args.torch else "small sklearn"
    lines = [
        f"Flower 1.41 on localhost, 3 SuperNodes (insecure), {kind} sites, {args.rounds} "
        "rounds, FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.1; cold (no site workers) then warm "
        f"(one warm worker per site) in one run; load average {load:.1f} before, "
        f"{load_after:.1f} after (other jobs share this machine)",
        "",
    ]
    cold_lines, cold_beyond = table("cold (no workers: each flwr-clientapp runs the round)", cold)
    warm_lines, warm_beyond = table("warm (site workers; the relay ClientApp hands over)", warm)
    lines += cold_lines + warm_lines
    lines += ["a new interpreter importing (s, median of 3):", ""]
    lines += [f"- {name}: {value:.2f}" for name, value in seconds.items()]
    lines += [""]
    lines += [
        f"median beyond training: cold {cold_beyond:.2f} s, warm {warm_beyond:.2f} s "
        f"(warm/cold = {warm_beyond / cold_beyond:.2f}; target ≤ 4 s: "
        f"{'met' if warm_beyond <= 4 else 'NOT met'})",
        "final consensus equal to the in-process trainer: "
        f"cold {np.array_equal(cold['codes'], local.pseudo_label_codes_)}, "
        f"warm {np.array_equal(warm['codes'], local.pseudo_label_codes_)}",
    ]
    record("flower_latency_torch" if args.torch else "flower_latency", "\n".join(lines))


if __name__ == "__main__":
    main()
