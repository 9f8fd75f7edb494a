"""Consensus accuracy of a Flower federation on an evaluation set its sites share
(cotrain.flower.evaluation), over the in-memory Grid of test_flower_strategy."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.supercore.task_identity import TaskIdentity

from consensus import MajorityVote
from cotrain import FederatedCoTrainer
from cotrain.federation.bookkeeping import RoundBookkeeping
from cotrain.flower import protocol
from cotrain.flower.client_app import site_query, site_train
from cotrain.flower.evaluation import SharedEvaluation, codes_from_bytes, eval_fingerprint
from cotrain.flower.server_app import FlowerCoTraining
from cotrain.flower.site import load_site, write_site, write_sites
from cotrain.flower.worker import decode, encode
from cotrain.privacy import SubsampleAndAggregate
from cotrain.wire import envelope
from cotrain.wire.format import WireFormat
from tests.test_flower_strategy import InMemoryGrid, mixed


@pytest.fixture(autouse=True)
def task_identity():
    """Messages need a run id, as they would have inside a Flower app process."""
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity.run_id = TaskIdentity.node_id = TaskIdentity.task_id = None


def _both(cancer, tmp_path, **params):
    """The Flower run (in-memory Grid) and the in-process run, same data and parameters."""
    X, y, U = cancer["X"], cancer["y"], cancer["X_public"]
    test = (cancer["X_test"], cancer["y_test"])
    paths = write_sites(tmp_path / "sites", X, y, U, mixed(), eval_set=test)
    np.save(tmp_path / "public.npy", U)
    grid = InMemoryGrid(paths)
    flower = FlowerCoTraining(tmp_path / "public.npy", **params).run(grid)
    local = FederatedCoTrainer(mixed(), **params).fit(X, y, X_public=U, eval_set=test)
    return flower, local, grid


def test_consensus_accuracy_equals_in_process_hard_majority(cancer, tmp_path):
    flower, local, _ = _both(
        cancer, tmp_path, rounds=3, participation=0.67, random_state=2, consensus="majority"
    )
    assert flower._eval.sites == [0, 1, 2]
    for a, b in zip(flower.history_, local.history_, strict=True):
        assert a.consensus_accuracy is not None
        assert a.consensus_accuracy == pytest.approx(b.consensus_accuracy, abs=1e-12)
    assert flower.history_[-1].consensus_accuracy > 0.85  # 209 test rows; seeded
    summary = json.loads((flower.save(tmp_path / "out") / "summary.json").read_text())
    assert summary["eval_sites"] == [0, 1, 2]


# the in-process run summarises KNN's warning (no sample_weight: soft targets made hard)
@pytest.mark.filterwarnings("ignore:UserWarning raised:UserWarning")
def test_consensus_accuracy_equals_in_process_soft_mean(cancer, tmp_path):
    flower, local, grid = _both(
        cancer, tmp_path, rounds=2, share="soft", consensus="mean", random_state=5
    )
    for a, b in zip(flower.history_, local.history_, strict=True):
        assert a.consensus_accuracy == pytest.approx(b.consensus_accuracy, abs=1e-12)
    # the sites were asked for probabilities and sent them
    assert all(m.content.config_records["round"]["eval-proba"] for m in grid.pushed[3:])


def test_sites_with_other_evaluation_data_or_opting_out_are_left_out(cancer, tmp_path):
    """The most common evaluation set is scored; a site with another one, or with
    share-eval = false, sends no predictions and is not counted."""
    X, y, U = cancer["X"], cancer["y"], cancer["X_public"]
    Xt, yt = cancer["X_test"], cancer["y_test"]
    paths = write_sites(tmp_path / "sites", X, y, U, mixed(), eval_set=(Xt, yt))
    est = mixed()
    write_site(paths[1].parent, X[1], y[1], U, est[1], client_id=1, eval_set=(Xt[:50], yt[:50]))
    np.save(tmp_path / "public.npy", U)
    run = FlowerCoTraining(tmp_path / "public.npy", rounds=1, random_state=0)
    flower = run.run(InMemoryGrid(paths))
    assert flower._eval.sites == [0, 2]
    assert sorted(flower._books.predictions) == [0, 2]
    assert len(flower.history_[0].client_accuracy) == 3  # every site still scores itself
    # site 0 opts out (a fresh folder: ClientApps cache the sites they load)
    paths = write_sites(tmp_path / "optout", X, y, U, mixed(), eval_set=(Xt, yt))
    write_site(paths[0].parent, X[0], y[0], U, est[0], 0, eval_set=(Xt, yt), share_eval=False)
    assert "eval-hash" not in site_query(load_site(paths[0]))["config"]["site"]
    flower = FlowerCoTraining(tmp_path / "public.npy", rounds=1, random_state=0)
    flower.run(InMemoryGrid(paths))
    assert flower._eval.sites == [1, 2] and sorted(flower._books.predictions) == [1, 2]
    assert flower.history_[0].consensus_accuracy is not None


@pytest.mark.filterwarnings("ignore:UserWarning raised:UserWarning")
def test_a_private_site_sends_no_evaluation_labels_or_predictions(cancer, tmp_path):
    X, y, U = cancer["X"], cancer["y"], cancer["X_public"]
    test = (cancer["X_test"], cancer["y_test"])
    mech = SubsampleAndAggregate(n_teachers=4, sigma=30.0)  # within ε = 10
    paths = [
        write_site(tmp_path / f"site-{i}", X[i], y[i], U, est, client_id=i, eval_set=test,
                   privacy=mech, classes=[0, 1])
        for i, est in enumerate(mixed())
    ]  # fmt: skip
    site = load_site(paths[0])
    assert not site.share_eval and site.X_eval is not None
    assert "eval-hash" not in site_query(site)["config"]["site"]
    np.save(tmp_path / "public.npy", U)
    grid = InMemoryGrid(paths)
    flower = FlowerCoTraining(
        tmp_path / "public.npy", rounds=1, random_state=0, privacy=mech, classes=[0, 1]
    )
    flower.run(grid)
    assert flower._eval.sites == [] and flower.history_[0].consensus_accuracy is None
    # a private site refuses to share its evaluation data
    text = paths[0].read_text()
    paths[0].write_text(text.replace("[estimator]", "share-eval = true\n[estimator]", 1))
    with pytest.raises(ValueError, match="share-eval"):
        load_site(paths[0])


def test_a_private_site_reply_holds_no_eval_arrays(cancer, tmp_path):
    """site_train itself: eval arrays only from a sharing site, as bytes in the plain form
    (what a warm worker relays)."""
    X, y, U = cancer["X"], cancer["y"], cancer["X_public"]
    test = (cancer["X_test"], cancer["y_test"])
    mech = SubsampleAndAggregate(n_teachers=4, sigma=30.0)  # within ε = 10
    shared = load_site(write_site(tmp_path / "a", X[0], y[0], U, mixed()[0], eval_set=test))
    private = load_site(
        write_site(
            tmp_path / "b", X[0], y[0], U, mixed()[0], eval_set=test, privacy=mech, classes=[0, 1]
        )
    )
    config = {
        "round": 1, "client-index": 0, "seed": 3, "ref-round": 0, "pool-hash": shared.pool_hash,
        "classes": [0, 1], "run-token": "t", "eval-proba": True,
        **WireFormat(2, len(U)).to_config(),
    }  # fmt: skip
    reply = site_train(private, {"config": {"round": config}})
    assert set(reply["arrays"]) == {envelope.LABELS}
    reply = site_train(shared, {"config": {"round": config}})
    assert set(reply["arrays"]) == {envelope.LABELS, protocol.EVAL, protocol.EVAL_PROBA}
    assert decode(encode(reply)) == reply
    codes = codes_from_bytes(reply["arrays"][protocol.EVAL], 2, len(test[1]))
    assert np.mean(codes == test[1]) == pytest.approx(reply["metrics"]["stats"]["eval-accuracy"])
    proba = np.frombuffer(reply["arrays"][protocol.EVAL_PROBA], "<f4").reshape(-1, 2)
    assert proba.shape == (len(test[1]), 2)


def test_shared_evaluation_ignores_broken_replies_and_the_books_restore():
    sites = [{"eval-hash": eval_fingerprint(np.zeros((2, 1)), np.array(["a", "c"])),
              "eval-labels": ["a", "c"]}]  # fmt: skip
    shared = SharedEvaluation(sites, np.array(["a", "b"]))
    assert shared.y_codes.tolist() == [0, -2]  # "c" is no class of the run
    assert shared.read(0, object()) is None  # a broken reply: nothing read
    books = RoundBookkeeping(n_classes=2)
    assert books.consensus_fields(MajorityVote(), shared.y_codes) == {}
    books.load_state_dict(RoundBookkeeping(2).state_dict() | {"predictions": {"0": [[0, 0], None]}})
    # the restored predictions score against the labels, the unknown "c" never matches
    assert books.consensus_fields(MajorityVote(), shared.y_codes) == {"consensus_accuracy": 0.5}
    with pytest.raises(ValueError, match="eval codes"):
        codes_from_bytes(b"\x00\x05", 2, 2)


@pytest.mark.filterwarnings("ignore:UserWarning raised:UserWarning")
def test_a_resumed_run_keeps_the_sites_evaluation_predictions(cancer, tmp_path):
    """The latest predictions are checkpointed: a resumed run (with sampling, so that
    some sites sit a round out) gives the uninterrupted run's consensus accuracy."""
    from tests.test_flower_strategy import Crash, CrashAfter

    X, y, U = cancer["X"], cancer["y"], cancer["X_public"]
    paths = write_sites(
        tmp_path / "s", X, y, U, mixed(), eval_set=(cancer["X_test"], cancer["y_test"])
    )
    np.save(tmp_path / "public.npy", U)
    params = {"rounds": 4, "participation": 0.67, "random_state": 3, "share": "soft",
              "consensus": "mean"}  # fmt: skip
    whole = FlowerCoTraining(tmp_path / "public.npy", **params).run(InMemoryGrid(paths))
    grid, ckpt = InMemoryGrid(paths), tmp_path / "ckpt"
    with pytest.raises(Crash):
        FlowerCoTraining(
            tmp_path / "public.npy", checkpoint_dir=ckpt, callbacks=[CrashAfter(2)], **params
        ).run(grid)
    resumed = FlowerCoTraining(tmp_path / "public.npy", checkpoint_dir=ckpt, **params)
    resumed.run(grid, resume=True)
    assert [r.consensus_accuracy for r in resumed.history_] == [
        r.consensus_accuracy for r in whole.history_
    ]


def test_consensus_accuracy_equals_in_process_reliability_vote(cancer, tmp_path):
    """The reliability vote weights each site's prediction by the quality it released: the
    deployed server must weigh them as the in-process one does (it used a plain vote)."""
    flower, local, _ = _both(cancer, tmp_path, rounds=3, random_state=4, consensus="reliability")
    assert any(r.quality for r in local.history_)  # the sites released their quality
    for a, b in zip(flower.history_, local.history_, strict=True):
        assert a.quality == b.quality
        assert a.consensus_accuracy == pytest.approx(b.consensus_accuracy, abs=1e-12)
