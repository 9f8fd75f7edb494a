"""Private co-training that pays: teacher votes summed across many small sites (issue 29).

For each dataset and seed, on one split into many small sites, a public pool U and a test set:

- ``local``: each site's learner on its own rows (no communication);
- ``fedct_nonprivate``: FedCT with the same learners and rounds;
- ``fedct_private``: FedCT with :class:`cotrain.privacy.SecureTeacherVotes` — every site's
  teachers (keyed-hash shards of its rows) vote on U, each site adds its share of Skellam
  noise, and the server learns only the sum over sites (in-process secure sum); ε for the
  whole run;
- ``fedct_confident`` (``--confident``): the same with Confident-GNMax (``threshold=0.6``);
- ``fedct_per_site`` (``--per-site``): the per-site mechanism,
  :class:`cotrain.privacy.SubsampleAndAggregate` with GNMax noise calibrated to the same
  total ε (each site hides a record among its own teachers); with ``--confident`` also
  ``fedct_per_site_confident``, the same with Confident-GNMax at each site
  (``threshold=0.6``, half of U answered at most).

Every ε is record-level: one private training record of one site, add/remove, δ = 1e-5,
against the server (and anyone who sees the sums); the secure sum assumes secure aggregation
reveals only the sum and that every site draws its noise share honestly. Metric: the mean test
accuracy of the sites' own models after the last round; every site's figure is kept in the
JSON.

The plan (teachers per site, queries per release, rounds) is not tuned per dataset: it is
what :func:`cotrain.privacy.suggest_secure_plan` chooses from the split's public facts
(sites, rows per site, |U|, classes, ε); FedCT and local use the same rounds. The rule's
constants were read off plans tuned by hand on Adult and wine quality; abalone (3 classes)
and digits (10 classes) were never tuned on.

Prints one JSON line per dataset (means over seeds): ``dataset``, ``epsilon``, ``delta``,
``relation``, ``plan``, ``local``, ``fedct_nonprivate``, ``fedct_private``,
``nonprivate_gain``, ``private_gain``, ``answered`` (share of U labelled),
``consensus_accuracy`` (of the released labels), ``sites_losing_to_local`` (per seed),
``gain_kept`` (private gain over local / non-private gain), and ``seeds`` with every run and
every site's accuracy. Learners: logistic regression, random forest (20), decision tree,
repeated over the sites.

    python benchmarks/private_federation.py                  # every dataset; 3 seeds
    python benchmarks/private_federation.py --datasets adult --seeds 0
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from untuned_mixed import load

from cotrain import FederatedCoTrainer
from cotrain.baselines import LocalOnly
from cotrain.datasets.tabular import load_wine_quality
from cotrain.federation import pool_transport
from cotrain.federation.secure_client import SecureClient
from cotrain.privacy import SubsampleAndAggregate, SuggestedPlan, suggest_secure_plan
from cotrain.privacy.accounting.epsilon import gaussian_epsilon, gaussian_noise_multiplier

RESULTS = Path(__file__).resolve().parent / "results" / "private_federation.jsonl"
DELTA = 1e-5

#: per dataset, the public facts of the split: sites, private rows per site, |U|, test rows.
#: Teachers, queries per release and rounds are not set here: :func:`suggest_secure_plan`
#: chooses them from these facts, the classes and ε (its constants were read off plans tuned
#: by hand on Adult and wine; abalone and digits were never tuned on).
CONFIGS: dict[str, dict[str, int]] = {
    "adult": {"sites": 40, "rows": 500, "public": 1000, "test": 4000},
    "wine": {"sites": 20, "rows": 200, "public": 800, "test": 520},
    "abalone": {"sites": 12, "rows": 200, "public": 800, "test": 977},
    "digits": {"sites": 10, "rows": 100, "public": 400, "test": 397},
}  # fmt: skip


def learners(n: int, seed: int) -> list[Any]:
    """Logistic regression, random forest (20), decision tree (min. 5 rows a leaf), repeated
    over ``n`` sites."""
    kinds = [
        lambda s: LogisticRegression(max_iter=500),
        lambda s: RandomForestClassifier(n_estimators=20, random_state=s, n_jobs=1),
        lambda s: DecisionTreeClassifier(min_samples_leaf=5, random_state=s),
    ]
    return [kinds[i % 3](seed * 100 + i) for i in range(n)]


def load_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Adult and abalone as the untuned benchmark reads them; wine quality in 3 classes
    (score ≤ 5, 6, ≥ 7; red and white, duplicates removed)."""
    if name != "wine":
        return load(name)
    X, y, _ = load_wine_quality(target="quality")
    return np.asarray(X, dtype=np.float64), np.digitize(y, [5.5, 6.5])


