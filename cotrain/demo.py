"""The `cotrain demo` experiment: a mixed-model federation on breast-cancer data.

Five clients of different kinds share 85 labelled examples (iid), label a public pool of
370, and are tested on 114: the FedCT paper's split of scikit-learn's bundled
breast-cancer data. By default (:data:`DEMO`) the clients are a decision tree, a random
forest, Gaussian naive Bayes, XGBoost and a random forest, over 5 seeds (about 15 s on 2
cores); ``cotrain demo --full`` (:data:`PAPER_DEMO`) runs the paper's federation, with a
RuleFit rule ensemble in place of naive Bayes (FedCT Table 6, first row; about 2.5
minutes on 2 cores, most of it RuleFit's fits).
"""

from __future__ import annotations

import importlib.util
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

from cotrain import partition
from cotrain.datasets.loaders import load_breast_cancer_split
from cotrain.trainer import FederatedCoTrainer
from cotrain.trust import DEFAULT_TRUST


def mixed_estimators() -> list[Any]:
    """The paper's first mixed federation: DT, RF, RuleFit, XGBoost, RF."""
    from learners import RuleFitClassifier, XGBoostClassifier

    return [
        DecisionTreeClassifier(min_samples_split=2),
        RandomForestClassifier(n_estimators=100),
        RuleFitClassifier(tree_size=4, max_rules=200),
        XGBoostClassifier(),
        RandomForestClassifier(n_estimators=100),
    ]


def light_estimators() -> list[Any]:
    """The default demo's federation: DT, RF, naive Bayes, XGBoost, RF.

    The paper's mixed federation with Gaussian naive Bayes in place of RuleFit, whose
    fits take most of the paper federation's time.
    """
    from learners import XGBoostClassifier

    return [
        DecisionTreeClassifier(min_samples_split=2),
        RandomForestClassifier(n_estimators=100),
        GaussianNB(),
        XGBoostClassifier(),
        RandomForestClassifier(n_estimators=100),
    ]


@dataclass(frozen=True)
class Federation:
    """One federation the demo can run.

    Attributes
    ----------
    learners : str
        The clients' learners, as the demo's first line names them.
    make : callable
        Returns a new list of the clients' estimators.
    needs : tuple of str
        The modules it imports (checked before anything runs), with the extra to install.
    paper : str, optional
        The FedCT paper's number for this federation, printed under the table.
    other : str
        Says how the other federation is run (printed in parentheses under the title).

    Examples
    --------
    >>> DEMO.learners, PAPER_DEMO.learners
    ('DT, RF, naive Bayes, XGBoost, RF', 'DT, RF, RuleFit, XGBoost, RF')
    """

    learners: str
    make: Callable[[], list[Any]]
    needs: tuple[tuple[str, str], ...]
    paper: str | None
    other: str


#: the default demo: a light mixed federation (about 15 s on 2 cores)
DEMO = Federation(
    "DT, RF, naive Bayes, XGBoost, RF",
    light_estimators,
    (("xgboost", "xgboost"),),
    None,
    "the FedCT paper's federation, with RuleFit in place of naive Bayes (Table 6): "
    "cotrain demo --full, about 2.5 minutes",
)
#: ``cotrain demo --full``: the FedCT paper's federation (Table 6, first row)
PAPER_DEMO = Federation(
    "DT, RF, RuleFit, XGBoost, RF",
    mixed_estimators,
    (("xgboost", "xgboost"), ("imodels", "rules")),
    "FedCT paper (Table 6), mean client acc: 0.95 ± 0.001",
    "a lighter federation, with naive Bayes in place of RuleFit: cotrain demo, about 15 s",
)


def check_extras(federation: Federation) -> None:
    """Raise ImportError naming the extra to install when a learner's library is missing.

    Examples
    --------
    >>> check_extras(Federation("DT", list, (("no_such_module_x", "x"),), None, ""))
    Traceback (most recent call last):
    ...
    ImportError: the demo's DT clients need no_such_module_x: pip install 'cotrain[x]'
    """
    for module, extra in federation.needs:
        if importlib.util.find_spec(module) is None:
            raise ImportError(
                f"the demo's {federation.learners} clients need {module}: "
                f"pip install 'cotrain[{extra}]'"
            )


