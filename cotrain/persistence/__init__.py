"""What outlives a run: checkpoints of a running federation and saved fitted trainers.

- :mod:`~cotrain.persistence.checkpoint`: the state dicts of every stateful part of a run,
  written atomically after a round, so that a failed run resumes where it stopped;
- :mod:`~cotrain.persistence.saving`: the fitted attributes of a
  :class:`~cotrain.FederatedCoTrainer` saved with skops and loaded back
  (:func:`save_federation`, :func:`load_federation`).
"""

from cotrain.persistence.saving import (
    DroppedDataError,
    SavedFederationError,
    load_federation,
    save_federation,
)

__all__ = [
    "DroppedDataError",
    "SavedFederationError",
    "load_federation",
    "save_federation",
]


def __dir__() -> list[str]:
    return sorted(__all__)
