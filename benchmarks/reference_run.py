"""Reference arrays of eight mixed federations, to check that a refactor changes no result.

Saves, for eight configurations of a DT, RF, XGBoost, logistic-regression and torch-MLP
federation on breast cancer (5 rounds, seed 0) — plain, delta-coded over two workers, soft,
label-level randomized response, qualified majority, the library's defaults, record-level
private sites and the secure sum of teacher votes — the pseudo-label codes, predictions,
probabilities, bytes, mean and consensus accuracy per round and the privacy report's ε;
``--compare OLD.npz`` reports, array by array, whether they are identical to an earlier
run. Run it on the commit before a change (e.g. from a ``git worktree`` with
``PYTHONPATH`` pointing at it) and after it:

    python benchmarks/reference_run.py before.npz            # on the old commit
    python benchmarks/reference_run.py after.npz --compare before.npz

That a deployment gives the in-process result (localhost Flower, one plain and one
secure configuration, round by round) is recorded by ``benchmarks/deployment_parity.py``.
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
from cotrain.privacy import RandomizedResponse, SecureTeacherVotes, SubsampleAndAggregate
from learners import MLP, TorchClassifier, XGBoostClassifier

CONFIGS = {
    "hard": {},
    "delta_njobs2": {"encoding": "delta", "n_jobs": 2},
    "soft_mean": {"share": "soft", "consensus": "mean", "soft_bits": 8},
    # the noise must repeat to compare two commits: label-level RR (the noise level this
    # config always had) with noise derived from random_state (simulation-only opt-in)
    "rr_part": {
        "privacy": RandomizedResponse(epsilon=2.0, unit="label"),
        "classes": np.array([0, 1]),  # public configuration under privacy
        "reproducible_noise": True,
        "participation": 0.6,
    },
    "qualified": {"consensus": "qualified", "early_stopping": 2},
    # the library's defaults: trust="auto" (cross-fitted blends), the reliability vote
    "defaults": {"consensus": "auto", "trust": "auto"},
    # record-level privacy enforced by each site's own ledger (seeded noise, as above)
    "private_sites": {
        "privacy": SubsampleAndAggregate(n_teachers=3, epsilon=2.0, budget=8.0),
        "classes": np.array([0, 1]),
        "reproducible_noise": True,
    },
    # teacher votes summed across sites (seeded noise, as above)
    "secure_sum": {
        "privacy": SecureTeacherVotes(n_teachers=2, epsilon=4.0),
        "classes": np.array([0, 1]),
        "reproducible_noise": True,
    },
}


def estimators() -> list:
    return [
        DecisionTreeClassifier(),
        RandomForestClassifier(n_estimators=20),
        XGBoostClassifier(n_estimators=10),
        LogisticRegression(max_iter=500),
        TorchClassifier(MLP, module_params={"hidden": (16,)}, max_epochs=5, n_threads=1),
    ]


def epsilons(trainer: FederatedCoTrainer) -> np.ndarray:
    """The run's ε per client as its report states it (and each site's own, where kept);
    empty for a run without a privacy mechanism."""
    if trainer.privacy is None:
        return np.empty(0)
    report = trainer.privacy_report()
    values = [report["max_epsilon"]]
    for client in report.get("clients", []):
        values += [client.get("epsilon", np.nan), client.get("site_epsilon", np.nan)]
    return np.array(values, dtype=np.float64)


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
        out[f"{name}_consensus_acc"] = np.array(
            [np.nan if r.consensus_accuracy is None else r.consensus_accuracy
             for r in trainer.history_]
        )  # fmt: skip
        out[f"{name}_epsilon"] = epsilons(trainer)
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
