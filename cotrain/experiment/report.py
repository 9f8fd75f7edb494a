"""Summaries of a results folder (``summary.csv``, ``summary.md``, ``accuracy.png``) and
``cotrain report``: results folders and published tables side by side, in one table.

``accuracy.png`` draws every variant that ran several rounds (FedCT, DD, FedAvg, ...) as
its mean curve over the seeds (with a ±1 std band when there are several seeds), and
every variant that ran one round (local-only, centralised, PATE) as a dashed horizontal
reference line at its mean accuracy, named in the legend. Round ticks are integers. The
y-axis spans at least :data:`MIN_ACCURACY_SPAN` (0.1) of accuracy, centred on the data
and kept inside [0, 1], so a 0.007 difference fills at most 7 % of the height instead of
all of it; data spread wider than that get a 10 % margin on each side
(:func:`accuracy_limits`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cotrain.experiment.config import slug
from cotrain.experiment.errors import ExperimentError
from cotrain.experiment.methods import METHODS
from cotrain.experiment.published import read_summary_markdown

__all__ = [
    "MIN_ACCURACY_SPAN",
    "accuracy_figure",
    "accuracy_limits",
    "client_means",
    "client_table",
    "local_variant",
    "markdown_table",
    "report",
    "write_summary",
]


def write_summary(folder: Path, config: dict[str, Any], results: list[dict], wall: float) -> None:
    """``summary.csv``, ``summary.md`` and ``accuracy.png`` of a results folder.

    ``summary.md`` holds the results table (:func:`markdown_table`: the accuracy of the
    model each method delivers, for FedCT the mean over its clients), then, where the
    runs recorded them, a per-client table (:func:`client_table`: each client's own
    model, with its learner).

    Parameters
    ----------
    folder : Path
        The results folder; ``accuracy.png`` reads its ``runs/*/seed-*/history.csv``.
    config : dict
        The experiment file as read (its ``name``, ``description`` and ``seeds``).
    results : list of dict
        The ``result.json`` of every run: one summary row per variant, in their order.
    wall : float
        The seconds the runs took, for the header.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> run = folder / "runs" / "local" / "seed-0"
    >>> run.mkdir(parents=True)
    >>> _ = (run / "history.csv").write_text("round,mean_accuracy\\n1,0.8\\n")
    >>> result = {"variant": "local", "method": "local", "accuracy": 0.8,
    ...           "consensus_accuracy": 0.7, "paper": None, "wall_s": 1.0}
    >>> write_summary(folder, {"name": "x", "seeds": [0]}, [result], wall=1.0)
    >>> open(folder / "summary.csv").readline().strip()
    'variant,method,seeds,accuracy,accuracy_std,consensus_accuracy,paper,wall_s'
    >>> sorted(p.name for p in folder.iterdir())
    ['accuracy.png', 'runs', 'summary.csv', 'summary.md']
    """
    import pandas as pd

    frame = pd.DataFrame(results)
    order = list(dict.fromkeys(frame["variant"]))
    clients = client_means(results)
    rows = []
    for variant in order:
        part = frame[frame["variant"] == variant]
        row = {
            "variant": variant,
            "method": part["method"].iloc[0],
            "seeds": len(part),
            "accuracy": part["accuracy"].mean(),
            "accuracy_std": part["accuracy"].std(ddof=0),
            "consensus_accuracy": part["consensus_accuracy"].mean(),
            "paper": part["paper"].iloc[0],
            "wall_s": part["wall_s"].sum(),
        }
        for extra in EXTRA_COLUMNS:
            if extra in part and part[extra].notna().any():
                row[extra] = part[extra].mean()
        if "epsilon_adversary" in part and part["epsilon_adversary"].notna().any():
            row["epsilon_adversary"] = part["epsilon_adversary"].dropna().iloc[0]
        if "noise_replayable" in part and (part["noise_replayable"] == True).any():  # noqa: E712
            row["noise_replayable"] = True  # [method] reproducible_noise: seeded from the seed
        for i, values in sorted(clients.get(variant, {}).items()):
            row[f"client_{i}_accuracy"] = float(np.mean(values))
        rows.append(row)
    summary = pd.DataFrame(rows)
    summary.to_csv(folder / "summary.csv", index=False)
    lines = [
        f"# {config['name']}",
        "",
        config.get("description", ""),
        "",
        f"seeds {config['seeds']}; total run time {wall:.0f} s",
        "",
        markdown_table(summary, paper_dataset=config.get("paper_dataset")),
    ]
    settings = settings_lines(frame, order)
    if settings:
        lines += ["", "## Trust and consensus", "", SETTINGS_NOTE, "", *settings]
    table = client_table(results)
    if table:
        lines += ["", "## Per client", "", CLIENT_TABLE_NOTE, "", table]
    (folder / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(folder, summary)


#: the text of ``summary.md`` above the list of each variant's trust and consensus
SETTINGS_NOTE = (
    "The runner's FedCT is the paper's, full trust in the pseudo-labels (trust = \"none\") "
    "and a majority vote, unless [method] sets trust or consensus. Python's "
    'FederatedCoTrainer defaults to trust="auto" and consensus="auto" (cross-fitted '
    'trust, Dawid-Skene without privacy): set both to "auto" in [method] to run those.'
)


def settings_lines(frame: Any, order: list[str]) -> list[str]:
    """One line per co-training variant: the trust and consensus its runs used.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame([
    ...     {"variant": "FedCT", "trust": "none", "consensus": "MajorityVote"},
    ...     {"variant": "local"}])
    >>> settings_lines(frame, ["FedCT", "local"])
    ['- FedCT: trust none, consensus MajorityVote']
    """
    if "consensus" not in frame:
        return []
    lines = []
    for variant in order:
        part = frame[(frame["variant"] == variant) & frame["consensus"].notna()]
        if len(part):
            trust, consensus = part["trust"].iloc[0], part["consensus"].iloc[0]
            lines.append(f"- {variant}: trust {trust}, consensus {consensus}")
    return lines


#: the text of ``summary.md`` above the per-client table
CLIENT_TABLE_NOTE = (
    "Test accuracy of each client's own model after the last round, mean ± std over the "
    "seeds, with the client's learner; the table above shows their mean (or the one model "
    "a method delivers). — : no such client in that variant. With a variant of method "
    '"local" (each client alone), ▼ marks a client below its own local model. '
    "summary.csv has the same means as client_<i>_accuracy."
)


def client_means(results: list[dict[str, Any]]) -> dict[str, dict[int, list[float]]]:
    """Each variant's client accuracies over the seeds: ``{variant: {client: [acc, ...]}}``.

    Runs without a ``client_accuracy`` (a method that delivers one model, or results
    written before it was recorded) are left out.

    Examples
    --------
    >>> client_means([{"variant": "a", "client_accuracy": {"0": 0.9, "1": None}}])
    {'a': {0: [0.9]}}
    """
    per_variant: dict[str, dict[int, list[float]]] = {}
    for result in results:
        accuracy = result.get("client_accuracy") or {}
        if not accuracy:
            continue
        cells = per_variant.setdefault(str(result["variant"]), {})
        for client, value in accuracy.items():
            if value is not None:
                cells.setdefault(int(client), []).append(float(value))
    return per_variant


def local_variant(results: list[dict[str, Any]]) -> str | None:
    """The first variant of ``method = "local"`` with client accuracies: every client's
    model trained on its own rows alone, the reference a site's gain is read against."""
    means = client_means(results)
    for result in results:
        if result.get("method") == "local" and means.get(str(result["variant"])):
            return str(result["variant"])
    return None


