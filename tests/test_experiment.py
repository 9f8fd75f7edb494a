"""The config-driven runner: `cotrain run EXPERIMENT.toml` and `cotrain report`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cotrain.cli import main
from cotrain.experiment import ExperimentError, load_experiment, report, run_experiment

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"

TINY = """\
name = "tiny"
description = "two variants, two seeds, digits"
seeds = [0, 1]

[data]
dataset = "digits"

[split]
n_public = 200
n_labeled = 150
n_test = 200
n_clients = 3

[method]
name = "fedct"
rounds = 2

[[clients]]
learner = "DT"

[[variant]]
label = "FedCT trees"
paper = 0.5

[[variant]]
label = "local"
method = { name = "local" }
"""


def write(tmp_path, text, name="exp.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.slow
def test_tiny_experiment_runs_summarises_and_resumes(tmp_path, capsys):
    path = write(tmp_path, TINY)
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    summary = pd.read_csv(out / "summary.csv")
    assert summary["variant"].tolist() == ["FedCT trees", "local"]
    assert summary["seeds"].tolist() == [2, 2]
    assert summary["method"].tolist() == ["fedct", "local"]
    # 50 rows per tree client on 10 classes: far above chance (0.1), far from perfect
    assert ((summary["accuracy"] > 0.35) & (summary["accuracy"] < 0.8)).all()
    result = json.loads((out / "runs" / "FedCT_trees" / "seed-1" / "result.json").read_text())
    history = pd.read_csv(out / "runs" / "FedCT_trees" / "seed-1" / "history.csv")
    assert result["rounds"] == len(history) == 2
    assert result["accuracy"] == pytest.approx(history["mean_accuracy"].iloc[-1])
    markdown = (out / "summary.md").read_text()
    assert "| FedCT trees | fedct |" in markdown and "0.500" in markdown
    assert (out / "accuracy.png").stat().st_size > 1000
    assert "results:" in capsys.readouterr().out

    # a second run into the same folder is refused; --resume reruns nothing that is done
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 2
    assert "already holds runs" in capsys.readouterr().err
    stamp = (out / "runs" / "local" / "seed-0" / "result.json").stat().st_mtime_ns
    (out / "runs" / "local" / "seed-1" / "result.json").unlink()  # as if it died there
    run_experiment(path, out, resume=True, verbose=0)
    assert (out / "runs" / "local" / "seed-0" / "result.json").stat().st_mtime_ns == stamp
    assert (out / "runs" / "local" / "seed-1" / "result.json").exists()
    again = pd.read_csv(out / "summary.csv")
    np.testing.assert_allclose(again["accuracy"], summary["accuracy"])

    text = report([out, out])  # one table, a column per folder (report.py's format)
    assert "| local | local |" in text and text.count(str(out)) >= 2


def test_finished_run_kept_with_its_checkpoint_is_extended_by_more_rounds(tmp_path, monkeypatch):
    from cotrain.experiment import run_one
    from cotrain.persistence.checkpoint import CheckpointCallback

    path = write(tmp_path, TINY.replace("rounds = 2", "rounds = 4"))
    out = tmp_path / "out"
    _, runs = load_experiment(path)
    full = run_one(runs[0], tmp_path / "reference")
    # a 2-round run that kept its last checkpoint (--keep-checkpoints), then 4 rounds asked
    cut = runs[0].__class__(runs[0].variant, runs[0].seed, json.loads(json.dumps(runs[0].config)))
    cut.config["method"]["rounds"] = 2
    run_one(cut, out / "runs" / runs[0].key, keep_checkpoint=True)
    original, seen = CheckpointCallback.on_round_end, []

    def counting(self, loop, record):
        seen.append(record.round)
        original(self, loop, record)

    monkeypatch.setattr(CheckpointCallback, "on_round_end", counting)
    run_experiment(path, out, resume=True, verbose=0, variants=["FedCT trees"], seeds=[0])
    resumed = json.loads((out / "runs" / runs[0].key / "result.json").read_text())
    assert seen == [3, 4]  # rounds 1 and 2 came from the checkpoint
    assert resumed["rounds"] == 4 and resumed["accuracy"] == full["accuracy"]


@pytest.mark.parametrize(
    ("edit", "marker", "message"),
    [
        (("rounds = 2", "rounds = 2\nrouns = 3"), "rouns", "unknown key 'method.rouns'"),
        (("n_clients = 3", 'n_clients = "three"'), "three", "'split.n_clients' must be an integer"),
        (('dataset = "digits"', 'dataset = "mnist"'), "mnist", "unknown dataset 'mnist'"),
        (('name = "fedct"', 'name = "fedsgd"'), "fedsgd", "method.name must be one of"),
        (('learner = "DT"', 'learner = "Perceptronish"'), "Perceptronish", "unknown learner"),
        (("seeds = [0, 1]", "seeds = []"), "seeds = []", "seeds must be a non-empty list"),
        (("n_clients = 3", 'n_clients = 3\npartition = "zipf"'), "zipf", "unknown partition"),
        (
            ("n_clients = 3", 'n_clients = 3\npartition = "two_alpha"\nalpha = 1'),
            "two_alpha",
            "two_alpha needs",
        ),
        (("[[clients]]", "[[clients]]\ncount = 2"), "count = 2", "add up to 2 but split.n_clients"),
        (
            ('label = "local"', 'label = "local"\nsplit = { n_clientz = 2 }'),
            "n_clientz",
            "split.n_clientz",
        ),
        (("[method]", "[method"), "[method", "Expected ']'"),
    ],
    ids=[
        "unknown-key",
        "wrong-type",
        "dataset",
        "method",
        "learner",
        "seeds",
        "partition",
        "alpha",
        "counts",
        "variant-key",
        "syntax",
    ],
)
def test_invalid_files_are_refused_with_line_and_reason(tmp_path, capsys, edit, marker, message):
    old, new = edit
    assert old in TINY
    text = TINY.replace(old, new, 1)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if marker in row)
    path = write(tmp_path, text)
    with pytest.raises(ExperimentError) as info:
        load_experiment(path)
    error = str(info.value)
    assert message in error
    assert error.startswith(f"{path}:{line}:") or f"at line {line}," in error, error
    assert main(["run", str(path), "--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # nothing ran


def test_user_csv_file_with_mixed_learners(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    frame = pd.DataFrame(X, columns=list("abcd"))
    frame["label"] = np.where(X[:, 0] + X[:, 1] > 0, "yes", "no")
    frame.to_csv(tmp_path / "mine.csv", index=False)
    text = f"""\
