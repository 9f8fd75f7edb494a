"""The runnable examples still run (tiny settings; the real runs are in benchmarks/results)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
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


def test_finetune_gpt2_runs_offline(examples_on_path, capsys):
    pytest.importorskip("transformers")
    from cotrain.datasets import data_home

    try:
        data_home()
    except FileNotFoundError:
        pytest.skip("shared data folder absent (set COTRAIN_DATA to run this test)")
    import finetune_gpt2

    table = finetune_gpt2.main(
        [
            "--clients",
            "3",
            "--labeled",
            "8",
            "--public",
            "12",
            "--test",
            "10",
            "--rounds",
            "1",
            "--max-length",
            "32",
            "--max-epochs",
            "1",
            "--lora",
            "--threads",
            "1",
            "--no-progress",
        ]
    )
    assert table["method"].tolist() == ["FedCT", "FedAvg"]
    # FedCT: 12 labels at 1 bit + 10-byte header; FedAvg: only LoRA adapters and head
    assert table["up bytes/round/client"].iloc[0] == 12
    assert table["up bytes/round/client"].iloc[1] > 1000
    sys.modules.pop("finetune_gpt2", None)


def test_flower_prepare_sites_writes_three_loadable_sites(monkeypatch, tmp_path, capsys):
    pytest.importorskip("flwr")
    monkeypatch.syspath_prepend(str(EXAMPLES / "flower"))
    import prepare_sites

    from cotrain.flower.site import load_site, pool_fingerprint

    prepare_sites.main(["--out", str(tmp_path), "--rounds", "2"])
    sites = [load_site(tmp_path / f"site-{i}") for i in range(3)]
    assert [s.client_id for s in sites] == [0, 1, 2]
    assert [type(s.estimator).__name__ for s in sites] == [
        "DecisionTreeClassifier",
        "LogisticRegression",
        "KNeighborsClassifier",
    ]
    assert sum(len(s.y) for s in sites) == 85  # the FedCT breast-cancer split
    pool = np.load(tmp_path / "public.npy")
    assert all(s.pool_hash == pool_fingerprint(pool) for s in sites)
    assert np.load(tmp_path / "in_process_consensus.npy").shape == (370,)
    assert "in-process run: test accuracy" in capsys.readouterr().out


def test_robustness_quick_prints_the_table(examples_on_path, capsys):
    import robustness

    results = robustness.main(["--quick", "--n-jobs", "1"])
    out = capsys.readouterr().out
    assert "| hostile clients | majority | qualified (0.9) | trimmed (0.2) | reputation |" in out
    assert "reputation + trimmed" in out
    assert "| random, 20% |" in out and "| crash, 20% |" in out
    assert len(results) == 3 * 5  # (all honest, random, crash) x 5 rules
    assert all(0.5 < acc <= 1.0 for acc in results.values())
    sys.modules.pop("robustness", None)