def run_seed(
    make_estimators: Callable[[], list[Any]],
    seed: int,
    rounds: int = 10,
    consensus: str = "auto",
    n_jobs: int | None = None,
    verbose: int = 0,
    trust: Any = DEFAULT_TRUST,
) -> tuple[dict[str, float], FederatedCoTrainer]:
    """One seed of the breast-cancer protocol: FedCT, local-only and centralised.

    Local-only accuracy is that of the clients after round 1, which they fit on their
    private data alone (no pseudo-labels exist yet). Centralised fits each client's
    learner on all 85 labelled examples pooled.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> row, trainer = run_seed(lambda: [DecisionTreeClassifier()] * 5, seed=0, rounds=2)
    >>> sorted(row)[:3]
    ['bytes_down_per_round', 'bytes_up_per_round', 'centralised']
    """
    data = load_breast_cancer_split(random_state=seed)
    estimators = make_estimators()
    parts = partition.iid(data.y_labeled, n_clients=len(estimators), random_state=seed)
    start = time.perf_counter()
    trainer = FederatedCoTrainer(
        estimators,
        consensus=consensus,
        rounds=rounds,
        random_state=seed,
        n_jobs=n_jobs,
        verbose=verbose,
        trust=trust,
    ).fit(
        [data.X_labeled[p] for p in parts],
        [data.y_labeled[p] for p in parts],
        X_public=data.X_public,
        eval_set=(data.X_test, data.y_test),
        y_public=data.y_public,
    )
    fit_time = time.perf_counter() - start
    central = []
    for i, est in enumerate(estimators):
        model = clone(est)
        if "random_state" in model.get_params():
            model.set_params(random_state=seed * 100 + i)
        central.append(model.fit(data.X_labeled, data.y_labeled).score(data.X_test, data.y_test))
    history = trainer.history_
    row = {
        "fedct_mean_client": history[-1].mean_accuracy,
        "fedct_consensus": trainer.score(data.X_test, data.y_test),
        "local_mean_client": history[0].mean_accuracy,
        "local_consensus": history[0].consensus_accuracy,
        "centralised": float(np.mean(central)),
        "bytes_up_per_round": float(np.mean([r.bytes_up for r in history])),
        "bytes_down_per_round": float(np.mean([r.bytes_down for r in history[1:]] or [0])),
        "fit_time_s": fit_time,
    }
    return row, trainer


def summarize(rows: list[dict[str, float]]) -> pd.DataFrame:
    """One line per method: the mean over seeds, with ``± std`` only when there are several.

    Parameters
    ----------
    rows : list of dict
        One dictionary per seed, as returned by :func:`run_seed`.

    Returns
    -------
    pandas.DataFrame
        Columns ``method``, ``mean client acc``, ``consensus acc``, ``bytes up/round`` and
        ``bytes down/round``; accuracies formatted with three decimals.

    Examples
    --------
    >>> row = dict(fedct_mean_client=0.92, fedct_consensus=0.93, local_mean_client=0.89,
    ...            local_consensus=0.93, centralised=0.94, bytes_up_per_round=57,
    ...            bytes_down_per_round=57, fit_time_s=1.0)
    >>> summarize([row])["mean client acc"].tolist()
    ['0.920', '0.890', '0.940']
    >>> summarize([row, {**row, "fedct_mean_client": 0.94}])["mean client acc"].iloc[0]
    '0.930 ± 0.010'
    """
    frame = pd.DataFrame(rows)

    def cell(col: str) -> str:
        if len(frame) == 1:
            return f"{frame[col].iloc[0]:.3f}"
        return f"{frame[col].mean():.3f} ± {frame[col].std(ddof=0):.3f}"

    up = frame["bytes_up_per_round"].mean()
    down = frame["bytes_down_per_round"].mean()
    return pd.DataFrame(
        [
            [
                "FedCT (after last round)",
                cell("fedct_mean_client"),
                cell("fedct_consensus"),
                f"{up:.0f}",
                f"{down:.0f}",
            ],
            [
                "local only (no communication)",
                cell("local_mean_client"),
                cell("local_consensus"),
                "0",
                "0",
            ],
            ["centralised (all labels pooled)", cell("centralised"), "-", "-", "-"],
        ],
        columns=[
            "method",
            "mean client acc",
            "consensus acc",
            "bytes up/round",
            "bytes down/round",
        ],
    )


#: printed under the table: what each column means
LEGEND = """\
mean client acc   test accuracy of each site's own model, averaged over the 5 sites: what a
                  site gets from the model it holds (the FedCT paper's metric, and what
                  co-training is meant to raise). Centralised: each site's kind of learner
                  trained on all 85 labelled rows pooled (an upper reference a federation
                  cannot have), averaged over the 5 learners.
consensus acc     test accuracy of the majority vote of all 5 sites' models (the default
                  Dawid-Skene consensus weighs sites on the public pool only): an ensemble
                  that needs every site's model at prediction time, which no single site holds.
                  Local-only models already vote well together; co-training trains each site
                  on that vote, so a site's own model catches up with the ensemble (the first
                  column rises) while the vote itself barely moves. One test example of 114
                  is 0.009: a difference of one or two examples here is noise.
bytes up/round    one round's label uploads, all 5 sites together: each site's labels on
                  the 370 public examples, 1 bit each (2 classes) plus a header; down: the
                  consensus sent back to the 5 sites. No model or private row travels."""


