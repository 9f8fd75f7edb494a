"""The in-process round of a secure-sum run (``privacy=SecureTeacherVotes(...)``).

:class:`SecureSumFederation` is a :class:`~cotrain.federation.simulation.SimulatedFederation`
whose round follows the secure-sum protocol of :mod:`cotrain.privacy.secure_votes`: the server
chooses the queries, the sites send shares, :func:`~cotrain.federation.secure_sum.secure_sum`
hands the server only their sum, the server keeps the confident queries and asks for their
answer shares, and the answer sum's argmax becomes the consensus the server broadcasts as in
any run. The server's code below only ever holds sums.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from cotrain.federation.secure_client import SecureClient
from cotrain.federation.secure_sum import (
    SummedShares,
    VoteSums,
    confident_answers,
    decode_share,
    secure_sum,
)
from cotrain.federation.seeding import noise_seed_for
from cotrain.federation.simulation import SimulatedFederation
from cotrain.history import RoundRecord
from cotrain.privacy.secure_ledger import SecureVotesLedger
from cotrain.privacy.secure_votes import SecurePlan, SecureTeacherVotes
from cotrain.runtime.runtimes import Straggler

__all__ = ["SecureSumFederation", "is_secure_sum"]


def is_secure_sum(privacy: Any) -> bool:
    """Whether ``privacy`` sums teacher votes across sites (a secure-sum run).

    Examples
    --------
    >>> is_secure_sum(SecureTeacherVotes(mu=1.0)), is_secure_sum(None)
    (True, False)
    """
    return isinstance(privacy, SecureTeacherVotes)


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
        super().__init__(list(clients), run, data, reproducible_noise)
        self.plan = plan
        self.n_teachers = n_teachers
        self.threshold = threshold
        self.sums = VoteSums(len(data.X_public), seed)
        self.secure_ledger = SecureVotesLedger(plan)
        #: client id -> the consensus version its last reply says it holds
        self.acknowledged: dict[int, int | None] = {}

    @property
    def ledger(self) -> SecureVotesLedger:
        """The run's ledger: one ε for every site, from the plan."""
        return self.secure_ledger

    def run_round(self, t: int, sampled: np.ndarray, timeout: float | None) -> RoundRecord:
        """One round of the protocol (see the module docstring)."""
        start = time.perf_counter()
        server, plan = self.server, self.plan
        spent = self.secure_ledger.spent  # then the sites train on the last consensus only
        queries = np.zeros(0, dtype=np.intp) if spent else self.sums.queries(plan.n_queries)
        links = server.configure_round(t, sampled)
        seed = self.noise_seed
        args = {i: (t, link, noise_seed_for(seed, t, i), queries) for i, link in links.items()}
        first, failed, timed_out, up = self._collect("vote_round", args, queries.size, timeout)
        answered = np.zeros(0, dtype=np.intp)
        if spent:
            self.secure_ledger.fit_rounds += 1
            first = None
        else:
            self.secure_ledger.record(asked=queries.size, answered=0)  # shares sent: counted
        if first is not None:
            answer: SummedShares | None = first
            if plan.mu_check is not None:
                votes = len(first.sites) * self.n_teachers
                answered = confident_answers(first.total, self.threshold, votes, plan.answers)
                ask = {i: (t, answered) for i in first.sites}
                answer, late_fail, late_out, late_up = self._collect(
                    "answer_round", ask, answered.size, timeout
                )
                failed.update(late_fail)
                timed_out += late_out
                up += late_up
            else:
                answered = np.arange(queries.size)
            if answer is not None:
                self.sums.answer(queries[answered], answer.total)
                self.secure_ledger.answered += int(answered.size)
        record = server.publish_round(
            t, sampled, self.sums.codes, failed, tuple(sorted(set(timed_out))), started=start,
            bytes_up=up, bytes_down=sum(link.nbytes for link in links.values()),
            acknowledged=self.acknowledged, epsilon=self.secure_ledger.max_epsilon(),
        )  # fmt: skip
        return replace(record, **self.evaluate())

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
                    self.last_eval[i] = (result.eval_codes, result.eval_proba)
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
        summed = secure_sum(shares, self.plan.min_sites)
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
        state.update(
            secure_sums=self.sums.state_dict(), secure_ledger=self.secure_ledger.state_dict()
        )
        return state, broadcast, models

    def load_state_dict(
        self, state: dict[str, Any], broadcast: bytes | None, models: dict[int, Any]
    ) -> None:
        """Put a :meth:`state_dict` back."""
        super().load_state_dict(state, broadcast, models)
        self.sums.load_state_dict(state["secure_sums"])
        self.secure_ledger.load_state_dict(state["secure_ledger"])


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
    seed = int(run.noise_seed.generate_state(1)[0]) if random_state is not None else None
    return SecureSumFederation(
        clients, run, data, reproducible_noise, plan=clients[0].plan,
        n_teachers=int(privacy.n_teachers), threshold=privacy.threshold,
        participation=participation, seed=seed,
    )  # fmt: skip
