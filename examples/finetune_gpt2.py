"""Federated fine-tuning of GPT-2 classification heads: FedCT against FedAvg.

The FedCT paper's IMDB setup on the movie-review polarity data (Pang & Lee 2004) in
``../shared/data/movie_reviews``: 10 clients with small labelled sets (145 reviews each),
a public pool of |U| = 150 unlabelled reviews, a held-out test set. FedCT shares hard
labels on U; FedAvg averages the trainable weights (with ``--lora`` only the LoRA adapters
and the head travel). The table reports test accuracy, uplink bytes per client per round,
and wall time per round.

``--model`` takes a hub name (``gpt2``, needs network access or a local cache) or a local
directory with a saved GPT-2 model. Without it, a tiny randomly initialised GPT-2 (2 layers,
64-dim) is built offline with a byte-level BPE tokenizer trained on the public pool, so
the script runs end to end on any machine: its accuracy then says little about
pretrained GPT-2 and the run is a check of the pipeline and of its cost per round.

    python examples/finetune_gpt2.py                        # tiny offline model
    python examples/finetune_gpt2.py --model /path/to/gpt2 --lora --rounds 20 --device cuda
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from cotrain import FederatedCoTrainer
from cotrain.baselines import FedAvg
from cotrain.text import load_movie_reviews
from learners import GPT2Classifier


def split_reviews(args: argparse.Namespace) -> dict:
    texts, y = load_movie_reviews(args.data_home)
    texts = np.asarray(texts, dtype=object)
    order = np.random.default_rng(args.seed).permutation(len(texts))
    n_lab = args.clients * args.labeled
    if n_lab + args.public + args.test > len(texts):
        raise SystemExit(
            f"{n_lab} labelled + {args.public} public + {args.test} test exceed "
            f"the {len(texts)} reviews"
        )
    test, public, lab = np.split(order, [args.test, args.test + args.public])
    lab = lab[:n_lab]
    return {
        "X": [texts[part] for part in np.array_split(lab, args.clients)],
        "y": [y[part] for part in np.array_split(lab, args.clients)],
        "U": texts[public],
        "X_test": texts[test],
        "y_test": y[test],
    }


def make_learner(args: argparse.Namespace, public_texts: np.ndarray, seed: int):
    """A GPT-2 head from --model, or a tiny offline model with a tokenizer trained on U."""
    lora = {"r": 8, "lora_alpha": 16, "target_modules": ["c_attn"]} if args.lora else False
    common = dict(
        max_length=args.max_length,
        lora=lora,
        max_epochs=args.max_epochs,
        epochs_per_fit=args.epochs_per_round,
        batch_size=args.batch_size,
        lr=args.lr,
        device=args.device,
        random_state=seed,
    )
    if args.model:
        return GPT2Classifier(model=args.model, **common)
    from transformers import GPT2Config

    from learners.gpt2 import train_bpe_tokenizer

    config = GPT2Config(
        n_layer=2,
        n_head=2,
        n_embd=64,
        n_positions=args.max_length,
        vocab_size=2000,
        bos_token_id=0,
        eos_token_id=0,
    )  # <|endoftext|> = 0
    if not hasattr(make_learner, "tokenizer"):  # one public tokenizer shared by all clients
        make_learner.tokenizer = train_bpe_tokenizer(list(public_texts), config.vocab_size)
    return GPT2Classifier(model=config, tokenizer=make_learner.tokenizer, **common)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="hub name or local directory of a GPT-2 model")
    parser.add_argument("--lora", action="store_true", help="train LoRA adapters + head only")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--labeled", type=int, default=145, help="labelled reviews per client")
    parser.add_argument("--public", type=int, default=150, help="|U|")
    parser.add_argument("--test", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-epochs", type=int, default=2, help="first local fit")
    parser.add_argument("--epochs-per-round", type=int, default=1, help="local work b")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-home", help="folder holding movie_reviews/")
    args = parser.parse_args(argv)

    data = split_reviews(args)
    test = (data["X_test"], data["y_test"])
    rows = []
    runs = {
        "FedCT": lambda: FederatedCoTrainer(
            [make_learner(args, data["U"], args.seed * 100 + i) for i in range(args.clients)],
            rounds=args.rounds,
            random_state=args.seed,
        ).fit(data["X"], data["y"], X_public=data["U"], eval_set=test),
        "FedAvg": lambda: FedAvg(
            make_learner(args, data["U"], args.seed),
            rounds=args.rounds,
            local_epochs=args.epochs_per_round,
            random_state=args.seed,
        ).fit(data["X"], data["y"], eval_set=test),
    }
    for name, run in runs.items():
        start = time.perf_counter()
        fitted = run()
        wall = time.perf_counter() - start
        history = fitted.history_
        rows.append(
            {
                "method": name,
                "test accuracy": history[-1].mean_accuracy,
                "up bytes/round/client": np.mean([r.bytes_up / len(r.clients) for r in history]),
                "s/round": wall / len(history),
            }
        )
    table = pd.DataFrame(rows)
    model = args.model or "tiny offline GPT-2 (2 layers, 64-dim, BPE trained on U)"
    print(
        f"movie reviews: {args.clients} clients x {args.labeled} labelled, |U| = {args.public}, "
        f"{args.test} test; {model}{', LoRA' if args.lora else ''}; {args.rounds} rounds"
    )
    print(table.round(4).to_string(index=False))
    return table


if __name__ == "__main__":
    main()
