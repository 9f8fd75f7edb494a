"""The getting-started page's code works as printed: its own-CSV walk-through (experiment
file and Python) runs on a CSV made from scikit-learn's breast cancer data (569 rows, the
sizes the page uses), and its Python example gives the numbers written beside it."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "getting_started.md"


def blocks(language: str) -> list[str]:
    """The page's fenced code blocks in ``language``, in order."""
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)


@pytest.fixture
def my_data(tmp_path, monkeypatch):
    """``mydata.csv`` as the page describes it: a header row, the label in ``target``."""
    from sklearn.datasets import load_breast_cancer

    frame = load_breast_cancer(as_frame=True).frame
    frame.to_csv(tmp_path / "mydata.csv", index=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_page_has_the_blocks_this_test_runs():
    assert len(blocks("toml")) == 1
    assert len(blocks("python")) == 2


def test_experiment_file_runs_as_printed(my_data):
    pytest.importorskip("xgboost")
    from cotrain.cli import main

    (my_data / "my_experiment.toml").write_text(blocks("toml")[0])
    command = next(b for b in blocks("bash") if b.startswith("cotrain run")).split()
    assert command[:3] == ["cotrain", "run", "my_experiment.toml"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(command[1:]) in (0, None)
    out = my_data / "results" / "my_experiment"
    summary = (out / "summary.md").read_text()
    assert "FedCT" in summary and "local only" in summary
    assert "- FedCT: trust none, consensus MajorityVote" in summary
    assert "- Python defaults: trust auto, consensus DawidSkene" in summary
    assert (out / "summary.csv").exists()


def test_python_csv_walkthrough_runs_as_printed(my_data):
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(blocks("python")[1], "getting_started.md", "exec"), namespace)
    trainer = namespace["trainer"]
    assert len(trainer.history_) == 5
    assert trainer.history_[-1].mean_accuracy > 0.85  # breast cancer, 50 rows a client


@pytest.mark.slow
def test_python_example_gives_the_numbers_on_the_page(tmp_path, monkeypatch):
    pytest.importorskip("xgboost")
    pytest.importorskip("imodels")
    monkeypatch.chdir(tmp_path)
    code = blocks("python")[0]
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "getting_started.md", "exec"), namespace)
    local, trainer = namespace["local"], namespace["trainer"]
    data = namespace["data"]
    assert round(local.history_[0].mean_accuracy, 3) == 0.893
    assert round(trainer.history_[-1].mean_accuracy, 3) == 0.891
    assert round(trainer.score(data.X_test, data.y_test), 3) == 0.921
    printed = re.search(r"alone:\s+(\{.*?\})", code).group(1)
    assert {k: round(v, 3) for k, v in local.history_[0].client_accuracy.items()} == eval(printed)
    printed = re.search(r"co-trained:\s+(\{.*?\})", code).group(1)
    assert {k: round(v, 3) for k, v in trainer.history_[-1].client_accuracy.items()} == eval(
        printed
    )
