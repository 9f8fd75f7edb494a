"""A private site's side of a secure-vote round on Flower (``SecureTeacherVotes``).

In a run with ``privacy=SecureTeacherVotes(...)`` (see
:mod:`cotrain.flower.grid_transport` for the round, message by message) a site answers two
kinds of request, both with the in-process site's code,
:class:`~cotrain.federation.secure_client.SecureClient`:

- the round's ``train`` message (:func:`site_vote`, run by
  :func:`cotrain.flower.client_app.site_train`): the site fits its own model on its rows ∪
  P, trains its teachers and computes its noisy shares on the round's queries
  (:meth:`SecureClient.vote_round`, noise from this site's own entropy) and **keeps them on
  its own disk**; its reply carries no share, only the consensus version it now holds;
- the *collect masked vectors* stage of each SecAgg+ sum (:func:`secagg_share_reply`, called by
  the relay ClientApp's vector function through the site's warm worker, or in the
  ClientApp's own process): the stored first share, or the rows of the answer share that
  the server selected (:meth:`SecureClient.answer_round`). Flower's
  :func:`~flwr.client.mod.secaggplus_mod` masks it before it leaves the site.

The site enforces the public plan itself: it computes the
:class:`~cotrain.privacy.mechanisms.secure_votes.SecurePlan` from its own mechanism and the run's
public configuration (sites, |U|, classes, rounds), keeps the first plan of a run and
refuses another; refuses a SecAgg+ reconstruction threshold below the plan's
``min_sites`` (a sum over fewer sites would not carry the planned noise); and keeps what
it sent per round (:meth:`SecureClient.sent_state`) in ``state/secure/run-<token>.json``
under a file lock, so a repeated request gets the same share, a second selection for a
round is refused, and no round past the plan is released — across processes and
restarts. Every refusal reaches the server as fixed words.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.federation.rounds import round_protocol
from cotrain.federation.secure_client import SecureClient
from cotrain.federation.secure_sum import decode_share, encode_share
from cotrain.federation.seeding import seeded_clone
from cotrain.files import exclusive_lock, write_atomic
from cotrain.flower import protocol
from cotrain.flower.site import SiteFolder
from cotrain.flower.site_state import STATE_DIR, SiteState
from cotrain.persistence.checkpoint import checkpoint_blocker
from cotrain.privacy.ledgers.site_ledger import PrivacyBudgetSpent
from cotrain.privacy.mechanisms.secure_votes import SecurePlan
from cotrain.trust import client_trust
from cotrain.wire import envelope
from cotrain.wire.broadcast import Downlink
from cotrain.wire.format import WireFormat
from learners import continues_training

__all__ = [
    "N_SITES",
    "QUERIES",
    "ROUNDS",
    "SecureStore",
    "is_secure_site",
    "secagg_share_reply",
    "site_plan",
    "site_vote",
]

_LOG = logging.getLogger("cotrain.site")

#: round-config keys of a secure-vote round: the public sizes the plan is computed from
N_SITES, ROUNDS = "secure-n-sites", "secure-rounds"
#: the array record with the round's queries (little-endian int32 positions in U)
QUERIES = "queries"
#: a share request's keys (beside run-token and round): which step, the selection (answer
#: step), and the SecAgg+ parameters the site checks
STEP, SELECTED, THRESHOLD = "secure-step", "secure-selected", "threshold"


def is_secure_site(site: SiteFolder) -> bool:
    """Whether ``site``'s mechanism contributes vote shares to secure sums (its declared
    ``round_protocol``, :func:`cotrain.federation.rounds.round_protocol`)."""
    return round_protocol(site.privacy) == "secure-sum"


def site_plan(site: SiteFolder, config: dict[str, Any]) -> SecurePlan:
    """The plan this site computes from its own mechanism and the run's public sizes.

    Raises
    ------
    ValueError
        If the site is not a secure-vote site or a size is missing or invalid.
    """
    if not is_secure_site(site):
        raise ValueError(f"the site {site.path} declares no secure-sum mechanism")
    n_classes = len(config["classes"]) if "classes" in config else int(config["n-classes"])
    return site.privacy.plan(
        int(config[N_SITES]), int(site.X_public.shape[0]), n_classes, int(config[ROUNDS])
    )


class SecureStore:
    """What a site sent in one run, on its own disk, read and written under a lock.

    Parameters
    ----------
    site : SiteFolder
    token : str
        The run's token.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> site = SiteFolder(0, np.zeros((2, 1)), np.array([0, 1]), np.ones((3, 1)),
    ...             DecisionTreeClassifier(), folder / "site.toml")
    >>> with SecureStore(site, "abc").open() as state:
    ...     state["sent"] = {"1": {"queries": [0]}}
    >>> with SecureStore(site, "abc").open() as state:
    ...     state["sent"]
    {'1': {'queries': [0]}}
    """

    def __init__(self, site: SiteFolder, token: str) -> None:
        if not token or not str(token).replace("-", "").isalnum():
            raise ValueError(f"run-token must be a non-empty alphanumeric string, got {token!r}")
        folder = Path(site.path).parent / STATE_DIR / "secure"
        self.path = folder / f"run-{token}.json"

    @contextlib.contextmanager
    def open(self) -> Iterator[dict[str, Any]]:
        """The run's state (``sent``, ``answer_share``, ``plan``, ``versions``), locked;
        written back atomically when the block ends without an error."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.path.with_suffix(".lock")):
            state: dict[str, Any] = {"sent": {}, "answer_share": None, "plan": None}
            if self.path.exists():
                state.update(json.loads(self.path.read_text()))
            yield state
            write_atomic(self.path, json.dumps(state).encode("utf-8"))


