"""Running an experiment: every (variant, seed) of a file, each into its own folder.

The method of a run is looked up in :data:`~cotrain.experiment.methods.METHODS`; this
module only prepares its data, times it, audits it if asked and writes what it gave.
"""

from __future__ import annotations

import json
import math
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

from cotrain.experiment.config import Run, load_experiment
from cotrain.experiment.data import client_parts, load_data
from cotrain.experiment.errors import ExperimentError, RunFailed
from cotrain.experiment.learners import client_learners
from cotrain.experiment.methods import METHODS, MethodInput, noise_replayable
from cotrain.experiment.paths import check_output_folder
from cotrain.experiment.report import EPSILON_COLUMNS, write_summary
from cotrain.history import LearnerWarningSummary
from cotrain.params import did_you_mean
from cotrain.persistence.checkpoint import fingerprint

__all__ = [
    "client_names",
    "run_experiment",
    "run_fingerprint",
    "run_one",
    "select_runs",
    "tidy_checkpoint",
]


def run_one(run: Run, folder: Path, *, keep_checkpoint: bool = False) -> dict[str, Any]:
    """Fit one (variant, seed); write ``history.csv`` and ``result.json``; return the result.

    Parameters
    ----------
    run : Run
        The (variant, seed) and its resolved configuration.
    folder : Path
        The run's folder (made if missing). A FedCT run checkpoints there and continues
        from its last round when the checkpoint is found.
    keep_checkpoint : bool, default=False
        Keep the last checkpoint of a finished FedCT run (to extend it by more rounds
        later); by default it is deleted once ``result.json`` is written, since
        ``resume`` skips a finished run by its ``result.json`` alone.

    Returns
    -------
    dict
        What ``result.json`` holds: accuracy, consensus accuracy, rounds, wall time,
        each client's accuracy after the last round (``client_accuracy``, by client
        index, with its learner in ``client_learners``; empty for a method that delivers
        one model), ε (where the method is private), the audit's ``vul`` (where asked) and
        the run's :func:`run_fingerprint`.

    Examples
    --------
    >>> import tempfile
    >>> from cotrain.experiment import load_experiment
    >>> _, runs = load_experiment("experiments/table3_breast_cancer.toml")  # doctest: +SKIP
    >>> run_one(runs[0], Path(tempfile.mkdtemp()))["accuracy"]  # doctest: +SKIP
    0.9...
    """
    config, seed = run.config, run.seed
    folder.mkdir(parents=True, exist_ok=True)
    data = load_data(config, seed, run.base)
    parts = client_parts(config, data.y_labeled, seed)
    X = [data.X_labeled[p] for p in parts]
    y = [data.y_labeled[p] for p in parts]
    method = config["method"]
    name = method["name"]
    entry = METHODS[name]
    eval_set = (data.X_test, data.y_test)
    given = MethodInput(
        learners=client_learners(config),
        X=X,
        y=y,
        X_public=data.X_public,
        y_public=data.get("y_public"),
        eval_set=eval_set,
        method=method,
        seed=seed,
        folder=folder,
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        # the learners' warnings are counted in the history (and their summaries too), not
        # printed; the library's own (a setup that cannot work as asked) reach the user
        warnings.simplefilter("ignore")
        warnings.filterwarnings("default", category=UserWarning, module=r"(cotrain|learners)\.")
        warnings.filterwarnings("ignore", category=LearnerWarningSummary)
        model = entry.fit(given)
    wall = time.perf_counter() - start
    last = model.history_[-1]
    result = {
        "variant": run.variant,
        "seed": seed,
        "method": name,
        "accuracy": _num(getattr(last, entry.accuracy)),  # of the model the method delivers
        "consensus_accuracy": _num(last.consensus_accuracy),
        "rounds": len(model.history_),
        "wall_s": wall,
        # each client's own model after the last round: the per-client table of summary.md
        "client_accuracy": {str(c): _num(a) for c, a in sorted(last.client_accuracy.items())},
        "client_learners": client_names(config),
        # ε of different units never share a column: "epsilon" is record-level only
        **{
            column: _num(last.epsilon) if last.epsilon_unit == unit else math.nan
            for unit, column in EPSILON_COLUMNS.items()
        },
        "epsilon_adversary": last.epsilon_adversary,
        # True: the privacy noise was seeded from the run's seed ([method] reproducible_noise),
        # so whoever knows the seed can replay it; the ε does not hold against them
        "noise_replayable": noise_replayable(method),
        "paper": run.paper,
        "config": run_fingerprint(run),
        **co_training_settings(model),
    }
    if method.get("audit"):
        from cotrain.audit import audit_clients

        members = list(zip(X, y, strict=True))
        noise = entry.audit_noise(model, seed) if entry.audit_noise is not None else {}
        result["vul"] = float(audit_clients(model, members, eval_set, **noise).mean_auc)
    model.history_.to_frame().to_csv(folder / "history.csv", index=False)  # "round" leads
    (folder / "result.json").write_text(json.dumps(result, indent=1))
    tidy_checkpoint(folder, keep=keep_checkpoint)
    return result


def tidy_checkpoint(folder: Path, keep: bool = False) -> None:
    """Drop the checkpoints of a finished run (``result.json`` written): ``resume`` needs
    none; with ``keep``, only the latest (from which more rounds can be added).

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "checkpoint" / "round-000001").mkdir(parents=True)
    >>> tidy_checkpoint(folder)
    >>> (folder / "checkpoint").exists()
    False
    """
    from cotrain.persistence.checkpoint import LATEST

    checkpoint = folder / "checkpoint"
    if not checkpoint.is_dir():
        return
    if not keep:
        shutil.rmtree(checkpoint, ignore_errors=True)
        return
    pointer = checkpoint / LATEST
    latest = pointer.read_text().strip() if pointer.is_file() else None
    for path in checkpoint.glob("*round-*"):
        if path.name != latest:
            shutil.rmtree(path, ignore_errors=True)


def run_fingerprint(run: Run) -> str:
    """What a run's result depends on (data, split, method, clients, seed).

    Editing the name, the description or adding seeds keeps finished runs when resuming.

    Examples
    --------
    >>> config = {"data": {}, "split": {}, "method": {"name": "local"}, "clients": []}
    >>> a = run_fingerprint(Run("a", 0, {**config, "description": "one"}))
    >>> a == run_fingerprint(Run("a", 0, {**config, "description": "two"}))
    True
    >>> a == run_fingerprint(Run("a", 1, config))
    False
    """
    parts = {k: run.config[k] for k in ("data", "split", "method", "clients")}
    return fingerprint(json.dumps(parts, sort_keys=True, default=str), run.seed)


def run_experiment(
    path: str | Path,
    out: str | Path | None = None,
    *,
    resume: bool = False,
    verbose: int = 1,
    variants: list[str] | None = None,
    seeds: list[int] | None = None,
    keep_checkpoints: bool = False,
) -> Path:
    """Run every (variant, seed) of an experiment file; returns the results folder.

    The whole file is validated first (:func:`~cotrain.experiment.load_experiment`):
    an invalid file, an unknown variant or seed, writes nothing.

    Parameters
    ----------
    path : str or Path
        The experiment file.
    out : str or Path, optional
        The results folder (default ``results/<name>``).
    resume : bool, default=False
        Keep finished runs and continue interrupted ones; without it an existing
        results folder with runs in it is refused.
    verbose : int, default=1
        0: silent; 1: a progress bar and one line per finished run.
    variants : list of str, optional
        Run only these variants (their labels, as in the file); the summary also shows
        the other variants' runs already finished in the folder.
    seeds : list of int, optional
        Run only these seeds (of those the file gives each variant).
    keep_checkpoints : bool, default=False
        Keep each finished FedCT run's last checkpoint (see :func:`run_one`).

    Returns
    -------
    Path
        The results folder: ``experiment.toml``, ``runs/<variant>/seed-<s>/``,
        ``summary.csv``, ``summary.md`` and ``accuracy.png``.

    Raises
    ------
    ExperimentError
        An invalid file, an unknown variant or seed (before anything runs), or a folder
        that holds runs already while ``resume`` is False.
    RunFailed
        A run that raised while training (its cause chained); the runs finished before
        it are kept, and ``resume`` continues from there.

    Examples
    --------
    >>> folder = run_experiment("experiments/table3_breast_cancer.toml")  # doctest: +SKIP
    >>> print((folder / "summary.md").read_text())  # doctest: +SKIP
    """
    from tqdm.auto import tqdm

    config, every = load_experiment(path)
    runs = select_runs(every, variants, seeds)
    folder = Path(out) if out is not None else Path("results") / config["name"]
    try:
        check_output_folder(folder, "results folder" if out is None else "out")
    except ValueError as err:
        raise ExperimentError(str(err)) from None
    if (folder / "runs").exists() and not resume:
        raise ExperimentError(
            f"{folder} already holds runs: pass resume=True (--resume) to continue them, or "
            "choose another output folder"
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "experiment.toml").write_text(Path(path).read_text())
    done: dict[str, dict[str, Any]] = {}
    for run in every:  # finished runs in the folder (also of variants not selected)
        result = _finished(run, folder / "runs" / run.key) if resume else None
        if result is not None:
            done[run.key] = result
    started = time.perf_counter()
    bar = tqdm(runs, disable=verbose < 1, desc=config["name"], unit="run")
    for run in bar:
        run_dir = folder / "runs" / run.key
        if run.key in done:
            tidy_checkpoint(run_dir, keep=keep_checkpoints)  # from before checkpoints were dropped
            continue
        try:
            done[run.key] = run_one(run, run_dir, keep_checkpoint=keep_checkpoints)
        except ExperimentError:
            raise
        except Exception as err:
            raise RunFailed(
                f"run {run.variant!r} seed {run.seed} failed: {type(err).__name__}: {err} "
                f"(finished runs are kept in {folder}; fix the cause, then add --resume)"
            ) from err
        if verbose:
            result = done[run.key]
            bar.write(
                f"{run.variant} seed {run.seed}: accuracy {result['accuracy']:.3f}, "
                f"{result['wall_s']:.1f} s"
            )
    results = [done[run.key] for run in every if run.key in done]
    shown = dict(config, seeds=sorted({r["seed"] for r in results})) if seeds else config
    write_summary(folder, shown, results, time.perf_counter() - started)
    return folder


def select_runs(
    runs: list[Run], variants: list[str] | None = None, seeds: list[int] | None = None
) -> list[Run]:
    """The runs of the given variants (``[[variant]]`` labels or row labels) and seeds.

    Raises
    ------
    ExperimentError
        A variant or seed the file does not have (the message lists those it has).

    Examples
    --------
    >>> runs = [Run("a", 0, {}), Run("a", 1, {}), Run("b", 0, {})]
    >>> [r.key for r in select_runs(runs, ["a"], [1])]
    ['a/seed-1']
    >>> select_runs(runs, ["c"])
    Traceback (most recent call last):
    ...
    cotrain.experiment.errors.ExperimentError: unknown variant 'c'; the file's variants: 'a', 'b'
    """
    chosen = runs
    if variants:
        labels = list(dict.fromkeys([r.group for r in runs] + [r.variant for r in runs]))
        unknown = [v for v in variants if v not in labels]
        if unknown:
            names = ", ".join(repr(v) for v in dict.fromkeys(r.group for r in runs))
            hint = did_you_mean(unknown[0], labels) if len(unknown) == 1 else ""
            raise ExperimentError(
                f"unknown variant {', '.join(map(repr, unknown))}{hint}; the file's variants: "
                f"{names}"
            )
        chosen = [r for r in chosen if r.group in variants or r.variant in variants]
    if seeds:
        have = sorted({r.seed for r in chosen})
        unknown_seeds = [s for s in seeds if s not in have]
        if unknown_seeds:
            raise ExperimentError(
                f"seed {', '.join(map(str, unknown_seeds))} is not among the seeds of the "
                f"selected variants: {', '.join(map(str, have))}"
            )
        chosen = [r for r in chosen if r.seed in seeds]
    return chosen


def client_names(config: dict[str, Any]) -> list[str]:
    """Each client's learner, as the ``[[clients]]`` blocks name it (a class path by its
    class name), in client order.

    Examples
    --------
    >>> client_names({"clients": [{"learner": "DT", "count": 2},
    ...                           {"learner": "sklearn.naive_bayes.GaussianNB"}],
    ...               "split": {"n_clients": 3}})
    ['DT', 'DT', 'GaussianNB']
    >>> client_names({"clients": [{"learner": "RF"}], "split": {"n_clients": 2}})
    ['RF', 'RF']
    """
    clients = config["clients"]
    if len(clients) == 1 and "count" not in clients[0]:
        clients = [{**clients[0], "count": config["split"]["n_clients"]}]
    return [str(c["learner"]).rpartition(".")[2] for c in clients for _ in range(c.get("count", 1))]


def _finished(run: Run, folder: Path) -> dict[str, Any] | None:
    """The run's result where it finished with the same configuration, else None."""
    done = folder / "result.json"
    if not done.is_file():
        return None
    try:
        result = json.loads(done.read_text())
    except ValueError:
        return None
    return result if result.get("config") == run_fingerprint(run) else None


def co_training_settings(model: Any) -> dict[str, str]:
    """The trust and consensus a co-training run used, as ``summary.md`` names them (empty
    for a method without a consensus).

    Examples
    --------
    >>> from consensus import get_consensus
    >>> from cotrain import FederatedCoTrainer
    >>> trainer = FederatedCoTrainer([None], trust=None)
    >>> trainer.consensus_ = get_consensus("majority")
    >>> co_training_settings(trainer)
    {'trust': 'none', 'consensus': 'MajorityVote'}
    """
    if not hasattr(model, "consensus_"):
        return {}
    trust = getattr(model, "trust", None)
    return {
        "trust": "none" if trust is None else str(trust),
        "consensus": type(model.consensus_).__name__,
    }


def _num(value: Any) -> float | None:
    return None if value is None else float(value)
