"""Localhost tooling: a Flower federation as processes on one machine, for tests and trials.

- :mod:`~cotrain.flower.local.localhost` — ``LocalFederation``: a SuperLink and SuperNodes on
  localhost;
- :mod:`~cotrain.flower.local.processes` and :mod:`~cotrain.flower.local.supervisor` — the
  processes it starts and the supervisor that restarts them;
- :mod:`~cotrain.flower.local.flwr_cli` — the ``flwr`` command line it drives;
- :mod:`~cotrain.flower.local.certificates` — the TLS and SuperNode keys it writes;
- :mod:`~cotrain.flower.local.logs` — the processes' logs.

None of it is needed by a real deployment's ClientApp or ServerApp.
"""

__all__ = ["certificates", "flwr_cli", "localhost", "logs", "processes", "supervisor"]


def __dir__() -> list[str]:
    return sorted(__all__)
