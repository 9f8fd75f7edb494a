"""Public-pool pretraining on digits with few labels per client.

FedAUX's preparation phase P1 (and FedDS's self-supervised loss): a SmallCNN body is
pretrained on the unlabelled public pool U at the server (SimCLR by default; ``--method``
picks rotation prediction or both; :func:`cotrain.pretrain.pretrain_images`), and every
client starts from it instead of a random initialisation. Same architecture, same
hyper-parameters, same data: only the initial body differs.

Setting: scikit-learn's 8x8 digits scaled to [0, 1]; 360 test rows, |U| = 900 public rows
(unlabelled), 10 clients with 20 labelled rows each (iid). Methods: FedCT
(:class:`cotrain.FederatedCoTrainer`, hard majority vote, ``trust=None`` as in the paper,
TorchClassifier SmallCNN clients), FedAvg (:class:`cotrain.baselines.FedAvg`, the same
client), and FedCT with logistic-regression clients on raw pixels vs on the pretrained
features (:class:`cotrain.pretrain.PretrainedFeatures` in a pipeline). Accuracy: FedCT the
mean test accuracy of the 10 local models after the last round, FedAvg the global model's;
mean ± std over seeds (each seed redraws the split, the clients' rows and the pretraining).

    python benchmarks/pretrain_digits.py --seeds 3
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from _common import record
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from cotrain import FederatedCoTrainer
from cotrain.baselines import FedAvg
from cotrain.datasets.loaders import load_digits_split
from cotrain.pretrain import PretrainedFeatures, pretrain_images
from learners import SmallCNN, TorchClassifier

#: the paper's numbers beside ours (FedAUX Table 1, ResNet-8 on CIFAR-10, 20 clients,
#: alpha = 100, C = 0.8: FedAvg 82.3 -> FedAvg+P 89.6; FedDF 81.5 -> FedDF+P 88.9)
PAPER = {"FedAvg": "82.3 -> 89.6 (+7.3)", "FedCT": "FedDF 81.5 -> 88.9 (+7.4)"}


def cnn(module, seed: int, args: argparse.Namespace) -> TorchClassifier:
    """The neural client: SmallCNN (width 16) on the 8x8 images, random or pretrained."""
    params = {"image_size": 8, "width": args.width} if module is SmallCNN else None
    return TorchClassifier(
        module,
        module_params=params,
        max_epochs=args.first_epochs,
        epochs_per_fit=1,
        lr=args.lr,
        random_state=seed,
        n_threads=1,
    )


def run_seed(seed: int, args: argparse.Namespace) -> dict[str, float]:
    split = load_digits_split(random_state=seed, n_test=360, n_public=args.public)
    rng = np.random.default_rng(seed)
    rows = rng.permutation(len(split.y_labeled))[: args.clients * args.labels]
    parts = np.array_split(rows, args.clients)
    X = [split.X_labeled[p] for p in parts]
    y = [split.y_labeled[p] for p in parts]
    U, test = split.X_public, (split.X_test, split.y_test)
    out: dict[str, float] = {}

    start = time.perf_counter()
    ext = pretrain_images(
        U,
        method=args.method,
        epochs=args.pretrain_epochs,
        width=args.width,
        temperature=args.temperature,
        random_state=seed,
    )
    out["pretraining time (s)"] = time.perf_counter() - start
    modules = {"random init": SmallCNN, "pretrained": ext.module_factory()}

    for init, module in modules.items():
        clients = [cnn(module, 100 * seed + i, args) for i in range(args.clients)]
        fedct = FederatedCoTrainer(clients, rounds=args.fedct_rounds, trust=None, random_state=seed)
        fedct.fit(X, y, X_public=U, eval_set=test)
        out[f"FedCT, CNN, {init}"] = fedct.history_[-1].mean_accuracy
        fedavg = FedAvg(
            cnn(module, seed, args),
            rounds=args.fedavg_rounds,
            local_epochs=args.local_epochs,
            random_state=seed,
        )
        fedavg.fit(X, y, eval_set=test)
        out[f"FedAvg, CNN, {init}"] = fedavg.history_[-1].mean_accuracy

    for name, features in (("raw pixels", []), ("pretrained features", [PretrainedFeatures(ext)])):
        clients = [
            make_pipeline(*features, StandardScaler(), LogisticRegression(max_iter=300))
            for _ in range(args.clients)
        ]
        fedct = FederatedCoTrainer(clients, rounds=args.fedct_rounds, trust=None, random_state=seed)
        fedct.fit(X, y, X_public=U, eval_set=test)
        out[f"FedCT, logistic regression, {name}"] = fedct.history_[-1].mean_accuracy
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (0, 1, ...)")
    parser.add_argument("--clients", type=int, default=10, help="number of clients")
    parser.add_argument("--labels", type=int, default=20, help="labelled rows per client")
    parser.add_argument("--public", type=int, default=900, help="public pool size |U|")
    parser.add_argument("--width", type=int, default=16, help="SmallCNN width")
    parser.add_argument("--pretrain-epochs", type=int, default=100, help="pretraining epochs")
    parser.add_argument(
        "--method",
        default="simclr",
        help="pretraining objective: simclr, rotation, simclr+rotation",
    )
    parser.add_argument("--temperature", type=float, default=0.2, help="NT-Xent temperature")
    parser.add_argument("--first-epochs", type=int, default=30, help="epochs of the first fit")
    parser.add_argument("--lr", type=float, default=3e-3, help="clients' learning rate")
    parser.add_argument("--fedct-rounds", type=int, default=12, help="FedCT rounds")
    parser.add_argument("--fedavg-rounds", type=int, default=30, help="FedAvg rounds")
    parser.add_argument("--local-epochs", type=int, default=5, help="FedAvg local epochs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    results, per_seed = [], []
    for seed in range(args.seeds):
        results.append(run_seed(seed, args))
        per_seed.append(
            f"seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in results[-1].items())
        )
        print(per_seed[-1], flush=True)
    wall = time.perf_counter() - start

    def cell(key: str) -> str:
        vals = np.array([r[key] for r in results])
        return f"{vals.mean():.3f} ± {vals.std():.3f}"

    lines = [
        f"digits, {args.clients} clients x {args.labels} labelled rows (iid), |U| = "
        f"{args.public} unlabelled, 360 test rows; seeds 0..{args.seeds - 1}",
        f"pretraining: {args.method} on U (temperature {args.temperature}), "
        f"{args.pretrain_epochs} epochs, SmallCNN width {args.width} "
        f"({cell('pretraining time (s)')} s)",
        f"FedCT: {args.fedct_rounds} rounds, hard majority vote; FedAvg: {args.fedavg_rounds} "
        f"rounds x {args.local_epochs} local epochs; clients: lr {args.lr}, first fit "
        f"{args.first_epochs} epochs",
        "",
        "| method | clients | random init | pretrained on U | gain (points) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for method, model, a, b in (
        ("FedCT", "SmallCNN", "FedCT, CNN, random init", "FedCT, CNN, pretrained"),
        ("FedAvg", "SmallCNN", "FedAvg, CNN, random init", "FedAvg, CNN, pretrained"),
        (
            "FedCT",
            "logistic regression (raw pixels vs PretrainedFeatures)",
            "FedCT, logistic regression, raw pixels",
            "FedCT, logistic regression, pretrained features",
        ),
    ):
        gain = np.array([r[b] - r[a] for r in results]) * 100
        diff = f"{gain.mean():+.1f} ± {gain.std():.1f}"
        lines.append(f"| {method} | {model} | {cell(a)} | {cell(b)} | {diff} |")
    lines += ["", *per_seed, "", f"wall time: {wall:.0f} s"]
    record("pretrain_digits", "\n".join(lines))


if __name__ == "__main__":
    main()