def _check_plan(state: dict[str, Any], plan: SecurePlan) -> None:
    """Keep the run's first plan; refuse a request under another."""
    planned = json.loads(json.dumps(asdict(plan)))  # as stored
    if state["plan"] is None:
        state["plan"] = planned
    elif state["plan"] != planned:
        raise PrivacyBudgetSpent("the server changed the run's public configuration")


def _client(site: SiteFolder, config: dict[str, Any], plan: SecurePlan) -> SecureClient:
    """The in-process site's :class:`SecureClient`, with what it sent in this run."""
    seed = int(config.get("seed", 0))
    return SecureClient(
        int(config.get("client-index", 0)),
        seeded_clone(site.estimator, seed),
        site.X,
        site.y,
        np.asarray(config["classes"]),
        X_public=site.X_public,
        wire=WireFormat.from_config(config) if "share" in config else None,
        privacy=site.privacy,
        trust=client_trust(site.trust, site.privacy, seed, site.estimator),
        plan=plan,
    )


def _keep(client: SecureClient, state: dict[str, Any]) -> None:
    state["sent"] = client.sent_state()
    kept = client.answer_share
    state["answer_share"] = (
        None
        if kept is None
        else {"round": kept[0], "shape": list(kept[1].shape), "data": encode_share(kept[1]).hex()}
    )


def _restore(client: SecureClient, state: dict[str, Any]) -> None:
    client.load_sent_state(state["sent"])
    kept = state.get("answer_share")
    if kept is not None:
        rows, classes = kept["shape"]
        client.answer_share = (
            kept["round"],
            decode_share(bytes.fromhex(kept["data"]), rows, classes),
        )


