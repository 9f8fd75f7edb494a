"""`cotrain run` validates the whole file before anything is written, reads a
relative data path from the file's folder, takes CSVs without a header, runs a subset of
variants and seeds, trains every learner of a centralised variant, and keeps no
checkpoint of a finished run."""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_iris

from cotrain.cli import build_parser, main
from cotrain.experiment import (
    ExperimentError,
    ExperimentWarning,
    RunFailed,
    load_experiment,
    run_experiment,
)

SMALL = """\
name = "small"
seeds = [0, 1]

[data]
dataset = "breast_cancer"

[split]
n_public = 200
n_labeled = 60
n_test = 100
n_clients = 3

[method]
name = "fedct"
rounds = 1

[[clients]]
learner = "DT"
params = { max_depth = 3 }

[[variant]]
label = "FedCT"

[[variant]]
label = "local"
method = { name = "local" }
"""


def write(folder: Path, text: str, name: str = "exp.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def line_of(text: str, marker: str) -> int:
    return next(i for i, row in enumerate(text.splitlines(), 1) if marker in row)


def refused(tmp_path, capsys, text, marker, message):
    """The file is refused by load_experiment and by `cotrain run` (exit 2, one line, the
    marker's line, no traceback, no output folder)."""
    path = write(tmp_path, text)
    with pytest.raises(ExperimentError) as info:
        load_experiment(path)
    error = str(info.value)
    assert error.startswith(f"{path}:{line_of(text, marker)}:"), error
    assert message in error, error
    out = tmp_path / "refused-out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    return error


@pytest.mark.parametrize(
    ("old", "new", "marker", "message"),
    [
        ("rounds = 1", 'rounds = 1\nconsensus = "majorty"', "majorty", "unknown consensus"),
        ('label = "FedCT"', 'label = "FedCT"\nmethod = { consensus = "majorty" }', "majorty",
         "valid names are"),
        ("rounds = 1", "rounds = 1\nquorum = 0.8", "quorum",
         'quorum needs consensus = "qualified"'),
        ("rounds = 1", 'rounds = 1\nconsensus = "qualified"\nquorum = 1.5', "quorum",
         "quorum must be in (0, 1]"),
        ("rounds = 1", "rounds = 1\nparticipation = 1.5", "participation",
         "method.participation must be <= 1"),
        ("rounds = 1", 'rounds = 1\nshare = "logits"', "logits", "method.share must be"),
        ('method = { name = "local" }',
         'method = { name = "dp-fedct", privacy = { mechanism = "laplace" } }', "laplace",
         "mechanism must be one of"),
        ("n_public = 200", "n_public = 5000", "n_public", "but the data ('breast_cancer') has 569"),
        ("n_labeled = 60", "n_labeled = 400", "n_labeled", "has 569 rows"),
        ("n_clients = 3", "n_clients = 3\n", "n_clients", None),  # valid: control
        ("max_depth = 3", "max_depht = 3", "max_depht", "bad params"),
        ("max_depth = 3", 'max_depth = "3"', "max_depth", "bad params"),
        ('label = "local"', 'label = "FedCT" # again', "# again",
         "variant label 'FedCT' repeats 'FedCT'"),
        ('label = "local"', 'label = "FedCT!"', "FedCT!", "variant label 'FedCT!' repeats 'FedCT'"),
    ],
    ids=[
        "consensus",
        "variant-consensus",
        "quorum-without-qualified",
        "quorum-range",
        "participation",
        "share",
        "privacy-mechanism",
        "n_public",
        "n_labeled",
        "control",
        "param-name",
        "param-value",
        "duplicate-variant-label",
        "variant-labels-one-folder",
    ],
)  # fmt: skip
def test_values_are_checked_before_anything_runs(tmp_path, capsys, old, new, marker, message):
    assert old in SMALL
    text = SMALL.replace(old, new, 1)
    if message is None:
        load_experiment(write(tmp_path, text))
        return
    refused(tmp_path, capsys, text, marker, message)


def test_consensus_typo_lists_the_valid_names(tmp_path, capsys):
    text = SMALL.replace("rounds = 1", 'rounds = 1\nconsensus = "majorty"')
    error = refused(tmp_path, capsys, text, "majorty", "unknown consensus 'majorty'")
    assert "majority" in error and "qualified" in error


@pytest.mark.slow
def test_top_level_clients_are_checked_even_when_every_variant_overrides_them(tmp_path, capsys):
    overridden = SMALL.replace(
        'label = "FedCT"', 'label = "FedCT"\nclients = [{ learner = "RF", count = 3 }]'
    ).replace('label = "local"', 'label = "local"\nclients = [{ learner = "NB", count = 3 }]')
    typo = overridden.replace('learner = "DT"', 'learner = "DTT"')
    refused(tmp_path, capsys, typo, '"DTT"', "unknown learner 'DTT'")

    # a valid block that no run uses: a warning with its line, and the file runs
    path = write(tmp_path, overridden, "unused.toml")
    with pytest.warns(
        ExperimentWarning, match=rf"unused.toml:{line_of(overridden, '[[clients]]')}"
    ):
        _, runs = load_experiment(path)
    assert {r.config["clients"][0]["learner"] for r in runs} == {"RF", "NB"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the shipped files have no unused block
        for shipped in sorted((Path(__file__).parents[1] / "experiments").glob("*.toml")):
            load_experiment(shipped, check_data=False)
    # without a top-level block when every variant has its own: no warning at all
    lean = overridden.replace('[[clients]]\nlearner = "DT"\nparams = { max_depth = 3 }\n', "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_experiment(write(tmp_path, lean, "lean.toml"))
    out = tmp_path / "o"
    args = ["run", str(path), "--out", str(out), "--quiet", "--variant", "local", "--seeds", "0"]
    assert main(args) == 0
    assert "warning: " in capsys.readouterr().err


def iris_csv(folder: Path, header: bool = True) -> Path:
    X, y = load_iris(return_X_y=True)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    frame.insert(0, "species", y)
    path = folder / "iris.csv"
    frame.to_csv(path, index=False, header=header)
    return path


CSV = """\
name = "iris"
seeds = [0]
[data]
path = "data/iris.csv"
target = "species"
[split]
n_public = 60
n_labeled = 45
n_test = 45
n_clients = 3
[method]
name = "fedct"
rounds = 2
[[clients]]
learner = "DT"
"""


def test_relative_data_path_is_read_from_the_experiment_files_folder(tmp_path, capsys, monkeypatch):
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    iris_csv(project / "data")
    path = write(project, CSV)
    monkeypatch.chdir(tmp_path)  # not the file's folder
    out = run_experiment(path, tmp_path / "out", verbose=0)
    assert pd.read_csv(out / "summary.csv")["accuracy"].iloc[0] > 0.8

    missing = CSV.replace("data/iris.csv", "data/irises.csv")
    error = refused(tmp_path, capsys, missing, "irises", "data file not found")
    assert str(tmp_path / "data" / "irises.csv") in error  # the path it tried


def test_csv_without_header_takes_a_column_index(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    iris_csv(tmp_path / "data", header=False)
    text = CSV.replace('target = "species"', "target = 0\nheader = false")
    out = run_experiment(write(tmp_path, text), tmp_path / "out", verbose=0)
    assert pd.read_csv(out / "summary.csv")["accuracy"].iloc[0] > 0.8

    refused(tmp_path, capsys, text.replace("target = 0", "target = 7"), "target = 7",
            "has 5 columns")  # fmt: skip
    refused(tmp_path, capsys, text.replace("target = 0", 'target = "species"'), "species",
            "with header = false, target is a column index")  # fmt: skip
    # read as if it had a header row, the file has no column "species": the message
    # points at header = false
    refused(tmp_path, capsys, CSV, 'target = "species"', "needs header = false")


def test_centralized_trains_every_distinct_learner_of_the_federation(tmp_path):
    text = SMALL.replace(
        'method = { name = "local" }',
        'method = { name = "centralized" }\nclients = [{ learner = "DT", count = 2 }, '
        '{ learner = "NB", count = 1 }]',
    ).replace("seeds = [0, 1]", "seeds = [0]")
    _, runs = load_experiment(write(tmp_path, text))
    assert [r.variant for r in runs] == ["FedCT", "local (DT)", "local (NB)"]
    assert [r.group for r in runs] == ["FedCT", "local", "local"]
    out = run_experiment(write(tmp_path, text), tmp_path / "out", verbose=0, variants=["local"])
    summary = pd.read_csv(out / "summary.csv").set_index("variant")
    assert list(summary.index) == ["local (DT)", "local (NB)"]
    assert (summary["method"] == "centralized").all()
    # two different models on the same pooled rows: different accuracies, both well
    # above the majority class (~0.63)
    dt, nb = summary.loc["local (DT)", "accuracy"], summary.loc["local (NB)", "accuracy"]
    assert dt != nb and min(dt, nb) > 0.8
    assert "| local (NB) | centralized |" in (out / "summary.md").read_text()


def test_variant_and_seed_flags_run_a_subset(tmp_path, capsys):
    path = write(tmp_path, SMALL)
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet", "--variant", "local",
                 "--seeds", "1"]) == 0  # fmt: skip
    assert sorted(p.relative_to(out / "runs").as_posix() for p in out.glob("runs/*/*")) == [
        "local/seed-1"
    ]
    # the rest later, into the same folder: the summary has both variants
    assert main(["run", str(path), "--out", str(out), "--quiet", "--resume",
                 "--variant", "FedCT", "--variant", "local"]) == 0  # fmt: skip
    summary = pd.read_csv(out / "summary.csv")
    assert summary["variant"].tolist() == ["FedCT", "local"]
    assert summary["seeds"].tolist() == [2, 2]

    capsys.readouterr()
    assert main(["run", str(path), "--out", str(tmp_path / "o2"), "--variant", "loca"]) == 2
    err = capsys.readouterr().err
    assert "unknown variant 'loca'" in err and "'FedCT', 'local'" in err
    assert not (tmp_path / "o2").exists()
    assert main(["run", str(path), "--out", str(tmp_path / "o2"), "--seeds", "5"]) == 2
    assert "seeds of the selected variants: 0, 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", str(path), "--seeds", "0,x"])
    assert "expected integers separated by commas" in capsys.readouterr().err


