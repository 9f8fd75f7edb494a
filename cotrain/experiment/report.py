"""Summaries of a results folder (``summary.csv``, ``summary.md``, ``accuracy.png``) and
``cotrain report``: several results folders side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cotrain.experiment.config import slug
from cotrain.experiment.errors import ExperimentError

__all__ = ["markdown_table", "report", "write_summary"]


def write_summary(folder: Path, config: dict[str, Any], results: list[dict], wall: float) -> None:
    """``summary.csv``, ``summary.md`` and ``accuracy.png`` of a results folder.

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
        markdown_table(summary),
    ]
    (folder / "summary.md").write_text("\n".join(lines) + "\n")
    _plot(folder, order)


#: the summary column of each ε unit (see ``RoundRecord.epsilon_unit``)
EPSILON_COLUMNS = {"record": "epsilon", "label": "label_epsilon", "client": "client_epsilon"}

#: optional summary columns and their table headings; ε of different units stay apart
EXTRA_COLUMNS = {
    "vul": "vul",
    "epsilon": "ε per private record",
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
    return text


def markdown_table(summary: Any) -> str:
    """Mean ± std accuracy per variant, with the paper's number and the gap.

    Parameters
    ----------
    summary : DataFrame
        The rows of a ``summary.csv``.

    Examples
    --------
    >>> import pandas as pd
    >>> row = {"variant": "5xDT", "method": "fedct", "accuracy": 0.9, "accuracy_std": 0.01,
    ...        "consensus_accuracy": 0.91, "paper": 0.89, "wall_s": 12.0}
    >>> print(markdown_table(pd.DataFrame([row])))
    | variant | method | accuracy | consensus | paper | gap | time s (all seeds) |
    | --- | --- | --- | --- | --- | --- | --- |
    | 5xDT | fedct | 0.900 ± 0.010 | 0.910 | 0.890 | +0.010 | 12 |
    """
    has = [c for c in EXTRA_COLUMNS if c in summary]
    head = "| variant | method | accuracy | consensus | paper | gap |"
    head += "".join(f" {EXTRA_COLUMNS[c]} |" for c in has) + " time s (all seeds) |"
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for _, r in summary.iterrows():
        paper = r["paper"]
        has_paper = paper is not None and not (isinstance(paper, float) and np.isnan(paper))
        gap = f"{r['accuracy'] - paper:+.3f}" if has_paper else "—"
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


def _plot(folder: Path, order: list[str]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import pandas as pd
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    colours = plt.get_cmap("tab20")
    for index, variant in enumerate(order):
        curves = [
            pd.read_csv(h)["mean_accuracy"].to_numpy(dtype=float)
            for h in sorted((folder / "runs" / slug(variant)).glob("seed-*/history.csv"))
        ]
        length = min(len(c) for c in curves)
        if length > 1:
            mean = np.mean([c[:length] for c in curves], axis=0)
            style = ("-", "--", ":")[index // 20 % 3]  # 20 colours, then other line styles
            ax.plot(np.arange(1, length + 1), mean, style, color=colours(index % 20), label=variant)
    ax.set_xlabel("round")
    ax.set_ylabel("mean test accuracy of the clients")
    if ax.lines:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "accuracy.png", dpi=100)
    plt.close(fig)


def report(folders: list[str | Path]) -> str:
    """Several results folders side by side, as one Markdown document.

    Parameters
    ----------
    folders : list of str or Path
        Results folders written by ``cotrain run``.

    Raises
    ------
    ExperimentError
        A folder without ``summary.csv``.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp()) / "table3"
    >>> folder.mkdir()
    >>> _ = (folder / "summary.csv").write_text(
    ...     "variant,method,seeds,accuracy,accuracy_std,consensus_accuracy,paper,wall_s\\n"
    ...     "5xDT,fedct,5,0.9,0.01,0.91,0.89,12\\n")
    >>> print(report([folder]))
    ## table3
    <BLANKLINE>
    | variant | method | accuracy | consensus | paper | gap | time s (all seeds) |
    | --- | --- | --- | --- | --- | --- | --- |
    | 5xDT | fedct | 0.900 ± 0.010 | 0.910 | 0.890 | +0.010 | 12 |
    <BLANKLINE>
    """
    import pandas as pd

    parts = []
    for folder in map(Path, folders):
        summary_file = folder / "summary.csv"
        if not summary_file.is_file():
            raise ExperimentError(
                f"{folder} has no summary.csv: is it a `cotrain run` results folder?"
            )
        summary = pd.read_csv(summary_file)
        summary["paper"] = summary["paper"].astype(float)
        parts += [f"## {folder.name}", "", markdown_table(summary), ""]
    return "\n".join(parts)
