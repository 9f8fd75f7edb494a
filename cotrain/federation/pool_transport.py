"""The in-process transport: a round's messages through the runtime's client pool.

:class:`PoolTransport` carries the rounds of :mod:`cotrain.federation.rounds` to clients
resident wherever the runtime keeps them (this process, joblib workers, Ray actors): a label
exchange calls each client's :meth:`~cotrain.federation.client.Client.run_round`; a secure
sum calls :meth:`~cotrain.federation.secure_client.SecureClient.vote_round` or
:meth:`~cotrain.federation.secure_client.SecureClient.answer_round` and hands the server only
the sum (:func:`~cotrain.federation.secure_sum.sum_shares_in_process`, the in-process stand-in
for secure aggregation).

What private clients keep off their uploads (learner warnings, fit time) the experimenter
of a simulation still sees: the transport counts them in ``local_warnings`` and reports the
time beside the exchange.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from cotrain.federation.secure_sum import decode_share, sum_shares_in_process
from cotrain.federation.seeding import noise_seed_for
from cotrain.federation.server import CoTrainingServer
from cotrain.federation.transport import Exchanged, Summed
from cotrain.privacy.mechanisms.secure_votes import SecurePlan
from cotrain.runtime.straggler import Straggler
from cotrain.wire.broadcast import Downlink

__all__ = ["PoolTransport"]


class PoolTransport:
    """A round's messages through a client pool (see the module docstring).

    Parameters
    ----------
    pool : ClientPool
        The runtime's pool of resident clients (``call(method, args, timeout)``).
    server : CoTrainingServer
        For its clients' names and ``on_client_error``.
    n_classes : int
    noise_seed : SeedSequence, optional
        Seeds each client's privacy noise per round (``reproducible_noise``); None: the
        clients draw it from the operating system's entropy.
    local_warnings : Counter, optional
        Where the learner warnings of private clients are counted.
    """

    def __init__(
        self,
        pool: Any,
        server: CoTrainingServer,
        n_classes: int,
        noise_seed: np.random.SeedSequence | None = None,
        local_warnings: Counter | None = None,
    ) -> None:
        self.pool = pool
        self.server = server
        self.n_classes = n_classes
        self.noise_seed = noise_seed
        self.local_warnings = Counter() if local_warnings is None else local_warnings

    def exchange(self, t: int, links: Mapping[int, Downlink], timeout: float | None) -> Exchanged:
        """Each client's :meth:`~cotrain.federation.client.Client.run_round`; what it
        releases (:meth:`~cotrain.federation.site.StepResult.upload`), and the
        simulation's own scoring of its predictions."""
        args = {i: (t, link, noise_seed_for(self.noise_seed, t, i)) for i, link in links.items()}
        out = self.pool.call("run_round", args, timeout=timeout)
        results = [r for r in out.values() if not isinstance(r, Straggler)]
        private = [r for r in results if r.private]
        for r in private:
            self._keep_warnings(r.client_id, r.warnings)
        return Exchanged(
            [r.upload() for r in results],
            tuple(sorted(i for i, r in out.items() if isinstance(r, Straggler))),
            {
                r.client_id: (r.eval_codes, r.eval_proba)
                for r in results
                if r.eval_codes is not None
            },
            kept_learner_time_s=sum(r.learner_time_s for r in private),
        )

    def first_sum(
        self,
        t: int,
        links: Mapping[int, Downlink],
        queries: np.ndarray,
        plan: SecurePlan,
        timeout: float | None,
    ) -> Summed:
        """Each site's :meth:`~cotrain.federation.secure_client.SecureClient.vote_round`;
        the sum of their first shares."""
        seed = self.noise_seed
        args = {i: (t, link, noise_seed_for(seed, t, i), queries) for i, link in links.items()}
        return self._collect("vote_round", args, queries.size, plan.min_sites, timeout)

    def answer_sum(
        self,
        t: int,
        positions: np.ndarray,
        sites: tuple[int, ...],
        plan: SecurePlan,
        timeout: float | None,
    ) -> Summed:
        """Each site's :meth:`~cotrain.federation.secure_client.SecureClient.answer_round`
        at ``positions``; the sum of those answer shares."""
        ask = {i: (t, positions) for i in sites}
        return self._collect("answer_round", ask, positions.size, plan.min_sites, timeout)

    def _collect(
        self,
        method: str,
        args: Mapping[int, tuple],
        n_rows: int,
        min_sites: int,
        timeout: float | None,
    ) -> Summed:
        """Call ``method`` on the sites; sum the well-formed shares, revealed only from
        ``min_sites`` on (the server sees only the sum)."""
        server = self.server
        out = self.pool.call(method, dict(args), timeout=timeout)
        got = Summed(None)
        shares = {}
        for i, result in out.items():
            if isinstance(result, Straggler):
                got.timed_out.append(i)
                continue
            if method == "vote_round":
                got.acknowledged[i] = result.broadcast_version
                if result.eval_codes is not None:
                    got.predictions[i] = (result.eval_codes, result.eval_proba)
                self._keep_warnings(i, result.warnings)
            try:
                if result.error is not None:
                    raise result.error
                if n_rows == 0:  # a round that trains and releases nothing
                    continue
                shares[i] = decode_share(result.message, n_rows, self.n_classes)
                got.bytes_up += len(result.message)
            except Exception as err:  # a failed or malformed share: this site sits out
                if server.on_client_error == "raise":
                    raise RuntimeError(
                        f"{server.client_names[i]} failed in {method}: {type(err).__name__}: {err}"
                    ) from err
                got.failed[i] = f"{type(err).__name__}: {err}"
        if n_rows == 0:
            return got
        got.total = sum_shares_in_process(shares, min_sites)
        del shares  # the server's code keeps only the sum
        if got.total is None and server.on_client_error == "raise":
            raise RuntimeError(
                f"only {len(out) - len(got.failed) - len(got.timed_out)} sites contributed to "
                f"the secure sum, fewer than the {min_sites} its noise plan needs"
            )
        return got

    def _keep_warnings(self, client_id: int, warnings: Counter) -> None:
        for (category, message), n in warnings.items():
            self.local_warnings[(client_id, category, message)] += n