def summary_lines(
    rows: list[dict[str, float]], rounds: int, federation: Federation | None = None
) -> list[str]:
    """The lines printed under the demo's table: seeds, legend, and a note where needed.

    Parameters
    ----------
    rows : list of dict
        One dictionary per seed, as returned by :func:`run_seed`.
    rounds : int
        Rounds per run.
    federation : Federation, optional
        The federation that ran (default :data:`PAPER_DEMO`): its paper's number, or a
        line saying how to run the paper's federation.

    Returns
    -------
    list of str
        Lines to print; "1 seed" (no ± std) for one seed, "mean ± std over k seeds" else.

    Examples
    --------
    >>> row = dict(fedct_mean_client=0.92, fedct_consensus=0.925, local_mean_client=0.89,
    ...            local_consensus=0.93, centralised=0.94, bytes_up_per_round=57,
    ...            bytes_down_per_round=57, fit_time_s=1.0)
    >>> summary_lines([row], rounds=10)[0]
    '1 seed (seed 0), 10 rounds; FedCT paper (Table 6), mean client acc: 0.95 ± 0.001.'
    >>> summary_lines([row], rounds=10, federation=DEMO)[0]
    '1 seed (seed 0), 10 rounds.'
    """
    federation = PAPER_DEMO if federation is None else federation
    seeds = len(rows)
    if seeds == 1:
        head = f"1 seed (seed 0), {rounds} rounds"
    else:
        head = f"mean ± std over {seeds} seeds (0..{seeds - 1}), {rounds} rounds"
    if federation.paper:
        head += f"; {federation.paper}"
    lines = [f"{head}.", "", *LEGEND.splitlines()]
    frame = pd.DataFrame(rows)
    fedct, local = frame["fedct_consensus"].mean(), frame["local_consensus"].mean()
    if local > fedct:
        examples = (local - fedct) * 114
        note = (
            f"Here local-only's vote ({local:.3f}) is above FedCT's ({fedct:.3f}), by "
            f"{examples:.1f} of 114 test examples{' on average' if seeds > 1 else ''}: "
        )
        if frame["fedct_mean_client"].mean() > frame["local_mean_client"].mean():
            note += "co-training raised the sites' own models (first column), not the vote."
        else:
            note += "co-training did not raise the sites' own models either (first column)."
        lines += ["", *textwrap.wrap(note, width=90, break_on_hyphens=False)]
    return lines


def run_demo(
    seeds: int = 5,
    rounds: int = 10,
    n_jobs: int | None = None,
    plot: str | None = None,
    verbose: int = 1,
    full: bool = False,
) -> pd.DataFrame:
    """Run the demo over ``seeds`` seeds and print the comparison table.

    Parameters
    ----------
    seeds : int, default=5
        Seeds 0 to ``seeds - 1``: each one a different split and federation.
    rounds : int, default=10
        Rounds per run.
    n_jobs : int, optional
        Parallel workers for the clients (joblib; -1: all cores).
    plot : str, optional
        Save the convergence plot of seed 0 there (a format matplotlib writes, e.g.
        ``.png``, ``.pdf``, ``.svg``); checked before anything runs.
    verbose : int, default=1
        0: no progress bar.
    full : bool, default=False
        The FedCT paper's federation (:data:`PAPER_DEMO`, with RuleFit: minutes) instead
        of the light default (:data:`DEMO`).

    Returns
    -------
    pandas.DataFrame
        The table printed.

    Raises
    ------
    ValueError
        ``seeds``, ``rounds`` or ``n_jobs`` out of range, or a ``plot`` path that cannot
        be written (before any training).
    ImportError
        A learner's library missing (the message names the extra to install).
    """
    from tqdm.auto import tqdm

    from cotrain.params import check_params

    if seeds < 1 or rounds < 1:
        raise ValueError(f"seeds and rounds must be >= 1, got seeds={seeds}, rounds={rounds}")
    check_params({"n_jobs": n_jobs})
    if plot:
        from cotrain.experiment.paths import check_plot_file

        check_plot_file(plot, "plot")
    federation = PAPER_DEMO if full else DEMO
    check_extras(federation)
    print(f"cotrain demo: federated co-training of {federation.learners} clients")
    print(
        "breast cancer (scikit-learn), FedCT paper split: 85 labelled over 5 clients (iid),"
        " |U| = 370 public, 114 test"
    )
    print(f"({federation.other})\n")
    rows, first = [], None
    for seed in tqdm(range(seeds), desc="seeds", disable=verbose < 1):
        row, trainer = run_seed(federation.make, seed, rounds=rounds, n_jobs=n_jobs)
        rows.append(row)
        first = first or trainer
    table = summarize(rows)
    print(table.to_string(index=False))
    print()
    print("\n".join(summary_lines(rows, rounds, federation)))
    if plot:
        fig = first.history_.plot()
        fig.suptitle(f"cotrain demo ({federation.learners}), seed 0")
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
        print(f"convergence plot saved to {plot}")
    return table
