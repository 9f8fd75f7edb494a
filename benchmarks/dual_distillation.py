"""Dual distillation and downstream quantisation (Sattler's thesis ch. 5).

Soft-label co-training (distributed distillation, DD: ``consensus="mean"``, ``share="soft"``)
against dual distillation (``consensus.DualDistillation``: the server distils a model of its
own on the public pool each round and broadcasts that model's soft labels), each with the
soft labels quantised to 32-bit floats, 8, 2 and 1 bits per class (``soft_bits``: uploads
and the broadcast). The thesis's setting in small: partial participation (4 of 10 clients a
round), clients re-initialised every round (``warm_start=False``: the thesis's "init random",
what partial participation forces there), a server model that keeps training across rounds
(θ_S^t from θ_S^{t-1}, Alg. 8). One DD row with clients that keep their model between
rounds (``warm_start=True``: the thesis's infeasible "init previous", which this library's
stateful clients can do) is the reference.

Digits (8×8, 10 classes): 360 test rows, a public pool of 500, the rest split iid over 10
clients (about 94 rows each); clients and server model are the same small MLP
(``learners.TorchClassifier``, 32 hidden units). Accuracy: mean test accuracy of the clients
after the last round (the library's measure), and of one global model: the server model
for dual distillation (the thesis's measure), for DD ``trainer.distill`` of the same MLP once
on the final consensus.

    python benchmarks/dual_distillation.py --seeds 3
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one BLAS thread: several fits share 2 cores

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _common import record  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from consensus import DualDistillation  # noqa: E402
from cotrain import FederatedCoTrainer  # noqa: E402
from learners import MLP, TorchClassifier  # noqa: E402

BITS = (None, 8, 2, 1)
N_CLIENTS, N_PUBLIC, N_TEST = 10, 500, 360


def mlp(seed: int, warm_start: bool, epochs: int) -> TorchClassifier:
    """The small MLP every client and the server train."""
    return TorchClassifier(
        MLP, module_params={"hidden": (32,)}, max_epochs=epochs, epochs_per_fit=epochs, lr=1e-2,
        warm_start=warm_start, random_state=seed, n_threads=1,
    )  # fmt: skip


def split(seed: int) -> tuple[list, list, np.ndarray, np.ndarray, np.ndarray]:
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    X_rest, X_test, y_rest, y_test = train_test_split(
        X, y, test_size=N_TEST, random_state=seed, stratify=y
    )
    X_public, X_train, y_train = X_rest[:N_PUBLIC], X_rest[N_PUBLIC:], y_rest[N_PUBLIC:]
    parts = np.array_split(np.random.default_rng(seed).permutation(len(y_train)), N_CLIENTS)
    return [X_train[p] for p in parts], [y_train[p] for p in parts], X_public, X_test, y_test


def run(method: str, bits: int | None, seed: int, rounds: int, epochs: int) -> dict:
    Xs, ys, X_public, X_test, y_test = split(seed)
    warm_clients = method == "DD, clients keep their model"
    consensus = (
        DualDistillation(mlp(seed + 1000, warm_start=True, epochs=epochs), base="mean")
        if method == "dual distillation"
        else "mean"
    )
    trainer = FederatedCoTrainer(
        [mlp(seed * 100 + i, warm_clients, epochs) for i in range(N_CLIENTS)],
        consensus=consensus, share="soft", soft_bits=bits, rounds=rounds,
        participation=0.4, random_state=seed,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Xs, ys, X_public=X_public, eval_set=(X_test, y_test))
    history = trainer.history_
    server = getattr(trainer.consensus_, "server_model_", None)
    if server is None:  # DD has no server model: distil one once, on the final consensus
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = trainer.distill(mlp(seed + 1000, warm_start=True, epochs=epochs))
    return {
        "acc": history[-1].mean_accuracy,
        "server_acc": float(np.mean(server.predict(X_test) == y_test)),
        "down": [r.bytes_down for r in history],
        "up": [r.bytes_up for r in history],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (0, 1, ...)")
    parser.add_argument("--rounds", type=int, default=6, help="communication rounds")
    parser.add_argument("--epochs", type=int, default=15, help="epochs of every fit")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = [("DD, clients keep their model", None)]
    rows += [(m, b) for m in ("DD (mean)", "dual distillation") for b in BITS]
    lines = [
        f"digits, {N_CLIENTS} clients iid, 4 a round (participation 0.4), |U| = {N_PUBLIC}, "
        f"{args.rounds} rounds, MLP(32) clients and server, {args.epochs} epochs a fit, "
        f"seeds 0..{args.seeds - 1}; accuracy after the last round, mean ± std over seeds;",
        "bytes a round = bytes sent in a round with a broadcast (rounds 2..T; round 1 has none)",
        "",
        f"{'method':32} {'bits':>5} {'client acc':>15} {'global model acc':>17} "
        f"{'bytes down/round':>17} {'bytes up/round':>15}",
    ]
    per_seed: list[str] = []
    for method, bits in rows:
        out = [run(method, bits, s, args.rounds, args.epochs) for s in range(args.seeds)]
        acc = np.array([o["acc"] for o in out])
        server = np.array([o["server_acc"] for o in out])
        down = np.mean([np.mean(o["down"][1:]) for o in out])
        up = np.mean([np.mean(o["up"]) for o in out])
        server_text = f"{server.mean():.3f} ± {server.std():.3f}"
        lines.append(
            f"{method:32} {bits or 32:>5} {acc.mean():>7.3f} ± {acc.std():.3f} "
            f"{server_text:>17} {down:>17,.0f} {up:>15,.0f}"
        )
        print(lines[-1], flush=True)
        per_seed.append(
            f"{method:32} {bits or 32:>5}  client "
            + " ".join(f"{a:.3f}" for a in acc)
            + "  global "
            + " ".join(f"{a:.3f}" for a in server)
        )
    lines += ["", "per seed (seeds share their split, so rows compare seed by seed):", *per_seed]
    lines += ["", f"wall time: {time.perf_counter() - start:.0f} s"]
    record("dual_distillation", "\n".join(lines))


if __name__ == "__main__":
    main()
