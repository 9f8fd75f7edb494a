"""The errors and warnings of experiment files and runs."""

from __future__ import annotations

__all__ = ["ExperimentError", "ExperimentWarning", "InvalidValue", "RunFailed"]


class ExperimentError(ValueError):
    """An invalid experiment file: the message starts with ``file:line:``.

    Problems found only while running (a run whose learner fails on the data) raise it
    too, without a line.

    Examples
    --------
    >>> err = ExperimentError("exp.toml:3: unknown key 'rouns'")
    >>> isinstance(err, ValueError), str(err).split(":")[:2]
    (True, ['exp.toml', '3'])
    """


class InvalidValue(ExperimentError):
    """A value of a resolved configuration that cannot run, with the key path it is at.

    Raised by the checks of what values mean; :func:`~cotrain.experiment.load_experiment`
    turns it into ``file:line: reason`` with the line of ``keys`` in the file.

    Examples
    --------
    >>> err = InvalidValue(("method", "consensus"), "unknown consensus 'majorty'")
    >>> err.keys, str(err)
    (('method', 'consensus'), "unknown consensus 'majorty'")
    """

    def __init__(self, keys: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.keys = keys


class RunFailed(ExperimentError):
    """A run that raised while training: names the run; the finished runs are kept.

    Examples
    --------
    >>> str(RunFailed("runs/a/seed-0 failed: ValueError: bad"))
    'runs/a/seed-0 failed: ValueError: bad'
    """


class ExperimentWarning(UserWarning):
    """A part of an experiment file that does no harm but is likely a mistake, e.g. a
    ``[[clients]]`` block that every variant overrides (no run uses it).

    Examples
    --------
    >>> issubclass(ExperimentWarning, UserWarning)
    True
    """
