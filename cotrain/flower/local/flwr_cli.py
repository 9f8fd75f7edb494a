"""Talking to Flower's command-line tools: executables, environment, config text and output.

What :class:`cotrain.flower.local.localhost.LocalFederation` needs to drive ``flower-superlink``,
``flower-supernode`` and ``flwr`` as programs: where their console scripts are, the
environment they run in, ``--node-config``/``--run-config`` values, the ``flwr`` CLI's
connection file, and what to read back from their output. Only the standard library is
imported, so nothing here needs Flower installed.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from cotrain.flower.local.logs import strip_ansi

__all__ = [
    "app_pyproject",
    "flower_environment",
    "flower_executable",
    "format_config",
    "json_output",
    "run_id_of",
    "write_connection",
]

_RUN_ID = re.compile(r"Successfully started run (\d+)")


def app_pyproject(
    name: str, description: str, serverapp: str, clientapp: str, config: dict[str, Any]
) -> str:
    """The ``pyproject.toml`` of a small Flower app folder (what ``flwr run`` reads).

    Parameters
    ----------
    name : str
        The project name.
    description : str
        One line.
    serverapp, clientapp : str
        ``module:attribute`` of the ServerApp and ClientApp.
    config : dict
        The run config's defaults (``str``, ``bool``, ``int`` or ``float`` values).

    Examples
    --------
    >>> text = app_pyproject("demo", "A demo.", "demo.app:server", "demo.app:client", {"n": 2})
    >>> text.splitlines()[-1], 'serverapp = "demo.app:server"' in text
    ('n = 2', True)
    """
    values = {
        k: json.dumps(v) if not isinstance(v, bool) else str(v).lower() for k, v in config.items()
    }
    lines = [
        "[build-system]",
        'requires = ["hatchling"]',
        'build-backend = "hatchling.build"',
        "",
        "[project]",
        f"name = {json.dumps(name)}",
        'version = "1.0.0"',
        f"description = {json.dumps(description)}",
        'license = "MIT"',
        "dependencies = []",
        "",
        "[tool.hatch.build.targets.wheel]",
        'packages = ["."]',
        "",
        "[tool.flwr.app]",
        'publisher = "cotrain"',
        "",
        "[tool.flwr.app.components]",
        f"serverapp = {json.dumps(serverapp)}",
        f"clientapp = {json.dumps(clientapp)}",
        "",
        "[tool.flwr.app.config]",
        *(f"{k} = {v}" for k, v in values.items()),
    ]
    return "\n".join(lines) + "\n"


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
    found = _RUN_ID.search(strip_ansi(output))
    return int(found.group(1)) if found else None


def json_output(stdout: str) -> Any:
    """Parse the JSON object a ``flwr ... --format json`` command printed.

    Anything printed before the object's first ``{`` (e.g. a warning) is skipped.

    Parameters
    ----------
    stdout : str
        The command's standard output.

    Returns
    -------
    object
        The parsed JSON.

    Raises
    ------
    ValueError
        If there is no JSON object in ``stdout``.

    Examples
    --------
    >>> json_output('Loading... {"node-id": 7}')
    {'node-id': 7}
    """
    return json.loads(stdout[stdout.index("{") :])


def flower_executable(name: str) -> str:
    """Path of a Flower console script: next to this Python first, then on ``PATH``.

    Parameters
    ----------
    name : str
        E.g. ``"flwr"``, ``"flower-superlink"`` or ``"flower-supernode"``.

    Returns
    -------
    str
        The executable's path.

    Raises
    ------
    FileNotFoundError
        If Flower's scripts are in neither place.

    Examples
    --------
    >>> flower_executable("flwr")  # doctest: +SKIP
    '/opt/venv/bin/flwr'
    """
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"`{name}` not found: is Flower (`pip install flwr`) installed?")
    return found


def flower_environment(home: str | Path | None) -> dict[str, str]:
    """This process's environment for a Flower process with ``FLWR_HOME=home``.

    Telemetry and the update check are off, output is unbuffered, this Python's ``bin``
    directory comes first on ``PATH`` (Flower starts ``flower-superexec``,
    ``flwr-serverapp`` and ``flwr-clientapp`` by name, even when the environment is not
    activated) and SuperExecs poll for new tasks every 0.2 s unless
    ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` says otherwise.

    Parameters
    ----------
    home : str or Path or None
        Flower's home directory (None: as this process has it).

    Returns
    -------
    dict of str to str
        A new environment.

    Examples
    --------
    >>> env = flower_environment("/tmp/flwr-home")
    >>> env["FLWR_HOME"], env["FLWR_TELEMETRY_ENABLED"]
    ('/tmp/flwr-home', '0')
    """
    env = dict(os.environ)
    if home is not None:
        env["FLWR_HOME"] = str(home)
    env.update(
        FLWR_TELEMETRY_ENABLED="0",
        FLWR_DISABLE_UPDATE_CHECK="1",
        PYTHONUNBUFFERED="1",
    )
    bin_dir = str(Path(sys.executable).parent)
    if env.get("PATH", "").split(os.pathsep)[0] != bin_dir:
        env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    # SuperExecs poll for new ServerApp/ClientApp tasks every second by default
    env.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.2")
    return env


def write_connection(
    path: str | Path, name: str, address: str, root_certificates: str | Path | None = None
) -> None:
    """Write a ``flwr`` CLI configuration with one (default) SuperLink connection.

    Parameters
    ----------
    path : str or Path
        The file, usually ``$FLWR_HOME/config.toml`` (overwritten).
    name : str
        Name of the connection (what ``flwr run <app> <name>`` takes).
    address : str
        ``host:port`` of the SuperLink's Control API.
    root_certificates : str or Path, optional
        CA certificate to trust (TLS); without it the connection is insecure.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as home:
    ...     write_connection(Path(home) / "config.toml", "local", "127.0.0.1:9093")
    ...     print((Path(home) / "config.toml").read_text(), end="")
    [superlink]
    default = "local"
    <BLANKLINE>
    [superlink.local]
    address = "127.0.0.1:9093"
    insecure = true
    """
    lines = [
        "[superlink]",
        f'default = "{name}"',
        "",
        f"[superlink.{name}]",
        f'address = "{address}"',
    ]
    if root_certificates is not None:
        lines.append(f"root-certificates = {json.dumps(str(root_certificates))}")
    else:
        lines.append("insecure = true")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
