"""A production-shaped cotrain deployment on localhost, as separate processes.

Three sites with mixed learners — XGBoost that keeps boosting across rounds
(``learners.XGBoostClassifier``), a torch MLP that keeps training
(``learners.TorchClassifier``) and a scikit-learn logistic regression — each with its own
private data, its own evaluation data and record-level privacy applied at the site
(``cotrain.privacy.SubsampleAndAggregate``, the same mechanism in every ``site.toml`` and
in the run config). A SuperLink serving over TLS and three SuperNodes that authenticate
with registered keys run as separate processes
(:class:`cotrain.flower.local.localhost.LocalFederation` with ``tls=True, auth=True``); the
Flower app in this folder runs with ``flwr run``. The script then prints the history
and the privacy report.

The data is scikit-learn's breast-cancer set (no download): 100 rows form the public
pool, 360 are split over the three sites (120 each) and the remaining 109 are split
into the sites' own evaluation sets.

Run (about a minute for 3 rounds on 2 cores)::

    python examples/flower/production.py --out /tmp/cotrain-production --rounds 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.utils import Bunch

from cotrain.flower.local.localhost import LocalFederation
from cotrain.flower.site import mechanism_from_spec, write_site

APP = Path(__file__).resolve().parent

#: the run's record-level mechanism, as every site.toml and the run config declare it:
#: each round a site splits its rows over 30 disjoint teachers and releases the argmax of
#: their vote counts plus N(0, 30²) noise (Gaussian mechanism, noise multiplier
#: 30 / sqrt(2 · 100) for a public pool of 100 rows). ``budget``: each site's ledger refuses
#: the release that would take one of its private records past ε = 8 against the server,
#: over every run its folder answers (a 3-round run spends 3.47; without a budget a deployed
#: site stops at ε = 10, ``DEFAULT_SITE_BUDGET``)
PRIVACY: dict[str, Any] = {
    "class": "cotrain.privacy.SubsampleAndAggregate",
    "params": {"n_teachers": 30, "sigma": 30.0, "budget": 8.0},
}

#: the label space (breast cancer: malignant 0, benign 1): public configuration, declared by
#: every private site.toml and the run config, never taken from the sites' private labels
CLASSES = [0, 1]

#: what each ε unit protects, in words
UNIT_WORDS = {"record": "one private record", "label": "one released label"}


def production_data(n_public: int = 100, n_labeled: int = 360, random_state: int = 0) -> Bunch:
    """Breast cancer cut into a public pool, three sites' private data and their eval sets.

    Rows are shuffled with ``random_state``, then the first ``n_public`` form the public
    pool, the next ``n_labeled`` are split evenly over three sites, and the rest are split
    into three evaluation sets (one per site, never trained on). Features are standardised
    with the public pool's mean and standard deviation (public information).

    Returns
    -------
    Bunch
        ``X_clients``, ``y_clients``, ``eval_sets`` (lists of three), ``X_public``,
        ``y_public`` (the hidden truth, for checking only).

    Examples
    --------
    >>> data = production_data()
    >>> data.X_public.shape, [len(y) for y in data.y_clients], [len(e[1]) for e in data.eval_sets]
    ((100, 30), [120, 120, 120], [37, 36, 36])
    """
    X, y = load_breast_cancer(return_X_y=True)
    if n_public < 1 or n_labeled < 3 or n_public + n_labeled + 3 > len(y):
        raise ValueError(
            f"n_public={n_public} and n_labeled={n_labeled} must leave at least 3 of the "
            f"{len(y)} rows for evaluation (n_public >= 1, n_labeled >= 3)"
        )
    order = np.random.default_rng(random_state).permutation(len(y))
    X, y = X[order], y[order]
    public = slice(0, n_public)
    X = (X - X[public].mean(axis=0)) / X[public].std(axis=0)
    labeled = np.array_split(np.arange(n_public, n_public + n_labeled), 3)
    held_out = np.array_split(np.arange(n_public + n_labeled, len(y)), 3)
    return Bunch(
        X_clients=[X[p] for p in labeled],
        y_clients=[y[p] for p in labeled],
        eval_sets=[(X[p], y[p]) for p in held_out],
        X_public=X[public],
        y_public=y[public],
    )


def production_learners() -> list[Any]:
    """The sites' learners: XGBoost (continues boosting), a torch MLP (continues training)
    and a logistic regression (refits every round).

    Examples
    --------
    >>> from learners import continues_training
    >>> [continues_training(est) for est in production_learners()]
    [True, True, False]
    """
    from learners import TorchClassifier, XGBoostClassifier

    return [
        XGBoostClassifier(n_estimators=10, continue_rounds=5, max_depth=3),
        TorchClassifier(module_params={"hidden": [16]}, max_epochs=20, lr=0.01, n_threads=1),
        LogisticRegression(max_iter=500),
    ]


def production_privacy() -> Any:
    """The run's mechanism (:data:`PRIVACY`) as an object.

    Examples
    --------
    >>> production_privacy().n_teachers
    30
    """
    return mechanism_from_spec(PRIVACY, "PRIVACY")


def write_production_sites(
    out: str | Path,
    data: Bunch,
    learners: list[Any],
    privacy: Any = None,
    evaluate: bool = True,
) -> tuple[list[Path], Path]:
    """Write ``out/site-<i>/site.toml`` for every site and ``out/public.npy`` (the server's pool).

    Each site gets its private data, its copy of the public pool, its learner, its own
    evaluation data (``evaluate``) and the privacy mechanism (``privacy``).

    Returns
    -------
    (list of Path, Path)
        The ``site.toml`` files and the server's public pool.

    Examples
    --------
    >>> import tempfile
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> data = production_data()
    >>> paths, pool = write_production_sites(tempfile.mkdtemp(), data,
    ...                                      [DecisionTreeClassifier()] * 3)
    >>> [p.parent.name for p in paths], pool.name
    (['site-0', 'site-1', 'site-2'], 'public.npy')
    """
    if len(learners) != len(data.X_clients):
        raise ValueError(
            f"learners must have one entry per site ({len(data.X_clients)}), got {len(learners)}"
        )
    out = Path(out).resolve()
    paths = [
        write_site(
            out / f"site-{i}",
            data.X_clients[i],
            data.y_clients[i],
            data.X_public,
            learner,
            client_id=i,
            eval_set=data.eval_sets[i] if evaluate else None,
            privacy=privacy,
            classes=None if privacy is None else CLASSES,
        )
        for i, learner in enumerate(learners)
    ]
    np.save(out / "public.npy", data.X_public)
    return paths, out / "public.npy"


def run_config(
    public_pool: str | Path,
    output_dir: str | Path,
    rounds: int,
    privacy: dict[str, Any] | None = None,
    random_state: int = 0,
) -> dict[str, Any]:
    """The ``--run-config`` overrides of the run (``privacy`` as the app's JSON spec).

    Examples
    --------
    >>> json.loads(run_config("/p.npy", "/out", 3, PRIVACY)["privacy"])["params"]
    {'n_teachers': 30, 'sigma': 30.0, 'budget': 8.0}
    """
    config: dict[str, Any] = {
        "public-pool": str(public_pool),
        "output-dir": str(output_dir),
        "rounds": int(rounds),
        "min-nodes": 3,
        "random-state": int(random_state),
    }
    if privacy is not None:  # the label space is public configuration with it
        config["privacy"] = json.dumps(privacy)
        config["classes"] = json.dumps(CLASSES)
    return config


def history_table(history: Any) -> str:
    """The run's ``history.csv`` (a DataFrame) as a fixed-width table, one line per round.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"round": [1, 2], "n_clients": [3, 3], "changed": [None, 27],
    ...     "bytes_up": [69, 69], "bytes_down": [0, 105], "epsilon": [1.8664, 2.7534]})
    >>> print(history_table(frame))
    round  sites  changed  bytes up  bytes down  epsilon
        1      3        -        69           0    1.866
        2      3       27        69         105    2.753
    """
    columns = [
        ("round", "round", "{:d}"),
        ("sites", "n_clients", "{:d}"),
        ("failed", "n_failed", "{:d}"),
        ("timed out", "n_timed_out", "{:d}"),
        ("coverage", "coverage", "{:.2f}"),
        ("agreement", "agreement", "{:.2f}"),
        ("changed", "changed", "{:.0f}"),
        ("bytes up", "bytes_up", "{:d}"),
        ("bytes down", "bytes_down", "{:d}"),
        ("mean acc.", "mean_accuracy", "{:.3f}"),
        ("epsilon", "epsilon", "{:.3f}"),
        ("time s", "time_s", "{:.2f}"),
    ]
    columns = [c for c in columns if c[1] in history.columns and history[c[1]].notna().any()]
    rows = [[title for title, _, _ in columns]]
    for _, record in history.iterrows():
        rows.append([_cell(record[key], fmt) for _, key, fmt in columns])
    widths = [max(len(row[j]) for row in rows) for j in range(len(columns))]
    return "\n".join(
        "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    )


def _cell(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return fmt.format(int(value) if fmt == "{:d}" else float(value))


def privacy_lines(report: dict[str, Any]) -> list[str]:
    """The privacy report (``privacy.json``) in words: every ε with its unit, relation and
    adversary, the ε each site's own ledger reports, and the replace-one ε where it differs.

    Examples
    --------
    >>> report = {"mechanisms": ["M()"], "guarantees": [{"unit": "record",
    ...     "adversary": "server", "protects": "ε protects one private training record "
    ...     "of a client against the server", "clients": [{"client": 0, "rounds": 2,
    ...     "epsilon": 2.75338, "delta": 1e-05, "site_epsilon": 2.75338,
    ...     "epsilon_by_relation": {"add_or_remove": 2.75338, "replace_one": 6.1}}],
    ...     "max_epsilon": 2.75338, "delta": 1e-05, "relation": "add_or_remove"}]}
    >>> print("\\n".join(privacy_lines(report)))  # doctest: +NORMALIZE_WHITESPACE
    mechanism: M()
    guarantee: ε protects one private training record of a client against the server
      site 0 after 2 rounds: ε = 2.7534, δ = 1e-05 (one private record, against the
      server, add_or_remove; replace-one 6.1000); its own ledger: 2.7534
      largest: ε = 2.7534, δ = 1e-05 (one private record, against the server, add_or_remove)
    """
    lines = [f"mechanism: {m}" for m in report.get("mechanisms", [])]
    for guarantee in report["guarantees"]:
        unit = UNIT_WORDS.get(guarantee["unit"], guarantee["unit"])
        relation = guarantee.get("relation")
        who = f"{unit}, against the {guarantee['adversary']}" + (
            f", {relation}" if relation else ""
        )
        lines.append(f"guarantee: {guarantee['protects']}")
        for c in guarantee["clients"]:
            rounds = f"{c['rounds']} round{'s' * (c['rounds'] != 1)}"
            other = (c.get("epsilon_by_relation") or {}).get("replace_one")
            extra = (
                f"; replace-one {other:.4f}"
                if other is not None and relation != "replace_one" and other != c["epsilon"]
                else ""
            )
            own = c.get("site_epsilon")
            mine = "" if own is None else f"; its own ledger: {own:.4f}"
            lines.append(
                f"  site {c['client']} after {rounds}: ε = {c['epsilon']:.4f}, "
                f"δ = {c['delta']:g} ({who}{extra}){mine}"
            )
        lines.append(
            f"  largest: ε = {guarantee['max_epsilon']:.4f}, δ = {guarantee['delta']:g} ({who})"
        )
    return lines


def undeclared_keys(app: str | Path, keys: Any) -> list[str]:
    """The ``keys`` that the Flower app at ``app`` does not declare in its run config.

    ``flwr run --run-config`` accepts only keys declared in ``[tool.flwr.app.config]``
    of the app's ``pyproject.toml``; the SuperLink refuses a run with any other.

    Examples
    --------
    >>> undeclared_keys(APP, ["rounds", "public-pool"])
    []
    """
    with (Path(app) / "pyproject.toml").open("rb") as f:
        declared = tomllib.load(f).get("tool", {}).get("flwr", {}).get("app", {}).get("config", {})
    return [key for key in keys if key not in declared]


def deploy(
    site_paths: list[Path],
    config: dict[str, Any],
    home: str | Path,
    secure: bool = True,
    timeout: float = 600,
    app: str | Path = APP,
) -> tuple[Any, str]:
    """Start a SuperLink and one SuperNode per site, run the app once, stop everything.

    With ``secure`` the SuperLink serves over TLS and accepts only SuperNodes whose
    public keys were registered (``LocalFederation(tls=True, auth=True)``). ``app`` is
    the Flower app to run (default: the cotrain app in this folder).

    Returns
    -------
    (subprocess.CompletedProcess, str)
        ``flwr run``'s result and a line describing the federation.

    Examples
    --------
    >>> deploy([], {}, "/tmp/nowhere", timeout=0)
    Traceback (most recent call last):
    ...
    ValueError: deploy needs at least one site
    """
    if not site_paths:
        raise ValueError("deploy needs at least one site")
    configs = [{"site": str(p)} for p in site_paths]
    federation = LocalFederation(home, len(configs), configs, tls=secure, auth=secure)
    with federation:
        if secure:
            about = (
                f"SuperLink on {federation.superlink_address} over TLS (CA "
                f"{federation.ca_certificate}); {len(configs)} SuperNodes authenticated by "
                f"their registered keys, node ids {sorted(federation.registered_node_ids)}"
            )
        else:
            about = f"SuperLink on {federation.superlink_address}, insecure (no TLS, no auth)"
        done = federation.run(app, config, timeout=timeout)
    return done, about


def main(argv: list[str] | None = None) -> int:
    """Write the sites, deploy them, run the app and print the history and privacy report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the sites, logs and results")
    parser.add_argument("--rounds", type=int, default=3, help="co-training rounds (default 3)")
    parser.add_argument(
        "--random-state", type=int, default=0, help="seed of the data split and the run (default 0)"
    )
    parser.add_argument(
        "--insecure", action="store_true", help="no TLS and no SuperNode authentication"
    )
    parser.add_argument(
        "--app", default=str(APP), help="the Flower app to run (default: the one in this folder)"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    missing = undeclared_keys(args.app, ["privacy", "classes"])
    if missing:
        print(
            f"the Flower app {args.app} does not declare the run config key(s) {missing} in "
            f"[tool.flwr.app.config] of its pyproject.toml, so `flwr run` would refuse the "
            f'run; add privacy = "" and classes = "" there',
            file=sys.stderr,
        )
        return 2
    out = Path(args.out).resolve()
    results = out / "results"

    data = production_data(random_state=args.random_state)
    learners = production_learners()
    paths, pool = write_production_sites(out / "sites", data, learners, production_privacy())
    for i, (path, learner) in enumerate(zip(paths, learners, strict=True)):
        print(
            f"site {i}: {type(learner).__name__}, {len(data.y_clients[i])} private rows, "
            f"{len(data.eval_sets[i][1])} evaluation rows ({path})"
        )
    print(f"public pool: {len(data.X_public)} rows ({pool})")
    config = run_config(pool, results, args.rounds, PRIVACY, args.random_state)
    started = time.perf_counter()
    done, about = deploy(paths, config, out / "federation", secure=not args.insecure, app=args.app)
    print(about)
    if done.returncode != 0 or not (results / "history.csv").exists():
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
        print(f"the run failed (flwr run exit code {done.returncode})", file=sys.stderr)
        return 1
    print(f"run finished in {time.perf_counter() - started:.1f} s; results in {results}\n")
    _report(results, data)
    return 0


def _report(results: Path, data: Bunch) -> None:
    import pandas as pd

    history = pd.read_csv(results / "history.csv")
    summary = json.loads((results / "summary.json").read_text())
    report = json.loads((results / "privacy.json").read_text())
    codes = np.load(results / "consensus_codes.npy")[-1]
    print("History (ε after the round, per private record against the server; a private")
    print("site reports no accuracy):")
    print(history_table(history))
    print(f"learners: {summary['learners']}; refused: {summary['refused'] or 'none'}")
    known = codes >= 0
    print(
        f"consensus on the public pool agrees with its hidden labels on "
        f"{np.mean(codes[known] == data.y_public[known]):.3f} of {int(known.sum())} labelled rows"
    )
    print("\nPrivacy report (privacy.json):")
    print("\n".join(privacy_lines(report)))
    print("The ε covers the labels each site uploads. Outside it: each site's own model (it")
    print("never leaves the site), and whether and when a site answers. A private site sends")
    print("nothing else (cotrain.flower.transcript lists every field it may send).")


if __name__ == "__main__":
    sys.exit(main())
