"""The whole transcript of a private site holds only the fields of the allow-list.

For a private site of each mechanism (teachers, DP-SGD, record-level randomized response)
every reply it sends is collected through the ClientApp's own handlers (``handle_query``,
``handle_train``, called directly with the messages the ServerApp builds; no network): the
handshake, several rounds, a round asked again, a round that fails inside the learner, a
round that fails before it (a wrong public pool), a refused start (private labels outside
the declared label space) and, for randomized response, a refusal past the site's budget.
:func:`cotrain.flower.transcript.check_transcript` must find nothing outside the list, and
what the site sends besides its labels must be the same for two sites with different private
rows. The same check on a site without privacy finds its row count, labels and timings, so
the check can fail.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("tomli_w")  # write_site stores the site's config as TOML

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity
from sklearn.tree import DecisionTreeClassifier

from cotrain.flower import protocol
from cotrain.flower.client_app import handle_query, handle_train
from cotrain.flower.site import load_site, pool_fingerprint, write_site
from cotrain.flower.transcript import ALLOWED, check_transcript
from cotrain.privacy import DPSGD, RandomizedResponse, SubsampleAndAggregate
from cotrain.wire import envelope
from cotrain.wire.format import WireFormat
from tests.conftest import FailingClassifier

CLASSES = [0, 1]
SEED = 5


@pytest.fixture(autouse=True)
def task_identity():
    """Messages need a run id, as they would have inside a Flower app process."""
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity.run_id = TaskIdentity.node_id = TaskIdentity.task_id = None


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    y = np.arange(80) % 2
    X = (rng.normal(size=(80, 4)) + 1.5 * y[:, None]).astype(np.float32)
    U = rng.normal(size=(40, 4)).astype(np.float32) + 0.75
    return X, y, U


def _torch():
    from learners import TorchClassifier

    return TorchClassifier(module_params={"hidden": [4]}, batch_size=8, n_threads=1)


#: kind -> (mechanism, learner, how FailingClassifier fails at a site of that kind)
MECHANISMS = {
    "teachers": (
        lambda: SubsampleAndAggregate(n_teachers=4, sigma=10.0),  # 3 rounds within ε = 10
        DecisionTreeClassifier,
        "ArithmeticError",  # its fit raises
    ),
    "dpsgd": (
        lambda: DPSGD(noise_multiplier=1.0, max_grad_norm=1.0, sampling_rate=0.1, steps=20),
        _torch,
        "TypeError",  # DP-SGD refuses a learner that is not a torch classifier
    ),
    "randomized-response": (
        lambda: RandomizedResponse(epsilon=1.0, budget=0.9, unit="record"),
        DecisionTreeClassifier,
        "ArithmeticError",
    ),
}


def _message(content: RecordDict, kind: str, t: int = 0) -> Message:
    return Message(content=content, dst_node_id=7, message_type=kind, group_id=str(t))


def _round(U, t: int, broadcast: bytes | None = None, pool_hash: str | None = None):
    """A ``train`` message as :meth:`FlowerCoTraining._train_message` builds it."""
    config = {
        "round": t, "client-index": 0, "seed": SEED, "ref-round": t - 1 if broadcast else 0,
        **WireFormat(len(CLASSES), len(U)).to_config(),
        "pool-hash": pool_hash or pool_fingerprint(U), "classes": CLASSES,
        "run-token": "transcript",
        "broadcast-ref": 0, "eval-proba": False,
    }  # fmt: skip
    content = RecordDict({protocol.ROUND: ConfigRecord(config)})
    if broadcast is not None:
        content[envelope.LABELS] = ArrayRecord({protocol.PAYLOAD: protocol.to_array(broadcast)})
    return _message(content, "train", t)


def _ask(path, msg: Message) -> dict:
    """The site's reply to ``msg`` through the ClientApp handler, in ``to_plain`` form: a
    private site never raises (Flower would send the exception's text)."""
    context = Context(1, 7, {"site": str(path)}, RecordDict(), {})
    handler = handle_query if msg.metadata.message_type == "query" else handle_train
    return protocol.to_plain(handler(msg, context).content)


def _transcript(path, U, rounds: int = 3, wrong_pool: bool = True) -> list[dict]:
    """Handshake, rounds 1..rounds (round 2 asked twice), and a round with a wrong pool."""
    wire = WireFormat(len(CLASSES), len(U))
    broadcast = wire.encode_broadcast((U[:, 0] > 0.75).astype(np.int64))
    replies = [_ask(path, _message(RecordDict(), "query"))]
    for t in range(1, rounds + 1):
        replies.append(_ask(path, _round(U, t, None if t == 1 else broadcast)))
        if t == 2:  # the server asks again for round 2
            replies.append(_ask(path, _round(U, t, broadcast)))
    if wrong_pool:  # raises at the site: only a private site answers it, masked
        replies.append(_ask(path, _round(U, rounds + 1, broadcast, pool_hash="0" * 64)))
    return replies


def _site(tmp_path, name, X, y, U, estimator, mechanism, **kwargs):
    return write_site(
        tmp_path / name, X, y, U, estimator, client_id=0, privacy=mechanism, classes=CLASSES,
        **kwargs,
    )  # fmt: skip


@pytest.mark.parametrize("kind", list(MECHANISMS))
def test_a_private_sites_whole_transcript_holds_only_allowed_fields(kind, data, tmp_path, caplog):
    mechanism, learner, failure = MECHANISMS[kind]
    X, y, U = data
    # one site with all 80 rows and an evaluation set, one with 30 rows of class 0 only
    full = _site(tmp_path, "full", X, y, U, learner(), mechanism(), eval_set=(X[:20], y[:20]))
    small = _site(tmp_path, "small", X[y == 0][:30], y[y == 0][:30], U, learner(), mechanism())
    failing = _site(tmp_path, "failing", X, y, U, FailingClassifier(), mechanism())
    refused = _site(tmp_path, "refused", X, y, U, learner(), mechanism())
    y_outside = np.where(np.arange(80) == 17, 2, y)  # one record with a label outside classes
    np.savez(refused.parent / "private.npz", X=X, y=y_outside)
    sites = {"full": full, "small": small, "failing": failing, "refused": refused}

    with caplog.at_level(logging.WARNING, logger="cotrain.site"):
        replies = {name: _transcript(path, U) for name, path in sites.items()}

    everything = [reply for transcript in replies.values() for reply in transcript]
    assert check_transcript(everything) == []
    # the handshake: public configuration only, as declared
    assert replies["full"][0] == {
        "config": {
            protocol.SITE: {
                "client-id": 0, "pool-hash": pool_fingerprint(U), "n-public": 40,
                "learner": type(learner()).__name__, "privacy": repr(mechanism()),
                "classes": CLASSES,
            }
        },
        "metrics": {}, "arrays": {},
    }  # fmt: skip
    # rounds 1-3 released labels; round 2 asked again: the same bytes
    full_rounds = replies["full"][1:5]
    assert all(envelope.LABELS in r["arrays"] for r in full_rounds[:3])
    assert full_rounds[1] == full_rounds[2]
    # nothing but the labels differs between 80 rows of both classes and 30 rows of one
    strip = [{**r, "arrays": sorted(r["arrays"])} for r in replies["full"]]
    assert strip == [{**r, "arrays": sorted(r["arrays"])} for r in replies["small"]]
    # the failures reach the server as fixed words; the real reasons stay in the site's log
    masked = {"type": "ValueError", "message": envelope.MASKED_MESSAGE}
    assert replies["full"][-1]["config"][envelope.ERROR] == masked  # the wrong pool
    failed = [r["config"][envelope.ERROR] for r in replies["failing"][1:]]
    assert failed == [{"type": failure, "message": envelope.MASKED_MESSAGE}] * 4 + [masked]
    assert (
        replies["refused"]
        == [{"config": {envelope.ERROR: masked}, "metrics": {}, "arrays": {}}] * 6
    )
    assert "labels outside the declared classes: [2]" in caplog.text
    assert "public pool mismatch" in caplog.text
    if kind == "randomized-response":  # a budget of 0.9: refused within three rounds
        errors = [r["config"].get(envelope.ERROR) for r in full_rounds]
        assert envelope.BUDGET_SPENT in errors
        refused_at = errors.index(envelope.BUDGET_SPENT)
        assert not any(r["arrays"] for r in full_rounds[refused_at:])


def test_the_same_check_finds_what_a_site_without_privacy_sends(data, tmp_path):
    X, y, U = data
    path = write_site(tmp_path / "open", X, y, U, DecisionTreeClassifier(), client_id=0,
                      eval_set=(X[:20], y[:20]), trust="auto")  # fmt: skip
    failing = write_site(tmp_path / "failing", X, y, U, FailingClassifier(), client_id=0)
    offending = check_transcript(
        _transcript(path, U, wrong_pool=False) + _transcript(failing, U, wrong_pool=False)
    )
    assert {
        "config.site.n-samples", "config.site.labels", "config.site.eval-hash",
        "config.site.eval-labels", "metrics.stats.handler-start", "metrics.stats.handler-end",
        "metrics.stats.learner-time-s", "metrics.stats.trust", "metrics.stats.quality",
        "metrics.stats.eval-accuracy", "arrays.eval",
    } <= set(offending)  # fmt: skip
    assert "config.error.message" in offending  # "deliberate failure", the learner's text


def test_a_private_site_that_refuses_to_start_says_why_locally(data, tmp_path):
    X, y, U = data
    path = write_site(tmp_path / "s", X, y, U, DecisionTreeClassifier(), client_id=0,
                      privacy=RandomizedResponse(epsilon=1.0), classes=[0, 2])  # fmt: skip
    with pytest.raises(ValueError, match=r"site\.toml.*labels outside the declared classes: \[1\]"):
        load_site(path)
    with pytest.raises(ValueError, match="classes is required with privacy"):
        write_site(
            tmp_path / "t",
            X,
            y,
            U,
            DecisionTreeClassifier(),
            privacy=RandomizedResponse(epsilon=1.0),
        )
    path.write_text(path.read_text().replace("classes = [\n    0,\n    2,\n]\n", ""))
    with pytest.raises(ValueError, match=r"site\.toml: a site with \[privacy\] must declare"):
        load_site(path)


def test_every_allowed_field_has_a_reason():
    names = [f.name for f in ALLOWED]
    assert len(names) == len(set(names))
    assert all(f.reason.endswith(".") and len(f.reason) > 40 for f in ALLOWED)
    assert {f.message for f in ALLOWED} <= {"handshake", "round", "any"}


def test_the_label_space_is_public_configuration_in_process(data):
    from cotrain import FederatedCoTrainer

    X, y, U = data
    parts = [slice(0, 40), slice(40, 80)]
    Xs, ys = [X[p] for p in parts], [y[p] for p in parts]
    private = FederatedCoTrainer(
        [DecisionTreeClassifier()] * 2, rounds=1, privacy=RandomizedResponse(epsilon=2.0)
    )
    with pytest.raises(ValueError, match=r"classes is required with privacy=.*public config"):
        private.fit(Xs, ys, X_public=U)
    assert not hasattr(private, "history_")  # refused before any training
    ys[1] = np.where(np.arange(40) == 3, 2, ys[1])
    with pytest.raises(ValueError, match=r"y\[1\] \(client 1\) contains labels not listed in"):
        private.set_params(classes=[0, 1]).fit(Xs, ys, X_public=U)


def test_a_flower_run_with_privacy_needs_the_label_space(data, tmp_path):
    from cotrain.flower.server_app import FlowerCoTraining

    spec = '{"class": "cotrain.privacy.RandomizedResponse", "params": {"epsilon": 2.0}}'
    with pytest.raises(ValueError, match="the run config key 'classes' is required"):
        FlowerCoTraining.from_run_config({"public-pool": "u.npy", "privacy": spec})
    with pytest.raises(ValueError, match="the run config key 'classes' is required"):
        FlowerCoTraining.from_run_config({"public-pool": "u.npy", "privacy": spec, "classes": ""})
    run = FlowerCoTraining.from_run_config(
        {"public-pool": "u.npy", "privacy": spec, "classes": '["a", "b"]'}
    )
    assert run.classes == ["a", "b"]
    with pytest.raises(ValueError, match="classes is required with privacy"):
        FlowerCoTraining(data[2], privacy=RandomizedResponse(epsilon=2.0)).run(grid=None)


class _Reply:
    """A handshake reply as the Roster reads it."""

    def __init__(self, site):
        self.content = RecordDict({protocol.SITE: ConfigRecord(site)})

    def has_error(self):
        return False


def test_the_handshake_compares_the_declared_label_space(data):
    from cotrain.flower.handshake import Roster, identity

    U = data[2]
    site = {
        "client-id": 0, "pool-hash": pool_fingerprint(U), "n-public": 40, "learner": "SVC",
        "privacy": repr(RandomizedResponse(epsilon=2.0)), "classes": [0, 1],
    }  # fmt: skip
    roster = Roster(pool_fingerprint(U), 40, site["privacy"], 1.0, 0.05, classes=[1, 0])
    assert roster._check(1, _Reply(site)) == {**site, "node": 1}
    assert roster._check(2, _Reply({**site, "classes": [0, 1, 2]})) is None
    assert roster.refused[2].startswith("label space mismatch: the site declares classes [0, 1, 2]")
    assert roster._check(3, _Reply({k: v for k, v in site.items() if k != "classes"})) is None
    assert roster.refused[3] == "a private site must declare its label space (classes)"
    # a private site is known again by public fields alone
    assert identity(site) == (0, "SVC", (0, 1), site["privacy"])
    roster.sites = [{**site, "node": 1}]
    assert roster._match({**site, "node": 9}) == 0


def test_a_private_sites_warm_worker_answers_a_failure_with_fixed_words(data, tmp_path):
    """The worker a SuperNode relays to (cotrain.flower.worker) masks like the handlers."""
    from cotrain.flower.worker import SiteWorker

    X, y, U = data
    path = _site(tmp_path, "w", X, y, U, DecisionTreeClassifier(), RandomizedResponse(epsilon=1.0))
    content = protocol.to_plain(_round(U, 1, pool_hash="0" * 64).content)
    reply = SiteWorker(path).handle({"op": "train", "content": content})
    assert reply == {
        "ok": False,
        "error": {"type": "ValueError", "message": envelope.MASKED_MESSAGE},
    }
    assert check_transcript([SiteWorker(path).handle({"op": "query"})["content"]]) == []


@pytest.mark.slow
def test_over_real_flower_processes_the_server_gets_only_public_facts(tmp_path):
    """Three SuperNodes as processes: two private sites and one whose private labels fall
    outside the declared classes. That site's warm worker refuses to start with the local
    error; without workers its ClientApp answers the handshake with fixed words. The
    ServerApp's results hold those words, no site's timings or warnings, and the run's ε."""
    import json
    from pathlib import Path

    from cotrain.flower.local.localhost import LocalFederation
    from tests.conftest import cancer_split

    data = cancer_split()
    mech = RandomizedResponse(epsilon=2.0)
    X, y, U = data["X"], list(data["y"]), data["X_public"]
    y[2] = np.where(np.arange(len(y[2])) == 0, 7, y[2])  # one record of a class never declared
    paths = [
        write_site(tmp_path / f"site-{i}", X[i], y[i], U, DecisionTreeClassifier(), client_id=i,
                   privacy=mech, classes=CLASSES)
        for i in range(3)
    ]  # fmt: skip
    np.save(tmp_path / "public.npy", U)
    out = tmp_path / "out"
    config = {
        "public-pool": str(tmp_path / "public.npy"), "output-dir": str(out), "min-nodes": 3,
        "random-state": 0, "rounds": 2, "classes": json.dumps(CLASSES),
        "privacy": json.dumps({"class": "cotrain.privacy.RandomizedResponse",
                               "params": {"epsilon": 2.0}}),
    }  # fmt: skip
    app = Path(__file__).resolve().parents[1] / "examples" / "flower"
    nodes = [{"site": str(p)} for p in paths]
    with pytest.raises(RuntimeError, match=r"site-2/site\.toml: the private data .* outside"):
        with LocalFederation(tmp_path / "warm", 3, nodes):
            pass
    with LocalFederation(tmp_path / "home", 3, nodes, warm_workers=False) as federation:
        done = federation.run(app, config, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["refused"].values()) == [
        f"the site refused: ValueError: {envelope.MASKED_MESSAGE}"
    ]
    assert summary["n_rounds"] == 2 and summary["warnings"] == []
    timings = json.loads((out / "timings.json").read_text())
    server_side = {"round", "exchange_s", "total_s", "server_s"}  # the server's own clock
    assert [set(t) for t in timings] == [server_side] * 2  # no site's clock
    report = json.loads((out / "privacy.json").read_text())
    assert report["unit"] == "record" and report["max_epsilon"] > 0
