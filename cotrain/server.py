"""The server half of a co-training round, shared by every way of running clients.

:class:`CoTrainingServer` holds what the server knows: the consensus, the wire format
and its delta state for each client, the current broadcast and the privacy ledger. It
never sees private data or models: its input is each client's :class:`Upload` — the
encoded message and its status. :class:`~cotrain.FederatedCoTrainer` drives it with
in-process, joblib or Ray clients, and :mod:`cotrain.flower` drives the same object
with Flower SuperNodes, so the round logic is written once.

A malformed upload (it does not decode, or it does not fit the federation: another
number of classes, another length, another kind of message) is a failure of the client
that sent it, handled by ``on_client_error`` like any other.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cotrain.broadcast import BroadcastEncoder, Downlink
from cotrain.history import RoundRecord
from cotrain.sampling import sample_clients
from cotrain.wire import MalformedMessage, WireFormat

__all__ = ["CoTrainingServer", "Upload", "hard_codes", "sample_clients"]


@dataclass
class Upload:
    """What one client sends the server in a round: all the server ever sees of it.

    Attributes
    ----------
    client_id : int
    message : bytes or None
        The encoded labels (None when the client failed before sending).
    error : BaseException or None
        The client's failure, reported instead of a message.
    warnings : Counter
        ``(category, message) -> count`` of its learner's warnings this round.
    learner_time_s : float
        Seconds its learner spent fitting and predicting.
    dp_event : dp_accounting.DpEvent or None
        The privacy event of this round's release, for a client whose model is trained
        privately (e.g. DP-SGD); the ledger composes it. None for every other client.
    broadcast_version : int or None
        The newest consensus version the client holds after this round (its
        acknowledgement, the reference of the next delta-coded broadcast; see
        :mod:`cotrain.broadcast`); None: no report, the server keeps what it had.
    quality : float or None
        The client's estimate of its own accuracy (out-of-fold on its private rows, from
        :class:`cotrain.trust.PseudoLabelTrust`); a consensus with ``uses_quality``
        weighs its votes by it. None: not sent (always, for a client with a privacy
        mechanism).
    """

    client_id: int
    message: bytes | None = None
    error: BaseException | None = None
    warnings: Counter = field(default_factory=Counter)
    learner_time_s: float = 0.0
    dp_event: Any = None
    broadcast_version: int | None = None
    quality: float | None = None


class CoTrainingServer:
    """Decode the uploads of a round, form the consensus, encode the next broadcast.

    Parameters
    ----------
    consensus : consensus.Consensus
        A fitted-per-run consensus object (called on the stacked labels).
    wire : cotrain.wire.WireFormat
        How labels travel (share, encoding, soft precision), with the number of classes
        and the size of the public pool.
    n_clients : int
        Clients in the federation (ids ``0 .. n_clients - 1``).
    on_client_error : {"raise", "skip"}
        A failed client (or a malformed upload) stops the run or sits the round out.
    min_clients : int
        Fewest answers a round may go on with.
    ledger : cotrain.privacy.ledger.PrivacyLedger, optional
        Accounts the ε of every client release.
    client_names : sequence of str, optional
        How errors name each client (default ``"client i"``).

    Examples
    --------
    >>> from consensus import MajorityVote
    >>> wire = WireFormat(n_classes=2, n_public=4)
    >>> server = CoTrainingServer(MajorityVote(), wire, n_clients=3)
    >>> uploads = [Upload(i, wire.encode_upload(np.array(v))) for i, v in
    ...            enumerate(([0, 1, 1, 0], [0, 1, 0, 0], [1, 1, 1, 0]))]
    >>> record, answered = server.finish_round(1, np.arange(3), uploads, started=0.0)
    >>> server.hard_consensus.tolist(), record.bytes_up, answered
    ([0, 1, 1, 0], 33, [0, 1, 2])
    """

    def __init__(
        self,
        consensus: Any,
        wire: WireFormat,
        n_clients: int,
        *,
        on_client_error: str = "raise",
        min_clients: int = 1,
        ledger: Any = None,
        client_names: Sequence[str] | None = None,
    ) -> None:
        self.consensus = consensus
        self.wire = wire
        self.on_client_error = on_client_error
        self.min_clients = min_clients
        self.ledger = ledger
        self.client_names = list(client_names or [f"client {i}" for i in range(n_clients)])
        self.receivers = [wire.receiver() for _ in range(n_clients)]
        #: the consensus broadcast and what each client acknowledged (delta coding)
        self.downlink = BroadcastEncoder(wire, n_clients)
        self.hard_consensus: np.ndarray | None = None
        self.warnings: Counter = Counter()

    @property
    def broadcast(self) -> bytes | None:
        """The full encoded consensus of the last round (None at first)."""
        return self.downlink.full

    def broadcast_bytes(self) -> bytes | None:
        """The full encoded consensus the clients of the next round receive (None at
        first); with delta coding each client receives :meth:`downlink_for` instead."""
        return self.downlink.full

    def downlink_for(self, client_id: int) -> Downlink:
        """The broadcast for one client of the next round: a delta against the consensus
        it acknowledged when ``encoding="delta"`` (and shorter), else the full message."""
        return self.downlink.message_for(client_id)

    @property
    def consensus_labels(self) -> np.ndarray | None:
        """The last consensus as the clients receive it (codes with -1, or probabilities
        at wire precision); None before the first round."""
        return self.wire.decode_broadcast(self.broadcast)

    def ref_round(self, client_id: int) -> int:
        """Round of the client's last upload this server decoded (0: none), which the
        client needs to delta-code its next upload against."""
        return self.receivers[client_id].ref_round

    def finish_round(
        self,
        t: int,
        sampled: np.ndarray,
        uploads: Sequence[Upload],
        timed_out: tuple[int, ...] = (),
        *,
        started: float,
        bytes_down: int = 0,
    ) -> tuple[RoundRecord, list[int]]:
        """Collect the uploads of round ``t``, vote, and record the round.

        Parameters
        ----------
        t : int
            Round number (from 1).
        sampled : ndarray of int
            The clients asked this round.
        uploads : sequence of Upload
            The answers that came back (failed ones carry ``error``).
        timed_out : tuple of int
            Clients that did not answer in time.
        started : float
            ``time.perf_counter()`` when the round began.
        bytes_down : int, default=0
            The bytes of the broadcasts sent this round (each client's own message).

        Returns
        -------
        record : RoundRecord
            Without accuracies (the caller adds those it can measure).
        answered : list of int
            The clients whose labels were used, in order.
        """
        ids, labels, failed = self._collect(t, uploads, timed_out, n_asked=len(sampled))
        votes = np.stack(labels)
        if self.ledger is not None:
            by_client = {u.client_id: u for u in uploads}
            self.ledger.record(ids, {int(i): by_client[int(i)].dp_event for i in ids})
        if getattr(self.consensus, "uses_quality", False):
            by_client = {u.client_id: u.quality for u in uploads}
            quality = np.array(
                [np.nan if by_client[int(i)] is None else by_client[int(i)] for i in ids]
            )
            weights = self.consensus.weights_for(ids, self.wire.n_public, quality=quality)
        else:
            weights = self.consensus.weights_for(ids, self.wire.n_public)
        pseudo = self.consensus(votes, n_classes=self.wire.n_classes, weights=weights)
        self.consensus.observe(ids, votes, pseudo)  # stateful rules learn from each round
        for upload in uploads:  # what each client now holds: the next delta's reference
            if upload.broadcast_version is not None:
                self.downlink.acknowledge(upload.client_id, upload.broadcast_version)
        self.downlink.publish(t, pseudo)

        hard = hard_codes(pseudo)
        changed = None if self.hard_consensus is None else int(np.sum(hard != self.hard_consensus))
        self.hard_consensus = hard
        covered = hard >= 0
        client_hard = np.stack([hard_codes(lab) for lab in labels])
        by_id = {u.client_id: u for u in uploads}
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
            bytes_up=sum(len(by_id[i].message) for i in ids),
            bytes_down=int(bytes_down),
            time_s=time.perf_counter() - started,
            learner_time_s=sum(u.learner_time_s for u in uploads),
            epsilon=None if self.ledger is None else self.ledger.max_epsilon(),
            epsilon_unit=None if self.ledger is None else self.ledger.headline.unit,
            epsilon_adversary=None if self.ledger is None else self.ledger.headline.adversary,
        )
        return record, [int(i) for i in ids]

    def _collect(
        self, t: int, uploads: Sequence[Upload], timed_out: tuple[int, ...], n_asked: int
    ) -> tuple[np.ndarray, list[np.ndarray], dict[int, str]]:
        """Summarise warnings, decode each upload; raise or skip failures and malformed
        uploads; enforce ``min_clients``."""
        ids, labels, failed = [], [], {}
        for upload in sorted(uploads, key=lambda u: u.client_id):
            i = upload.client_id
            for (category, message), n in upload.warnings.items():
                self.warnings[(i, category, message)] += n
            error = upload.error
            if error is None:
                try:
                    if self.ledger is not None:  # before decoding: a refused upload changes nothing
                        problem = self.ledger.report_problem(upload.dp_event)
                        if problem is not None:
                            raise MalformedMessage(problem)
                    labels.append(self.receivers[i].decode(upload.message, t))
                    ids.append(i)
                    continue
                except MalformedMessage as err:
                    error = err
            if self.on_client_error == "raise":
                what = "sent a malformed upload" if upload.error is None else "failed"
                raise RuntimeError(
                    f"{self.client_names[i]} {what} in round {t}: {type(error).__name__}: {error}"
                ) from error
            failed[i] = f"{type(error).__name__}: {error}"
        if len(ids) < self.min_clients:
            raise RuntimeError(
                f"round {t}: only {len(ids)} of {n_asked} sampled clients answered, "
                f"fewer than min_clients={self.min_clients}; failures: {failed}; "
                f"timed out: {list(timed_out)}"
            )
        return np.array(ids, dtype=np.int64), labels, failed

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """What the server knows between rounds (arrays, JSON values and the broadcast
        bytes), for checkpoints."""
        return {
            "broadcast": self.broadcast,
            "downlink": self.downlink.state_dict(),
            "hard_consensus": self.hard_consensus,
            "receivers": [r.state_dict() for r in self.receivers],
            "warnings": [[*key, n] for key, n in self.warnings.items()],
            "consensus": self.consensus.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        downlink = state.get("downlink")  # a checkpoint from before delta broadcasts: none
        if downlink is None:
            downlink = {"version": 0, "acked": [0] * len(self.receivers), "versions": [],
                        "codes": []}  # fmt: skip
        self.downlink.load_state_dict(downlink, state["broadcast"])
        self.hard_consensus = state["hard_consensus"]
        for receiver, s in zip(self.receivers, state["receivers"], strict=True):
            receiver.load_state_dict(s)
        self.warnings = Counter({(c, cat, msg): n for c, cat, msg, n in state["warnings"]})
        self.consensus.load_state_dict(state["consensus"])


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
