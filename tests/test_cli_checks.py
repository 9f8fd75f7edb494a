"""Every option and path of `cotrain demo` and `cotrain run` is checked before anything runs:
exit status 2 and one line of reason (after the subcommand's usage), no traceback; a
mistyped subcommand, variant or plot format gets a suggestion."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cotrain import demo
from cotrain.cli import main
from cotrain.experiment import ExperimentError, run_experiment

EXPERIMENT = """\
name = "small"
seeds = [0]
[data]
dataset = "breast_cancer"
[split]
n_public = 200
n_labeled = 60
n_test = 100
n_clients = 3
[method]
name = "local"
[[clients]]
learner = "DT"
[[variant]]
label = "local"
"""


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if the demo or a run starts training."""

    def refuse(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(demo, "run_seed", refuse)
    monkeypatch.setattr("cotrain.experiment.run.run_one", refuse)


def refused(capsys, argv: list[str]) -> str:
    """Exit status 2; the last line of stderr (the reason), with no traceback."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--seeds", "0"], "argument --seeds: must be >= 1, got 0"),
        (["--rounds", "0"], "argument --rounds: must be >= 1, got 0"),
        (["--rounds", "ten"], "argument --rounds: expected an integer >= 1, got 'ten'"),
        (
            ["--n-jobs", "0"],
            "argument --n-jobs: must be a number of workers (1, 2, ...) or -1 for all cores, got 0",
        ),
    ],
    ids=["seeds", "rounds", "rounds-not-a-number", "n-jobs"],
)
def test_demo_numbers_are_refused_with_the_demos_usage(capsys, no_training, argv, reason):
    with pytest.raises(SystemExit) as info:
        main(["demo", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: cotrain demo ")  # not the top-level usage
    assert err.strip().splitlines()[-1] == f"cotrain demo: error: {reason}"


def test_demo_plot_paths_are_checked_before_training(tmp_path, capsys, no_training):
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    cases = [
        (tmp_path / "missing" / "plot.png", "the folder {p.parent} does not exist"),
        (afile / "plot.png", "the folder {p.parent} is a file"),
        (tmp_path, "{p} is a folder: give a file name, e.g. {p}/plot.png"),
        (tmp_path / "convergence", "give the file an image extension, e.g. convergence.png"),
    ]
    for path, reason in cases:
        line = refused(capsys, ["demo", "--plot", str(path)])
        assert line.startswith("cotrain demo: error: argument --plot: "), line
        assert reason.format(p=path) in line, line
    assert not (tmp_path / "convergence").exists()


def test_demo_plot_format_is_one_matplotlib_writes(tmp_path, capsys, no_training):
    pytest.importorskip("matplotlib")
    line = refused(capsys, ["demo", "--plot", str(tmp_path / "plot.txt")])
    assert "cannot save a plot as '.txt' (formats: " in line and ".png" in line and ".pdf" in line
    line = refused(capsys, ["demo", "--plot", str(tmp_path / "plot.pgn")])
    assert "cannot save a plot as '.pgn'; did you mean '.png'?" in line
    assert not list(tmp_path.iterdir())  # the check leaves nothing behind


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder this process cannot write in (skips where there is none to be had)."""
    if os.geteuid() != 0:
        folder = tmp_path / "locked"
        folder.mkdir()
        folder.chmod(0o500)
        return folder
    probe = Path("/sys/cotrain-probe")  # root writes everywhere but in sysfs
    try:
        probe.touch()
    except OSError:
        return probe.parent
    probe.unlink()
    pytest.skip("no unwritable folder for root here")


def test_unwritable_plot_and_out_are_refused(tmp_path, capsys, no_training):
    pytest.importorskip("matplotlib")
    locked = unwritable_folder(tmp_path)
    line = refused(capsys, ["demo", "--plot", str(locked / "plot.png")])
    assert f"argument --plot: {locked / 'plot.png'}: cannot write it: " in line
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT)
    line = refused(capsys, ["run", str(path), "--out", str(locked / "results")])
    assert f"argument --out: {locked / 'results'}: cannot make it in {locked}: " in line


