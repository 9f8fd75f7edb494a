"""Simulation = deployment: the in-process trainer and localhost Flower, round by round.

Two configurations, each run in process (``FederatedCoTrainer(...).fit``) and on a real
localhost deployment (:class:`cotrain.flower.local.localhost.LocalFederation`: a SuperLink
and 3 SuperNodes as processes, one warm worker per site, the example app in
``examples/flower`` with its relay ClientApp and :class:`cotrain.flower.server_app.
FlowerCoTraining` as ServerApp), with the same data, sites and ``random_state=0``:

- **plain**: the library's defaults (``trust="auto"`` at every site, ``consensus="auto"``:
  the reliability vote), breast cancer (the paper split, seed 0: 85 labelled rows over
  3 sites, |U| = 370), a depth-4 tree, a logistic regression and a 3-NN, every site
  sharing the 114-row test set (``share-eval``) for the consensus accuracy; 3 rounds;
- **secure**: teacher votes summed under SecAgg+ (``SecureTeacherVotes``, TLS), 3 sites
  on two Gaussian blobs (60 rows each, |U| = 40, a depth-3 tree). A deployed site draws
  its noise and its shard key from its own entropy, so the configuration is the one of
  ``tests/test_flower_secure_votes.py`` whose votes cannot depend on them: one teacher
  per site and Skellam noise of variance 1e-9 (zero with probability ~1 - 1e-8 per
  count); round 1 releases (a check sum and an answer sum), round 2 trains on the
  broadcast consensus; 2 rounds.

Per round, whether the deployed run's consensus codes, consensus accuracy, ε (the run's
headline ε after the round) and bytes (up and down) are identical (``==``, no tolerance)
to the in-process run's, and each round's seconds (history ``time_s``); then the wall time
of each run (the in-process ``fit``; ``flwr run`` from submission to the end, the
handshake included, with the federation's start-up apart).

    python benchmarks/deployment_parity.py
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import record

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer, partition
from cotrain.callbacks import Callback
from cotrain.datasets.loaders import load_breast_cancer_split
from cotrain.flower.site import write_site, write_sites
from cotrain.privacy import SecureTeacherVotes

APP = Path(__file__).resolve().parents[1] / "examples" / "flower"
CLASSES = [0, 1]
#: negligible noise, so that both runs can be compared exactly (hence no budget); a deployed
#: secure site states its plan's n_sites and rounds itself
SECURE = {
    "n_teachers": 1,
    "mu": 1e-9,
    "threshold": 0.6,
    "max_answered": 0.5,
    "budget": math.inf,
    "n_sites": 3,
    "rounds": 1,
}


class EveryRoundCodes(Callback):
    """The in-process consensus codes after every round."""

    def __init__(self) -> None:
        self.codes: list[np.ndarray] = []

    def on_round_end(self, loop: Any, record: Any) -> None:
        self.codes.append(np.array(loop.owner.pseudo_label_codes_))


def plain_setup() -> dict[str, Any]:
    data = load_breast_cancer_split(random_state=0)
    parts = partition.iid(data.y_labeled, n_clients=3, random_state=0)
    return {
        "X": [data.X_labeled[p] for p in parts],
        "y": [data.y_labeled[p] for p in parts],
        "U": data.X_public,
        "learners": lambda: [DecisionTreeClassifier(max_depth=4),
                             LogisticRegression(max_iter=300), KNeighborsClassifier(3)],
        "eval_set": (data.X_test, data.y_test),
        "params": {"rounds": 3},
        "run_config": {"rounds": 3},
        "tls": False,
    }  # fmt: skip


def secure_setup() -> dict[str, Any]:
    rng = np.random.default_rng(0)

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, 2, n)
        return rng.normal(size=(n, 2)) + 1.5 * y[:, None], y

    sites = [draw(60) for _ in range(3)]
    privacy = {"class": "cotrain.privacy.SecureTeacherVotes", "params": SECURE}
    return {
        "X": [s[0] for s in sites],
        "y": [s[1] for s in sites],
        "U": draw(40)[0],
        "learners": lambda: [DecisionTreeClassifier(max_depth=3) for _ in range(3)],
        "eval_set": None,
        "privacy": SecureTeacherVotes(**SECURE),
        "params": {"rounds": 2, "privacy": SecureTeacherVotes(**SECURE), "classes": CLASSES},
        "run_config": {"rounds": 2, "classes": json.dumps(CLASSES),
                       "privacy": json.dumps(privacy), "round-timeout": 300.0},
        "tls": True,
    }  # fmt: skip


def in_process(setup: dict[str, Any]) -> dict[str, Any]:
    codes = EveryRoundCodes()
    trainer = FederatedCoTrainer(
        setup["learners"](), random_state=0, callbacks=[codes], **setup["params"]
    )
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        trainer.fit(setup["X"], setup["y"], X_public=setup["U"], eval_set=setup["eval_set"])
    wall = time.perf_counter() - started
    return {"codes": np.stack(codes.codes), "history": trainer.history_.to_frame(), "wall": wall}


def deployed(setup: dict[str, Any]) -> dict[str, Any]:
    from cotrain.flower.local.localhost import LocalFederation

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        privacy = setup.get("privacy")
        if privacy is None:
            paths = write_sites(root / "sites", setup["X"], setup["y"], setup["U"],
                                setup["learners"](), eval_set=setup["eval_set"])  # fmt: skip
        else:
            paths = [
                write_site(root / "sites" / f"site-{i}", Xi, yi, setup["U"], est, client_id=i,
                           privacy=privacy, classes=CLASSES)
                for i, (Xi, yi, est) in enumerate(
                    zip(setup["X"], setup["y"], setup["learners"](), strict=True))
            ]  # fmt: skip
        np.save(root / "public.npy", setup["U"])
        out = root / "out"
        config = {"public-pool": str(root / "public.npy"), "output-dir": str(out),
                  "min-nodes": 3, "random-state": 0, **setup["run_config"]}  # fmt: skip
        started = time.monotonic()
        configs = [{"site": str(p)} for p in paths]
        with LocalFederation(root / "home", 3, configs, tls=setup["tls"]) as federation:
            up = time.monotonic()
            done = federation.run(APP, config, timeout=900)
            wall = time.monotonic() - up
        if done.returncode != 0:
            raise RuntimeError(done.stdout[-3000:] + done.stderr[-3000:])
        summary = json.loads((out / "summary.json").read_text())
        return {
            "codes": np.load(out / "consensus_codes.npy"),
            "history": pd.read_csv(out / "history.csv", index_col=0),
            "wall": wall,
            "start_up": up - started,
            "failed": summary["failed"],
            "timed_out": summary["timed_out"],
        }


def same(a: Any, b: Any) -> str:
    """'yes' when equal ("n/a" when both are missing), else both values."""
    missing = [x is None or (isinstance(x, float) and np.isnan(x)) for x in (a, b)]
    if all(missing):
        return "n/a"
    return "yes" if not any(missing) and a == b else f"NO ({a!r} vs {b!r})"


def short(x: Any) -> str:
    return "-" if x is None or x != x else f"{x:.4f}"


def compare(name: str, local: dict[str, Any], flower: dict[str, Any]) -> list[str]:
    lines = []
    n = max(len(local["history"]), len(flower["history"]))
    for t in range(n):
        if t >= len(local["history"]) or t >= len(flower["history"]):
            lines.append(f"| {name} | {t + 1} | NO (round missing) | | | | | |")
            continue
        a, b = local["history"].iloc[t], flower["history"].iloc[t]
        codes = "yes" if np.array_equal(local["codes"][t], flower["codes"][t]) else "NO"
        bytes_ = same((int(a["bytes_up"]), int(a["bytes_down"])),
                      (int(b["bytes_up"]), int(b["bytes_down"])))  # fmt: skip
        accuracy = same(a["consensus_accuracy"], b["consensus_accuracy"])
        lines.append(
            f"| {name} | {t + 1} | {codes} | {accuracy} | {same(a['epsilon'], b['epsilon'])} "
            f"| {bytes_} | {a['time_s']:.3f} | {b['time_s']:.2f} |"
        )
    return lines


def main() -> None:
    header = [
        "In process (FederatedCoTrainer.fit) vs localhost Flower (LocalFederation: SuperLink + "
        "3 SuperNodes as processes, warm site workers, examples/flower), random_state=0. "
        "identical = `==` on the values the two runs record (codes: every pseudo-label).",
        "",
        "| config | round | codes | consensus accuracy | ε | bytes (up, down) "
        "| in-process round s | deployed round s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows, notes = [], []
    for name, setup in (("plain", plain_setup()), ("secure", secure_setup())):
        local, flower = in_process(setup), deployed(setup)
        rows += compare(name, local, flower)
        h = local["history"]
        values = ", ".join(
            f"r{t + 1}: acc {short(h['consensus_accuracy'].iloc[t])}, "
            f"ε {short(h['epsilon'].iloc[t])}, "
            f"coverage {h['coverage'].iloc[t]:.3f}, up {h['bytes_up'].iloc[t]} B"
            for t in range(len(h))
        )
        lost = {t: (f, flower["timed_out"][t]) for t, f in flower["failed"].items()
                if f or flower["timed_out"][t]}  # fmt: skip
        notes.append(
            f"{name}: in-process fit {local['wall']:.2f} s; deployed `flwr run` "
            f"{flower['wall']:.1f} s (handshake included; federation start-up "
            f"{flower['start_up']:.1f} s apart); failed or timed-out sites: {lost or 'none'}. "
            f"In-process values: {values}"
        )
    record("deployment_parity", "\n".join(header + rows + [""] + notes))


if __name__ == "__main__":
    main()
