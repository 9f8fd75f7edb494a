"""The ServerApp's side of a secure-vote round (``privacy=SecureTeacherVotes``) on Flower.

:class:`FlowerSecureRound` runs the in-process round logic,
:class:`cotrain.federation.secure_federation.SecureRound` (queries, Confident-GNMax,
:class:`~cotrain.federation.secure_sum.VoteSums`,
:class:`~cotrain.privacy.ledgers.secure_ledger.SecureVotesLedger`,
:meth:`~cotrain.federation.server.CoTrainingServer.publish_round`), and gives it its two
steps over the Grid, each sum through Flower's SecAgg+
(:func:`cotrain.flower.secure_sum.secagg_sum`): the ServerApp's code never receives a
site's share, only the sums.

Round ``t``, message by message
-------------------------------
1. **vote** — one ``train`` message per site (the round config of any run, plus the
   plan's public sizes ``secure-n-sites`` and ``secure-rounds``, the broadcast, and the
   round's ``queries``). Each site fits its own model, trains its teachers and computes
   its noisy shares (:func:`cotrain.flower.secure_site.site_vote`), keeps them on its
   own disk and replies with the consensus version it now holds: no share.
2. **first sum** — SecAgg+ over the sites that replied (four ``train`` messages each:
   setup, share keys, collect masked vectors, unmask), query
   ``<run token>/<t>/first``, shape ``(n_queries, C)``, reconstruction threshold at least
   the plan's ``min_sites``. In the collect stage each site's relay fetches its stored
   share from its worker (:func:`cotrain.flower.secure_site.secagg_share_reply`) and
   :func:`~flwr.client.mod.secaggplus_mod` masks it. With a threshold this is the check
   sum, else the answer sum.
3. **answer sum** (only with a threshold, and only if a query is confident) — SecAgg+ over
   the sites in the first sum, query ``<run token>/<t>/answer``, shape
   ``(n_answered, C)``, the selected positions in its config; each site answers
   with those rows of its kept answer share
   (:meth:`~cotrain.federation.secure_client.SecureClient.answer_round`).

A round after the plan's last release sends only step 1 with no queries: the sites train
on the last consensus and release nothing. A site that fails, refuses or stays silent is
a client failure (``on_client_error``); a sum goes ahead with the others while at least
``min_sites`` (and Flower's minimum of 3) remain, else the round releases nothing.

The history records the int32 share bytes of every contributing site (as in-process);
what SecAgg+ itself sends is in ``timings_`` as seconds per step.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from cotrain.federation.secure_federation import (
    Collected,
    SecureRound,
    check_secure_run,
    secure_seed,
)
from cotrain.federation.secure_sum import SHARE_DTYPE, SummedShares
from cotrain.flower import protocol
from cotrain.flower.handshake import error_text, exchange
from cotrain.flower.secure_site import N_SITES, QUERIES, ROUNDS, SELECTED, STEP
from cotrain.flower.secure_sum import SecureSumError, secagg_sum
from cotrain.history import RoundRecord
from cotrain.wire import envelope

__all__ = ["FlowerSecureRound"]

_LOG = logging.getLogger("cotrain.flower")
#: the fewest sites Flower's SecAgg+ sums over
_SECAGG_MIN = 3


class FlowerSecureRound:
    """The secure-vote round of a :class:`~cotrain.flower.server_app.FlowerCoTraining` run.

    Parameters
    ----------
    run : ServerRun
        The run's server side (:func:`~cotrain.federation.setup.build_server`); its
        server's ledger becomes the run's
        :class:`~cotrain.privacy.ledgers.secure_ledger.SecureVotesLedger` (so the privacy-budget
        callback, checkpoints and the report use it, as in-process).
    privacy : SecureTeacherVotes
    n_public, n_classes, rounds : int
        The public sizes of the plan (the trainer's ``rounds``).
    participation : float
    random_state : int or None
        Seeds the public query order as in-process.
    round_timeout : float or None
        Seconds each step (and each SecAgg+ stage) waits.
    poll_interval : float

    Raises
    ------
    ValueError
        As :class:`~cotrain.federation.secure_federation.SecureSumFederation`: sampled
        clients, clusters, soft labels, or a consensus other than the majority.

    Attributes
    ----------
    round : SecureRound
        The round logic shared with the in-process run.
    timings : list of dict
        Per round: seconds of the vote step and of each SecAgg+ sum.
    received : list of tuple
        ``(step, what)`` for everything the ServerApp's code received from the sites: the
        vote replies' records and the sums (for tests: no share is among them).

    Examples
    --------
    >>> from cotrain.federation.setup import build_server
    >>> from cotrain.privacy import SecureTeacherVotes
    >>> run = build_server(consensus="majority", X_public=np.zeros((4, 1)), n_classes=2,
    ...                    client_names=["a", "b", "c"], random_state=0,
    ...                    privacy=SecureTeacherVotes(mu=1.0))
    >>> secure = FlowerSecureRound(run, SecureTeacherVotes(mu=1.0), 4, 2, 3, 1.0, 0, 60.0)
    >>> run.ledger is secure.round.ledger, secure.round.plan.rounds
    (True, 2)
    """

    def __init__(
        self,
        run: Any,
        privacy: Any,
        n_public: int,
        n_classes: int,
        rounds: int,
        participation: float,
        random_state: int | None,
        round_timeout: float | None,
        poll_interval: float = 0.05,
    ) -> None:
        check_secure_run(run, participation)
        privacy.check_federation(run.consensus, [])
        n_sites = len(run.client_seeds)
        self.plan = privacy.plan(n_sites, n_public, n_classes, rounds)
        if self.plan.min_sites < _SECAGG_MIN:
            raise ValueError(
                "privacy=SecureTeacherVotes on Flower sums through SecAgg+, which needs at "
                f"least {_SECAGG_MIN} contributing sites: n_sites - dropouts = "
                f"{self.plan.min_sites}"
            )
        self.rounds = int(rounds)
        self.run = run
        self.round = SecureRound(
            run.server,
            self.plan,
            int(privacy.n_teachers),
            privacy.threshold,
            n_public,
            secure_seed(run, random_state),
        )
        run.server.ledger = self.round.ledger
        self.round_timeout = round_timeout
        self.poll_interval = poll_interval
        self.timings: list[dict[str, float]] = []
        self.received: list[tuple[str, Any]] = []

    def run_round(
        self,
        t: int,
        sampled: np.ndarray,
        grid: Any,
        node_ids: list[int],
        token: str,
        message: Any,
    ) -> RoundRecord:
        """Round ``t`` over ``grid`` (see the module docstring); ``node_ids[i]`` is client
        ``i``'s SuperNode, ``token`` the run's token and ``message(t, i, link)`` the
        round's ``train`` message for client ``i``."""
        start = time.perf_counter()
        server, timing = self.run.server, {"round": float(t)}
        links = server.configure_round(t, sampled)

        def first(queries: np.ndarray) -> Collected:
            messages = {
                i: self._vote_message(message(t, i, link), queries) for i, link in links.items()
            }
            began = time.perf_counter()
            replies = exchange(grid, messages, self.round_timeout, self.poll_interval)
            timing["vote_s"] = time.perf_counter() - began
            failed, ready = {}, []
            for i, reply in replies.items():
                problem = self._vote_reply(i, reply)
                if problem is None:
                    ready.append(i)
                else:
                    failed[i] = problem
            timed_out = [i for i in messages if i not in replies]
            if queries.size == 0:  # a round that trains and releases nothing
                return None, failed, timed_out, 0
            summed, more, up = self._sum(grid, node_ids, t, "first", ready, queries.size, token, {})
            timing["first_sum_s"] = time.perf_counter() - began - timing["vote_s"]
            return summed, failed | more, timed_out, up

        def answer(positions: np.ndarray, sites: tuple[int, ...]) -> Collected:
            if positions.size == 0:  # nothing confident: nothing to sum
                return None, {}, [], 0
            began = time.perf_counter()
            config = {SELECTED: ",".join(str(int(p)) for p in positions)}
            summed, failed, up = self._sum(
                grid, node_ids, t, "answer", list(sites), positions.size, token, config
            )
            timing["answer_sum_s"] = time.perf_counter() - began
            return summed, failed, [], up

        record = self.round.run(t, sampled, links, first, answer, started=start)
        steps = sum(v for k, v in timing.items() if k.endswith("_s"))
        timing["total_s"] = time.perf_counter() - start
        timing["server_s"] = timing["total_s"] - steps  # queries, selection, consensus, ε
        self.timings.append(timing)
        return record

    # ---------------------------------------------------------------- steps
    def _vote_message(self, msg: Any, queries: np.ndarray) -> Any:
        """The round's ``train`` message with the plan's sizes and the queries."""
        from flwr.app import ArrayRecord

        msg.content[protocol.ROUND][N_SITES] = int(self.plan.n_sites)
        msg.content[protocol.ROUND][ROUNDS] = self.rounds
        data = np.asarray(queries, dtype="<i4").tobytes()
        msg.content[QUERIES] = ArrayRecord({protocol.PAYLOAD: protocol.to_array(data)})
        return msg

    def _vote_reply(self, i: int, reply: Any) -> str | None:
        """Record a site's vote reply (its acknowledgement); its failure text or None."""
        server = self.run.server
        try:
            if reply.has_error():
                raise envelope.RemoteClientError(error_text(reply.error))
            content = protocol.to_plain(reply.content)
            self.received.append(("vote", content))
            error = content["config"].get(envelope.ERROR)
            if error is not None:
                raise envelope.remote_error(error)
            if content["arrays"]:
                raise ValueError("a secure-vote site sends no arrays with its vote reply")
            version = content["metrics"][envelope.STATS]["broadcast-version"]
            self.round.acknowledged[i] = int(version)
        except Exception as err:  # a failed or malformed reply: this site sits out
            if server.on_client_error == "raise":
                raise RuntimeError(
                    f"{server.client_names[i]} failed in the vote step: {type(err).__name__}: {err}"
                ) from err
            return f"{type(err).__name__}: {err}"
        return None

    def _sum(
        self,
        grid: Any,
        node_ids: list[int],
        t: int,
        step: str,
        clients: list[int],
        n_rows: int,
        token: str,
        extra: dict[str, Any],
    ) -> tuple[SummedShares | None, dict[int, str], int]:
        """The SecAgg+ sum of ``clients``' shares for ``step``: ``(sum or None, failures,
        share bytes)``."""
        server, plan = self.run.server, self.plan
        shape = (int(n_rows), plan.n_classes)
        if len(clients) < max(plan.min_sites, _SECAGG_MIN):
            self._too_few(len(clients))
            return None, {}, 0
        nodes = {int(node_ids[i]): i for i in clients}
        config = {
            "run-token": token,
            "round": int(t),
            STEP: step,
            N_SITES: int(plan.n_sites),
            ROUNDS: self.rounds,
            "n-classes": int(plan.n_classes),
            **extra,
        }
        threshold = max(plan.min_sites, len(nodes) // 2 + 1)
        try:
            result = secagg_sum(
                grid,
                sorted(nodes),
                shape=shape,
                query=f"{token}/{t}/{step}",
                reconstruction_threshold=threshold,
                timeout=self.round_timeout,
                server_round=int(t),
                config=config,
            )
        except SecureSumError as err:
            failed = {i: f"SecureSumError: {err}" for i in clients}
            if server.on_client_error == "raise":
                raise RuntimeError(f"the {step} secure sum of round {t} halted: {err}") from err
            return None, failed, 0
        self.received.append((step, result))
        failed = {
            nodes[n]: "did not contribute to the secure sum (failed, refused or silent)"
            for n in result.dropped
        }
        if failed and server.on_client_error == "raise":
            names = [server.client_names[i] for i in sorted(failed)]
            raise RuntimeError(f"{names} did not contribute to the {step} secure sum of round {t}")
        sites = tuple(sorted(nodes[n] for n in result.node_ids))
        if len(sites) < plan.min_sites:  # cannot happen: the threshold guarantees it
            self._too_few(len(sites))
            return None, failed, 0
        up = len(sites) * shape[0] * shape[1] * SHARE_DTYPE.itemsize
        return SummedShares(np.asarray(result.total, dtype=np.int64), sites), failed, up

    def _too_few(self, n: int) -> None:
        if self.run.server.on_client_error == "raise":
            raise RuntimeError(
                f"only {n} sites can contribute to the secure sum, fewer than the "
                f"{max(self.plan.min_sites, _SECAGG_MIN)} its noise plan and SecAgg+ need"
            )
        _LOG.warning("only %s sites can contribute to the secure sum: nothing released", n)

    def state_dict(self) -> dict[str, Any]:
        """The sums' state (the ledger's is the server run's) and the timings."""
        return {"secure_sums": self.round.sums.state_dict(), "secure_timings": self.timings}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        self.round.sums.load_state_dict(state["secure_sums"])
        self.timings = list(state.get("secure_timings", []))
