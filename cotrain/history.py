"""Per-round records of a federated run, as a list, a table or a plot."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class RoundRecord:
    """What happened in one communication round.

    Attributes
    ----------
    round : int
        Round number, starting at 1.
    clients : tuple of int
        Clients asked to take part this round (after participation sampling).
    failed : dict of int to str
        Clients that failed this round (``on_client_error="skip"``), with the error.
    timed_out : tuple of int
        Clients that did not answer within ``round_timeout`` (stragglers); they sit the
        round out. The clients that answered are ``clients`` minus these and ``failed``.
    coverage : float
        Share of the public pool that received a pseudo-label (qualified majority may
        abstain; 1.0 for majority voting).
    agreement : float
        Mean, over the labelled public examples, of the share of answering clients whose
        hard label equals the consensus label (argmax for soft consensus).
    changed : int or None
        Public examples whose consensus label (argmax, ``-1`` for abstain) differs from
        the previous round's; None in round 1.
    bytes_up, bytes_down : int
        Exact sizes of the encoded messages: client uploads summed over clients, and the
        previous consensus broadcast to this round's clients, each client's own message
        summed (with ``encoding="delta"`` a delta against the consensus it acknowledged).
    time_s : float
        Wall time of the round.
    learner_time_s : float
        Time spent inside the learners' own ``fit``/``predict``/``predict_proba``, summed
        over clients (with ``n_jobs > 1`` this can exceed ``time_s``).
    client_accuracy : dict of int to float
        Test accuracy of every fitted client on ``eval_set`` (empty without it).
    mean_accuracy, std_accuracy : float or None
        Mean and standard deviation of ``client_accuracy``.
    consensus_accuracy : float or None
        Test accuracy of the consensus of the local models on ``eval_set``.
    pseudo_label_accuracy : float or None
        Accuracy of the pseudo-labels against ``y_public`` (evaluation only), over the
        labelled public examples.
    epsilon : float or None
        Total ε spent up to this round by the client that spent most, for runs with a
        privacy accountant; None otherwise. What it protects is in ``epsilon_unit`` and
        ``epsilon_adversary`` (the run's headline guarantee, under add/remove neighbours
        whenever its mechanisms state it; see
        :meth:`cotrain.FederatedCoTrainer.privacy_report` for every guarantee, the
        replace-one ε and the assumptions).
    epsilon_unit : {"record", "label", "client"} or None
        ``"record"``: ε protects one private training record of a client; ``"label"``: one
        released public label (no guarantee about private data); ``"client"``: all of one
        client's data at once (DP-FedAvg's user-level DP).
    epsilon_adversary : {"server", "broadcast observers", "global model observers"} or None
        Against whom ``epsilon`` holds.
    trust : dict of int to float
        The weight each client gave the pseudo-labelled pool in this round's fit (see
        :mod:`cotrain.trust`; 1.0 is the paper's FedCT); empty in round 1, before any
        consensus. Clients of a deployment that keep it to themselves are absent. With
        :class:`~cotrain.trust.cross_fit.CrossFitTrust` (``trust="auto"``), the weight of the
        co-trained models in the client's own predictor (0: its local-only model).
    quality : dict of int to float
        Each client's out-of-fold accuracy on its own rows, as it sent it with its labels
        (what :class:`consensus.ReliabilityVote` weights its votes by); clients that sent
        none are absent.
    clusters : tuple of tuple of int
        Clustered co-training (``clustering=...``): the partition of all clients whose
        consensus each client received after this round, each cluster sorted, ordered by
        its smallest id; empty for a run without clustering.

    Examples
    --------
    >>> RoundRecord(round=1, clients=(0, 1), coverage=1.0, agreement=0.9).round
    1
    """

    round: int
    clients: tuple[int, ...] = ()
    failed: dict[int, str] = field(default_factory=dict)
    timed_out: tuple[int, ...] = ()
    coverage: float = float("nan")
    agreement: float = float("nan")
    changed: int | None = None
    bytes_up: int = 0
    bytes_down: int = 0
    time_s: float = 0.0
    learner_time_s: float = 0.0
    client_accuracy: dict[int, float] = field(default_factory=dict)
    mean_accuracy: float | None = None
    std_accuracy: float | None = None
    consensus_accuracy: float | None = None
    pseudo_label_accuracy: float | None = None
    epsilon: float | None = None
    epsilon_unit: str | None = None
    epsilon_adversary: str | None = None
    trust: dict[int, float] = field(default_factory=dict)
    quality: dict[int, float] = field(default_factory=dict)
    clusters: tuple[tuple[int, ...], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The record as JSON types (integer dict keys become strings).

        Examples
        --------
        >>> r = RoundRecord(round=2, clients=(0, 1), failed={1: "boom"}, clusters=((0,), (1,)))
        >>> r.to_json()["clusters"]
        [[0], [1]]
        >>> RoundRecord.from_json(r.to_json()) == r
        True
        """
        out = asdict(self)
        out["clients"], out["timed_out"] = list(self.clients), list(self.timed_out)
        out["failed"] = {str(k): v for k, v in self.failed.items()}
        out["client_accuracy"] = {str(k): v for k, v in self.client_accuracy.items()}
        out["trust"] = {str(k): v for k, v in self.trust.items()}
        out["quality"] = {str(k): v for k, v in self.quality.items()}
        out["clusters"] = [list(c) for c in self.clusters]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RoundRecord:
        """The inverse of :meth:`to_json`."""
        data = dict(data)
        data["clients"] = tuple(int(i) for i in data["clients"])
        data["timed_out"] = tuple(int(i) for i in data["timed_out"])
        data["failed"] = {int(k): v for k, v in data["failed"].items()}
        data["client_accuracy"] = {int(k): v for k, v in data["client_accuracy"].items()}
        data["trust"] = {int(k): v for k, v in data.get("trust", {}).items()}
        data["quality"] = {int(k): v for k, v in data.get("quality", {}).items()}
        data["clusters"] = tuple(tuple(int(i) for i in c) for c in data.get("clusters", ()))
        return cls(**data)


