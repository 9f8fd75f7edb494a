"""The one error of experiment files and runs: :class:`ExperimentError`."""

from __future__ import annotations


class ExperimentError(ValueError):
    """An invalid experiment file: the message starts with ``file:line:``.

    Problems found only while running (a missing data file, an unknown privacy
    mechanism) raise it too, without a line.

    Examples
    --------
    >>> err = ExperimentError("exp.toml:3: unknown key 'rouns'")
    >>> isinstance(err, ValueError), str(err).split(":")[:2]
    (True, ['exp.toml', '3'])
    """
