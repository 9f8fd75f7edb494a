"""Privacy audit on digits: LiRA on released labels, one-run canary ε lower bounds.

The adversary is the server. It sees what a FedCT client uploads in one round: hard labels on
the public pool U (700 digits, scaled to [0, 1]), after the client's privacy mechanism. Clients
(each one release, i.e. one round with no pseudo-labelled rows):

- ``1-NN``: a 1-nearest-neighbour learner, labels shared without noise;
- ``deep tree``: ``DecisionTreeClassifier()`` (no depth limit), labels shared without noise;
- ``1-NN + RR``: the 1-NN's labels through K-ary randomized response with record-level
  sensitivity s* = |U| (one record may change every released label), ε = 8 per release at
  δ = 0 (``RandomizedResponse(8, sensitivity=700)``);
- ``S&A (1-NN teachers)``: record-level DP for any learner, subsample-and-aggregate inside the
  client (:class:`cotrain.privacy.teachers.SubsampleAndAggregate`, 25 disjoint 1-NN teachers,
  GNMax calibrated to (ε, δ) = (8, 1e-5) or (2, 1e-5) for the release).

Every ε is record-level (one private training record of the client), against the server, for
ONE release; "accounted ε" is :func:`cotrain.privacy.epsilon_spent` of the mechanism's
``dp_event`` at the δ stated.

Per seed (5 seeds; digits re-split per seed): members = 250 rows (the client's data),
non-members = 250 other rows, the attacker's population = the remaining 597 rows.

1. **LiRA** (:func:`cotrain.audit.lira_attack`): 64 reference clients, per-target Bernoulli
   likelihood ratio on the agreement of the 10 nearest public points' released labels with
   the target's label. AUC and TPR at 1 % / 0.1 % FPR (with 250 non-members the latter is the
   TPR at zero false positives).
2. **Forged pool**: the server slips the 500 targets into U. LiRA as in 1 on U ∪ targets (a
   target's nearest public point is then itself); and the **Yeom** attack on U := targets,
   ``1[released label == y]`` (through the same mechanism, calibrated to the labels released).
3. **Canary ε lower bound** (:func:`cotrain.audit.one_run_audit`): 500 canaries (copies of
   distinct public points with uniformly random labels), each added to the client's data with
   probability 1/2, ONE release; guess OUT for the 200 lowest scores and IN for the 50
   highest (fixed before any run: in a hard-label release a member canary forces its label,
   so the confident side is OUT); bound at confidence 95 % (β = 0.05), δ = 0 for the pure
   mechanisms and the non-private clients, δ = 1e-5 for GNMax.

    python benchmarks/privacy_audit.py            # about 1 minute on 2 cores
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cotrain.audit import AuditResult, lira_attack, make_canaries, one_run_audit
from cotrain.datasets.loaders import load_digits_split
from cotrain.privacy import RandomizedResponse, epsilon_spent
from cotrain.privacy.teachers import SubsampleAndAggregate

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "privacy_audit.json"
CLASSES = np.arange(10)
DELTA = 1e-5
N_MEMBERS = 250
N_REFERENCE = 64
N_NEIGHBORS = 10
N_CANARIES, K_PLUS, K_MINUS, BETA = 500, 50, 200, 0.05

Release = Callable[[Any, Any], np.ndarray]


def _fresh(parent: np.random.Generator) -> np.random.Generator:
    """A new generator per release: the mechanism's noise is never replayed."""
    return np.random.default_rng(parent.integers(2**63))