def test_run_out_that_is_a_file_is_refused_before_anything_runs(
    tmp_path, capsys, monkeypatch, no_training
):
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT)
    afile = tmp_path / "results.txt"
    afile.write_text("keep me")
    line = refused(capsys, ["run", str(path), "--out", str(afile)])
    assert line == (
        f"cotrain run: error: argument --out: {afile} is a file, not a folder: give a folder "
        "for the results (made if missing)"
    )
    line = refused(capsys, ["run", str(path), "--out", str(afile / "sub")])
    assert line.endswith(f"{afile / 'sub'}: {afile} is a file, so no folder can be made there")
    assert afile.read_text() == "keep me"
    # the library call checks it too, and the default folder where --out is not given
    with pytest.raises(ExperimentError, match="is a file, not a folder"):
        run_experiment(path, afile, verbose=0)
    (tmp_path / "results").write_text("")  # results/<name> cannot be made under a file
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(path), "--quiet"]) == 2
    assert "results folder results/small: results is a file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["dmeo"], "invalid choice: 'dmeo' (choose from 'demo', 'run', 'report', 'site', "
         "'superlink', 'stop'); "
         "did you mean 'demo'?"),
        (["rnu", "x.toml"], "did you mean 'run'?"),
        (["site", "sreve", "x"], "did you mean 'serve'?"),
    ],
    ids=["demo", "run", "site-serve"],
)  # fmt: skip
def test_a_mistyped_subcommand_gets_a_suggestion(capsys, argv, suggestion):
    assert suggestion in refused(capsys, argv)


def test_a_mistyped_variant_gets_a_suggestion(tmp_path, capsys, no_training):
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT)
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--variant", "lcoal"]) == 2
    err = capsys.readouterr().err
    assert "unknown variant 'lcoal'; did you mean 'local'?; the file's variants: 'local'" in err
    assert not (tmp_path / "o").exists()


def test_demo_names_a_missing_extra_with_exit_2(capsys, monkeypatch, no_training):
    missing = demo.Federation("DT", list, (("no_such_module_x", "x"),), None, "")
    monkeypatch.setattr(demo, "DEMO", missing)
    line = refused(capsys, ["demo", "--quiet"])
    assert line == (
        "cotrain demo: error: the demo's DT clients need no_such_module_x: pip install 'cotrain[x]'"
    )


def test_a_warning_repeated_by_every_variant_is_printed_once(tmp_path, capsys, monkeypatch):
    import warnings

    def run_one(*args, **kwargs):  # as two runs would: the same words from two places
        warnings.warn("a stratified split is impossible here", UserWarning, stacklevel=1)
        warnings.warn("a stratified split is impossible here", UserWarning, stacklevel=2)
        warnings.warn("another matter", UserWarning, stacklevel=1)
        raise KeyboardInterrupt  # no training

    monkeypatch.setattr("cotrain.experiment.run.run_one", run_one)
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    assert main(["run", str(tmp_path / "exp.toml"), "--out", str(tmp_path / "out")]) == 130
    err = capsys.readouterr().err
    assert err.count("warning: a stratified split is impossible here") == 1
    assert err.count("warning: another matter") == 1


def test_the_runner_shows_the_librarys_setup_warnings_but_not_learner_summaries(tmp_path, capsys):
    teachers = EXPERIMENT.replace(
        'name = "local"',
        'name = "dp-fedct"\nrounds = 1\n'
        'privacy = { mechanism = "subsample_aggregate", n_teachers = 30, sigma = 20.0 }',
    )  # 60 labelled rows over 3 clients: 20 rows each, fewer than 30 teachers
    (tmp_path / "exp.toml").write_text(teachers)
    assert main(["run", str(tmp_path / "exp.toml"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: n_teachers=30 cannot be made from the private rows") == 1
    # a 2-row teacher often holds one class: its learner's warnings stay in the history
    assert "during fit:" not in err
