"""GNMax (PATE): the argmax of the vote counts plus Gaussian noise, as a consensus rule."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._base import Consensus
from .hard import vote_counts

__all__ = ["NoisyArgmax"]


class NoisyArgmax(Consensus):
    """GNMax aggregation (PATE, Papernot et al. 2018): noisy vote counts, then argmax.

    The server counts the (weighted) votes per class on each public example
    (:func:`consensus.vote_counts`), adds independent ``N(0, sigma²)`` noise to every count and
    takes the argmax. Examples on which nobody voted get -1, as with `majority_vote`.

    What is protected: the *aggregate*. One private record can change its client's votes on
    up to ``sensitivity`` public examples (default: all n), and each changed vote moves two
    counts by 1, so the count matrix has L2 sensitivity ``sqrt(2·min(sensitivity, n))`` and
    one round is a Gaussian mechanism with noise multiplier ``sigma / sqrt(2·min(s, n))``
    (:meth:`dp_event`; a data-independent bound — PATE's data-dependent analysis is not done
    here). ``FederatedCoTrainer`` composes it over rounds and reports the ε. The server
    itself still sees every client's upload in the clear: to protect each upload use a
    client-side mechanism from ``cotrain.privacy``. So its guarantee is ``unit="record"``
    (one private record of a client, with the default sensitivity of all n votes; a
    smaller ``sensitivity`` is the caller's claim) against ``adversary="broadcast
    observers"``, never against the server. Its noise is drawn from the operating system's
    entropy unless ``random_state`` is given — a seed makes it replayable by anyone who
    knows it (the trainer warns; a Flower deployment refuses it).

    Parameters
    ----------
    sigma : float
        Standard deviation of the noise on each count (>= 0); 0 is the plain majority vote
        (ties to the smallest class).
    sensitivity : int, optional
        Votes on U that one private record can change (default: all of them).
    delta : float, default=1e-5
        δ at which the accounted ε is reported.
    budget : float, optional
        Total ε per client; ``FederatedCoTrainer`` stops before exceeding it.
    random_state : int, numpy.random.SeedSequence, numpy.random.Generator or None
        Randomness. An int / SeedSequence / None seeds a ``SeedSequence`` kept by the object;
        every call spawns the next child of it and draws from ``default_rng(child)``, so the
        same seed and the same sequence of calls give the same results (and successive calls
        get independent noise). A Generator is used as is.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import NoisyArgmax
    >>> votes = np.array([[0, 1, 2, -1], [0, 2, 1, -1], [1, 2, -1, -1]])
    >>> NoisyArgmax(sigma=0.0)(votes, n_classes=3)
    array([ 0,  2,  1, -1])
    >>> a, b = NoisyArgmax(sigma=5.0, random_state=0), NoisyArgmax(sigma=5.0, random_state=0)
    >>> bool(np.array_equal(a(votes, n_classes=3), b(votes, n_classes=3)))
    True
    """

    output: ClassVar[Literal["hard", "soft"]] = "hard"

    def __init__(
        self,
        *,
        sigma: float = 1.0,
        sensitivity: int | None = None,
        delta: float = 1e-5,
        budget: float | None = None,
        random_state: Any = None,
    ) -> None:
        self.sigma = sigma
        self.sensitivity = sensitivity
        self.delta = delta
        self.budget = budget
        self.random_state = random_state

    unit = "record"
    adversary = "broadcast observers"

    @property
    def accountable(self) -> bool:
        """Whether there is privacy to account (``sigma > 0``)."""
        return self._check_sigma() > 0

    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """One round's privacy event for one record: a Gaussian mechanism on the counts.

        Examples
        --------
        >>> event = NoisyArgmax(sigma=40.0).dp_event(n_classes=2, n_labels=200)
        >>> float(event.noise_multiplier)  # 40 / sqrt(2 * 200)
        2.0
        """
        import dp_accounting

        sigma = self._check_sigma()
        if sigma == 0:
            raise ValueError("sigma=0 is the plain majority vote: it gives no privacy")
        changed = n_labels if self.sensitivity is None else min(int(self.sensitivity), n_labels)
        return dp_accounting.GaussianDpEvent(sigma / np.sqrt(2.0 * changed))

    #: the relation :meth:`dp_event` is stated in (see :meth:`relation_event`)
    neighbors = "add_or_remove"

    def relation_event(self, n_classes: int, n_labels: int, relation: str) -> Any:
        """One round's event under ``relation``, read as dp-accounting reads it there.

        Add/remove: :meth:`dp_event`. Replace-one (remove one record, then add another):
        with the default ``sensitivity`` (all n votes may change) any two data sets of a
        client already differ by at most that, so the bound is the same — dp-accounting
        doubles a Gaussian event's sensitivity under replace-one, hence the noise multiplier
        is doubled here to state it; a claimed ``sensitivity`` s counts twice,
        ``min(2·s, n)`` votes.

        Examples
        --------
        >>> rule = NoisyArgmax(sigma=40.0)
        >>> float(rule.relation_event(2, 200, "replace_one").noise_multiplier)  # 2 * 40/20
        4.0
        >>> float(NoisyArgmax(sigma=40.0, sensitivity=50).relation_event(
        ...     2, 200, "replace_one").noise_multiplier)   # 40 / sqrt(2 * 100)
        2.82842712474619
        """
        import dp_accounting

        if relation == "add_or_remove":
            return self.dp_event(n_classes, n_labels)
        if relation != "replace_one":
            raise ValueError(f"relation must be 'add_or_remove' or 'replace_one', got {relation!r}")
        sigma = float(self.dp_event(n_classes, n_labels).noise_multiplier)  # checks sigma
        if self.sensitivity is None:
            return dp_accounting.GaussianDpEvent(2.0 * sigma)
        changed = min(2 * int(self.sensitivity), n_labels)
        return dp_accounting.GaussianDpEvent(self._check_sigma() / np.sqrt(2.0 * changed))

    def _check_sigma(self) -> float:
        sigma = self.sigma
        if (
            isinstance(sigma, bool)
            or not isinstance(sigma, numbers.Real)
            or not np.isfinite(sigma)
            or sigma < 0
        ):
            raise ValueError(f"sigma must be a finite number >= 0, got {sigma!r}")
        return float(sigma)

    def _rng(self) -> np.random.Generator:
        state = self.random_state
        if isinstance(state, np.random.Generator):
            return state
        cached = getattr(self, "_seed_source", None)
        if cached is None or cached[0] is not state:
            if state is not None and not isinstance(
                state, numbers.Integral | np.random.SeedSequence
            ):
                raise ValueError(
                    "random_state must be None, an int, a SeedSequence or a Generator, "
                    f"got {type(state).__name__}"
                )
            seq = (
                state
                if isinstance(state, np.random.SeedSequence)
                else np.random.SeedSequence(None if state is None else int(state))
            )
            cached = (state, seq)
            self._seed_source = cached
        return np.random.default_rng(cached[1].spawn(1)[0])

    def state_dict(self) -> dict[str, Any]:
        """Where the noise stream stands, for checkpoints (see :meth:`load_state_dict`).

        Examples
        --------
        >>> a = NoisyArgmax(sigma=5.0, random_state=0)
        >>> _ = a(np.array([[0, 1], [1, 1]]), n_classes=2)
        >>> b = NoisyArgmax(sigma=5.0, random_state=0)
        >>> b.load_state_dict(a.state_dict())
        >>> votes = np.array([[0, 1], [1, 0]])
        >>> bool((a(votes, n_classes=2) == b(votes, n_classes=2)).all())
        True
        """
        if isinstance(self.random_state, np.random.Generator):
            return {"generator": self.random_state.bit_generator.state}
        cached = getattr(self, "_seed_source", None)
        return {"spawned": 0 if cached is None else int(cached[1].n_children_spawned)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue the noise stream from :meth:`state_dict`.

        Raises
        ------
        ValueError
            If ``state`` is not what :meth:`state_dict` returns for this ``random_state``.
        """
        expected = "generator" if isinstance(self.random_state, np.random.Generator) else "spawned"
        if not isinstance(state, Mapping) or set(state) != {expected}:
            got = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(
                f"NoisyArgmax state must be a dict with the single key {expected!r} "
                f"(from state_dict() with this random_state), got {got}"
            )
        if "generator" in state:
            self.random_state.bit_generator.state = state["generator"]
            return
        self._rng_seed_sequence_only()
        _, seq = self._seed_source
        self._seed_source = (
            self.random_state,
            np.random.SeedSequence(
                seq.entropy, spawn_key=seq.spawn_key, n_children_spawned=int(state["spawned"])
            ),
        )

    def _rng_seed_sequence_only(self) -> None:
        """Create the cached seed sequence without drawing from it."""
        if getattr(self, "_seed_source", None) is None:
            self._rng()
            _, seq = self._seed_source
            self._seed_source = (
                self.random_state,
                np.random.SeedSequence(seq.entropy, spawn_key=seq.spawn_key),
            )

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[np.int64]:
        sigma = self._check_sigma()
        counts = vote_counts(labels, n_classes, weights)
        voted = counts.sum(axis=1) > 0
        if sigma > 0:
            counts = counts + self._rng().normal(0.0, sigma, size=counts.shape)
        out: NDArray[np.int64] = counts.argmax(axis=1).astype(np.int64)
        out[~voted] = -1
        return out
