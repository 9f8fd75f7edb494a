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

Warm site workers (``warm_workers=True``, the default): before a SuperNode whose node config
names a ``site``, the federation starts that site's worker (``python -m
cotrain.flower.worker``, see :mod:`cotrain.flower.worker`), which the relay ClientApp of the
example app hands its messages to; a worker outlives :meth:`~LocalFederation.kill_node`
(it is the site's own service) and is started again with the node if it died. SuperNodes get
``FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.1`` (Flower's SuperExec polls for tasks every second
by default) unless the environment sets it.

Only the standard library is imported at module level, so importing this module does not
need Flower; starting a federation does (the ``flwr`` console scripts must be on ``PATH``).

The parts it is built from: :mod:`cotrain.flower.local.processes` (ports, process trees),
:mod:`cotrain.flower.local.supervisor` (starting, waiting for and stopping a group of processes),
:mod:`cotrain.flower.local.logs` (reading logs), :mod:`cotrain.flower.local.flwr_cli` (Flower's
executables, environment, config text and output) and :mod:`cotrain.flower.local.certificates`
(TLS certificates and SuperNode keys).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cotrain.flower.local.certificates import write_node_key, write_tls_certificates
from cotrain.flower.local.flwr_cli import (
    flower_environment,
    flower_executable,
    format_config,
    json_output,
    run_id_of,
    write_connection,
)
from cotrain.flower.local.logs import read_log
from cotrain.flower.local.processes import free_ports, kill_tree, port_open
from cotrain.flower.local.supervisor import (
    ProcessGroup,
    exit_on_termination,
    restore_handlers,
    wait_until,
)
from cotrain.flower.local.task_start import (
    DEFAULT_START_LIMIT,
    check_start_limit,
    launch_command,
)
from cotrain.flower.worker import default_socket, worker_answers

__all__ = ["LocalFederation", "format_config", "run_id_of"]

_NODE_ID = re.compile(r"SuperNode ID: (\d+)")
_TAG = "COTRAIN_LOCAL_FEDERATION"  # environment variable marking our processes
_POLL = "FLWR_SUPEREXEC_TASK_POLL_INTERVAL"  # a Flower setting: seconds between task polls


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
    start_limit : float, default=300.0
        Seconds the SuperLink and SuperNodes give each task process (a
        ``flwr-serverapp``, a ``flwr-clientapp`` per message) to start, instead of
        Flower's 30 s, which a loaded machine misses (:mod:`cotrain.flower.local.task_start`).
    warm_workers : bool, default=True
        Start a warm worker (``logs/worker-<i>.log``) for every node whose config names a
        ``site``, listening on ``worker.sock`` in the site's folder (or on the node
        config's ``worker``). ``False`` leaves the relay ClientApp running each round in
        Flower's fresh process, as without workers.

    Notes
    -----
    Everything it starts ends with :meth:`stop` (``with`` does it), and with the driver:
    while it runs, a SIGTERM or SIGHUP to the driver's process (``timeout``, a closed
    terminal) raises ``SystemExit`` instead of ending it at once, so ``with`` stops the
    federation on the way out. A driver killed with SIGKILL leaves its processes behind:
    :meth:`processes` finds them by their environment tag.

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
    >>> from cotrain.flower.local.localhost import LocalFederation
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
        warm_workers: bool = True,
        start_limit: float = DEFAULT_START_LIMIT,
    ) -> None:
        if n_nodes < 0 or unregistered_nodes < 0:
            raise ValueError("n_nodes and unregistered_nodes must be >= 0")
        if auth and not tls:
            raise ValueError("auth=True needs tls=True: Flower refuses SuperNode auth without TLS")
        if unregistered_nodes and not auth:
            raise ValueError("unregistered_nodes only makes sense with auth=True")
        check_start_limit(start_limit)
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
        self.warm_workers = bool(warm_workers)
        self.start_limit = float(start_limit)
        # distinct ports, free now; another program could still take one before start()
        self.port, *self.node_ports = free_ports(1 + total)
        self.node_ids: dict[int, int] = {}
        self.registered_node_ids: list[int] = []
        self._superlink: subprocess.Popen[bytes] | None = None
        self._nodes: list[subprocess.Popen[bytes] | None] = [None] * total
        self._workers: list[subprocess.Popen[bytes] | None] = [None] * total
        self._others: list[subprocess.Popen[Any]] = []  # submitted `flwr run`s
        # tags our processes; remembers every pid seen in our process trees
        self._group = ProcessGroup(_TAG, f"{os.getpid()}-{time.time_ns()}-{id(self):x}")
        self._stopped = False
        self._handlers: dict[int, Any] = {}

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
        env = self._group.tag(flower_environment(self.home), role)
        if role.startswith("node-") and _POLL not in os.environ:
            env[_POLL] = "0.1"
        return env

    def _procs(self) -> list[subprocess.Popen[Any] | None]:
        """The processes started here, as ``stop`` kills them: runs, nodes, workers, SuperLink."""
        return [*self._others, *self._nodes, *self._workers, self._superlink]

    @property
    def all_pids(self) -> set[int]:
        """Every process id started by this federation (or by its processes) seen so far."""
        self._group.record(self._procs())
        return self._group.pids

    def worker_socket(self, i: int) -> Path | None:
        """The socket of node ``i``'s site worker, or ``None`` if it gets none."""
        config = self.node_configs[i]
        if not self.warm_workers or "site" not in config:
            return None
        return Path(str(config.get("worker", default_socket(str(config["site"])))))

    # ------------------------------------------------------------------ commands
    def superlink_command(self) -> list[str]:
        """The ``flower-superlink`` command line (run with ``start_limit``)."""
        cmd = [
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
        return launch_command("flower-superlink", cmd, self.start_limit)

    def node_command(self, i: int) -> list[str]:
        """The ``flower-supernode`` command line of node ``i`` (run with ``start_limit``)."""
        cmd = [
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
        return launch_command("flower-supernode", cmd, self.start_limit)

    def run_command(
        self, app_dir: str | Path, run_config: dict[str, Any] | None = None
    ) -> list[str]:
        """The ``flwr run`` command line (with ``--stream``)."""
        cmd = [flower_executable("flwr"), "run", str(Path(app_dir).resolve()), self.connection_name]
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
        self._handlers = exit_on_termination()  # a SIGTERM to the driver stops it all
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
            write_tls_certificates(self.home / "certs")
        if self.auth:
            for i in range(len(self._nodes)):
                write_node_key(self.node_key(i))
        write_connection(
            self.config_file, self.connection_name, self.superlink_address, self.ca_certificate
        )
        deadline = time.monotonic() + self.startup_timeout
        for i in range(len(self._nodes)):  # they load their sites while the SuperLink starts
            self.start_worker(i, wait=False)

        self._superlink = self._popen(
            self.superlink_command(), self.log_dir / "superlink.log", "superlink"
        )
        wait_until(
            lambda: port_open(self.port) and "startup complete" in self.superlink_log(),
            self._superlink,
            name="flower-superlink",
            deadline=deadline,
            failure=(
                f"did not serve on {self.superlink_address} within {self.startup_timeout:g} s"
            ),
            log=self.superlink_log,
        )

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
            return int(json_output(done.stdout)["node-id"])
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
        self.start_worker(i)
        log = self.log_dir / f"supernode-{i}.log"
        if log.exists():  # keep the log of an earlier life
            log.rename(log.with_suffix(f".{time.time_ns()}.log"))
        self.node_ids.pop(i, None)
        proc = self._popen(self.node_command(i), log, f"node-{i}")
        self._nodes[i] = proc
        return proc

    def start_worker(self, i: int, *, wait: bool = True) -> subprocess.Popen[bytes] | None:
        """Start node ``i``'s site worker unless it runs; with ``wait``, until it answers.

        Returns
        -------
        subprocess.Popen or None
            The worker's process; ``None`` if node ``i`` gets no worker (``warm_workers``
            is off or its node config names no ``site``).

        Raises
        ------
        RuntimeError
            If the worker exits, or does not answer within ``startup_timeout`` seconds.
        """
        path = self.worker_socket(i)
        if path is None:
            return None
        proc = self._workers[i]
        if proc is None or proc.poll() is not None:
            log = self.log_dir / f"worker-{i}.log"
            site = str(self.node_configs[i]["site"])
            cmd = [sys.executable, "-m", "cotrain.flower.worker", site, "--socket", str(path)]
            proc = self._workers[i] = self._popen(cmd, log, f"worker-{i}")
        if wait:
            wait_until(
                lambda: worker_answers(path),
                proc,
                name=f"the site worker of node {i}",
                deadline=time.monotonic() + self.startup_timeout,
                failure=f"did not answer on {path} within {self.startup_timeout:g} s",
                log=lambda: read_log(self.log_dir / f"worker-{i}.log"),
            )
        return proc

    def kill_worker(self, i: int) -> list[int]:
        """SIGKILL node ``i``'s site worker (its relay then runs rounds itself).

        Returns
        -------
        list of int
            The process ids that were killed.
        """
        proc = self._workers[i]
        return [] if proc is None else self._group.kill(proc, f"worker-{i}")

    def worker_process(self, i: int) -> subprocess.Popen[bytes] | None:
        """The process of node ``i``'s site worker (``None`` if it was never started)."""
        return self._workers[i]

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
        found = wait_until(
            lambda: _NODE_ID.search(self.node_log(i)),
            proc,
            name=f"SuperNode {i}",
            deadline=deadline,
            failure=f"did not connect to {self.superlink_address} within {timeout:g} s",
            log=lambda: self.node_log(i),
        )
        self.node_ids[i] = int(found.group(1))
        return self.node_ids[i]

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
        proc = self._group.start_piped(
            self.run_command(app_dir, run_config), env=self._env("run"), cwd=self.home
        )
        self._others.append(proc)
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
            kill_tree(proc.pid)
            proc.communicate()
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)

    def flwr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a ``flwr`` CLI command against this federation (e.g. ``"ls"``).

        The connection name is not added; pass :attr:`connection_name` where the command
        takes one (``flwr ls`` uses it by default).
        """
        return subprocess.run(
            [flower_executable("flwr"), *args],
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
            return list(json_output(done.stdout)["runs"])
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
        return self._group.children(self._nodes[i])

    def kill_node(self, i: int) -> list[int]:
        """SIGKILL SuperNode ``i`` and its children (SuperExec, ``flwr-clientapp``).

        The node's site worker is the site's own service and keeps running (see
        :meth:`kill_worker`).

        Returns
        -------
        list of int
            The process ids that were killed.
        """
        proc = self._nodes[i]
        if proc is None:
            return []
        # also children that outlived an earlier death of the node (re-parented, still tagged)
        return self._group.kill(proc, f"node-{i}")

    def node_log(self, i: int) -> str:
        """Log of SuperNode ``i`` (its current life), without color codes."""
        return read_log(self.log_dir / f"supernode-{i}.log")

    def superlink_log(self) -> str:
        """Log of the SuperLink, without color codes."""
        return read_log(self.log_dir / "superlink.log")

    def stop(self) -> None:
        """Kill every process the federation started, with their children, and wait for them.

        Idempotent; also safe after a failed :meth:`start`.
        """
        self._group.stop(self._procs())
        for i, proc in enumerate(self._workers):  # killed: their sockets stay behind
            path = self.worker_socket(i)
            if proc is not None and path is not None:
                path.unlink(missing_ok=True)
        self._stopped = True
        restore_handlers(self._handlers)

    def processes(self) -> list[int]:
        """Process ids of every live process this federation started, directly or not.

        Found by the ``COTRAIN_LOCAL_FEDERATION`` tag in their environment (Linux), plus the
        still-running trees of the processes started here.
        """
        return self._group.live(self._procs())

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
        return self._group.start_logged(cmd, log, env=self._env(role), cwd=self.home)
