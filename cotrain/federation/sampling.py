"""Which clients take part in a round: all of them, or a seeded random subset."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ClientSampler", "sample_clients"]


def sample_clients(
    rng: np.random.Generator, n_clients: int, participation: float, min_clients: int = 1
) -> np.ndarray:
    """The clients asked this round: all of them, or a sorted random subset.

    ``max(min_clients, round(participation * n_clients))`` clients are drawn without
    replacement; when that is every client, ``rng`` is not used.

    Examples
    --------
    >>> sample_clients(np.random.default_rng(0), 10, 0.3, 1).tolist()
    [5, 6, 9]
    """
    k = max(min_clients, round(participation * n_clients))
    if k >= n_clients:
        return np.arange(n_clients)
    return np.sort(rng.choice(n_clients, size=k, replace=False))


class ClientSampler:
    """Draws the clients of each round from its own seeded generator.

    Parameters
    ----------
    seed : numpy.random.SeedSequence or int or None
        Seeds the generator (the trainer passes the sampler's spawned seed sequence).
    n_clients : int
        Clients in the federation.
    participation : float, default=1.0
        Fraction of clients asked each round.
    min_clients : int, default=1
        Fewest clients asked.

    Examples
    --------
    >>> sampler = ClientSampler(0, n_clients=10, participation=0.3)
    >>> state = sampler.state_dict()
    >>> first = sampler.sample().tolist()
    >>> sampler.load_state_dict(state)
    >>> sampler.sample().tolist() == first
    True
    """

    def __init__(
        self,
        seed: np.random.SeedSequence | int | None,
        n_clients: int,
        participation: float = 1.0,
        min_clients: int = 1,
    ) -> None:
        self.rng = np.random.default_rng(seed)
        self.n_clients = n_clients
        self.participation = participation
        self.min_clients = min_clients

    def sample(self) -> np.ndarray:
        """The sorted ids of the clients asked in the next round."""
        return sample_clients(self.rng, self.n_clients, self.participation, self.min_clients)

    def state_dict(self) -> dict[str, Any]:
        """The generator's state (JSON-serialisable)."""
        return {"bit_generator": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        self.rng.bit_generator.state = state["bit_generator"]