class History:
    """The records of a run, one per round; a table with :meth:`to_frame`.

    Examples
    --------
    >>> history = History()
    >>> history.append(RoundRecord(round=1, clients=(0, 1), bytes_up=94))
    >>> len(history), history[-1].bytes_up
    (1, 94)
    >>> int(history.to_frame().loc[0, "bytes_up"])
    94
    """

    def __init__(self) -> None:
        self.records: list[RoundRecord] = []

    def append(self, record: RoundRecord) -> None:
        """Add the record of a finished round."""
        self.records.append(record)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[RoundRecord]:
        return iter(self.records)

    def __getitem__(self, index: int) -> RoundRecord:
        return self.records[index]

    def __repr__(self) -> str:
        return f"History({len(self)} rounds)"

    def to_frame(self) -> Any:
        """Return a pandas DataFrame with one row per round.

        Per-client accuracies become columns ``accuracy_client_<id>``; ``clients`` and
        ``failed`` are kept as tuples and dicts, with counts in ``n_clients`` and
        ``n_failed``. A clustered run's ``clusters`` is a column of strings such as
        ``"0,1,2|3,4"`` (clusters split by ``|``), with their number in ``n_clusters``.
        """
        import pandas as pd

        rows = []
        for record in self.records:
            row = asdict(record)
            per_client = row.pop("client_accuracy")
            row.update({f"trust_client_{c}": w for c, w in sorted(row.pop("trust").items())})
            row.update({f"quality_client_{c}": q for c, q in sorted(row.pop("quality").items())})
            row["n_clients"] = len(record.clients)
            row["n_failed"] = len(record.failed)
            row["n_timed_out"] = len(record.timed_out)
            clusters = row.pop("clusters")
            if clusters:  # a string, so that a CSV keeps it readable
                row["clusters"] = "|".join(",".join(map(str, c)) for c in clusters)
                row["n_clusters"] = len(clusters)
            row.update({f"accuracy_client_{c}": acc for c, acc in sorted(per_client.items())})
            rows.append(row)
        return pd.DataFrame(rows)

    def plot(self, axes: Any = None) -> Any:
        """Plot accuracy and consensus quality over rounds (needs matplotlib).

        Parameters
        ----------
        axes : sequence of two matplotlib Axes, optional
            Where to draw; a new figure with two panels is made if omitted.

        Returns
        -------
        matplotlib.figure.Figure
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError('History.plot needs matplotlib: pip install "cotrain[plot]"') from err
        if axes is None:
            fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        else:
            fig = axes[0].figure
        rounds = np.array([r.round for r in self.records])
        acc_ax, cons_ax = axes
        mean = np.array([np.nan if r.mean_accuracy is None else r.mean_accuracy for r in self])
        std = np.array([np.nan if r.std_accuracy is None else r.std_accuracy for r in self])
        if np.isfinite(mean).any():
            acc_ax.plot(rounds, mean, marker="o", label="mean client accuracy")
            acc_ax.fill_between(rounds, mean - std, mean + std, alpha=0.2)
        for name, label in [
            ("consensus_accuracy", "consensus accuracy (test)"),
            ("pseudo_label_accuracy", "pseudo-label accuracy (public)"),
        ]:
            values = [getattr(r, name) for r in self]
            if any(v is not None for v in values):
                acc_ax.plot(rounds, [np.nan if v is None else v for v in values], label=label)
        acc_ax.set_xlabel("round")
        acc_ax.set_ylabel("accuracy")
        acc_ax.legend(loc="lower right")
        cons_ax.plot(rounds, [r.coverage for r in self], marker="o", label="coverage")
        cons_ax.plot(rounds, [r.agreement for r in self], marker="s", label="agreement")
        cons_ax.set_xlabel("round")
        cons_ax.set_ylim(0, 1.05)
        cons_ax.legend(loc="lower right")
        fig.tight_layout()
        return fig


class LearnerWarningSummary(UserWarning):
    """How often the clients' learners raised one warning during ``fit`` (a summary, in
    place of the warnings themselves)."""


def summarize_warnings(counts: Counter, stacklevel: int = 2) -> None:
    """Warn once per distinct learner warning, with how often and by which clients.

    Parameters
    ----------
    counts : Counter
        ``(client, category, message) -> count``, as the server collects them.
    stacklevel : int, default=2
        Passed to :func:`warnings.warn` (point it at the user's call).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     summarize_warnings(Counter({(0, "UserWarning", "odd"): 3,
    ...                                 (2, "UserWarning", "odd"): 1}))
    >>> str(caught[0].message)
    'UserWarning raised 4 times by clients [0, 2] during fit: odd'
    """
    by_message: dict[tuple[str, str], list[int]] = {}
    totals: Counter = Counter()
    for (client, category, message), n in counts.items():
        by_message.setdefault((category, message), []).append(client)
        totals[(category, message)] += n
    for (category, message), clients in by_message.items():
        warnings.warn(
            f"{category} raised {totals[(category, message)]} times by clients "
            f"{sorted(clients)} during fit: {message[:300]}",
            LearnerWarningSummary,
            stacklevel=stacklevel + 1,
        )
