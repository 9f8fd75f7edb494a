"""The baselines' rounds on the library's one round loop, with the trainer's callbacks.

Every baseline (FedAvg, DP-FedAvg, FedDF, FedDS, FedAUX, PATE) runs its rounds through
:class:`cotrain.federation.loop.RoundLoop`, so that what cuts across rounds works for it as
for :class:`~cotrain.FederatedCoTrainer`: a progress bar (``verbose >= 1``), a line per round
(``verbose >= 2``), early stopping where the method has a consensus that can settle, and
the user's ``callbacks`` (e.g. :class:`cotrain.tracking.MLflowLogger`), which run after the
method's own, in the order given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cotrain.callbacks import Callback, ProgressBar, loop_callbacks
from cotrain.federation.loop import RoundLoop
from cotrain.history import History, RoundRecord

__all__ = ["check_no_checkpoint", "run_rounds"]


def run_rounds(
    owner: Any,
    run_round: Callable[[int, np.ndarray], RoundRecord],
    sample: Callable[[], np.ndarray],
    rounds: int,
    history: History,
    *,
    own: Sequence[Callback | None] = (),
    early_stopping: int | None = None,
    start: int = 1,
) -> str | None:
    """Run ``rounds`` rounds of ``owner`` on a :class:`RoundLoop`; return why it stopped early.

    The callbacks are, in this order: ``own`` (the method's, e.g. a checkpoint), a
    :class:`~cotrain.callbacks.ProgressBar` labelled with the method's class name at
    ``owner.verbose``, :class:`~cotrain.callbacks.EarlyStopping` when ``early_stopping``
    is given, and ``owner.callbacks`` (None: none), as the trainer orders them.

    Parameters
    ----------
    owner : estimator
        The baseline; callbacks see it as ``loop.owner`` (a tracking logger logs its
        ``get_params``).
    run_round : callable
        ``run_round(t, sampled) -> RoundRecord``.
    sample : callable
        ``sample() -> ndarray``: the clients of the next round.
    rounds : int
        Rounds to run.
    history : History
        The records are appended to it.
    own : sequence of Callback or None, optional
        The method's own callbacks (None entries are skipped).
    early_stopping : int, optional
        Stop once ``record.changed`` has been 0 for this many rounds.
    start : int, default=1
        The first round to run (a resumed run: ``history`` holds the rounds before it).

    Returns
    -------
    str or None
        ``loop.stopped_reason``.

    Examples
    --------
    >>> from sklearn.base import BaseEstimator
    >>> class Method(BaseEstimator):
    ...     def __init__(self, callbacks=None, verbose=0):
    ...         self.callbacks, self.verbose = callbacks, verbose
    >>> class Seen(Callback):
    ...     def on_round_end(self, loop, record):
    ...         print("round", record.round, type(loop.owner).__name__)
    >>> history = History()
    >>> run_rounds(Method(callbacks=[Seen()]), lambda t, s: RoundRecord(round=t, changed=0),
    ...            lambda: np.arange(2), 3, history, early_stopping=2)
    round 1 Method
    round 2 Method
    'early stopping'
    >>> len(history)
    2
    """
    progress = ProgressBar(owner.verbose, desc=type(owner).__name__)
    callbacks = loop_callbacks(own, early_stopping, owner.callbacks, progress)
    loop = RoundLoop(run_round, sample, rounds, callbacks, history, start, owner=owner)
    try:
        return loop.run()
    finally:
        progress.close()


def check_no_checkpoint(owner: Any, why: str) -> None:
    """Refuse ``checkpoint_dir`` for a method whose state cannot be checkpointed.

    Parameters
    ----------
    owner : estimator
        The baseline (its ``checkpoint_dir`` is read; None passes).
    why : str
        What in the method's state a checkpoint cannot hold.

    Raises
    ------
    NotImplementedError
        Naming the method, ``checkpoint_dir`` and ``why``.

    Examples
    --------
    >>> class Method:
    ...     checkpoint_dir = "ckpt"
    >>> check_no_checkpoint(Method(), "its scorers are fitted on private data")
    Traceback (most recent call last):
    ...
    NotImplementedError: Method cannot checkpoint (checkpoint_dir='ckpt'): its scorers are \
fitted on private data; use checkpoint_dir=None
    """
    directory = getattr(owner, "checkpoint_dir", None)
    if directory is not None:
        raise NotImplementedError(
            f"{type(owner).__name__} cannot checkpoint (checkpoint_dir={directory!r}): {why}; "
            "use checkpoint_dir=None"
        )
