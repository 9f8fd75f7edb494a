"""The two round protocols, each written once over a transport, and the choice between them.

A transport is a :class:`~cotrain.federation.transport.Transport`.

A privacy mechanism declares the round it needs (``round_protocol``, see
:class:`~cotrain.privacy.mechanisms.base.LabelMechanism`); :func:`make_round` builds it for
the in-process federation (:class:`~cotrain.federation.simulation.SimulatedFederation`) and
the Flower ServerApp alike, so the two run the same code and differ only in their transport:

- :class:`LabelRound` (``"labels"``, every mechanism but the secure sum, and no mechanism):
  each site gets its downlink and uploads its labels; the server decodes, votes and records;
- :class:`SecureRound` (``"secure-sum"``,
  :class:`~cotrain.privacy.mechanisms.secure_votes.SecureTeacherVotes`): the server chooses
  the queries, the sites send noisy vote shares of which the server learns only the sum, the
  server keeps the confident queries and asks for their answer shares, and the answer sum's
  argmax becomes the consensus. The server's code below only ever holds sums.

Both end with the same bookkeeping
(:class:`~cotrain.federation.bookkeeping.RoundBookkeeping`): each private site's own ε, the
trust and quality released, each site's accuracy and the federation's.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, Protocol

import numpy as np

from cotrain.federation.bookkeeping import RoundBookkeeping
from cotrain.federation.secure_sum import SummedShares, VoteSums, confident_answers
from cotrain.federation.server import CoTrainingServer
from cotrain.federation.transport import Transport
from cotrain.history import RoundRecord
from cotrain.privacy.ledgers.secure_ledger import SecureVotesLedger
from cotrain.privacy.mechanisms.secure_votes import SecurePlan

__all__ = [
    "LabelRound",
    "Round",
    "SecureRound",
    "check_secure_run",
    "client_class",
    "make_round",
    "round_protocol",
]


def round_protocol(privacy: Any) -> str:
    """The round a run's privacy mechanism needs: its ``round_protocol``, ``"labels"``
    without one.

    Examples
    --------
    >>> from cotrain.privacy import RandomizedResponse, SecureTeacherVotes
    >>> round_protocol(None), round_protocol(RandomizedResponse(epsilon=1.0))
    ('labels', 'labels')
    >>> round_protocol(SecureTeacherVotes(mu=1.0))
    'secure-sum'
    """
    protocol = getattr(privacy, "round_protocol", "labels")
    if protocol not in ("labels", "secure-sum"):
        raise ValueError(
            f"{type(privacy).__name__}.round_protocol must be 'labels' or 'secure-sum', "
            f"got {protocol!r}"
        )
    return str(protocol)


class Round(Protocol):
    """One round protocol: :meth:`run` plays round ``t`` over a transport."""

    books: RoundBookkeeping

    def run(
        self,
        t: int,
        sampled: np.ndarray,
        transport: Transport,
        timeout: float | None,
        *,
        started: float,
    ) -> RoundRecord:
        """Round ``t`` with the ``sampled`` clients; its record."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """What the round keeps between rounds (for checkpoints)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        ...


class LabelRound:
    """The round in which every site releases its labels (see the module docstring).

    Parameters
    ----------
    server : CoTrainingServer
    books : RoundBookkeeping
        Finishes each round's record.
    y_eval_codes : ndarray, optional
        The evaluation labels as class codes (for the consensus accuracy).

    Examples
    --------
    >>> from cotrain.federation.setup import build_server
    >>> from cotrain.federation.transport import Exchanged
    >>> from cotrain.wire.messages import HardLabels
    >>> from cotrain.wire.upload import Upload
    >>> run = build_server(consensus="majority", X_public=np.zeros((2, 1)), n_classes=2,
    ...                    client_names=["a", "b", "c"], random_state=0)
    >>> class Fixed:  # a transport whose sites always send the same labels
    ...     def exchange(self, t, links, timeout):
    ...         codes = {0: [0, 1], 1: [0, 1], 2: [1, 1]}
    ...         return Exchanged([Upload(i, HardLabels(np.array(codes[i]), 2).to_bytes())
    ...                           for i in links])
    >>> rnd = LabelRound(run.server, RoundBookkeeping(2))
    >>> record = rnd.run(1, np.arange(3), Fixed(), None, started=0.0)
    >>> run.server.hard_consensus.tolist(), record.bytes_up
    ([0, 1], 33)
    """

    def __init__(
        self,
        server: CoTrainingServer,
        books: RoundBookkeeping,
        y_eval_codes: np.ndarray | None = None,
    ) -> None:
        self.server = server
        self.books = books
        self.y_eval_codes = y_eval_codes

    def run(
        self,
        t: int,
        sampled: np.ndarray,
        transport: Transport,
        timeout: float | None,
        *,
        started: float,
    ) -> RoundRecord:
        """Downlinks out, uploads back, the vote, the record (see the module docstring)."""
        server = self.server
        links = server.configure_round(t, sampled)
        got = transport.exchange(t, links, timeout)
        self.books.received(got.uploads)  # a site's own ε counts even if the vote fails
        record, answered = server.finish_round(
            t,
            sampled,
            got.uploads,
            got.timed_out,
            started=started,
            bytes_down=sum(link.nbytes for link in links.values()),
        )
        # what private clients keep off their uploads, the experimenter still sees
        record = replace(record, learner_time_s=record.learner_time_s + got.kept_learner_time_s)
        return self.books.finish(
            record,
            got.uploads,
            answered,
            server.consensus,
            predictions=got.predictions,
            accuracy=got.accuracy,
            y_eval_codes=self.y_eval_codes,
        )

    def state_dict(self) -> dict[str, Any]:
        """Nothing: the server and the bookkeeping keep the run's state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to put back."""


