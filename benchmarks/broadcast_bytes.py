"""Downlink bytes of the trainer: packed broadcasts vs delta-coded broadcasts per client.

Runs :class:`cotrain.FederatedCoTrainer` twice per setting, ``encoding="packed"`` and
``encoding="delta"`` (same seed, so the same consensus, checked), and reads ``bytes_down``
from the history: with delta coding each client receives the consensus labels that changed
since the consensus it last acknowledged (:mod:`cotrain.wire.broadcast`). Digits and breast
cancer, 5 clients (3 random forests, 2 decision trees), 20 rounds; majority vote with full
participation, and qualified majority (abstains) with 60 % of the clients sampled per round
(so clients skip rounds and their references age).

Run: ``python benchmarks/broadcast_bytes.py`` (about a minute).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import record
from cotrain import FederatedCoTrainer
from cotrain.datasets.loaders import load_breast_cancer_split, load_digits_split

ROUNDS = 20


def learners():
    forests = [RandomForestClassifier(n_estimators=30, random_state=i) for i in range(3)]
    return forests + [DecisionTreeClassifier(random_state=i) for i in (3, 4)]


def run(split, encoding: str, **params) -> FederatedCoTrainer:
    parts = np.array_split(np.random.default_rng(0).permutation(len(split.y_labeled)), 5)
    return FederatedCoTrainer(
        learners(), rounds=ROUNDS, encoding=encoding, random_state=0, **params
    ).fit(
        [split.X_labeled[p] for p in parts],
        [split.y_labeled[p] for p in parts],
        X_public=split.X_public,
    )


def main() -> None:
    lines = [
        "bytes_down summed over the run (every client's broadcast, from history_), "
        f"{ROUNDS} rounds, 5 clients",
        "",
        "| data | |U| | setting | packed B | delta B | delta / packed | last round packed B "
        "| last round delta B | same consensus |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    settings = {
        "majority, all clients": {},
        "qualified, 60 % sampled": {"consensus": "qualified", "participation": 0.6},
    }
    for name, split in (
        ("digits", load_digits_split()),
        ("breast cancer", load_breast_cancer_split()),
    ):
        for label, params in settings.items():
            packed, delta = run(split, "packed", **params), run(split, "delta", **params)
            same = np.array_equal(packed.pseudo_label_codes_, delta.pseudo_label_codes_)
            p = sum(r.bytes_down for r in packed.history_)
            d = sum(r.bytes_down for r in delta.history_)
            lines.append(
                f"| {name} | {split.X_public.shape[0]} | {label} | {p} | {d} | {d / p:.1%} | "
                f"{packed.history_[-1].bytes_down} | {delta.history_[-1].bytes_down} | {same} |"
            )
    record("broadcast_bytes", "\n".join(lines))


if __name__ == "__main__":
    main()
