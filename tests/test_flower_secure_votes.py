"""Teacher votes summed under SecAgg+ on Flower (``privacy=SecureTeacherVotes``).

The deployed round is the in-process one (:class:`~cotrain.federation.rounds.SecureRound`)
with every sum through Flower's SecAgg+. Its result must equal the
in-process trainer's for the same configuration, data and ``random_state``. The sites draw
their noise from their own entropy (a deployment never seeds it) and the teachers' shard
key too, so the comparison uses one teacher per site (the shard key cannot matter) and
Skellam noise of variance 1e-9 (zero with probability about 1 - 1e-8 per count): every
vote, check and answer is then the same in both runs, so codes, coverage and ε must be
equal. A second configuration with real noise checks the ε and the plan only.

Two tiers:

- an in-memory Grid (every message through Flower's protobuf serde, each node its own
  Context, the relay ClientApp's handlers in this process): seconds;
- a real deployment (:class:`~cotrain.flower.local.localhost.LocalFederation`): a SuperLink and
  3 SuperNodes as processes over TLS, each site with its warm worker.

Both record everything the ServerApp's code receives and check that no site's share (its
noisy first or answer share, read back from the site's own disk) is among it.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
import time

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("dp_accounting")

from flwr.app import Context, Error, Message, RecordDict
from flwr.common.serde import message_from_proto, message_to_proto
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.callbacks import Callback
from cotrain.federation.secure_sum import decode_share
from cotrain.flower.relay import relay_query, relay_train
from cotrain.flower.server_app import FlowerCoTraining
from cotrain.flower.site import write_site
from cotrain.flower.transcript import check_transcript
from cotrain.privacy import SecureTeacherVotes
from cotrain.wire.envelope import reply_from_bytes
from tests.test_flower_secure_sum import arrays_in
from tests.test_flower_strategy import task_identity  # noqa: F401 (autouse fixture)

TINY = 1e-9
CLASSES = [0, 1]


def blobs(n_sites=3, rows=60, n_public=40, seed=0):
    rng = np.random.default_rng(seed)

    def draw(n):
        y = rng.integers(0, 2, n)
        return rng.normal(size=(n, 2)) + 1.5 * y[:, None], y

    sites = [draw(rows) for _ in range(n_sites)]
    return [s[0] for s in sites], [s[1] for s in sites], draw(n_public)[0]


def learners(n):
    return [DecisionTreeClassifier(max_depth=3) for _ in range(n)]


def exact(**kw):
    """One teacher per site and negligible noise: the same votes in every run (no budget:
    a deployed site would otherwise stop at DEFAULT_SITE_BUDGET at once)."""
    params = {"n_teachers": 1, "mu": TINY, "threshold": 0.6, "max_answered": 0.5,
              "budget": math.inf, "n_sites": 3, "rounds": 2}  # fmt: skip
    return SecureTeacherVotes(**{**params, **kw})


def write(tmp_path, X, y, U, mech):
    paths = [
        write_site(tmp_path / f"site-{i}", Xi, yi, U, est, client_id=i, privacy=mech,
                   classes=CLASSES)
        for i, (Xi, yi, est) in enumerate(zip(X, y, learners(len(X)), strict=True))
    ]  # fmt: skip
    np.save(tmp_path / "public.npy", U)
    return paths, tmp_path / "public.npy"


class Codes(Callback):
    def __init__(self):
        self.codes = []

    def on_round_end(self, loop, record):
        self.codes.append(np.array(loop.owner.pseudo_label_codes_))


def in_process(X, y, U, mech, rounds):
    codes = Codes()
    trainer = FederatedCoTrainer(
        learners(len(X)), privacy=mech, classes=CLASSES, rounds=rounds, random_state=0,
        callbacks=[codes],
    ).fit(X, y, X_public=U)  # fmt: skip
    return trainer, np.stack(codes.codes)


def site_shares(paths):
    """Every share a site sent, read back from its own ledger (first and answer shares)."""
    shares = []
    for path in paths:
        ledger = path.parent / "state" / "privacy"
        if not (ledger / "ledger.json").exists():
            continue
        for item in json.loads((ledger / "ledger.json").read_text())["releases"]:
            reply = reply_from_bytes((ledger / "replies" / item["file"]).read_bytes())
            share = reply["arrays"]["labels"]
            shares.append(decode_share(share, len(share) // (4 * len(CLASSES)), len(CLASSES)))
    return shares


def holds_a_share(arrays, shares, bound=2**20):
    for a in arrays:
        flat = np.asarray(a).ravel()
        for s in shares:
            if s.size and flat.size == s.size:
                v = s.ravel()
                if np.array_equal(flat, v) or np.array_equal(flat, v + bound):
                    return True
            if s.size and flat.size == s.size * 4 and flat.dtype == np.uint8:
                if flat.tobytes() == s.astype("<i4").tobytes():
                    return True
    return False


class WireGrid:
    """A Grid whose SuperNodes answer at once with the relay ClientApp's handlers (no
    worker: the relay runs the site's code in this process), every message through
    Flower's protobuf serde; ``replies`` keeps every reply the ServerApp received.
    ``fail``: sites whose vote step fails (they sit the round out)."""

    def __init__(self, paths, fail=()):
        self.sites = {1000 + 7 * i: str(p) for i, p in enumerate(paths)}
        self.states = {node: RecordDict() for node in self.sites}
        self.replies, self.pending, self.fail = [], {}, set(fail)

    def get_node_ids(self):
        return list(self.sites)

    def _deliver(self, msg):
        msg.metadata.__dict__["_message_id"] = msg.object_id
        mid = msg.metadata.message_id
        msg = message_from_proto(message_to_proto(msg))
        node = msg.metadata.dst_node_id
        context = Context(1, node, {"site": self.sites[node]}, self.states[node], {})
        handler = relay_query if msg.metadata.message_type == "query" else relay_train
        try:
            if node in self.fail and "round" in msg.content.config_records:
                raise RuntimeError("this site's disk failed")
            reply = handler(msg, context)
        except Exception as err:  # what Flower sends back for a failed ClientApp
            reply = Message(Error(2, f"{type(err).__name__}: {err}"), reply_to=msg)
        reply.metadata.__dict__["_message_id"] = reply.object_id
        reply = message_from_proto(message_to_proto(reply))
        self.replies.append(reply)
        return mid, reply

    def push_messages(self, messages):
        ids = []
        for msg in messages:
            mid, reply = self._deliver(msg)
            self.pending[mid] = reply
            ids.append(mid)
        return ids

    def pull_messages(self, ids):
        return [self.pending.pop(i) for i in list(ids) if i in self.pending]

    def send_and_receive(self, messages, *, timeout=None):
        return [self._deliver(msg)[1] for msg in messages]


def check_equal(codes, history, report, local, local_codes):
    np.testing.assert_array_equal(codes, local_codes)
    assert [r.coverage for r in history] == [r.coverage for r in local.history_]
    assert [r.epsilon for r in history] == pytest.approx([r.epsilon for r in local.history_])
    expected = local.privacy_report()
    for key in ("max_epsilon", "rounds", "asked", "answered", "answer_slots", "plan"):
        assert report[key] == pytest.approx(expected[key]), key


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # dp_accounting, at variance 1e-9
def test_flower_secure_votes_equal_the_in_process_run(tmp_path):
    X, y, U = blobs()
    mech = exact()
    paths, pool = write(tmp_path, X, y, U, mech)
    grid = WireGrid(paths)
    flower = FlowerCoTraining(
        pool, rounds=3, random_state=0, privacy=mech, classes=CLASSES, min_nodes=3
    ).run(grid)
    local, local_codes = in_process(X, y, U, mech, rounds=3)
    check_equal(flower.consensus_codes_, flower.history_, flower.privacy_report(), local,
                local_codes)  # fmt: skip
    assert flower.stopped_reason_ == local.stopped_reason_
    coverage = [r.coverage for r in flower.history_]
    assert 0 < coverage[0] < coverage[1] <= 1  # the slots bind: half of U per round
    assert [r.failed for r in flower.history_] == [{}, {}, {}]
    # the ServerApp's code received acknowledgements and sums, never a share
    received = flower._received
    assert {step for step, _ in received} == {"vote", "first", "answer"}
    votes = [content for step, content in received if step == "vote"]
    assert votes and all(not content["arrays"] for content in votes)
    assert check_transcript(votes) == []  # every field on a private site's allow-list
    shares = site_shares(paths)
    assert len(shares) == 3 * 2 * 2  # 3 sites, 2 releases, a check and an answer share
    seen = [a for reply in grid.replies for a in arrays_in(reply)]
    assert seen and not holds_a_share(seen, shares)


class Crash(Exception):
    pass


class CrashAfter(Callback):
    def __init__(self, round):
        self.round = round

    def on_round_end(self, loop, record):
        if record.round == self.round:
            raise Crash(f"server died after round {record.round}")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_resumed_serverapp_ends_as_an_uninterrupted_run(tmp_path):
    """The sums, the ledger and the run token come back from the checkpoint; the sites
    keep what they sent under that token, so the resumed run equals the whole one."""
    X, y, U = blobs()
    mech = exact()
    paths, pool = write(tmp_path / "a", X, y, U, mech)
    whole = FlowerCoTraining(
        pool, rounds=3, random_state=0, privacy=mech, classes=CLASSES, min_nodes=3
    ).run(WireGrid(paths))
    paths, pool = write(tmp_path / "b", X, y, U, mech)
    grid, ckpt = WireGrid(paths), tmp_path / "ckpt"
    params = {"rounds": 3, "random_state": 0, "privacy": mech, "classes": CLASSES,
              "min_nodes": 3, "checkpoint_dir": ckpt}  # fmt: skip
    with pytest.raises(Crash):
        FlowerCoTraining(pool, callbacks=[CrashAfter(1)], **params).run(grid)
    resumed = FlowerCoTraining(pool, **params).run(grid, resume=True)
    np.testing.assert_array_equal(resumed.consensus_codes_, whole.consensus_codes_)
    assert [r.coverage for r in resumed.history_] == [r.coverage for r in whole.history_]
    assert resumed.privacy_report()["max_epsilon"] == whole.privacy_report()["max_epsilon"]


def test_a_failing_site_sits_out_and_the_sums_go_on_within_the_plan(tmp_path):
    X, y, U = blobs(n_sites=4)
    mech = SecureTeacherVotes(n_teachers=4, mu=400.0, dropouts=1, n_sites=4, rounds=1)
    paths, pool = write(tmp_path, X, y, U, mech)
    grid = WireGrid(paths, fail=[list(WireGrid(paths).sites)[2]])
    flower = FlowerCoTraining(
        pool, rounds=2, random_state=0, privacy=mech, classes=CLASSES, min_nodes=4
    ).run(grid)
    first = flower.history_[0]
    assert list(first.failed) == [2] and first.coverage == 1.0
    report = flower.privacy_report()
    assert report["max_epsilon"] == pytest.approx(mech.plan(4, len(U), 2, 2).epsilon(1))


def test_a_new_run_token_gets_no_fresh_budget_at_a_secure_site(tmp_path):
    """Each site keeps one ledger on its disk for every run (state/privacy/): a second
    run under a new token finds the budget its first run spent, and every site refuses."""
    X, y, U = blobs(n_sites=3)
    plan = SecureTeacherVotes(n_teachers=2, mu=400.0).plan(3, len(U), 2, rounds=2)
    budget = (plan.epsilon(1) + plan.epsilon(2)) / 2  # one run's release, not two
    mech = SecureTeacherVotes(n_teachers=2, mu=400.0, budget=budget, n_sites=3, rounds=1)
    paths, pool = write(tmp_path, X, y, U, mech)
    params = {"rounds": 2, "privacy": mech, "classes": CLASSES, "min_nodes": 3}
    first = FlowerCoTraining(pool, random_state=0, **params).run(WireGrid(paths))
    assert first.history_[0].coverage == 1.0 and not first.history_[0].failed
    second = FlowerCoTraining(pool, random_state=1, **params).run(WireGrid(paths))
    assert second.history_[0].coverage == 0.0 and sorted(second.history_[0].failed) == [0, 1, 2]
    for path in paths:
        ledger = json.loads((path.parent / "state" / "privacy" / "ledger.json").read_text())
        assert len(ledger["releases"]) == 1  # the refused run released nothing
        assert ledger["epsilon"] == pytest.approx(plan.epsilon(1))


def test_a_site_refuses_a_sum_over_fewer_sites_than_its_plan(tmp_path):
    """A server that sets a reconstruction threshold below the plan's min_sites gets no
    share from any site: the sum is not revealed."""
    from cotrain.flower import grid_transport

    X, y, U = blobs(n_sites=3)
    mech = SecureTeacherVotes(n_teachers=2, mu=100.0, n_sites=3, rounds=1)
    paths, pool = write(tmp_path, X, y, U, mech)
    real = grid_transport.secagg_sum

    def lax(*args, **kwargs):  # a deviating server: sums over 2 of 3 sites would unmask
        return real(*args, **{**kwargs, "reconstruction_threshold": 2})

    grid_transport.secagg_sum = lax
    try:
        flower = FlowerCoTraining(
            pool, rounds=2, random_state=0, privacy=mech, classes=CLASSES, min_nodes=3
        ).run(WireGrid(paths))
    finally:
        grid_transport.secagg_sum = real
    assert flower.history_[0].coverage == 0.0
    assert sorted(flower.history_[0].failed) == [0, 1, 2]


@pytest.mark.parametrize("order", ["every site first", "a subset first"])
def test_a_second_sum_under_another_name_gets_no_share_a_first_one_had(
    tmp_path, monkeypatch, order
):
    """A server that runs Flower's SecAgg+ twice for one step — over all 4 sites and over
    sites 1-3, the second under another query name — would learn site 0's share by
    subtraction. Each site gives its (run, round, step) share to one sum only: of the two
    sums, only the first is revealed, the site ledgers record one release each, and the
    run's ε is the plan's."""
    from cotrain.flower import grid_transport
    from cotrain.flower.secure_sum import SecureSumError

    X, y, U = blobs(n_sites=4)
    mech = SecureTeacherVotes(n_teachers=2, mu=400.0, dropouts=1, n_sites=4, rounds=1)
    paths, pool = write(tmp_path, X, y, U, mech)
    real, revealed = grid_transport.secagg_sum, []

    def twice(grid, nodes, **kwargs):  # the deviating server's sums for one step
        asks = [(list(nodes), kwargs["query"]), (sorted(nodes)[1:], kwargs["query"] + "-b")]
        if order == "a subset first":
            asks.reverse()
        honest = None
        for sites, query in asks:
            try:
                got = real(grid, sites, **{**kwargs, "query": query})
            except SecureSumError:
                revealed.append(())
                continue
            revealed.append(got.node_ids)
            honest = got if query == kwargs["query"] else honest
        if honest is None:
            raise SecureSumError("the honest sum was not revealed")
        return honest

    monkeypatch.setattr(grid_transport, "secagg_sum", twice)
    flower = FlowerCoTraining(
        pool, rounds=2, random_state=0, privacy=mech, classes=CLASSES, min_nodes=4
    ).run(WireGrid(paths))
    assert len(revealed) == 2 and len(revealed[0]) in (3, 4) and revealed[1] == ()
    for path in paths:
        ledger = json.loads((path.parent / "state" / "privacy" / "ledger.json").read_text())
        assert [r["key"].split("/", 1)[1] for r in ledger["releases"]] == ["1/first"]
    plan = mech.plan(4, len(U), 2, rounds=2)
    assert flower.privacy_report()["max_epsilon"] <= plan.epsilon(1) + 1e-9


def test_bad_runs_are_refused_before_any_message(tmp_path):
    X, y, U = blobs(n_sites=3)
    mech = SecureTeacherVotes(n_teachers=2, mu=100.0, dropouts=1, n_sites=3, rounds=1)
    paths, pool = write(tmp_path, X, y, U, mech)
    with pytest.raises(ValueError, match="at least 3 contributing sites"):
        FlowerCoTraining(pool, rounds=2, privacy=mech, classes=CLASSES, min_nodes=3).run(
            WireGrid(paths)
        )
    for name, stated in (("sites", {"n_sites": 3}), ("rounds", {"rounds": 1})):
        mech = SecureTeacherVotes(n_teachers=2, mu=100.0, **stated)  # the server sets the other
        sites = write(tmp_path / name, X, y, U, mech)[0]
        with pytest.raises(ValueError, match="states n_sites and rounds"):
            FlowerCoTraining(pool, rounds=2, privacy=mech, classes=CLASSES, min_nodes=3).run(
                WireGrid(sites)
            )
    mech = SecureTeacherVotes(n_teachers=2, mu=100.0, n_sites=4, rounds=1)
    with pytest.raises(ValueError, match=r"n_sites=4\) plans its noise for 4 sites"):
        FlowerCoTraining(pool, rounds=2, privacy=mech, classes=CLASSES, min_nodes=3).run(
            WireGrid(write(tmp_path / "four", X, y, U, mech)[0])
        )
    mech = SecureTeacherVotes(n_teachers=2, mu=100.0, n_sites=3, rounds=1)
    with pytest.raises(ValueError, match=r"participation=1\.0"):
        FlowerCoTraining(
            pool, rounds=2, privacy=mech, classes=CLASSES, min_nodes=3, participation=0.7
        ).run(WireGrid(write(tmp_path / "b", X, y, U, mech)[0]))


# ---------------------------------------------- a real deployment, TLS, processes
APP_MODULE = '''\
"""The cotrain ServerApp, recording what its code receives; the relay ClientApp."""

import json

import numpy as np
from flwr.serverapp import ServerApp

from cotrain.flower.relay import make_relay_app
from cotrain.flower.server_app import FlowerCoTraining

server_app = ServerApp()
client_app = make_relay_app()


@server_app.main()
def main(grid, context):
    config = dict(context.run_config)
    out = config.pop("out")
    replies = []

    class Recording:
        def __getattr__(self, name):
            return getattr(grid, name)

        def send_and_receive(self, messages, *, timeout=None):
            got = list(grid.send_and_receive(messages, timeout=timeout))
            replies.extend(got)
            return got

        def pull_messages(self, ids):
            got = list(grid.pull_messages(ids))
            replies.extend(got)
            return got

    flower = FlowerCoTraining.from_run_config(config).run(Recording())
    flower.save(out)
    seen = []
    for reply in replies:
        if not reply.has_content():
            continue
        for record in reply.content.array_records.values():
            seen += [array.numpy() for array in record.values()]
        for record in reply.content.config_records.values():
            for value in record.values():
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, bytes) and item.startswith(b"\\x93NUMPY"):
                        from flwr.common import bytes_to_ndarray
                        seen.append(bytes_to_ndarray(item))
    np.savez(out + "/seen.npz", *seen)
    with open(out + "/secure.json", "w") as fh:
        json.dump({"timings": flower.timings_, "coverage": [r.coverage for r in flower.history_],
                   "epsilon": [r.epsilon for r in flower.history_],
                   "steps": sorted({s for s, _ in flower._received}),
                   "vote_arrays": sum(len(c["arrays"]) for s, c in flower._received
                                      if s == "vote")}, fh)
'''


def deployed_app(tmp_path, config):
    from cotrain.flower.local.flwr_cli import app_pyproject

    app = tmp_path / "app"
    (app / "secure_votes_app").mkdir(parents=True)
    (app / "pyproject.toml").write_text(
        app_pyproject("secure-votes-app", "cotrain's secure-votes test app",
                      "secure_votes_app.app:server_app", "secure_votes_app.app:client_app",
                      {k: config[k] for k in config})
    )  # fmt: skip
    (app / "secure_votes_app" / "__init__.py").write_text("")
    (app / "secure_votes_app" / "app.py").write_text(textwrap.dedent(APP_MODULE))
    return app


def start_workers(paths):
    import subprocess

    procs = [
        subprocess.Popen([sys.executable, "-m", "cotrain.flower.worker", str(p)]) for p in paths
    ]
    deadline = time.monotonic() + 120
    for p in paths:
        while not (p.parent / "worker.sock").exists():
            assert time.monotonic() < deadline, "a site worker did not start"
            time.sleep(0.1)
    return procs


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_localhost_tls_deployment_equals_the_in_process_run(tmp_path):
    from cotrain.flower.local.localhost import LocalFederation

    X, y, U = blobs()
    # one release (a check and an answer sum, ~35 s each here), then a round in which the
    # sites train on the broadcast consensus and release nothing
    mech = exact(rounds=1)
    paths, pool = write(tmp_path / "sites", X, y, U, mech)
    out = tmp_path / "out"
    privacy = {"class": "cotrain.privacy.SecureTeacherVotes", "params": mech.get_params()}
    config = {
        "out": str(out), "public-pool": str(pool), "rounds": 2, "random-state": 0,
        "min-nodes": 3, "classes": json.dumps(CLASSES), "privacy": json.dumps(privacy),
        "round-timeout": 120.0,
    }  # fmt: skip
    app = deployed_app(tmp_path, config)
    workers = start_workers(paths)
    try:
        configs = [{"site": str(p)} for p in paths]
        with LocalFederation(tmp_path / "home", 3, configs, tls=True) as fed:
            started = time.monotonic()
            done = fed.run(app, config, timeout=240)
            seconds = time.monotonic() - started
    finally:
        for proc in workers:
            proc.terminate()
            proc.wait(timeout=30)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    secure = json.loads((out / "secure.json").read_text())
    report = json.loads((out / "privacy.json").read_text())
    codes = np.load(out / "consensus_codes.npy")
    local, local_codes = in_process(X, y, U, mech, rounds=2)
    np.testing.assert_array_equal(codes, local_codes)
    assert secure["coverage"] == [r.coverage for r in local.history_]
    assert secure["epsilon"] == pytest.approx([r.epsilon for r in local.history_])
    expected = local.privacy_report()
    for key in ("max_epsilon", "rounds", "asked", "answered", "answer_slots"):
        assert report[key] == pytest.approx(expected[key]), key
    assert secure["steps"] == ["answer", "first", "vote"] and secure["vote_arrays"] == 0
    with np.load(out / "seen.npz") as saved:
        seen = [saved[k] for k in saved.files]
    shares = site_shares(paths)
    assert len(shares) == 3 * 2 and seen and not holds_a_share(seen, shares)
    assert json.loads((out / "summary.json").read_text())["failed"] == {"1": {}, "2": {}}
    print(f"secure votes over TLS, 2 rounds: {seconds:.1f} s; {secure['timings']}",
          file=sys.stderr)  # fmt: skip