name = "csv"
seeds = [0]
[data]
path = "{tmp_path / "mine.csv"}"
target = "label"
[split]
n_public = 200
n_labeled = 100
n_test = 100
n_clients = 2
[method]
name = "fedct"
rounds = 2
[[clients]]
learner = "DT"
params = {{ max_depth = 3 }}
[[clients]]
learner = "sklearn.linear_model.LogisticRegression"
"""
    out = run_experiment(write(tmp_path, text), tmp_path / "out", verbose=0)
    summary = pd.read_csv(out / "summary.csv")
    assert summary["accuracy"].iloc[0] > 0.8


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.toml")), ids=lambda p: p.stem)
def test_shipped_experiment_files_are_valid(path):
    if 'learner = "TorchMLP"' in path.read_text():
        pytest.importorskip("torch", reason="the experiment trains TorchClassifier clients")
    from cotrain.datasets.paths import data_home

    try:  # the split sizes are checked against the data where ../shared/data is present
        data_home()
        check_data = True
    except FileNotFoundError:
        check_data = "wine_quality" not in path.read_text() and "adult" not in path.stem
    config, runs = load_experiment(path, check_data=check_data)
    assert runs and config["name"] == path.stem


def test_audit_and_privacy_columns(tmp_path):
    text = (
        TINY.replace("seeds = [0, 1]", "seeds = [0]")
        .replace("rounds = 2", "rounds = 2\naudit = true")
        .replace(
            'method = { name = "local" }',
            'method = { name = "dp-fedct", privacy = { epsilon = 1.0 } }',
        )
    )
    out = run_experiment(write(tmp_path, text), tmp_path / "out", verbose=0)
    summary = pd.read_csv(out / "summary.csv").set_index("variant")
    assert 0.3 < summary.loc["FedCT trees", "vul"] < 1.0
    assert 0.3 < summary.loc["local", "vul"] < 1.0  # the dp-fedct variant, audited with noise
    # randomised response at record level, ε = 1 per round over all 200 released labels
    # (the trivial sensitivity), 2 rounds: the loss of 400 tiny steps concentrates, so the
    # exact composition at δ = 1e-5 is far below basic composition's 2ε
    from cotrain.privacy import RandomizedResponse, epsilon_spent

    expected = epsilon_spent([RandomizedResponse(epsilon=1.0).dp_event(10, 200)] * 2, 1e-5)
    assert summary.loc["local", "epsilon"] == pytest.approx(expected)
    assert 0.05 < expected < 1.0
    assert np.isnan(summary.loc["FedCT trees", "epsilon"])
    assert "label_epsilon" not in summary  # nothing label-level in this experiment
    table = (out / "summary.md").read_text()
    assert "ε per private record" in table


def test_variant_seeds_override_and_misplaced_keys(tmp_path):
    text = TINY.replace('label = "local"', 'label = "local"\nseeds = [7]')
    _, runs = load_experiment(write(tmp_path, text))
    assert [(r.variant, r.seed) for r in runs] == [
        ("FedCT trees", 0),
        ("FedCT trees", 1),
        ("local", 7),
    ]
    bad = TINY.replace('label = "local"', 'label = "local"\nname = "other"')
    with pytest.raises(ExperimentError, match="'name' cannot be set inside a"):
        load_experiment(write(tmp_path, bad, "bad.toml"))


def test_paper_dataset_labels_the_paper_columns_and_report_reads_them(tmp_path):
    text = TINY.replace("seeds = [0, 1]", 'paper_dataset = "FashionMNIST"\nseeds = [0, 1]')
    out = tmp_path / "out"
    args = ["run", str(write(tmp_path, text)), "--out", str(out), "--quiet"]
    assert main([*args, "--variant", "FedCT trees", "--seeds", "0"]) == 0
    head = (out / "summary.md").read_text().split("| variant |")[1].splitlines()[0]
    assert "| paper (FashionMNIST) | gap (shape only) |" in head
    # the labelled column is read back as the paper's number
    table = report([out / "summary.md"])
    assert table.splitlines()[2].endswith("| 0.500 |")
    bad = TINY.replace('label = "local"', 'label = "local"\npaper_dataset = "MNIST"')
    with pytest.raises(ExperimentError, match="'paper_dataset' cannot be set inside a"):
        load_experiment(write(tmp_path, bad, "bad.toml"))


def test_public_names_of_the_former_module_still_import():
    import cotrain.experiment as experiment

    names = (
        "BUNDLED CLIENT_KEYS LEARNERS METHODS PARTITIONS PRIVACY_KEYS SCHEMA SHARED "
        "ExperimentError Run client_learners client_parts load_data load_experiment "
        "make_learner markdown_table report run_experiment run_fingerprint run_one "
        "write_summary"
    ).split()
    assert all(hasattr(experiment, name) for name in names)
    assert set(names) <= set(experiment.__all__)


def test_method_registry_adds_a_method_in_one_entry(tmp_path, monkeypatch):
    from cotrain.experiment import METHODS, Method

    text = TINY.replace("seeds = [0, 1]", "seeds = [0]").replace(
        'method = { name = "local" }', 'method = { name = "local-twin" }'
    )
    path = write(tmp_path, text)
    with pytest.raises(ExperimentError, match=r"method\.name must be one of fedct, dp-fedct, dd"):
        load_experiment(path)
    monkeypatch.setitem(METHODS, "local-twin", Method(METHODS["local"].fit))
    out = run_experiment(path, tmp_path / "out", verbose=0)
    summary = pd.read_csv(out / "summary.csv")
    assert summary["method"].tolist() == ["fedct", "local-twin"]
    local = json.loads((out / "runs" / "local" / "seed-0" / "result.json").read_text())
    assert local["rounds"] == 1  # what LocalOnly records

    # a registered method's required [method] keys are checked when the file is read
    monkeypatch.setitem(METHODS, "local-twin", Method(METHODS["local"].fit, requires=("privacy",)))
    with pytest.raises(ExperimentError, match=r"local-twin needs \[method.privacy\]"):
        load_experiment(path)


def test_learner_that_cannot_be_checkpointed_runs_without_a_checkpoint(tmp_path):
    from sklearn.tree import DecisionTreeClassifier

    from cotrain.experiment import METHODS, MethodInput, client_parts, load_data

    class Unstorable(DecisionTreeClassifier):
        checkpoint_unsupported = "a test learner"

    _, runs = load_experiment(write(tmp_path, TINY))
    data = load_data(runs[0].config, 0)
    parts = client_parts(runs[0].config, data.y_labeled, 0)
    given = MethodInput(
        learners=[Unstorable(), DecisionTreeClassifier(), DecisionTreeClassifier()],
        X=[data.X_labeled[p] for p in parts],
        y=[data.y_labeled[p] for p in parts],
        X_public=data.X_public,
        y_public=None,
        eval_set=(data.X_test, data.y_test),
        method={"name": "fedct", "rounds": 2},
        seed=0,
        folder=tmp_path / "run",
    )
    model = METHODS["fedct"].fit(given)
    assert model.checkpoint_dir is None and len(model.history_) == 2
    assert not (tmp_path / "run" / "checkpoint").exists()
    given.learners = [DecisionTreeClassifier() for _ in range(3)]
    assert METHODS["fedct"].fit(given).checkpoint_dir == tmp_path / "run" / "checkpoint"


def test_record_level_teachers_and_label_level_columns_stay_apart(tmp_path):
    text = (
        TINY.replace("seeds = [0, 1]", "seeds = [0]")
        .replace(
            'method = { name = "local" }',
            'method = { name = "dp-fedct", privacy = { mechanism = "subsample_aggregate", '
            "n_teachers = 5, sigma = 30.0 } }",
        )
        .replace(
            'label = "FedCT trees"',
            'label = "FedCT trees"\nmethod = { name = "dp-fedct", privacy = { epsilon = 2.0, '
            'unit = "label" } }',
        )
    )
    out = run_experiment(write(tmp_path, text), tmp_path / "out", verbose=0)
    summary = pd.read_csv(out / "summary.csv").set_index("variant")
    from cotrain.privacy import SubsampleAndAggregate, epsilon_spent

    teachers = SubsampleAndAggregate(n_teachers=5, sigma=30.0).dp_event(10, 200)
    assert summary.loc["local", "epsilon"] == pytest.approx(epsilon_spent([teachers] * 2, 1e-5))
    assert np.isnan(summary.loc["local", "label_epsilon"])
    # the label-level run has no record-level ε at all, only its own column
    assert np.isnan(summary.loc["FedCT trees", "epsilon"])
    assert summary.loc["FedCT trees", "label_epsilon"] == pytest.approx(4.0, abs=0.01)
    table = (out / "summary.md").read_text()
    assert "ε per released label (no record guarantee)" in table


def test_teachers_summed_across_sites_spend_the_run_epsilon(tmp_path):
    pytest.importorskip("dp_accounting")
    text = TINY.replace("seeds = [0, 1]", "seeds = [0]").replace(
        'method = { name = "local" }',
        'method = { name = "dp-fedct", privacy = { mechanism = "secure_votes", '
        "n_teachers = 3, epsilon = 4.0 } }",
    )
    out = run_experiment(write(tmp_path, text), tmp_path / "out", verbose=0)
    summary = pd.read_csv(out / "summary.csv").set_index("variant")
    assert 3.9 <= summary.loc["local", "epsilon"] <= 4.0  # one release of |U| labels
    assert "label_epsilon" not in summary  # no label-level column: the ε is per record


def test_teachers_cannot_be_audited_through_the_client_model(tmp_path):
    text = TINY.replace("seeds = [0, 1]", "seeds = [0]").replace(
        'method = { name = "local" }',
        'method = { name = "dp-fedct", audit = true, privacy = { mechanism = '
        '"subsample_aggregate", n_teachers = 5, sigma = 30.0 } }',
    )
    with pytest.raises(ExperimentError, match="audit = true is not available"):
        run_experiment(write(tmp_path, text), tmp_path / "out", verbose=0)
