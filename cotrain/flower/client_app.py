"""The site side: a Flower ClientApp whose round is a :class:`cotrain.federation.site.Site`'s.

The site's private data, public pool and learner come from its ``site.toml`` (see
:mod:`cotrain.flower.site`), located through the SuperNode's node config:

- ``site="/path/to/site.toml"`` (a deployment), or
- ``partition-id=N`` with the run config's ``sites-dir`` holding ``site-N/site.toml``
  (Flower's simulation engine, which numbers its virtual SuperNodes).

Each ``train`` message is answered by :meth:`cotrain.federation.site.Site.answer`, the code
an in-process client runs (a secure-vote site, ``SecureTeacherVotes``, runs
:class:`~cotrain.federation.secure_client.SecureClient`'s step, and a ``train`` message that
is a stage of a SecAgg+ sum goes to :func:`cotrain.flower.secure_sum.secure_sum_handler`).
Between rounds the site keeps its state — its model (so
learners that continue training, e.g. XGBoost's boosting or torch clients, continue as
in-process) and its last upload (the reference of delta coding) — on disk under its own
folder, per run (:class:`cotrain.flower.site_state.SiteState`); the server never holds
it. Learners whose models cannot be stored (``checkpoint_unsupported``) and that continue
training are refused at the handshake.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.federation.client import Client
from cotrain.federation.seeding import seeded_clone
from cotrain.federation.site import RoundRequest, Site, StepResult
from cotrain.flower import protocol
from cotrain.flower.evaluation import codes_to_bytes, eval_fingerprint
from cotrain.flower.secure_share import share_request, share_vector
from cotrain.flower.secure_site import is_secure_site, secagg_share_reply, site_vote
from cotrain.flower.secure_sum import DEFAULT_BOUND, is_secure_sum_message, secure_sum_handler
from cotrain.flower.site import SiteFolder, declares_privacy, load_site
from cotrain.flower.site_state import SiteState, keeps_model, open_site_ledger
from cotrain.persistence.checkpoint import checkpoint_blocker
from cotrain.trust import client_trust
from cotrain.wire import envelope
from cotrain.wire.broadcast import Downlink
from cotrain.wire.format import WireFormat
from learners import continues_training

_LOG = logging.getLogger("cotrain.site")


def handle_query(msg: Any, context: Any) -> Any:
    """Handshake: tell the server who this site is and which public pool it holds."""
    from flwr.app import Message

    reply = site_reply(context, "query", site_query)
    return Message(content=protocol.from_plain(reply), reply_to=msg)


def handle_train(msg: Any, context: Any) -> Any:
    """One round at this site (:func:`site_train` on the message's records)."""
    from flwr.app import Message

    if is_secure_sum_message(msg):  # a SecAgg+ stage of a secure-vote round
        return secure_sum_handler(local_secure_vector, bound=DEFAULT_BOUND)(msg, context)
    content = protocol.to_plain(msg.content)
    reply = site_reply(context, "train", lambda site: site_train(site, content))
    return Message(content=protocol.from_plain(reply), reply_to=msg)


def local_secure_vector(config: dict[str, Any], context: Any) -> np.ndarray:
    """This site's vector for a SecAgg+ sum, computed in this process
    (:func:`cotrain.flower.secure_site.secagg_share_reply`; any error refuses the sum)."""
    return share_vector(secagg_share_reply(site_for(context), share_request(config, context)))


def site_reply(context: Any, op: str, answer: Any) -> dict[str, Any]:
    """``answer(site)`` for the site of ``context``; at a private site, any failure —
    loading the site included (e.g. private labels outside its declared ``classes``) —
    becomes a reply with :func:`~cotrain.wire.envelope.masked_error`'s fixed words, the
    real error going to this site's log only. A site without ``[privacy]`` raises, and
    Flower sends the server the error's text.
    """
    private = False
    try:
        site = site_for(context)
        private = site.privacy is not None
        return answer(site)
    except Exception as err:
        node = context.node_config
        if not (private or ("site" in node and declares_privacy(str(node["site"])))):
            raise
        _LOG.warning(
            "%s failed at this private site (the server gets fixed words)", op, exc_info=True
        )
        return {"config": {envelope.ERROR: envelope.masked_error(err)}, "metrics": {}, "arrays": {}}


def site_query(site: SiteFolder) -> dict[str, Any]:
    """The handshake reply of ``site``, in :func:`cotrain.flower.protocol.to_plain` form.

    A private site sends only public configuration (every field is listed in
    :mod:`cotrain.flower.transcript`): no row count, no label values, and nothing about
    its learner but the configured class name. A site without privacy adds its row count
    (``n-samples``) and label values (``labels``).

    Raises
    ------
    NotImplementedError
        If the site's learner continues training but its model cannot be stored.
    """
    blocker = checkpoint_blocker(site.estimator)
    if continues_training(site.estimator) and blocker is not None:
        raise NotImplementedError(
            f"{type(site.estimator).__name__} continues training across rounds "
            f"(warm_start), but its model cannot be stored at the site between rounds: "
            f"{blocker}"
        )
    record: dict[str, Any] = {
        "client-id": -1 if site.client_id is None else site.client_id,
        "pool-hash": site.pool_hash,
        "n-public": int(site.X_public.shape[0]),
        "learner": type(site.estimator).__name__,
        "privacy": site.declared_privacy,
    }
    if site.classes is not None:  # the label space it declares: public configuration
        record["classes"] = list(site.classes)
    if site.privacy is None:  # facts of the private rows: never sent by a private site
        record["n-samples"] = int(site.X.shape[0])
        record["labels"] = protocol.labels_to_config(np.unique(site.y))
    if site.share_eval:  # a public test set: its labels, for the consensus accuracy
        record["eval-hash"] = eval_fingerprint(site.X_eval, site.y_eval)
        record["eval-labels"] = protocol.labels_to_config(site.y_eval)
    return {"config": {protocol.SITE: record}}


def site_train(site: SiteFolder, content: dict[str, Any]) -> dict[str, Any]:
    """One round at ``site``: check the pool, then answer as
    :meth:`cotrain.federation.site.Site.answer` — the code an in-process client runs —
    with the site's state restored from its disk and its ledger there.

    A private site (``[privacy]``) is where its guarantee is enforced: it keeps its own
    ledger on its disk (:func:`cotrain.flower.site_state.open_site_ledger`, across runs)
    and, holding the ledger's lock for the whole step,

    - answers a request for a (run token, round) it answered already with exactly the
      records it sent the first time (no refit, no fresh noise);
    - refuses a new release that would take its ε past its mechanism's ``budget``: the
      reply is the masked error ``{"type": "PrivacyBudgetSpent", "message": "privacy
      budget spent"}``, and the site's log says why;
    - otherwise computes the round, records the release and caches the reply *before*
      sending it (so a reply the server ignores or gets too late is counted); a failed
      round releases nothing and is neither counted nor cached.

    Each reply of a private site carries ``site-epsilon`` (in ``stats``): its ledger's ε
    after that reply, a function of public configuration and of how many releases it made.

    A site whose mechanism is :class:`~cotrain.privacy.SecureTeacherVotes` runs
    :func:`cotrain.flower.secure_site.site_vote` instead: it keeps its noisy shares on its
    own disk for the round's SecAgg+ sums and replies with no share (see
    :mod:`cotrain.flower.grid_transport`).

    Parameters
    ----------
    site : SiteFolder
        The site.
    content : dict
        The ``train`` message's records in :func:`cotrain.flower.protocol.to_plain` form.

    Returns
    -------
    dict
        The reply's records in the same form: the envelope of the site's upload
        (:func:`cotrain.wire.envelope.encode_upload`) and, where the site has evaluation
        data, its evaluation (see :mod:`cotrain.flower.protocol`).
    """
    started = time.time()
    config = content["config"][protocol.ROUND]
    if config["pool-hash"] != site.pool_hash:
        raise ValueError(
            f"public pool mismatch: this site ({site.path}) holds a pool with SHA-256 "
            f"{site.pool_hash[:16]}…, the federation's has {str(config['pool-hash'])[:16]}…; "
            "every site must hold the same public pool"
        )
    classes = site.label_space(config["classes"])  # refused unless the declared ones
    if is_secure_site(site):  # SecureTeacherVotes: its shares go to SecAgg+ sums
        return site_vote(site, content)
    wire = WireFormat.from_config(config)
    if (wire.n_classes, wire.n_public) != (len(classes), len(site.X_public)):
        raise ValueError(  # else the noise alone would decide whether the labels fit it
            f"wire format mismatch: the request encodes {wire.n_classes} classes and "
            f"|U| = {wire.n_public}; this site declares {len(classes)} classes and holds "
            f"|U| = {len(site.X_public)}"
        )
    t, token = int(config["round"]), str(config["run-token"])
    client = Client(
        int(config["client-index"]),
        seeded_clone(site.estimator, int(config["seed"])),
        site.X,
        site.y,
        classes,
        X_public=site.X_public,
        wire=wire,
        X_eval=site.X_eval,
        eval_proba=site.share_eval and bool(config.get("eval-proba", False)),
        privacy=site.privacy,  # its noise comes from this site's own entropy
        own_ledger=False,  # the site's ledger is on its disk, keyed by run and round
        trust=client_trust(site.trust, site.privacy, int(config["seed"]), site.estimator),
    )
    store = SiteState(site, token, dict(config))
    ref_round = int(config["ref-round"])
    note = store.restore(client, t, ref_round)  # the model and upload of its last round
    if client.sender.state_dict()["codes"] is None:
        ref_round = 0  # nothing to delta-code against: send a full upload
    # the broadcast is delta-coded against the consensus this site acknowledged
    broadcast = content.get("arrays", {}).get(envelope.LABELS)
    downlink = Downlink(broadcast, int(config.get("broadcast-ref", 0)), ref_round)

    def keep(result: StepResult) -> None:  # a learner that refits every round needs no model
        store.save(t, client, keep_model=keeps_model(site.estimator, client.trust))

    def evaluation(result: StepResult, reply: dict[str, Any]) -> None:
        if result.error is not None and result.private:  # the server gets the text masked
            _LOG.warning("round %s failed at this site: %s", t, result.error)
        eval_codes, eval_proba = result.released_evaluation()
        if result.error is None and eval_codes is not None:  # the site's own evaluation data
            accuracy = float(np.mean(classes[eval_codes] == site.y_eval))
            reply["metrics"][envelope.STATS]["eval-accuracy"] = accuracy
            if site.share_eval:  # a public test set: its predictions, for the consensus accuracy
                reply["arrays"][protocol.EVAL] = codes_to_bytes(eval_codes, len(classes))
                if eval_proba is not None:  # asked for by a soft consensus
                    proba = np.asarray(eval_proba, dtype="<f4")
                    reply["arrays"][protocol.EVAL_PROBA] = proba.tobytes()

    ledger = None if site.privacy is None else open_site_ledger(site, len(classes))
    notes = Counter() if note is None else Counter({("SiteStateWarning", note): 1})
    answer = Site(
        client, ledger, keep=keep, evaluation=evaluation, started=started, notes=notes
    ).answer(RoundRequest(t, downlink, (token, t)))
    if answer.outcome == "refused" and ledger is not None:
        _LOG.warning(
            "round %s of run %s refused: one more release would take this site's ε past its "
            "budget %s (it is %.4f)",
            t,
            token,
            ledger.budget,
            ledger.epsilon(),
        )
    return answer.reply


def site_for(context: Any) -> SiteFolder:
    """The site this ClientApp runs at, from the node config (see the module docs)."""
    node = context.node_config
    if "site" in node:
        return _load(str(node["site"]))
    if "partition-id" in node and "sites-dir" in context.run_config:
        folder = Path(str(context.run_config["sites-dir"])) / f"site-{int(node['partition-id'])}"
        return _load(str(folder))
    raise ValueError(
        "this SuperNode has no cotrain site: start it with --node-config "
        "'site=\"/path/to/site.toml\"' (or, in simulation, set the run config 'sites-dir')"
    )


@lru_cache(maxsize=4)
def _load(path: str) -> SiteFolder:
    return load_site(path)
