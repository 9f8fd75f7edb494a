"""What carries a round between the server and the sites: the :class:`Transport` protocol.

A round (:mod:`cotrain.federation.rounds`) is written once, over a transport that moves its
messages: in process, the runtime's client pool
(:class:`~cotrain.federation.pool_transport.PoolTransport`); deployed, Flower's grid, with
every sum through SecAgg+ (:class:`~cotrain.flower.grid_transport.GridTransport`). A
transport offers what the two round protocols need:

- :meth:`Transport.exchange` (the label round): each site gets its downlink and answers
  with the :class:`~cotrain.wire.upload.Upload` it releases;
- :meth:`Transport.first_sum` and :meth:`Transport.answer_sum` (the secure round): the
  sites fit and compute their noisy vote shares, and the server gets **only their sum**
  (:class:`~cotrain.federation.secure_sum.SummedShares`), for the round's queries and then
  for the positions it selected.

What a transport returns is what the server may see, and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from cotrain.federation.secure_sum import SummedShares
from cotrain.privacy.mechanisms.secure_votes import SecurePlan
from cotrain.wire.broadcast import Downlink
from cotrain.wire.upload import Upload

__all__ = ["Exchanged", "Summed", "Transport"]

#: a client's predictions on the evaluation data: class codes and, if asked, probabilities
Predictions = tuple[Any, Any]


@dataclass
class Exchanged:
    """What one label exchange brought back.

    Attributes
    ----------
    uploads : list of Upload
        What each site that answered released (failures too).
    timed_out : tuple of int
        The sites that did not answer in time.
    predictions : dict of int to (codes, proba)
        Predictions on evaluation data the federation scores: a simulation's own
        scoring, or a deployed site's public test set.
    accuracy : dict of int to float, optional
        Accuracies the sites reported on their own evaluation data (a deployment); None:
        computed from ``predictions``.
    kept_learner_time_s : float
        Learner seconds of private clients, which their uploads do not carry (a
        simulation's own measurement; 0 deployed).
    """

    uploads: list[Upload]
    timed_out: tuple[int, ...] = ()
    predictions: dict[int, Predictions] = field(default_factory=dict)
    accuracy: dict[int, float] | None = None
    kept_learner_time_s: float = 0.0


@dataclass
class Summed:
    """What one step of a secure round brought back.

    Attributes
    ----------
    total : SummedShares or None
        The sum and who contributed; None when nothing was summed (no rows asked, or
        fewer sites than the noise plan needs).
    failed : dict of int to str
        Sites that failed, refused or sent a malformed share: they sit out.
    timed_out : list of int
        Sites that did not answer in time.
    bytes_up : int
        The share bytes of the contributing sites.
    acknowledged : dict of int to int or None
        The consensus version each site's reply says it holds (the first step only).
    predictions : dict of int to (codes, proba)
        As :attr:`Exchanged.predictions` (the first step only).
    """

    total: SummedShares | None
    failed: dict[int, str] = field(default_factory=dict)
    timed_out: list[int] = field(default_factory=list)
    bytes_up: int = 0
    acknowledged: dict[int, int | None] = field(default_factory=dict)
    predictions: dict[int, Predictions] = field(default_factory=dict)


@runtime_checkable
class Transport(Protocol):
    """How a round's messages reach the sites and come back (see the module docstring)."""

    def exchange(self, t: int, links: Mapping[int, Downlink], timeout: float | None) -> Exchanged:
        """Send each site ``i`` its downlink ``links[i]`` for round ``t``; their uploads."""
        ...

    def first_sum(
        self,
        t: int,
        links: Mapping[int, Downlink],
        queries: np.ndarray,
        plan: SecurePlan,
        timeout: float | None,
    ) -> Summed:
        """Send each site its downlink and the round's ``queries``: each fits, computes its
        noisy shares and keeps them; the sum of their first shares (none when ``queries``
        is empty: the sites train and release nothing, or when fewer sites than
        ``plan.min_sites`` contributed)."""
        ...

    def answer_sum(
        self,
        t: int,
        positions: np.ndarray,
        sites: tuple[int, ...],
        plan: SecurePlan,
        timeout: float | None,
    ) -> Summed:
        """The sum of ``sites``' answer shares at the selected ``positions`` of round
        ``t``'s queries."""
        ...