def split(name: str, seed: int) -> dict[str, Any]:
    """Random cut into sites, U and test (stratification is not needed at these sizes)."""
    cfg = CONFIGS[name]
    X, y = load_dataset(name)
    order = np.random.default_rng(seed).permutation(len(y))
    n_site = cfg["sites"] * cfg["rows"]
    sites = order[:n_site].reshape(cfg["sites"], cfg["rows"])
    public = order[n_site : n_site + cfg["public"]]
    test = order[n_site + cfg["public"] :][: cfg["test"]]
    mean, std = X[public].mean(axis=0), X[public].std(axis=0) + 1e-12  # public statistics
    Xs = (X - mean) / std
    return {
        "X": [Xs[s] for s in sites], "y": [y[s] for s in sites], "X_public": Xs[public],
        "y_public": y[public], "test": (Xs[test], y[test]), "classes": np.unique(y),
    }  # fmt: skip


def epsilon_per_round(epsilon: float, rounds: int) -> float:
    """The per-round ε of Gaussian releases whose ``rounds``-fold composition spends ε: the
    Gaussian's noise multiplier for ε, divided by √rounds, read back as an ε."""
    return gaussian_epsilon(gaussian_noise_multiplier(epsilon, DELTA) * np.sqrt(rounds), DELTA)


def per_site_sigma(epsilon: float, rounds: int, n_public: int) -> float:
    """GNMax σ per count so that ``rounds`` releases of ``n_public`` labels spend ε in all."""
    return gaussian_noise_multiplier(epsilon, DELTA) * np.sqrt(rounds) * np.sqrt(2.0 * n_public)


