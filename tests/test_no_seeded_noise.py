"""A server that knows the run's seed replays the privacy noise and tries to undo it.

The attack, for every release: regenerate the noise the way the code used to draw it (from
the run's seed, which the server and any reader of the run's configuration know), subtract
it from what was released, and compare with the non-private release. Before the fix this
recovered the exact non-private FedAUX scorers (error 1e-15) from ``cotrain run`` and from
``examples/fedaux_certainty.py``, with ε = 0.5 in the ledger. Now the noise comes from the
operating system's entropy; only the warned opt-in ``reproducible_noise=True`` (``[method]
reproducible_noise = true`` in an experiment file) seeds it, and there the same replay
succeeds — the control that shows the attack is real.

Thresholds. With the opt-in the replay is exact up to floating point: the control asserts an
error below 1e-9 (measured 9e-16 on the weights, 4e-13 on the logits). Without it, what the
attacker subtracts is an independent draw, so the error on each coordinate is a difference of
two independent N(0, σ²) draws, N(0, 2σ²); the tests assert that the largest error over all
coordinates exceeds σ/10 (measured 1.7 at σ = 0.46, 0.30 at σ = 0.061, 11.7 at σ = 2.4).
One coordinate falls below σ/10 with probability P(|N(0, 2)| < 0.1) ≈ 0.056, all of them
(≥ 12 independent ones in every test) with probability below 1e-15: the assertion cannot
fail by chance, and σ/10 is more than 1e6 times the control's bound.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.special import logit
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from cotrain.experiment.methods import METHODS, MethodInput, noise_replayable
from cotrain.federation.seeding import noise_seed_for, spawn_seeds
from cotrain.privacy import RandomizedResponse
from cotrain.privacy.fedaux import SCORE_EPS, CertaintyScorer, DPSoftmaxHead, fedaux_features

SEED = 3  # the run's seed: the server knows it
REPLAY_OK = 1e-9  # the opt-in: the replay recovers the clean release to this


def replayed_scorer_noise(seed: int, n_clients: int, sigmas: list[float], d: int) -> list:
    """The old fedaux_weights' noise: client i from default_rng(SeedSequence(seed).spawn(m)[i])."""
    seqs = np.random.SeedSequence(seed).spawn(n_clients)
    return [
        np.random.default_rng(s).normal(0.0, sigma, size=d)
        for s, sigma in zip(seqs, sigmas, strict=True)
    ]


def replayed_one_shot_noise(seed: int, res) -> tuple[list, list]:
    """The old one_shot_fedaux's noise: client i's seed spawns its scorer's and its head's."""
    scorer, head = [], []
    for i, seq in enumerate(np.random.SeedSequence(seed).spawn(len(res.scorers))):
        s_seq, h_seq = seq.spawn(2)
        coef_s, coef_h = res.scorers[i].coef_, res.heads[i].coef_
        scorer.append(np.random.default_rng(s_seq).normal(0.0, res.scorers[i].sigma_, coef_s.shape))
        head.append(np.random.default_rng(h_seq).normal(0.0, res.heads[i].sigma_, coef_h.shape))
    return scorer, head


# ------------------------------------------------------------------- cotrain run (FedAUX)
def blobs_federation() -> dict:
    """Three clients in 5 dimensions and a public pool of 300 rows: the pool's FedAUX
    features (6 columns with the constant) have full column rank, so the server can solve
    the released scores for the released weights."""
    rng = np.random.default_rng(0)
    centres = np.array([[2.0, 0, 0, 0, 0], [0, 2.0, 0, 0, 0], [0, 0, 2.0, 0, 0]])
    X = [rng.normal(c, size=(120, 5)) for c in centres]
    y = [(Xi[:, 3] > 0).astype(int) for Xi in X]
    X_public = rng.normal(size=(300, 5))
    X_test = rng.normal(size=(50, 5))
    return {"X": X, "y": y, "X_public": X_public, "eval": (X_test, (X_test[:, 3] > 0) * 1)}


def run_certainty_method(data: dict, tmp_path: Path, **method) -> object:
    """``cotrain run``'s FedCT with ``consensus = "certainty"`` and ``[method.certainty]
    dp = true``, as the experiment runner builds it."""
    spec = {
        "name": "fedct",
        "consensus": "certainty",
        "rounds": 1,
        "certainty": {"dp": True, "epsilon": 0.5, "lam": 0.1},
        **method,
    }
    given = MethodInput(
        learners=[LogisticRegression(max_iter=500) for _ in data["X"]],
        X=data["X"],
        y=data["y"],
        X_public=data["X_public"],
        y_public=None,
        eval_set=data["eval"],
        method=spec,
        seed=SEED,
        folder=tmp_path,
    )
    return METHODS["fedct"].fit(given)


