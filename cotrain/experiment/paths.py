"""Checks of the paths a run writes to, before anything runs: a results folder and a plot.

Each check raises ``ValueError`` with one line naming the option and the reason: a path
that is a file where a folder is needed (or the reverse), a folder that does not exist or
cannot be written, a plot format matplotlib cannot write. Writability is tried, not
guessed from permission bits: a file is created and removed in the folder.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cotrain.params import did_you_mean

__all__ = ["check_output_folder", "check_plot_file", "plot_formats"]


def _writable(folder: Path) -> str | None:
    """None if a file can be created in ``folder``, else why not."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        return err.strerror or type(err).__name__
    return None


def check_output_folder(path: str | os.PathLike[str], name: str = "out") -> Path:
    """Check a results folder: an existing folder that can be written, or one that can be
    made (its nearest existing parent is a writable folder). Nothing is created.

    Parameters
    ----------
    path : str or Path
        The folder.
    name : str, default="out"
        How messages name it (``"--out"`` on the command line).

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        A path that is an existing file, or under one, or in a folder that cannot be
        written.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> check_output_folder(root / "new" / "results") == root / "new" / "results"
    True
    >>> _ = (root / "notes.txt").write_text("x")
    >>> check_output_folder(root / "notes.txt", "--out")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --out .../notes.txt is a file, not a folder: give a folder for the results ...
    """
    folder = Path(path).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(
            f"{name} {folder} is a file, not a folder: give a folder for the results (made "
            "if missing)"
        )
    parent = folder
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{name} {folder}: {parent} is a file, so no folder can be made there")
    why = _writable(parent)
    if why is not None:
        where = "cannot write in it" if parent == folder else f"cannot make it in {parent}"
        raise ValueError(f"{name} {folder}: {where}: {why}")
    return folder


def plot_formats() -> list[str]:
    """The file extensions matplotlib can save a figure as (``png``, ``pdf``, ``svg``, ...).

    Raises
    ------
    ImportError
        matplotlib is not installed (the ``plot`` extra).

    Examples
    --------
    >>> {"png", "pdf", "svg"} <= set(plot_formats())
    True
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("a plot needs matplotlib: pip install 'cotrain[plot]'") from None
    return sorted(Figure().canvas.get_supported_filetypes())


def check_plot_file(path: str | os.PathLike[str], name: str = "plot") -> Path:
    """Check a plot's file: an image format matplotlib writes, in a folder that exists and
    can be written, and not a folder itself. Nothing is left behind.

    Parameters
    ----------
    path : str or Path
        The file, e.g. ``convergence.png``.
    name : str, default="plot"
        How messages name it (``"--plot"`` on the command line).

    Returns
    -------
    Path

    Raises
    ------
    ValueError
        An extension that is not a format matplotlib writes (with a suggestion), a missing
        folder, a folder, or a file that cannot be written; also when matplotlib is not
        installed.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> check_plot_file(root / "convergence", "--plot")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --plot .../convergence: give the file an image extension, e.g. convergence.png
    >>> check_plot_file(root / "plots" / "convergence.png", "--plot")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --plot .../plots/convergence.png: the folder .../plots does not exist
    """
    file = Path(path).expanduser()
    if file.is_dir():
        raise ValueError(f"{name} {file} is a folder: give a file name, e.g. {file}/plot.png")
    if not file.suffix:
        raise ValueError(f"{name} {file}: give the file an image extension, e.g. {file.name}.png")
    folder = file.parent
    if not folder.is_dir():
        what = "is a file" if folder.exists() else "does not exist"
        raise ValueError(f"{name} {file}: the folder {folder} {what}")
    try:
        formats = plot_formats()
    except ImportError as err:
        raise ValueError(f"{name} {file}: {err}") from None
    suffix = file.suffix.lower().lstrip(".")
    if suffix not in formats:
        hint = did_you_mean(f".{suffix}", [f".{f}" for f in formats])
        listed = ", ".join(f".{f}" for f in formats)
        raise ValueError(
            f"{name} {file}: cannot save a plot as '.{suffix}'{hint} (formats: {listed})"
        )
    existed = file.exists()
    try:
        with open(file, "ab"):
            pass
    except OSError as err:
        raise ValueError(f"{name} {file}: cannot write it: {err.strerror or err}") from None
    if not existed:
        file.unlink()
    return file