def client(name: str, X_pool: np.ndarray, seed: int) -> tuple[Release, float | None, float]:
    """``(release, accounted ε, δ)`` of a client whose labels go to the pool ``X_pool``."""
    parent = np.random.default_rng([seed, zlib.crc32(name.encode())])  # own noise per client
    n = len(X_pool)
    knn = KNeighborsClassifier(1)
    if name == "1-NN":
        return (lambda X, y: knn.fit(X, y).predict(X_pool)), None, 0.0
    if name == "deep tree":

        def tree(X: Any, y: Any) -> np.ndarray:
            model = DecisionTreeClassifier(random_state=int(parent.integers(2**31)))
            return model.fit(X, y).predict(X_pool)

        return tree, None, 0.0
    if name.startswith("1-NN + RR"):
        rr = RandomizedResponse(8.0, sensitivity=n)

        def noisy(X: Any, y: Any) -> np.ndarray:
            labels = knn.fit(X, y).predict(X_pool).astype(np.int64)
            return rr.randomize(labels, len(CLASSES), _fresh(parent))

        return noisy, 8.0, 0.0  # pure ε-DP: ε = 8 at δ = 0
    if name.startswith("S&A"):
        eps = float(name.split("ε=")[1].rstrip(")"))
        sa = SubsampleAndAggregate(n_teachers=25, epsilon=eps, delta=DELTA)

        def teachers(X: Any, y: Any) -> np.ndarray:
            return sa.release(knn, X, y, X_pool, CLASSES, _fresh(parent))

        return teachers, epsilon_spent([sa.dp_event(len(CLASSES), n)], DELTA), DELTA
    raise ValueError(name)


CLIENTS = ["1-NN", "deep tree", "1-NN + RR (ε=8)", "S&A (ε=8)", "S&A (ε=2)"]


def one_seed(seed: int) -> list[dict[str, Any]]:
    split = load_digits_split(random_state=seed)
    X_pub, y_pub = split.X_public, split.y_public
    X_all = np.concatenate([split.X_labeled, split.X_test])
    y_all = np.concatenate([split.y_labeled, split.y_test])
    order = np.random.default_rng(seed).permutation(len(y_all))
    mem, non, pop = np.split(order, [N_MEMBERS, 2 * N_MEMBERS])
    Xm, ym, Xn, yn = X_all[mem], y_all[mem], X_all[non], y_all[non]
    targets = np.concatenate([Xm, Xn])
    Xc, yc = make_canaries(X_pub, CLASSES, N_CANARIES, random_state=seed)
    rows = []
    for name in CLIENTS:
        t0 = time.perf_counter()
        release, eps, delta = client(name, X_pub, seed)
        released = release(Xm, ym)
        lira = lira_attack(
            release,
            Xm,
            ym,
            Xn,
            yn,
            X_all[pop],
            y_all[pop],
            X_pub,
            n_reference=N_REFERENCE,
            n_neighbors=N_NEIGHBORS,
            target_release=released,
            random_state=seed,
        )
        X_forged = np.concatenate([X_pub, targets])  # the server slips the targets into U
        lira_forged = lira_attack(
            client(name, X_forged, seed + 3000)[0],
            Xm,
            ym,
            Xn,
            yn,
            X_all[pop],
            y_all[pop],
            X_forged,
            n_reference=N_REFERENCE,
            n_neighbors=N_NEIGHBORS,
            random_state=seed,
        )
        forged = client(name, targets, seed + 1000)[0](Xm, ym)  # U := the 500 targets
        correct = (forged == np.concatenate([ym, yn])).astype(float)
        yeom = AuditResult.from_scores(correct[:N_MEMBERS], correct[N_MEMBERS:], attack="yeom")
        canary = one_run_audit(
            client(name, X_pub, seed + 2000)[0],
            Xm,
            ym,
            Xc,
            yc,
            X_pub,
            k_plus=K_PLUS,
            k_minus=K_MINUS,
            beta=BETA,
            delta=delta,
            random_state=seed,
        )
        rows.append(
            {
                "client": name,
                "seed": seed,
                "accounted_epsilon": eps,
                "delta": delta if eps is not None else None,
                "release_accuracy_on_U": float(np.mean(released == y_pub)),
                "lira": lira.as_dict(),
                "lira_forged_pool": lira_forged.as_dict(),
                "yeom_forged_pool": yeom.as_dict(),
                "canary": canary.as_dict(),
                "seconds": round(time.perf_counter() - t0, 2),
            }
        )
        print(
            f"seed {seed} {name:18s} LiRA AUC {lira.auc:.3f} TPR@1% {lira.tpr_at_1pct_fpr:.3f} "
            f"TPR@0.1% {lira.tpr_at_0_1pct_fpr:.3f} | forged: LiRA TPR@1% "
            f"{lira_forged.tpr_at_1pct_fpr:.3f} Yeom AUC {yeom.auc:.3f} | canary ε >= "
            f"{canary.epsilon_lower_bound:.2f} (accounted {eps}) [{rows[-1]['seconds']} s]",
            flush=True,
        )
    return rows


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for name in CLIENTS:
        mine = [r for r in rows if r["client"] == name]

        def stat(get: Callable[[dict[str, Any]], float], mine: list = mine) -> list[float]:
            vals = np.array([get(r) for r in mine], dtype=float)
            return [round(float(vals.mean()), 4), round(float(vals.std()), 4)]

        out.append(
            {
                "client": name,
                "accounted_epsilon": mine[0]["accounted_epsilon"],
                "delta": mine[0]["delta"],
                "release_accuracy_on_U": stat(lambda r: r["release_accuracy_on_U"]),
                "lira_auc": stat(lambda r: r["lira"]["auc"]),
                "lira_tpr_at_1pct_fpr": stat(lambda r: r["lira"]["tpr_at_1pct_fpr"]),
                "lira_tpr_at_0_1pct_fpr": stat(lambda r: r["lira"]["tpr_at_0_1pct_fpr"]),
                "lira_forged_auc": stat(lambda r: r["lira_forged_pool"]["auc"]),
                "lira_forged_tpr_at_1pct_fpr": stat(
                    lambda r: r["lira_forged_pool"]["tpr_at_1pct_fpr"]
                ),
                "yeom_auc": stat(lambda r: r["yeom_forged_pool"]["auc"]),
                "canary_epsilon_lower_bound": stat(lambda r: r["canary"]["epsilon_lower_bound"]),
                "canary_max_epsilon_lower_bound": max(
                    r["canary"]["epsilon_lower_bound"] for r in mine
                ),
            }
        )
    return out