def test_a_finished_run_keeps_no_checkpoint_and_an_interrupted_one_resumes(tmp_path, monkeypatch):
    from cotrain.persistence.checkpoint import CheckpointCallback

    text = SMALL.replace("rounds = 1", "rounds = 3").replace("seeds = [0, 1]", "seeds = [0]")
    path = write(tmp_path, text)
    reference = run_experiment(path, tmp_path / "reference", verbose=0, variants=["FedCT"])
    finished = reference / "runs" / "FedCT" / "seed-0"
    assert sorted(p.name for p in finished.iterdir()) == ["history.csv", "result.json"]
    expected = json.loads((finished / "result.json").read_text())["accuracy"]
    stamp = (finished / "result.json").stat().st_mtime_ns
    run_experiment(path, reference, resume=True, verbose=0)  # skips the finished run
    assert (finished / "result.json").stat().st_mtime_ns == stamp

    # a run that dies after round 2 keeps its checkpoint and resumes from round 3
    original, seen = CheckpointCallback.on_round_end, []

    def dying(self, loop, record):
        original(self, loop, record)
        seen.append(record.round)
        if record.round == 2 and dying.armed:
            raise RuntimeError("power cut")

    dying.armed = True
    monkeypatch.setattr(CheckpointCallback, "on_round_end", dying)
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet", "--variant", "FedCT"]) == 1
    run_dir = out / "runs" / "FedCT" / "seed-0"
    assert (run_dir / "checkpoint" / "LATEST").is_file()
    assert not (run_dir / "result.json").exists()
    dying.armed, seen[:] = False, []
    run_experiment(path, out, resume=True, verbose=0, variants=["FedCT"])
    assert seen == [3]  # rounds 1 and 2 came from the checkpoint
    resumed = json.loads((run_dir / "result.json").read_text())
    assert resumed["rounds"] == 3 and resumed["accuracy"] == expected
    assert not (run_dir / "checkpoint").exists()

    # --keep-checkpoints keeps the last one only
    kept = tmp_path / "kept"
    run_experiment(path, kept, verbose=0, variants=["FedCT"], keep_checkpoints=True)
    rounds = sorted(p.name for p in (kept / "runs/FedCT/seed-0/checkpoint").glob("round-*"))
    assert rounds == ["round-000003"]


