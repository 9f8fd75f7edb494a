"""Callbacks: what cuts across the rounds of a federation, outside the round itself.

The round loop (:class:`cotrain.federation.loop.RoundLoop`) runs rounds; everything else that
happens around them — a progress bar, a line per round, checkpoints, early stopping, a
privacy budget, experiment tracking — is a :class:`Callback`. The same callbacks work
on :class:`~cotrain.FederatedCoTrainer` and on the Flower strategy, because both drive
the same loop.

The protocol (every hook is optional; the base class makes each a no-op):

- ``on_fit_start(loop)`` once, before the first round (after a resume: before the first
  round still to run; ``loop.history`` already holds the restored rounds);
- ``on_round_start(loop, t, sampled)`` before round ``t`` runs, with the clients sampled
  for it; a callback may call ``loop.stop(reason)`` to end the run *before* this round;
- ``on_round_end(loop, record)`` after round ``t``, with its
  :class:`~cotrain.history.RoundRecord` (already appended to ``loop.history``);
  ``loop.stop(reason)`` ends the run after this round;
- ``on_fit_end(loop)`` once, when the loop ends for any reason but an exception
  (``loop.stopped_reason`` says why it ended early, or is None).

Hooks run in the order the callbacks were given; the trainer's own callbacks
(checkpoint, early stopping, privacy budget, progress) run before the user's.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from cotrain.history import History, RoundRecord

if TYPE_CHECKING:  # the protocol only: callbacks import no ledger
    from cotrain.privacy.ledgers.protocol import RunLedger

__all__ = [
    "Callback",
    "EarlyStopping",
    "LoopView",
    "PrivacyBudget",
    "ProgressBar",
    "TimeBudget",
    "loop_callbacks",
]


class LoopView(Protocol):
    """What a callback may use of the loop that calls it
    (:class:`cotrain.federation.loop.RoundLoop`, which imports this module): the loop as
    its callbacks see it, for annotating a callback's hooks.

    Examples
    --------
    >>> from cotrain.federation.loop import RoundLoop
    >>> loop = RoundLoop(lambda t, s: None, lambda: [], rounds=3)
    >>> view: LoopView = loop
    >>> view.rounds, view.stopped_reason
    (3, None)
    """

    history: History
    rounds: int
    start: int
    owner: Any
    stopped_reason: str | None

    def stop(self, reason: str) -> None:
        """Ask the loop to end."""


class Callback:
    """Base class of round-loop callbacks: override the hooks you need.

    Examples
    --------
    >>> class StopWhenCovered(Callback):
    ...     def on_round_end(self, loop, record):
    ...         if record.coverage == 1.0:
    ...             loop.stop("full coverage")
    >>> StopWhenCovered()
    StopWhenCovered()
    """

    def on_fit_start(self, loop: LoopView) -> None:
        """Called once before the first round that will run."""

    def on_round_start(self, loop: LoopView, t: int, sampled: np.ndarray) -> None:
        """Called before round ``t`` with the sampled client ids."""

    def on_round_end(self, loop: LoopView, record: RoundRecord) -> None:
        """Called after round ``record.round``, once it is in ``loop.history``."""

    def on_fit_end(self, loop: LoopView) -> None:
        """Called once when the loop ends (not after an exception)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class EarlyStopping(Callback):
    """Stop once the hard consensus has not changed for ``patience`` rounds.

    A resumed run whose restored history already ends with ``patience`` unchanged
    rounds stops before running another.

    Parameters
    ----------
    patience : int
        Consecutive rounds with ``record.changed == 0``.

    Examples
    --------
    >>> EarlyStopping(2).patience
    2
    """

    reason = "early stopping"

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.unchanged = 0

    def on_fit_start(self, loop: LoopView) -> None:
        self.unchanged = 0
        for record in reversed(list(loop.history)):
            if record.changed != 0:
                break
            self.unchanged += 1

    def on_round_start(self, loop: LoopView, t: int, sampled: np.ndarray) -> None:
        if self.unchanged >= self.patience:  # a resumed run that had settled
            loop.stop(self.reason)

    def on_round_end(self, loop: LoopView, record: RoundRecord) -> None:
        self.unchanged = self.unchanged + 1 if record.changed == 0 else 0
        if self.unchanged >= self.patience:
            loop.stop(self.reason)

    def __repr__(self) -> str:
        return f"EarlyStopping(patience={self.patience})"


class PrivacyBudget(Callback):
    """Stop before a round whose releases would take a client past the ε budget.

    Parameters
    ----------
    ledger : cotrain.privacy.ledgers.protocol.RunLedger
        The run's ledger (it knows the budget and what every client released).

    Examples
    --------
    >>> PrivacyBudget(ledger=None)
    PrivacyBudget()
    """

    reason = "privacy budget"

    def __init__(self, ledger: RunLedger) -> None:
        self.ledger = ledger

    def on_round_start(self, loop: LoopView, t: int, sampled: np.ndarray) -> None:
        if self.ledger.would_exceed_budget(sampled):
            loop.stop(self.reason)


