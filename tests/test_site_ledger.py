"""The site is the enforcer: a private client's own ledger (cotrain.privacy.ledgers.site_ledger).

A repeated request gets the bytes sent the first time and costs nothing; a release past the
budget is refused; the ledger on disk is shared by processes under a lock and spans runs;
in an honest in-process run the server's count and every client's own agree exactly; and a
Flower site asked 200 times for round 1 releases once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.federation.client import Client
from cotrain.flower import protocol
from cotrain.flower.client_app import site_train
from cotrain.flower.site import load_site, write_site
from cotrain.flower.site_state import open_site_ledger
from cotrain.privacy import RandomizedResponse, SubsampleAndAggregate
from cotrain.privacy.ledgers.ledger import PrivacyLedger
from cotrain.privacy.ledgers.site_ledger import PrivacyBudgetSpent, SiteLedger, quote_site_epsilon
from cotrain.wire import envelope
from cotrain.wire.format import WireFormat

pytest.importorskip("dp_accounting")

CLASSES = np.array([0, 1])
ROOT = Path(__file__).resolve().parents[1]


def _blobs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = np.arange(n) % 2
    return rng.normal(size=(n, 2)) + 2.0 * y[:, None], y


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X, y = _blobs(rng, 90)
    U, _ = _blobs(rng, 20)
    return X, y, U


def rr(budget=None):
    """ε = 1 per round exactly (pure DP, one changed label)."""
    return RandomizedResponse(epsilon=1.0, sensitivity=1, budget=budget)


def budget_for(mechanism, releases: int, n_public: int) -> float:
    """A budget that allows exactly ``releases`` releases of ``mechanism``."""
    ledger = PrivacyLedger([mechanism], 1, 2, n_public)
    return (ledger.epsilon_after(releases) + ledger.epsilon_after(releases + 1)) / 2


def client(data, privacy, **kwargs) -> Client:
    X, y, U = data
    return Client(0, DecisionTreeClassifier(random_state=0), X, y, CLASSES, X_public=U,
                  privacy=privacy, **kwargs)  # fmt: skip


# ---------------------------------------------------------------------- the ledger itself
def test_a_repeated_request_is_answered_with_the_same_bytes_and_costs_nothing(data):
    c = client(data, rr())
    first = c.run_round(1)
    eps = c.site_ledger.epsilon()
    assert first.error is None and first.site_epsilon == eps and c.site_ledger.releases == 1
    again = [c.run_round(1) for _ in range(20)]
    assert {a.message for a in again} == {first.message}  # no fresh noise, no refit
    assert c.site_ledger.releases == 1 and c.site_ledger.epsilon() == eps
    assert all(a.upload().site_epsilon == eps for a in again)
    second = c.run_round(2)
    assert c.site_ledger.releases == 2 and second.site_epsilon == pytest.approx(2.0, abs=1e-3)
    assert c.run_round(1).message == first.message  # a late replay of round 1, too


def test_past_its_budget_a_client_refuses_and_counts_nothing(data):
    c = client(data, rr(budget=2.5))
    assert [c.run_round(t).error for t in (1, 2)] == [None, None]
    refused = c.run_round(3)
    assert isinstance(refused.error, PrivacyBudgetSpent) and refused.message is None
    assert str(refused.error) == "privacy budget spent"
    assert c.site_ledger.releases == 2
    assert refused.upload().site_epsilon == pytest.approx(2.0, abs=1e-3)
    assert c.run_round(2).error is None  # what it sent before, it can send again
    with pytest.raises(PrivacyBudgetSpent):
        c.site_ledger.record(3, b"x")


def test_a_failed_round_releases_nothing(data):
    class FailsOnce(DecisionTreeClassifier):
        calls = 0

        def fit(self, X, y, sample_weight=None):
            FailsOnce.calls += 1
            if FailsOnce.calls == 1:
                raise RuntimeError("disk full")
            return super().fit(X, y, sample_weight=sample_weight)

    X, y, U = data
    c = Client(0, FailsOnce(), X, y, CLASSES, X_public=U, privacy=rr())
    failed = c.run_round(1)
    assert failed.error is not None and c.site_ledger.releases == 0
    assert failed.site_epsilon == 0.0 and c.site_ledger.lookup(1) is None
    assert c.run_round(1).error is None and c.site_ledger.releases == 1


def test_the_ledger_survives_a_checkpoint(data):
    c = client(data, rr())
    first = c.run_round(1)
    state = c.state_dict()
    assert state["site_ledger"]["releases"][0]["reply"].dtype == np.uint8  # an array
    fresh = client(data, rr())
    fresh.load_state_dict(state)
    assert fresh.run_round(1).message == first.message and fresh.site_ledger.releases == 1
    import pickle

    copy = pickle.loads(pickle.dumps(c.site_ledger))
    cached = envelope.reply_from_bytes(copy.lookup(1).reply)  # the reply, as a site caches it
    assert copy.epsilon() == c.site_ledger.epsilon() and cached["arrays"]["labels"] == first.message


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="n_classes"):
        SiteLedger(rr(), -1, 10)
    with pytest.raises(ValueError, match="mechanism"):
        SiteLedger(None, 2, 10)
    with pytest.raises(TypeError, match="request key"):
        SiteLedger.key(1.5)
    ledger = SiteLedger(rr(), 2, 10)
    ledger.record(1, b"a")
    with pytest.raises(ValueError, match="answered already"):
        ledger.record(1, b"b")
    with pytest.raises(TypeError, match="bytes"):
        ledger.record(2, "text")


# ---------------------------------------------------------------------- on disk
def test_two_ledgers_on_one_directory_share_the_releases_and_the_lock(tmp_path):
    a, b = SiteLedger(rr(), 2, 10, tmp_path), SiteLedger(rr(), 2, 10, tmp_path)
    with pytest.raises(RuntimeError, match="transaction"):
        a.record(("run", 1), b"x")
    entered = []

    def other():
        with b.transaction():
            entered.append((time.monotonic(), b.releases, b.lookup(("run", 1))))

    with a.transaction():
        thread = threading.Thread(target=other)
        thread.start()
        time.sleep(0.3)
        assert entered == []  # b waits for a's lock
        a.record(("run", 1), b"reply one")
        released = time.monotonic()
    thread.join(10)
    (when, releases, sent) = entered[0]
    assert when >= released and releases == 1 and sent.reply == b"reply one"


def test_another_process_sees_and_extends_the_ledger(tmp_path):
    folder = tmp_path / "privacy"
    with SiteLedger(rr(), 2, 10, folder).transaction() as ledger:
        ledger.record(("a", 1), b"one")
    code = (
        "import sys; from cotrain.privacy import RandomizedResponse as R;"
        "from cotrain.privacy.ledgers.site_ledger import SiteLedger;"
        "m = R(epsilon=1.0, sensitivity=1);"
        f"l = SiteLedger(m, 2, 10, {str(folder)!r});"
        "t = l.transaction(); t.__enter__();"
        "print(l.releases, l.lookup(('a', 1)).reply.decode()); l.record(('a', 2), b'two');"
        "t.__exit__(None, None, None)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "one"]
    again = SiteLedger(rr(), 2, 10, folder)
    assert again.releases == 2 and again.lookup(("a", 2)).reply == b"two"
    stored = json.loads((folder / "ledger.json").read_text())
    assert stored["epsilon"] == again.epsilon() and len(stored["releases"]) == 2


def test_a_new_run_token_does_not_reset_the_budget(tmp_path):
    ledger = SiteLedger(rr(budget=2.5), 2, 10, tmp_path)
    for token in ("run-a", "run-b"):
        with ledger.transaction():
            ledger.record((token, 1), token.encode())
    reopened = SiteLedger(rr(budget=2.5), 2, 10, tmp_path)
    assert reopened.releases == 2 and not reopened.can_release()
    assert reopened.lookup(("run-b", 1)).reply == b"run-b"
    with reopened.transaction(), pytest.raises(PrivacyBudgetSpent):
        reopened.record(("run-c", 1), b"c")


def test_a_ledger_kept_for_another_configuration_or_changed_on_disk_is_refused(tmp_path):
    with SiteLedger(rr(), 2, 10, tmp_path).transaction() as ledger:
        ledger.record(1, b"one")
    with pytest.raises(ValueError, match="kept for"):
        SiteLedger(rr(), 3, 10, tmp_path)
    (reply,) = (tmp_path / "replies").iterdir()
    reply.write_bytes(b"forged")
    with pytest.raises(ValueError, match="changed on disk"):
        SiteLedger(rr(), 2, 10, tmp_path)


# ---------------------------------------------------------------------- in-process runs
def _fit(data, privacy, rounds=4):
    X, y, U = data
    parts = np.array_split(np.arange(len(y)), 3)
    model = FederatedCoTrainer(
        [DecisionTreeClassifier(random_state=0)] * 3, rounds=rounds, privacy=privacy,
        classes=CLASSES, random_state=0,
    )  # fmt: skip
    return model.fit([X[p] for p in parts], [y[p] for p in parts], X_public=U)


@pytest.mark.parametrize(
    "privacy",
    [SubsampleAndAggregate(n_teachers=3, sigma=20.0), rr()],
    ids=["teachers", "rr"],
)
def test_in_an_honest_run_the_server_and_every_client_agree_exactly(data, privacy):
    model = _fit(data, privacy)
    report = model.privacy_report()
    assert [c["rounds"] for c in report["clients"]] == [4, 4, 4]
    for entry in report["clients"]:
        assert entry["site_epsilon"] == entry["epsilon"] > 0


def test_a_budget_stops_the_run_and_the_ledgers_still_agree(data):
    budget = budget_for(SubsampleAndAggregate(n_teachers=3, sigma=20.0), 2, len(data[2]))
    model = _fit(data, SubsampleAndAggregate(n_teachers=3, sigma=20.0, budget=budget), 6)
    assert model.stopped_reason_ == "privacy budget" and model.n_rounds_ == 2
    for entry in model.privacy_report()["clients"]:
        assert entry["rounds"] == 2 and entry["site_epsilon"] == entry["epsilon"] <= budget


def test_quote_site_epsilon_marks_clients_that_never_said():
    server = PrivacyLedger([rr()], 2, 2, 10)
    server.record([0])
    report = quote_site_epsilon(server.report(), {0: 1.0}, rr())
    assert [c["site_epsilon"] for c in report["guarantees"][0]["clients"]] == [1.0, None]


# ---------------------------------------------------------------------- a Flower site
def _round(site, t: int, token: str = "tok1") -> dict:
    config = {
        "round": t, "client-index": 0, "seed": 3, "ref-round": 0, "pool-hash": site.pool_hash,
        "classes": CLASSES.tolist(), "run-token": token, "broadcast-ref": 0,
        **WireFormat(2, len(site.X_public)).to_config(),
    }  # fmt: skip
    return {"config": {protocol.ROUND: config}}


def test_a_flower_site_asked_200_times_for_round_1_releases_once(data, tmp_path):
    X, y, U = data
    mech = SubsampleAndAggregate(n_teachers=3, sigma=20.0)
    budget = budget_for(mech, 2, len(U))
    mech = SubsampleAndAggregate(n_teachers=3, sigma=20.0, budget=budget)
    path = write_site(tmp_path / "site", X, y, U, DecisionTreeClassifier(max_depth=3),
                      client_id=0, privacy=mech, classes=CLASSES)  # fmt: skip
    site = load_site(path)
    replies = [site_train(site, _round(site, 1)) for _ in range(200)]
    ledger = open_site_ledger(site, 2)
    assert ledger.releases == 1
    assert all(
        envelope.reply_to_bytes(r) == envelope.reply_to_bytes(replies[0]) for r in replies
    )  # identical
    first_eps = replies[0]["metrics"][envelope.STATS]["site-epsilon"]
    assert first_eps == ledger.epsilon() > 0
    assert envelope.reply_from_bytes(ledger.lookup(("tok1", 1)).reply) == replies[0]
    # a new run token is a new release, counted against the same budget
    other = site_train(site, _round(site, 1, token="tok2"))
    assert open_site_ledger(site, 2).releases == 2
    assert other["arrays"][envelope.LABELS]  # it was sent
    refused = site_train(site, _round(site, 2, token="tok2"))
    assert refused["config"][envelope.ERROR] == {
        "type": "PrivacyBudgetSpent",
        "message": "privacy budget spent",
    }
    assert refused["arrays"] == {}
    assert refused["metrics"][envelope.STATS]["site-epsilon"] == open_site_ledger(site, 2).epsilon()
    assert open_site_ledger(site, 2).releases == 2
    assert site_train(site, _round(site, 1)) == replies[0]  # answered: still re-sent


def test_a_site_toml_budget_beside_the_mechanism_is_the_sites_own(data, tmp_path):
    """``[privacy] budget = ...`` in site.toml is the mechanism's budget: past it, refused."""
    X, y, U = data
    mech = SubsampleAndAggregate(n_teachers=3, sigma=20.0)
    budget = budget_for(mech, 1, len(U))
    path = write_site(tmp_path / "site", X, y, U, DecisionTreeClassifier(max_depth=3),
                      client_id=0, privacy=mech, classes=CLASSES)  # fmt: skip
    text = path.read_text()
    head = '[privacy]\nclass = "cotrain.privacy.SubsampleAndAggregate"\n'
    assert head in text
    path.write_text(text.replace(head, head + f"budget = {budget!r}\n"))
    site = load_site(path)
    assert site.privacy.budget == pytest.approx(budget)
    assert envelope.LABELS in site_train(site, _round(site, 1))["arrays"]
    refused = site_train(site, _round(site, 2))
    assert refused["config"][envelope.ERROR]["type"] == "PrivacyBudgetSpent"
    path.write_text(text.replace(head, head + "budgt = 1.0\n"))  # misspelt: refused
    with pytest.raises(ValueError, match="unknown keys"):
        load_site(path)
