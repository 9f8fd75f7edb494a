"""Teachers under add/remove: how many teachers one record changes, and ε under both relations.

Subsample-and-aggregate's sensitivity argument needs one private record to change one teacher
(:mod:`cotrain.privacy.mechanisms.shards`: a keyed hash of each record picks its teacher). This
measures it on one site's private rows of UCI Adult (``../shared/data/adult``, one-hot encoded by
:func:`cotrain.datasets.tabular.load_adult`; without the folder: scikit-learn's digits):

(a) 100 random removals and 100 random additions (records from outside the site): for each,
    with the same key, the number of teachers whose set of training records changed
    (target: 1 in every case), against the old split of row positions (the same permutation
    with the row deleted: records after it move between shards);
(b) the same cases at the vote level for the first ``--vote-cases`` of each: the largest
    number of votes that moved on one public example (|U| = 300, decision-tree teachers;
    add/remove allows one: L1 <= 2 of the count vector);
(c) ε of the typical configuration — ``SubsampleAndAggregate(n_teachers=50, sigma=40)``,
    |U| = 300 labels a round, δ = 1e-5 — after 2 and 10 rounds, under add/remove (the
    headline) and replace-one, from the trainer's ledger, with dp-accounting's PLD on the
    corresponding Gaussian events as a check.

Output: a table on stdout and ``benchmarks/results/teacher_removal.txt``; the last line is one
JSON object.

    python benchmarks/teacher_removal.py
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import record
from cotrain.privacy import PrivacyLedger, SubsampleAndAggregate
from cotrain.privacy.mechanisms.shards import teacher_shards
from cotrain.privacy.mechanisms.teacher_counts import teacher_votes


def load(rows: int, seed: int) -> tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One site's private rows, records from elsewhere (to add) and a public pool of 300."""
    try:
        from cotrain.datasets.tabular import load_adult

        X, y, _ = load_adult()
        name = "adult"
    except FileNotFoundError:
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        name = "digits (../shared/data/adult missing)"
    perm = np.random.default_rng(seed).permutation(len(y))
    site, other, public = perm[:rows], perm[rows : rows + 100], perm[rows + 100 : rows + 400]
    return name, X[site], y[site], X[other], y[other], X[public]


def changed_teachers(before: np.ndarray, after: np.ndarray, ids: np.ndarray, k: int) -> int:
    """Teachers whose set of records changed; records named by ``ids`` (original index)."""
    return sum(
        set(np.flatnonzero(before == j).tolist()) != set(ids[after == j].tolist()) for j in range(k)
    )


def membership(shards: list[np.ndarray], n: int) -> np.ndarray:
    out = np.full(n, -1)
    for j, s in enumerate(shards):
        out[s] = j
    return out