class TimeBudget(Callback):
    """Run as many rounds as fit in a wall-clock budget.

    Before each round after the first that runs, the run stops if the seconds spent so far
    plus the slowest round so far would pass ``seconds``: a round is never cut off, and the
    run ends inside the budget unless one round is slower than every round before it.
    ``rounds`` stays the upper limit. The first round always runs; a resumed run's budget
    counts from the resume.

    Parameters
    ----------
    seconds : float
        The wall-clock budget of the run, in seconds (> 0).
    clock : callable, default=time.perf_counter
        Returns the current time in seconds (tests pass a fake clock).

    Examples
    --------
    Ten minutes of rounds, at most 100:

    >>> from cotrain import FederatedCoTrainer
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> trainer = FederatedCoTrainer(
    ...     [DecisionTreeClassifier()] * 3, rounds=100, callbacks=[TimeBudget(600)]
    ... )
    >>> trainer.callbacks
    [TimeBudget(seconds=600)]
    """

    reason = "time budget"

    def __init__(self, seconds: float, clock: Any = time.perf_counter) -> None:
        given: Any = seconds  # checked at run time: numpy numbers are real numbers too
        if isinstance(given, bool) or not isinstance(given, numbers.Real) or not float(given) > 0:
            raise ValueError(f"seconds must be a positive number of seconds, got {given!r}")
        self.seconds = seconds
        self.clock = clock
        self._started = 0.0
        self._round_started = 0.0
        self._slowest = 0.0

    def on_fit_start(self, loop: LoopView) -> None:
        self._started = self.clock()
        self._slowest = 0.0

    def on_round_start(self, loop: LoopView, t: int, sampled: np.ndarray) -> None:
        now = self.clock()
        if self._slowest > 0 and now - self._started + self._slowest > self.seconds:
            loop.stop(self.reason)
        self._round_started = now

    def on_round_end(self, loop: LoopView, record: RoundRecord) -> None:
        self._slowest = max(self._slowest, self.clock() - self._round_started)

    def __repr__(self) -> str:
        return f"TimeBudget(seconds={self.seconds})"


class ProgressBar(Callback):
    """A tqdm bar over the rounds (``verbose >= 1``) and a line per round (``>= 2``).

    Parameters
    ----------
    verbose : int
        0: nothing; 1: the bar; 2: the bar and one line per round.
    desc : str, default="FedCT"
        The bar's label.

    Examples
    --------
    >>> ProgressBar(verbose=0).verbose
    0
    """

    def __init__(self, verbose: int, desc: str = "FedCT") -> None:
        self.verbose = verbose
        self.desc = desc
        self._bar: Any = None

    def on_fit_start(self, loop: LoopView) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(
            total=loop.rounds,
            initial=loop.start - 1,
            disable=self.verbose < 1,
            desc=self.desc,
            unit="round",
        )

    def on_round_end(self, loop: LoopView, record: RoundRecord) -> None:
        if self._bar is None:
            return
        self._bar.update(1)
        self._bar.set_postfix(_postfix(record))
        if self.verbose >= 2:
            self._bar.write(round_line(record))

    def on_fit_end(self, loop: LoopView) -> None:
        self.close()

    def close(self) -> None:
        """Close the bar (also called when the loop ends with an exception)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __repr__(self) -> str:
        return f"ProgressBar(verbose={self.verbose})"


def _postfix(record: RoundRecord) -> dict[str, str]:
    out = {"coverage": f"{record.coverage:.2f}", "agree": f"{record.agreement:.2f}"}
    if record.mean_accuracy is not None:
        out["acc"] = f"{record.mean_accuracy:.3f}"
    return out


def loop_callbacks(
    own: Sequence[Callback | None],
    early_stopping: int | None,
    user: Sequence[Callback] | None,
    progress: ProgressBar | None = None,
) -> list[Callback]:
    """The callbacks of a run in the one order every method uses: the method's own (a
    checkpoint, a privacy budget; None entries skipped), the progress bar, early stopping
    (when ``early_stopping`` is a patience), then the user's, in the order given.

    Examples
    --------
    >>> [type(c).__name__ for c in loop_callbacks([None], 2, [Callback()])]
    ['EarlyStopping', 'Callback']
    """
    chosen = [*own, progress, None if early_stopping is None else EarlyStopping(early_stopping)]
    return [c for c in chosen if c is not None] + list(user or [])


def round_line(record: RoundRecord) -> str:
    """One line summarising a round, as ``verbose=2`` prints it."""
    acc = (
        ""
        if record.mean_accuracy is None
        else (
            f" acc {record.mean_accuracy:.3f}±{record.std_accuracy:.3f}"
            f" consensus {record.consensus_accuracy:.3f}"
        )
    )
    # a method without a consensus on a public pool (FedAvg) measures neither
    labels = (
        ""
        if np.isnan(record.coverage) and np.isnan(record.agreement)
        else f"coverage {record.coverage:.2f}, agreement {record.agreement:.2f}, "
    )
    eps = "" if record.epsilon is None else f" ε {record.epsilon:.3g}"
    return (
        f"round {record.round:3d}: {len(record.clients)} clients, "
        f"{len(record.failed)} failed, {labels}changed {record.changed}, "
        f"up {record.bytes_up} B, down {record.bytes_down} B, {record.time_s:.2f} s{acc}{eps}"
    )
