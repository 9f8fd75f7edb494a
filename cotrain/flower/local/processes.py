"""Local processes as the operating system sees them: ports, the process table, killing trees.

The pieces :class:`cotrain.flower.local.localhost.LocalFederation` watches and stops its Flower
processes with, written without Flower: free ports and whether one serves, the process
table and the trees in it, whether a process lives, the processes that carry a tag in their
environment, and killing a whole tree (children in new sessions included).

Only the standard library is used. The process table is read from ``/proc`` (Linux) or
``ps``; finding processes by their tag needs ``/proc``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "descendants",
    "free_ports",
    "kill_tree",
    "pid_alive",
    "port_open",
    "process_table",
    "tagged",
    "wait_gone",
]


# ---------------------------------------------------------------------- ports
def free_ports(n: int) -> list[int]:
    """Return ``n`` distinct TCP ports on 127.0.0.1 that are free right now.

    Parameters
    ----------
    n : int
        How many ports.

    Returns
    -------
    list of int
        Distinct port numbers; another program could still take one before it is used.

    Examples
    --------
    >>> ports = free_ports(2)
    >>> len(set(ports))
    2
    """
    socks = []
    try:
        for _ in range(n):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def port_open(port: int) -> bool:
    """Return whether something accepts TCP connections on ``127.0.0.1:port``.

    Parameters
    ----------
    port : int
        A port number.

    Returns
    -------
    bool
        ``True`` if a connection succeeds within half a second.

    Examples
    --------
    >>> port_open(free_ports(1)[0])
    False
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------------- process table
def _stat_fields(stat: str) -> list[str]:
    """Fields of ``/proc/<pid>/stat`` after the command name (state first, then ppid)."""
    # "pid (comm) state ppid ..."; comm may contain spaces and parentheses
    return stat[stat.rfind(")") + 2 :].split()


def process_table() -> dict[int, tuple[int, str]]:
    """Map every process id to ``(parent id, state)``.

    Returns
    -------
    dict of int to (int, str)
        The parent process id and the one-letter state (``R``, ``S``, ``Z``, ...).

    Examples
    --------
    >>> import os
    >>> process_table()[os.getpid()][0] == os.getppid()
    True
    """
    table: dict[int, tuple[int, str]] = {}
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = _stat_fields(stat)
            table[int(entry.name)] = (int(fields[1]), fields[0])
        return table
    out = subprocess.run(
        ["ps", "-A", "-o", "pid=", "-o", "ppid=", "-o", "stat="],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            table[int(fields[0])] = (int(fields[1]), fields[2][0])
    return table


def descendants(pid: int, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """Return every (transitive) child of ``pid``.

    Parameters
    ----------
    pid : int
        A process id.
    table : dict, optional
        A :func:`process_table` to use (read now by default).

    Returns
    -------
    list of int
        Children, grandchildren and so on.

    Examples
    --------
    >>> descendants(2, {2: (1, "S"), 3: (2, "S"), 4: (3, "R"), 5: (1, "S")})
    [3, 4]
    """
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def pid_alive(pid: int) -> bool:
    """Return whether process ``pid`` exists and is not a zombie.

    Parameters
    ----------
    pid : int
        A process id.

    Returns
    -------
    bool
        ``True`` while the process runs (or is stopped).

    Examples
    --------
    >>> import os
    >>> pid_alive(os.getpid())
    True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = _stat_fields(Path(f"/proc/{pid}/stat").read_text())[0]
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return False  # gone between kill() and the read
        state = process_table().get(pid, (0, "X"))[1]  # no /proc (macOS)
    except OSError:
        return True
    return state not in ("Z", "X")


def tagged(variable: str, prefix: str) -> list[int]:
    """Live processes whose environment has ``variable`` with a value starting with ``prefix``.

    Children inherit the environment, so this finds the processes a program started even
    after their parent died and they were re-parented (Linux only: reads ``/proc``; this
    process itself is never listed).

    Parameters
    ----------
    variable : str
        Name of an environment variable.
    prefix : str
        Start of its value.

    Returns
    -------
    list of int
        Process ids.

    Examples
    --------
    >>> tagged("COTRAIN_NO_SUCH_VARIABLE", "x")
    []
    """
    found: list[int] = []
    needle = f"{variable}={prefix}".encode()
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if any(var.startswith(needle) for var in environ.split(b"\0")):
            found.append(int(entry.name))
    return [pid for pid in found if pid_alive(pid)]


# ---------------------------------------------------------------------- killing
def kill_tree(pid: int) -> list[int]:
    """SIGKILL ``pid``, all its descendants and their process groups; return the ids hit.

    The tree is frozen with SIGSTOP first, so that nobody can start (and detach) a new child
    between listing the tree and killing it. Flower starts its ``flower-superexec``,
    ``flwr-serverapp`` and ``flwr-clientapp`` children in new sessions, so killing the
    process group of ``pid`` alone would miss them.

    Parameters
    ----------
    pid : int
        Root of the tree.

    Returns
    -------
    list of int
        The process ids that were signalled (the root first).

    Examples
    --------
    >>> import subprocess
    >>> proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    >>> kill_tree(proc.pid) == [proc.pid], proc.wait()
    (True, -9)
    """
    victims: list[int] = []
    for _ in range(3):  # children started while we were stopping the tree
        new = [p for p in [pid, *descendants(pid)] if p not in victims]
        if not new:
            break
        for p in new:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
        victims += new
    for p in victims:
        try:
            pgid = os.getpgid(p)
        except OSError:
            pgid = None
        if pgid == p:  # a group leader (start_new_session): take its whole group
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    return victims


def wait_gone(pids: Iterable[int], timeout: float) -> None:
    """Wait until none of ``pids`` is alive, or ``timeout`` seconds have passed.

    Parameters
    ----------
    pids : iterable of int
        Process ids.
    timeout : float
        Seconds to wait at most.

    Examples
    --------
    >>> wait_gone([], timeout=1.0)
    """
    pids = list(pids)
    deadline = time.monotonic() + timeout
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
