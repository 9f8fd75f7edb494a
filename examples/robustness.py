"""Hostile clients: how much do they cost the honest ones, under each consensus rule?

Digits scaled to [0, 1] (360 test rows, 700 public rows U, the remaining 737 rows split iid
over 10 clients), extra-trees clients, 5 rounds. A seeded share of the clients (0 %, 20 %,
40 %) is hostile (:mod:`cotrain.robustness.hostile`):

- ``random``: uniform random labels on U;
- ``constant``: always the same class — all hostile clients the same one (a colluding bloc);
- ``permuted``: a fixed derangement of the classes applied to the honest prediction, one
  derangement shared by all hostile clients (colluding confident liars);
- ``noise``: each honest label flipped to another class with probability 0.5;
- ``crash``: ``fit`` always raises; the trainer runs with ``on_client_error="skip"``.

(``--independent`` gives every constant / permuted client its own class / derangement.)

Consensus rules: majority, qualified majority (quorum 0.9), trimmed vote (trim 0.2),
reputation vote (floor 1/C) and reputation vote over the trimmed vote. For each rule the
table shows the mean test accuracy of the *honest* clients
after the last round, averaged over seeds, and in brackets the change from the all-honest
run with the same rule.

Run::

    python examples/robustness.py --seeds 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from joblib import Parallel, delayed
from sklearn.ensemble import ExtraTreesClassifier

from consensus import QualifiedMajority, ReputationVote, TrimmedVote
from cotrain import FederatedCoTrainer, partition
from cotrain.datasets.loaders import load_digits_split
from cotrain.robustness.hostile import make_hostile

KINDS = ("random", "constant", "permuted", "noise", "crash")
FRACTIONS = (0.2, 0.4)


def rules(n_classes: int) -> dict[str, Any]:
    """The consensus rules compared (column name -> rule)."""
    return {
        "majority": "majority",
        "qualified (0.9)": QualifiedMajority(quorum=0.9),
        "trimmed (0.2)": TrimmedVote(trim=0.2),
        "reputation": ReputationVote(decay=0.5, floor=1.0 / n_classes),
        "reputation + trimmed": ReputationVote(
            decay=0.5, floor=1.0 / n_classes, base=TrimmedVote(trim=0.2)
        ),
    }


def honest_accuracy(
    seed: int,
    kind: str,
    fraction: float,
    rule: Any,
    *,
    n_clients: int,
    rounds: int,
    trees: int,
    collude: bool,
) -> float:
    """Mean test accuracy of the honest clients after the last round of one run."""
    data = load_digits_split(random_state=seed)
    parts = partition.iid(data.y_labeled, n_clients=n_clients, random_state=seed)
    estimators = [ExtraTreesClassifier(n_estimators=trees, n_jobs=1) for _ in range(n_clients)]
    extra = {"rate": 0.5} if kind == "noise" else {}
    if kind in ("constant", "permuted"):
        extra["collude"] = collude
    estimators, hostile = make_hostile(estimators, fraction, kind, random_state=seed, **extra)
    trainer = FederatedCoTrainer(
        estimators,
        consensus=rule,
        rounds=rounds,
        random_state=seed,
        on_client_error="skip" if kind == "crash" else "raise",
    )
    trainer.fit(
        [data.X_labeled[p] for p in parts],
        [data.y_labeled[p] for p in parts],
        X_public=data.X_public,
        eval_set=(data.X_test, data.y_test),
    )
    acc = trainer.history_[-1].client_accuracy
    return float(np.mean([acc[i] for i in range(n_clients) if not hostile[i]]))


def markdown_table(results: dict[tuple[str, float, str], float], names: list[str]) -> str:
    """Rows (kind, fraction), columns rules; cells 'mean (change from all-honest)'."""
    lines = [
        "| hostile clients | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---" for _ in names) + " |",
    ]
    base = {name: results[("none", 0.0, name)] for name in names}
    lines.append("| none (all honest) | " + " | ".join(f"{base[n]:.3f}" for n in names) + " |")
    for kind in KINDS:
        for fraction in FRACTIONS:
            if (kind, fraction, names[0]) not in results:
                continue
            values = [results[(kind, fraction, n)] for n in names]
            cells = [f"{v:.3f} ({v - base[n]:+.3f})" for v, n in zip(values, names, strict=True)]
            lines.append(f"| {kind}, {fraction:.0%} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[tuple[str, float, str], float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seeds", type=int, default=2, help="runs per cell, seeds 0..SEEDS-1 (default 2)"
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=10,
        help="clients in the federation, honest and hostile together (default 10)",
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="co-training rounds of every run (default 5)"
    )
    parser.add_argument(
        "--trees",
        type=int,
        default=30,
        help="trees in each client's extra-trees model (default 30)",
    )
    parser.add_argument(
        "--n-jobs",
        type=int,
        default=2,
        help="federations trained at the same time, in worker processes (default 2)",
    )
    parser.add_argument(
        "--independent",
        action="store_true",
        help="hostile 'constant' and 'permuted' clients each pick their own class or class "
        "permutation instead of colluding on one",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: 1 seed, 2 rounds, 5 trees, 20 %% random and crash only; "
        "nothing is recorded",
    )
    args = parser.parse_args(argv)
    seeds, rounds, trees, kinds, fractions = args.seeds, args.rounds, args.trees, KINDS, FRACTIONS
    if args.quick:
        seeds, rounds, trees, kinds, fractions = 1, 2, 5, ("random", "crash"), (0.2,)

    names = list(rules(10))
    configs = [("none", 0.0)] + [(k, f) for k in kinds for f in fractions]
    tasks = [(s, k, f, n) for k, f in configs for n in names for s in range(seeds)]
    start = time.perf_counter()
    accs = Parallel(n_jobs=args.n_jobs)(
        delayed(honest_accuracy)(
            s,
            "random" if k == "none" else k,
            f,
            rules(10)[n],
            n_clients=args.clients,
            rounds=rounds,
            trees=trees,
            collude=not args.independent,
        )
        for s, k, f, n in tasks
    )
    by_config: dict[tuple[str, float, str], list[float]] = {}
    for (_, k, f, n), acc in zip(tasks, accs, strict=True):
        by_config.setdefault((k, f, n), []).append(acc)
    results = {key: float(np.mean(v)) for key, v in by_config.items()}

    text = (
        f"Digits, {args.clients} extra-trees clients ({trees} trees), iid, {rounds} rounds, "
        f"seeds 0..{seeds - 1}: mean test accuracy of the honest clients "
        f"(change from the all-honest run with the same rule). "
        f"{'Independent' if args.independent else 'Colluding'} constant/permuted clients. "
        f"{time.perf_counter() - start:.0f} s.\n\n" + markdown_table(results, names)
    )
    if args.quick:
        print(text)
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
        from _common import record

        record("robustness", text)
    return results


if __name__ == "__main__":
    main()
