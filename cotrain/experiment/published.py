"""Read the results table of a Markdown summary: a published ``docs/results/<name>.md`` or
a results folder's ``summary.md``, so that ``cotrain report`` can set measured numbers
beside published ones.

The table is the one :func:`cotrain.experiment.report.markdown_table` writes: a header row
with at least ``variant``, ``method`` and ``accuracy`` (cells ``mean ± std``) and
optionally ``paper``; ``—`` is a missing number and ``\\|`` a pipe inside a cell.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from cotrain.experiment.errors import ExperimentError

__all__ = ["parse_summary_markdown", "read_summary_markdown"]

#: columns a results table must have to be read
REQUIRED = ("variant", "method", "accuracy")
_PIPE = re.compile(r"(?<!\\)\|")
_RULE = re.compile(r"^:?-{3,}:?$")


def _cells(line: str) -> list[str]:
    """The cells of one table row: split on unescaped pipes, ``\\|`` unescaped."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [cell.strip().replace("\\|", "|") for cell in _PIPE.split(inner)]


def _number(text: str) -> float:
    """A table number; ``—``, ``-`` or an empty cell is NaN."""
    text = text.strip()
    if text in ("", "—", "-", "–"):
        return math.nan
    return float(text.split()[0])


def _mean_std(text: str) -> tuple[float, float]:
    """``0.815 ± 0.002`` -> (0.815, 0.002); a bare number has no std (NaN)."""
    mean, _, std = text.partition("±")
    return _number(mean), _number(std) if std.strip() else math.nan


def parse_summary_markdown(text: str, source: str = "<text>") -> list[dict[str, Any]]:
    """The rows of the first results table in a Markdown text.

    Parameters
    ----------
    text : str
        Markdown holding a table with ``variant``, ``method`` and ``accuracy`` columns.
    source : str
        Named in the error.

    Returns
    -------
    list of dict
        One dict per row: ``variant``, ``method``, ``accuracy``, ``accuracy_std`` and
        ``paper`` (NaN where the table has none).

    Raises
    ------
    ExperimentError
        No such table, or a cell that is not a number.

    Examples
    --------
    >>> rows = parse_summary_markdown(
    ...     "| variant | method | accuracy | paper |\\n| --- | --- | --- | --- |\\n"
    ...     "| 5xDT | fedct | 0.815 ± 0.002 | 0.810 |\\n| a \\\\| b | local | 0.7 ± 0.01 | — |\\n")
    >>> rows[0]
    {'variant': '5xDT', 'method': 'fedct', 'accuracy': 0.815, 'accuracy_std': 0.002, 'paper': 0.81}
    >>> rows[1]["variant"], rows[1]["paper"]
    ('a | b', nan)
    """
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if not line.lstrip().startswith("|"):
            continue
        head = [cell.lower() for cell in _cells(line)]
        if not all(name in head for name in REQUIRED):
            continue
        # "paper", or a labelled one such as "paper (FashionMNIST)"
        paper_key = next((h for h in head if h == "paper" or h.startswith("paper (")), None)
        rows = []
        for number, row in enumerate(lines[start + 1 :], start=start + 2):
            if not row.lstrip().startswith("|"):
                break
            cells = _cells(row)
            if all(_RULE.match(cell) for cell in cells):
                continue
            if len(cells) != len(head):
                raise ExperimentError(
                    f"{source}:{number}: {len(cells)} cells where the header has {len(head)}"
                )
            cell = dict(zip(head, cells, strict=True))
            try:
                mean, std = _mean_std(cell["accuracy"])
                paper = _number(cell[paper_key]) if paper_key else math.nan
            except ValueError as err:
                raise ExperimentError(f"{source}:{number}: not a number ({err})") from None
            rows.append(
                {
                    "variant": cell["variant"],
                    "method": cell["method"],
                    "accuracy": mean,
                    "accuracy_std": std,
                    "paper": paper,
                }
            )
        return rows
    raise ExperimentError(
        f"{source} has no results table (a Markdown table with the columns "
        f"{', '.join(REQUIRED)}): is it a docs/results/<name>.md or a summary.md?"
    )


def read_summary_markdown(path: str | Path) -> list[dict[str, Any]]:
    """The rows of the results table of a Markdown file (see :func:`parse_summary_markdown`).

    Parameters
    ----------
    path : str or Path
        A published ``docs/results/<name>.md`` or a results folder's ``summary.md``.

    Returns
    -------
    list of dict
        ``variant``, ``method``, ``accuracy``, ``accuracy_std``, ``paper`` per row.

    Raises
    ------
    ExperimentError
        The file cannot be read or holds no results table.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "table3.md"
    >>> _ = path.write_text("# table3\\n\\n| variant | method | accuracy |\\n| --- | --- | --- |\\n"
    ...                     "| 5xDT | fedct | 0.815 ± 0.002 |\\n")
    >>> [(r["variant"], r["accuracy"]) for r in read_summary_markdown(path)]
    [('5xDT', 0.815)]
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ExperimentError(f"{path}: cannot be read ({err.strerror or err})") from None
    return parse_summary_markdown(text, str(path))
