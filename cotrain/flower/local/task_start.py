"""Flower's SuperLink and SuperNode with a task start-up limit a loaded machine can meet.

Flower starts a fresh process for every task: a ``flwr-clientapp`` for every message at a
SuperNode, a ``flwr-serverapp`` for every run at the SuperLink. The process holding the task
state gives it 30 s (``flwr.common.constant.HEARTBEAT_DEFAULT_INTERVAL``) from the moment the
task is claimed to the process's first call. On a loaded machine a Python process can take
longer than that to start; Flower then withdraws its token (the process fails with "Runtime
task-token authentication failed", HTTP 401), puts the task back and starts another process,
which is as slow, every 30 s, until the server's round timeout gives up on the site.

Flower does not expose that limit. ``python -m cotrain.flower.local.task_start
--start-limit SECONDS COMMAND [ARGS...]`` sets it in the process that keeps the task state,
then runs Flower's own ``COMMAND`` (``flower-superlink`` or ``flower-supernode``) in that
process, with ``ARGS`` unchanged. The limit is the name Flower's task state reads when a task
is claimed (in its in-memory and SQL state modules); a running task's heartbeat deadline is
twice the same number, so a task process killed mid-task is noticed after ``2 ×
start_limit`` seconds instead of 60 (the server's round timeout still bounds a round). If a
Flower release no longer has that name, the launcher refuses to start rather than run with
the old limit.

:class:`cotrain.flower.local.localhost.LocalFederation` and ``cotrain site node`` start
SuperLinks and SuperNodes this way (``start_limit``, default :data:`DEFAULT_START_LIMIT`).

Examples
--------
>>> cmd = launch_command("flower-supernode", ["--insecure"], 300)
>>> cmd[1:6]
['-m', 'cotrain.flower.local.task_start', '--start-limit', '300', 'flower-supernode']
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

__all__ = [
    "DEFAULT_START_LIMIT",
    "FLOWER_START_LIMIT",
    "check_start_limit",
    "launch_command",
    "main",
    "set_start_limit",
]

#: seconds a task process may take to start, as set here (five minutes: a Python process
#: importing Flower on a 2-core machine busy with a test suite took 15-40 s)
DEFAULT_START_LIMIT = 300.0
#: Flower's own limit, in seconds (``HEARTBEAT_DEFAULT_INTERVAL``)
FLOWER_START_LIMIT = 30.0
#: the modules of Flower's task state, and the name they read the limit from
_STATE_MODULES = (
    "flwr.supercore.corestate.in_memory_corestate",
    "flwr.supercore.corestate.sql_corestate",
)
_LIMIT_NAME = "HEARTBEAT_DEFAULT_INTERVAL"
_MODULE = "cotrain.flower.local.task_start"  # run with python -m
#: the Flower commands that keep task state
COMMANDS = ("flower-superlink", "flower-supernode")


def check_start_limit(seconds: object) -> float:
    """``seconds`` as a float, or a ``ValueError``/``TypeError`` if it is not >= 30.

    Examples
    --------
    >>> check_start_limit(20)
    Traceback (most recent call last):
    ...
    ValueError: start_limit must be a number of seconds >= 30 (Flower's own limit), got 20
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"start_limit must be a number of seconds, got {seconds!r}")
    if not FLOWER_START_LIMIT <= seconds < float("inf"):
        raise ValueError(
            f"start_limit must be a number of seconds >= {FLOWER_START_LIMIT:g} (Flower's "
            f"own limit), got {seconds!r}"
        )
    return float(seconds)


def set_start_limit(seconds: float) -> None:
    """Give every task process started from this process ``seconds`` to start.

    Call it in the process that runs the SuperLink or SuperNode, before it starts.

    Parameters
    ----------
    seconds : float
        At least Flower's own 30 s.

    Raises
    ------
    ValueError
        If ``seconds`` is below 30 or not finite (``TypeError`` if not a number).
    RuntimeError
        If Flower's task state no longer reads the limit from the name set here.
    """
    seconds = check_start_limit(seconds)
    for name in _STATE_MODULES:
        module = importlib.import_module(name)
        if not isinstance(getattr(module, _LIMIT_NAME, None), int | float):
            raise RuntimeError(
                f"{name} has no {_LIMIT_NAME}: this Flower release keeps its task start-up "
                "limit elsewhere, so it cannot be raised; run Flower's command directly"
            )
        setattr(module, _LIMIT_NAME, seconds)


def launch_command(command: str, args: Sequence[str], start_limit: float) -> list[str]:
    """The command line that runs Flower's ``command`` with ``start_limit``.

    Parameters
    ----------
    command : {"flower-superlink", "flower-supernode"}
        Flower's command.
    args : sequence of str
        Its arguments.
    start_limit : float
        Seconds a task process may take to start.

    Returns
    -------
    list of str
        ``python -m cotrain.flower.local.task_start --start-limit S command args...``.
    """
    if command not in COMMANDS:
        raise ValueError(f"command must be one of {COMMANDS}, got {command!r}")
    return [sys.executable, "-m", _MODULE, "--start-limit", f"{start_limit:g}", command, *args]


def main(argv: Sequence[str] | None = None) -> int:
    """Set the start-up limit, then run Flower's command in this process."""
    parser = argparse.ArgumentParser(
        prog="python -m cotrain.flower.local.task_start",
        description="Run flower-superlink or flower-supernode with a longer task start-up limit.",
    )
    parser.add_argument(
        "--start-limit",
        type=float,
        default=DEFAULT_START_LIMIT,
        metavar="SECONDS",
        help=f"seconds a task process may take to start (default {DEFAULT_START_LIMIT:g}; "
        f"Flower's own: {FLOWER_START_LIMIT:g})",
    )
    parser.add_argument("command", choices=COMMANDS)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the command's own arguments")
    options = parser.parse_args(argv)
    scripts = list(entry_points(group="console_scripts", name=options.command))
    if not scripts:
        parser.error(f'{options.command} not found: pip install "cotrain[flower]"')
    try:
        set_start_limit(options.start_limit)
    except (ValueError, RuntimeError, ImportError) as err:
        parser.error(str(err))
    script = scripts[0]
    sys.argv = [options.command, *options.args]
    result = script.load()()
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
