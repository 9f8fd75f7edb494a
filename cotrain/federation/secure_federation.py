"""The in-process round of a secure-sum run (``privacy=SecureTeacherVotes(...)``).

:class:`SecureSumFederation` is a :class:`~cotrain.federation.simulation.SimulatedFederation`
whose round follows the secure-sum protocol of :mod:`cotrain.privacy.mechanisms.secure_votes`: the
server chooses the queries, the sites send shares,
:func:`~cotrain.federation.secure_sum.sum_shares_in_process` hands the server only their sum, the
server keeps the confident queries and asks for their answer shares, and the answer sum's argmax
becomes the consensus the server broadcasts as in any run. The server's code below only ever holds
sums.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cotrain.federation.secure_client import SecureClient
from cotrain.federation.secure_sum import (
    SummedShares,
    VoteSums,
    confident_answers,
    decode_share,
    sum_shares_in_process,
)
from cotrain.federation.seeding import noise_seed_for
from cotrain.federation.simulation import SimulatedFederation
from cotrain.history import RoundRecord
from cotrain.privacy.ledgers.secure_ledger import SecureVotesLedger
from cotrain.privacy.mechanisms.secure_votes import SecurePlan, SecureTeacherVotes
from cotrain.runtime.straggler import Straggler

__all__ = ["SecureRound", "SecureSumFederation", "check_secure_run", "is_secure_sum"]


def is_secure_sum(privacy: Any) -> bool:
    """Whether ``privacy`` sums teacher votes across sites (a secure-sum run).

    Examples
    --------
    >>> is_secure_sum(SecureTeacherVotes(mu=1.0)), is_secure_sum(None)
    (True, False)
    """
    return isinstance(privacy, SecureTeacherVotes)


#: what one step of a round yields: (the sum or None, failures, timed out, bytes up)
Collected = tuple[SummedShares | None, dict[int, str], list[int], int]


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


def secure_seed(run: Any, random_state: Any) -> int | None:
    """The public seed of the query order: from the run's ``noise_seed`` when seeded."""
    return int(run.noise_seed.generate_state(1)[0]) if random_state is not None else None