def server_recovery_error(model, data: dict) -> tuple[float, float]:
    """The server's attack on the scores it received; (largest error, smallest σ)."""
    H = fedaux_features(data["X_public"])
    released = np.asarray(model.consensus_.scores)  # what the server got, one row per client
    w_released = np.linalg.lstsq(H, logit(released - SCORE_EPS).T, rcond=None)[0].T
    m, d = w_released.shape
    clean = [CertaintyScorer(lam=0.1, dp=False).fit(Xi, data["X_public"]) for Xi in data["X"]]
    sigmas = [CertaintyScorer(lam=0.1, epsilon=0.5).fit(Xi, data["X_public"]).sigma_
              for Xi in data["X"]]  # fmt: skip
    noise = replayed_scorer_noise(SEED, m, sigmas, d)
    errors = [np.abs(w_released[i] - noise[i] - clean[i].coef_).max() for i in range(m)]
    return max(errors), min(sigmas)


def test_cotrain_run_fedaux_scores_cannot_be_replayed_from_the_run_seed(tmp_path):
    data = blobs_federation()
    model = run_certainty_method(data, tmp_path / "default")
    error, sigma = server_recovery_error(model, data)
    assert sigma == pytest.approx(0.4614, abs=1e-4)  # N = 120 + 300, λ = 0.1, ε = 0.5
    assert error > sigma / 10  # 18 coordinates: P(all below σ/10) < 1e-22
    # the ledger still counts the scores' ε for every client
    assert model.privacy_report()["max_epsilon"] >= 0.5


def test_cotrain_run_fedaux_scores_replay_exactly_with_the_opt_in(tmp_path):
    data = blobs_federation()
    with pytest.warns(UserWarning, match="reproducible_noise=True"):
        model = run_certainty_method(data, tmp_path / "opt-in", reproducible_noise=True)
    error, _ = server_recovery_error(model, data)
    assert error < REPLAY_OK  # the attack is real: the server recovers the exact scorers


# ------------------------------------------------------------ examples/fedaux_certainty.py
@pytest.fixture
def example(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "examples"))
    import fedaux_certainty

    return fedaux_certainty


def one_shot_recovery_error(example, reproducible_noise: bool) -> tuple[float, float]:
    """Replay the example's one-shot noise from ``--seed``; (largest error, smallest σ) over
    both clients' scorers and heads."""
    Xc, yc, Xn, _Xp, _yp, _Xt, _yt, pca = example.cancer_clients(SEED)
    res = example.one_shot_round(SEED, reproducible_noise=reproducible_noise)
    assert res.noise_replayable is reproducible_noise
    scorer_noise, head_noise = replayed_one_shot_noise(SEED, res)
    errors, sigmas = [], []
    for i in range(len(Xc)):
        clean_s = CertaintyScorer(lam=3.0, dp=False, feature_map=pca).fit(Xc[i], Xn).coef_
        head = DPSoftmaxHead(lam=3.0, dp=False, classes=res.classes, feature_map=pca)
        clean_h = head.fit(Xc[i], yc[i]).coef_
        errors.append(np.abs(res.scorers[i].coef_ - scorer_noise[i] - clean_s).max())
        errors.append(np.abs(res.heads[i].coef_ - head_noise[i] - clean_h).max())
        sigmas += [res.scorers[i].sigma_, res.heads[i].sigma_]
    return max(errors), min(sigmas)


def test_example_one_shot_cannot_be_replayed_from_the_seed(example):
    error, sigma = one_shot_recovery_error(example, reproducible_noise=False)
    assert sigma > 0.05  # scorer σ ≈ 0.13, head σ ≈ 0.06 (lam = 3)
    assert error > sigma / 10  # 2 × (6 + 2·6) coordinates: P(all below σ/10) < 1e-20


def test_example_one_shot_replays_exactly_with_the_opt_in(example):
    error, _ = one_shot_recovery_error(example, reproducible_noise=True)
    assert error < REPLAY_OK


def digits_recovery_error(example, reproducible_noise: bool) -> tuple[float, float]:
    """Part 1 of the example: its DP scores on the pool; the server subtracts the replayed
    noise in logit space (the digits' features have constant columns, so the weights are not
    all identifiable from the scores, but the non-private scores are)."""
    Xc, _yc, Xn, Xp, *_ = example.digits_clients(0.1, SEED)
    released = example.dp_scores(Xc, Xn, Xp, SEED, reproducible_noise)
    H = fedaux_features(Xp)
    clean = [CertaintyScorer(lam=0.1, dp=False).fit(Xi, Xn).coef_ for Xi in Xc]
    sigmas = [CertaintyScorer(lam=0.1, epsilon=0.1).fit(Xi, Xn).sigma_ for Xi in Xc]
    noise = replayed_scorer_noise(SEED, len(Xc), sigmas, H.shape[1])
    errors = [
        np.abs(logit(released[i] - SCORE_EPS) - H @ noise[i] - H @ clean[i]).max()
        for i in range(len(Xc))
    ]
    return max(errors), min(sigmas)


