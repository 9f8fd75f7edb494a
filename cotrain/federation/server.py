"""The server half of a co-training round, shared by every way of running clients.

:class:`CoTrainingServer` holds what the server knows: the consensus (one per cluster,
as formed), the wire format and its delta state for each client, and the privacy
ledger. It never sees private data or models. A round is two calls, as in Flower's
configure/aggregate: :meth:`~CoTrainingServer.configure_round` hands each sampled
client its one :class:`~cotrain.wire.broadcast.Downlink`, and
:meth:`~CoTrainingServer.finish_round` takes each client's :class:`~cotrain.wire.upload.Upload` —
the encoded
message and its status — and forms the next consensus. :class:`~cotrain.FederatedCoTrainer`
drives it with in-process, joblib or Ray clients, and :mod:`cotrain.flower` drives the
same object with Flower SuperNodes, so the round logic is written once; both build it
with :func:`cotrain.federation.setup.build_server`.

A malformed upload (it does not decode, or it does not fit the federation: another
number of classes, another length, another kind of message) is a failure of the client
that sent it, handled by ``on_client_error`` like any other.

With a ``clustering`` rule (:mod:`cotrain.clustering`) the server keeps a partition of
the clients, splits a cluster whose clients label U in incompatible ways, forms one
consensus per cluster with the same consensus rule, and sends each client its own
cluster's consensus; the round record names the clusters.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from cotrain.clustering import AgreementClustering, get_clustering
from cotrain.history import RoundRecord
from cotrain.wire.broadcast import BroadcastEncoder, Downlink
from cotrain.wire.format import MalformedMessage, WireFormat
from cotrain.wire.upload import Upload

__all__ = ["CoTrainingServer", "TooFewClients", "hard_codes"]


class TooFewClients(RuntimeError):
    """Fewer clients answered than ``min_clients`` (in a round, or a deployment's handshake).

    In process it ends ``fit``; a Flower deployment ends its run there instead, keeping the
    rounds before it (:meth:`cotrain.flower.server_app.FlowerCoTraining.run`).
    """


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
    ledger : cotrain.privacy.ledgers.ledger.PrivacyLedger, optional
        Accounts the ε of every client release.
    client_names : sequence of str, optional
        How errors name each client (default ``"client i"``).
    clustering : None, "agreement" or cotrain.clustering.AgreementClustering, optional
        Clustered co-training: one consensus per cluster of clients that label alike
        (:attr:`clusters`); None: one consensus for all (plain FedCT). The headline
        consensus (:attr:`hard_consensus`, :attr:`consensus_labels`) is then the largest
        cluster's.

    Attributes
    ----------
    cluster_consensus : list of ndarray or None
        Each cluster's last consensus as the rule formed it (codes with -1, or soft
        targets): the one form the server keeps. :attr:`hard_consensus` and
        :attr:`consensus_labels` are derived from it, and each client's broadcast is
        its encoding.

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
    >>> link = server.configure_round(2, [0, 2])[2]  # what client 2 receives in round 2
    >>> wire.decode_broadcast(link.data).tolist(), link.ref_round
    ([0, 1, 1, 0], 1)
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
        clustering: AgreementClustering | str | None = None,
    ) -> None:
        self.consensus = consensus
        self.clustering = get_clustering(clustering)
        #: the partition of the clients (one cluster of all without clustering)
        self.clusters: tuple[tuple[int, ...], ...] = (tuple(range(n_clients)),)
        #: clients that missed the split of their cluster: listed with its largest side,
        #: sent no pseudo-labels, placed by their labels when they next answer
        self.pending: set[int] = set()
        #: each cluster's last consensus (as formed: codes, or soft targets)
        self.cluster_consensus: list[np.ndarray | None] = [None]
        #: where every consensus abstains, for the clustering to compare labels on
        self.probe = None if self.clustering is None else self.clustering.probe_mask(wire.n_public)
        self.wire = wire
        self.on_client_error = on_client_error
        self.min_clients = min_clients
        self.ledger = ledger
        self.client_names = list(client_names or [f"client {i}" for i in range(n_clients)])
        self.receivers = [wire.receiver() for _ in range(n_clients)]
        #: the encoded broadcasts and the consensus version each client acknowledged
        #: (what the next delta-coded broadcast to it refers to)
        self.encoder = BroadcastEncoder(wire, n_clients)
        self.warnings: Counter = Counter()

    # ------------------------------------------------------------ consensus
    @property
    def hard_consensus(self) -> np.ndarray | None:
        """The headline consensus (the largest cluster's) as hard codes, -1 where it
        abstained (argmax of a soft one); None before the first round."""
        pseudo = self._headline()
        return None if pseudo is None else hard_codes(pseudo)

    @property
    def consensus_labels(self) -> np.ndarray | None:
        """The headline consensus as the clients receive it (codes with -1, or
        probabilities at wire precision); None before the first round."""
        pseudo = self._headline()
        return (
            None
            if pseudo is None
            else self.wire.decode_broadcast(self.wire.encode_broadcast(pseudo))
        )

    def _headline(self) -> np.ndarray | None:
        """The largest cluster's consensus as formed (None before the first round)."""
        if all(p is None for p in self.cluster_consensus):
            return None
        return self.cluster_consensus[self._largest()]

    # ---------------------------------------------------------------- round
    def configure_round(self, t: int, sampled: Any) -> dict[int, Downlink]:
        """What each client sampled for round ``t`` receives: its one downlink.

        Each :class:`~cotrain.wire.broadcast.Downlink` carries the last consensus (the
        client's own cluster's under clustering; delta-coded against the version the
        client acknowledged when ``encoding="delta"`` and that is shorter, else in full;
        None before the first consensus) and ``ref_round``, the round of the client's
        last upload this server decoded, which its next delta-coded upload refers to.
        It changes nothing on the server; :meth:`finish_round` takes the answers.

        Parameters
        ----------
        t : int
            The round about to run (after the round of the last consensus).
        sampled : array-like of int
            The clients asked this round.

        Returns
        -------
        dict
            ``client id -> Downlink``, in the order of ``sampled``.

        Raises
        ------
        TypeError
            If ``t`` is not an int.
        ValueError
            If ``t`` is not after the last consensus's round, or ``sampled`` names a
            client outside the federation.

        Examples
        --------
        >>> from consensus import MajorityVote
        >>> server = CoTrainingServer(MajorityVote(), WireFormat(2, 4), n_clients=2)
        >>> server.configure_round(1, [1])
        {1: Downlink(data=None, ref=0, ref_round=0)}
        """
        if isinstance(t, bool) or not isinstance(t, int | np.integer):
            raise TypeError(f"t must be an int (the round), got {type(t).__name__}")
        if t <= self.encoder.version:
            raise ValueError(
                f"t={t}: the server holds the consensus of round {self.encoder.version}; "
                "configure the round after it"
            )
        ids = np.asarray(sampled)
        n = len(self.receivers)
        if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
            raise ValueError(f"sampled must be a 1-D array of client ids, got {sampled!r}")
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            raise ValueError(f"sampled must hold client ids in [0, {n}), got {ids.tolist()}")
        return {
            int(i): replace(
                self.encoder.message_for(int(i)), ref_round=self.receivers[int(i)].ref_round
            )
            for i in ids
        }

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
        quality: np.ndarray | None = None
        if getattr(self.consensus, "uses_quality", False):
            reported = {u.client_id: u.quality for u in uploads}
            quality = np.array(
                [np.nan if reported[int(i)] is None else reported[int(i)] for i in ids]
            )
        client_hard = np.stack([hard_codes(lab) for lab in labels])
        previous = self._received()  # what every client was sent last round
        if self.clustering is not None:
            self._place_pending(ids, client_hard)
            self._split(ids, votes, client_hard)
        for k, cluster in enumerate(self.clusters):  # one consensus per cluster
            rows = np.isin(ids, cluster)
            if rows.all():  # every answer (plain FedCT): the arrays themselves
                self.cluster_consensus[k] = self._vote(ids, votes, quality)
            elif rows.any():  # else: a cluster none of whose clients answered keeps its own
                self.cluster_consensus[k] = self._vote(
                    ids[rows], votes[rows], None if quality is None else quality[rows]
                )
        for upload in uploads:  # what each client now holds: the next delta's reference
            if upload.broadcast_version is not None:
                self.encoder.acknowledge(upload.client_id, upload.broadcast_version)
        pseudo = self._headline()
        received = self._received()
        if pseudo is None or received is None:  # pragma: no cover - min_clients >= 1 voted
            raise RuntimeError(f"round {t}: no consensus was formed")
        if self.clustering is None:
            self.encoder.publish(t, pseudo)
        else:
            groups = [pseudo if p is None else p for p in self.cluster_consensus]
            if self.pending:  # clients waiting to be placed: an all-abstaining consensus
                groups.append(_abstain(pseudo))
            self.encoder.publish(t, pseudo, groups=(self._member(), groups))

        member, codes = received
        changed = None if previous is None else _changed(previous, (member, codes))
        got = np.stack([codes[member[i]] for i in ids])  # each answer's own consensus
        covered = got >= 0
        by_id = {u.client_id: u for u in uploads}
        record = RoundRecord(
            round=t,
            clients=tuple(int(i) for i in sampled),
            failed=failed,
            timed_out=tuple(timed_out),
            coverage=float(covered.mean()),
            agreement=float((client_hard[covered] == got[covered]).mean())
            if covered.any()
            else float("nan"),
            changed=changed,
            bytes_up=sum(len(by_id[i].message or b"") for i in ids),
            bytes_down=int(bytes_down),
            time_s=time.perf_counter() - started,
            learner_time_s=sum(u.learner_time_s or 0.0 for u in uploads),  # None: not sent
            epsilon=None if self.ledger is None else self.ledger.max_epsilon(),
            epsilon_unit=None if self.ledger is None else self.ledger.headline.unit,
            epsilon_adversary=None if self.ledger is None else self.ledger.headline.adversary,
            clusters=() if self.clustering is None else self.clusters,
        )
        return record, [int(i) for i in ids]

    def publish_round(
        self,
        t: int,
        sampled: np.ndarray,
        codes: np.ndarray,
        failed: dict[int, str],
        timed_out: tuple[int, ...] = (),
        *,
        started: float,
        bytes_up: int,
        bytes_down: int,
        acknowledged: dict[int, Any],
        epsilon: float | None,
    ) -> RoundRecord:
        """Publish a consensus the server formed from summed votes (a secure-sum round,
        :class:`cotrain.federation.rounds.SecureRound`) and record the round.

        The server saw no client's own labels, so the record's ``agreement`` is NaN;
        ``coverage`` is the share of U that carries a label.
        """
        previous = self.hard_consensus
        now = np.asarray(codes, dtype=np.int64).copy()
        self.cluster_consensus = [now]
        for i, version in acknowledged.items():
            if version is not None:
                self.encoder.acknowledge(int(i), version)
        self.encoder.publish(t, now)
        return RoundRecord(
            round=t,
            clients=tuple(int(i) for i in sampled),
            failed=dict(failed),
            timed_out=tuple(timed_out),
            coverage=float(np.mean(now >= 0)),
            agreement=float("nan"),
            changed=None if previous is None else int(np.sum(previous != now)),
            bytes_up=int(bytes_up),
            bytes_down=int(bytes_down),
            time_s=time.perf_counter() - started,
            epsilon=epsilon,
            epsilon_unit="record",
            epsilon_adversary="server",
        )

    # ------------------------------------------------------------- clusters
    def _vote(self, ids: np.ndarray, votes: np.ndarray, quality: np.ndarray | None) -> np.ndarray:
        """The consensus rule on the answers ``ids`` (one cluster's, or everyone's),
        abstaining on the clustering's probe."""
        if quality is not None:
            extra = {"n_classes": self.wire.n_classes} if _needs_classes(self.consensus) else {}
            weights = self.consensus.weights_for(ids, self.wire.n_public, quality=quality, **extra)
        else:
            weights = self.consensus.weights_for(ids, self.wire.n_public)
        pseudo = self.consensus(votes, n_classes=self.wire.n_classes, weights=weights)
        self.consensus.observe(ids, votes, pseudo)  # stateful rules learn from each round
        if self.probe is not None:
            pseudo = np.array(pseudo, dtype=np.float64 if pseudo.ndim == 2 else pseudo.dtype)
            pseudo[self.probe] = np.nan if pseudo.ndim == 2 else -1
        return pseudo

    def _member(self) -> np.ndarray:
        """Client id -> index of its cluster."""
        member = np.zeros(len(self.receivers), dtype=np.int64)
        for k, cluster in enumerate(self.clusters):
            member[list(cluster)] = k
        member[sorted(self.pending)] = len(self.clusters)  # sent no pseudo-labels
        return member

    def _largest(self) -> int:
        """The cluster with the most clients that has a consensus (ties: the first)."""
        sizes = [
            len(c) if p is not None else -1
            for c, p in zip(self.clusters, self.cluster_consensus, strict=True)
        ]
        return int(np.argmax(sizes))

    def _received(self) -> tuple[np.ndarray, list[np.ndarray]] | None:
        """``(member, hard codes of each cluster)``: what each client was last sent."""
        fallback = self._headline()
        if fallback is None:  # before the first round
            return None
        codes = [hard_codes(fallback if p is None else p) for p in self.cluster_consensus]
        return self._member(), [*codes, np.full(self.wire.n_public, -1)]

    def _place_pending(self, ids: np.ndarray, client_hard: np.ndarray) -> None:
        """Move each pending client that answered to the cluster whose consensus its labels
        agree with most (thesis Alg. 13, with each cluster's consensus standing for it).

        A pending client missed the round its cluster split; it was sent no pseudo-labels
        since, so its labels are its own model's."""
        for row, i in enumerate(int(i) for i in ids):
            if i not in self.pending:
                continue
            self.pending.discard(i)
            scores = []
            for pseudo in self.cluster_consensus:
                codes = np.full(len(client_hard[row]), -1) if pseudo is None else hard_codes(pseudo)
                both = codes >= 0
                scores.append(np.mean(client_hard[row][both] == codes[both]) if both.any() else -1)
            best = int(np.argmax(scores))
            clusters = [tuple(j for j in c if j != i) for c in self.clusters]
            clusters[best] = tuple(sorted((*clusters[best], i)))
            keep = [k for k, c in enumerate(clusters) if c]
            order = sorted(keep, key=lambda k: clusters[k][0])
            self.clusters = tuple(clusters[k] for k in order)
            self.cluster_consensus = [self.cluster_consensus[k] for k in order]

    def _split(self, ids: np.ndarray, votes: np.ndarray, client_hard: np.ndarray) -> None:
        """Split every cluster whose answers meet the clustering rule's criterion."""
        rule, n_classes = self.clustering, self.wire.n_classes
        if rule is None:  # pragma: no cover - called only with a clustering rule
            raise RuntimeError("_split needs a clustering rule")
        clusters: list[tuple[int, ...]] = []
        consensus: list[np.ndarray | None] = []
        for cluster, pseudo in zip(self.clusters, self.cluster_consensus, strict=True):
            rows = np.isin(ids, cluster)
            probe = slice(None) if self.probe is None else self.probe
            settled = rule.stationary is None or (
                pseudo is not None
                and rows.any()
                and _drift(client_hard[rows], pseudo, n_classes, self.probe) <= rule.stationary
            )
            parts: tuple[tuple[int, ...], ...] = (cluster,)
            if settled and rows.sum() >= 2:
                parts = rule.split(votes[rows][:, probe], ids[rows], n_classes) or parts
            if len(parts) == 1:
                parts = (cluster,)
            else:  # clients that did not answer wait (pending) with the largest side
                rest = sorted(set(cluster) - {int(i) for i in ids[rows]})
                self.pending |= set(rest)
                big = max(range(len(parts)), key=lambda j: (len(parts[j]), -parts[j][0]))
                parts = tuple(
                    tuple(sorted(p + tuple(rest))) if j == big else p for j, p in enumerate(parts)
                )
            clusters += parts
            consensus += [pseudo] * len(parts)  # a new cluster starts from its parent's
        order = sorted(range(len(clusters)), key=lambda j: clusters[j][0])
        self.clusters = tuple(clusters[j] for j in order)
        self.cluster_consensus = [consensus[j] for j in order]

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
            raise TooFewClients(
                f"round {t}: only {len(ids)} of {n_asked} sampled clients answered, "
                f"fewer than min_clients={self.min_clients}; failures: {failed}; "
                f"timed out: {list(timed_out)}"
            )
        return np.array(ids, dtype=np.int64), labels, failed

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """What the server knows between rounds (arrays, JSON values and the full
        broadcast's bytes), for checkpoints."""
        return {
            "broadcast": self.encoder.full,
            "downlink": self.encoder.state_dict(),
            "receivers": [r.state_dict() for r in self.receivers],
            "warnings": [[*key, n] for key, n in self.warnings.items()],
            "consensus": self.consensus.state_dict(),
            "clusters": [list(c) for c in self.clusters],
            "cluster_consensus": list(self.cluster_consensus),
            "pending": sorted(self.pending),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        downlink = state.get("downlink")  # a checkpoint from before delta broadcasts: none
        if downlink is None:
            downlink = {
                "version": 0,
                "acked": [0] * len(self.receivers),
                "versions": [],
                "codes": [],
            }
        self.encoder.load_state_dict(downlink, state["broadcast"])
        for receiver, s in zip(self.receivers, state["receivers"], strict=True):
            receiver.load_state_dict(s)
        self.warnings = Counter({(c, cat, msg): n for c, cat, msg, n in state["warnings"]})
        self.consensus.load_state_dict(state["consensus"])
        if "clusters" in state:
            self.clusters = tuple(tuple(int(i) for i in c) for c in state["clusters"])
            self.cluster_consensus = [
                None if p is None else np.asarray(p) for p in state["cluster_consensus"]
            ]
            self.pending = {int(i) for i in state.get("pending", [])}
        else:  # a checkpoint from before clustered co-training: one cluster
            self.cluster_consensus = [self.wire.decode_broadcast(state["broadcast"])]


def _abstain(pseudo: np.ndarray) -> np.ndarray:
    """A consensus that abstains everywhere, shaped like ``pseudo``."""
    pseudo = np.asarray(pseudo)
    return np.full(pseudo.shape, np.nan) if pseudo.ndim == 2 else np.full(pseudo.shape, -1)


def _drift(
    client_hard: np.ndarray, pseudo: np.ndarray, n_classes: int, probe: np.ndarray | None
) -> float:
    """Share of U (off the probe) on which the plain majority of ``client_hard`` differs
    from ``pseudo`` (label space's norm of the mean update, thesis (6.28))."""
    from consensus import majority_vote

    moved = majority_vote(client_hard, n_classes) != hard_codes(pseudo)
    return float(np.mean(moved if probe is None else moved[~probe]))


def _changed(
    before: tuple[np.ndarray, list[np.ndarray]], after: tuple[np.ndarray, list[np.ndarray]]
) -> int:
    """Public examples whose label (argmax, -1 for abstain) changed for some client
    between two rounds' consensus (one per cluster)."""
    pairs = np.unique(np.stack([before[0], after[0]], axis=1), axis=0)
    moved = np.stack([before[1][a] != after[1][b] for a, b in pairs])
    return int(np.sum(moved.any(axis=0)))


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


def _needs_classes(consensus: Any) -> bool:
    """Whether the rule's ``weights_for`` takes ``n_classes=`` (a reliability vote)."""
    rule = getattr(consensus, "base", consensus)
    if isinstance(rule, str):
        return rule.strip().lower() in ("reliability", "reliability_vote")
    return bool(getattr(rule, "weights_need_n_classes", False))
