"""Clustered co-training under concept shift: two groups of clients, two label maps.

The thesis's clustered FL (ch. 6) in label space. Digits over six clients with mixed
learners (each group: ExtraTrees, random forest, scaled logistic regression); group B
(clients 3-5) relabels every class ``k -> (k + 3) mod 10``. Public pool U: half of the
training rows, unlabelled; each client holds a sixth of the other half. Arms, each
``trust=None`` (the paper's FedCT: every pseudo-label at full weight), 6 rounds:

- plain FedCT over all six clients (one consensus for both label maps);
- clustered co-training, ``clustering="agreement"`` (hard labels, majority), and the soft
  variant (``share="soft"``, ``consensus="mean"``, similarity ``1 - total variation``);
- each group's own federation (three clients, FedCT);
- a congruent control: all six clients under one label map, clustered (it must not split);
- the limit of the defaults: one label map, but clients 0-2 hold only digits 0-4 and
  clients 3-5 only 5-9 (the thesis's congruent non-iid example, Fig. 6.7), with the
  default rule (splits on round 1's local labels), with the thesis's gate
  (``stationary=0.1`` and a 10 % probe of U) and plain; and the gate on the label shift.

Accuracy: each client's model on the test rows under its own group's labels, averaged
per group, mean ± std over seeds. Cluster recovery: the final clusters equal the two
groups exactly.

    python benchmarks/clustered_cotraining.py --seeds 3
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import record
from sklearn.datasets import load_digits
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from cotrain import FederatedCoTrainer
from cotrain.clustering import AgreementClustering

GROUPS = ((0, 1, 2), (3, 4, 5))
PERMUTATION = np.roll(np.arange(10), -3)  # class k -> (k + 3) mod 10


def learners() -> list:
    """One group's three learners (the same for both groups)."""
    return [
        ExtraTreesClassifier(n_estimators=40),
        RandomForestClassifier(n_estimators=40),
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=300)),
    ]


def split(seed: int) -> dict:
    """Test rows, public pool and six private shards; group B's labels permuted."""
    X, y = load_digits(return_X_y=True)
    X_rest, X_test, y_rest, y_test = train_test_split(
        X, y, test_size=0.25, random_state=seed, stratify=y
    )
    X_priv, X_public, y_priv, _ = train_test_split(
        X_rest, y_rest, test_size=0.5, random_state=seed, stratify=y_rest
    )
    parts = np.array_split(np.random.default_rng(seed).permutation(len(y_priv)), 6)
    # the thesis's congruent non-iid case: clients 0-2 hold digits 0-4, clients 3-5 5-9
    low, high = np.flatnonzero(y_priv < 5), np.flatnonzero(y_priv >= 5)
    by_class = [low[i::3] for i in range(3)] + [high[i::3] for i in range(3)]
    return {
        "X": [X_priv[p] for p in parts],
        "y_true": [y_priv[p] for p in parts],
        "X_by_class": [X_priv[p] for p in by_class],
        "y_by_class": [y_priv[p] for p in by_class],
        "X_public": X_public,
        "X_test": X_test,
        "y_test": y_test,
    }


def labels_of(group: int, y: np.ndarray) -> np.ndarray:
    return y if group == 0 else PERMUTATION[y]


def fit(
    data: dict,
    clients: tuple[int, ...],
    seed: int,
    shifted: bool = True,
    by_class: bool = False,
    **params,
):
    """A FedCT run over ``clients``; returns (accuracy by client, final clusters, first
    round with the two groups as clusters)."""
    group = {i: (1 if i in GROUPS[1] and shifted else 0) for i in clients}
    estimators = [learners()[i % 3] for i in clients]
    X, y = ("X_by_class", "y_by_class") if by_class else ("X", "y_true")
    trainer = FederatedCoTrainer(estimators, rounds=6, trust=None, random_state=seed, **params)
    trainer.fit(
        [data[X][i] for i in clients],
        [labels_of(group[i], data[y][i]) for i in clients],
        X_public=data["X_public"],
    )
    accuracy = {
        i: float(np.mean(model.predict(data["X_test"]) == labels_of(group[i], data["y_test"])))
        for i, model in zip(clients, trainer.clients_, strict=True)
    }
    history = trainer.history_
    clusters = tuple(tuple(clients[j] for j in c) for c in history[-1].clusters)
    first = next((r.round for r in history if r.clusters == GROUPS), None)
    return accuracy, clusters, first


