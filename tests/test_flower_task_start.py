"""The task start-up limit set for Flower's SuperLink and SuperNode processes."""

from __future__ import annotations

import importlib

import pytest

pytest.importorskip("flwr")

from cotrain.flower.local import task_start
from cotrain.flower.local.task_start import (
    FLOWER_START_LIMIT,
    check_start_limit,
    launch_command,
    set_start_limit,
)

STATE = [importlib.import_module(name) for name in task_start._STATE_MODULES]


def test_flower_still_reads_its_start_limit_where_it_is_set():
    # a Flower release that moves the limit makes the launcher refuse: this says so first
    assert all(module.HEARTBEAT_DEFAULT_INTERVAL == FLOWER_START_LIMIT for module in STATE)


def test_set_start_limit_sets_it_in_every_task_state(monkeypatch):
    for module in STATE:  # restored after the test
        monkeypatch.setattr(module, "HEARTBEAT_DEFAULT_INTERVAL", module.HEARTBEAT_DEFAULT_INTERVAL)
    set_start_limit(300)
    assert [module.HEARTBEAT_DEFAULT_INTERVAL for module in STATE] == [300.0, 300.0]


def test_a_flower_without_the_limit_is_refused(monkeypatch):
    monkeypatch.delattr(STATE[0], "HEARTBEAT_DEFAULT_INTERVAL")
    with pytest.raises(RuntimeError, match="cannot be raised"):
        set_start_limit(300)


@pytest.mark.parametrize(
    ("value", "error"), [(29, ValueError), (float("inf"), ValueError), ("300", TypeError),
                         (True, TypeError)],
)  # fmt: skip
def test_bad_start_limits_are_refused_by_name(value, error):
    with pytest.raises(error, match="start_limit"):
        check_start_limit(value)


def test_the_launcher_runs_only_flowers_stateful_commands():
    cmd = launch_command("flower-superlink", ["--insecure"], 90)
    assert cmd[1:] == ["-m", "cotrain.flower.local.task_start", "--start-limit", "90",
                       "flower-superlink", "--insecure"]  # fmt: skip
    with pytest.raises(ValueError, match="command must be one of"):
        launch_command("flwr", [], 90)


def test_the_launcher_refuses_a_limit_below_flowers_own(capsys):
    with pytest.raises(SystemExit) as exit_:
        task_start.main(["--start-limit", "5", "flower-supernode", "--help"])
    assert exit_.value.code == 2
    assert "start_limit must be a number of seconds >= 30" in capsys.readouterr().err
