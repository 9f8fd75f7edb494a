"""One release rule: what a client may send is decided by ``StepResult.upload()`` alone; the
in-process server receives that Upload and a Flower site serialises it unchanged.

The same client (same data, learner, seed, trust and privacy noise) is run through both
paths: in process (``Client.run_round``) and through the site's train handler
(``cotrain.flower.client_app.site_train``, called directly: no network), and every field of
:class:`cotrain.wire.upload.Upload` that leaves it is compared with what the server decodes
from the site's reply (``cotrain.wire.envelope.decode_upload``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("tomli_w")  # write_site stores the site's config as TOML

from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.federation import client as client_module
from cotrain.federation.client import Client
from cotrain.federation.seeding import seeded_clone
from cotrain.flower import protocol
from cotrain.flower.client_app import site_train
from cotrain.flower.site import load_site, write_site
from cotrain.privacy import RandomizedResponse
from cotrain.trust import client_trust
from cotrain.wire import envelope
from cotrain.wire.broadcast import Downlink
from cotrain.wire.dp_events import event_to_json
from cotrain.wire.format import WireFormat
from cotrain.wire.upload import Upload

SEED = 11
CLASSES = np.array([0, 1])


def _blobs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = np.arange(n) % 2
    return rng.normal(size=(n, 3)) + 1.5 * y[:, None], y


@pytest.fixture
def data():
    rng = np.random.default_rng(5)
    X, y = _blobs(rng, 60)
    U, _ = _blobs(rng, 40)
    X_eval, y_eval = _blobs(rng, 30)
    return X, y, U, (X_eval, y_eval)


@pytest.fixture
def fixed_entropy(monkeypatch):
    """The client's privacy noise, drawn from the OS's entropy, made the same on both paths."""
    monkeypatch.setattr(client_module.secrets, "randbits", lambda bits: 123456789)


def _round_config(site, t: int, ref_round: int) -> dict:
    return {
        "round": t, "client-index": 0, "seed": SEED, "ref-round": ref_round,
        "pool-hash": site.pool_hash, "classes": CLASSES.tolist(), "run-token": "rule",
        "broadcast-ref": 0, **WireFormat(2, len(site.X_public)).to_config(),
    }  # fmt: skip


def _released(reply: dict) -> dict:
    """The Upload fields a site's reply carries, as the server reads them back."""
    return _as_sent(envelope.decode_upload(0, reply))


def _as_sent(upload: Upload) -> dict:
    """Every field of an Upload but the client id (the server knows who answered)."""
    fields = {f.name: getattr(upload, f.name) for f in dataclasses.fields(Upload)}
    fields.pop("client_id")
    if fields["error"] is not None:
        fields["error"] = f"{type(fields['error']).__name__}: {fields['error']}"
    if fields["dp_event"] is not None:
        fields["dp_event"] = event_to_json(fields["dp_event"])
    return fields


def _both_paths(tmp_path, data, privacy):
    """Rounds 1 and 2 of one client in process and at a site, with the same broadcast."""
    X, y, U, eval_set = data
    site = load_site(
        write_site(tmp_path / "site", X, y, U, DecisionTreeClassifier(max_depth=3),
                   client_id=0, eval_set=eval_set, privacy=privacy, trust="auto",
                   classes=CLASSES)
    )  # fmt: skip
    wire = WireFormat(2, len(U))
    local = Client(
        0, seeded_clone(site.estimator, SEED), X, y, CLASSES, X_public=U, wire=wire,
        X_eval=site.X_eval, privacy=site.privacy,
        trust=client_trust(site.trust, site.privacy, SEED, site.estimator),
    )  # fmt: skip
    broadcast = wire.encode_broadcast((U[:, 0] > 0.75).astype(np.int64))
    sent, replies = [], []
    for t, link in ((1, Downlink(None)), (2, Downlink(broadcast, 0, ref_round=1))):
        sent.append(local.run_round(t, link))
        content = {"config": {protocol.ROUND: _round_config(site, t, link.ref_round)}}
        if link.data is not None:
            content["arrays"] = {envelope.LABELS: link.data}
        replies.append(site_train(site, content))
    return sent, replies


def test_a_private_client_releases_the_same_fields_in_process_and_at_a_site(
    tmp_path, data, fixed_entropy
):
    sent, replies = _both_paths(tmp_path, data, RandomizedResponse(epsilon=3.0))
    for result, reply in zip(sent, replies, strict=True):
        assert result.private and result.error is None
        assert _released(reply) == _as_sent(result.upload())
    # round 2 measured a pool weight and an out-of-fold accuracy; neither left the client
    assert sent[1].trust is not None and sent[1].quality is not None
    assert _as_sent(sent[1].upload())["trust"] is None
    assert "trust" not in replies[1]["metrics"][envelope.STATS]
    assert _released(replies[1])["learner_time_s"] is None  # its fit time did not leave
    # the site's own evaluation is not released either (its model saw the private rows)
    assert "eval-accuracy" not in replies[1]["metrics"][envelope.STATS]
    assert set(replies[1]["arrays"]) == {envelope.LABELS}


def test_a_client_without_privacy_releases_the_same_fields_too(tmp_path, data):
    sent, replies = _both_paths(tmp_path, data, None)
    for result, reply in zip(sent, replies, strict=True):
        expected, got = _as_sent(result.upload()), _released(reply)
        assert got.pop("learner_time_s") > 0 and expected.pop("learner_time_s") > 0  # timed
        assert got == expected
    assert replies[1]["metrics"][envelope.STATS]["trust"] == sent[1].trust  # its blend weight
    assert 0.0 <= sent[1].trust <= 1.0
    assert "eval-accuracy" in replies[1]["metrics"][envelope.STATS]


def test_the_simulation_records_the_trust_a_site_would_report(cancer):
    """The history holds the pool weights the server received: none from private clients."""
    ests = [DecisionTreeClassifier(random_state=0) for _ in range(3)]
    params = {"rounds": 2, "random_state": 0, "trust": "auto"}
    private = FederatedCoTrainer(
        ests, privacy=RandomizedResponse(epsilon=8.0), classes=[0, 1], **params
    )
    private.fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])
    public = FederatedCoTrainer(ests, **params).fit(
        cancer["X"], cancer["y"], X_public=cancer["X_public"]
    )
    assert [r.trust for r in private.history_] == [{}, {}]
    assert set(public.history_[1].trust) == {0, 1, 2}


def test_a_private_sites_error_text_is_masked_but_its_type_kept(tmp_path, data):
    X, y, U, _ = data
    site = load_site(
        write_site(tmp_path / "site", X, y, U, DecisionTreeClassifier(), client_id=0,
                   privacy=RandomizedResponse(epsilon=3.0), classes=CLASSES)
    )  # fmt: skip
    config = _round_config(site, 2, 0)  # a consensus the site cannot decode
    content = {"config": {protocol.ROUND: config}, "arrays": {envelope.LABELS: b"\x07" * 5}}
    reply = site_train(site, content)
    error = reply["config"][envelope.ERROR]  # the text names the byte counts: masked
    assert error == {"type": "MalformedMessage", "message": envelope.MASKED_MESSAGE}
    assert set(reply["arrays"]) == set()
    assert reply["metrics"] == {envelope.STATS: {"site-epsilon": 0.0}}  # nothing released yet
