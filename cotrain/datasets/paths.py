"""Where the shared public datasets live: the data folder and the files in it.

The machines that run this project cannot download anything, so every loader of
:mod:`cotrain.datasets` reads its files from one data folder, found by :func:`data_home`;
:func:`data_file` names one file in it and says where it looked when the file is missing.

Examples
--------
>>> from cotrain.datasets.paths import ENV_VAR
>>> ENV_VAR
'COTRAIN_DATA'
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV_VAR", "data_file", "data_home"]

#: Name of the environment variable that points at the shared data folder.
ENV_VAR = "COTRAIN_DATA"


def data_home(path: str | os.PathLike[str] | None = None) -> Path:
    """Locate the folder that holds the shared public datasets.

    The folder is looked up in this order, and the first rule that applies wins:

    1. ``path``, when given (it must exist: an explicit path is never silently replaced);
    2. the environment variable ``COTRAIN_DATA``, when set (it must exist as well);
    3. ``../shared/data`` relative to the current working directory (the layout used when
       working from the project root);
    4. ``<repository root>/../shared/data``, found relative to this file (works from any
       working directory when the package is used from a source checkout).

    Parameters
    ----------
    path : str or path-like, optional
        An explicit data folder.

    Returns
    -------
    pathlib.Path
        The resolved, existing data folder.

    Raises
    ------
    FileNotFoundError
        If no candidate exists. The message lists every location tried and how to point the
        library at the data.

    Examples
    --------
    >>> from cotrain.datasets import data_home
    >>> data_home()  # doctest: +SKIP
    PosixPath('/work/shared/data')
    >>> data_home("/data/public")  # doctest: +SKIP
    PosixPath('/data/public')
    """
    hint = (
        f"Pass the folder explicitly (data_home='/path/to/data') or set the environment "
        f"variable {ENV_VAR}=/path/to/data. The folder should contain e.g. "
        f"'wine_quality/winequality-red.csv' and 'adult/adult-train.csv'."
    )
    if path is not None:
        p = Path(path).expanduser()
        if p.is_dir():
            return p.resolve()
        raise FileNotFoundError(
            f"data folder not found: data_home={str(path)!r} (tried {p}) does not exist or is "
            f"not a directory. {hint}"
        )
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env).expanduser()
        if p.is_dir():
            return p.resolve()
        raise FileNotFoundError(
            f"data folder not found: environment variable {ENV_VAR}={env!r} points at {p}, "
            f"which does not exist or is not a directory. {hint}"
        )
    candidates = [
        Path.cwd() / ".." / "shared" / "data",
        Path(__file__).resolve().parents[2].parent / "shared" / "data",
    ]
    for p in candidates:
        if p.is_dir():
            return p.resolve()
    tried = "; ".join(str(p) for p in candidates)
    raise FileNotFoundError(
        f"data folder not found. Tried: no data_home argument, {ENV_VAR} not set, {tried}. {hint}"
    )


def data_file(home: str | os.PathLike[str] | None, *parts: str) -> Path:
    """The file ``parts`` inside the data folder, which must exist.

    Parameters
    ----------
    home : str, path-like or None
        The data folder, or None to locate it with :func:`data_home`.
    *parts : str
        The file's path inside the data folder, one component per argument.

    Returns
    -------
    pathlib.Path
        The existing file.

    Raises
    ------
    FileNotFoundError
        If the data folder or the file is missing; the message says where it looked.

    Examples
    --------
    >>> from cotrain.datasets.paths import data_file
    >>> data_file(None, "adult", "adult-train.csv")  # doctest: +SKIP
    PosixPath('/work/shared/data/adult/adult-train.csv')
    """
    root = data_home(home)
    f = root.joinpath(*parts)
    if not f.is_file():
        raise FileNotFoundError(
            f"{'/'.join(parts)} not found in the data folder {root} (looked for {f}). "
            f"Place the file there, or point data_home= / {ENV_VAR} at a folder that has it."
        )
    return f
