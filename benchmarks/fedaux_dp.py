"""When do FedAUX's (ε, δ)-DP certainty scores beat FedDF? (FedAUX Table 1 shape)

Every ε here protects one private record of a client against the server, for the
certainty scores only (FedAUX §3.5); the client models sent every round are not DP in any
arm. δ = 1e-5 throughout.

``digits``: the split of ``ensemble_distillation.py dirichlet`` (8×8 digits, 10 clients ×
90 rows, Dirichlet α = 0.01, public pool 537, test 360, SmallCNN width 8, 10 rounds × 5
local epochs, 5 distillation epochs), FedDF against FedAUX with exact scores and with DP
scores at ε ∈ {10, 2, 1, 0.5, 0.1}. FedAUX here has no pretraining (+P): the sweep isolates
the scores (+P did not help on digits, see ensemble_distillation_dirichlet.txt). Scorers:
PCA(16) of the public pool, the whole pool as negatives (``negatives="pool"``: N = |D_i| +
537 instead of |D_i| + 107) and the analytic Gaussian calibration (valid at every ε, the
classic σ only below 1; 0.63× the classic σ at ε = 0.1); λ per ε chosen by the end-to-end
run on probe seeds 10 and 11 (``digits-probe``, never on the reported seeds); one extra arm
is the paper's recipe (20 % negatives, classic σ, λ = 0.1) at ε = 0.1.

``adult``: UCI Adult (needs ``../shared/data/adult``), 10 clients × ~2,700 rows, Dirichlet
α = 0.01 (balanced sizes), public pool 10,000, test 7,769, MLP(64), FedAvg, FedDF, FedAUX
exact and (0.1, 1e-5)-DP scores; accuracy, balanced accuracy and the predicted-positive
rate against the majority-class rate (0.75), so that a collapse to the majority is visible.

    python benchmarks/fedaux_dp.py digits --seeds 3
    python benchmarks/fedaux_dp.py digits-probe          # λ per ε on seeds 10, 11 (~140 s)
    python benchmarks/fedaux_dp.py adult --seeds 3
    python benchmarks/fedaux_dp.py adult --seeds 3 --rounds 1   # one-shot
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
import torch
from _common import record
from ensemble_distillation import data, net, run
from sklearn.decomposition import PCA
from sklearn.metrics import balanced_accuracy_score
from sklearn.preprocessing import StandardScaler

from cotrain.baselines import FedAUX, FedAvg, FedDF
from cotrain.datasets.tabular import load_adult
from cotrain.partition import dirichlet
from learners import TorchClassifier
from learners.modules import MLP

DELTA = 1e-5
# digits: λ per ε chosen by ``python fedaux_dp.py digits-probe``: the real FedAUX run end to
# end (10 rounds, pool negatives, analytic σ) on probe seeds 10 and 11, λ with the best mean
# accuracy over them; never tuned on the reported seeds 0, 1, 2. ε = 10 and exact scores keep
# λ = 0.01 from the earlier routing probe on the same seeds.
PROBE_SEEDS = (10, 11)
PROBE_LAMS = (0.003, 0.01, 0.03, 0.1)
PROBE_EPS = (2.0, 1.0, 0.5, 0.1)
LAM = {None: 0.01, 10.0: 0.01, 2.0: 0.03, 1.0: 0.03, 0.5: 0.1, 0.1: 0.1}
DIGITS_ARMS = [  # (name, epsilon or None, lam, negatives, calibration)
    ("FedAUX (exact scores)", None, LAM[None], "pool", "analytic"),
    *[(f"FedAUX (ε={e:g})", e, LAM[e], "pool", "analytic") for e in (10.0, *PROBE_EPS)],
    ("FedAUX (ε=0.1, paper recipe)", 0.1, 0.1, "split", "classic"),
]


def aux(eps: float | None, lam: float, negatives: str, calibration: str, **kw) -> FedAUX:
    """A FedAUX arm: exact scores when ``eps`` is None, else (eps, 1e-5)-DP scores."""
    privacy = {"dp": False} if eps is None else {"epsilon": eps, "delta": DELTA}
    return FedAUX(lam=lam, negatives=negatives, calibration=calibration, **privacy, **kw)


def digits_seed(seed: int, arms: list, common: dict) -> dict[str, tuple[float, object]]:
    """Run each arm on the digits split of ``seed``: ``(name, None)`` is FedDF, ``(name,
    (eps, lam, negatives, calibration))`` a FedAUX arm; returns final accuracy and model."""
    X_priv, y_priv, X_pub, X_test, y_test = data(seed)
    parts = dirichlet(y_priv, 10, 0.01, random_state=seed)
    Xs, ys = [X_priv[p] for p in parts], [y_priv[p] for p in parts]
    pca = PCA(n_components=16, random_state=0).fit(X_pub.reshape(len(X_pub), -1)).transform
    out = {}
    for name, spec in arms:
        if spec is None:
            model = FedDF(net(seed), random_state=seed, **common)
        else:
            model = aux(
                *spec,
                estimator=net(seed),
                feature_map=pca,
                noise_random_state=seed,
                random_state=seed,
                **common,
            )
        out[name] = (run(model, Xs, ys, X_pub, X_test, y_test)[0], model)
    return out


def digits_probe(args: argparse.Namespace) -> str:
    """λ per ε on probe seeds 10 and 11: the full FedAUX run for every (λ, ε) of the grid."""
    common = {"rounds": args.rounds, "local_epochs": args.local_epochs, "distill_epochs": 5}
    arms = [("FedDF", None)] + [
        (f"{lam:g}|{eps:g}", (eps, lam, "pool", "analytic"))
        for eps in PROBE_EPS
        for lam in PROBE_LAMS
    ]
    acc = {name: [] for name, _ in arms}
    for seed in PROBE_SEEDS:
        for name, (final, _) in digits_seed(seed, arms, common).items():
            acc[name].append(100 * final)
    feddf = acc["FedDF"]
    lines = [
        "λ probe for `fedaux_dp.py digits`: the same split and training as the digits table "
        f"(pool negatives, analytic σ, δ = 1e-5), on probe seeds {PROBE_SEEDS} only "
        "(the table reports seeds 0, 1, 2);",
        f"{args.rounds} rounds, {args.local_epochs} local epochs; server accuracy (%) after the "
        f"last round per probe seed; FedDF on these seeds: " + ", ".join(f"{v:.1f}" for v in feddf),
        "",
        "| ε | " + " | ".join(f"λ={lam:g}" for lam in PROBE_LAMS) + " | chosen λ (best mean) |",
        "| --- |" + " --- |" * (len(PROBE_LAMS) + 1),
    ]
    for eps in PROBE_EPS:
        means = {lam: float(np.mean(acc[f"{lam:g}|{eps:g}"])) for lam in PROBE_LAMS}
        cells = [
            f"{means[lam]:.1f} ({', '.join(f'{v:.1f}' for v in acc[f'{lam:g}|{eps:g}'])})"
            for lam in PROBE_LAMS
        ]
        lines.append(f"| {eps:g} | " + " | ".join(cells) + f" | {max(means, key=means.get):g} |")
    return "\n".join(lines)


def digits(args: argparse.Namespace) -> str:
    common = {"rounds": args.rounds, "local_epochs": args.local_epochs, "distill_epochs": 5}
    acc: dict[str, list[float]] = {}
    sigma: dict[str, float] = {}
    for seed in range(args.seeds):
        arms = [(name, (eps, lam, negs, cal)) for name, eps, lam, negs, cal in DIGITS_ARMS]
        for name, (final, model) in digits_seed(seed, [("FedDF", None), *arms], common).items():
            acc.setdefault(name, []).append(final)
            if isinstance(model, FedAUX):
                sigma[name] = float(np.mean(model.privacy_report()["sigma"]))
    feddf = 100 * np.array(acc["FedDF"])
    lines = [
        "digits, 10 clients × 90 rows, Dirichlet α = 0.01 (balanced), public pool 537, test "
        "360; SmallCNN(width 8); no +P;",
        f"{args.rounds} rounds, {args.local_epochs} local epochs, 5 distillation epochs; "
        f"{args.seeds} seeds; server accuracy after the last round, mean ± std; "
        "Δ = FedAUX − FedDF per seed",
        "ε: (ε, 1e-5)-DP for one private record of a client against the server, for the "
        "certainty scores only; scorers on PCA(16) of the public pool",
        "λ per ε: best mean accuracy of the full FedAUX run over λ ∈ {0.003, 0.01, 0.03, 0.1} "
        "on probe seeds 10 and 11 (fedaux_dp.py digits-probe, fedaux_dp_digits_probe.txt), "
        "never on the reported seeds; exact and ε=10 keep λ=0.01 (earlier probe, same seeds); "
        "the paper-recipe arm keeps the paper's λ=0.1",
        "",
        "| method | λ | negatives (N) | calibration | mean σ | accuracy (%) | Δ vs FedDF "
        "(points; per seed) | paper (CIFAR-10) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| FedDF | | | | | {feddf.mean():.1f} ± {feddf.std():.1f} "
        f"({', '.join(f'{x:.1f}' for x in feddf)}) | | 30.6 |",
    ]
    for name, eps, lam, negs, cal in DIGITS_ARMS:
        v = 100 * np.array(acc[name])
        d = v - feddf
        n_text = "pool (90+537)" if negs == "pool" else "20 % (90+107)"
        paper = "78.5 (ε=0.1)" if name == "FedAUX (ε=0.1, paper recipe)" else "—"
        lines.append(
            f"| {name} | {lam} | {n_text} | {cal if eps is not None else '—'} | "
            f"{sigma[name]:.3g} | {v.mean():.1f} ± {v.std():.1f} | {d.mean():+.1f} ± "
            f"{d.std():.1f} ({', '.join(f'{x:+.1f}' for x in d)}) | {paper} |"
        )
    return "\n".join(lines)


def tabular_data(seed: int) -> tuple[list, list, np.ndarray, np.ndarray, np.ndarray]:
    """Adult: clients' rows, public pool (10,000) and test set (7,769), standardised on the
    public pool only; label 1 = the minority class >50K."""
    try:
        X, y, _ = load_adult()
    except FileNotFoundError as err:
        sys.exit(
            f"fedaux_dp.py adult: the UCI Adult folder is missing ({err}). Put adult-train.csv "
            "and adult-test.csv under ../shared/data/adult (see its README.md) or point "
            "COTRAIN_DATA at a folder that has them."
        )
    y, n_pub, n_test, m = (y == ">50K").astype(int), 10_000, 7_769, 10
    perm = np.random.default_rng(seed).permutation(len(y))
    pub, test, priv = perm[:n_pub], perm[n_pub : n_pub + n_test], perm[n_pub + n_test :]
    X = StandardScaler().fit(X[pub]).transform(X).astype(np.float32)
    parts = dirichlet(y[priv], m, 0.01, random_state=seed)
    return [X[priv][p] for p in parts], [y[priv][p] for p in parts], X[pub], X[test], y[test]


def mlp(seed: int) -> TorchClassifier:
    return TorchClassifier(
        MLP,
        module_params={"hidden": (64,)},
        classes=[0, 1],
        lr=1e-3,
        n_threads=1,
        random_state=seed,
    )


def tabular(args: argparse.Namespace) -> str:
    common = {"rounds": args.rounds, "local_epochs": args.local_epochs}
    distill = {"distill_epochs": 1}
    res: dict[str, list[tuple[float, float, float]]] = {}
    minority, shares = [], []
    for seed in range(args.seeds):
        Xs, ys, X_pub, X_test, y_test = tabular_data(seed)
        minority.append(float(y_test.mean()))
        shares.append(sorted(round(float(v.mean()), 2) for v in ys))
        kw = {"random_state": seed, "noise_random_state": seed, **common, **distill}
        methods = {
            "FedAvg": FedAvg(mlp(seed), random_state=seed, **common),
            "FedDF": FedDF(mlp(seed), random_state=seed, **common, **distill),
            f"FedAUX (exact scores, λ={args.lam})": aux(
                None, args.lam, "split", "classic", estimator=mlp(seed), **kw
            ),
            "FedAUX (ε=0.1, paper recipe: λ=0.1, 20 % negatives)": aux(
                0.1, 0.1, "split", "classic", estimator=mlp(seed), **kw
            ),
            f"FedAUX (ε=0.1, λ={args.lam}, pool negatives, analytic σ)": aux(
                0.1, args.lam, "pool", "analytic", estimator=mlp(seed), **kw
            ),
        }
        for name, model in methods.items():
            final, _ = run(model, Xs, ys, X_pub, X_test, y_test)
            pred = model.global_model_.predict(X_test)
            bal = balanced_accuracy_score(y_test, pred)
            res.setdefault(name, []).append((final, bal, float(np.mean(pred))))
    lines = [
        f"UCI Adult, {len(shares[0])} clients × ~{len(ys[0])} rows, public pool 10,000, test "
        "7,769; Dirichlet α = 0.01 (balanced sizes); clients' share of the minority class >50K "
        f"(seed 0, sorted): {shares[0]};",
        f"MLP(64); {args.rounds} rounds, {args.local_epochs} local epochs, 1 distillation "
        f"epoch; {args.seeds} seeds; scorers on PCA(16) of the public pool; ε is (ε, 1e-5)-DP "
        "for one private record of a client against the server, for the scores only",
        f"majority-class rate of the test set: {1 - np.mean(minority):.3f} (always predicting "
        "the majority: accuracy = that, balanced accuracy = 0.500, predicted minority rate 0)",
        "",
        "| method | accuracy | balanced accuracy | Δ balanced acc. vs FedDF (per seed) | "
        "predicted minority rate |",
        "| --- | --- | --- | --- | --- |",
    ]
    feddf = np.array(res["FedDF"])[:, 1]
    for name, vals in res.items():
        a = np.array(vals)
        d = a[:, 1] - feddf
        delta = "" if name == "FedDF" else f"{d.mean():+.3f} ± {d.std():.3f}"
        lines.append(
            f"| {name} | {a[:, 0].mean():.3f} ± {a[:, 0].std():.3f} | "
            f"{a[:, 1].mean():.3f} ± {a[:, 1].std():.3f} | {delta} | {a[:, 2].mean():.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("shape", choices=["digits", "digits-probe", "adult"], help="which setting")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..n-1 (default 3)")
    parser.add_argument("--rounds", type=int, default=10, help="communication rounds")
    parser.add_argument(
        "--local-epochs", type=int, default=None, help="client epochs (5 digits, 1 tabular)"
    )
    parser.add_argument("--lam", type=float, default=0.001, help="λ of the tabular exact/pool arms")
    args = parser.parse_args()
    if args.local_epochs is None:
        args.local_epochs = 1 if args.shape == "adult" else 5
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    shapes = {"digits": digits, "digits-probe": digits_probe, "adult": tabular}
    text = shapes[args.shape](args)
    text += f"\n\nwall time: {time.perf_counter() - start:.0f} s (2 shared cores)"
    suffix = f"_rounds{args.rounds}" if args.rounds != 10 else ""
    record(f"fedaux_dp_{args.shape.replace('-', '_')}{suffix}", text)


if __name__ == "__main__":
    main()
