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

``--quick`` (3 clients x 16 reviews, |U| = 16, 40 test, 2 rounds of one epoch, LoRA) ends
in about 10 s on 2 busy cores, with a progress bar per round and per client.

Run::

    python examples/finetune_gpt2.py                        # tiny offline model
    python examples/finetune_gpt2.py --quick                # about 10 s
    python examples/finetune_gpt2.py --model /path/to/gpt2 --lora --rounds 20 --device cuda
    python examples/finetune_gpt2.py --methods fedct,fedavg,local,central --plot gpt2.png
"""

from __future__ import annotations

import finetune_lm
import pandas as pd

#: finetune_lm.py's defaults that this preset replaces (--quick and explicit options win)
PRESET = dict(
    learner="GPT2Classifier",
    model=finetune_lm.TINY,
    rounds=5,
    methods="fedct,fedavg",
    max_epochs=2,
    batch_size=16,
    lr=5e-4,
)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    """Run ``finetune_lm.main`` with the GPT-2 preset as its defaults.

    Examples
    --------
    >>> table = main(["--rounds", "1"])  # doctest: +SKIP
    >>> table["method"].tolist()  # doctest: +SKIP
    ['FedCT', 'FedAvg']
    """
    return finetune_lm.main(argv, preset=PRESET, description=__doc__)


if __name__ == "__main__":
    main()
