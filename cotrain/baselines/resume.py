"""Checkpoints of the parameter-exchanging baselines, so that ``fit(resume=True)`` continues.

FedAvg, DP-FedAvg, FedDF and FedDS write a checkpoint after every round into
``checkpoint_dir`` with the trainer's machinery (:mod:`cotrain.persistence.checkpoint`:
atomic folders, a fingerprint of the configuration and the data, SHA-256 of every file). A
checkpoint holds every client's torch learner and the server model (module, optimizer and
random-generator tensors with ``torch.save``, the rest with skops), the global weights, the
generators of the sampler, the noise and the distillation, the accuracies so far, the
method's own running state (DP-FedAvg's ε per round, FedDF's losses and targets, FedDS's
rotation head) and the history; a resumed run gives exactly the result of an uninterrupted
one.

What a checkpoint cannot hold yet is refused at ``fit`` with ``NotImplementedError``:
compressed updates (their residuals) and FedAUX's certainty scorers. PATE runs one round and
takes no ``checkpoint_dir``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cotrain.baselines.rounds import check_no_checkpoint
from cotrain.persistence.checkpoint import (
    CheckpointCallback,
    Checkpointer,
    join_arrays,
    load_model,
    open_checkpointer,
)
from learners import ClassAlignedClassifier

__all__ = ["NOT_IN_FINGERPRINT", "WeightsCheckpoint"]

#: parameters the result does not depend on (and ``rounds``: a finished run can be extended)
NOT_IN_FINGERPRINT = ("estimator", "n_jobs", "verbose", "checkpoint_dir", "callbacks", "rounds")


class WeightsCheckpoint:
    """The checkpoints of one FedAvg-family fit: the callback that writes, and the restore.

    The estimator provides ``_checkpoint_blocker()`` (a reason, or None),
    ``_checkpoint_state()`` (its running state as a tree of JSON values and arrays),
    ``_load_checkpoint_state(state)``, ``_clients``, ``global_model_``, ``classes_`` and
    ``rounds``. Client ``i``'s learner is stored as ``client-<i>``, the server model as
    ``client-<m>`` (each inside a :class:`learners.ClassAlignedClassifier`, the container
    :func:`~cotrain.persistence.checkpoint.save_model` stores).

    Parameters
    ----------
    owner : FedAvg
        The estimator being fitted.
    checkpointer : Checkpointer
        Its checkpoint directory.

    Examples
    --------
    >>> class Method:
    ...     checkpoint_dir = None
    ...     def _checkpoint_blocker(self):
    ...         return None
    >>> WeightsCheckpoint.open(Method(), data=None, resume=False) is None
    True
    """

    def __init__(self, owner: Any, checkpointer: Checkpointer) -> None:
        self.owner = owner
        self.checkpointer = checkpointer

    @classmethod
    def open(cls, owner: Any, data: Any, resume: bool) -> WeightsCheckpoint | None:
        """The checkpoints of ``owner.checkpoint_dir`` for a fit on ``data`` (None without
        a directory); refuses a state that cannot be checkpointed, and ``resume`` without
        a directory. A fit that does not resume clears the directory's old checkpoints.

        Parameters
        ----------
        owner : FedAvg
            The estimator (its parameters and ``data`` make the fingerprint).
        data : FitData
            The validated inputs (``X_public`` set for a method with a public pool).
        resume : bool
            Whether the fit continues from the last checkpoint.

        Returns
        -------
        WeightsCheckpoint or None
        """
        if owner.checkpoint_dir is not None and (reason := owner._checkpoint_blocker()):
            check_no_checkpoint(owner, reason)
        if owner.checkpoint_dir is None and not resume:
            return None
        params = {
            k: v for k, v in owner.get_params(deep=False).items() if k not in NOT_IN_FINGERPRINT
        }
        if data.X_public is None:  # the fingerprint reads every array of the data
            data = replace(data, X_public=data.X_clients[0][:0])
        checkpointer = open_checkpointer(
            owner.checkpoint_dir, resume, [owner.estimator], params, data
        )
        return None if checkpointer is None else cls(owner, checkpointer)

    def callback(self) -> CheckpointCallback:
        """The round-loop callback that writes a checkpoint after every round."""
        return CheckpointCallback(self.checkpointer, self.collect)

    def collect(self) -> tuple[dict[str, Any], None, dict[int, Any]]:
        """``(state, broadcast, models)`` of the run now, for :class:`CheckpointCallback`."""
        owner = self.owner
        learners = [*owner._clients, owner.global_model_]
        models = {
            i: ClassAlignedClassifier(model, classes=owner.classes_)
            for i, model in enumerate(learners)
        }
        return owner._checkpoint_state(), None, models

    def restore(self) -> tuple[int, bool]:
        """Put the latest checkpoint back into the owner; returns (next round, finished)."""
        owner = self.owner
        tree, arrays, _, folder = self.checkpointer.load()
        state = join_arrays(tree, arrays)
        m = len(owner._clients)
        learners = [
            load_model(folder, f"client-{i}", self.checkpointer.trusted_types).estimator
            for i in range(m + 1)
        ]
        owner._clients, owner.global_model_ = learners[:m], learners[m]
        owner._load_checkpoint_state(state)
        # a run that stopped early stays stopped; one that used up its rounds can go on
        finished = state["finished"] and (
            state["stopped_reason"] is not None or state["round"] >= owner.rounds
        )
        return state["round"] + 1, bool(finished)
