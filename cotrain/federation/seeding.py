"""Seeding: how one ``random_state`` becomes the seed of every client and sampler.

Shared by the trainer, the baselines and Flower sites, so that the same seed gives the
same clients wherever they run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import clone

__all__ = ["client_seed", "noise_seed_for", "seeded_clone", "spawn_seeds"]


def spawn_seeds(
    random_state: int | None, n_clients: int
) -> tuple[np.random.SeedSequence, list[np.random.SeedSequence], np.random.SeedSequence]:
    """The seed sequences of a federation: (sampler, one per client, privacy noise).

    The order of spawning is fixed, so the same ``random_state`` gives the same
    sampler and clients in the trainer and on Flower.

    Examples
    --------
    >>> sampler, clients, noise = spawn_seeds(0, 3)
    >>> len(clients), client_seed(clients[0]) == client_seed(spawn_seeds(0, 3)[1][0])
    (3, True)
    """
    seeds = np.random.SeedSequence(random_state)
    sampler, *clients = seeds.spawn(n_clients + 1)
    noise = seeds.spawn(1)[0]
    return sampler, clients, noise


def seeded_clone(estimator: Any, seed: np.random.SeedSequence | int) -> Any:
    """Clone ``estimator`` and seed every ``random_state`` it leaves as None.

    Used by the trainer, the baselines and Flower sites, so that one ``random_state``
    seeds every client. ``seed`` is the client's seed sequence or the integer it
    generates (``client_seed``), which is what a Flower site receives.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> est = seeded_clone(DecisionTreeClassifier(), np.random.SeedSequence(0))
    >>> est.random_state == client_seed(np.random.SeedSequence(0))
    True
    """
    value = seed if isinstance(seed, int | np.integer) else client_seed(seed)
    est = clone(estimator)
    params = est.get_params(deep=True) if hasattr(est, "get_params") else {}
    unset = {k: int(value) for k, v in params.items() if k.endswith("random_state") and v is None}
    if unset:
        est.set_params(**unset)
    return est


def client_seed(seed: np.random.SeedSequence) -> int:
    """The integer that seeds a client's unset ``random_state`` parameters."""
    return int(seed.generate_state(1)[0])


def noise_seed_for(noise: np.random.SeedSequence | None, round_: int, client: int) -> int | None:
    """Seed of one client's privacy noise in one round — only with reproducible noise.

    ``noise`` is the federation's noise seed sequence when the user opted into
    ``reproducible_noise`` (each (round, client) gets its own stream, so results do not
    depend on the order in which clients run), and None otherwise: the client then draws its
    noise from the operating system's entropy, and nobody can replay it.

    Examples
    --------
    >>> noise_seed_for(None, 1, 0) is None
    True
    >>> seq = spawn_seeds(0, 2)[2]
    >>> noise_seed_for(seq, 1, 0) == noise_seed_for(seq, 1, 0) != noise_seed_for(seq, 1, 1)
    True
    """
    if noise is None:
        return None
    seq = np.random.SeedSequence(noise.entropy, spawn_key=(*noise.spawn_key, round_, client))
    return int(seq.generate_state(1)[0])
