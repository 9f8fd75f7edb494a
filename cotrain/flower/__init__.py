"""Deployment on Flower: a ClientApp per site and a ServerApp running the cotrain round.

Needs the ``flower`` extra (``pip install -e ".[flower]"``); Flower is imported only
inside the functions that use it.

- :mod:`cotrain.flower.site` — a site's folder (private data, public pool, learner);
- :mod:`cotrain.flower.client_app` — a site's handlers, one round per message;
- :mod:`cotrain.flower.relay` — ``make_relay_app()``: the ClientApp, which hands each message
  to the site's warm worker (or answers in its own process);
- :mod:`cotrain.flower.server_app` — ``FlowerCoTraining`` (the server strategy) and
  ``make_server_app()``;
- :mod:`cotrain.flower.protocol` — what the messages carry (numeric arrays only);
- :mod:`cotrain.flower.local` — localhost tooling: ``LocalFederation``
  (:mod:`cotrain.flower.local.localhost`), a SuperLink and SuperNodes on localhost as
  processes, for tests, benchmarks and trying a deployment.

See ``examples/flower/README.md``.
"""

__all__ = ["client_app", "local", "protocol", "server_app", "site"]


def __dir__() -> list[str]:
    return sorted(__all__)