def client_table(results: list[dict[str, Any]]) -> str:
    """The per-client table of ``summary.md``: a row per variant, a column per client.

    Where the experiment has a ``local`` variant (:func:`local_variant`), a client that
    ends below its own local model is marked with the difference (``▼ -0.030 vs local``),
    and the table is followed by a line naming every such client.

    Parameters
    ----------
    results : list of dict
        The ``result.json`` of every run; those with a ``client_accuracy`` (by client
        index) count (:func:`client_means`).

    Returns
    -------
    str
        The Markdown table; empty when no run recorded its clients.

    Examples
    --------
    >>> runs = [{"variant": "FedCT", "client_accuracy": {"0": 0.90, "1": 0.80},
    ...          "client_learners": ["DT", "NB"]},
    ...         {"variant": "FedCT", "client_accuracy": {"0": 0.92, "1": 0.82},
    ...          "client_learners": ["DT", "NB"]},
    ...         {"variant": "alone", "method": "local",
    ...          "client_accuracy": {"0": 0.85, "1": 0.83}, "client_learners": ["DT", "NB"]}]
    >>> print(client_table(runs))
    | variant | client 0 | client 1 |
    | --- | --- | --- |
    | FedCT | 0.910 ± 0.010 (DT) | 0.810 ± 0.010 (NB) ▼ -0.020 vs local |
    | alone | 0.850 (DT) | 0.830 (NB) |
    <BLANKLINE>
    Below their local model (variant alone): FedCT client 1 (-0.020).
    """
    per_variant = client_means(results)
    learners: dict[str, list[str]] = {}
    for result in results:
        if result.get("client_accuracy"):
            learners.setdefault(str(result["variant"]), list(result.get("client_learners") or []))
    if not per_variant:
        return ""
    local = local_variant(results)
    reference = {i: float(np.mean(v)) for i, v in per_variant.get(local or "", {}).items()}
    width = 1 + max(max(cells) for cells in per_variant.values() if cells)
    lines = [
        "| variant | " + " | ".join(f"client {i}" for i in range(width)) + " |",
        "|" + " --- |" * (width + 1),
    ]
    worse = []
    for variant, cells in per_variant.items():
        names = learners[variant]
        row = [variant.replace("|", "\\|")]
        for i in range(width):
            values = cells.get(i)
            if not values:
                row.append("—")
                continue
            text = f"{np.mean(values):.3f}"
            text += f" ± {np.std(values):.3f}" if len(values) > 1 else ""
            text += f" ({names[i]})" if i < len(names) else ""
            gap = float(np.mean(values)) - reference.get(i, -np.inf)
            if variant != local and gap < 0:
                text += f" ▼ {gap:.3f} vs local"
                worse.append(f"{variant} client {i} ({gap:.3f})")
            row.append(text)
        lines.append("| " + " | ".join(row) + " |")
    if local is not None:
        found = ", ".join(worse) if worse else "none"
        lines += ["", f"Below their local model (variant {local}): {found}."]
    return "\n".join(lines)