def group_means(accuracy: dict) -> tuple[float, float]:
    """Mean accuracy of each group's clients (NaN for a group not in the run)."""
    values = [[accuracy[i] for i in g if i in accuracy] for g in GROUPS]
    return tuple(float(np.mean(v)) if v else float("nan") for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    all_clients = (0, 1, 2, 3, 4, 5)
    arms = {
        "plain FedCT (6 clients, one consensus)": {"clients": all_clients},
        "clustered, hard labels (agreement)": {
            "clients": all_clients, "clustering": "agreement",
        },
        "clustered, soft labels (mean, 1 - TV)": {
            "clients": all_clients, "share": "soft", "consensus": "mean",
            "clustering": AgreementClustering(similarity="tv"),
        },
        "group A alone (FedCT, 3 clients)": {"clients": GROUPS[0]},
        "group B alone (FedCT, 3 clients)": {"clients": GROUPS[1]},
        "control: one label map, clustered": {
            "clients": all_clients, "clustering": "agreement", "shifted": False,
        },
        "control: one label map, plain": {"clients": all_clients, "shifted": False},
        "limit: one map, 0-2 hold 0-4, 3-5 hold 5-9, clustered": {
            "clients": all_clients, "clustering": "agreement", "shifted": False,
            "by_class": True,
        },
        "limit: same, clustered, gated (stationary, probe 0.1)": {
            "clients": all_clients, "shifted": False, "by_class": True,
            "clustering": AgreementClustering(stationary=0.1, probe=0.1),
        },
        "limit: same, plain": {"clients": all_clients, "shifted": False, "by_class": True},
        "shift, clustered, gated (stationary, probe 0.1)": {
            "clients": all_clients,
            "clustering": AgreementClustering(stationary=0.1, probe=0.1),
        },
    }  # fmt: skip
    start = time.perf_counter()
    results: dict[str, list] = {name: [] for name in arms}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # learner convergence chatter
        for seed in seeds:
            data = split(seed)
            for name, spec in arms.items():
                spec = dict(spec)
                clients = spec.pop("clients")
                results[name].append(fit(data, clients, seed, **spec))
    wall = time.perf_counter() - start

    lines = [
        f"digits, 6 clients (groups A = 0-2, B = 3-5: labels k -> k+3 mod 10), mixed "
        f"learners, 6 rounds, trust=None, seeds {seeds}",
        "accuracy: clients' test accuracy under their own group's labels, mean ± std over seeds",
        "",
        f"{'arm':54s} {'all clients':>13s} {'group A':>13s} {'group B':>13s} "
        "clusters found (per seed)",
    ]

    def show(values: list[float]) -> str:
        return "-" if np.isnan(values).all() else f"{np.mean(values):.3f} ± {np.std(values):.3f}"

    for name, runs in results.items():
        every = [float(np.mean(list(acc.values()))) for acc, _, _ in runs]
        a = [group_means(acc)[0] for acc, _, _ in runs]
        b = [group_means(acc)[1] for acc, _, _ in runs]
        found = "; ".join(
            "|".join(",".join(map(str, c)) for c in clusters) or "-" for _, clusters, _ in runs
        )
        lines.append(f"{name:54s} {show(every):>13s} {show(a):>13s} {show(b):>13s} {found}")
    exact = [first for _, clusters, first in results["clustered, hard labels (agreement)"]]
    lines += [
        "",
        f"groups recovered exactly (hard): {sum(f is not None for f in exact)}/{len(seeds)} "
        f"seeds, from round {exact}",
        f"wall time: {wall:.0f} s",
    ]
    record("clustered_cotraining", "\n".join(lines))


if __name__ == "__main__":
    main()
