"""Running an experiment: every (variant, seed) of a file, each into its own folder.

The method of a run is looked up in :data:`~cotrain.experiment.methods.METHODS`; this
module only prepares its data, times it, audits it if asked and writes what it gave.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from pathlib import Path
from typing import Any

from cotrain.checkpoint import fingerprint
from cotrain.experiment.config import Run, load_experiment
from cotrain.experiment.data import client_parts, load_data
from cotrain.experiment.errors import ExperimentError
from cotrain.experiment.learners import client_learners
from cotrain.experiment.methods import METHODS, MethodInput
from cotrain.experiment.report import EPSILON_COLUMNS, write_summary

__all__ = ["run_experiment", "run_fingerprint", "run_one"]


def run_one(run: Run, folder: Path) -> dict[str, Any]:
    """Fit one (variant, seed); write ``history.csv`` and ``result.json``; return the result.

    Parameters
    ----------
    run : Run
        The (variant, seed) and its resolved configuration.
    folder : Path
        The run's folder (made if missing). A FedCT run checkpoints there and continues
        from its last round when the checkpoint is found.

    Returns
    -------
    dict
        What ``result.json`` holds: accuracy, consensus accuracy, rounds, wall time,
        ε (where the method is private), the audit's ``vul`` (where asked) and the
        run's :func:`run_fingerprint`.

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
    data = load_data(config, seed)
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
        warnings.simplefilter("ignore")
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
        # ε of different units never share a column: "epsilon" is record-level only
        **{
            column: _num(last.epsilon) if last.epsilon_unit == unit else math.nan
            for unit, column in EPSILON_COLUMNS.items()
        },
        "epsilon_adversary": last.epsilon_adversary,
        "paper": run.paper,
        "config": run_fingerprint(run),
    }
    if method.get("audit"):
        from cotrain.audit import audit_clients

        members = list(zip(X, y, strict=True))
        noise = entry.audit_noise(model, seed) if entry.audit_noise is not None else {}
        result["vul"] = float(audit_clients(model, members, eval_set, **noise).mean_auc)
    model.history_.to_frame().to_csv(folder / "history.csv")
    (folder / "result.json").write_text(json.dumps(result, indent=1))
    return result


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
    path: str | Path, out: str | Path | None = None, *, resume: bool = False, verbose: int = 1
) -> Path:
    """Run every (variant, seed) of an experiment file; returns the results folder.

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

    Returns
    -------
    Path
        The results folder: ``experiment.toml``, ``runs/<variant>/seed-<s>/``,
        ``summary.csv``, ``summary.md`` and ``accuracy.png``.

    Raises
    ------
    ExperimentError
        An invalid file (before anything runs), or a folder that holds runs already
        while ``resume`` is False.

    Examples
    --------
    >>> folder = run_experiment("experiments/table3_breast_cancer.toml")  # doctest: +SKIP
    >>> print((folder / "summary.md").read_text())  # doctest: +SKIP
    """
    from tqdm.auto import tqdm

    config, runs = load_experiment(path)
    folder = Path(out) if out is not None else Path("results") / config["name"]
    if (folder / "runs").exists() and not resume:
        raise ExperimentError(
            f"{folder} already holds runs: pass resume=True (--resume) to continue them, or "
            "choose another output folder"
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "experiment.toml").write_text(Path(path).read_text())
    results, started = [], time.perf_counter()
    bar = tqdm(runs, disable=verbose < 1, desc=config["name"], unit="run")
    for run in bar:
        run_dir = folder / "runs" / run.key
        done = run_dir / "result.json"
        if resume and done.exists():
            result = json.loads(done.read_text())
            if result.get("config") == run_fingerprint(run):
                results.append(result)
                continue
        result = run_one(run, run_dir)
        results.append(result)
        if verbose:
            bar.write(
                f"{run.variant} seed {run.seed}: accuracy {result['accuracy']:.3f}, "
                f"{result['wall_s']:.1f} s"
            )
    write_summary(folder, config, results, time.perf_counter() - started)
    return folder


def _num(value: Any) -> float | None:
    return None if value is None else float(value)