#: the summary column of each ε unit (see ``RoundRecord.epsilon_unit``)
EPSILON_COLUMNS = {"record": "epsilon", "label": "label_epsilon", "client": "client_epsilon"}

#: optional summary columns and their table headings; ε of different units stay apart
EXTRA_COLUMNS = {
    "vul": "vul",
    "epsilon": "ε per private record (add/remove)",
    "label_epsilon": "ε per released label (no record guarantee)",
    "client_epsilon": "ε per client (all its data)",
}


def _cell(row: Any, column: str) -> str:
    """A number of the table; an ε says against whom when it is not the server."""
    value = row[column]
    if np.isnan(value):
        return "—"
    text = f"{value:.3f}"
    against = row.get("epsilon_adversary") if column in EPSILON_COLUMNS.values() else None
    if isinstance(against, str) and against != "server":
        text += f" (vs {against})"
    if column in EPSILON_COLUMNS.values() and row.get("noise_replayable") in (True, 1.0):
        text += " (noise replayable from the run's seed: no guarantee against who knows it)"
    return text


def markdown_table(summary: Any, paper_dataset: str | None = None) -> str:
    """Mean ± std accuracy per variant, with the paper's number and the gap.

    Parameters
    ----------
    summary : DataFrame
        The rows of a ``summary.csv``.
    paper_dataset : str, optional
        The dataset of the paper's numbers where it is not the one run (the experiment
        file's ``paper_dataset``): the columns then read ``paper (<dataset>)`` and
        ``gap (shape only)``, which ``cotrain report`` also reads.

    Examples
    --------
    >>> import pandas as pd
    >>> row = {"variant": "5xDT", "method": "fedct", "accuracy": 0.9, "accuracy_std": 0.01,
    ...        "consensus_accuracy": 0.91, "paper": 0.89, "wall_s": 12.0}
    >>> print(markdown_table(pd.DataFrame([row])))
    | variant | method | accuracy | consensus | paper | gap | time s (all seeds) |
    | --- | --- | --- | --- | --- | --- | --- |
    | 5xDT | fedct | 0.900 ± 0.010 | 0.910 | 0.890 | +0.010 | 12 |
    >>> head = markdown_table(pd.DataFrame([row]), paper_dataset="FashionMNIST").splitlines()[0]
    >>> head.split(" | ")[4:6]
    ['paper (FashionMNIST)', 'gap (shape only)']
    """
    has = [c for c in EXTRA_COLUMNS if c in summary]
    paper_head = f"paper ({paper_dataset}) | gap (shape only)" if paper_dataset else "paper | gap"
    head = f"| variant | method | accuracy | consensus | {paper_head} |"
    head += "".join(f" {EXTRA_COLUMNS[c]} |" for c in has) + " time s (all seeds) |"
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for _, r in summary.iterrows():
        paper = r["paper"]
        has_paper = paper is not None and not (isinstance(paper, float) and np.isnan(paper))
        gap = _signed(r["accuracy"] - paper) if has_paper else "—"
        cells = [
            str(r["variant"]).replace("|", "\\|"),
            str(r["method"]),
            f"{r['accuracy']:.3f} ± {r['accuracy_std']:.3f}",
            "—" if np.isnan(r["consensus_accuracy"]) else f"{r['consensus_accuracy']:.3f}",
            f"{paper:.3f}" if has_paper else "—",
            gap,
            *(_cell(r, c) for c in has),
            f"{r['wall_s']:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: the least accuracy range the y-axis of ``accuracy.png`` spans (see :func:`accuracy_limits`)
MIN_ACCURACY_SPAN = 0.1
#: methods that fit once: their single-round variants are named "one-shot" in the legend
ONE_SHOT = ("local", "centralized", "centralised", "pate")  # and the old name, in old summaries


def accuracy_limits(
    values: Any, min_span: float = MIN_ACCURACY_SPAN, margin: float = 0.1
) -> tuple[float, float]:
    """The y-limits of an accuracy plot: at least ``min_span`` wide, inside [0, 1].

    The range is centred on the data. Data spread wider than ``min_span`` get ``margin``
    of their spread on each side; narrower data get ``min_span``, so a small difference
    (0.007) is drawn as small. A range that would leave [0, 1] is shifted back into it.

    Parameters
    ----------
    values : array-like
        The accuracies drawn; NaN is ignored.
    min_span : float
        The least width of the range.
    margin : float
        The share of the data's spread added above and below it.

    Returns
    -------
    (bottom, top) : tuple of float

    Examples
    --------
    >>> [round(v, 4) for v in accuracy_limits([0.841, 0.848])]  # 0.007 apart: 0.1 wide
    [0.7945, 0.8945]
    >>> [round(v, 4) for v in accuracy_limits([0.5, 0.9])]  # wide data: 10 % margins
    [0.46, 0.94]
    >>> accuracy_limits([0.97, 0.99])  # kept inside [0, 1]
    (0.9, 1.0)
    >>> accuracy_limits([])
    (0.0, 1.0)
    """
    data = np.asarray(values, dtype=float).ravel()
    data = data[np.isfinite(data)]
    if data.size == 0:
        return 0.0, 1.0
    low, high = float(data.min()), float(data.max())
    span = min(1.0, max(min_span, (high - low) * (1 + 2 * margin)))
    bottom = (low + high - span) / 2
    bottom = min(max(bottom, 0.0), 1.0 - span)
    return bottom, bottom + span


def _curves(folder: Path, variant: str, method: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """The rounds and each seed's accuracy per round of one variant (as long as the shortest)."""
    import pandas as pd

    column = METHODS[method].accuracy if method in METHODS else "mean_accuracy"
    frames = [
        pd.read_csv(h) for h in sorted((folder / "runs" / slug(variant)).glob("seed-*/history.csv"))
    ]
    frames = [f for f in frames if column in f and len(f)]
    if not frames:
        return np.arange(0), []
    length = min(len(f) for f in frames)
    first = frames[0]
    rounds = first["round"] if "round" in first else np.arange(1, len(first) + 1)
    curves = [f[column].to_numpy(dtype=float)[:length] for f in frames]
    return np.asarray(rounds, dtype=float)[:length], curves


def accuracy_figure(folder: str | Path, summary: Any) -> Any:
    """The figure of ``accuracy.png``: curves over rounds and one-shot reference lines.

    Parameters
    ----------
    folder : str or Path
        The results folder; the curves come from its ``runs/*/seed-*/history.csv``.
    summary : DataFrame
        The rows of its ``summary.csv`` (``variant``, ``method``, ``accuracy``): one line
        per row, in their order. A variant whose runs recorded one round is a dashed
        horizontal line at its summary accuracy; the others are mean curves over seeds.

    Returns
    -------
    matplotlib.figure.Figure
        Not saved and not closed (``matplotlib.pyplot.close(fig)`` when done).

    Raises
    ------
    ImportError
        matplotlib is not installed (the ``plot`` extra).

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> folder = Path(tempfile.mkdtemp())
    >>> run = folder / "runs" / "FedCT" / "seed-0"
    >>> run.mkdir(parents=True)
    >>> _ = (run / "history.csv").write_text("round,mean_accuracy\\n1,0.80\\n2,0.84\\n3,0.85\\n")
    >>> summary = pd.DataFrame({"variant": ["FedCT", "local"], "method": ["fedct", "local"],
    ...                         "accuracy": [0.85, 0.78]})
    >>> fig = accuracy_figure(folder, summary)
    >>> ax = fig.axes[0]
    >>> [line.get_label() for line in ax.lines]
    ['FedCT', 'local (one-shot)']
    >>> [float(t) for t in ax.get_xticks() if 1 <= t <= 3]
    [1.0, 2.0, 3.0]
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    folder = Path(folder)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    colours = plt.get_cmap("tab10" if len(summary) <= 10 else "tab20")
    ncolours = 10 if len(summary) <= 10 else 20
    drawn: list[float] = []
    last_round = 0.0
    for index, row in enumerate(summary.itertuples(index=False)):
        variant, method = str(row.variant), str(row.method)
        colour = colours(index % ncolours)
        style = ("-", "-.", ":")[index // ncolours % 3]
        rounds, curves = _curves(folder, variant, method)
        if len(rounds) > 1:
            mean = np.mean(curves, axis=0)
            ax.plot(rounds, mean, style, color=colour, marker=".", label=variant)
            if len(curves) > 1:
                std = np.std(curves, axis=0)
                ax.fill_between(rounds, mean - std, mean + std, color=colour, alpha=0.15, lw=0)
            drawn += list(mean)
            last_round = max(last_round, float(rounds[-1]))
        elif np.isfinite(float(row.accuracy)):
            suffix = "one-shot" if method in ONE_SHOT else "one round"
            ax.axhline(
                float(row.accuracy), color=colour, ls="--", lw=1.2, label=f"{variant} ({suffix})"
            )
            drawn.append(float(row.accuracy))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if last_round > 1:
        ax.set_xlim(1, last_round)
        ax.set_xlabel("round")
    else:
        ax.set_xticks([])
        ax.set_xlabel("(one-shot methods only: no rounds)")
    ax.set_ylim(*accuracy_limits(drawn))
    ax.set_ylabel("test accuracy (mean over seeds)")
    ax.grid(True, alpha=0.3)
    if ax.lines:
        # outside the axes, so it never hides a line
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def _plot(folder: Path, summary: Any) -> None:
    """Write ``accuracy.png`` (nothing without matplotlib)."""
    try:
        fig = accuracy_figure(folder, summary)
    except ImportError:
        return
    import matplotlib.pyplot as plt

    fig.savefig(folder / "accuracy.png", dpi=100, bbox_inches="tight")
    plt.close(fig)


def _source(path: Path) -> tuple[str, list[dict[str, Any]]]:
    """The column name and the rows of one ``cotrain report`` argument."""
    import pandas as pd

    if not path.exists():
        raise ExperimentError(f"{path}: no such results folder or file")
    if path.is_dir() or path.name == "summary.csv":
        summary_file = path / "summary.csv" if path.is_dir() else path
        if not summary_file.is_file():
            raise ExperimentError(
                f"{path} has no summary.csv: is it a `cotrain run` results folder?"
            )
        frame = pd.read_csv(summary_file)
        frame["paper"] = frame["paper"].astype(float) if "paper" in frame else np.nan
        if "accuracy_std" not in frame:
            frame["accuracy_std"] = np.nan
        columns = ["variant", "method", "accuracy", "accuracy_std", "paper"]
        rows = frame[columns].to_dict("records")
        return (path.name if path.is_dir() else path.parent.name), rows
    if path.suffix.lower() == ".md":
        rows = read_summary_markdown(path)
        return (path.parent.name if path.name == "summary.md" else path.name), rows
    raise ExperimentError(
        f"{path} is neither a results folder of `cotrain run` (with summary.csv) nor a "
        "Markdown results table such as docs/results/<name>.md"
    )


def _labels(paths: list[Path], names: list[str]) -> list[str]:
    """Column names: a name shared by several sources becomes their path, then path #n."""
    labels = [
        name if names.count(name) == 1 else str(path)
        for path, name in zip(paths, names, strict=True)
    ]
    return [
        label if labels.count(label) == 1 else f"{label} #{index}"
        for index, label in enumerate(labels, start=1)
    ]


def _signed(difference: float) -> str:
    """``+0.012``; a difference that rounds to nothing is ``0.000``, never ``-0.000``."""
    text = f"{difference:+.3f}"
    return "0.000" if text in ("+0.000", "-0.000") else text


def _accuracy_cell(row: dict[str, Any] | None) -> str:
    if row is None or not np.isfinite(row["accuracy"]):
        return "—"
    std = row["accuracy_std"]
    return f"{row['accuracy']:.3f}" + (f" ± {std:.3f}" if np.isfinite(std) else "")


def report(folders: list[str | Path]) -> str:
    """Results folders and published tables side by side: one table, a column per source.

    A row per (variant, method), in the order they first appear; a cell is the mean ±
    std accuracy over the seeds, ``—`` where that source has no such row. With exactly two
    sources a difference column (first − second) follows; a ``paper`` column follows
    where a source has the paper's number (the first source that has it). The full table
    of one folder (consensus, time, ε) is its ``summary.md``.

    Parameters
    ----------
    folders : list of str or Path
        Results folders written by ``cotrain run`` (or their ``summary.csv``), and
        Markdown files holding a results table: a published ``docs/results/<name>.md``
        or a folder's ``summary.md``. A folder's column is named after the folder, a
        Markdown file's after the file (``table3_adult.md``); sources with the same name
        are named by their path.

    Returns
    -------
    str
        The Markdown table, a blank line and a line saying which path each column is.

    Raises
    ------
    ExperimentError
        No source, a folder without ``summary.csv``, or a file without a results table.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> folder = root / "table3"
    >>> folder.mkdir()
    >>> _ = (folder / "summary.csv").write_text(
    ...     "variant,method,seeds,accuracy,accuracy_std,consensus_accuracy,paper,wall_s\\n"
    ...     "5xDT,fedct,5,0.9,0.01,0.91,0.89,12\\n"
    ...     "local,local,5,0.8,0.02,0.85,,1\\n")
    >>> published = root / "table3_adult.md"
    >>> _ = published.write_text(
    ...     "# table3\\n\\n| variant | method | accuracy | paper |\\n| --- | --- | --- | --- |\\n"
    ...     "| 5xDT | fedct | 0.895 ± 0.004 | 0.890 |\\n")
    >>> print(report([folder, published]))  # doctest: +ELLIPSIS
    | variant | method | table3 | table3_adult.md | table3 − table3_adult.md | paper |
    | --- | --- | --- | --- | --- | --- |
    | 5xDT | fedct | 0.900 ± 0.010 | 0.895 ± 0.004 | +0.005 | 0.890 |
    | local | local | 0.800 ± 0.020 | — | — | — |
    <BLANKLINE>
    columns: `table3` = .../table3; `table3_adult.md` = .../table3_adult.md
    """
    paths = [Path(folder) for folder in folders]
    if not paths:
        raise ExperimentError("no results folder or results table to report")
    loaded = [_source(path) for path in paths]
    labels = _labels(paths, [name for name, _ in loaded])
    tables = [{(str(r["variant"]), str(r["method"])): r for r in rows} for _, rows in loaded]
    keys = list(dict.fromkeys(key for table in tables for key in table))
    papers = {
        key: next(
            (float(t[key]["paper"]) for t in tables if key in t and np.isfinite(t[key]["paper"])),
            np.nan,
        )
        for key in keys
    }
    difference = len(tables) == 2
    has_paper = any(np.isfinite(p) for p in papers.values())
    head = ["variant", "method", *labels]
    head += [f"{labels[0]} − {labels[1]}"] if difference else []
    head += ["paper"] if has_paper else []
    lines = [
        "| " + " | ".join(h.replace("|", "\\|") for h in head) + " |",
        "|" + " --- |" * len(head),
    ]
    for key in keys:
        found = [table.get(key) for table in tables]
        cells = [key[0].replace("|", "\\|"), key[1], *map(_accuracy_cell, found)]
        if difference:
            both = all(r is not None and np.isfinite(r["accuracy"]) for r in found)
            cells.append(_signed(found[0]["accuracy"] - found[1]["accuracy"]) if both else "—")
        if has_paper:
            cells.append(f"{papers[key]:.3f}" if np.isfinite(papers[key]) else "—")
        lines.append("| " + " | ".join(cells) + " |")
    legend = "; ".join(f"`{label}` = {path}" for label, path in zip(labels, paths, strict=True))
    return "\n".join([*lines, "", f"columns: {legend}"])
