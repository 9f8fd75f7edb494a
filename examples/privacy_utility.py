"""Privacy-utility table (FedCT paper, Table 1 shape): accuracy, membership VUL and ε.

Digits scaled to [0, 1] (360 test rows, 700 public rows U, the rest split iid over 5
clients, about 147 private rows each), MLP clients (64-128-10, ``learners.TorchClassifier``)
for every method, so that FedCT, DD, FedAvg and PATE are comparable. For each method: test
accuracy, the privacy vulnerability VUL (ROC AUC of a membership-inference attack on what the
honest-but-curious server observes; mean over the 5 clients, the max in brackets) and the
accounted total ε **with what it protects** (column ``ε unit``):

- ``DP-FedCT DP-SGD σ=…`` — every client trains its MLP with DP-SGD
  (:class:`cotrain.privacy.DPSGD`, Opacus; its labels are post-processing). Every fit, the
  first included, runs ``--dpsgd-steps`` steps (default 50) whose Poisson batches take each
  row with probability ``--dpsgd-sampling-rate`` (default 0.1): public configuration, so
  the round's privacy event does not depend on a client's number of rows. ε per **private
  record** of a client, against the server, add/remove-one neighbours (the replace-one ε is
  printed beside it), composed over every round (the trainer's ledger, max over clients).
  These rows run ``--dpsgd-rounds`` rounds (default 10) with Adam ``--dpsgd-lr`` (default
  0.05), so that ε stays in 4–17.
- ``DP-FedCT RR ε/rd=… (label)`` — ``RandomizedResponse(ε per round, unit="label")``, the
  FedCT paper's notion: ε per **released public label** (composed over the rounds); it says
  nothing about the clients' private records. Kept for comparison with the paper only.
- ``DP-FedAvg`` — ε per **client** (user-level), noise added by a trusted server: against
  observers of the global model, not against the server.
- ``PATE`` — GNMax with σ = ``--pate-sigma`` on the teachers' votes: ε per private record,
  against observers of the noisy labels and the student (the server sees every teacher's
  labels in the clear); σ = 1 gives a huge ε.

Subsample-and-aggregate (:class:`cotrain.privacy.SubsampleAndAggregate`) is left out: with
MLP teachers it multiplies the training cost, and at ε ≤ 10 on 147 rows per client its labels
are mostly noise; ``benchmarks/privacy_utility_record.py`` measures it with tree clients.

What the server observes and how it attacks (see :mod:`cotrain.audit`):

- FedCT / DP-FedCT / PATE: hard labels on a *forged* public pool holding the candidate
  records: the label-only Yeom (gap) attack ``1[label == y]`` ("yeom"), whose AUC is
  ``0.5 + (train acc − test acc)/2``, i.e. it mostly measures the generalisation gap; for RR
  the labels pass through the mechanism, released once per round; for DP-SGD they are the
  DP model's labels;
- DD: soft labels (probabilities) on the forged pool: confidence attack ``p_y``;
- FedAvg / DP-FedAvg: each client's parameters after local training: the server runs
  the model on the candidates: confidence (loss) attack;
- "reference" column: every method again, each score minus the confidence of the
  attacker's own reference MLP trained on U with its true labels (difficulty
  calibration; U is disjoint from the clients' data and from the non-members).

Members = each client's private training rows; non-members = the 360 test rows.
ε: total over ALL rounds at δ = 1e-5; "—" for no guarantee.

Run::

    python examples/privacy_utility.py --seeds 3 --plot docs/privacy_utility_dp_fedct.png
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd

from cotrain import FederatedCoTrainer, partition
from cotrain.audit import audit_clients, label_privatizer
from cotrain.baselines import PATE, DistributedDistillation, DPFedAvg, FedAvg
from cotrain.datasets.loaders import load_digits_split
from learners import MLP, TorchClassifier

N_CLIENTS = 5
#: what each kind of ε protects (printed beside it)
UNIT_RECORD = "per record, vs server"
UNIT_LABEL = "per label (no record guarantee)"
UNIT_CLIENT = "per client, vs global-model observers"
UNIT_PATE = "per record, vs student observers"


def mlp(seed: int, max_epochs: int, epochs_per_fit: int, lr: float = 3e-3) -> TorchClassifier:
    """The client network: MLP 64-128-10, Adam (3e-3 unless told), one torch thread."""
    return TorchClassifier(
        MLP,
        module_params={"hidden": (128,)},
        max_epochs=max_epochs,
        epochs_per_fit=epochs_per_fit,
        lr=lr,
        random_state=seed,
        n_threads=1,
    )


def dpsgd_ready() -> bool:
    """Whether DP-SGD clients can be trained (opacus and dp-accounting installed)."""
    try:
        import dp_accounting  # noqa: F401
        import opacus  # noqa: F401
    except ImportError:
        return False
    return True


def run_seed(args: argparse.Namespace, seed: int, dpsgd: bool) -> list[dict[str, Any]]:
    """Every method on one split: accuracy, VUL (simple and reference attack), ε and its unit."""
    split = load_digits_split(random_state=seed)
    parts = partition.iid(split["y_labeled"], N_CLIENTS, random_state=seed)
    X = [split["X_labeled"][p] for p in parts]
    y = [split["y_labeled"][p] for p in parts]
    members = list(zip(X, y, strict=True))
    test = (split["X_test"], split["y_test"])
    fit_kw = {"X_public": split["X_public"], "eval_set": test}
    E, B, R = args.max_epochs, args.epochs_per_round, args.rounds

    # the attacker's reference model: its own MLP on U with the true labels
    reference = mlp(10_000 + seed, E, B).fit(split["X_public"], split["y_public"])

    def clients(max_epochs: int = E, lr: float = 3e-3) -> list[TorchClassifier]:
        return [mlp(seed * 100 + i, max_epochs, B, lr) for i in range(N_CLIENTS)]

    rows: list[dict[str, Any]] = []

    def add(
        name: str,
        fitted: Any,
        acc: float,
        eps: float | None,
        unit: str,
        wall: float,
        **kw: Any,
    ) -> None:
        simple = audit_clients(fitted, members, test, **kw)
        models = getattr(fitted, "teachers_", None) or fitted.clients_
        gap = np.mean(
            [m.score(Xi, yi) - m.score(*test) for m, (Xi, yi) in zip(models, members, strict=True)]
        )
        ref = audit_clients(fitted, members, test, reference=reference, **kw)
        rows.append(
            {
                "method": name,
                "seed": seed,
                "accuracy": acc,
                "VUL": simple.mean_auc,
                "VUL max": simple.max_auc,
                "attack": simple.attack,
                "VUL ref": ref.mean_auc,
                "gap": gap,
                "epsilon": eps,
                "unit": unit if eps is not None else "",
                "rounds": len(fitted.history_),
                "wall s": wall,
            }
        )
        print(
            f"  seed {seed} {name:<28} acc {acc:.3f}  VUL {simple.mean_auc:.3f} "
            f"({simple.attack}, max {simple.max_auc:.3f})  ref {ref.mean_auc:.3f}  "
            f"gap {gap:.3f}  ε {'—' if eps is None else f'{eps:.3g} {unit}'}  {wall:.0f} s",
            flush=True,
        )

    t0 = time.perf_counter()
    fedct = FederatedCoTrainer(clients(), rounds=R, random_state=seed).fit(X, y, **fit_kw)
    add("FedCT", fedct, fedct.history_[-1].mean_accuracy, None, "", time.perf_counter() - t0)

    if dpsgd:
        from cotrain.privacy import DPSGD

        for sigma in args.dpsgd_sigmas:
            t0 = time.perf_counter()
            mech = DPSGD(
                noise_multiplier=sigma,
                max_grad_norm=args.dpsgd_clip,
                sampling_rate=args.dpsgd_sampling_rate,
                steps=args.dpsgd_steps,
            )
            dp = FederatedCoTrainer(
                clients(E, args.dpsgd_lr),  # max_epochs unused: every fit runs the steps
                rounds=args.dpsgd_rounds,
                random_state=seed,
                privacy=mech,
                classes=np.arange(10),  # the label space is public configuration
            ).fit(X, y, **fit_kw)
            report = dp.privacy_report()
            assert report["unit"] == "record" and report["adversary"] == "server"
            rounds = int(max(c["rounds"] for c in report["clients"]))
            replace_one = mech.epsilon(rounds, neighbors="replace_one")
            print(f"  σ={sigma:g}: ε {report['max_epsilon']:.3g} add/remove-one, "
                  f"{replace_one:.3g} replace-one ({rounds} rounds)")  # fmt: skip
            add(
                f"DP-FedCT DP-SGD σ={sigma:g}",
                dp,
                dp.history_[-1].mean_accuracy,
                report["max_epsilon"],
                UNIT_RECORD,
                time.perf_counter() - t0,
            )
            rows[-1]["sigma"] = sigma

    from cotrain.privacy import RandomizedResponse

    for eps in args.epsilons:
        t0 = time.perf_counter()
        mech = RandomizedResponse(epsilon=eps, unit="label")
        with warnings.catch_warnings():  # the trainer warns that ε is label-level: we say so
            warnings.simplefilter("ignore", UserWarning)
            dp = FederatedCoTrainer(
                clients(), rounds=R, random_state=seed, privacy=mech, classes=np.arange(10)
            ).fit(X, y, **fit_kw)
        assert dp.history_[-1].epsilon_unit == "label"
        add(
            f"DP-FedCT RR ε/rd={eps:g} (label)",
            dp,
            dp.history_[-1].mean_accuracy,
            dp.history_[-1].epsilon,
            UNIT_LABEL,
            time.perf_counter() - t0,
            privatize=label_privatizer(mech, dp.classes_, seed),
            n_releases=dp.n_rounds_,
        )
        rows[-1]["eps_round"] = eps

    t0 = time.perf_counter()
    dd = DistributedDistillation(clients(), rounds=R, random_state=seed).fit(X, y, **fit_kw)
    add("DD", dd, dd.history_[-1].mean_accuracy, None, "", time.perf_counter() - t0)

    t0 = time.perf_counter()
    fedavg = FedAvg(mlp(seed, B, B), rounds=R, local_epochs=B, random_state=seed).fit(
        X, y, eval_set=test
    )
    add("FedAvg", fedavg, fedavg.history_[-1].mean_accuracy, None, "", time.perf_counter() - t0)

    t0 = time.perf_counter()
    dpfedavg = DPFedAvg(
        mlp(seed, B, B),
        rounds=R,
        local_epochs=B,
        clip_norm=args.clip_norm,
        noise_multiplier=args.noise_multiplier,
        random_state=seed,
    ).fit(X, y, eval_set=test)
    add(
        "DP-FedAvg",
        dpfedavg,
        dpfedavg.history_[-1].mean_accuracy,
        dpfedavg.privacy_report()["epsilon"],
        UNIT_CLIENT,
        time.perf_counter() - t0,
    )

    t0 = time.perf_counter()
    pate = PATE(clients(), mlp(seed, E, B), noise_sigma=args.pate_sigma, random_state=seed).fit(
        X, y, **fit_kw
    )
    add(
        "PATE",
        pate,
        pate.history_[-1].consensus_accuracy,
        pate.epsilon_,
        UNIT_PATE,
        time.perf_counter() - t0,
    )
    return rows


def plot(frame: pd.DataFrame, base: float, args: argparse.Namespace) -> None:
    """Accuracy against total ε: record-level (DP-SGD) and label-level (RR) on separate axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    panels = [
        (
            "sigma",
            f"record-level: DP-SGD, {args.dpsgd_rounds} rounds",
            "total ε per private record (δ = 1e-5, vs server)",
        ),
        (
            "eps_round",
            f"label-level: RR, {args.rounds} rounds",
            "total ε per released label (no record guarantee)",
        ),
    ]
    panels = [p for p in panels if p[0] in frame]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4), squeeze=False)
    for ax, (key, title, xlabel) in zip(axes[0], panels, strict=True):
        dp = (
            frame.dropna(subset=[key])
            .groupby(key)
            .agg(
                accuracy=("accuracy", "mean"), std=("accuracy", "std"), epsilon=("epsilon", "mean")
            )
            .sort_values("epsilon")
        )
        ax.errorbar(dp["epsilon"], dp["accuracy"], yerr=dp["std"].fillna(0), fmt="o-", capsize=3)
        for k, row in dp.iterrows():
            tag = f"σ={k:g}" if key == "sigma" else f"ε/rd={k:g}"
            ax.annotate(
                tag,
                (row["epsilon"], row["accuracy"]),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=8,
            )
        ax.axhline(base, color="k", ls="--", label=f"FedCT, no privacy ({args.rounds} rounds)")
        ax.axhline(0.1, color="gray", ls=":", label="chance (10 classes)")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(ticker.FormatStrFormatter("%g"))
        ax.margins(x=0.15)
        ax.set_ylim(0, 1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy (clients' mean)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, loc="center left")
    fig.suptitle(
        f"digits, {N_CLIENTS} MLP clients, seeds 1..{args.seeds}: the two ε differ "
        "in unit and cannot be compared",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)
    print(f"plot saved to {args.plot}")


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seeds", type=int, default=1, help="runs per method, seeds 1..SEEDS (default 1)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=30,
        help="communication rounds of every method but the DP-SGD rows (default 30)",
    )
    parser.add_argument(
        "--max-epochs",
        type=int,
        default=60,
        help="epochs of a client's first fit on its own data (default 60)",
    )
    parser.add_argument(
        "--epochs-per-round",
        type=int,
        default=2,
        help="local epochs between label exchanges (communication period b; FedAvg: local "
        "epochs between weight averages) (default 2)",
    )
    parser.add_argument(
        "--epsilons",
        type=float,
        nargs="*",
        default=[2.0],
        help="label-level DP-FedCT rows, one per value: randomized-response ε per round on each "
        "released public label (unit='label', no guarantee for private records) (default 2)",
    )
    parser.add_argument(
        "--dpsgd-sigmas",
        type=float,
        nargs="*",
        default=[1.0, 1.5, 2.5],
        help="record-level DP-FedCT rows, one per value: DP-SGD noise multiplier σ (larger: "
        "more private, less accurate); give the flag alone for no DP-SGD rows (default 1 1.5 2.5)",
    )
    parser.add_argument(
        "--dpsgd-rounds",
        type=int,
        default=None,
        help="DP-SGD rows: communication rounds (default: the smaller of 10 and --rounds)",
    )
    parser.add_argument(
        "--dpsgd-sampling-rate",
        type=float,
        default=0.1,
        help="DP-SGD rows: Poisson rate q, the probability that a training row joins a step's "
        "batch (public configuration, default 0.1)",
    )
    parser.add_argument(
        "--dpsgd-steps",
        type=int,
        default=50,
        help="DP-SGD rows: DP-SGD steps of every fit, the first included (default 50)",
    )
    parser.add_argument(
        "--dpsgd-lr",
        type=float,
        default=5e-2,
        help="DP-SGD rows: Adam learning rate (default 0.05)",
    )
    parser.add_argument(
        "--dpsgd-clip",
        type=float,
        default=1.0,
        help="DP-SGD rows: every example's gradient is clipped to this L2 norm (default 1.0)",
    )
    parser.add_argument(
        "--clip-norm",
        type=float,
        default=1.0,
        help="DP-FedAvg: every client's update is clipped to this L2 norm C (default 1.0)",
    )
    parser.add_argument(
        "--noise-multiplier",
        type=float,
        default=0.5,
        help="DP-FedAvg: the server's Gaussian noise on the summed updates has std σ·C; this "
        "is σ (default 0.5)",
    )
    parser.add_argument(
        "--pate-sigma",
        type=float,
        default=1.0,
        help="PATE: std of the Gaussian noise added to the teachers' vote counts (default 1.0)",
    )
    parser.add_argument(
        "--plot", metavar="FILE", help="save accuracy against ε (both units, separate axes) here"
    )
    args = parser.parse_args(argv)
    if args.dpsgd_rounds is None:
        args.dpsgd_rounds = min(10, args.rounds)

    dpsgd = dpsgd_ready() and bool(args.dpsgd_sigmas)
    if args.dpsgd_sigmas and not dpsgd:
        print('DP-SGD rows left out: pip install "cotrain[torch,dp]" (opacus, dp-accounting)')
    start = time.perf_counter()
    rows = []
    for seed in range(1, args.seeds + 1):
        rows.extend(run_seed(args, seed, dpsgd))
    frame = pd.DataFrame(rows)
    table = frame.groupby("method", sort=False).agg(
        rounds=("rounds", "first"),
        accuracy=("accuracy", "mean"),
        acc_std=("accuracy", "std"),
        VUL=("VUL", "mean"),
        VUL_max=("VUL max", "max"),
        attack=("attack", "first"),
        VUL_ref=("VUL ref", "mean"),
        gap=("gap", "mean"),
        epsilon=("epsilon", "mean"),
        unit=("unit", "first"),
    )
    table["epsilon"] = ["—" if pd.isna(e) else f"{e:.3g}" for e in table["epsilon"]]
    table = table.rename(columns={"unit": "ε unit"})
    pd.set_option("display.width", 180)
    print(
        f"\ndigits, {N_CLIENTS} MLP clients, iid, seeds 1..{args.seeds}; VUL = membership ROC "
        "AUC, mean over clients (max over clients and seeds); ε total over all rounds, "
        "δ = 1e-5, with what it protects"
    )
    print(table.round(3).to_string())
    print(
        "gap = train accuracy on the client's own data minus test accuracy of the models the "
        "server observes\n(clients' local models; PATE: teachers), averaged over clients. The "
        "yeom attack on hard labels has AUC = 0.5 + gap/2.\nDP-SGD rows: ε per PRIVATE RECORD "
        "of a client against the server (add/remove-one, every round; the replace-one ε is "
        "printed per run above).\nRR rows: "
        "ε per RELEASED LABEL (the FedCT paper's unit): no guarantee about private records; "
        "VUL measured on all\nrounds' randomised labels. DP-FedAvg: ε per client, noise added "
        "by a trusted server. PATE: per record, against observers\nof its noisy labels only."
    )
    vul = table["VUL"]
    order = vul[["FedCT", "DD", "FedAvg"]]
    holds = order["FedCT"] < order["DD"] < order["FedAvg"]
    print(
        f"\nordering FedCT < DD < FedAvg in VUL: {'held' if holds else 'did NOT hold'} "
        f"({order['FedCT']:.3f} / {order['DD']:.3f} / {order['FedAvg']:.3f}); "
        f"FedCT VUL <= 0.55: {order['FedCT'] <= 0.55}"
    )
    if not holds:
        gap = table["gap"]
        print(
            "why: the attacks feed on how differently the observed models treat members and "
            f"non-members. Accuracy gaps: FedCT {gap['FedCT']:.3f},\nDD {gap['DD']:.3f}, "
            f"FedAvg {gap['FedAvg']:.3f}. FedCT shares hard labels only, so its label-only "
            "AUC is exactly 0.5 + gap/2. FedAvg's clients restart\nevery round from the "
            "average of all clients and train --epochs-per-round epochs on their own data, "
            "so their confidence on\ntheir own records is barely above that on unseen ones; "
            "DD's clients train on their own data in every round without\nbeing averaged, "
            "and DD's soft labels expose that confidence gap. The paper's FedAvg VUL "
            "(0.71-0.76) comes from\n2·10^4 rounds on image data with ML Privacy Meter; on "
            "this small, easy dataset FedAvg barely overfits."
        )
    ref = table["VUL_ref"][["FedCT", "DD", "FedAvg"]]
    print(
        "with the reference attack: "
        f"{ref['FedCT']:.3f} / {ref['DD']:.3f} / {ref['FedAvg']:.3f} "
        f"({'held' if ref['FedCT'] < ref['DD'] < ref['FedAvg'] else 'did NOT hold'})"
    )
    base = table.loc["FedCT", "accuracy"]
    if "sigma" in frame:
        dp = frame.dropna(subset=["sigma"]).groupby("sigma")[["accuracy", "epsilon"]].mean()
        best = dp.loc[dp["accuracy"].idxmax()]
        print(
            f"record-level DP-SGD: best accuracy {best['accuracy']:.3f} at ε = "
            f"{best['epsilon']:.3g} per private record ({args.dpsgd_rounds} rounds), against "
            f"{base:.3f} for FedCT without privacy"
        )
    if args.plot:
        plot(frame, base, args)
    print(f"wall time {time.perf_counter() - start:.0f} s")
    return table


if __name__ == "__main__":
    main()
