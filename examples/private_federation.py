"""Many small private sites co-train with record-level privacy that pays (UCI Adult).

Every site keeps its rows and its own learner (logistic regression, random forest or decision
tree). With ``SecureTeacherVotes`` each site splits its rows into a few teachers by a keyed
hash of each record, lets them vote on the public pool U, adds its share of integer (Skellam)
noise to the vote counts, and the server learns only the **sum over all sites** (secure
aggregation: in this in-process run the server object receives only sums; on Flower, SecAgg+
does it). The noise is paid once for the whole federation, so the summed votes survive it where
one site's few teachers would not. Each site then trains on its rows plus the labelled part of
U; its model never leaves it.

Teachers per site, queries per release and rounds are not tuned on the data:
``suggest_secure_plan`` chooses them from the public facts (sites, rows per site, |U|,
classes, ε) and says when ε is too small for the federation. The script prints the plan,
every site's accuracy alone (round 1: its own rows only) and co-trained, the share of U the
consensus labelled, and the ε per private record with what it protects, the relation, the
adversary and the assumptions it rests on.

Run::

    python examples/private_federation.py                    # 40 sites x 500 rows, ε = 4
    python examples/private_federation.py --threshold 0.6    # Confident-GNMax
    python examples/private_federation.py --quick            # 20 sites x 250 rows (~30 s)
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import LabelEncoder
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.datasets.tabular import load_adult
from cotrain.privacy import suggest_secure_plan

LEARNERS = {
    "logistic regression": lambda seed: LogisticRegression(max_iter=500),
    "random forest": lambda seed: RandomForestClassifier(
        n_estimators=20, random_state=seed, n_jobs=1
    ),
    "decision tree": lambda seed: DecisionTreeClassifier(min_samples_leaf=5, random_state=seed),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sites", type=int, default=40, help="number of private sites")
    parser.add_argument("--rows", type=int, default=500, help="private rows held by each site")
    parser.add_argument("--public", type=int, default=1000, help="rows of the public pool U")
    parser.add_argument("--test", type=int, default=4000, help="rows every site is scored on")
    parser.add_argument(
        "--epsilon", type=float, default=4.0, help="ε per private record for the whole run"
    )
    parser.add_argument(
        "--threshold", type=float, default=None,
        help="answer only where the noisy top count reaches this share of all votes",
    )  # fmt: skip
    parser.add_argument(
        "--dropouts", type=int, default=0, help="sites that may fail without weakening ε"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the split and the learners")
    parser.add_argument("--data", default=None, help="folder holding adult/ (default: found)")
    parser.add_argument(
        "--quick", action="store_true", help="20 sites of 250 rows, |U| = 500, 2000 test rows"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sites, args.rows, args.public, args.test = 20, 250, 500, 2000
    return args


def split(args: argparse.Namespace) -> dict[str, Any]:
    """Sites, U and test rows drawn at random from Adult; features scaled on U (public)."""
    X, labels, _ = load_adult(args.data)
    y = LabelEncoder().fit_transform(labels)
    need = args.sites * args.rows + args.public + args.test
    if need > len(y):
        raise ValueError(f"the split needs {need} rows; Adult has {len(y)}")
    order = np.random.default_rng(args.seed).permutation(len(y))
    sites = order[: args.sites * args.rows].reshape(args.sites, args.rows)
    public = order[args.sites * args.rows :][: args.public]
    test = order[args.sites * args.rows + args.public :][: args.test]
    scale = (X - X[public].mean(axis=0)) / (X[public].std(axis=0) + 1e-12)
    return {
        "X": [scale[s] for s in sites], "y": [y[s] for s in sites], "U": scale[public],
        "test": (scale[test], y[test]),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    data = split(args)
    names = [list(LEARNERS)[i % len(LEARNERS)] for i in range(args.sites)]
    estimators = [LEARNERS[name](args.seed * 100 + i) for i, name in enumerate(names)]
    plan = suggest_secure_plan(
        args.sites, args.rows, args.public, 2, args.epsilon, dropouts=args.dropouts
    )
    print(
        f"plan from the public facts: {plan.n_teachers} teachers a site "
        f"({args.rows // plan.n_teachers} rows each), {plan.queries} queries in each of "
        f"{plan.releases} releases, {plan.rounds} rounds; noise σ = {plan.sigma:.1f} votes, "
        f"{plan.noise_share:.0%} of the {args.sites * plan.n_teachers} votes a query\n"
    )
    privacy = plan.mechanism(threshold=args.threshold)
    trainer = FederatedCoTrainer(
        estimators, rounds=plan.rounds, privacy=privacy, classes=np.array([0, 1]),
        random_state=args.seed,
    )  # fmt: skip
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny teachers warn about their shards
        trainer.fit(data["X"], data["y"], X_public=data["U"], eval_set=data["test"])
    seconds = time.perf_counter() - start
    alone, together = trainer.history_[0], trainer.history_[-1]
    print(f"{'site':>4}  {'learner':<20} {'alone':>6} {'co-trained':>10} {'change':>7}")
    for i, name in enumerate(names):
        a, b = alone.client_accuracy[i], together.client_accuracy[i]
        print(f"{i:>4}  {name:<20} {a:6.3f} {b:10.3f} {b - a:+7.3f}")
    print(
        f"mean  {'':<20} {alone.mean_accuracy:6.3f} {together.mean_accuracy:10.3f} "
        f"{together.mean_accuracy - alone.mean_accuracy:+7.3f}"
    )
    report = trainer.privacy_report()
    print(f"\nshare of U labelled by the consensus: {together.coverage:.0%}  ({seconds:.0f} s)")
    relation = "add/remove" if report["relation"] == "add_or_remove" else "replace-one"
    print(
        f"ε = {report['max_epsilon']:.3f} per private record of any one site, for the whole run "
        f"(δ = {report['delta']:g}, {relation} neighbours),\n"
        "against the server and anyone who sees the summed votes, assuming:"
    )
    for assumption in report["assumptions"]:
        print(f"  - {assumption}")
    return {
        "alone": alone.client_accuracy, "co_trained": together.client_accuracy,
        "epsilon": report["max_epsilon"], "answered": together.coverage, "plan": plan,
    }  # fmt: skip


if __name__ == "__main__":
    main()
