"""DP-SGD with public sampling on a CUDA device: the same privacy event, and what a fit costs.

``DPSGD(sampling_rate=..., steps=...)`` makes the privacy event of a round public configuration:
``steps`` Poisson-sampled Gaussian steps at rate q, whatever the device or the number of
rows. This script checks that on the device it is given (``--device cuda`` on a GPU machine,
``cpu`` elsewhere): one ``DPTorchClassifier`` fit on digits for each of two row counts
(the event must be identical), the time of a fit, and a 3-client federation with
``privacy=DPSGD(...)`` whose clients train on the device (accuracy, the server ledger's ε
and every client's own ledger ε, which must agree).

Run::

    python benchmarks/dpsgd_device.py --device cuda      # on a machine with a GPU
    python benchmarks/dpsgd_device.py --device cpu

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
from sklearn.datasets import load_digits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--steps", type=int, default=50, help="DP-SGD steps per fit")
    parser.add_argument("--rate", type=float, default=0.1, help="Poisson sampling rate q")
    parser.add_argument("--sigma", type=float, default=1.5, help="noise multiplier")
    args = parser.parse_args()

    import torch

    from cotrain import FederatedCoTrainer, partition
    from cotrain.privacy import DPSGD
    from learners import TorchClassifier
    from learners.dp_torch import DPTorchClassifier

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    test, public, train = idx[:360], idx[360:1060], idx[1060:]

    def dp_model() -> DPTorchClassifier:
        return DPTorchClassifier(
            module_params={"hidden": (128,)}, lr=0.05, batch_size=64, device=args.device,
            noise_multiplier=args.sigma, max_grad_norm=1.0, sample_rate=args.rate,
            steps_per_fit=args.steps, random_state=0,
        )  # fmt: skip

    events, fit_s = [], []
    for n in (300, 301):
        model = dp_model()
        start = time.perf_counter()
        model.fit(X[train[:n]], y[train[:n]])
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        fit_s.append(time.perf_counter() - start)
        events.append(model.dp_events_[-1])
    same_event = events[0] == events[1]
    print(f"device {args.device}: event for 300 and 301 rows identical: {same_event}")
    print(f"  {events[0]}")
    print(f"  fit of {args.steps} steps: {fit_s[0]:.2f} s (first, includes start-up), "
          f"{fit_s[1]:.2f} s")  # fmt: skip

    parts = partition.iid(y[train], 3, random_state=0)
    X_clients = [X[train[p]] for p in parts]
    y_clients = [y[train[p]] for p in parts]
    mech = DPSGD(noise_multiplier=args.sigma, max_grad_norm=1.0, sampling_rate=args.rate,
                 steps=args.steps)  # fmt: skip
    estimators = [
        TorchClassifier(module_params={"hidden": (128,)}, lr=0.05, batch_size=64,
                        device=args.device, random_state=i)
        for i in range(3)
    ]  # fmt: skip
    start = time.perf_counter()
    trainer = FederatedCoTrainer(
        estimators,
        rounds=3,
        privacy=mech,
        classes=np.arange(10),
        random_state=0,
    ).fit(X_clients, y_clients, X_public=X[public], eval_set=(X[test], y[test]))
    run_s = time.perf_counter() - start
    report = trainer.privacy_report()
    accuracy = [round(float(a), 3) for a in trainer.history_[-1].client_accuracy.values()]
    server = [c["epsilon"] for c in report["clients"]]
    sites = [c["site_epsilon"] for c in report["clients"]]
    print(f"federation: 3 clients, 3 rounds, {run_s:.1f} s; client accuracy {accuracy}")
    print(f"  ε per private record (add/remove) {report['epsilon_by_relation']}")
    print(f"  server ledger {server}, each client's own {sites}")
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else platform.machine()
    print(json.dumps({
        "device": args.device, "device_name": name, "same_event_300_301": bool(same_event),
        "fit_s": [round(s, 3) for s in fit_s], "federation_s": round(run_s, 1),
        "client_accuracy": accuracy, "epsilon": report["epsilon_by_relation"],
        "ledgers_agree": bool(server == sites),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