def test_python_defaults_in_a_file_and_the_summary_says_what_each_variant_used(tmp_path):
    text = SMALL.replace("seeds = [0, 1]", "seeds = [0]") + textwrap.dedent(
        """
        [[variant]]
        label = "defaults"
        method = { name = "fedct", trust = "auto", consensus = "auto" }
        """
    )
    out = run_experiment(write(tmp_path, text), tmp_path / "out", verbose=0)
    summary = (out / "summary.md").read_text()
    assert "- FedCT: trust none, consensus MajorityVote" in summary
    assert "- defaults: trust auto, consensus DawidSkene" in summary
    assert "- local:" not in summary  # no consensus, no line
    assert 'set both to "auto" in [method]' in summary
    result = json.loads((out / "runs" / "defaults" / "seed-0" / "result.json").read_text())
    assert (result["trust"], result["consensus"]) == ("auto", "DawidSkene")


def test_ctrl_c_prints_one_line_with_the_resume_command(tmp_path, monkeypatch, capsys):
    import shlex

    from cotrain.persistence.checkpoint import CheckpointCallback

    text = SMALL.replace("rounds = 1", "rounds = 3").replace("seeds = [0, 1]", "seeds = [0]")
    path = write(tmp_path, text)
    original = CheckpointCallback.on_round_end

    def interrupted(self, loop, record):
        original(self, loop, record)
        if record.round == 2 and interrupted.armed:
            raise KeyboardInterrupt

    interrupted.armed = True
    monkeypatch.setattr(CheckpointCallback, "on_round_end", interrupted)
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet", "--variant", "FedCT"]) == 130
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("cotrain run: interrupted; finished runs and checkpoints are kept")
    command = shlex.split(err.split("continue with: ")[1])
    assert command == [
        "cotrain", "run", str(path), "--out", str(out), "--variant", "FedCT", "--resume",
    ]  # fmt: skip
    interrupted.armed = False
    assert main([*command[1:], "--quiet"]) == 0
    result = json.loads((out / "runs" / "FedCT" / "seed-0" / "result.json").read_text())
    assert result["rounds"] == 3


