"""A private site's side of a secure-vote round on Flower (``SecureTeacherVotes``).

In a run with ``privacy=SecureTeacherVotes(...)`` (see
:mod:`cotrain.flower.grid_transport` for the round, message by message) a site answers two
kinds of request, both with the in-process site's code — a
:class:`~cotrain.federation.site.Site` over a
:class:`~cotrain.federation.secure_client.SecureClient` — and the ledger every private site
keeps on its own disk (:func:`cotrain.flower.site_state.open_site_ledger`, under
``state/privacy/``, across runs and restarts):

- the round's ``train`` message (:func:`site_vote`, run by
  :func:`cotrain.flower.client_app.site_train`): the site fits its own model on its rows ∪
  P, trains its teachers and computes its noisy shares on the round's queries (noise from
  this site's own entropy); its ledger records the first share, with its event, under
  ``(run token, round, "first")`` and the answer share waits in the run's state folder;
  the reply carries no share, only the consensus version it now holds;
- the *collect masked vectors* stage of each SecAgg+ sum (:func:`secagg_share_reply`, called by
  the relay ClientApp's vector function through the site's warm worker, or in the
  ClientApp's own process): the recorded first share, or the rows of the answer share
  that the server selected (recorded under ``(run token, round, "answer")``). Flower's
  :func:`~flwr.client.mod.secaggplus_mod` masks it before it leaves the site.

The site computes the :class:`~cotrain.privacy.mechanisms.secure_votes.SecurePlan` from its own
mechanism and the run's public configuration (sites, |U|, classes, rounds) and refuses a
request under another plan than the run's first; it refuses a SecAgg+ reconstruction
threshold below the plan's ``min_sites`` (a sum over fewer sites would not carry the planned
noise). Its ledger gives a repeated request the same share, refuses the same step asked for
other queries or another selection, refuses a first share past the plan's rounds, and
counts every share against the mechanism's ``budget`` whatever run asks — across processes
and restarts. Every refusal reaches the server as fixed words.
"""

from __future__ import annotations

import base64
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.federation.rounds import round_protocol
from cotrain.federation.secure_client import SecureClient
from cotrain.federation.secure_sum import SHARE_DTYPE, decode_share, encode_share
from cotrain.federation.seeding import seeded_clone
from cotrain.federation.site import ShareRequest, Site, StepResult, other_plan
from cotrain.files import write_atomic
from cotrain.flower import protocol
from cotrain.flower.site import OTHER_LABEL_SPACE, SiteFolder
from cotrain.flower.site_state import SiteState, keeps_model, open_site_ledger, run_directory
from cotrain.privacy.ledgers.site_ledger import PrivacyBudgetSpent
from cotrain.privacy.mechanisms.secure_votes import SecurePlan
from cotrain.trust import client_trust
from cotrain.wire import envelope
from cotrain.wire.broadcast import Downlink
from cotrain.wire.format import WireFormat

__all__ = [
    "N_SITES",
    "QUERIES",
    "ROUNDS",
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
    """The plan this site computes from its own mechanism (its ``n_sites`` and ``rounds``,
    required) and |U|; the request's sizes must agree with it.

    Raises
    ------
    ValueError
        If the site is not a secure-vote site, its mechanism states no ``n_sites`` or
        ``rounds``, or a size of the request is missing or not the site's.
    """
    if not is_secure_site(site):
        raise ValueError(f"the site {site.path} declares no secure-sum mechanism")
    if site.privacy.n_sites is None or site.privacy.rounds is None:
        raise ValueError(
            f"the site {site.path} must state n_sites and rounds in its [privacy]: a secure "
            "site's plan is its own configuration, never the server's claim"
        )
    if "classes" in config:
        n_classes = len(site.label_space(config["classes"]))
    else:  # a share request names the label space's size only
        n_classes = int(config["n-classes"])
        if site.classes is not None and n_classes != len(site.classes):
            raise ValueError(OTHER_LABEL_SPACE)  # the same refusal as any other
    return site.privacy.plan(
        int(config[N_SITES]), int(site.X_public.shape[0]), n_classes, int(config[ROUNDS])
    )


def _client(site: SiteFolder, config: dict[str, Any], plan: SecurePlan) -> SecureClient:
    """The in-process site's :class:`SecureClient` (its ledger is the site's, on disk)."""
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
        own_ledger=False,
        trust=client_trust(site.trust, site.privacy, seed, site.estimator),
        plan=plan,
    )


def _held(site: SiteFolder, token: str, t: int) -> Path:
    """Where the site keeps round ``t``'s answer share between its two steps (never sent
    whole; deleted once its selected rows are)."""
    return run_directory(site, token) / f"answer-share-{int(t)}.bin"


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
        client = _client(site, config, plan)
        store = SiteState(site, token, dict(config))
        ref_round = int(config["ref-round"])
        note = store.restore(client, t, ref_round)
        if note is not None:
            _LOG.warning("%s", note)
        if client.sender is None or client.sender.state_dict()["codes"] is None:
            ref_round = 0
        broadcast = content.get("arrays", {}).get(envelope.LABELS)
        downlink = Downlink(broadcast, int(config.get("broadcast-ref", 0)), ref_round)

        def keep(result: StepResult) -> None:  # before the share leaves the site
            store.save(t, client, keep_model=keeps_model(site.estimator, client.trust))
            if client.answer_share is not None:
                write_atomic(_held(site, token, t), encode_share(client.answer_share[1]))

        ledger = open_site_ledger(site, plan.n_classes)
        ask = ShareRequest(t, "first", queries, plan, (token,), downlink)
        answer = Site(client, ledger, keep=keep).answer(ask)
        if answer.result.error is not None:
            raise answer.result.error
        version = int(answer.reply["metrics"][envelope.STATS]["broadcast-version"])
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
    t, step, token = int(request["round"]), str(request[STEP]), str(request["run-token"])
    ledger = open_site_ledger(site, plan.n_classes)
    with ledger.transaction():
        if step == "first":  # recorded when it was computed (site_vote)
            sent = ledger.lookup((token, t, "first"))
            if sent is None:
                raise ValueError(f"this site sent no share in round {t}")
            reason = other_plan(ledger, (token,), plan)
            if reason is not None:
                raise PrivacyBudgetSpent(reason)
            if not ledger.claim(sent.key):  # one sum per share, whatever it is called
                raise PrivacyBudgetSpent("the share went into a sum already")
            share = envelope.reply_from_bytes(sent.reply)["arrays"][envelope.LABELS]
        elif step == "answer":
            text = str(request.get(SELECTED, ""))
            selected = np.array([int(v) for v in text.split(",") if v], dtype=np.intp)
            client = _client(site, {**request, "classes": list(range(plan.n_classes))}, plan)
            held = _held(site, token, t)
            if held.exists():
                kept = decode_share(held.read_bytes(), plan.n_queries, plan.n_classes)
                client.answer_share = (t, kept)
            answer = Site(client, ledger, keep=lambda _: held.unlink(missing_ok=True)).contribute(
                ShareRequest(t, "answer", selected, plan, (token,))
            )
            if answer.result.error is not None:
                raise answer.result.error
            share = bytes(answer.result.message or b"")
        else:
            raise ValueError(f"unknown secure-step {step!r}: expected 'first' or 'answer'")
    shape = [len(share) // (SHARE_DTYPE.itemsize * plan.n_classes), plan.n_classes]
    _LOG.info("round %s: %s share ready in %.3f s", t, step, time.perf_counter() - started)
    return {"share": base64.b64encode(share).decode("ascii"), "shape": shape}