def site_vote(site: SiteFolder, content: dict[str, Any]) -> dict[str, Any]:
    """Step 1 of a secure-vote round at ``site``: fit, compute and keep the shares.

    Parameters
    ----------
    site : SiteFolder
    content : dict
        The ``train`` message's records (:func:`cotrain.flower.protocol.to_plain` form):
        the round config with :data:`N_SITES` and :data:`ROUNDS`, the broadcast, and the
        round's queries (:data:`QUERIES`, int32 positions; none: train, release nothing).

    Returns
    -------
    dict
        The reply's records: ``stats`` with ``broadcast-version``, or a masked ``error``.
        No share, no timings, no warnings.
    """
    config = content["config"][protocol.ROUND]
    t, token = int(config["round"]), str(config["run-token"])
    raw = content.get("arrays", {}).get(QUERIES, b"")
    queries = np.frombuffer(raw, dtype="<i4").astype(np.intp)
    try:
        plan = site_plan(site, config)
        with SecureStore(site, token).open() as state:
            _check_plan(state, plan)
            versions = state.setdefault("versions", {})
            client = _client(site, config, plan)
            store = SiteState(site, token, dict(config))
            ref_round = int(config["ref-round"])
            note = store.restore(client, t, ref_round)
            if note is not None:
                _LOG.warning("%s", note)
            _restore(client, state)  # after the model: everything sent in this run
            if client.sender is None or client.sender.state_dict()["codes"] is None:
                ref_round = 0
            broadcast = content.get("arrays", {}).get(envelope.LABELS)
            downlink = Downlink(broadcast, int(config.get("broadcast-ref", 0)), ref_round)
            repeated = str(t) in versions
            result = client.vote_round(t, downlink, None, queries)
            if result.error is not None:
                raise result.error
            if not repeated:
                keep = (
                    continues_training(site.estimator)
                    and checkpoint_blocker(site.estimator) is None
                )
                store.save(t, client, keep_model=keep)
                versions[str(t)] = int(result.broadcast_version or 0)
                _keep(client, state)  # kept before any of it leaves the site
            version = int(versions[str(t)])
    except Exception as err:  # the server gets fixed words; this site's log the reason
        _LOG.warning("secure-vote round %s failed at this site: %s", t, err, exc_info=True)
        return {"config": {envelope.ERROR: envelope.masked_error(err)}, "metrics": {}, "arrays": {}}
    return {"config": {}, "metrics": {envelope.STATS: {"broadcast-version": version}}, "arrays": {}}


def secagg_share_reply(site: SiteFolder, request: dict[str, Any]) -> dict[str, Any]:
    """This site's vector for one SecAgg+ sum: the stored first share, or the selected
    rows of the answer share; ``{"share": int32 bytes, "shape": [rows, classes]}``.

    Parameters
    ----------
    site : SiteFolder
    request : dict
        ``run-token``, ``round``, ``secure-step`` ("first" or "answer"),
        ``secure-selected`` (comma-separated positions, answer step), ``threshold`` (the
        sum's SecAgg+ reconstruction threshold) and the plan's public sizes
        (:data:`N_SITES`, :data:`ROUNDS`, ``n-classes``).

    Raises
    ------
    PrivacyBudgetSpent
        Where the plan forbids it (a threshold below its ``min_sites``, a round or a
        selection past the plan, another configuration).
    ValueError
        For a malformed request or a round this site holds no share of.
    """
    started = time.perf_counter()
    plan = site_plan(site, request)
    if int(request[THRESHOLD]) < plan.min_sites:
        raise PrivacyBudgetSpent(
            f"reconstruction threshold {request[THRESHOLD]} < the plan's {plan.min_sites} sites"
        )
    t, step = int(request["round"]), str(request[STEP])
    n_classes = plan.n_classes
    with SecureStore(site, str(request["run-token"])).open() as state:
        _check_plan(state, plan)
        sent = state["sent"].get(str(t))
        if sent is None:
            raise ValueError(f"this site sent no share in round {t}")
        if step == "first":
            share = bytes.fromhex(sent["first"])
            shape = [len(sent["queries"]), n_classes]
        elif step == "answer":
            text = str(request.get(SELECTED, ""))
            selected = np.array([int(v) for v in text.split(",") if v], dtype=np.intp)
            request = {**request, "classes": list(range(n_classes))}
            client = _client(site, request, plan)
            _restore(client, state)
            result = client.answer_round(t, selected)
            if result.error is not None:
                raise result.error
            share, shape = bytes(result.message or b""), [int(selected.size), n_classes]
            _keep(client, state)
        else:
            raise ValueError(f"unknown secure-step {step!r}: expected 'first' or 'answer'")
    _LOG.info("round %s: %s share ready in %.3f s", t, step, time.perf_counter() - started)
    return {"share": base64.b64encode(share).decode("ascii"), "shape": shape}
