"""One federation at work: its clients, its server and the round loop that drives them.

- :mod:`~cotrain.federation.client`: :class:`~cotrain.federation.client.Client`, the only
  place that touches private data;
- :mod:`~cotrain.federation.server`: the server half of a round (configure each client's
  downlink; decode, consensus);
- :mod:`~cotrain.federation.setup`: builds and restores the server side of a run, for
  the trainer and the Flower ServerApp alike;
- :mod:`~cotrain.federation.loop`: :class:`~cotrain.federation.loop.RoundLoop`, the loop
  every method runs on, with the callbacks around each round;
- :mod:`~cotrain.federation.rounds`: the two round protocols, each written once — the label
  round and the round of teacher votes summed across sites (``privacy=SecureTeacherVotes``)
  — and the choice a privacy mechanism declares (``round_protocol``);
- :mod:`~cotrain.federation.transport`: what carries a round (exchange labels, sum shares):
  the protocol the in-process pool (:mod:`~cotrain.federation.pool_transport`) and the
  Flower grid (:mod:`cotrain.flower.grid_transport`) implement;
- :mod:`~cotrain.federation.simulation`: an in-process federation (clients on a runtime);
- :mod:`~cotrain.federation.secure_client`, :mod:`~cotrain.federation.secure_sum`: a
  secure-sum site's shares, and the sum and consensus the server forms from sums;
- :mod:`~cotrain.federation.privacy_setup`: the checks and the ledger of a private run;
- :mod:`~cotrain.federation.sampling`, :mod:`~cotrain.federation.seeding`: who takes part
  in a round, and the seeds every part draws from.
"""

from __future__ import annotations

__all__: list[str] = []


def __dir__() -> list[str]:
    return sorted(__all__)
