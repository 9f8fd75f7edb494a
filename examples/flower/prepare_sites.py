"""Write the site folders of a 3-site breast-cancer federation for the Flower app.

Each site gets its private share of the labeled data (iid), the public pool U and a
different scikit-learn learner, in ``OUT/site-<i>/site.toml``; the server's copy of U
goes to ``OUT/public.npy``. It also runs the same federation in-process and writes its
consensus to ``OUT/in_process_consensus.npy``, so a Flower run can be compared with it.

Run::

    python examples/flower/prepare_sites.py --out /tmp/cotrain-sites --rounds 5
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer, partition
from cotrain.datasets.loaders import load_breast_cancer_split
from cotrain.flower.site import write_sites


def mixed_learners() -> list:
    """One learner per site: a tree, a logistic regression and a k-NN."""
    return [
        DecisionTreeClassifier(max_depth=5),
        LogisticRegression(max_iter=500),
        KNeighborsClassifier(n_neighbors=5),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the site folders")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the in-process run")
    parser.add_argument(
        "--random-state", type=int, default=0, help="seed of the data split and the run (default 0)"
    )
    args = parser.parse_args(argv)

    data = load_breast_cancer_split(random_state=args.random_state)
    parts = partition.iid(data.y_labeled, n_clients=3, random_state=args.random_state)
    X_clients = [data.X_labeled[p] for p in parts]
    y_clients = [data.y_labeled[p] for p in parts]
    out = Path(args.out).resolve()
    paths = write_sites(out, X_clients, y_clients, data.X_public, mixed_learners())
    np.save(out / "public.npy", data.X_public)

    trainer = FederatedCoTrainer(
        mixed_learners(), rounds=args.rounds, random_state=args.random_state
    ).fit(X_clients, y_clients, X_public=data.X_public)
    np.save(out / "in_process_consensus.npy", trainer.pseudo_label_codes_)
    for path in paths:
        print(f"site: {path}")
    print(f"public pool (server): {out / 'public.npy'}")
    print(f"in-process run: test accuracy {trainer.score(data.X_test, data.y_test):.3f}")


if __name__ == "__main__":
    main()
