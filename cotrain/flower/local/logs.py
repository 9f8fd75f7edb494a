"""Reading the logs of local processes: without color codes, and their last lines.

Only the standard library is used.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["read_log", "strip_ansi", "tail"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def strip_ansi(text: str) -> str:
    """Remove ANSI color codes.

    Parameters
    ----------
    text : str
        Text, perhaps colored.

    Returns
    -------
    str
        The text without color codes.

    Examples
    --------
    >>> strip_ansi("\\x1b[92mINFO\\x1b[0m : ready")
    'INFO : ready'
    """
    return _ANSI.sub("", text)


def read_log(path: str | Path) -> str:
    """Return a log file's text without color codes (empty if the file does not exist).

    Parameters
    ----------
    path : str or Path
        The log file; bytes that are not UTF-8 are replaced.

    Returns
    -------
    str
        Its text.

    Examples
    --------
    >>> read_log("/nonexistent/cotrain.log")
    ''
    """
    try:
        return strip_ansi(Path(path).read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return ""


def tail(text: str, lines: int = 40) -> str:
    """Return the last ``lines`` lines of ``text``.

    Parameters
    ----------
    text : str
        Text, e.g. a log.
    lines : int, default=40
        How many lines.

    Returns
    -------
    str
        The last lines, joined with ``\\n``.

    Examples
    --------
    >>> tail("a\\nb\\nc", 2)
    'b\\nc'
    """
    return "\n".join(text.splitlines()[-lines:])