class SecureRound:
    """The secure-sum round (see the module docstring), whatever carries the sums.

    Parameters
    ----------
    server : CoTrainingServer
    books : RoundBookkeeping
    plan : SecurePlan
        The run's public noise plan.
    n_teachers : int
        Teachers per site (for the threshold's vote count).
    threshold : float or None
        Confident-GNMax's threshold (share of the votes).
    n_public : int
    seed : int, optional
        Seeds the public order of the first queries.
    y_eval_codes : ndarray, optional

    Attributes
    ----------
    ledger : SecureVotesLedger
        The run's ledger: one ε for every site, from the plan.
    sums : VoteSums
        The consensus built from the released sums.
    acknowledged : dict of int to int or None
        The consensus version each site's last reply says it holds.

    Examples
    --------
    >>> from cotrain.federation.setup import build_server
    >>> from cotrain.federation.transport import Summed
    >>> from cotrain.privacy import SecureTeacherVotes
    >>> run = build_server(consensus="majority", X_public=np.zeros((2, 1)), n_classes=2,
    ...                    client_names=["a", "b", "c"], random_state=0)
    >>> plan = SecureTeacherVotes(n_teachers=1, mu=1e-9).plan(3, 2, 2, rounds=2)
    >>> class Fixed:  # a transport whose sum is always the same
    ...     def first_sum(self, t, links, queries, plan, timeout):
    ...         return Summed(SummedShares(np.array([[3, 0], [1, 2]]), (0, 1, 2)), bytes_up=48)
    >>> rnd = SecureRound(run.server, RoundBookkeeping(2), plan, 1, None, 2)
    >>> record = rnd.run(1, np.arange(3), Fixed(), None, started=0.0)
    >>> rnd.sums.codes.tolist(), record.coverage
    ([0, 1], 1.0)
    """

    def __init__(
        self,
        server: CoTrainingServer,
        books: RoundBookkeeping,
        plan: SecurePlan,
        n_teachers: int,
        threshold: float | None,
        n_public: int,
        seed: int | None = None,
        y_eval_codes: np.ndarray | None = None,
    ) -> None:
        self.server = server
        self.books = books
        self.plan = plan
        self.n_teachers = n_teachers
        self.threshold = threshold
        self.y_eval_codes = y_eval_codes
        self.sums = VoteSums(n_public, seed)
        self.ledger = SecureVotesLedger(plan)
        self.acknowledged: dict[int, int | None] = {}

    def run(
        self,
        t: int,
        sampled: np.ndarray,
        transport: Transport,
        timeout: float | None,
        *,
        started: float,
    ) -> RoundRecord:
        """Round ``t``: queries, the first sum, the confident positions and their answer
        sum, the consensus (:meth:`~cotrain.federation.server.CoTrainingServer.publish_round`)
        and its record."""
        plan, server = self.plan, self.server
        links = server.configure_round(t, sampled)
        spent = self.ledger.spent  # then the sites train on the last consensus only
        queries = np.zeros(0, dtype=np.intp) if spent else self.sums.queries(plan.n_queries)
        first = transport.first_sum(t, links, queries, plan, timeout)
        self.acknowledged.update(first.acknowledged)
        summed, failed, timed_out, up = first.total, first.failed, first.timed_out, first.bytes_up
        answered = np.zeros(0, dtype=np.intp)
        if spent:
            self.ledger.fit_rounds += 1
            summed = None
        else:
            self.ledger.record(asked=queries.size, answered=0)  # shares sent: counted
        if summed is not None:
            final: SummedShares | None = summed
            if plan.mu_check is not None:
                votes = len(summed.sites) * self.n_teachers
                answered = confident_answers(summed.total, self.threshold, votes, plan.answers)
                second = transport.answer_sum(t, answered, summed.sites, plan, timeout)
                final = second.total
                failed.update(second.failed)
                timed_out = timed_out + second.timed_out
                up += second.bytes_up
            else:
                answered = np.arange(queries.size)
            if final is not None:
                self.sums.answer(queries[answered], final.total)
                self.ledger.answered += int(answered.size)
        record = server.publish_round(
            t,
            sampled,
            self.sums.codes,
            failed,
            tuple(sorted(set(timed_out))),
            started=started,
            bytes_up=up,
            bytes_down=sum(link.nbytes for link in links.values()),
            acknowledged=self.acknowledged,
            epsilon=self.ledger.max_epsilon(),
        )
        # the sites release no quality or trust: only a simulation's own scoring is added
        scored = first.predictions
        return self.books.finish(
            record, [], scored, server.consensus, predictions=scored, y_eval_codes=self.y_eval_codes
        )

    def state_dict(self) -> dict[str, Any]:
        """The sums' state (the ledger is the server's:
        :meth:`cotrain.federation.setup.ServerRun.state_dict`)."""
        return {"secure_sums": self.sums.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        self.sums.load_state_dict(state["secure_sums"])


def check_secure_run(run: Any, participation: float) -> None:
    """Refuse a run the secure sum cannot serve (sampled clients, clusters, soft labels).

    Raises
    ------
    ValueError
        If ``participation`` is not 1, or the run clusters or shares soft labels.
    """
    if participation != 1.0:
        raise ValueError(
            "privacy=SecureTeacherVotes needs participation=1.0: the noise plan assumes "
            f"every site contributes to every sum, got participation={participation!r}"
        )
    if run.server.clustering is not None or run.wire.share != "hard":
        raise ValueError(
            "privacy=SecureTeacherVotes forms one consensus of hard labels: use "
            "clustering=None and share='hard'"
        )


def make_round(
    privacy: Any,
    run: Any,
    books: RoundBookkeeping,
    *,
    n_public: int,
    n_classes: int,
    rounds: int,
    participation: float,
    random_state: Any,
    y_eval_codes: np.ndarray | None = None,
) -> LabelRound | SecureRound:
    """The round ``privacy`` declares (:func:`round_protocol`) for the server side ``run``
    (:func:`~cotrain.federation.setup.build_server`).

    A secure round's ledger becomes the run's ledger (so the privacy-budget callback,
    checkpoints and the report use it); its query order is seeded from the run's
    ``noise_seed`` when ``random_state`` is set.

    Raises
    ------
    ValueError
        For a secure round the run cannot serve (:func:`check_secure_run`).
    """
    if round_protocol(privacy) == "labels":
        return LabelRound(run.server, books, y_eval_codes)
    check_secure_run(run, participation)
    plan = privacy.plan(len(run.client_seeds), n_public, n_classes, rounds)
    seed = int(run.noise_seed.generate_state(1)[0]) if random_state is not None else None
    secure = SecureRound(
        run.server,
        books,
        plan,
        int(privacy.n_teachers),
        privacy.threshold,
        n_public,
        seed,
        y_eval_codes,
    )
    run.server.ledger = secure.ledger
    return secure


def client_class(privacy: Any, n_sites: int, n_public: int, n_classes: int, rounds: int) -> Any:
    """The in-process client class of the round ``privacy`` declares: a
    :class:`~cotrain.federation.secure_client.SecureClient` with the run's public plan for
    a secure-sum round, else :class:`~cotrain.federation.client.Client`.

    Examples
    --------
    >>> from cotrain.privacy import SecureTeacherVotes
    >>> client_class(None, 3, 10, 2, 5).__name__
    'Client'
    >>> client_class(SecureTeacherVotes(mu=9.0), 3, 10, 2, 5).keywords["plan"].share_answer
    3.0
    """
    if round_protocol(privacy) == "labels":
        from cotrain.federation.client import Client

        return Client
    from cotrain.federation.secure_client import SecureClient

    return partial(SecureClient, plan=privacy.plan(n_sites, n_public, n_classes, rounds))
