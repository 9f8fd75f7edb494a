"""A server that deviates in every way the protocol lets it, against a private site's own
handlers (called directly, as the ClientApp calls them; no network).

Each attack asks what an honest server never would — another label space, a first request
that disagrees with the site's configuration, the same step of a secure sum again under
another name, a new run token — and checks that the site gives away no more than its ledger
says: the same fixed refusal whatever its rows hold, nothing recorded for a refusal, and
every share counted once.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("tomli_w")  # write_site stores the site's config as TOML
pytest.importorskip("dp_accounting")

from sklearn.tree import DecisionTreeClassifier

from cotrain.flower import protocol
from cotrain.flower.client_app import site_reply, site_train
from cotrain.flower.secure_site import N_SITES, QUERIES, ROUNDS, secagg_share_reply
from cotrain.flower.site import write_site
from cotrain.privacy import RandomizedResponse, SecureTeacherVotes
from cotrain.privacy.ledgers.site_ledger import DEFAULT_SITE_BUDGET, PrivacyBudgetSpent
from cotrain.wire import envelope
from cotrain.wire.format import WireFormat

CLASSES = [0, 1, 2]
#: label spaces a server may name instead of the run's (each is refused alike)
OTHER_SPACES = (
    [0, 1, 7],
    [0, 1, 2.5],
    [-1, 0, 1],
    [0, 1],
    [0, 1, 2, 2],
    ["0", "1", "2"],
    [2, 0, 1],
)


def _data(seed=0, rows=30, n_public=12):
    rng = np.random.default_rng(seed)
    y = np.arange(rows) % 2  # classes 0 and 1 only
    X = rng.normal(size=(rows, 2)) + y[:, None]
    return X, y, rng.normal(size=(n_public, 2))


def _twins(tmp_path, privacy):
    """Two private sites that differ by one record: the second holds one row of class 2."""
    X, y, U = _data()
    paths = []
    for name, extra in (("without", 0), ("with", 1)):
        Xs = np.vstack([X, np.full((extra, 2), 3.0)])
        ys = np.concatenate([y, np.full(extra, 2)])
        paths.append(
            write_site(tmp_path / name, Xs, ys, U, DecisionTreeClassifier(max_depth=2),
                       client_id=0, privacy=privacy, classes=CLASSES)
        )  # fmt: skip
    return paths, U


def _context(path):
    return SimpleNamespace(node_config={"site": str(path)}, run_config={})


def _train(path, U, classes, t=1, token="evil", **extra):
    from cotrain.flower.site import pool_fingerprint

    config = {
        "round": t, "client-index": 0, "seed": 0, "ref-round": 0, "broadcast-ref": 0,
        "pool-hash": pool_fingerprint(U), "classes": classes, "run-token": token,
        **WireFormat(3, len(U)).to_config(), **extra,
    }  # fmt: skip
    content = {"config": {protocol.ROUND: config}, "arrays": extra.pop("arrays", {})}
    if QUERIES in extra:
        content["arrays"] = {QUERIES: extra[QUERIES]}
        del config[QUERIES]
    return site_reply(_context(path), "train", lambda site: site_train(site, content))


def _ledger(path):
    ledger = path.parent / "state" / "privacy" / "ledger.json"
    return json.loads(ledger.read_text()) if ledger.exists() else None


@pytest.mark.parametrize("asked", OTHER_SPACES)
def test_no_label_space_tells_which_classes_a_private_site_holds(tmp_path, asked):
    """Two sites that differ by one record of class 2 give byte-identical replies to a
    request naming any label space but the declared one, and record nothing for it."""
    paths, U = _twins(tmp_path, RandomizedResponse(epsilon=1.0, sensitivity=1, budget=5.0))
    replies = [_train(path, U, asked) for path in paths]
    assert replies[0] == replies[1]
    assert replies[0]["config"][envelope.ERROR]["type"] == "ValueError"
    assert [_ledger(path)["releases"] if _ledger(path) else [] for path in paths] == [[], []]


def test_the_declared_label_space_is_answered(tmp_path):
    paths, U = _twins(tmp_path, RandomizedResponse(epsilon=1.0, sensitivity=1))
    for path in paths:
        reply = _train(path, U, CLASSES)
        assert envelope.ERROR not in reply["config"] and reply["arrays"][envelope.LABELS]


def test_a_first_contact_with_another_label_space_cannot_lock_a_site_out(tmp_path):
    """The site's ledger counts under the declared label space: a first request naming two
    classes is refused and leaves no trace; the honest three-class run that follows is
    answered."""
    paths, U = _twins(tmp_path, RandomizedResponse(epsilon=1.0, sensitivity=1, budget=5.0))
    assert envelope.ERROR in _train(paths[1], U, [0, 1])["config"]
    reply = _train(paths[1], U, CLASSES, t=1, token="honest")
    assert envelope.ERROR not in reply["config"]
    ledger = _ledger(paths[1])
    assert ledger["configuration"]["n_classes"] == 3 and len(ledger["releases"]) == 1


@pytest.mark.parametrize("asked", OTHER_SPACES)
def test_a_secure_site_refuses_another_label_space_alike(tmp_path, asked):
    votes = SecureTeacherVotes(n_teachers=2, mu=100.0, n_sites=3, rounds=1)
    paths, U = _twins(tmp_path, votes)
    queries = np.arange(len(U), dtype="<i4").tobytes()
    sizes = {N_SITES: 3, ROUNDS: 2, QUERIES: queries}
    replies = [_train(path, U, asked, **sizes) for path in paths]
    assert replies[0] == replies[1] and envelope.ERROR in replies[0]["config"]
    assert [_ledger(path) for path in paths] == [None, None]
    honest = [_train(path, U, CLASSES, **sizes) for path in paths]
    assert all(envelope.ERROR not in reply["config"] for reply in honest)
    share = {"run-token": "evil", "round": 1, "secure-step": "first", "threshold": 3,
             N_SITES: 3, ROUNDS: 2}  # fmt: skip
    for n in (2, 4):  # a share request naming another label space's size
        with pytest.raises(ValueError, match="declared label space"):
            secagg_share_reply(_load(paths[1]), {**share, "n-classes": n})


#: requests an honest server never sends, beyond other label spaces, per kind of site
LABEL_SITE_DEVIATIONS = {
    "another pool": {"pool-hash": "0" * 64},
    "round 0": {"round": 0},
    "round -1": {"round": -1},
    "another label count on the wire": WireFormat(2, 12).to_config(),
    "another |U| on the wire": WireFormat(3, 13).to_config(),
    "an empty run token": {"run-token": ""},
    "a run token that names a folder": {"run-token": "../x"},
}
SECURE_SITE_DEVIATIONS = {
    "another pool": {"pool-hash": "0" * 64},
    "round 0": {"round": 0},
    "round -1": {"round": -1},
    "a round past the plan": {"round": 2},
    "400 sites claimed": {N_SITES: 400},
    "2 sites claimed": {N_SITES: 2},
    "an empty run token": {"run-token": ""},
    "queries outside U": {QUERIES: np.array([0, 99], dtype="<i4").tobytes()},
}


@pytest.mark.parametrize("deviation", list(LABEL_SITE_DEVIATIONS))
def test_twin_label_sites_refuse_every_deviating_request_alike(tmp_path, deviation):
    """Two sites that differ by one record give byte-identical refusals to every request an
    honest server never sends, and record nothing (a request the site answers is a release:
    its labels carry the mechanism's noise, and its ledger counts it)."""
    paths, U = _twins(tmp_path, RandomizedResponse(epsilon=1.0, sensitivity=1, budget=5.0))
    replies = [_train(path, U, CLASSES, **LABEL_SITE_DEVIATIONS[deviation]) for path in paths]
    assert replies[0] == replies[1] and envelope.ERROR in replies[0]["config"]
    assert [(_ledger(path) or {}).get("releases", []) for path in paths] == [[], []]


@pytest.mark.parametrize("deviation", list(SECURE_SITE_DEVIATIONS))
def test_twin_secure_sites_refuse_every_deviating_request_alike(tmp_path, deviation):
    votes = SecureTeacherVotes(n_teachers=2, mu=100.0, n_sites=3, rounds=1)
    paths, U = _twins(tmp_path, votes)
    honest = {N_SITES: 3, ROUNDS: 2, QUERIES: np.arange(len(U), dtype="<i4").tobytes()}
    asked = {**honest, **SECURE_SITE_DEVIATIONS[deviation]}
    replies = [_train(path, U, CLASSES, **asked) for path in paths]
    assert replies[0] == replies[1] and envelope.ERROR in replies[0]["config"]
    assert [(_ledger(path) or {}).get("releases", []) for path in paths] == [[], []]
    assert envelope.ERROR not in _train(paths[0], U, CLASSES, **honest)["config"]


def _load(path):
    from cotrain.flower.site import load_site

    return load_site(path)


def test_a_share_enters_one_sum_whatever_the_sum_is_called(tmp_path):
    """Two sums that differ by one site reveal that site's share by subtraction, however the
    server names them: a site gives each (run, round, step) share to one sum only. The
    train message itself may be repeated (its reply carries no share)."""
    votes = SecureTeacherVotes(n_teachers=2, mu=100.0, threshold=0.5, n_sites=3, rounds=1)
    paths, U = _twins(tmp_path, votes)
    queries = np.arange(len(U), dtype="<i4").tobytes()
    sizes = {N_SITES: 3, ROUNDS: 2, QUERIES: queries}
    vote = _train(paths[0], U, CLASSES, **sizes)
    assert envelope.ERROR not in vote["config"]
    assert _train(paths[0], U, CLASSES, **sizes) == vote  # the same acknowledgement
    site = _load(paths[0])
    ask = {"run-token": "evil", "round": 1, "threshold": 3, "n-classes": 3, N_SITES: 3,
           ROUNDS: 2}  # fmt: skip
    first = secagg_share_reply(site, {**ask, "secure-step": "first"})
    assert first["shape"] == [len(U), 3]
    with pytest.raises(PrivacyBudgetSpent, match="went into a sum already"):
        secagg_share_reply(site, {**ask, "secure-step": "first"})
    answer = {**ask, "secure-step": "answer", "secure-selected": "0,3"}
    assert secagg_share_reply(site, answer)["shape"] == [2, 3]
    for selected in ("0,3", "1,2"):  # the same selection again, or another
        with pytest.raises(PrivacyBudgetSpent):
            secagg_share_reply(site, {**answer, "secure-selected": selected})
    ledger = _ledger(paths[0])
    assert [r["key"] for r in ledger["releases"]] == ["evil/1/first", "evil/1/answer"]
    assert all(r["claimed"] for r in ledger["releases"])
    plan = votes.plan(3, len(U), 3, rounds=2)
    assert ledger["epsilon"] == pytest.approx(plan.epsilon(1))


@pytest.mark.parametrize(("budget", "answered"), [(None, 3), (math.inf, 5)])
def test_a_deployed_site_without_a_budget_stops_at_the_default(tmp_path, budget, answered):
    """New run tokens buy no fresh noise, and a site whose [privacy] states no budget stops
    at DEFAULT_SITE_BUDGET (ε = 10): three releases of ε = 3, not a fourth; math.inf opts
    out explicitly."""
    assert DEFAULT_SITE_BUDGET == 10.0
    mech = RandomizedResponse(epsilon=3.0, sensitivity=1, budget=budget)
    paths, U = _twins(tmp_path, mech)
    replies = [_train(paths[0], U, CLASSES, token=f"run{k}") for k in range(5)]
    refused = [envelope.ERROR in reply["config"] for reply in replies]
    assert refused == [False] * answered + [True] * (5 - answered)
    ledger = _ledger(paths[0])
    assert len(ledger["releases"]) == answered
    assert ledger["epsilon"] == pytest.approx(3.0 * answered, rel=1e-4)  # PLD, composed


@pytest.mark.parametrize("claim", [{N_SITES: 400}, {N_SITES: 2}, {ROUNDS: 101}])
def test_a_secure_site_plans_from_its_own_configuration_not_the_servers_claim(tmp_path, claim):
    """A server that claims 400 sites (each share's noise 1/400 of the sum's) or 101 rounds
    is refused; nothing is computed or recorded, and the honest request still works."""
    votes = SecureTeacherVotes(n_teachers=2, mu=100.0, n_sites=3, rounds=1)
    paths, U = _twins(tmp_path, votes)
    queries = np.arange(len(U), dtype="<i4").tobytes()
    honest = {N_SITES: 3, ROUNDS: 2, QUERIES: queries}
    if ROUNDS in claim:  # the site's own rounds=1 plans one release whatever is claimed
        reply = _train(paths[0], U, CLASSES, **{**honest, **claim})
        assert envelope.ERROR not in reply["config"]
        assert _ledger(paths[0])["epsilon"] == pytest.approx(votes.plan(3, 12, 3, 2).epsilon())
        return
    reply = _train(paths[0], U, CLASSES, **{**honest, **claim})
    assert reply["config"][envelope.ERROR]["type"] == "ValueError" and _ledger(paths[0]) is None
    assert envelope.ERROR not in _train(paths[0], U, CLASSES, **honest)["config"]
