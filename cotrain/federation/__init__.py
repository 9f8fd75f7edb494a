"""One federation at work: its clients, its server and the round loop that drives them.

- :mod:`~cotrain.federation.client`: :class:`~cotrain.federation.client.Client`, the only
  place that touches private data;
- :mod:`~cotrain.federation.server`: the server half of a round (configure each client's
  downlink; decode, consensus);
- :mod:`~cotrain.federation.setup`: builds and restores the server side of a run, for
  the trainer and the Flower ServerApp alike;
- :mod:`~cotrain.federation.loop`: :class:`~cotrain.federation.loop.RoundLoop`, the loop
  every method runs on, with the callbacks around each round;
- :mod:`~cotrain.federation.simulation`: an in-process federation (clients on a runtime);
- :mod:`~cotrain.federation.privacy_setup`: the checks and the ledger of a private run;
- :mod:`~cotrain.federation.sampling`, :mod:`~cotrain.federation.seeding`: who takes part
  in a round, and the seeds every part draws from.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

#: names of the old module ``cotrain.federation`` (now a package) -> where they are now
_OLD_NAMES = {
    "bind_public": "cotrain.federation.privacy_setup",
    "check_privacy_setup": "cotrain.federation.privacy_setup",
    "dry_run_consensus": "cotrain.federation.privacy_setup",
    "make_ledger": "cotrain.federation.privacy_setup",
    "refuse_replayable_noise": "cotrain.federation.privacy_setup",
    "replayable_noise_warning": "cotrain.federation.privacy_setup",
}

__all__: list[str] = []


def __getattr__(name: str) -> Any:
    if name not in _OLD_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"cotrain.federation.{name} moved to {_OLD_NAMES[name]}.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(_OLD_NAMES[name]), name)


def __dir__() -> list[str]:
    return sorted(__all__)
