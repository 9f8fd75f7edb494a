"""Name registry: look consensus rules up by name (as the trainer's ``consensus=`` does).

This module imports no rule: the package (``consensus/__init__.py``) registers the built-in
names, so that a rule module may itself look rules up by name (as `ReputationVote` does for
its ``base``) without an import cycle.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from ._base import Consensus

__all__ = ["available_consensus", "get_consensus", "register_consensus"]

_REGISTRY: dict[str, Callable[[], Consensus]] = {}


def _key(name: str) -> str:
    return name.strip().lower()


def register_consensus(
    name: str, factory: Callable[[], Consensus], *, overwrite: bool = False
) -> None:
    """Register a consensus rule under ``name`` (case-insensitive).

    Parameters
    ----------
    name : str
        The name `get_consensus` will accept.
    factory : callable
        Called with no arguments to build a fresh `Consensus` each time the name is looked
        up, e.g. a `Consensus` subclass or ``functools.partial(QualifiedMajority, quorum=0.6)``.
    overwrite : bool, default=False
        Replace an existing registration instead of raising ``ValueError``.

    Examples
    --------
    >>> from functools import partial
    >>> from consensus import QualifiedMajority, get_consensus, register_consensus
    >>> register_consensus("qm60", partial(QualifiedMajority, quorum=0.6), overwrite=True)
    >>> get_consensus("qm60")
    QualifiedMajority(quorum=0.6)
    """
    if not isinstance(name, str) or not name.strip():
        raise TypeError(f"name must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise TypeError(f"factory must be callable (returning a Consensus), got {factory!r}")
    key = _key(name)
    if key in _REGISTRY and not overwrite:
        raise ValueError(f"a consensus named {key!r} is already registered; pass overwrite=True")
    _REGISTRY[key] = factory


def available_consensus() -> list[str]:
    """Sorted names accepted by `get_consensus`.

    Examples
    --------
    >>> from consensus import available_consensus
    >>> "majority" in available_consensus() and "fedds" in available_consensus()
    True
    """
    return sorted(_REGISTRY)


def get_consensus(spec: str | Consensus) -> Consensus:
    """Return a consensus object from a name or an instance.

    Parameters
    ----------
    spec : str or Consensus
        An instance is returned as is. Built-in names: "majority"/"majority_vote",
        "qualified"/"qualified_majority", "mean"/"soft_mean"/"dd",
        "entropy"/"entropy_weighted"/"fedds", "certainty"/"certainty_weighted"/"fedaux",
        "noisy_argmax"/"gnmax", "trimmed"/"trimmed_vote", "reputation"/"reputation_vote"
        (case-insensitive), each with default parameters, plus any registered name.

    Returns
    -------
    Consensus

    Examples
    --------
    >>> from consensus import MajorityVote, get_consensus
    >>> get_consensus("fedds")
    EntropyWeighted(k=5.0)
    >>> rule = MajorityVote()
    >>> get_consensus(rule) is rule
    True
    """
    if isinstance(spec, Consensus):
        return spec
    if not isinstance(spec, str):
        raise TypeError(
            f"consensus must be a name (str) or a Consensus instance, got {type(spec).__name__}"
        )
    key = _key(spec)
    if key not in _REGISTRY:
        names = available_consensus()
        close = difflib.get_close_matches(key, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown consensus {spec!r}; valid names are {', '.join(names)}{hint}")
    rule = _REGISTRY[key]()
    if not isinstance(rule, Consensus):
        raise TypeError(
            f"the factory registered as {key!r} returned {type(rule).__name__}, not a Consensus"
        )
    return rule
