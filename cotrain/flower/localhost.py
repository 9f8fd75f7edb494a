"""A real Flower deployment on localhost, as separate processes.

:class:`LocalFederation` starts one ``flower-superlink`` and several ``flower-supernode``
processes on free local ports, writes a ``flwr`` CLI connection for them and submits runs
with ``flwr run``. It is meant for tests, benchmarks and for trying a deployment before
spreading it over machines; every file it needs (Flower home, logs, certificates, keys) lives
under one directory.

Optionally the deployment is secured the way a real one would be:

* ``tls=True`` generates a throw-away certificate authority and a server certificate for
  ``127.0.0.1``/``localhost`` (with the ``cryptography`` package that Flower depends on) and
  starts the SuperLink with ``--ssl-certfile``/``--ssl-keyfile``/``--ssl-ca-certfile``;
  SuperNodes and the ``flwr`` CLI trust the CA through ``--root-certificates`` /
  ``root-certificates``.
* ``auth=True`` (needs ``tls=True``) enables SuperNode authentication: every SuperNode gets
  an ECDSA P-384 key pair in OpenSSH format, the public keys of the regular nodes are
  registered with ``flwr supernode register`` and the nodes start with
  ``--auth-supernode-private-key``. ``unregistered_nodes`` extra nodes get keys that are
  never registered; the SuperLink refuses them.

Only the standard library is imported at module level, so importing this module does not
need Flower; starting a federation does (the ``flwr`` console scripts must be on ``PATH``).
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

__all__ = ["LocalFederation", "format_config", "pid_alive", "run_id_of"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NODE_ID = re.compile(r"SuperNode ID: (\d+)")
_RUN_ID = re.compile(r"Successfully started run (\d+)")
_TAG = "COTRAIN_LOCAL_FEDERATION"  # environment variable marking our processes


def format_config(config: dict[str, Any]) -> str:
    """Format a dict the way ``--node-config`` and ``--run-config`` expect it.

    Strings are quoted, booleans are ``true``/``false`` and numbers are written as they are.

    Parameters
    ----------
    config : dict
        Keys (no spaces, no ``=``) and ``str``, ``bool``, ``int`` or ``float`` values.

    Returns
    -------
    str
        Space separated ``key=value`` pairs.

    Raises
    ------
    ValueError
        If a key or value cannot be written in this format.

    Examples
    --------
    >>> format_config({"partition-id": 0, "data": "/tmp/x0.npz", "scale": 0.5, "on": True})
    'partition-id=0 data="/tmp/x0.npz" scale=0.5 on=true'
    """
    parts = []
    for key, value in config.items():
        if not isinstance(key, str) or not key or re.search(r"[\s=\"']", key):
            raise ValueError(f"invalid config key {key!r}")
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"config value for {key!r} must be finite, got {value}")
            text = repr(value)
        elif isinstance(value, str):
            if "\n" in value or "\r" in value:
                raise ValueError(f"config value for {key!r} must be on one line")
            if '"' not in value and "\\" not in value:
                text = f'"{value}"'
            elif "'" not in value:
                text = f"'{value}'"  # TOML literal string: no escapes
            else:
                raise ValueError(f"config value for {key!r} mixes both quote characters")
        else:
            raise TypeError(
                f"config value for {key!r} must be str, bool, int or float, "
                f"got {type(value).__name__}"
            )
        parts.append(f"{key}={text}")
    return " ".join(parts)


def run_id_of(output: str) -> int | None:
    """Return the run id that ``flwr run`` printed, or ``None``.

    Parameters
    ----------
    output : str
        Standard output of ``flwr run`` (e.g. ``LocalFederation.run(...).stdout``).

    Returns
    -------
    int or None
        The id of the started run.

    Examples
    --------
    >>> run_id_of("Successfully started run 6006996370185504917")
    6006996370185504917
    """
    found = _RUN_ID.search(_ANSI.sub("", output))
    return int(found.group(1)) if found else None


def _free_ports(n: int) -> list[int]:
    """Return ``n`` distinct TCP ports on 127.0.0.1 that are free right now."""
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


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _process_table() -> dict[int, tuple[int, str]]:
    """Map every process id to ``(parent id, state)``."""
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
            # "pid (comm) state ppid ..."; comm may contain spaces and parentheses
            fields = stat[stat.rfind(")") + 2 :].split()
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


def _descendants(pid: int, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """Return every (transitive) child of ``pid``."""
    table = _process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _tagged(prefix: str) -> list[int]:
    """Process ids whose environment has ``COTRAIN_LOCAL_FEDERATION`` starting with ``prefix``.

    Children inherit the variable, so this finds the processes a federation started even
    after their parent died and they were re-parented (Linux only: reads ``/proc``).
    """
    found = []
    needle = f"{_TAG}={prefix}".encode()
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
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        state = stat[stat.rfind(")") + 2 :].split()[0]
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return False  # gone between kill() and the read
        state = _process_table().get(pid, (0, "X"))[1]  # no /proc (macOS)
    except OSError:
        return True
    return state not in ("Z", "X")


def _kill_tree(pid: int) -> list[int]:
    """SIGKILL ``pid``, all its descendants and their process groups; return the ids hit.

    The tree is frozen with SIGSTOP first, so that nobody can start (and detach) a new child
    between listing the tree and killing it. Flower starts its ``flower-superexec``,
    ``flwr-serverapp`` and ``flwr-clientapp`` children in new sessions, so killing the
    process group of ``pid`` alone would miss them.
    """
    victims: list[int] = []
    for _ in range(3):  # children started while we were stopping the tree
        new = [p for p in [pid, *_descendants(pid)] if p not in victims]
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


class LocalFederation:
    """Run a Flower SuperLink and SuperNodes on localhost, each in its own process.

    Parameters
    ----------
    home : str or Path
        A (temporary) directory. It becomes ``FLWR_HOME`` of every process and holds the
        ``flwr`` CLI configuration, the logs (``logs/``), certificates (``certs/``) and
        node keys (``keys/``).
    n_nodes : int, default=3
        Number of regular SuperNodes (registered with the SuperLink when ``auth``).
    node_configs : list of dict, optional
        ``node_configs[i]`` is passed to SuperNode ``i`` as ``--node-config``; a ClientApp
        sees it as ``context.node_config``. Either one per regular node or one per node
        including the unregistered ones (they get ``{}`` otherwise).
    tls : bool, default=False
        Serve the SuperLink over TLS with a generated CA and server certificate.
    auth : bool, default=False
        Enable SuperNode authentication (requires ``tls``).
    unregistered_nodes : int, default=0
        Extra SuperNodes, with ``auth``, whose keys are *not* registered. They are numbered
        after the regular nodes (``n_nodes``, ``n_nodes + 1``, ...), and :meth:`start` does
        not wait for them.
    startup_timeout : float, default=60.0
        Seconds :meth:`start` waits for the SuperLink and every regular node.

    Attributes
    ----------
    port : int
        The SuperLink's port (Fleet, Control and Runtime APIs share it).
    node_ports : list of int
        Port of each SuperNode's local Runtime API.
    node_ids : dict of int to int
        Node id of each regular node (filled by :meth:`start`).
    registered_node_ids : list of int
        Node ids the SuperLink gave the registered public keys (``auth`` only).

    Examples
    --------
    >>> from cotrain.flower.localhost import LocalFederation
    >>> configs = [{"partition-id": i} for i in range(2)]
    >>> with LocalFederation("/tmp/fl", 2, configs, tls=True) as fed:  # doctest: +SKIP
    ...     done = fed.run("examples/flower/app", {"num-rounds": 3})
    ...     print(done.returncode, done.stdout[-500:])
    """

    connection_name = "cotrain-local"

    def __init__(
        self,
        home: str | Path,
        n_nodes: int = 3,
        node_configs: list[dict[str, Any]] | None = None,
        *,
        tls: bool = False,
        auth: bool = False,
        unregistered_nodes: int = 0,
        startup_timeout: float = 60.0,
    ) -> None:
        if n_nodes < 0 or unregistered_nodes < 0:
            raise ValueError("n_nodes and unregistered_nodes must be >= 0")
        if auth and not tls:
            raise ValueError("auth=True needs tls=True: Flower refuses SuperNode auth without TLS")
        if unregistered_nodes and not auth:
            raise ValueError("unregistered_nodes only makes sense with auth=True")
        total = n_nodes + unregistered_nodes
        configs = [dict(c) for c in (node_configs or [])]
        if node_configs is not None and len(configs) not in (n_nodes, total):
            raise ValueError(
                f"node_configs has {len(configs)} entries, expected {n_nodes} or {total}"
            )
        configs += [{} for _ in range(total - len(configs))]
        for config in configs:
            format_config(config)  # fail early on values Flower cannot take
        self.home = Path(home).expanduser().resolve()
        self.n_nodes = n_nodes
        self.unregistered_nodes = unregistered_nodes
        self.node_configs = configs
        self.tls = tls
        self.auth = auth
        self.startup_timeout = float(startup_timeout)
        # distinct ports, free now; another program could still take one before start()
        self.port, *self.node_ports = _free_ports(1 + total)
        self.node_ids: dict[int, int] = {}
        self.registered_node_ids: list[int] = []
        self._superlink: subprocess.Popen[bytes] | None = None
        self._nodes: list[subprocess.Popen[bytes] | None] = [None] * total
        self._others: list[subprocess.Popen[Any]] = []  # submitted `flwr run`s
        self._pids: set[int] = set()  # every pid seen in our process trees
        self._stopped = False
        self._token = f"{os.getpid()}-{time.time_ns()}-{id(self):x}"

    # ------------------------------------------------------------------ paths, addresses
    @property
    def superlink_address(self) -> str:
        """``host:port`` of the SuperLink (Fleet, Control and Runtime APIs)."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        """Directory with ``superlink.log`` and ``supernode-<i>.log``."""
        return self.home / "logs"

    @property
    def ca_certificate(self) -> Path | None:
        """The generated CA certificate (PEM) that clients trust, or ``None`` without TLS."""
        return self.home / "certs" / "ca.pem" if self.tls else None

    @property
    def config_file(self) -> Path:
        """The ``flwr`` CLI configuration (``$FLWR_HOME/config.toml``)."""
        return self.home / "config.toml"

    def node_key(self, i: int) -> Path:
        """Private key (OpenSSH format) of SuperNode ``i``; its public key adds ``.pub``."""
        return self.home / "keys" / f"supernode-{i}"

    @property
    def env(self) -> dict[str, str]:
        """Environment of every process: ``FLWR_HOME`` plus no telemetry or update check.

        ``COTRAIN_LOCAL_FEDERATION`` tags the processes (and, inherited, their children)
        so that :meth:`stop` finds them even after their parent died.
        """
        return self._env("cli")

    def _env(self, role: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            FLWR_HOME=str(self.home),
            FLWR_TELEMETRY_ENABLED="0",
            FLWR_DISABLE_UPDATE_CHECK="1",
            PYTHONUNBUFFERED="1",
        )
        # Flower starts flower-superexec, flwr-serverapp and flwr-clientapp by name: take
        # them from this Python's environment even when it is not activated
        bin_dir = str(Path(sys.executable).parent)
        if env.get("PATH", "").split(os.pathsep)[0] != bin_dir:
            env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
        # SuperExecs poll for new ServerApp/ClientApp tasks every second by default
        env.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.2")
        env[_TAG] = f"{self._token}/{role}/"
        return env

    @property
    def all_pids(self) -> set[int]:
        """Every process id started by this federation (or by its processes) seen so far."""
        self._record_pids()
        return set(self._pids)

    # ------------------------------------------------------------------ commands
    def superlink_command(self) -> list[str]:
        """The ``flower-superlink`` command line."""
        cmd = [
            _exe("flower-superlink"),
            "--disable-runtime-dependency-installation",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        if self.tls:
            certs = self.home / "certs"
            cmd += [
                "--ssl-certfile",
                str(certs / "server.pem"),
                "--ssl-keyfile",
                str(certs / "server.key"),
                "--ssl-ca-certfile",
                str(certs / "ca.pem"),
            ]
        else:
            cmd.append("--insecure")
        if self.auth:
            cmd.append("--enable-supernode-auth")
        return cmd

    def node_command(self, i: int) -> list[str]:
        """The ``flower-supernode`` command line of node ``i``."""
        cmd = [
            _exe("flower-supernode"),
            "--superlink",
            self.superlink_address,
            "--port",
            str(self.node_ports[i]),
        ]
        if self.tls:
            cmd += ["--root-certificates", str(self.ca_certificate)]
        else:
            cmd.append("--insecure")
        if self.auth:
            cmd += ["--auth-supernode-private-key", str(self.node_key(i))]
        if self.node_configs[i]:
            cmd += ["--node-config", format_config(self.node_configs[i])]
        return cmd

    def run_command(
        self, app_dir: str | Path, run_config: dict[str, Any] | None = None
    ) -> list[str]:
        """The ``flwr run`` command line (with ``--stream``)."""
        cmd = [_exe("flwr"), "run", str(Path(app_dir).resolve()), self.connection_name]
        for key, value in (run_config or {}).items():
            cmd += ["--run-config", format_config({key: value})]
        return [*cmd, "--stream"]

    # ------------------------------------------------------------------ life cycle
    def start(self) -> LocalFederation:
        """Start the SuperLink, then the SuperNodes; wait until every regular node is connected.

        Returns
        -------
        LocalFederation
            ``self``.

        Raises
        ------
        RuntimeError
            If the SuperLink does not serve, or a regular node does not connect, within
            ``startup_timeout`` seconds (the message ends with the log's tail). Everything
            started so far is stopped.
        """
        if self._superlink is not None:
            raise RuntimeError("this LocalFederation was already started")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        for sub in ("logs", "certs", "keys"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        if self.tls:
            self._write_certificates()
        if self.auth:
            for i in range(len(self._nodes)):
                self._write_node_key(i)
        self._write_cli_config()
        deadline = time.monotonic() + self.startup_timeout

        self._superlink = self._popen(
            self.superlink_command(), self.log_dir / "superlink.log", "superlink"
        )
        while not (_port_open(self.port) and "startup complete" in self.superlink_log()):
            if self._superlink.poll() is not None:
                raise RuntimeError(
                    f"flower-superlink exited with code {self._superlink.returncode}:\n"
                    + _tail(self.superlink_log())
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"flower-superlink did not serve on {self.superlink_address} within "
                    f"{self.startup_timeout:g} s:\n" + _tail(self.superlink_log())
                )
            time.sleep(0.1)

        for i in range(self.n_nodes, len(self._nodes)):  # unregistered: nothing to wait for
            self.start_node(i)
        if self.auth and self.n_nodes:
            with ThreadPoolExecutor(max_workers=self.n_nodes) as pool:
                self.registered_node_ids = list(pool.map(self.register_node, range(self.n_nodes)))
        for i in range(self.n_nodes):
            self.start_node(i)
        for i in range(self.n_nodes):
            self.wait_for_node(i, timeout=max(0.0, deadline - time.monotonic()))

    def register_node(self, i: int) -> int:
        """Register node ``i``'s public key with the SuperLink; return the node id it got."""
        done = self.flwr(
            "supernode",
            "register",
            str(self.node_key(i).with_suffix(".pub")),
            self.connection_name,
            "--format",
            "json",
            timeout=self.startup_timeout,
        )
        try:
            answer = json.loads(done.stdout[done.stdout.index("{") :])
            return int(answer["node-id"])
        except (ValueError, KeyError, TypeError) as err:
            raise RuntimeError(
                f"`flwr supernode register` failed (code {done.returncode}):\n"
                f"{done.stdout}\n{done.stderr}"
            ) from err

    def start_node(self, i: int) -> subprocess.Popen[bytes]:
        """Start SuperNode ``i`` (again, after :meth:`kill_node`); return its process."""
        old = self._nodes[i]
        if old is not None and old.poll() is None:
            raise RuntimeError(f"SuperNode {i} is running")
        log = self.log_dir / f"supernode-{i}.log"
        if log.exists():  # keep the log of an earlier life
            log.rename(log.with_suffix(f".{time.time_ns()}.log"))
        self.node_ids.pop(i, None)
        proc = self._popen(self.node_command(i), log, f"node-{i}")
        self._nodes[i] = proc
        return proc

    def wait_for_node(self, i: int, timeout: float | None = None) -> int:
        """Wait until SuperNode ``i`` logged its node id; return it.

        Raises
        ------
        RuntimeError
            If the node exits or does not connect within ``timeout`` seconds
            (``startup_timeout`` by default).
        """
        timeout = self.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        proc = self._nodes[i]
        if proc is None:
            raise RuntimeError(f"SuperNode {i} was not started")
        while True:
            found = _NODE_ID.search(self.node_log(i))
            if found:
                self.node_ids[i] = int(found.group(1))
                return self.node_ids[i]
            if proc.poll() is not None:
                raise RuntimeError(
                    f"SuperNode {i} exited with code {proc.returncode}:\n" + _tail(self.node_log(i))
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"SuperNode {i} did not connect to {self.superlink_address} within "
                    f"{timeout:g} s:\n" + _tail(self.node_log(i))
                )
            time.sleep(0.1)

    def submit(
        self, app_dir: str | Path, run_config: dict[str, Any] | None = None
    ) -> subprocess.Popen[str]:
        """Start ``flwr run <app_dir> --stream`` without waiting for it.

        Parameters
        ----------
        app_dir : str or Path
            Directory of a Flower app (with its ``pyproject.toml``).
        run_config : dict, optional
            Run config overrides (keys must be declared in ``[tool.flwr.app.config]``).

        Returns
        -------
        subprocess.Popen
            The ``flwr run`` process, stdout and stderr as text pipes. It exits when the
            run has finished. :meth:`stop` kills it if it still runs.
        """
        proc = subprocess.Popen(
            self.run_command(app_dir, run_config),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self._env("run"),
            cwd=self.home,
            start_new_session=True,
        )
        self._others.append(proc)
        self._pids.add(proc.pid)
        return proc

    def run(
        self,
        app_dir: str | Path,
        run_config: dict[str, Any] | None = None,
        *,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """Run a Flower app on the federation and wait until the run has finished.

        ``flwr run --stream`` streams the ServerApp's log and returns once the SuperLink
        marks the run finished, so the completed process holds the whole log.

        Parameters
        ----------
        app_dir : str or Path
            Directory of a Flower app (with its ``pyproject.toml``).
        run_config : dict, optional
            Run config overrides (keys must be declared in ``[tool.flwr.app.config]``).
        timeout : float, default=300
            Seconds to wait.

        Returns
        -------
        subprocess.CompletedProcess
            ``flwr run``'s return code, stdout and stderr (text).

        Raises
        ------
        subprocess.TimeoutExpired
            If the run did not finish in time (the ``flwr run`` process is killed; the run
            may go on in the federation until :meth:`stop`).
        """
        proc = self.submit(app_dir, run_config)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)

    def flwr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a ``flwr`` CLI command against this federation (e.g. ``"ls"``).

        The connection name is not added; pass :attr:`connection_name` where the command
        takes one (``flwr ls`` uses it by default).
        """
        return subprocess.run(
            [_exe("flwr"), *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.home,
            timeout=timeout,
            check=False,
        )

    def runs(self) -> list[dict[str, Any]]:
        """The runs the SuperLink knows (``flwr ls --format json``)."""
        done = self.flwr("ls", self.connection_name, "--format", "json")
        try:
            return list(json.loads(done.stdout[done.stdout.index("{") :])["runs"])
        except (ValueError, KeyError) as err:
            raise RuntimeError(f"`flwr ls` failed:\n{done.stdout}\n{done.stderr}") from err

    def node_process(self, i: int) -> subprocess.Popen[bytes] | None:
        """The process of SuperNode ``i`` (``None`` if it was never started)."""
        return self._nodes[i]

    @property
    def superlink_process(self) -> subprocess.Popen[bytes] | None:
        """The SuperLink process (``None`` before :meth:`start`)."""
        return self._superlink

    def node_children(self, i: int) -> list[int]:
        """Process ids of everything SuperNode ``i`` started that still runs."""
        proc = self._nodes[i]
        if proc is None or proc.poll() is not None:
            return []
        pids = _descendants(proc.pid)
        self._pids.update(pids)
        return pids

    def kill_node(self, i: int) -> list[int]:
        """SIGKILL SuperNode ``i`` and its children (SuperExec, ``flwr-clientapp``).

        Returns
        -------
        list of int
            The process ids that were killed.
        """
        proc = self._nodes[i]
        if proc is None:
            return []
        victims = _kill_tree(proc.pid) if proc.poll() is None else []
        proc.wait()
        # children that outlived an earlier death of the node (re-parented, still tagged)
        for pid in _tagged(f"{self._token}/node-{i}/"):
            victims += _kill_tree(pid)
        self._pids.update(victims)
        _wait_gone(victims, timeout=10)
        return victims

    def node_log(self, i: int) -> str:
        """Log of SuperNode ``i`` (its current life), without color codes."""
        return _read(self.log_dir / f"supernode-{i}.log")

    def superlink_log(self) -> str:
        """Log of the SuperLink, without color codes."""
        return _read(self.log_dir / "superlink.log")

    def stop(self) -> None:
        """Kill every process the federation started, with their children, and wait for them.

        Idempotent; also safe after a failed :meth:`start`.
        """
        self._record_pids()
        procs = [*self._others, *(p for p in self._nodes if p is not None)]
        if self._superlink is not None:
            procs.append(self._superlink)
        victims: list[int] = []
        for proc in procs:
            if proc.poll() is None:
                victims += _kill_tree(proc.pid)
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
            leftovers = self.processes()
            if not leftovers:
                break
            for pid in leftovers:
                victims += _kill_tree(pid)
        self._pids.update(victims)
        _wait_gone(victims, timeout=10)
        self._stopped = True

    def processes(self) -> list[int]:
        """Process ids of every live process this federation started, directly or not.

        Found by the ``COTRAIN_LOCAL_FEDERATION`` tag in their environment (Linux), plus the
        still-running trees of the processes started here.
        """
        pids = set(_tagged(f"{self._token}/"))
        table = _process_table()
        for proc in [self._superlink, *self._nodes, *self._others]:
            if proc is not None and proc.poll() is None:
                pids.add(proc.pid)
                pids.update(_descendants(proc.pid, table))
        return sorted(p for p in pids if pid_alive(p))

    def __enter__(self) -> LocalFederation:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:  # last resort; stop() is the way
        try:
            if self._superlink is not None and not self._stopped:
                self.stop()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return (
            f"LocalFederation(home={str(self.home)!r}, n_nodes={self.n_nodes}, "
            f"tls={self.tls}, auth={self.auth}, superlink={self.superlink_address})"
        )

    # ------------------------------------------------------------------ helpers
    def _popen(self, cmd: list[str], log: Path, role: str) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(role),
                cwd=self.home,
                start_new_session=True,
            )
        self._pids.add(proc.pid)
        return proc

    def _record_pids(self) -> None:
        procs = [self._superlink, *self._nodes, *self._others]
        table = _process_table()
        for proc in procs:
            if proc is not None and proc.poll() is None:
                self._pids.update(_descendants(proc.pid, table))

    def _write_cli_config(self) -> None:
        lines = [
            "[superlink]",
            f'default = "{self.connection_name}"',
            "",
            f"[superlink.{self.connection_name}]",
            f'address = "{self.superlink_address}"',
        ]
        if self.tls:
            lines.append(f"root-certificates = {json.dumps(str(self.ca_certificate))}")
        else:
            lines.append("insecure = true")
        self.config_file.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def _write_certificates(self) -> None:
        """Write ``certs/ca.pem``, ``certs/server.pem`` and ``certs/server.key``."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        certs = self.home / "certs"
        now = _dt.datetime.now(_dt.UTC) - _dt.timedelta(minutes=5)
        later = now + _dt.timedelta(days=7)

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cotrain local CA")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(later)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )

        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(later)
            .add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )

        pem = serialization.Encoding.PEM
        (certs / "ca.pem").write_bytes(ca_cert.public_bytes(pem))
        (certs / "server.pem").write_bytes(cert.public_bytes(pem))
        key_file = certs / "server.key"
        key_file.write_bytes(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
        key_file.chmod(0o600)

    def _write_node_key(self, i: int) -> None:
        """Write an ECDSA P-384 key pair in OpenSSH format (like ``ssh-keygen -t ecdsa -b 384``)."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        key = ec.generate_private_key(ec.SECP384R1())
        path = self.node_key(i)
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)
        public = key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        path.with_suffix(".pub").write_bytes(public + b"\n")


def _exe(name: str) -> str:
    """Path of a Flower console script: next to this Python first, then on ``PATH``."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"`{name}` not found: is Flower (`pip install flwr`) installed?")
    return found


def _read(path: Path) -> str:
    try:
        return _ANSI.sub("", path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return ""


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _wait_gone(pids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
