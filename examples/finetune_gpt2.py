"""Federated fine-tuning of GPT-2 classification heads: FedCT against FedAvg.

The GPT-2 preset of ``finetune_lm.py`` (see it for every option and for the local-only and
centralised references): the FedCT paper's IMDB setup on the movie-review polarity data
(Pang & Lee 2004) in ``../shared/data/movie_reviews``: 10 clients with small labelled sets
(145 reviews each), a public pool of |U| = 150 unlabelled reviews, 300 held-out test
reviews. FedCT shares hard labels on U; FedAvg averages the trainable weights (with
``--lora`` only the LoRA adapters and the head travel). The table reports test accuracy,
uplink bytes per client per round, and wall time per round.

``--model`` takes a hub name (``gpt2``, in the local cache: nothing is downloaded) or a local
directory with a saved GPT-2 model. Without it, a tiny randomly initialised GPT-2 (2 layers,
64-dim) is built offline with a byte-level BPE tokenizer trained on the public pool, so
the script runs end to end on any machine: its accuracy then says little about
pretrained GPT-2 and the run is a check of the pipeline and of its cost per round.

Preset defaults (any ``finetune_lm.py`` option given here overrides them): ``--learner
GPT2Classifier --model tiny-gpt2 --methods fedct,fedavg --rounds 5 --max-epochs 2
--batch-size 16 --lr 5e-4``.

    python examples/finetune_gpt2.py                        # tiny offline model
    python examples/finetune_gpt2.py --model /path/to/gpt2 --lora --rounds 20 --device cuda
    python examples/finetune_gpt2.py --methods fedct,fedavg,local,central --plot gpt2.png
"""

from __future__ import annotations

import sys

import finetune_lm
import pandas as pd

PRESET = ["--learner", "GPT2Classifier", "--model", finetune_lm.TINY, "--rounds", "5"]
PRESET += ["--methods", "fedct,fedavg"]
PRESET += ["--max-epochs", "2", "--batch-size", "16", "--lr", "5e-4"]


def main(argv: list[str] | None = None) -> pd.DataFrame:
    """Run ``finetune_lm.main`` with the GPT-2 preset before the caller's options.

    Examples
    --------
    >>> table = main(["--rounds", "1"])  # doctest: +SKIP
    >>> table["method"].tolist()  # doctest: +SKIP
    ['FedCT', 'FedAvg']
    """
    return finetune_lm.main([*PRESET, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