def test_a_run_that_fails_while_training_is_one_line_and_exit_1(tmp_path, capsys):
    # MultinomialNB refuses the standardised (negative) features only when fitted
    text = SMALL.replace('learner = "DT"', 'learner = "sklearn.naive_bayes.MultinomialNB"')
    text = text.replace("params = { max_depth = 3 }", "")
    path = write(tmp_path, text)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "run 'FedCT' seed 0 failed: RuntimeError: client 0 (MultinomialNB)" in err
    assert "Negative values" in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and "--traceback" in err
    with pytest.raises(RunFailed, match="Negative values") as info:  # --traceback: all of it
        main(["run", str(path), "--out", str(tmp_path / "o2"), "--quiet", "--traceback"])
    assert isinstance(info.value.__cause__, RuntimeError)


def test_cli_help_is_plain_text_and_every_option_says_what_it_does(capsys):
    parser = build_parser()

    def walk(p, name):
        yield name, p
        for action in p._actions:
            for sub_name, sub in (
                getattr(action, "choices", None).items()
                if isinstance(getattr(action, "choices", None), dict)
                else ()
            ):
                yield from walk(sub, f"{name} {sub_name}")

    seen = []
    for name, p in walk(parser, "cotrain"):
        text = p.format_help()
        assert "``" not in text and ":mod:" not in text, name
        for action in p._actions:
            if action.dest != "help" and action.option_strings:
                assert action.help, f"{name} {action.option_strings} has no help"
        seen.append(name)
    assert {"cotrain", "cotrain run", "cotrain demo", "cotrain report"} <= set(seen)
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "``" not in capsys.readouterr().out


def test_seed_list_parses_commas():
    assert build_parser().parse_args(["run", "e.toml", "--seeds", "0, 2,"]).seeds == [0, 2]
    assert np.array_equal(build_parser().parse_args(["run", "e.toml"]).seeds or [], [])


def test_a_library_warning_during_a_run_is_one_line(tmp_path, monkeypatch, capsys):
    import cotrain.experiment

    def warns(*args, **kwargs):
        message = "paper_split: a stratified split is impossible here"
        warnings.warn(message, UserWarning, stacklevel=2)
        raise ExperimentError("stop here")

    monkeypatch.setattr(cotrain.experiment, "run_experiment", warns)
    assert main(["run", str(write(tmp_path, SMALL)), "--quiet"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "cotrain run: warning: paper_split: a stratified split is impossible here"
    assert not any("warnings.warn" in line or ".py:" in line for line in err)
