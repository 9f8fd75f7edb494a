"""FedDS and FedAUX against FedDF on digits: the two headline shapes of their papers.

``byzantine``: FedDS Table 6 shape (CIFAR-10, 4 clients, one client with totally wrong
labels: FedDF loses 11.0 points, FedD 4.4, FedDS 3.8). Here: 8×8 digits, 4 iid clients,
one of them trains on uniformly random labels; FedAvg, FedDF, FedD (FedDS with γ = 0) and
FedDS, each clean and with the Byzantine client; accuracy of the server model after the
last round, and the drop. ``--liar wrong`` makes every one of its labels wrong (a uniform
draw from the other 9 classes: the paper's "totally mislabeled" client), ``--liar permuted``
shifts its labels by one class instead (a consistent wrong map). The paper's clients train
30 epochs a round (``--local-epochs 30``); results files name a non-default liar and epochs.

``dirichlet``: FedAUX Table 1 shape (CIFAR-10, 20 clients, α = 0.01: FedDF 30.6 %, FedDF+P
48.1 %, FedAUX 78.5 % at C = 0.8). Here: digits, 10 clients, balanced Dirichlet split with
α = 0.01 (one class per client, mostly); FedAvg, FedDF, FedDF+P (rotation-pretrained init)
and FedAUX with that init and exact (non-DP) or (ε, δ)-DP scores.

    python benchmarks/ensemble_distillation.py byzantine --seeds 3
    python benchmarks/ensemble_distillation.py byzantine --seeds 3 --liar permuted
    python benchmarks/ensemble_distillation.py byzantine --seeds 3 --liar wrong --local-epochs 30
    python benchmarks/ensemble_distillation.py dirichlet --seeds 3
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from _common import record
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split

from cotrain.baselines import FedAUX, FedAvg, FedDF, FedDS
from cotrain.baselines.server_distillation import RotationHead, distill_module, feature_layer
from cotrain.partition import dirichlet
from learners import SmallCNN, TorchClassifier


def data(seed: int) -> tuple[np.ndarray, ...]:
    """Digits scaled to [0, 1]: private training rows, public pool, test set (seeded)."""
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    X_rest, X_test, y_rest, y_test = train_test_split(
        X, y, test_size=360, random_state=seed, stratify=y
    )
    X_priv, X_pub, y_priv, _ = train_test_split(
        X_rest, y_rest, test_size=537, random_state=seed, stratify=y_rest
    )
    return X_priv, y_priv, X_pub, X_test, y_test


def net(seed: int) -> TorchClassifier:
    return TorchClassifier(
        SmallCNN, module_params={"width": 8}, batch_size=32, lr=3e-3, n_threads=1, random_state=seed
    )


def pretrain(X_pub: np.ndarray, seed: int, epochs: int) -> dict[str, np.ndarray]:
    """FedAUX P1: rotation-prediction pretraining of the network on the public pool only."""
    model = net(seed).initialize(X_pub[:1], np.arange(10))
    torch.manual_seed(seed)  # the rotation head's initialisation
    head = RotationHead(feature_layer(model.module_).in_features)
    distill_module(
        model.module_,
        X_pub,
        None,
        epochs=epochs,
        seed=seed,
        rotation_head=head,
        image_shape=(1, 8, 8),
        n_threads=1,
    )
    return model.get_weights()


def run(method, Xs, ys, X_pub, X_test, y_test) -> tuple[float, list[float]]:
    kwargs = {} if isinstance(method, FedAvg) and type(method) is FedAvg else {"X_public": X_pub}
    method.fit(Xs, ys, eval_set=(X_test, y_test), **kwargs)
    curve = [r.mean_accuracy for r in method.history_]
    return curve[-1], curve


def byzantine(args: argparse.Namespace) -> str:
    common = {"rounds": args.rounds, "local_epochs": args.local_epochs}
    distill = {"distill_epochs": args.distill_epochs or 15}
    methods = {
        "FedAvg": lambda s: FedAvg(net(s), random_state=s, **common),
        "FedDF": lambda s: FedDF(net(s), random_state=s, **common, **distill),
        "FedD (FedDS, γ=0)": lambda s: FedDS(
            net(s), gamma=0.0, random_state=s, **common, **distill
        ),
        "FedDS": lambda s: FedDS(net(s), random_state=s, **common, **distill),
    }
    acc = {(name, cond): [] for name in methods for cond in ("clean", "byzantine")}
    weight_share = []
    for seed in range(args.seeds):
        X_priv, y_priv, X_pub, X_test, y_test = data(seed)
        parts = np.array_split(np.random.default_rng(seed).permutation(len(y_priv)), 4)
        Xs = [X_priv[p] for p in parts]
        ys_clean = [y_priv[p] for p in parts]
        rng = np.random.default_rng(100 + seed)
        if args.liar == "random":  # every label drawn uniformly (the true one 1 time in 10)
            bad = rng.integers(0, 10, len(parts[0]))
        elif args.liar == "wrong":  # every label wrong: a uniform draw from the 9 others
            bad = (ys_clean[0] + rng.integers(1, 10, len(parts[0]))) % 10
        else:  # a consistent wrong label map: the client learns it, and is confident
            bad = (ys_clean[0] + 1) % 10
        ys_byz = [bad, *ys_clean[1:]]
        for cond, ys in (("clean", ys_clean), ("byzantine", ys_byz)):
            for name, make in methods.items():
                model = make(seed)
                final, _ = run(model, Xs, ys, X_pub, X_test, y_test)
                acc[name, cond].append(final)
                if name == "FedDS" and cond == "byzantine":
                    weight_share.append(entropy_share(model, X_pub))
    lines = [
        f"digits, 4 iid clients x {len(parts[0])} rows, public pool 537, test 360; "
        f"SmallCNN(width 8); Byzantine client 0: {args.liar} labels;",
        f"{args.rounds} rounds, {args.local_epochs} local epochs, {distill['distill_epochs']} "
        f"distillation epochs; {args.seeds} seeds (0..{args.seeds - 1}); server accuracy after "
        "the last round, mean ± std",
        "",
        "| method | clean | one Byzantine client | drop (points) | paper drop (CIFAR-10) |",
        "| --- | --- | --- | --- | --- |",
    ]
    paper = {"FedAvg": "-14.8", "FedDF": "-11.0", "FedD (FedDS, γ=0)": "-4.4", "FedDS": "-3.8"}
    for name in methods:
        c, b = np.array(acc[name, "clean"]), np.array(acc[name, "byzantine"])
        drop = 100 * (b - c)
        lines.append(
            f"| {name} | {c.mean():.3f} ± {c.std():.3f} | {b.mean():.3f} ± {b.std():.3f} | "
            f"{drop.mean():+.1f} ± {drop.std():.1f} | {paper[name]} |"
        )
    share = np.array(weight_share)
    lines += [
        "",
        "FedDS's mean entropy weight of the Byzantine client on the public pool after the last "
        f"round (1/4 = equal): {share.mean():.3f} ± {share.std():.3f}",
    ]
    return "\n".join(lines)


def entropy_share(model: FedDS, X_pub: np.ndarray) -> float:
    """Mean softmax_c(−k·H) weight of client 0 (the Byzantine one) over the public pool."""
    probs = np.stack([c.predict_proba(X_pub) for c in model.clients_])
    ent = -(probs * np.log(np.clip(probs, 1e-30, None))).sum(axis=2)
    z = -model.k * ent
    w = np.exp(z - z.max(axis=0))
    return float((w[0] / w.sum(axis=0)).mean())


def dirichlet_split(args: argparse.Namespace) -> str:
    common = {"rounds": args.rounds, "local_epochs": args.local_epochs}
    distill = {"distill_epochs": args.distill_epochs or 5}
    acc: dict[str, list[float]] = {}
    for seed in range(args.seeds):
        X_priv, y_priv, X_pub, X_test, y_test = data(seed)
        parts = dirichlet(y_priv, 10, args.alpha, random_state=seed)
        Xs, ys = [X_priv[p] for p in parts], [y_priv[p] for p in parts]
        init = pretrain(X_pub, seed, args.pretrain_epochs)
        # the scorers' public-only extractor: a PCA of the public pool (on 8x8 digits it
        # separates the clients better than the rotation-pretrained CNN's features)
        pca = PCA(n_components=16, random_state=0).fit(X_pub.reshape(len(X_pub), -1)).transform
        aux = {"feature_map": pca, "lam": args.lam, "noise_random_state": seed}
        methods = {
            "FedAvg": FedAvg(net(seed), random_state=seed, **common),
            "FedDF": FedDF(net(seed), random_state=seed, **common, **distill),
            "FedDF+P": FedDF(net(seed), init_weights=init, random_state=seed, **common, **distill),
            "FedAUX without P (exact scores)": FedAUX(
                net(seed), dp=False, random_state=seed, **aux, **common, **distill
            ),
            "FedAUX (exact scores)": FedAUX(
                net(seed),
                init_weights=init,
                dp=False,
                random_state=seed,
                **aux,
                **common,
                **distill,
            ),
            "FedAUX (ε=0.5 scores)": FedAUX(
                net(seed),
                init_weights=init,
                epsilon=0.5,
                random_state=seed,
                **aux,
                **common,
                **distill,
            ),
            "FedAUX (ε=0.1 scores)": FedAUX(
                net(seed),
                init_weights=init,
                epsilon=0.1,
                random_state=seed,
                **aux,
                **common,
                **distill,
            ),
        }
        for name, model in methods.items():
            final, _ = run(model, Xs, ys, X_pub, X_test, y_test)
            acc.setdefault(name, []).append(final)
    paper = {
        "FedAvg": "28.9",
        "FedDF": "30.6",
        "FedDF+P": "48.1",
        "FedAUX without P (exact scores)": "—",
        "FedAUX (exact scores)": "—",
        "FedAUX (ε=0.5 scores)": "—",
        "FedAUX (ε=0.1 scores)": "78.5",
    }
    lines = [
        f"digits, 10 clients, Dirichlet α = {args.alpha} (balanced), public pool 537 "
        "(20 % negatives for the scorers), test 360; SmallCNN(width 8);",
        f"{args.rounds} rounds, {args.local_epochs} local epochs, {distill['distill_epochs']} "
        f"distillation epochs; scorers: λ = {args.lam}, PCA(16) of the public pool; "
        f"+P: {args.pretrain_epochs} epochs of rotation pretraining on the public pool; "
        f"{args.seeds} seeds; server accuracy after the last round",
        "",
        "| method | accuracy (%) | paper (CIFAR-10, 20 clients, C = 0.8) |",
        "| --- | --- | --- |",
    ]
    for name, vals in acc.items():
        v = 100 * np.array(vals)
        lines.append(f"| {name} | {v.mean():.1f} ± {v.std():.1f} | {paper[name]} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("shape", choices=["byzantine", "dirichlet"], help="which figure")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..n-1 (default 3)")
    parser.add_argument("--rounds", type=int, default=10, help="communication rounds")
    parser.add_argument("--local-epochs", type=int, default=5, help="client epochs per round")
    parser.add_argument(
        "--distill-epochs",
        type=int,
        default=None,
        help="server epochs per round (default 15 as FedDS for byzantine, 5 for dirichlet)",
    )
    parser.add_argument(
        "--lam", type=float, default=0.01, help="scorers' λ (dirichlet; FedAUX 0.1 images)"
    )
    parser.add_argument(
        "--liar",
        choices=["random", "wrong", "permuted"],
        default="random",
        help="byzantine: uniformly random labels, every label wrong (random among the other "
        "classes), or labels shifted by one class (a consistent wrong map)",
    )
    parser.add_argument("--alpha", type=float, default=0.01, help="Dirichlet α (dirichlet)")
    parser.add_argument(
        "--pretrain-epochs", type=int, default=20, help="rotation pretraining epochs (dirichlet)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    text = byzantine(args) if args.shape == "byzantine" else dirichlet_split(args)
    text += f"\n\nwall time: {time.perf_counter() - start:.0f} s (2 shared cores)"
    suffix = ""
    if args.shape == "byzantine":
        suffix = f"_{args.liar}" if args.liar != "random" else ""
        suffix += f"_e{args.local_epochs}" if args.local_epochs != 5 else ""
    record(f"ensemble_distillation_{args.shape}{suffix}", text)


if __name__ == "__main__":
    main()
