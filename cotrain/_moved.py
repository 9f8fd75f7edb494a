"""Module paths that moved into subpackages, kept importable for one release.

``import cotrain.client`` still works and gives :mod:`cotrain.federation.client` itself, with
a :class:`DeprecationWarning` naming the new path (see :mod:`learners._deprecation`, whose finder
this uses). Saved federations and checkpoints written before the move load unchanged.
"""

from __future__ import annotations

from learners._deprecation import install

__all__ = ["MOVED", "install_moved"]

#: old module path -> new module path
MOVED = {
    "cotrain.client": "cotrain.federation.client",
    "cotrain.server": "cotrain.federation.server",
    "cotrain.simulation": "cotrain.federation.simulation",
    "cotrain.sampling": "cotrain.federation.sampling",
    "cotrain.seeding": "cotrain.federation.seeding",
    "cotrain.rounds": "cotrain.federation.loop",
    "cotrain.compact": "cotrain.wire.compact",
    "cotrain.messages": "cotrain.wire.messages",
    "cotrain.broadcast": "cotrain.wire.broadcast",
    "cotrain.pools": "cotrain.runtime.pools",
    "cotrain.process_pool": "cotrain.runtime.process_pool",
    "cotrain.worker_group": "cotrain.runtime.worker_group",
    "cotrain.worker_processes": "cotrain.runtime.worker_processes",
    "cotrain.pool_worker": "cotrain.runtime.pool_worker",
    "cotrain.pool_base": "cotrain.runtime.pool_base",
    "cotrain.ray_runtime": "cotrain.runtime.ray_runtime",
    "cotrain.ray_pool": "cotrain.runtime.ray_pool",
    "cotrain.straggler": "cotrain.runtime.straggler",
    "cotrain.checkpoint": "cotrain.persistence.checkpoint",
    "cotrain.saving": "cotrain.persistence.saving",
    "cotrain.text": "cotrain.datasets.text",
    "cotrain.hostile": "cotrain.robustness.hostile",
}


def install_moved() -> None:
    """Make the old paths of :data:`MOVED` importable (idempotent)."""
    install(MOVED)
