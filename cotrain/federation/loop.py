"""The round loop shared by the in-process trainer and the Flower ServerApp.

:class:`RoundLoop` samples the clients of each round, runs the round through a function
it is given (in-process clients or Flower sites: the loop does not care), appends the
record to the history, and lets :mod:`callbacks <cotrain.callbacks>` do everything else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cotrain.callbacks import Callback
from cotrain.history import History, RoundRecord

__all__ = ["RoundLoop"]


class RoundLoop:
    """Run rounds ``start .. rounds``, calling the callbacks around each one.

    Parameters
    ----------
    run_round : callable
        ``run_round(t, sampled) -> RoundRecord``: one communication round with the
        sampled clients.
    sample : callable
        ``sample() -> ndarray``: the clients asked in the next round.
    rounds : int
        The last round to run.
    callbacks : sequence of Callback
        Called in this order (see :mod:`cotrain.callbacks`).
    history : History, optional
        Rounds that already ran (a resumed run); new records are appended to it.
    start : int, default=1
        The first round to run.
    owner : object, optional
        What runs the loop (the trainer or the Flower strategy), for callbacks that
        need more than the records, e.g. a checkpoint that collects its state.

    Attributes
    ----------
    history : History
    stopped_reason : str or None
        Why the loop ended before ``rounds`` (from :meth:`stop`), or None.
    round : int
        The round running now, or the last one that ran.

    Examples
    --------
    >>> from cotrain.callbacks import EarlyStopping
    >>> def run_round(t, sampled):
    ...     return RoundRecord(round=t, clients=tuple(sampled.tolist()), changed=0)
    >>> loop = RoundLoop(run_round, lambda: np.arange(3), rounds=10,
    ...                  callbacks=[EarlyStopping(2)])
    >>> loop.run()
    'early stopping'
    >>> len(loop.history)
    2
    """

    def __init__(
        self,
        run_round: Callable[[int, np.ndarray], RoundRecord],
        sample: Callable[[], np.ndarray],
        rounds: int,
        callbacks: Sequence[Callback] = (),
        history: History | None = None,
        start: int = 1,
        owner: Any = None,
    ) -> None:
        self.run_round = run_round
        self.sample = sample
        self.rounds = rounds
        self.callbacks = list(callbacks)
        self.history = History() if history is None else history
        self.start = start
        self.owner = owner
        self.round = start - 1
        self.stopped_reason: str | None = None

    def stop(self, reason: str) -> None:
        """Ask the loop to end: before the round about to start, or after this one."""
        if self.stopped_reason is None:
            self.stopped_reason = reason

    def run(self) -> str | None:
        """Run the rounds; returns :attr:`stopped_reason`."""
        self._call("on_fit_start")
        for t in range(self.start, self.rounds + 1):
            if self.stopped_reason is not None:
                break
            sampled = self.sample()
            self._call("on_round_start", t, sampled)
            if self.stopped_reason is not None:
                break
            self.round = t
            record = self.run_round(t, sampled)
            self.history.append(record)
            self._call("on_round_end", record)
        self._call("on_fit_end")
        return self.stopped_reason

    def _call(self, hook: str, *args: Any) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(self, *args)
