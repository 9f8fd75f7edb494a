"""What the server side keeps after each round, written once for every transport.

The in-process federations (:class:`~cotrain.federation.simulation.SimulatedFederation`,
the secure-sum one) and the Flower ServerApp
(:class:`~cotrain.flower.server_app.FlowerCoTraining`) finish a round the same way: the
server votes on the uploads (:meth:`~cotrain.federation.server.CoTrainingServer.finish_round`),
then :class:`RoundBookkeeping` adds to its record what the clients released besides their
labels — the pool weight each chose (``trust``), its out-of-fold accuracy (``quality``), a
private site's own ledger ε — and the accuracies on evaluation data: each client's, and the
federation's prediction rule (:func:`aggregate`, weighted by the released quality where the
consensus is) on the evaluation set. Only where the predictions come from differs: a
simulation scores every client's model itself, a deployment reads what the sites that share
a public test set sent (:class:`cotrain.flower.evaluation.SharedEvaluation`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from consensus import Consensus, majority_vote
from cotrain.history import RoundRecord
from cotrain.wire.upload import Upload

__all__ = ["Predictions", "RoundBookkeeping", "aggregate"]

#: a client's latest predictions on the evaluation data: class codes ``(n_eval,)`` and,
#: under a soft consensus, probabilities ``(n_eval, n_classes)``
Predictions = tuple[np.ndarray, np.ndarray | None]


def aggregate(
    consensus: Consensus,
    codes: np.ndarray,
    probas: np.ndarray | None,
    n_classes: int,
    quality: np.ndarray | None = None,
) -> np.ndarray:
    """The prediction rule of a federation: a soft consensus applies to probabilities; a
    rule that weighs whole clients by their released quality (``predicts_with_quality``,
    e.g. :class:`~consensus.ReliabilityVote`; ``quality`` is ``(m,)`` with NaN where
    unknown) weighs their predictions the same way; any other hard rule (majority,
    qualified majority, certainty) is a plain majority vote that never abstains.

    Examples
    --------
    >>> from consensus import MajorityVote, ReliabilityVote
    >>> votes = np.array([[0, 1], [1, 1], [1, 0]])
    >>> aggregate(MajorityVote(), votes, None, 2).tolist()
    [1, 1]
    >>> aggregate(ReliabilityVote(), votes, None, 2, quality=np.array([0.99, 0.6, 0.6])).tolist()
    [0, 1]
    """
    if consensus.output == "soft" and probas is not None:
        return np.argmax(consensus(probas, n_classes=n_classes), axis=1)
    if getattr(consensus, "predicts_with_quality", False) and quality is not None:
        weights = consensus.weights_for(  # type: ignore[call-arg]  # such a rule takes them
            np.arange(len(codes)), codes.shape[1], quality=quality, n_classes=n_classes
        )
        return consensus(codes, n_classes=n_classes, weights=weights)
    return majority_vote(codes, n_classes)


class RoundBookkeeping:
    """The server side's memory across rounds, and the round record's post-round fields.

    Parameters
    ----------
    n_classes : int
        The run's number of classes.

    Attributes
    ----------
    site_epsilon : dict of int to float
        Each private client's own ledger ε, as its latest reply (a refusal too) said.
    quality : dict of int to float or None
        Each client's quality released with its latest used answer.
    predictions : dict of int to Predictions
        Each client's latest predictions on the evaluation data the federation scores.
    accuracy : dict of int to float
        Each client's latest accuracy on its evaluation data.

    Examples
    --------
    >>> from consensus import ReliabilityVote
    >>> books = RoundBookkeeping(n_classes=2)
    >>> uploads = [Upload(0, b"", quality=0.99), Upload(1, b"", quality=0.6),
    ...            Upload(2, b"", quality=0.6, trust=0.5)]
    >>> codes = {0: np.array([0, 1]), 1: np.array([1, 1]), 2: np.array([1, 0])}
    >>> record = books.finish(
    ...     RoundRecord(round=1), uploads, [0, 1, 2], ReliabilityVote(),
    ...     predictions={i: (c, None) for i, c in codes.items()}, y_eval_codes=np.array([0, 1]),
    ... )
    >>> record.consensus_accuracy, record.client_accuracy, record.trust
    (1.0, {0: 1.0, 1: 0.5, 2: 0.0}, {2: 0.5})
    """

    def __init__(self, n_classes: int) -> None:
        self.n_classes = int(n_classes)
        self.site_epsilon: dict[int, float] = {}
        self.quality: dict[int, float | None] = {}
        self.predictions: dict[int, Predictions] = {}
        self.accuracy: dict[int, float] = {}

    def finish(
        self,
        record: RoundRecord,
        uploads: Sequence[Upload],
        answered: Iterable[int],
        consensus: Consensus,
        *,
        predictions: Mapping[int, Predictions] | None = None,
        accuracy: Mapping[int, float] | None = None,
        y_eval_codes: np.ndarray | None = None,
    ) -> RoundRecord:
        """``record`` with what the clients released and the round's accuracies.

        Parameters
        ----------
        record : RoundRecord
            The server's record of the round.
        uploads : sequence of Upload
            What came back this round, as released (failures too).
        answered : iterable of int
            The clients whose labels the consensus used.
        consensus : Consensus
            The run's consensus: its prediction rule scores the federation.
        predictions : mapping, optional
            This round's predictions on the evaluation data, by client.
        accuracy : mapping, optional
            This round's accuracies on each client's own evaluation data; by default
            computed from ``predictions`` against ``y_eval_codes``.
        y_eval_codes : ndarray, optional
            The evaluation labels as class codes (-2 for a label outside the classes):
            without them, no consensus accuracy.

        Returns
        -------
        RoundRecord
        """
        used = set(int(i) for i in answered)
        self.received(uploads)
        released = {u.client_id: u.quality for u in uploads}
        self.quality.update({i: q for i, q in released.items() if i in used})
        self.predictions.update({i: p for i, p in (predictions or {}).items() if i in used})
        if accuracy is None and predictions is not None and y_eval_codes is not None:
            accuracy = {i: float(np.mean(p[0] == y_eval_codes)) for i, p in predictions.items()}
        self.accuracy.update({i: a for i, a in (accuracy or {}).items() if i in used})
        return replace(
            record,
            trust={u.client_id: u.trust for u in uploads if u.trust is not None},
            quality={i: q for i, q in released.items() if q is not None},
            **self.accuracy_fields(),
            **self.consensus_fields(consensus, y_eval_codes),
        )

    def received(self, uploads: Iterable[Upload]) -> None:
        """Note each private site's own ledger ε from what came back — refusals and
        replies the server then drops too — before the server votes (which may fail)."""
        for upload in uploads:
            if upload.site_epsilon is not None:
                self.site_epsilon[upload.client_id] = float(upload.site_epsilon)

    def accuracy_fields(self) -> dict[str, Any]:
        """Each client's latest accuracy, their mean and spread ({} before any)."""
        if not self.accuracy:
            return {}
        acc = {i: self.accuracy[i] for i in sorted(self.accuracy)}
        values = list(acc.values())
        return {
            "client_accuracy": acc,
            "mean_accuracy": float(np.mean(values)),
            "std_accuracy": float(np.std(values)),
        }

    def consensus_fields(
        self, consensus: Consensus, y_eval_codes: np.ndarray | None
    ) -> dict[str, Any]:
        """The prediction rule's accuracy over the latest predictions ({} before any)."""
        if not self.predictions or y_eval_codes is None:
            return {}
        ids = sorted(self.predictions)
        codes = np.stack([self.predictions[i][0] for i in ids])
        probas = [p for i in ids if (p := self.predictions[i][1]) is not None]
        soft = len(probas) == len(ids)
        quality = np.array([np.nan if (q := self.quality.get(i)) is None else q for i in ids])
        pred = aggregate(
            consensus, codes, np.stack(probas) if soft else None, self.n_classes, quality
        )
        return {"consensus_accuracy": float(np.mean(pred == y_eval_codes))}

    def state_dict(self) -> dict[str, Any]:
        """Everything kept, JSON-friendly but for the prediction arrays."""
        return {
            "site_epsilon": {str(i): e for i, e in self.site_epsilon.items()},
            "quality": {str(i): q for i, q in self.quality.items()},
            "predictions": {str(i): list(p) for i, p in self.predictions.items()},
            "accuracy": {str(i): a for i, a in self.accuracy.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put a :meth:`state_dict` back (a part a checkpoint lacks stays empty)."""
        self.site_epsilon = {int(i): float(e) for i, e in state.get("site_epsilon", {}).items()}
        self.quality = {
            int(i): None if q is None else float(q) for i, q in state.get("quality", {}).items()
        }
        self.predictions = {
            int(i): (np.asarray(c), None if p is None else np.asarray(p))
            for i, (c, p) in state.get("predictions", {}).items()
        }
        self.accuracy = {int(i): float(a) for i, a in state.get("accuracy", {}).items()}
