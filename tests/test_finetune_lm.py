"""examples/finetune_lm.py: FedCT, FedAvg, local and central on movie reviews (tiny settings).

The tiny randomly initialised GPT-2 (``--model tiny-gpt2``) runs offline in seconds; its
accuracies are near chance and only checked to be accuracies. What is checked exactly is the
table's shape and the uplink bytes: a hard FedCT upload of |U| binary labels is
``10 + ceil(|U| / 8)`` bytes (a 10-byte header, labels packed at 1 bit, see
:mod:`cotrain.wire.messages`), a soft one ``10 + |U| * 2 * 4`` (float32), and a FedAvg upload
4 bytes per trainable parameter (with LoRA: the adapters and the head).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TINY = ["--model", "tiny-gpt2", "--clients", "3", "--labeled", "8", "--public", "12"]
TINY += ["--test", "10", "--rounds", "2", "--max-length", "32", "--batch-size", "8"]
TINY += ["--threads", "1", "--no-progress"]  # threads thrash on a busy machine
COLUMNS = [
    "method",
    "rounds",
    "epochs",
    "mean client acc",
    "min client acc",
    "max client acc",
    "up bytes/round/client",
    "s/round",
    "s/client-epoch",
    "wall s",
]


@pytest.fixture
def finetune_lm(monkeypatch):
    pytest.importorskip("transformers")
    from cotrain.datasets.paths import data_home

    try:
        data_home()
    except FileNotFoundError:
        pytest.skip("shared data folder absent (set COTRAIN_DATA to run this test)")
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import finetune_lm

    yield finetune_lm
    sys.modules.pop("finetune_lm", None)


def test_quick_sets_small_defaults_that_options_override(finetune_lm):
    args = finetune_lm.parse_args(["--quick", "--model", "tiny-gpt2", "--clients", "5"])
    assert args.clients == 5  # given explicitly
    assert (args.rounds, args.max_length, args.public, args.lora) == (2, 64, 16, True)
    assert args.methods == ["fedct", "fedavg", "local", "central"]
    assert args.lr == 5e-4
    full = finetune_lm.parse_args(["--model", "tiny-gpt2", "--methods", "local"])
    assert (full.clients, full.labeled, full.public, full.test) == (10, 145, 150, 300)
    with pytest.raises(SystemExit):
        finetune_lm.parse_args(["--model", "tiny-gpt2", "--methods", "fedct,fedprox"])


@pytest.mark.slow
def test_tracked_learner_clones_and_pickles_as_itself(finetune_lm):
    import pickle

    from sklearn.base import clone

    from learners import LMClassifier

    args = finetune_lm.parse_args(["--model", "tiny-gpt2", "--max-epochs", "3"])
    model = finetune_lm.make_learner(args, None, 7)
    assert isinstance(model, LMClassifier) and type(model).__name__ == "TrackedLMClassifier"
    assert type(clone(model)) is type(model)
    assert clone(model).get_params()["max_epochs"] == 3
    # worker processes find the class by name in the module (see its __getattr__)
    assert type(pickle.loads(pickle.dumps(model))) is type(model)
    assert finetune_lm.TrackedLMClassifier is type(model)


def test_split_is_disjoint_and_sized(finetune_lm):
    texts = [f"review {i}" for i in range(40)]
    y = np.array(["neg", "pos"] * 20)
    data = finetune_lm.split_reviews(texts, y, clients=3, labeled=5, public=6, test=7, seed=1)
    labelled = np.concatenate(data["X"])
    assert [len(x) for x in data["X"]] == [5, 5, 5]
    assert len(set(labelled) | set(data["U"]) | set(data["X_test"])) == 15 + 6 + 7
    with pytest.raises(SystemExit, match="exceed"):
        finetune_lm.split_reviews(texts, y, clients=3, labeled=10, public=6, test=7, seed=1)


@pytest.mark.slow
def test_every_method_gives_a_row_with_exact_uplink_bytes(finetune_lm, tmp_path, capsys):
    plot, out = tmp_path / "acc.png", tmp_path / "table.csv"
    table = finetune_lm.main([*TINY, "--lora", "--plot", str(plot), "--out", str(out)])
    assert table["method"].tolist() == ["FedCT", "FedAvg", "local", "central"]
    assert table.columns.tolist() == COLUMNS
    for col in ["mean client acc", "min client acc", "max client acc"]:
        assert table[col].between(0.0, 1.0).all()
    assert (table["min client acc"] <= table["mean client acc"] + 1e-12).all()
    assert (table["mean client acc"] <= table["max client acc"] + 1e-12).all()
    # accuracies on 10 test reviews are multiples of 1/10 (FedCT, FedAvg, central)
    for acc in table["mean client acc"].iloc[[1, 3]]:
        assert acc * 10 == pytest.approx(round(acc * 10))

    up = table.set_index("method")["up bytes/round/client"]
    assert up["FedCT"] == 10 + math.ceil(12 / 8)  # 12 binary labels packed at 1 bit
    args = finetune_lm.parse_args([*TINY, "--lora"])
    texts, y = finetune_lm.load_movie_reviews()
    data = finetune_lm.split_reviews(texts, y, 3, 8, 12, 10, 0)
    model = finetune_lm.make_learner(args, finetune_lm.shared_tokenizer(args, data["U"]), 0)
    model.initialize(list(data["X"][0]), data["y"][0])
    trainable = sum(w.size for w in model.get_weights(trainable_only=True).values())
    assert 0 < trainable < model.n_parameters(trainable_only=False)  # LoRA: adapters + head
    assert up["FedAvg"] == 4 * trainable
    assert up["local"] == 0
    assert np.isnan(up["central"])

    seconds = table.set_index("method")
    assert (seconds["wall s"] > 0).all() and (seconds["s/client-epoch"] > 0).all()
    assert seconds.loc[["FedCT", "FedAvg"], "s/round"].gt(0).all()
    assert seconds.loc[["local", "central"], "s/round"].isna().all()

    pd.testing.assert_frame_equal(pd.read_csv(out), table, check_dtype=False)
    if plot.exists():  # matplotlib installed
        assert plot.stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "3 clients x 8 labelled, |U| = 12" in printed and "FedAvg" in printed


def test_soft_labels_cost_float32_per_class(finetune_lm):
    table = finetune_lm.main([*TINY, "--rounds", "1", "--methods", "fedct", "--soft"])
    assert table["method"].tolist() == ["FedCT"]
    assert table["up bytes/round/client"].iloc[0] == 10 + 12 * 2 * 4


def test_a_time_budget_stops_fedct_and_local_trains_as_long(finetune_lm):
    # a budget far below one round: the first round runs, no second; local then trains the
    # epochs of a client's first fit (--max-epochs 2), not those of 3 rounds (2 + 2 * 1)
    table = finetune_lm.main(
        [*TINY, "--rounds", "3", "--methods", "fedct,local", "--time-budget", "1e-6"]
    ).set_index("method")
    assert table.loc["FedCT", "rounds"] == 1
    assert table.loc["FedCT", "epochs"] == 2
    assert table.loc["local", "epochs"] == 2
    again = finetune_lm.main([*TINY, "--methods", "local", "--alone-epochs", "1"])
    assert again["epochs"].tolist() == [1]


def test_long_texts_and_windows_reach_the_learner(finetune_lm):
    args = finetune_lm.parse_args(["--model", "tiny-gpt2", "--long-texts", "windows",
                                   "--max-windows", "3", "--verbose", "2"])  # fmt: skip
    model = finetune_lm.make_learner(args, None, 0)
    assert (model.long_texts, model.max_windows) == ("windows", 3)
    assert args.verbose == 2
    assert finetune_lm.parse_args(["--model", "tiny-gpt2", "--no-progress"]).verbose == 0
    with pytest.raises(SystemExit):
        finetune_lm.parse_args(["--model", "tiny-gpt2", "--long-texts", "all"])


def test_consensus_option_reaches_the_trainer(finetune_lm, monkeypatch):
    seen = {}
    real = finetune_lm.FederatedCoTrainer

    def spy(*args, **kwargs):
        seen["consensus"] = kwargs["consensus"]
        return real(*args, **kwargs)

    monkeypatch.setattr(finetune_lm, "FederatedCoTrainer", spy)
    table = finetune_lm.main([*TINY, "--rounds", "1", "--methods", "fedct"])
    assert seen["consensus"] == "majority"  # the paper's FedCT unless told otherwise
    finetune_lm.main([*TINY, "--rounds", "1", "--methods", "fedct", "--consensus", "dawid_skene"])
    assert seen["consensus"] == "dawid_skene"
    assert table["method"].tolist() == ["FedCT"]
    with pytest.raises(ValueError, match="consensus"):
        finetune_lm.main([*TINY, "--rounds", "1", "--methods", "fedct", "--consensus", "vote"])


def test_a_clone_without_the_reviews_is_told_where_to_get_them(finetune_lm, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        finetune_lm.main([*TINY, "--data-home", str(tmp_path)])
    message = str(info.value)
    assert message.startswith(f"{Path(sys.argv[0]).name}: movie_reviews/review_polarity.tar.gz")
    assert f"mkdir -p {tmp_path}/movie_reviews && curl -L -o " in message
    assert "movie-review-data/review_polarity.tar.gz" in message


@pytest.mark.parametrize("option", ["--clients", "--labeled", "--public", "--test", "--rounds"])
def test_sizes_below_one_are_refused_by_name(finetune_lm, option, capsys):
    with pytest.raises(SystemExit):
        finetune_lm.parse_args(["--model", "tiny-gpt2", option, "0"])
    assert f"{option} must be at least 1, got 0" in capsys.readouterr().err
