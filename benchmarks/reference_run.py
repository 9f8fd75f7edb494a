"""Reference arrays of five mixed federations, to check that a refactor changes no result.

Saves, for five configurations of a DT, RF, XGBoost, logistic-regression and torch-MLP
federation on breast cancer (5 rounds, seed 0), the pseudo-label codes, predictions,
probabilities, bytes per round and mean accuracy per round; ``--compare OLD.npz``
reports, array by array, whether they are identical to an earlier run. Run it on the
commit before a change (e.g. from a ``git worktree`` with ``PYTHONPATH`` pointing at it)
and after it:

    python benchmarks/reference_run.py before.npz            # on the old commit
    python benchmarks/reference_run.py after.npz --compare before.npz
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer, partition
from cotrain.datasets.loaders import load_breast_cancer_split
from cotrain.privacy import RandomizedResponse
from learners import MLP, TorchClassifier, XGBoostClassifier

CONFIGS = {
    "hard": {},
    "delta_njobs2": {"encoding": "delta", "n_jobs": 2},
    "soft_mean": {"share": "soft", "consensus": "mean", "soft_bits": 8},
    # the noise must repeat to compare two commits: label-level RR (the noise level this
    # config always had) with noise derived from random_state (simulation-only opt-in)
    "rr_part": {
        "privacy": RandomizedResponse(epsilon=2.0, unit="label"),
        "reproducible_noise": True,
        "participation": 0.6,
    },
    "qualified": {"consensus": "qualified", "early_stopping": 2},
}


def estimators() -> list:
    return [
        DecisionTreeClassifier(),
        RandomForestClassifier(n_estimators=20),
        XGBoostClassifier(n_estimators=10),
        LogisticRegression(max_iter=500),
        TorchClassifier(MLP, module_params={"hidden": (16,)}, max_epochs=5, n_threads=1),
    ]


def run() -> dict[str, np.ndarray]:
    data = load_breast_cancer_split(random_state=0)
    parts = partition.iid(data.y_labeled, n_clients=5, random_state=0)
    X = [data.X_labeled[p] for p in parts]
    y = [data.y_labeled[p] for p in parts]
    out = {}
    for name, params in CONFIGS.items():
        trainer = FederatedCoTrainer(estimators(), rounds=5, random_state=0, **params)
        with warnings.catch_warnings():  # the label-level and reproducible-noise warnings
            warnings.simplefilter("ignore", UserWarning)
            trainer.fit(X, y, X_public=data.X_public, eval_set=(data.X_test, data.y_test))
        out[f"{name}_codes"] = trainer.pseudo_label_codes_
        out[f"{name}_pred"] = trainer.predict(data.X_test)
        out[f"{name}_proba"] = trainer.predict_proba(data.X_test)
        out[f"{name}_bytes"] = np.array([[r.bytes_up, r.bytes_down] for r in trainer.history_])
        out[f"{name}_acc"] = np.array([r.mean_accuracy for r in trainer.history_])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="where to save the arrays (.npz)")
    parser.add_argument("--compare", help="an earlier run's .npz to compare with")
    args = parser.parse_args()
    arrays = run()
    np.savez(args.out, **arrays)
    if args.compare:
        old = np.load(args.compare)
        same = {k: np.array_equal(old[k], arrays[k], equal_nan=True) for k in old.files}
        for key, ok in same.items():
            print(f"{key:<24} {'identical' if ok else 'DIFFERENT'}")
        print(f"{sum(same.values())} of {len(same)} arrays identical")


if __name__ == "__main__":
    main()
