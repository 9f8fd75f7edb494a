"""Label mechanisms: what a private client releases each round, and the noise it adds.

- :mod:`~cotrain.privacy.mechanisms.base` — the protocol every mechanism follows
  (:class:`LabelMechanism`, :class:`ClientRound`, :class:`Release`, :func:`as_mechanism`) and
  :class:`RandomizedResponse`;
- :mod:`~cotrain.privacy.mechanisms.xor` and :mod:`~cotrain.privacy.mechanisms.soft_labels` —
  noise on the labels (:class:`XORMechanism`, :class:`GaussianSoftLabels`);
- :mod:`~cotrain.privacy.mechanisms.teachers` — subsample-and-aggregate inside one site
  (:class:`SubsampleAndAggregate`), its teachers' votes
  (:mod:`~cotrain.privacy.mechanisms.teacher_counts`) on keyed-hash shards
  (:mod:`~cotrain.privacy.mechanisms.shards`);
- :mod:`~cotrain.privacy.mechanisms.secure_votes` — the teachers' votes summed across sites
  under secure aggregation (:class:`SecureTeacherVotes`), with distributed Skellam noise
  (:mod:`~cotrain.privacy.mechanisms.skellam`);
- :mod:`~cotrain.privacy.mechanisms.dpsgd` — DP-SGD training of a torch client
  (:class:`DPSGD`);
- :mod:`~cotrain.privacy.mechanisms.param_checks` — the parameter checks they share.
"""

from cotrain.privacy.mechanisms.base import (
    ClientRound,
    LabelMechanism,
    RandomizedResponse,
    Release,
    as_mechanism,
)
from cotrain.privacy.mechanisms.dpsgd import DPSGD, dpsgd_epsilon
from cotrain.privacy.mechanisms.secure_votes import SecurePlan, SecureTeacherVotes, plan_epsilon
from cotrain.privacy.mechanisms.shards import record_encodings, teacher_shards
from cotrain.privacy.mechanisms.skellam import (
    skellam_epsilon,
    skellam_log_pmf,
    skellam_mu,
    skellam_noise,
    skellam_pld,
    skellam_site_share,
)
from cotrain.privacy.mechanisms.soft_labels import GaussianSoftLabels
from cotrain.privacy.mechanisms.teacher_counts import teacher_votes
from cotrain.privacy.mechanisms.teachers import SubsampleAndAggregate
from cotrain.privacy.mechanisms.xor import XORMechanism

__all__ = [
    "DPSGD",
    "ClientRound",
    "GaussianSoftLabels",
    "LabelMechanism",
    "RandomizedResponse",
    "Release",
    "SecurePlan",
    "SecureTeacherVotes",
    "SubsampleAndAggregate",
    "XORMechanism",
    "as_mechanism",
    "dpsgd_epsilon",
    "plan_epsilon",
    "record_encodings",
    "skellam_epsilon",
    "skellam_log_pmf",
    "skellam_mu",
    "skellam_noise",
    "skellam_pld",
    "skellam_site_share",
    "teacher_shards",
    "teacher_votes",
]


def __dir__() -> list[str]:
    return sorted(__all__)
