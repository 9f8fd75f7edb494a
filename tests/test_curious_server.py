"""A deviating ServerApp of our own against a private site on real Flower processes
(``benchmarks/curious_server.py``: a SuperLink, two SuperNodes and their warm site workers on
one site folder, every process on this machine).

The server repeats a round, names other label spaces and another pool, asks rounds out of
order, has every SuperNode and worker SIGKILLed while a round is answered and asks it again
after the restart, sends two run tokens' rounds at once, replays, drops, and starts a new
run. What it received must cost exactly what the site's own ledger says, and no more than the
budget allows.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

pytest.importorskip("flwr")
pytest.importorskip("tomli_w")
pytest.importorskip("dp_accounting")

pytestmark = pytest.mark.slow


def test_a_deviating_serverapp_gets_no_more_than_the_site_ledger_says(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    curious_server = importlib.import_module("benchmarks.curious_server")
    result = curious_server.main(
        ["--repeats", "4", "--nodes", "2", "--releases", "8", "--keep", str(tmp_path)]
    )
    phases = result["phases"]
    # every distinct release the server holds is in the site's ledger, and nothing else
    assert result["transcript_epsilon"] == pytest.approx(result["site_epsilon"], abs=1e-6)
    assert result["releases"] == 8 and result["refused_after_budget"]
    assert phases["repeat"]["new_releases"] == 1  # the same round again: the same bytes
    assert phases["other classes"]["labels"] == 0 and result["other_classes_identical"]
    assert phases["other pool"]["labels"] == 0
    assert phases["out of order"]["new_releases"] == 3
    assert phases["sigkill"]["new_releases"] == 1  # asked again after the restart: once
    assert phases["replay"]["new_releases"] == 0
    # two run tokens at once and the dropped rounds share what the budget had left: 3
    raced = phases["two servers"]["new_releases"] + phases["dropped"]["new_releases"]
    assert raced == 3
    assert phases["new run"]["budget"] == 1 and phases["new run"]["labels"] == 0