def test_example_dp_scores_cannot_be_replayed_from_the_seed(example):
    error, sigma = digits_recovery_error(example, reproducible_noise=False)
    # the error on one logit is <h, Δnoise>, N(0, 2σ²‖h‖²) with ‖h‖ = 1: 500 rows × 5 clients
    assert error > sigma / 10


def test_example_dp_scores_replay_with_the_opt_in(example):
    error, _ = digits_recovery_error(example, reproducible_noise=True)
    assert error < REPLAY_OK  # measured 4e-13: logits come back from float64 scores


# ------------------------------------------- a client's label mechanism via cotrain run
def run_rr_method(cancer, tmp_path: Path, privacy: bool, **method) -> np.ndarray:
    """``cotrain run``'s dp-fedct with one client (a majority of one: round 1's consensus
    is the client's upload), randomised response at ε = 120 per record over |U| = 300."""
    spec = {"name": "dp-fedct" if privacy else "fedct", "rounds": 1, **method}
    if privacy:
        spec["privacy"] = {"mechanism": "randomized_response", "epsilon": 120.0}
    X, y = np.concatenate(cancer["X"]), np.concatenate(cancer["y"])
    given = MethodInput(
        learners=[DecisionTreeClassifier(max_depth=3)],
        X=[X],
        y=[y],
        X_public=cancer["X_public"],
        y_public=cancer["y_public"],
        eval_set=(cancer["X_test"], cancer["y_test"]),
        method=spec,
        seed=SEED,
        folder=tmp_path,
    )
    return METHODS[spec["name"]].fit(given).pseudo_label_codes_


def replay_rr(noisy: np.ndarray) -> np.ndarray:
    """Redraw client 0's round-1 noise from the run's seed as RandomizedResponse does (the
    seed the trainer derives with reproducible_noise) and undo it."""
    rng = np.random.default_rng(noise_seed_for(spawn_seeds(SEED, 1)[2], 1, 0))
    keep = RandomizedResponse(epsilon=120.0).keep_probability(2, noisy.size)
    flip = rng.random(noisy.size) >= keep
    shift = rng.integers(1, 2, size=noisy.size)
    return np.where(flip, (noisy - shift) % 2, noisy)


def test_cotrain_run_label_noise_replays_only_with_the_opt_in(cancer, tmp_path):
    pytest.importorskip("dp_accounting")
    clean = run_rr_method(cancer, tmp_path / "clean", privacy=False)
    keep = RandomizedResponse(epsilon=120.0).keep_probability(2, clean.size)
    assert 0.55 < keep < 0.65
    with pytest.warns(UserWarning, match="reproducible_noise=True"):
        opted = run_rr_method(cancer, tmp_path / "opt-in", True, reproducible_noise=True)
    assert np.mean(opted == clean) < 0.75  # the upload is noisy ...
    assert np.array_equal(replay_rr(opted), clean)  # ... and the server undoes all of it
    default = run_rr_method(cancer, tmp_path / "default", privacy=True)
    # a wrong replay is a second coin on top of the noise: it recovers keep² + (1 − keep)²
    # ≈ 0.52 of the labels in expectation (sd ≈ 0.03 over 300), never all of them
    assert np.mean(replay_rr(default) == clean) < keep + 0.1


# ------------------------------------------------------------- what cotrain run records
def test_the_run_records_whether_its_noise_was_replayable(tmp_path):
    pytest.importorskip("dp_accounting")  # PATE's ε, which the summary annotates
    from cotrain.experiment import run_experiment

    text = """\
name = "replay"
seeds = [0]

[data]
dataset = "digits"

[split]
n_public = 200
n_labeled = 150
n_test = 100
n_clients = 3

[method]
name = "pate"
noise_sigma = 2.0

[[clients]]
learner = "DT"

[[variant]]
label = "entropy"

[[variant]]
label = "seeded"
method = { name = "pate", noise_sigma = 2.0, reproducible_noise = true }
"""
    path = tmp_path / "exp.toml"
    path.write_text(text)
    out = run_experiment(path, tmp_path / "out", verbose=0)
    results = {
        json.loads(p.read_text())["variant"]: json.loads(p.read_text())
        for p in out.rglob("result.json")
    }
    assert results["entropy"]["noise_replayable"] is False
    assert results["seeded"]["noise_replayable"] is True
    table = (out / "summary.md").read_text()
    # the summary's ε of the seeded variant says so; the other's does not
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if "| pate |" in line}
    assert "noise replayable from the run's seed" in rows["seeded"]
    assert "replayable" not in rows["entropy"]
    assert noise_replayable({"name": "pate", "reproducible_noise": True})
    assert not noise_replayable({"name": "local", "reproducible_noise": True})