def positional(n: int, k: int, order: np.ndarray) -> np.ndarray:
    """The old split: a permutation of row positions cut with array_split."""
    return membership(np.array_split(order, k), n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000, help="the site's private rows")
    parser.add_argument("--teachers", type=int, default=50)
    parser.add_argument("--cases", type=int, default=100, help="removals (and additions)")
    parser.add_argument("--vote-cases", type=int, default=20, help="of each, at vote level")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    t0 = time.perf_counter()
    name, X, y, X_new, y_new, U = load(args.rows, args.seed)
    n, k = len(y), args.teachers
    rng = np.random.default_rng(args.seed + 1)
    key = rng.bytes(32)
    before = membership(teacher_shards(X, y, k, key), n)
    order = rng.permutation(n)
    old_before = positional(n, k, order)

    sizes = np.bincount(before, minlength=k)
    lines = [
        f"dataset {name}: one site of {n} private rows, {k} teachers, keyed-hash shards "
        f"(sizes {sizes.min()}..{sizes.max()})",
        "",
        "case        row   teachers changed (keyed hash)   (old positional split)",
    ]
    hashed, old = [], []
    removals = rng.choice(n, size=args.cases, replace=False)
    for r in removals:
        keep = np.arange(n) != r
        ids = np.flatnonzero(keep)
        after = membership(teacher_shards(X[keep], y[keep], k, key), n - 1)
        hashed.append(changed_teachers(before, after, ids, k))
        old_order = order[order != r]
        old_after = positional(n - 1, k, np.searchsorted(ids, old_order))
        old.append(changed_teachers(old_before, old_after, ids, k))
        lines.append(f"remove   {int(r):6d}   {hashed[-1]:29d}   {old[-1]:22d}")
    for i in range(min(args.cases, len(y_new))):
        at = int(rng.integers(0, n + 1))
        X2, y2 = np.insert(X, at, X_new[i], axis=0), np.insert(y, at, y_new[i])
        after = membership(teacher_shards(X2, y2, k, key), n + 1)
        ids = np.insert(np.arange(n), at, -1)  # the new record has no original index
        hashed.append(changed_teachers(before, after, ids, k))
        lines.append(f"add      {at:6d}   {hashed[-1]:29d}   {'':>22}")
    lines.append("")
    lines.append(
        f"(a) teachers changed over {len(hashed)} cases: max {max(hashed)}, min {min(hashed)} "
        f"(old positional split, {len(old)} removals: max {max(old)}, "
        f"mean {np.mean(old):.1f}, two or more in {np.mean(np.array(old) >= 2):.0%})"
    )

    # (b) votes
    from sklearn.tree import DecisionTreeClassifier

    classes = np.unique(np.concatenate([y, y_new]))
    tree = DecisionTreeClassifier(random_state=0)
    moved = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small shards: single-class teachers
        full = teacher_votes(tree, X, y, U, classes, np.random.default_rng(7), n_teachers=k)
        for r in removals[: args.vote_cases]:
            keep = np.arange(n) != r
            less = teacher_votes(
                tree, X[keep], y[keep], U, classes, np.random.default_rng(7), n_teachers=k
            )
            moved.append(int(np.abs(full - less).sum(axis=1).max()))
        for i in range(args.vote_cases):
            more = teacher_votes(
                tree,
                np.vstack([X, X_new[i : i + 1]]),
                np.concatenate([y, y_new[i : i + 1]]),
                U,
                classes,
                np.random.default_rng(7),
                n_teachers=k,
            )
            moved.append(int(np.abs(full - more).sum(axis=1).max()))
    lines.append(
        f"(b) vote level, {len(moved)} cases (|U| = {len(U)}): largest L1 change of one "
        f"example's vote counts {max(moved)} (one vote moved: 2), in "
        f"{sum(m > 0 for m in moved)} cases some vote changed"
    )

    # (c) ε
    import dp_accounting as dp

    sigma, n_labels, delta = 40.0, 300, 1e-5
    eps: dict[str, Any] = {}
    for rounds in (2, 10):
        ledger = PrivacyLedger([SubsampleAndAggregate(n_teachers=k, sigma=sigma)], 1, 2, n_labels)
        for _ in range(rounds):
            ledger.record([0])
        by_relation = ledger.epsilon_by_relation()
        check = {}
        for rel, nr in (
            ("add_or_remove", dp.NeighboringRelation.ADD_OR_REMOVE_ONE),
            ("replace_one", dp.NeighboringRelation.REPLACE_ONE),
        ):
            acc = dp.pld.PLDAccountant(nr)
            acc.compose(dp.GaussianDpEvent(sigma / math.sqrt(2 * n_labels)), rounds)
            check[rel] = acc.get_epsilon(delta)
        eps[str(rounds)] = {r: round(v, 4) for r, v in by_relation.items()}
        lines.append(
            f"(c) σ = {sigma:g}, |U| = {n_labels}, {rounds} rounds, δ = {delta:g}: "
            f"ε add/remove {by_relation['add_or_remove']:.4f} "
            f"(dp-accounting PLD {check['add_or_remove']:.4f}), "
            f"replace-one {by_relation['replace_one']:.4f} "
            f"(PLD {check['replace_one']:.4f})"
        )
        assert all(round(by_relation[r], 4) == round(check[r], 4) for r in check)
    lines.append(f"wall {time.perf_counter() - t0:.1f} s")
    summary = {
        "dataset": name.split(" ")[0],
        "rows": n,
        "teachers": k,
        "cases": len(hashed),
        "max_teachers_changed": max(hashed),
        "min_teachers_changed": min(hashed),
        "old_positional_max_teachers_changed": max(old),
        "old_positional_two_or_more": round(float(np.mean(np.array(old) >= 2)), 3),
        "max_vote_l1_change": max(moved),
        "epsilon": {"sigma": sigma, "n_labels": n_labels, "delta": delta, "by_rounds": eps},
    }
    record("teacher_removal", "\n".join(lines) + "\n" + json.dumps(summary))
    print(json.dumps(summary))  # the last line: one JSON object


if __name__ == "__main__":
    main()