class Stopwatch:
    """Times, in round 1 of an in-process secure-sum run (sequential runtime), the sites'
    work (own fit, teachers, noise: ``vote_round`` and ``answer_round``) and the secure sum;
    the rest of the round is the server's (queries, threshold, consensus, broadcast)."""

    def __enter__(self) -> Stopwatch:
        self.seconds = {"vote_round": [], "answer_round": [], "sum_shares_in_process": []}
        self.saved = [
            (SecureClient, "vote_round"), (SecureClient, "answer_round"),
            (pool_transport, "sum_shares_in_process"),
        ]  # fmt: skip
        self.originals = [getattr(owner, name) for owner, name in self.saved]
        for (owner, name), original in zip(self.saved, self.originals, strict=True):
            setattr(owner, name, self._timed(name, original))
        return self

    def _timed(self, name: str, original: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[name].append(time.perf_counter() - start)

        return timed

    def __exit__(self, *exc: Any) -> None:
        for (owner, name), original in zip(self.saved, self.originals, strict=True):
            setattr(owner, name, original)

    def breakdown(self, round_s: float, n_sites: int) -> dict[str, float]:
        """Round 1's seconds: the sites' work, the sums, the server's rest."""
        sites = sum(self.seconds["vote_round"][:n_sites]) + sum(
            self.seconds["answer_round"][:n_sites]
        )
        sums = sum(
            self.seconds["sum_shares_in_process"][: 2 if self.seconds["answer_round"] else 1]
        )
        return {
            "round": round(round_s, 3), "sites": round(sites, 3), "secure_sum": round(sums, 5),
            "server": round(round_s - sites - sums, 3),
        }  # fmt: skip


def choose_plan(name: str, epsilon: float) -> SuggestedPlan:
    """The documented rule's plan for the dataset's public facts (no tuning on its data)."""
    cfg, (_, y) = CONFIGS[name], load_dataset(name)
    with warnings.catch_warnings(record=True):  # the plan says ``sufficient`` itself
        warnings.simplefilter("always")
        return suggest_secure_plan(
            cfg["sites"], cfg["rows"], cfg["public"], len(np.unique(y)), epsilon, delta=DELTA
        )


def run(
    name: str, seed: int, epsilon: float, confident: bool, per_site: bool, n_jobs: int
) -> dict[str, Any]:
    """Every method on one split; returns accuracies (mean and per site) and the ε report."""
    cfg, data, plan = CONFIGS[name], split(name, seed), choose_plan(name, epsilon)
    n, rounds, teachers = cfg["sites"], plan.rounds, plan.n_teachers
    # y_public only scores the consensus (pseudo_label_accuracy); nothing trains on it
    fit = {"X_public": data["X_public"], "eval_set": data["test"], "y_public": data["y_public"]}
    out: dict[str, Any] = {"seed": seed}

    def fedct(privacy: Any = None) -> FederatedCoTrainer:
        kw: dict[str, Any] = {"classes": data["classes"]} if privacy is not None else {}
        trainer = FederatedCoTrainer(
            learners(n, seed), rounds=rounds, random_state=seed, n_jobs=n_jobs, privacy=privacy,
            **kw,
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return trainer.fit(data["X"], data["y"], **fit)

    def record(key: str, trainer: Any, started: float) -> None:
        last = trainer.history_[-1]
        out[key] = last.mean_accuracy
        out[f"{key}_sites"] = [round(last.client_accuracy[i], 4) for i in range(n)]
        out[f"{key}_s"] = round(time.perf_counter() - started, 1)

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = LocalOnly(learners(n, seed), random_state=seed).fit(
            data["X"], data["y"], eval_set=data["test"]
        )
    record("local", local, t0)
    t0 = time.perf_counter()
    record("fedct_nonprivate", fedct(), t0)
    variants = [("fedct_private", None)] + ([("fedct_confident", 0.6)] if confident else [])
    for key, threshold in variants:
        t0 = time.perf_counter()
        mech = plan.mechanism(threshold=threshold)
        with Stopwatch() as watch:
            trainer = fedct(mech)
        record(key, trainer, t0)
        out[f"{key}_round1_s"] = watch.breakdown(trainer.history_[0].time_s, n)
        report = trainer.privacy_report()
        out[f"{key}_epsilon"] = report["max_epsilon"]
        out[f"{key}_answered"] = trainer.history_[-1].coverage  # share of U labelled
        out[f"{key}_consensus"] = trainer.history_[-1].pseudo_label_accuracy
    if not per_site:
        return out
    t0 = time.perf_counter()
    sigma = per_site_sigma(epsilon, rounds, len(data["X_public"]))
    trainer = fedct(SubsampleAndAggregate(n_teachers=teachers, sigma=sigma, delta=DELTA))
    record("fedct_per_site", trainer, t0)
    out["fedct_per_site_epsilon"] = trainer.privacy_report()["max_epsilon"]
    if confident:  # per-site Confident-GNMax: each site answers its confident half of U
        t0 = time.perf_counter()
        per_round = epsilon_per_round(epsilon, rounds)
        mech = SubsampleAndAggregate(
            n_teachers=teachers, epsilon=per_round, threshold=0.6, max_answered=0.5,
            delta=DELTA,
        )  # fmt: skip
        trainer = fedct(mech)
        record("fedct_per_site_confident", trainer, t0)
        out["fedct_per_site_confident_epsilon"] = trainer.privacy_report()["max_epsilon"]
        out["fedct_per_site_confident_answered"] = trainer.history_[-1].coverage
    return out


def summarise(name: str, epsilon: float, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The dataset's JSON line: means over seeds, and every run."""

    def mean(key: str) -> float | None:
        values = [r[key] for r in runs if r.get(key) is not None]
        return round(float(np.mean(values)), 4) if values else None

    local, nonprivate, private = mean("local"), mean("fedct_nonprivate"), mean("fedct_private")
    plan = choose_plan(name, epsilon)
    losing = [  # sites whose private model is worse than their local one, per seed
        sum(p < lo for p, lo in zip(r["fedct_private_sites"], r["local_sites"], strict=True))
        for r in runs
    ]
    gain = None if None in (local, nonprivate, private) else nonprivate - local  # type: ignore[operator]
    line = {
        "dataset": name, "epsilon": epsilon, "delta": DELTA, "relation": "add_or_remove",
        "unit": "record", "adversary": "server (secure aggregation reveals only the sum)",
        "plan": {"n_teachers": plan.n_teachers, "queries": plan.queries,
                 "releases": plan.releases, "rounds": plan.rounds,
                 "sigma": round(plan.sigma, 2), "noise_share": round(plan.noise_share, 3),
                 "sufficient": plan.sufficient},
        "local": local, "fedct_nonprivate": nonprivate, "fedct_private": private,
        "nonprivate_gain": None if gain is None else round(gain, 4),
        "private_gain": None if None in (local, private) else round(private - local, 4),  # type: ignore[operator]
        "answered": mean("fedct_private_answered"),
        "consensus_accuracy": mean("fedct_private_consensus"),
        "sites_losing_to_local": losing,
        "epsilon_accounted": max(r["fedct_private_epsilon"] for r in runs),
        "fedct_confident": mean("fedct_confident"),
        "confident_answered": mean("fedct_confident_answered"),
        "fedct_per_site": mean("fedct_per_site"),
        "fedct_per_site_confident": mean("fedct_per_site_confident"),
        "per_site_confident_answered": mean("fedct_per_site_confident_answered"),
        "round1_seconds": runs[0].get("fedct_private_round1_s"),
        "gain_kept": None if not gain or gain <= 0 else round((private - local) / gain, 3),  # type: ignore[operator]
        "config": CONFIGS[name], "seeds": runs,
    }  # fmt: skip
    return line


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--confident", action="store_true", help="also run Confident-GNMax")
    parser.add_argument(
        "--per-site",
        action="store_true",
        help="also run the per-site mechanism (SubsampleAndAggregate)",
    )
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    lines = []
    for name in args.datasets:
        runs = [
            run(name, s, args.epsilon, args.confident, args.per_site, args.n_jobs)
            for s in args.seeds
        ]
        line = summarise(name, args.epsilon, runs)
        print(json.dumps({k: v for k, v in line.items() if k not in ("seeds", "config")}))
        lines.append(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return lines


if __name__ == "__main__":
    main()