def table(summary: list[dict[str, Any]]) -> str:
    def pm(v: list[float]) -> str:
        return f"{v[0]:.3f} ± {v[1]:.3f}"

    lines = [
        "| client | accounted ε (record, 1 release) | labels right on U | LiRA AUC | "
        "LiRA TPR@1% FPR | LiRA TPR@0.1% FPR | forged U: LiRA AUC | forged U: LiRA TPR@1% | "
        "forged U: Yeom AUC | canary ε lower bound (mean ± sd; max) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        eps = (
            "none (non-private)"
            if s["accounted_epsilon"] is None
            else f"{s['accounted_epsilon']:.2f} at δ = {s['delta']:g}"
        )
        lines.append(
            f"| {s['client']} | {eps} | {pm(s['release_accuracy_on_U'])} | {pm(s['lira_auc'])} | "
            f"{pm(s['lira_tpr_at_1pct_fpr'])} | {pm(s['lira_tpr_at_0_1pct_fpr'])} | "
            f"{pm(s['lira_forged_auc'])} | {pm(s['lira_forged_tpr_at_1pct_fpr'])} | "
            f"{pm(s['yeom_auc'])} | {pm(s['canary_epsilon_lower_bound'])}; "
            f"{s['canary_max_epsilon_lower_bound']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    with threadpool_limits(1):  # sklearn's OpenMP k-NN is 50x slower on a busy 2-core machine
        rows = [row for seed in range(args.seeds) for row in one_seed(seed)]
    summary = summarise(rows)
    for s in summary:  # an audit bound above the accounted ε would prove the accounting wrong
        if s["accounted_epsilon"] is not None:
            assert s["canary_max_epsilon_lower_bound"] <= s["accounted_epsilon"], s
    result = {
        "command": "python benchmarks/privacy_audit.py" + "".join(f" {a}" for a in argv or []),
        "date": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "config": {
            "dataset": "sklearn digits / 16, load_digits_split(random_state=seed): |U| = 700",
            "n_members": N_MEMBERS,
            "n_nonmembers": N_MEMBERS,
            "n_population": 1097 - 2 * N_MEMBERS,
            "lira": {"n_reference": N_REFERENCE, "n_neighbors": N_NEIGHBORS, "model": "bernoulli"},
            "canary": {
                "n_canaries": N_CANARIES,
                "k_plus": K_PLUS,
                "k_minus": K_MINUS,
                "beta": BETA,
                "design": "copies of distinct public points, uniformly random labels, "
                "score = released label of that public point == canary label",
            },
            "epsilon_unit": "one private training record of the client; adversary: the server",
        },
        "summary": summary,
        "rows": rows,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print()
    print(table(summary))
    print(f"\n{result['seconds']} s; saved to {args.out}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
