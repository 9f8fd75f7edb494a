"""The deployed transport: a round's messages over a Flower Grid.

:class:`GridTransport` carries the rounds of :mod:`cotrain.federation.rounds` — the code an
in-process federation runs — to the SuperNodes, so a deployment differs from a simulation
only here. A label round (:meth:`GridTransport.exchange`) pushes each sampled site its
``train`` message and pulls the replies, treating a site that does not answer within the
round's timeout as a straggler. A secure-vote round (``privacy=SecureTeacherVotes``) sums
every share through Flower's SecAgg+ (:func:`cotrain.flower.secure_sum.secagg_sum`): the
ServerApp's code never receives a site's share, only the sums.

Secure round ``t``, message by message
--------------------------------------
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
what SecAgg+ itself sends is in the timings as seconds per step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cotrain.federation.secure_sum import SHARE_DTYPE, SummedShares
from cotrain.federation.server import CoTrainingServer
from cotrain.federation.transport import Exchanged, Summed
from cotrain.flower import protocol
from cotrain.flower.evaluation import SharedEvaluation
from cotrain.flower.handshake import error_text, exchange
from cotrain.flower.secure_site import N_SITES, QUERIES, ROUNDS, SELECTED, STEP
from cotrain.flower.secure_sum import SecureSumError, secagg_sum
from cotrain.privacy.mechanisms.secure_votes import SecurePlan
from cotrain.wire import envelope
from cotrain.wire.broadcast import Downlink
from cotrain.wire.upload import Upload

__all__ = ["GridTransport", "check_deployed_plan"]

_LOG = logging.getLogger("cotrain.flower")
#: the fewest sites Flower's SecAgg+ sums over
_SECAGG_MIN = 3
#: the timing keys of the steps in which the server waits for the sites
_STEPS = ("exchange_s", "vote_s", "first_sum_s", "answer_sum_s")


def check_deployed_plan(privacy: Any, plan: SecurePlan) -> None:
    """Refuse a secure-sum run Flower cannot serve: a mechanism that leaves the plan's
    ``n_sites`` or ``rounds`` to the server (every site refuses it: its plan is its own
    configuration), or fewer than 3 contributing sites (SecAgg+'s minimum).

    Raises
    ------
    ValueError
        If ``privacy`` states no ``n_sites`` or ``rounds``, or ``plan.min_sites`` (sites
        less dropouts) is below 3.
    """
    if privacy.n_sites is None or privacy.rounds is None:
        raise ValueError(
            "a deployed SecureTeacherVotes states n_sites and rounds (in every site's "
            "[privacy] and the run's): each site plans its noise from its own configuration, "
            f"never from the server's claim; got n_sites={privacy.n_sites!r}, "
            f"rounds={privacy.rounds!r}"
        )
    if plan.min_sites < _SECAGG_MIN:
        raise ValueError(
            "privacy=SecureTeacherVotes on Flower sums through SecAgg+, which needs at "
            f"least {_SECAGG_MIN} contributing sites: n_sites - dropouts = "
            f"{plan.min_sites}"
        )


class GridTransport:
    """A round's messages over a Flower Grid (see the module docstring).

    Parameters
    ----------
    grid : flwr.serverapp.Grid
    server : CoTrainingServer
        For its clients' names and ``on_client_error``.
    node_ids : list of int
        ``node_ids[i]``: client ``i``'s SuperNode.
    token : str
        The run's token (the sites keep their state under it).
    message : callable
        ``message(t, i, link)``: the round's ``train`` message for client ``i``.
    read : callable
        ``read(i, reply)``: the :class:`~cotrain.wire.upload.Upload` in client ``i``'s
        reply (a broken reply is that client's failure).
    evaluation : SharedEvaluation
        Reads the predictions of sites that share a public test set.
    rounds : int
        The run's rounds (a secure site computes its plan from them).
    poll_interval : float, default=0.05
    received : list, optional
        Where to note what the ServerApp's code receives in secure steps (see below).

    Attributes
    ----------
    timing : dict
        Where the seconds of the last round went (label rounds: from the sites' handler
        timestamps; secure rounds: the vote step and each SecAgg+ sum).
    received : list of tuple
        ``(step, what)`` for everything the ServerApp's code received in secure steps:
        the vote replies' records and the sums (for tests: no share is among them).
    """

    def __init__(
        self,
        grid: Any,
        server: CoTrainingServer,
        node_ids: list[int],
        token: str,
        message: Callable[[int, int, Downlink], Any],
        read: Callable[[int, Any], Upload],
        evaluation: SharedEvaluation,
        rounds: int,
        poll_interval: float = 0.05,
        received: list[tuple[str, Any]] | None = None,
    ) -> None:
        self.grid = grid
        self.server = server
        self.node_ids = node_ids
        self.token = token
        self.message = message
        self.read = read
        self.evaluation = evaluation
        self.rounds = int(rounds)
        self.poll_interval = poll_interval
        self.timing: dict[str, float] = {}
        self.received: list[tuple[str, Any]] = [] if received is None else received

    def round_timing(self, started: float) -> dict[str, float]:
        """The last round's timing with its total (from ``started``, a
        ``time.perf_counter()``) and the server's share of it (the total less the steps
        that waited for the sites)."""
        timing = dict(self.timing)
        steps = sum(timing.get(k, 0.0) for k in _STEPS)
        timing["total_s"] = time.perf_counter() - started
        timing["server_s"] = timing["total_s"] - steps  # decode, vote, queries, ε
        return timing

    # ------------------------------------------------------------- label round
    def exchange(self, t: int, links: Mapping[int, Downlink], timeout: float | None) -> Exchanged:
        """Push each site its ``train`` message, pull the replies until ``timeout``."""
        messages = {i: self.message(t, i, link) for i, link in links.items()}
        pushed = time.time()
        replies = exchange(self.grid, messages, timeout, self.poll_interval)
        received = time.time()
        uploads = [self.read(i, reply) for i, reply in replies.items()]
        self.timing = _timings(t, pushed, received, replies)
        read = self.evaluation.read
        return Exchanged(
            uploads,
            tuple(i for i in messages if i not in replies),
            {i: p for i, r in replies.items() if (p := read(i, r)) is not None},
            {i: a for i, r in replies.items() if (a := _eval_accuracy(r)) is not None},
        )

    # ------------------------------------------------------------ secure round
    def first_sum(
        self,
        t: int,
        links: Mapping[int, Downlink],
        queries: np.ndarray,
        plan: SecurePlan,
        timeout: float | None,
    ) -> Summed:
        """Step 1 (the vote messages) and step 2 (the first SecAgg+ sum)."""
        self.timing = {"round": float(t)}
        messages = {
            i: self._vote_message(self.message(t, i, link), queries, plan)
            for i, link in links.items()
        }
        began = time.perf_counter()
        replies = exchange(self.grid, messages, timeout, self.poll_interval)
        self.timing["vote_s"] = time.perf_counter() - began
        got = Summed(None, timed_out=[i for i in messages if i not in replies])
        ready = []
        for i, reply in replies.items():
            problem = self._vote_reply(i, reply, got)
            if problem is None:
                ready.append(i)
            else:
                got.failed[i] = problem
        if queries.size == 0:  # a round that trains and releases nothing
            return got
        got.total, more, got.bytes_up = self._sum(t, "first", ready, queries.size, plan, timeout)
        got.failed.update(more)
        self.timing["first_sum_s"] = time.perf_counter() - began - self.timing["vote_s"]
        return got

    def answer_sum(
        self,
        t: int,
        positions: np.ndarray,
        sites: tuple[int, ...],
        plan: SecurePlan,
        timeout: float | None,
    ) -> Summed:
        """Step 3: the SecAgg+ sum of the answer shares at ``positions`` (none asked when
        no query was confident)."""
        if positions.size == 0:  # nothing confident: nothing to sum
            return Summed(None)
        began = time.perf_counter()
        config = {SELECTED: ",".join(str(int(p)) for p in positions)}
        total, failed, up = self._sum(
            t, "answer", list(sites), positions.size, plan, timeout, config
        )
        self.timing["answer_sum_s"] = time.perf_counter() - began
        return Summed(total, failed, bytes_up=up)

    def _vote_message(self, msg: Any, queries: np.ndarray, plan: SecurePlan) -> Any:
        """The round's ``train`` message with the plan's sizes and the queries."""
        from flwr.app import ArrayRecord

        msg.content[protocol.ROUND][N_SITES] = int(plan.n_sites)
        msg.content[protocol.ROUND][ROUNDS] = self.rounds
        data = np.asarray(queries, dtype="<i4").tobytes()
        msg.content[QUERIES] = ArrayRecord({protocol.PAYLOAD: protocol.to_array(data)})
        return msg

    def _vote_reply(self, i: int, reply: Any, got: Summed) -> str | None:
        """Note a site's vote reply (its acknowledgement, in ``got``); its failure text or
        None."""
        server = self.server
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
            got.acknowledged[i] = int(version)
        except Exception as err:  # a failed or malformed reply: this site sits out
            if server.on_client_error == "raise":
                raise RuntimeError(
                    f"{server.client_names[i]} failed in the vote step: {type(err).__name__}: {err}"
                ) from err
            return f"{type(err).__name__}: {err}"
        return None

    def _sum(
        self,
        t: int,
        step: str,
        clients: list[int],
        n_rows: int,
        plan: SecurePlan,
        timeout: float | None,
        extra: dict[str, Any] | None = None,
    ) -> tuple[SummedShares | None, dict[int, str], int]:
        """The SecAgg+ sum of ``clients``' shares for ``step``: ``(sum or None, failures,
        share bytes)``."""
        server = self.server
        shape = (int(n_rows), plan.n_classes)
        if len(clients) < max(plan.min_sites, _SECAGG_MIN):
            self._too_few(len(clients), plan)
            return None, {}, 0
        nodes = {int(self.node_ids[i]): i for i in clients}
        config = {
            "run-token": self.token,
            "round": int(t),
            STEP: step,
            N_SITES: int(plan.n_sites),
            ROUNDS: self.rounds,
            "n-classes": int(plan.n_classes),
            **(extra or {}),
        }
        threshold = max(plan.min_sites, len(nodes) // 2 + 1)
        try:
            result = secagg_sum(
                self.grid,
                sorted(nodes),
                shape=shape,
                query=f"{self.token}/{t}/{step}",
                reconstruction_threshold=threshold,
                timeout=timeout,
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
            self._too_few(len(sites), plan)
            return None, failed, 0
        up = len(sites) * shape[0] * shape[1] * SHARE_DTYPE.itemsize
        return SummedShares(np.asarray(result.total, dtype=np.int64), sites), failed, up

    def _too_few(self, n: int, plan: SecurePlan) -> None:
        if self.server.on_client_error == "raise":
            raise RuntimeError(
                f"only {n} sites can contribute to the secure sum, fewer than the "
                f"{max(plan.min_sites, _SECAGG_MIN)} its noise plan and SecAgg+ need"
            )
        _LOG.warning("only %s sites can contribute to the secure sum: nothing released", n)


def _timings(t: int, pushed: float, received: float, replies: dict[int, Any]) -> dict:
    """Where the seconds of a round went, from the sites' handler timestamps (one clock
    on localhost): push → site handler start (Flower's polling and process start), the
    slowest handler, handler end → all replies back. Private sites send no timestamps:
    only the others' count, and a round of private sites has its exchange time alone."""
    stats = [
        r.content.metric_records[envelope.STATS]
        for r in replies.values()
        if not r.has_error() and envelope.STATS in r.content.metric_records
    ]
    stats = [s for s in stats if "handler-start" in s]
    if not stats:
        return {"round": t, "exchange_s": received - pushed}
    return {
        "round": t,
        "exchange_s": received - pushed,
        "to_handler_s": max(float(s["handler-start"]) for s in stats) - pushed,
        "handler_s": max(float(s["handler-end"]) - float(s["handler-start"]) for s in stats),
        "learner_s": max(float(s["learner-time-s"]) for s in stats),
        "from_handler_s": received - max(float(s["handler-end"]) for s in stats),
    }


def _eval_accuracy(reply: Any) -> float | None:
    """A site's reported accuracy on its own evaluation data, if it sent a valid one."""
    try:
        value = float(reply.content.metric_records[envelope.STATS]["eval-accuracy"])
    except Exception:  # no evaluation data at that site, or a broken reply
        return None
    return value if 0.0 <= value <= 1.0 else None
