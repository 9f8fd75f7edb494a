"""FederatedCoTrainer: the round loop, its records, and scikit-learn conventions."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

from consensus import QualifiedMajority
from cotrain import FederatedCoTrainer
from cotrain.wire.messages import HardLabels
from tests.conftest import FailingClassifier, WarningTree

HEADER = len(HardLabels(np.zeros(0, dtype=np.int64), 2).to_bytes())


def fit(cancer, estimators, **params):
    params.setdefault("rounds", 3)
    params.setdefault("random_state", 0)
    return FederatedCoTrainer(estimators, **params).fit(
        cancer["X"],
        cancer["y"],
        X_public=cancer["X_public"],
        eval_set=(cancer["X_test"], cancer["y_test"]),
        y_public=cancer["y_public"],
    )


def test_federation_beats_a_lone_client_on_breast_cancer(cancer):
    trainer = fit(
        cancer,
        [DecisionTreeClassifier(), RandomForestClassifier(n_estimators=30), GaussianNB()],
        rounds=5,
    )
    assert trainer.score(cancer["X_test"], cancer["y_test"]) >= 0.88
    assert trainer.history_[-1].mean_accuracy >= 0.88
    assert len(trainer.history_) == 5 and trainer.n_rounds_ == 5


def test_pseudo_labels_replace_previous_round(cancer, recording_tree):
    # Each round a client trains on D_i plus the covered public rows -- never more.
    # trust=None: the paper's FedCT, one fit per round (trust="auto" adds its CV fits)
    fit(cancer, [recording_tree(), recording_tree(), recording_tree()], rounds=4, trust=None)
    n_private = [len(x) for x in cancer["X"]]
    n_public = len(cancer["X_public"])
    assert recording_tree.sizes == n_private + [n + n_public for n in n_private] * 3


def test_qualified_majority_trains_only_on_covered_rows(cancer, recording_tree):
    trainer = fit(
        cancer,
        [recording_tree(), GaussianNB(), LogisticRegression(max_iter=500)],
        consensus=QualifiedMajority(quorum=1.0),
        rounds=2,
        trust=None,  # one fit per round (trust="auto" adds its CV fits)
    )
    covered = round(trainer.history_[0].coverage * len(cancer["X_public"]))
    assert recording_tree.sizes == [len(cancer["X"][0]), len(cancer["X"][0]) + covered]
    last = trainer.history_[-1].coverage
    assert (trainer.pseudo_label_codes_ == -1).mean() == pytest.approx(1 - last)
    # abstentions are masked in the caller's label values, never passed off as a class
    np.testing.assert_array_equal(trainer.pseudo_labels_.mask, trainer.pseudo_label_codes_ < 0)
    abstained = (trainer.pseudo_label_codes_ < 0).sum()
    assert (trainer.pseudo_labels_.filled(-1) == -1).sum() == abstained
    assert 0 < covered < len(cancer["X_public"])


def test_exact_bytes_of_hard_and_soft_messages(cancer):
    n = len(cancer["X_public"])
    hard = fit(cancer, [DecisionTreeClassifier()] * 3, rounds=2)
    up = 3 * (HEADER + math.ceil(n / 8))  # 2 classes -> 1 bit per public example
    assert [r.bytes_up for r in hard.history_] == [up, up]
    # the broadcast of a majority may not abstain but is coded with room for -1: 2 bits
    assert hard.history_[0].bytes_down == 0
    assert hard.history_[1].bytes_down == 3 * (HEADER + math.ceil(2 * n / 8))
    soft = fit(cancer, [GaussianNB()] * 3, share="soft", consensus="mean", rounds=2)
    assert soft.history_[0].bytes_up == 3 * (HEADER + n * 2 * 4)
    assert soft.history_[1].bytes_down == 3 * (HEADER + n * 2 * 4)
    half = fit(
        cancer, [GaussianNB()] * 3, share="soft", consensus="mean", rounds=2, soft_dtype="float16"
    )
    assert half.history_[0].bytes_up == 3 * (HEADER + n * 2 * 2)
    assert half.history_[1].bytes_down == 3 * (HEADER + n * 2 * 2)
    np.testing.assert_allclose(half.pseudo_labels_, soft.pseudo_labels_, atol=1e-3)


@pytest.mark.slow
def test_same_seed_same_result_with_any_n_jobs(cancer):
    ests = [RandomForestClassifier(n_estimators=10), DecisionTreeClassifier(), GaussianNB()]
    a = fit(cancer, ests, participation=0.67)
    b = fit(cancer, ests, participation=0.67)
    c = fit(cancer, ests, participation=0.67, n_jobs=2)
    for other in (b, c):
        np.testing.assert_array_equal(a.pseudo_labels_, other.pseudo_labels_)
        np.testing.assert_array_equal(a.predict(cancer["X_test"]), other.predict(cancer["X_test"]))
        assert [r.clients for r in a.history_] == [r.clients for r in other.history_]


def test_participation_samples_clients_per_round(cancer):
    trainer = fit(cancer, [DecisionTreeClassifier()] * 3, participation=0.34, rounds=6)
    sampled = [r.clients for r in trainer.history_]
    assert all(len(s) == 1 for s in sampled)
    assert len(set(sampled)) > 1  # not always the same client


def test_estimators_are_cloned_never_mutated(cancer):
    tree = DecisionTreeClassifier()
    trainer = fit(cancer, [tree, tree, tree])
    assert not hasattr(tree, "tree_")
    assert trainer.clients_[0] is not trainer.clients_[1]
    assert all(hasattr(m.local.estimator_, "tree_") for m in trainer.clients_)


def test_get_params_and_clone():
    trainer = FederatedCoTrainer([DecisionTreeClassifier()], rounds=7, consensus="qualified")
    params = trainer.get_params(deep=False)
    assert params["rounds"] == 7 and params["consensus"] == "qualified"
    twin = clone(trainer)
    assert twin.get_params(deep=False)["rounds"] == 7
    assert twin.estimators[0] is not trainer.estimators[0]
    assert trainer.set_params(rounds=3).rounds == 3


def test_string_labels_and_pandas_inputs_come_back_in_callers_values(cancer):
    names = np.array(["benign", "malignant"])
    cols = [f"f{i}" for i in range(cancer["X_public"].shape[1])]
    X = [pd.DataFrame(x, columns=cols) for x in cancer["X"]]
    y = [pd.Series(names[v]) for v in cancer["y"]]
    trainer = FederatedCoTrainer([DecisionTreeClassifier()] * 3, rounds=2, random_state=0).fit(
        X, y, X_public=pd.DataFrame(cancer["X_public"], columns=cols)
    )
    assert set(trainer.predict(pd.DataFrame(cancer["X_test"], columns=cols))) <= set(names)
    assert trainer.classes_.tolist() == names.tolist()
    assert set(trainer.pseudo_labels_) <= set(names)
    assert trainer.score(cancer["X_test"], names[cancer["y_test"]]) > 0.8


def test_groups_input_equals_list_input(cancer):
    X = np.concatenate(cancer["X"])
    y = np.concatenate(cancer["y"])
    groups = np.repeat(["a", "b", "c"], [len(x) for x in cancer["X"]])
    est = [DecisionTreeClassifier()] * 3
    by_groups = FederatedCoTrainer(est, rounds=2, random_state=0).fit(
        X, y, groups=groups, X_public=cancer["X_public"]
    )
    by_list = FederatedCoTrainer(est, rounds=2, random_state=0).fit(
        cancer["X"], cancer["y"], X_public=cancer["X_public"]
    )
    np.testing.assert_array_equal(by_groups.pseudo_labels_, by_list.pseudo_labels_)


def test_early_stopping_once_consensus_is_stable(cancer):
    trainer = fit(
        cancer, [DecisionTreeClassifier(random_state=0)] * 3, rounds=30, early_stopping=2,
        trust=None,  # plain FedCT: trees reproduce the consensus, which soon stops changing
    )  # fmt: skip
    changed = [r.changed for r in trainer.history_]
    assert trainer.n_rounds_ < 30
    assert changed[-2:] == [0, 0]
    # it stopped at the first run of two unchanged rounds, not later
    assert not any(a == b == 0 for a, b in itertools.pairwise(changed[:-1]))


def test_skip_failing_client_records_failure(cancer):
    trainer = fit(
        cancer,
        [FailingClassifier(max_rows=25), DecisionTreeClassifier(), DecisionTreeClassifier()],
        on_client_error="skip",
    )
    failed = [r.failed for r in trainer.history_]
    assert failed[0] == {}
    assert list(failed[1]) == list(failed[2]) == [0]
    assert failed[1][0] == "ArithmeticError: deliberate failure"
    assert trainer.history_[0].bytes_up == 3 * (HEADER + math.ceil(300 / 8))
    assert trainer.history_[1].bytes_up == 2 * (HEADER + math.ceil(300 / 8))
    # the failed client keeps its round-1 model and still predicts
    assert trainer.clients_[0] is not None
    assert trainer.predict(cancer["X_test"]).shape == (len(cancer["y_test"]),)


def test_raise_names_the_client_and_round(cancer):
    with pytest.raises(RuntimeError, match=r"client 1 \(FailingClassifier\) failed in round 1"):
        fit(cancer, [DecisionTreeClassifier(), FailingClassifier(), DecisionTreeClassifier()])


def test_too_few_clients_fails_the_round(cancer):
    ests = [FailingClassifier(), FailingClassifier(), DecisionTreeClassifier()]
    with pytest.raises(RuntimeError, match="min_clients=2"):
        fit(cancer, ests, on_client_error="skip", min_clients=2)


def test_learner_warnings_are_summarised_once(cancer):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = fit(cancer, [WarningTree()] * 3, rounds=2, trust=None)  # no CV fits
    summary = [w for w in caught if "chatty" in str(w.message)]
    assert len(summary) == 1
    assert "300 times by clients [0, 1, 2]" in str(summary[0].message)
    assert sum(trainer.learner_warnings_.values()) == 300


@pytest.mark.slow
def test_soft_sharing_with_entropy_consensus(cancer):
    trainer = fit(
        cancer,
        [GaussianNB(), LogisticRegression(max_iter=1000), RandomForestClassifier(n_estimators=20)],
        share="soft",
        consensus="entropy",
        rounds=3,
    )
    assert trainer.pseudo_labels_.shape == (300, 2)
    np.testing.assert_allclose(trainer.pseudo_labels_.sum(axis=1), 1, atol=1e-5)
    proba = trainer.predict_proba(cancer["X_test"])
    assert proba.shape == (len(cancer["y_test"]), 2)
    assert trainer.score(cancer["X_test"], cancer["y_test"]) > 0.85


def test_history_records_and_frame(cancer):
    trainer = fit(cancer, [DecisionTreeClassifier()] * 3)
    frame = trainer.history_.to_frame()
    for col in [
        "round",
        "coverage",
        "agreement",
        "changed",
        "bytes_up",
        "bytes_down",
        "time_s",
        "learner_time_s",
        "mean_accuracy",
        "consensus_accuracy",
        "pseudo_label_accuracy",
        "accuracy_client_0",
        "n_failed",
    ]:
        assert col in frame.columns
    first = trainer.history_[0]
    assert first.changed is None and first.coverage == 1.0
    assert 0.5 < first.agreement <= 1.0
    assert first.pseudo_label_accuracy > 0.8


def test_history_plot(cancer):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    fig = fit(cancer, [DecisionTreeClassifier()] * 3).history_.plot()
    assert len(fig.axes) == 2


def test_classes_argument_adds_unseen_class(cancer):
    trainer = fit(cancer, [GaussianNB()] * 3, classes=[0, 1, 2])
    assert trainer.predict_proba(cancer["X_test"]).shape[1] == 3
    assert np.all(trainer.predict_proba(cancer["X_test"])[:, 2] == 0)


def test_client_with_single_class(cancer):
    X = [cancer["X"][0], cancer["X"][1][cancer["y"][1] == 1], cancer["X"][2]]
    y = [cancer["y"][0], cancer["y"][1][cancer["y"][1] == 1], cancer["y"][2]]
    trainer = FederatedCoTrainer([LogisticRegression(max_iter=1000)] * 3, rounds=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(X, y, X_public=cancer["X_public"])
    # round 2 trains on the pseudo-labels too, so the client now knows both classes
    assert trainer.clients_[1].classes_.tolist() == [0, 1]


def test_distill_fits_a_global_model(cancer):
    trainer = fit(cancer, [DecisionTreeClassifier()] * 3)
    student = trainer.distill(LogisticRegression(max_iter=2000))
    assert student.score(cancer["X_test"], cancer["y_test"]) > 0.85
    np.testing.assert_array_equal(
        student.predict(cancer["X_public"][:5]), student.predict(cancer["X_public"][:5])
    )


def test_privacy_argument_must_be_a_mechanism(cancer):
    with pytest.raises(TypeError, match="privacy must be a label-privacy mechanism"):
        fit(cancer, [DecisionTreeClassifier()] * 3, privacy="rr")


def test_verbose_prints_a_line_per_round(cancer, capsys):
    fit(cancer, [DecisionTreeClassifier()] * 3, rounds=2, verbose=2)
    captured = capsys.readouterr()
    lines = [ln for ln in captured.out.splitlines() if ln.startswith("round")]
    assert len(lines) == 2
    assert "3 clients, 0 failed, coverage 1.00" in lines[0] and "acc" in lines[0]
    assert "FedCT" in captured.err  # the tqdm progress bar


def test_silent_by_default(cancer, capsys):
    fit(cancer, [DecisionTreeClassifier()] * 3, rounds=2)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_delta_coding_gives_the_same_run_with_fewer_bytes(cancer):
    from cotrain.wire.delta import DELTA_HEADER_SIZE

    trees = [DecisionTreeClassifier(random_state=0)] * 3
    packed = fit(cancer, trees, rounds=4, trust=None)  # plain FedCT: a consensus that settles
    delta = fit(cancer, trees, rounds=4, encoding="delta", trust=None)
    np.testing.assert_array_equal(packed.pseudo_label_codes_, delta.pseudo_label_codes_)
    # round 2's broadcast is the clients' first (in full); from round 3 each client gets
    # the changes since the consensus it acknowledged
    down = [r.bytes_down for r in delta.history_]
    assert down[:2] == [r.bytes_down for r in packed.history_][:2]
    # trees reproduce the consensus, so from round 3 on nothing changes: header only
    assert [r.changed for r in delta.history_][2:] == [0, 0]
    assert delta.history_[3].bytes_up == 3 * DELTA_HEADER_SIZE
    assert down[3] == 3 * DELTA_HEADER_SIZE  # round 3's consensus equals round 2's
    assert down[2] < packed.history_[2].bytes_down
    assert sum(r.bytes_up for r in delta.history_) < sum(r.bytes_up for r in packed.history_)


def test_delta_coding_with_skipped_clients_stays_in_sync(cancer):
    trainer = fit(
        cancer,
        [DecisionTreeClassifier(), GaussianNB(), DecisionTreeClassifier()],
        rounds=6,
        participation=0.67,
        encoding="delta",
        n_jobs=2,
    )
    reference = fit(
        cancer,
        [DecisionTreeClassifier(), GaussianNB(), DecisionTreeClassifier()],
        rounds=6,
        participation=0.67,
    )
    np.testing.assert_array_equal(trainer.pseudo_label_codes_, reference.pseudo_label_codes_)


def test_quantised_soft_labels(cancer):
    n = len(cancer["X_public"])
    soft = fit(cancer, [GaussianNB()] * 3, share="soft", consensus="mean", rounds=2, soft_bits=4)
    assert soft.history_[0].bytes_up == 3 * (HEADER + math.ceil(n * 2 * 4 / 8))
    assert soft.history_[1].bytes_down == 3 * (HEADER + math.ceil(n * 2 * 4 / 8))
    levels = soft.pseudo_labels_ * 15
    np.testing.assert_allclose(levels, np.round(levels), atol=1e-9)
