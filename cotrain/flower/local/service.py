"""A site's SuperNode (with its warm worker), or a SuperLink, as one foreground command.

``cotrain site node`` and ``cotrain superlink`` run Flower's ``flower-supernode`` or
``flower-superlink`` the way a loaded machine needs (:mod:`cotrain.flower.local.task_start`:
task processes get ``--start-limit`` seconds to start instead of 30) and stop everything it
started when it ends: the SuperNode or SuperLink, the ``flower-superexec`` they start, the
``flwr-clientapp``/``flwr-serverapp`` task processes, and a site's warm worker. Flower's own
commands leave their ``flower-superexec`` running after a SIGTERM. The processes get
:func:`~cotrain.flower.local.flwr_cli.flower_environment` (this Python's ``bin`` first on
``PATH``, Flower's telemetry off, SuperExecs polling every 0.2 s unless set).

The command ends, stopping the rest, on Ctrl-C (SIGINT), SIGTERM or SIGHUP, or when one of
its processes exits. It writes its process id to a pid file (a site's ``node.pid`` in the
site folder; ``superlink.pid`` in the current folder unless ``--pid-file``), which
``cotrain stop`` reads: ``cotrain stop /srv/site-0`` from another terminal or a script.

Examples
--------
>>> node_pid_file("/srv/site-0/site.toml").as_posix()
'/srv/site-0/node.pid'
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from cotrain.flower.local.flwr_cli import flower_environment
from cotrain.flower.local.processes import pid_alive, wait_gone
from cotrain.flower.local.supervisor import ProcessGroup, exit_on_termination, restore_handlers
from cotrain.flower.local.task_start import launch_command
from cotrain.flower.worker import default_socket, worker_answers

__all__ = ["node_pid_file", "run_node", "run_services", "run_superlink", "stop"]

_TAG = "COTRAIN_SERVICE"  # environment variable marking the processes of one command
_PID_FILE = "node.pid"
#: seconds a site's warm worker may take to load its site and answer
WORKER_STARTUP = 300.0


def node_pid_file(site: str | Path) -> Path:
    """The pid file of a site's ``cotrain site node``: ``node.pid`` in its folder."""
    return default_socket(site).with_name(_PID_FILE)


def run_services(
    commands: Sequence[tuple[str, list[str]]], pid_file: Path, *, worker: Path | None = None
) -> int:
    """Run ``commands`` (``(name, argv)``) until one exits or a signal ends this process.

    With ``worker``, the first command is a site worker listening there: the others start
    once it answers. Whatever ends the run, every process started, with all the processes
    they started, is stopped before this returns.

    Returns
    -------
    int
        0 after Ctrl-C, SIGTERM or SIGHUP; 1 if a process exited by itself, or the worker
        did not answer within :data:`WORKER_STARTUP` seconds.
    """
    group = ProcessGroup(_TAG, f"{os.getpid()}-{time.time_ns()}")
    env = flower_environment(None)  # Flower finds its own commands even from a venv's path
    procs: list[subprocess.Popen[bytes]] = []
    _claim(pid_file)
    replaced = exit_on_termination()  # SIGTERM, SIGHUP: through the finally below
    try:
        for i, (name, cmd) in enumerate(commands):
            procs.append(group.start_attached(cmd, env=group.tag(dict(env), name)))
            if i == 0 and worker is not None and not _answering(worker, procs[0]):
                print(f"{name} did not answer on {worker}; stopping", file=sys.stderr)
                return 1
        names = [name for name, _ in commands]
        while True:
            for name, proc in zip(names, procs, strict=True):
                if proc.poll() is not None:
                    print(f"{name} exited with code {proc.returncode}; stopping", file=sys.stderr)
                    return 1
            time.sleep(0.5)
    except (KeyboardInterrupt, SystemExit):
        return 0
    finally:
        group.stop(procs[::-1])
        if _running(pid_file) == os.getpid():
            pid_file.unlink(missing_ok=True)
        restore_handlers(replaced)


def _claim(pid_file: Path) -> None:
    """Write this process's id to ``pid_file``, unless a running command holds it."""
    pid = _running(pid_file)
    if pid is not None and pid != os.getpid():
        raise FileExistsError(
            f"{pid_file}: process {pid} already runs this (cotrain stop {pid_file} ends it)"
        )
    pid_file.write_text(f"{os.getpid()}\n")


def _running(pid_file: Path) -> int | None:
    """The live ``cotrain`` process ``pid_file`` names, or None."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if pid_alive(pid) and b"cotrain" in _cmdline(pid) else None


def _answering(path: Path, proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + WORKER_STARTUP
    while time.monotonic() < deadline and proc.poll() is None:
        if worker_answers(path):
            return True
        time.sleep(0.2)
    return False


def run_node(
    site: str | Path, flower_args: Sequence[str], *, start_limit: float, worker: bool = True
) -> int:
    """``cotrain site node``: the site's warm worker, then its SuperNode (see module doc).

    ``flower_args`` go to ``flower-supernode`` (``--superlink``, ``--insecure`` or
    ``--root-certificates``, ``--auth-supernode-private-key``, ``--port``, ...); a
    ``--node-config`` naming the site is added unless they hold one.
    """
    toml = Path(site).expanduser().resolve()
    toml = toml / "site.toml" if toml.is_dir() else toml
    if not toml.is_file():
        raise FileNotFoundError(f"site: no site.toml at {toml}")
    args = list(flower_args)
    if "--node-config" not in args:
        args += ["--node-config", f'site="{toml}"']
    commands = [("SuperNode", launch_command("flower-supernode", args, start_limit))]
    socket = default_socket(toml)
    if worker:
        serve = [sys.executable, "-m", "cotrain.flower.worker", str(toml), "--socket", str(socket)]
        commands.insert(0, ("site worker", serve))
    return run_services(commands, node_pid_file(toml), worker=socket if worker else None)


def run_superlink(flower_args: Sequence[str], *, start_limit: float, pid_file: Path) -> int:
    """``cotrain superlink``: Flower's SuperLink with ``flower_args`` (see module doc)."""
    command = launch_command("flower-superlink", list(flower_args), start_limit)
    return run_services([("SuperLink", command)], pid_file)


def stop(target: str | Path, timeout: float = 60.0) -> str:
    """Stop the ``cotrain site node`` or ``cotrain superlink`` of ``target``.

    Parameters
    ----------
    target : str or Path
        A site (its folder or ``site.toml``) or a pid file.
    timeout : float, default=60
        Seconds to wait for the command to stop what it started.

    Returns
    -------
    str
        What was stopped.

    Raises
    ------
    ProcessLookupError
        If no such command runs (a stale pid file is removed).
    TimeoutError
        If it still runs after ``timeout`` seconds.
    """
    path = Path(target).expanduser()
    pid_file = path if path.suffix == ".pid" else node_pid_file(path)
    if not pid_file.is_file():
        raise ProcessLookupError(f"nothing to stop: no pid file at {pid_file}")
    pid = _running(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        raise ProcessLookupError(f"nothing to stop: {pid_file} names no running command")
    os.kill(pid, signal.SIGTERM)
    wait_gone([pid], timeout=timeout)
    if pid_alive(pid):
        raise TimeoutError(f"process {pid} still runs {timeout:g} s after SIGTERM")
    return f"stopped process {pid} ({pid_file}) and everything it started"


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b"cotrain"  # no /proc: trust the pid file
