"""Starting local processes and stopping them with everything they started.

:class:`ProcessGroup` starts processes in their own sessions, tagged in their environment,
remembers every process id seen in their trees, and kills those trees, re-parented
leftovers included; :func:`wait_until` waits for a started process to be ready, watching
its log; :func:`exit_on_termination` makes SIGTERM and SIGHUP end the driver through its
``finally`` clauses, so that what it started stops with it.
:class:`cotrain.flower.local.localhost.LocalFederation` runs its SuperLink, SuperNodes and
``flwr run`` processes in one group.

Only the standard library is used.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from cotrain.flower.local.logs import tail
from cotrain.flower.local.processes import (
    descendants,
    kill_tree,
    pid_alive,
    process_table,
    tagged,
    wait_gone,
)

__all__ = ["ProcessGroup", "exit_on_termination", "restore_handlers", "wait_until"]

T = TypeVar("T")

#: the signals a terminal, ``timeout`` or a service manager sends to end a driver
_TERMINATION = (signal.SIGTERM, signal.SIGHUP)


def exit_on_termination() -> dict[int, Any]:
    """Make SIGTERM and SIGHUP raise :class:`SystemExit` (status 128 + the signal) where
    Python would end the process at once, skipping every ``finally`` and ``__exit__``: a
    driver killed by ``timeout`` then stops what it started. Only in the main thread, and
    only for a signal still at its default action (a program's own handler stays).

    Returns
    -------
    dict
        The handlers replaced, for :func:`restore_handlers`.

    Examples
    --------
    >>> before = {sig: signal.signal(sig, signal.SIG_DFL) for sig in _TERMINATION}
    >>> replaced = exit_on_termination()
    >>> sorted(replaced) == sorted(_TERMINATION), signal.getsignal(signal.SIGTERM) is _exit
    (True, True)
    >>> restore_handlers(replaced); signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    True
    >>> for sig, handler in before.items():
    ...     _ = signal.signal(sig, handler)
    """
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {
        sig: signal.signal(sig, _exit)
        for sig in _TERMINATION
        if signal.getsignal(sig) == signal.SIG_DFL
    }


def restore_handlers(replaced: dict[int, Any]) -> None:
    """Put back the handlers :func:`exit_on_termination` replaced."""
    for sig, handler in replaced.items():
        if signal.getsignal(sig) is _exit:
            signal.signal(sig, handler)


def _exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def wait_until(
    ready: Callable[[], T],
    proc: subprocess.Popen[bytes],
    *,
    name: str,
    deadline: float,
    failure: str,
    log: Callable[[], str],
) -> T:
    """Poll ``ready()`` every 0.1 s until it is true while ``proc`` runs; return its value.

    Parameters
    ----------
    ready : callable
        Returns something true once the process is ready (e.g. a regex match on its log).
    proc : subprocess.Popen
        The process waited for.
    name : str
        Its name in error messages.
    deadline : float
        :func:`time.monotonic` time after which to give up.
    failure : str
        What went wrong when the deadline passes (e.g. ``"did not serve on ... within 60 s"``).
    log : callable
        Returns the process's log; its tail ends the error message.

    Returns
    -------
    object
        The first true value of ``ready()``.

    Raises
    ------
    RuntimeError
        ``"<name> exited with code <c>"`` if ``proc`` exits first, ``"<name> <failure>"``
        after the deadline; both followed by the log's tail.

    Examples
    --------
    >>> import subprocess, time
    >>> proc = subprocess.Popen(["sleep", "5"])
    >>> wait_until(lambda: 42, proc, name="sleep", deadline=time.monotonic() + 1,
    ...            failure="never ready", log=str)
    42
    >>> proc.kill(), proc.wait()
    (None, -9)
    """
    while True:
        value = ready()
        if value:
            return value
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with code {proc.returncode}:\n" + tail(log()))
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} {failure}:\n" + tail(log()))
        time.sleep(0.1)


class ProcessGroup:
    """Processes started in their own sessions and tagged, stopped with all they started.

    Every process started here has the environment variable ``variable`` set to
    ``"<token>/<role>/"``; children inherit it, so the group finds them (Linux) even after
    their parent died and they were re-parented. The group remembers every process id it
    saw in its trees (:attr:`pids`).

    Parameters
    ----------
    variable : str
        Name of the tagging environment variable.
    token : str
        Identifies this group among others using the same variable.

    Attributes
    ----------
    variable : str
        As given.
    token : str
        As given.

    Examples
    --------
    >>> import os
    >>> group = ProcessGroup("COTRAIN_EXAMPLE_GROUP", f"{os.getpid()}-example")
    >>> env = group.tag(dict(os.environ), "sleeper")
    >>> proc = group.start_piped(["sleep", "30"], env=env, cwd=".")
    >>> group.live([proc]) == [proc.pid]
    True
    >>> group.stop([proc])
    >>> proc.returncode, group.live([proc])
    (-9, [])
    """

    def __init__(self, variable: str, token: str) -> None:
        self.variable = variable
        self.token = token
        self._pids: set[int] = set()

    @property
    def pids(self) -> set[int]:
        """Every process id seen in the group's trees so far (a copy)."""
        return set(self._pids)

    def tag(self, env: dict[str, str], role: str) -> dict[str, str]:
        """Set the group's tag for ``role`` in ``env`` and return ``env``."""
        env[self.variable] = f"{self.token}/{role}/"
        return env

    def start_logged(
        self, cmd: list[str], log: Path, *, env: dict[str, str], cwd: str | Path
    ) -> subprocess.Popen[bytes]:
        """Start ``cmd`` in a new session, stdin closed, stdout and stderr appended to ``log``."""
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        self._pids.add(proc.pid)
        return proc

    def start_attached(
        self, cmd: list[str], *, env: dict[str, str], cwd: str | Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``cmd`` in a new session, stdin closed, writing to this process's output.

        In its own session, a Ctrl-C at the terminal reaches only this process, which then
        stops the group.
        """
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True
        )
        self._pids.add(proc.pid)
        return proc

    def start_piped(
        self, cmd: list[str], *, env: dict[str, str], cwd: str | Path
    ) -> subprocess.Popen[str]:
        """Start ``cmd`` in a new session with stdout and stderr as text pipes."""
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self._pids.add(proc.pid)
        return proc

    def record(self, procs: Iterable[subprocess.Popen | None]) -> None:
        """Remember the descendants of every process in ``procs`` that still runs."""
        table = process_table()
        for proc in procs:
            if proc is not None and proc.poll() is None:
                self._pids.update(descendants(proc.pid, table))

    def children(self, proc: subprocess.Popen | None) -> list[int]:
        """Process ids of everything ``proc`` started that still runs (remembered)."""
        if proc is None or proc.poll() is not None:
            return []
        pids = descendants(proc.pid)
        self._pids.update(pids)
        return pids

    def live(self, procs: Iterable[subprocess.Popen | None]) -> list[int]:
        """Live process ids of the group: tagged ones plus the running trees of ``procs``."""
        pids = set(tagged(self.variable, f"{self.token}/"))
        table = process_table()
        for proc in procs:
            if proc is not None and proc.poll() is None:
                pids.add(proc.pid)
                pids.update(descendants(proc.pid, table))
        return sorted(p for p in pids if pid_alive(p))

    def kill(self, proc: subprocess.Popen, role: str) -> list[int]:
        """SIGKILL ``proc``'s tree and everything still tagged with ``role``; wait for them.

        Returns
        -------
        list of int
            The process ids that were killed.
        """
        victims = kill_tree(proc.pid) if proc.poll() is None else []
        proc.wait()
        # children that outlived an earlier death of the process (re-parented, still tagged)
        for pid in tagged(self.variable, f"{self.token}/{role}/"):
            victims += kill_tree(pid)
        self._pids.update(victims)
        wait_gone(victims, timeout=10)
        return victims

    def stop(self, procs: Iterable[subprocess.Popen | None]) -> None:
        """Kill ``procs`` (in this order) with their trees and every tagged process; wait.

        Pipes of ``procs`` are closed. Processes already gone are skipped, so this is
        idempotent.
        """
        procs = [proc for proc in procs if proc is not None]
        self.record(procs)
        victims: list[int] = []
        for proc in procs:
            if proc.poll() is None:
                victims += kill_tree(proc.pid)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL ignored?
                pass
            for stream in (proc.stdout, proc.stderr):
                if stream is not None and not stream.closed:
                    stream.close()
        # detached children whose parent died before (e.g. the SuperExec of a refused
        # SuperNode): re-parented, found by their tag
        for _ in range(3):
            leftovers = self.live(procs)
            if not leftovers:
                break
            for pid in leftovers:
                victims += kill_tree(pid)
        self._pids.update(victims)
        wait_gone(victims, timeout=10)
