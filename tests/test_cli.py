"""The `cotrain` command line and the demo it runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cotrain.cli import main


@pytest.mark.slow
def test_demo_prints_the_comparison_table_and_saves_a_plot(tmp_path, capsys):
    pytest.importorskip("xgboost")
    pytest.importorskip("imodels")
    pytest.importorskip("matplotlib")
    plot = tmp_path / "convergence.png"
    assert main(["demo", "--seeds", "1", "--rounds", "2", "--quiet", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    for text in ["FedCT (after last round)", "local only", "centralised", "bytes up/round"]:
        assert text in out
    assert plot.stat().st_size > 10_000


def test_demo_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit) as info:
        main(["demo", "--seeds", "0"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    # the demo's own usage, not the top-level one, and one line of reason
    assert err.startswith("usage: cotrain demo ")
    assert (
        err.strip().splitlines()[-1] == "cotrain demo: error: argument --seeds: must be >= 1, got 0"
    )


@pytest.mark.slow
def test_console_script_is_installed():
    result = subprocess.run(
        [sys.executable, "-m", "cotrain.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.startswith("cotrain ")


@pytest.mark.slow
def test_import_cotrain_does_not_import_heavy_libraries():
    code = (
        "import sys, cotrain, consensus, learners; "
        "heavy = {'xgboost', 'imodels', 'matplotlib', 'torch'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
