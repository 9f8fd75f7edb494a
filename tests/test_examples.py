"""The runnable examples still run (tiny settings; the real runs are in benchmarks/results)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))


def test_compare_methods_runs_every_method(examples_on_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("xgboost")
    import compare_methods

    compare_methods.main(
        [
            "--seeds",
            "1",
            "--rounds",
            "2",
            "--fedavg-rounds",
            "2",
            "--max-epochs",
            "3",
            "--epochs-per-round",
            "1",
        ]
    )
    out = capsys.readouterr().out
    for method in [
        "FedCT",
        "DD",
        "FedAvg",
        "PATE",
        "local only",
        "centralised",
        "mixed federation",
    ]:
        assert method in out
    sys.modules.pop("compare_methods", None)
