"""Cost of checkpointing every round, for a 5-client mixed federation.

Breast cancer (FedCT split: 85 labelled rows over 5 clients, |U| = 370), five different
learners — a decision tree, a random forest (100 trees), XGBoost (continued boosting),
a logistic regression and a torch MLP (continued training) — 10 rounds, majority vote.
The same run with and without ``checkpoint_dir``; the checkpoint writes are timed
inside the run (``Checkpointer.save``), their size is measured on disk, and a resume
from the last checkpoint is timed (restore only: the run had finished).

    python benchmarks/checkpoint_cost.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _common import record
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer, partition
from cotrain.datasets.loaders import load_breast_cancer_split
from cotrain.persistence.checkpoint import Checkpointer
from learners import XGBoostClassifier
from learners.modules import MLP
from learners.torch import TorchClassifier


def learners() -> list:
    return [
        DecisionTreeClassifier(),
        RandomForestClassifier(n_estimators=100),
        XGBoostClassifier(n_estimators=20),
        LogisticRegression(max_iter=500),
        TorchClassifier(module=MLP, module_params={"hidden": (64,)}, epochs_per_fit=5, n_threads=1),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    data = load_breast_cancer_split(random_state=0)
    parts = partition.iid(data.y_labeled, n_clients=5, random_state=0)
    X = [data.X_labeled[p].astype("float32") for p in parts]
    y = [data.y_labeled[p] for p in parts]
    U = data.X_public.astype("float32")

    def run(**params):
        model = FederatedCoTrainer(learners(), rounds=args.rounds, random_state=0, **params)
        start = time.perf_counter()
        model.fit(X, y, X_public=U)
        return model, time.perf_counter() - start

    writes: list[float] = []
    real_save = Checkpointer.save

    def timed_save(self, *a, **kw):
        start = time.perf_counter()
        out = real_save(self, *a, **kw)
        writes.append(time.perf_counter() - start)
        return out

    run()  # warm-up: imports, torch and xgboost initialisation
    plain, plain_s = run()
    with tempfile.TemporaryDirectory() as tmp:
        Checkpointer.save = timed_save
        try:
            saved, saved_s = run(checkpoint_dir=tmp)
        finally:
            Checkpointer.save = real_save
        latest = Path(tmp) / (Path(tmp) / "LATEST").read_text()
        sizes = {p.name: p.stat().st_size for p in latest.iterdir()}
        start = time.perf_counter()
        resumed = FederatedCoTrainer(
            learners(), rounds=args.rounds, random_state=0, checkpoint_dir=tmp
        ).fit(X, y, X_public=U, resume=True)
        resume_s = time.perf_counter() - start
    same = (
        resumed.predict(data.X_test.astype("float32"))
        == plain.predict(data.X_test.astype("float32"))
    ).all() and (saved.pseudo_label_codes_ == plain.pseudo_label_codes_).all()
    total = sum(sizes.values())
    per_round = [r.time_s for r in plain.history_]
    lines = [
        f"5 mixed clients (tree, RF-100, XGBoost-20, logistic, torch MLP-64), breast cancer, "
        f"{args.rounds} rounds",
        f"run without checkpoints: {plain_s:.2f} s ({statistics.median(per_round):.3f} s "
        "median round)",
        f"run with a checkpoint every round: {saved_s:.2f} s "
        f"(+{(saved_s - plain_s) / plain_s:.1%})",
        f"checkpoint write per round: median {statistics.median(writes) * 1000:.0f} ms, "
        f"max {max(writes) * 1000:.0f} ms; all writes {sum(writes):.2f} s = "
        f"{sum(writes) / saved_s:.0%} of the checkpointed run",
        f"checkpoint size: {total / 1024:.0f} KiB ("
        + ", ".join(f"{k} {v / 1024:.0f}" for k, v in sorted(sizes.items()))
        + " KiB)",
        f"resume (verify + restore a finished run): {resume_s:.2f} s",
        f"results identical with checkpoints and after resume: {bool(same)}",
    ]
    record("checkpoint_cost", "\n".join(lines))


if __name__ == "__main__":
    main()
