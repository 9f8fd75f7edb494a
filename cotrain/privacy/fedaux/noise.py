"""Where FedAUX's privacy noise comes from: the operating system's entropy, unless opted out.

The noise of a DP certainty scorer or head is drawn from fresh entropy: whoever knows the run's
``random_state`` (the server, a reader of the run's configuration) could otherwise replay it,
subtract it from the released weights and recover the exact non-private ones. Seeding it from
``random_state`` is the explicit, warned opt-in ``reproducible_noise=True`` of
:class:`~cotrain.privacy.fedaux.CertaintyScorer`, :class:`~cotrain.privacy.fedaux.DPSoftmaxHead`,
:func:`~cotrain.privacy.fedaux.fedaux_weights` and
:func:`~cotrain.baselines.fedaux_one_shot.one_shot_fedaux` (as ``reproducible_noise`` of
:class:`cotrain.FederatedCoTrainer`), for simulations only.

Examples
--------
>>> from cotrain.privacy.fedaux.noise import noise_generator, replayable_noise
>>> replay = replayable_noise(7, False, "a scorer")   # no opt-in: fresh entropy
>>> replay, bool(noise_generator(7, replay).normal() == noise_generator(7, replay).normal())
(False, False)
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

__all__ = [
    "REPLAYABLE_WARNING",
    "as_generator",
    "as_seed_sequence",
    "client_noise_seeds",
    "noise_generator",
    "replayable_noise",
]


def as_generator(random_state: Any) -> np.random.Generator:
    """A numpy Generator: ``random_state`` itself if it is one, else seeded from it."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.default_rng(random_state)


#: how the warning starts when privacy noise is seeded from ``random_state`` (a filter for it)
REPLAYABLE_WARNING = "reproducible_noise=True"


def replayable_noise(
    random_state: Any,
    reproducible_noise: Any,
    owner: str,
    dp: bool = True,
    stacklevel: int = 3,
) -> bool:
    """Whether a release's privacy noise is seeded from ``random_state`` (and replayable).

    Privacy noise comes from the operating system's entropy unless the caller opted into
    ``reproducible_noise=True`` and gave a ``random_state``: only then is it seeded from
    ``random_state`` — which the server, or whoever reads the run's configuration, knows, so
    that they can subtract the noise and recover the exact non-private release. That opt-in is
    for simulations that must repeat exactly; it warns (a ``UserWarning`` whose message starts
    with ``reproducible_noise=True``).

    Parameters
    ----------
    random_state : int, SeedSequence, numpy Generator or None
        The caller's ``random_state``; it seeds the noise only with ``reproducible_noise``.
    reproducible_noise : bool
        The explicit opt-in.
    owner : str
        Who draws the noise, for the warning.
    dp : bool, default=True
        Whether there is any noise (False: nothing to replay, no warning).
    stacklevel : int, default=3
        Of the warning.

    Returns
    -------
    bool
        True when the noise is to be seeded from ``random_state`` (it warned).

    Raises
    ------
    TypeError
        If ``reproducible_noise`` is not a bool.

    Examples
    --------
    >>> from cotrain.privacy.fedaux.noise import replayable_noise
    >>> replayable_noise(0, False, "a scorer"), replayable_noise(None, True, "a scorer")
    (False, False)
    """
    if not isinstance(reproducible_noise, bool | np.bool_):
        raise TypeError(f"reproducible_noise must be True or False; got {reproducible_noise!r}")
    if not (dp and reproducible_noise and random_state is not None):
        return False
    warnings.warn(
        f"{REPLAYABLE_WARNING}: {owner}'s privacy noise is seeded from random_state, so "
        "whoever knows random_state (anyone who reads the run's configuration; in a "
        "federation, the server) can replay the noise and recover the exact non-private "
        "release: the (epsilon, delta) guarantee does not hold against them. Use it for "
        "simulations only",
        UserWarning,
        stacklevel=stacklevel,
    )
    return True


def noise_generator(random_state: Any, replayable: bool) -> np.random.Generator:
    """The generator of privacy noise: seeded from ``random_state`` only if ``replayable``
    (see :func:`replayable_noise`), else from the operating system's entropy.

    Examples
    --------
    >>> from cotrain.privacy.fedaux.noise import noise_generator
    >>> bool(noise_generator(0, False).normal() == noise_generator(0, False).normal())
    False
    >>> bool(noise_generator(0, True).normal() == noise_generator(0, True).normal())
    True
    """
    return as_generator(random_state) if replayable else np.random.default_rng()


def client_noise_seeds(
    random_state: Any, n_clients: int, replayable: bool
) -> list[np.random.Generator | None]:
    """One noise generator per client spawned from ``random_state`` when ``replayable``
    (client ``i``: ``default_rng(SeedSequence(random_state).spawn(m)[i])``), else None each
    (the clients then draw from the operating system's entropy).

    Examples
    --------
    >>> from cotrain.privacy.fedaux.noise import client_noise_seeds
    >>> client_noise_seeds(0, 2, False)
    [None, None]
    >>> len(client_noise_seeds(0, 2, True))
    2
    """
    if not replayable:
        return [None] * n_clients
    return [np.random.default_rng(s) for s in as_seed_sequence(random_state).spawn(n_clients)]


def as_seed_sequence(random_state: Any) -> np.random.SeedSequence:
    """A SeedSequence from an int, None, a SeedSequence or a Generator (one draw of it)."""
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(2**63)))
    return np.random.SeedSequence(random_state)
