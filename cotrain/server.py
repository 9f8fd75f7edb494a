"""The server half of a co-training round, shared by every way of running clients.

:class:`CoTrainingServer` holds what the server knows: the consensus, the last message
of each client (delta coding's reference), the current broadcast and the privacy
ledger. It never sees private data or models: its input is the clients' encoded
messages. :class:`~cotrain.FederatedCoTrainer` drives it with in-process, joblib or Ray
clients, and :mod:`cotrain.flower` drives the same object with Flower SuperNodes, so the
round logic is written once.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from cotrain.client import StepResult, decode_labels
from cotrain.compact import DeltaDecoder, QuantizedSoftLabels
from cotrain.history import RoundRecord
from cotrain.messages import HardLabels, SoftLabels


class CoTrainingServer:
    """Decode the uploads of a round, form the consensus, encode the next broadcast.

    Parameters
    ----------
    consensus : consensus.Consensus
        A fitted-per-run consensus object (called on the stacked labels).
    n_classes : int
        Size of the global label space.
    n_clients : int
        Clients in the federation (ids ``0 .. n_clients - 1``).
    n_public : int
        Rows of the public pool.
    share, encoding, soft_dtype, soft_bits :
        The wire format, as in :class:`~cotrain.FederatedCoTrainer`.
    on_client_error : {"raise", "skip"}
        A failed client stops the run or sits the round out.
    min_clients : int
        Fewest answers a round may go on with.
    ledger : cotrain.privacy.ledger.PrivacyLedger, optional
        Accounts the ε of every client release.
    client_names : sequence of str, optional
        How errors name each client (default ``"client i"``).

    Examples
    --------
    >>> from consensus import MajorityVote
    >>> server = CoTrainingServer(MajorityVote(), n_classes=2, n_clients=3, n_public=4)
    >>> uploads = [HardLabels(np.array(v), 2).to_bytes() for v in
    ...            ([0, 1, 1, 0], [0, 1, 0, 0], [1, 1, 1, 0])]
    >>> results = [StepResult(i, message=m) for i, m in enumerate(uploads)]
    >>> record, answered = server.finish_round(1, np.arange(3), results, started=0.0)
    >>> server.hard_consensus.tolist(), record.bytes_up
    ([0, 1, 1, 0], 33)
    """

    def __init__(
        self,
        consensus: Any,
        n_classes: int,
        n_clients: int,
        n_public: int,
        *,
        share: str = "hard",
        encoding: str = "packed",
        soft_dtype: str = "float32",
        soft_bits: int | None = None,
        on_client_error: str = "raise",
        min_clients: int = 1,
        ledger: Any = None,
        client_names: Sequence[str] | None = None,
    ) -> None:
        self.consensus = consensus
        self.n_classes = n_classes
        self.n_public = n_public
        self.share = share
        self.encoding = encoding
        self.soft_dtype = soft_dtype
        self.soft_bits = soft_bits
        self.on_client_error = on_client_error
        self.min_clients = min_clients
        self.ledger = ledger
        self.client_names = list(client_names or [f"client {i}" for i in range(n_clients)])
        self.uplink = [DeltaDecoder() for _ in range(n_clients)]
        self.broadcast: HardLabels | SoftLabels | None = None
        self.hard_consensus: np.ndarray | None = None
        self.warnings: Counter = Counter()

    def broadcast_bytes(self) -> bytes | None:
        """The encoded consensus the clients of the next round receive (None at first)."""
        return None if self.broadcast is None else self.broadcast.to_bytes()

    def finish_round(
        self,
        t: int,
        sampled: np.ndarray,
        results: list[StepResult],
        timed_out: tuple[int, ...] = (),
        *,
        started: float,
        broadcast: bytes | None = None,
    ) -> tuple[RoundRecord, list[StepResult]]:
        """Collect the answers of round ``t``, vote, and record the round.

        Parameters
        ----------
        t : int
            Round number (from 1).
        sampled : ndarray of int
            The clients asked this round.
        results : list of StepResult
            The answers that came back (failed ones carry ``error``).
        timed_out : tuple of int
            Clients that did not answer in time.
        started : float
            ``time.perf_counter()`` when the round began.
        broadcast : bytes, optional
            The broadcast this round's clients received (for the byte count).

        Returns
        -------
        record : RoundRecord
            Without accuracies (the caller adds those it can measure).
        answered : list of StepResult
            The results that were used, in client order.
        """
        answered, failed = self._collect(t, results, timed_out, n_asked=len(sampled))
        labels = np.stack([self._decode_upload(r) for r in answered])
        ids = np.array([r.client_id for r in answered])
        if self.ledger is not None:
            self.ledger.record(ids)
        weights = self.consensus.weights_for(ids, self.n_public)
        pseudo = self.consensus(labels, n_classes=self.n_classes, weights=weights)
        observe = getattr(self.consensus, "observe", None)
        if callable(observe):  # stateful rules (reputation) learn from each round
            observe(ids, labels, pseudo)
        self.broadcast = self._encode_broadcast(pseudo)

        hard = hard_codes(pseudo)
        changed = None if self.hard_consensus is None else int(np.sum(hard != self.hard_consensus))
        self.hard_consensus = hard
        covered = hard >= 0
        client_hard = np.stack([hard_codes(lab) for lab in labels])
        record = RoundRecord(
            round=t,
            clients=tuple(int(i) for i in sampled),
            failed=failed,
            timed_out=tuple(timed_out),
            coverage=float(covered.mean()),
            agreement=float((client_hard[:, covered] == hard[covered]).mean())
            if covered.any()
            else float("nan"),
            changed=changed,
            bytes_up=sum(len(r.message) for r in answered),
            bytes_down=0 if broadcast is None else len(broadcast) * len(sampled),
            time_s=time.perf_counter() - started,
            learner_time_s=sum(r.learner_time_s for r in results),
            epsilon=None if self.ledger is None else self.ledger.max_epsilon(),
        )
        return record, answered

    def _collect(
        self, t: int, results: list[StepResult], timed_out: tuple[int, ...], n_asked: int
    ) -> tuple[list[StepResult], dict[int, str]]:
        """Summarise warnings; raise or skip failures; enforce ``min_clients``."""
        answered, failed = [], {}
        for r in sorted(results, key=lambda r: r.client_id):
            for (category, message), n in r.warnings.items():
                self.warnings[(r.client_id, category, message)] += n
            if r.error is not None:
                if self.on_client_error == "raise":
                    raise RuntimeError(
                        f"{self.client_names[r.client_id]} failed in round {t}: "
                        f"{type(r.error).__name__}: {r.error}"
                    ) from r.error
                failed[r.client_id] = f"{type(r.error).__name__}: {r.error}"
                continue
            answered.append(r)
        if len(answered) < self.min_clients:
            raise RuntimeError(
                f"round {t}: only {len(answered)} of {n_asked} sampled clients answered, "
                f"fewer than min_clients={self.min_clients}; failures: {failed}; "
                f"timed out: {list(timed_out)}"
            )
        return answered, failed

    def _decode_upload(self, result: StepResult) -> np.ndarray:
        """A client's labels from its message (delta messages against its last upload)."""
        if self.encoding == "delta" and self.share == "hard":
            return self.uplink[result.client_id].decode(result.message)
        return decode_labels(result.message)

    def _encode_broadcast(self, pseudo: np.ndarray) -> HardLabels | SoftLabels:
        if pseudo.ndim == 1:
            return HardLabels(pseudo, self.n_classes, allow_abstain=True)
        if self.soft_bits is not None:
            return QuantizedSoftLabels(pseudo, bits=self.soft_bits)
        return SoftLabels(pseudo, dtype=self.soft_dtype)


def hard_codes(labels: np.ndarray) -> np.ndarray:
    """Hard codes of a label array: itself if 1-D, argmax (-1 for NaN rows) if soft.

    Examples
    --------
    >>> hard_codes(np.array([[0.2, 0.8], [np.nan, np.nan]])).tolist()
    [1, -1]
    """
    if labels.ndim == 1:
        return labels.astype(np.int64)
    absent = np.isnan(labels).any(axis=-1)
    return np.where(absent, -1, np.argmax(np.nan_to_num(labels, nan=-1.0), axis=-1))


def sample_clients(
    rng: np.random.Generator, n_clients: int, participation: float, min_clients: int
) -> np.ndarray:
    """The clients asked this round: all of them, or a sorted random subset.

    Examples
    --------
    >>> sample_clients(np.random.default_rng(0), 10, 0.3, 1).tolist()
    [5, 6, 9]
    """
    k = max(min_clients, round(participation * n_clients))
    if k >= n_clients:
        return np.arange(n_clients)
    return np.sort(rng.choice(n_clients, size=k, replace=False))
