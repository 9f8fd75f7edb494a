"""Stragglers: what a task that missed its deadline becomes, and the in-order timeout rule.

Runtimes (:mod:`cotrain.runtime`) and pools (:mod:`cotrain.runtime.pools`) both return a
:class:`Straggler` in place of a result that did not come in time, and both check a
``timeout`` argument the same way (:func:`check_timeout`). :func:`run_in_order` is the
rule for work done in this process, one task after the other: a running task cannot
be pre-empted, so the time is checked before each task. This module imports nothing
from ``cotrain``, so both sides can use it without importing each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Straggler", "check_timeout", "run_in_order"]


@dataclass(frozen=True)
class Straggler:
    """Stands in for the result of a task that did not finish within the timeout.

    Parameters
    ----------
    index : int
        Position of the task in the list given to ``map`` (or among a pool call's
        sorted object ids).
    elapsed : float
        Seconds from the start of the ``map`` call to when the task was given up.

    Examples
    --------
    >>> from cotrain.runtime.runtimes import SequentialRuntime
    >>> with SequentialRuntime() as runtime:
    ...     runtime.map(pow, [(2, 3), (3, 2)], timeout=0)
    [8, Straggler(index=1, elapsed=0.0)]
    """

    index: int
    elapsed: float

    def __repr__(self) -> str:
        return f"Straggler(index={self.index}, elapsed={round(self.elapsed, 1)})"


def check_timeout(given: float | None, default: float | None) -> float | None:
    """The timeout in force: ``given``, or ``default`` when ``given`` is ``None``.

    Parameters
    ----------
    given : float or None
        The timeout passed to a call.
    default : float or None
        The runtime's (or pool's) own timeout.

    Returns
    -------
    float or None
        Seconds, or ``None`` for no timeout.

    Raises
    ------
    ValueError
        For a negative timeout.

    Examples
    --------
    >>> check_timeout(None, 5.0), check_timeout(2.0, 5.0), check_timeout(None, None)
    (5.0, 2.0, None)
    >>> check_timeout(-1, None)
    Traceback (most recent call last):
    ...
    ValueError: timeout must be >= 0 or None, got -1
    """
    timeout = default if given is None else given
    if timeout is not None and timeout < 0:
        raise ValueError(f"timeout must be >= 0 or None, got {timeout}")
    return timeout


def run_in_order(
    fn: Callable[..., Any], tasks: Iterable[Sequence[Any]], timeout: float | None = None
) -> list[Any]:
    """``[fn(*task) for task in tasks]`` here, one after the other, within ``timeout``.

    The time is checked before each task: once ``timeout`` seconds have passed since
    the start, every later task is returned as a :class:`Straggler` without being run.
    The first task always runs, and the task that overran is kept (it finished).

    Parameters
    ----------
    fn : callable
        Called as ``fn(*task)``.
    tasks : iterable of sequences
        The arguments of each call.
    timeout : float or None, default=None
        Seconds for all the tasks together (``None``: no limit). Not checked here:
        see :func:`check_timeout`.

    Returns
    -------
    list
        One result per task, in task order; :class:`Straggler` for tasks not run.

    Examples
    --------
    >>> run_in_order(pow, [(2, 3), (3, 2)])
    [8, 9]
    >>> run_in_order(pow, [(2, 3), (3, 2)], timeout=0)
    [8, Straggler(index=1, elapsed=0.0)]
    """
    start = time.perf_counter()
    out: list[Any] = []
    for i, task in enumerate(tasks):
        elapsed = time.perf_counter() - start
        if timeout is not None and elapsed >= timeout and i > 0:
            out.append(Straggler(i, elapsed))
        else:
            out.append(fn(*task))
    return out
