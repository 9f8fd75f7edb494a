"""A Flower site's own state between rounds: its model and delta-coding reference, on disk.

Flower starts a fresh ClientApp process for every message, so a site that must keep its
model between rounds (learners that continue training: XGBoost's boosting, torch clients,
``warm_start``) stores it at the site — never on the server — under
``<site folder>/state/run-<token>/``, one checkpoint per round it took part in, written
atomically by the same store as ``FederatedCoTrainer(checkpoint_dir=...)``
(:class:`cotrain.persistence.checkpoint.Checkpointer`: a manifest of SHA-256 digests, skops for the
model, no pickle). The token identifies the run; the ServerApp sends it with every round.

A private site's ledger (:class:`cotrain.privacy.ledgers.site_ledger.SiteLedger`: every release
it sent, with the exact reply bytes, :func:`cotrain.wire.envelope.reply_to_bytes`) lives
beside it under ``<site folder>/state/privacy/`` — not per run: a new run token does not
reset the site's budget (:func:`open_site_ledger`).

Round ``t`` starts from the site's latest checkpoint of a round before ``t`` (so a
ServerApp that resumes an earlier round finds the site's state of that time). A SuperNode
that restarts picks its state back up from disk. A site whose state is missing (after a
round it took part in) or unreadable says so in a warning and refits from scratch rather
than failing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cotrain.federation.client import Client
from cotrain.flower.site import SiteFolder
from cotrain.persistence.checkpoint import (
    Checkpointer,
    CheckpointError,
    checkpoint_blocker,
    estimator_types,
    fingerprint,
    split_arrays,
)
from cotrain.privacy.ledgers.site_ledger import DEFAULT_SITE_BUDGET, SiteLedger
from learners import continues_training

__all__ = [
    "PRIVACY_DIR",
    "STATE_DIR",
    "SiteState",
    "keeps_model",
    "open_site_ledger",
    "run_directory",
]

#: folder next to a site's ``site.toml`` that holds its per-run state
STATE_DIR = "state"
#: folder under STATE_DIR with a private site's ledger (all runs together)
PRIVACY_DIR = "privacy"


def open_site_ledger(site: SiteFolder, n_classes: int) -> SiteLedger:
    """The ledger of a private ``site`` on its own disk (``state/privacy/``), for a
    federation of ``n_classes`` classes on the site's public pool. Its budget is the
    mechanism's ``budget``, or :data:`~cotrain.privacy.ledgers.site_ledger.DEFAULT_SITE_BUDGET`
    (ε = 10 over the folder's whole life) when the site's ``[privacy]`` states none.

    Raises
    ------
    ValueError
        If the site has no privacy mechanism, or its ledger was kept for another
        configuration (mechanism, number of classes, public pool size).

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from pathlib import Path
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain.privacy import RandomizedResponse
    >>> folder = Path(tempfile.mkdtemp())
    >>> site = SiteFolder(0, np.zeros((2, 1)), np.array([0, 1]), np.ones((3, 1)),
    ...             DecisionTreeClassifier(), folder / "site.toml",
    ...             privacy=RandomizedResponse(epsilon=1.0))
    >>> ledger = open_site_ledger(site, 2)
    >>> ledger.directory.relative_to(folder).as_posix(), ledger.releases, ledger.budget
    ('state/privacy', 0, 10.0)
    """
    if site.privacy is None:
        raise ValueError(f"the site {site.path} has no privacy mechanism: it keeps no ledger")
    directory = Path(site.path).parent / STATE_DIR / PRIVACY_DIR
    n_public = int(site.X_public.shape[0])
    return SiteLedger(site.privacy, n_classes, n_public, directory, DEFAULT_SITE_BUDGET)


def run_directory(site: SiteFolder, token: str) -> Path:
    """``<site folder>/state/run-<token>/``: what the site keeps for one run.

    Raises
    ------
    ValueError
        If ``token`` is not a non-empty alphanumeric string (dashes allowed).
    """
    if not token or not str(token).replace("-", "").isalnum():
        raise ValueError(f"run-token must be a non-empty alphanumeric string, got {token!r}")
    return Path(site.path).parent / STATE_DIR / f"run-{token}"


#: round configuration keys that change every round (not part of the site's identity)
_PER_ROUND = frozenset({"round", "ref-round", "broadcast-ref"})


def keeps_model(estimator: Any, trust: Any) -> bool:
    """Whether a site stores its model between rounds: when its learner continues training
    (warm start) or its trust goes on from the models of earlier rounds
    (``CrossFitTrust(refit="one")`` refits one of its two models a round, as in process),
    and the model can be stored at all.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain.trust import CrossFitTrust, FixedTrust
    >>> keeps_model(DecisionTreeClassifier(), FixedTrust(1.0))
    False
    >>> keeps_model(DecisionTreeClassifier(), CrossFitTrust())
    True
    """
    wanted = continues_training(estimator) or bool(getattr(trust, "keeps_models", False))
    return wanted and checkpoint_blocker(estimator) is None


class SiteState:
    """The per-run state store of one site.

    Parameters
    ----------
    site : SiteFolder
        The site (its folder holds the store).
    token : str
        The run's token, from the ServerApp's round configuration.
    config : dict
        The round configuration; what the site's model depends on (client index, seed,
        classes, wire format, pool) goes into the store's fingerprint, so a state from a
        different configuration is never loaded.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from pathlib import Path
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> folder = Path(tempfile.mkdtemp())
    >>> site = SiteFolder(0, np.zeros((2, 1)), np.array([0, 1]), np.ones((3, 1)),
    ...             DecisionTreeClassifier(), folder / "site.toml")
    >>> store = SiteState(site, "abc", {"round": 1, "seed": 3})
    >>> store.directory.relative_to(folder).as_posix()
    'state/run-abc'
    """

    def __init__(self, site: SiteFolder, token: str, config: dict[str, Any]) -> None:
        self.directory = run_directory(site, token)
        identity = {k: repr(v) for k, v in sorted(config.items()) if k not in _PER_ROUND}
        self.checkpointer = Checkpointer(
            self.directory,
            fingerprint("site", site.pool_hash, repr(site.estimator), identity),
            keep=3,
            trusted_types=estimator_types([site.estimator]),
        )

    def restore(self, client: Client, t: int, ref_round: int) -> str | None:
        """Put the site's state of its latest round before ``t`` into ``client``.

        ``ref_round`` is the round of this site's last upload that the server decoded (0:
        none): when it is positive, the site took part before and must have a state.

        Returns
        -------
        str or None
            A warning when the state was expected but is missing or unreadable (the
            client then starts from scratch), else None.
        """
        if self.checkpointer.latest(before=t) is None:
            if ref_round > 0:
                return (
                    f"round {t}: this site took part in round {ref_round} of the run but its "
                    "state is gone; refitting from scratch"
                )
            return None  # the site has not taken part yet in this run
        try:
            state, _, models = self.checkpointer.restore(before=t)
        except (CheckpointError, OSError, ValueError) as err:
            return f"the site's state for this run is unreadable ({err}); refitting from scratch"
        mine = state["clients"][0]
        client.load_state_dict({**mine, "model": models.get(0)})
        return None

    def save(self, t: int, client: Client, keep_model: bool = True) -> None:
        """Store ``client``'s state after round ``t`` (atomically); without ``keep_model``
        (a learner that refits every round, or whose models cannot be stored) only its
        delta-coding reference — no model file, so skops (about 2 s to import in a fresh
        ClientApp process) is not needed."""
        state = client.state_dict()
        model = state.pop("model")
        state["fitted"] = bool(state["fitted"] and keep_model)
        tree, arrays = split_arrays({"round": t, "clients": [state]})
        self.checkpointer.save(t, tree, arrays, None, {0: model} if state["fitted"] else {})