class SecureRound:
    """The server's side of one secure-sum round, whatever carries the sums.

    The round logic is written once here: the in-process federation
    (:class:`SecureSumFederation`) and the Flower ServerApp
    (:mod:`cotrain.flower.secure_server`, sums through SecAgg+) give it two steps,
    ``first(queries)`` (the sites fit and send their first share; the step returns only
    the sum) and ``answer(positions, sites)`` (the answer shares of the selected
    positions, summed), each returning :data:`Collected`.

    Parameters
    ----------
    server : CoTrainingServer
    plan : SecurePlan
    n_teachers : int
    threshold : float or None
    n_public : int
    seed : int, optional
        Seeds the public order of the first queries.

    Examples
    --------
    >>> from cotrain.federation.setup import build_server
    >>> run = build_server(consensus="majority", X_public=np.zeros((2, 1)), n_classes=2,
    ...                    client_names=["a", "b", "c"], random_state=0)
    >>> plan = SecureTeacherVotes(n_teachers=1, mu=1e-9).plan(3, 2, 2, rounds=2)
    >>> rnd = SecureRound(run.server, plan, 1, None, 2)
    >>> total = SummedShares(np.array([[3, 0], [1, 2]]), (0, 1, 2))
    >>> record = rnd.run(1, np.arange(3), {}, lambda q: (total, {}, [], 48),
    ...                  lambda a, s: (None, {}, [], 0), started=0.0)
    >>> rnd.sums.codes.tolist(), record.coverage
    ([0, 1], 1.0)
    """

    def __init__(
        self,
        server: Any,
        plan: SecurePlan,
        n_teachers: int,
        threshold: float | None,
        n_public: int,
        seed: int | None = None,
    ) -> None:
        self.server = server
        self.plan = plan
        self.n_teachers = n_teachers
        self.threshold = threshold
        self.sums = VoteSums(n_public, seed)
        self.ledger = SecureVotesLedger(plan)
        #: client id -> the consensus version its last reply says it holds
        self.acknowledged: dict[int, int | None] = {}

    def run(
        self,
        t: int,
        sampled: np.ndarray,
        links: Mapping[int, Any],
        first: Callable[[np.ndarray], Collected],
        answer: Callable[[np.ndarray, tuple[int, ...]], Collected],
        *,
        started: float,
    ) -> RoundRecord:
        """Round ``t``: queries, the first sum, the confident positions and their answer
        sum, the consensus (:meth:`~cotrain.federation.server.CoTrainingServer.publish_round`)
        and its record."""
        plan = self.plan
        spent = self.ledger.spent  # then the sites train on the last consensus only
        queries = np.zeros(0, dtype=np.intp) if spent else self.sums.queries(plan.n_queries)
        summed, failed, timed_out, up = first(queries)
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
                final, late_fail, late_out, late_up = answer(answered, summed.sites)
                failed.update(late_fail)
                timed_out += late_out
                up += late_up
            else:
                answered = np.arange(queries.size)
            if final is not None:
                self.sums.answer(queries[answered], final.total)
                self.ledger.answered += int(answered.size)
        return self.server.publish_round(
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

    def state_dict(self) -> dict[str, Any]:
        """The sums' and the ledger's state."""
        return {"secure_sums": self.sums.state_dict(), "secure_ledger": self.ledger.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        self.sums.load_state_dict(state["secure_sums"])
        self.ledger.load_state_dict(state["secure_ledger"])


class SecureSumFederation(SimulatedFederation):
    """The clients and server of an in-process secure-sum run.

    Parameters
    ----------
    clients : list of SecureClient
    run : ServerRun
    data : FitData
    reproducible_noise : bool, default=False
    plan : SecurePlan
        The run's public noise plan.
    n_teachers : int
        Teachers per site (for the threshold's vote count).
    threshold : float or None
        Confident-GNMax's threshold (share of the votes).
    participation : float
        Must be 1: the plan's noise assumes every site is asked.
    seed : int, optional
        Seeds the public order of the first queries.

    Raises
    ------
    ValueError
        If the run samples clients, clusters them or shares soft labels.
    """

    def __init__(
        self,
        clients: list[SecureClient],
        run: Any,
        data: Any,
        reproducible_noise: bool = False,
        *,
        plan: SecurePlan,
        n_teachers: int,
        threshold: float | None,
        participation: float = 1.0,
        seed: int | None = None,
    ) -> None:
        check_secure_run(run, participation)
        super().__init__(list(clients), run, data, reproducible_noise)
        self.plan = plan
        self.n_teachers = n_teachers
        self.threshold = threshold
        self.round = SecureRound(run.server, plan, n_teachers, threshold, len(data.X_public), seed)
        self.sums = self.round.sums
        self.secure_ledger = self.round.ledger
        #: client id -> the consensus version its last reply says it holds
        self.acknowledged = self.round.acknowledged
        #: this round's predictions on the evaluation data, by site
        self._predictions: dict[int, tuple[Any, Any]] = {}

    @property
    def ledger(self) -> SecureVotesLedger:
        """The run's ledger: one ε for every site, from the plan."""
        return self.secure_ledger

    def run_round(self, t: int, sampled: np.ndarray, timeout: float | None) -> RoundRecord:
        """One round of the protocol (see the module docstring), its sums in-process."""
        start = time.perf_counter()
        links = self.server.configure_round(t, sampled)
        seed = self.noise_seed

        def first(queries: np.ndarray) -> Collected:
            args = {i: (t, link, noise_seed_for(seed, t, i), queries) for i, link in links.items()}
            return self._collect("vote_round", args, queries.size, timeout)

        def answer(answered: np.ndarray, sites: tuple[int, ...]) -> Collected:
            ask = {i: (t, answered) for i in sites}
            return self._collect("answer_round", ask, answered.size, timeout)

        self._predictions = {}
        record = self.round.run(t, sampled, links, first, answer, started=start)
        # the sites release no quality or trust: only the simulation's own scoring is added
        return self.finish(record, [], self._predictions, self._predictions)

    def _collect(
        self, method: str, args: Mapping[int, tuple], n_rows: int, timeout: float | None
    ) -> tuple[SummedShares | None, dict[int, str], list[int], int]:
        """Call ``method`` on the sites; sum the well-formed shares (the server sees only
        the sum); returns ``(sum or None, failures, timed out, bytes up)``."""
        out = self.pool.call(method, dict(args), timeout=timeout)
        shares, failed, timed_out, up = {}, {}, [], 0
        n_classes = len(self.data.classes)
        for i, result in out.items():
            if isinstance(result, Straggler):
                timed_out.append(i)
                continue
            if method == "vote_round":
                self.acknowledged[i] = result.broadcast_version
                if result.eval_codes is not None:
                    self._predictions[i] = (result.eval_codes, result.eval_proba)
                for (category, message), n in result.warnings.items():
                    self.local_warnings[(i, category, message)] += n
            try:
                if result.error is not None:
                    raise result.error
                if n_rows == 0:  # a round that trains and releases nothing
                    continue
                shares[i] = decode_share(result.message, n_rows, n_classes)
                up += len(result.message)
            except Exception as err:  # a failed or malformed share: this site sits out
                if self.server.on_client_error == "raise":
                    raise RuntimeError(
                        f"{self.server.client_names[i]} failed in {method}: "
                        f"{type(err).__name__}: {err}"
                    ) from err
                failed[i] = f"{type(err).__name__}: {err}"
        if n_rows == 0:
            return None, failed, timed_out, up
        summed = sum_shares_in_process(shares, self.plan.min_sites)
        del shares  # the server's code keeps only the sum
        if summed is None and self.server.on_client_error == "raise":
            raise RuntimeError(
                f"only {len(out) - len(failed) - len(timed_out)} sites contributed to the "
                f"secure sum, fewer than the {self.plan.min_sites} its noise plan needs"
            )
        return summed, failed, timed_out, up

    def privacy_report(self) -> dict[str, Any]:
        """The federation's guarantee (:meth:`SecureVotesLedger.report`)."""
        return self.secure_ledger.report()

    def state_dict(self) -> tuple[dict[str, Any], bytes | None, dict[int, Any]]:
        """As :meth:`SimulatedFederation.state_dict`, with the sums and the ledger."""
        state, broadcast, models = super().state_dict()
        state.update(self.round.state_dict())
        return state, broadcast, models

    def load_state_dict(
        self, state: dict[str, Any], broadcast: bytes | None, models: dict[int, Any]
    ) -> None:
        """Put a :meth:`state_dict` back."""
        super().load_state_dict(state, broadcast, models)
        self.round.load_state_dict(state)


def client_class(privacy: Any, n_sites: int, n_public: int, n_classes: int, rounds: int) -> Any:
    """The client class of a run: :class:`SecureClient` with the run's public plan for a
    secure-sum run, else :class:`~cotrain.federation.client.Client`.

    Examples
    --------
    >>> client_class(None, 3, 10, 2, 5).__name__
    'Client'
    >>> client_class(SecureTeacherVotes(mu=9.0), 3, 10, 2, 5).keywords["plan"].share_answer
    3.0
    """
    if not is_secure_sum(privacy):
        from cotrain.federation.client import Client

        return Client
    from functools import partial

    return partial(SecureClient, plan=privacy.plan(n_sites, n_public, n_classes, rounds))


def make_federation(
    clients: list[Any],
    run: Any,
    data: Any,
    reproducible_noise: bool,
    privacy: Any,
    participation: float,
    random_state: Any,
) -> SimulatedFederation:
    """The run's in-process federation: a :class:`SecureSumFederation` for a secure-sum
    run, else a :class:`~cotrain.federation.simulation.SimulatedFederation`."""
    if not is_secure_sum(privacy):
        return SimulatedFederation(clients, run, data, reproducible_noise)
    seed = secure_seed(run, random_state)
    return SecureSumFederation(
        clients,
        run,
        data,
        reproducible_noise,
        plan=clients[0].plan,
        n_teachers=int(privacy.n_teachers),
        threshold=privacy.threshold,
        participation=participation,
        seed=seed,
    )
