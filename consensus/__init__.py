"""Consensus rules: how many clients' label votes become one pseudo-label.

Pure, vectorised numpy functions (no loop over examples) and thin callable classes around them.
Inputs are hard votes ``(m, n)`` of integer class codes with -1 for "did not vote", or
probabilities ``(m, n, C)`` with an all-NaN row for "did not vote"; optional non-negative
``weights`` per client ``(m,)`` or per client per example ``(m, n)``.

This package depends on numpy only and never imports ``cotrain`` or ``learners``.

Examples
--------
>>> import numpy as np
>>> import consensus
>>> votes = np.array([[0, 1, 1], [0, 1, 2], [1, 1, -1]])
>>> consensus.majority_vote(votes, n_classes=3)
array([0, 1, 1])
>>> consensus.get_consensus("qualified")(votes, n_classes=3)
array([-1,  1, -1])
"""

from ._base import Consensus
from ._params import ParamsMixin
from .certainty import CertaintyWeighted, certainty_weighted
from .dawid_skene import DawidSkene, dawid_skene, dawid_skene_vote
from .dual import DualDistillation
from .hard import MajorityVote, QualifiedMajority, majority_vote, qualified_majority, vote_counts
from .noisy import NoisyArgmax
from .quality import QualityVote, quality_vote
from .registry import available_consensus, get_consensus, register_consensus
from .reliability import ReliabilityVote, reliability_vote
from .robust import ReputationVote, TrimmedVote, client_agreement, trimmed_vote
from .soft import EntropyWeighted, SoftMean, entropy_weighted, soft_mean

__all__ = [
    "CertaintyWeighted",
    "Consensus",
    "DawidSkene",
    "DualDistillation",
    "EntropyWeighted",
    "MajorityVote",
    "NoisyArgmax",
    "ParamsMixin",
    "QualifiedMajority",
    "QualityVote",
    "ReliabilityVote",
    "ReputationVote",
    "SoftMean",
    "TrimmedVote",
    "available_consensus",
    "certainty_weighted",
    "client_agreement",
    "dawid_skene",
    "dawid_skene_vote",
    "entropy_weighted",
    "get_consensus",
    "majority_vote",
    "qualified_majority",
    "quality_vote",
    "register_consensus",
    "reliability_vote",
    "soft_mean",
    "trimmed_vote",
    "vote_counts",
]

# the built-in names (`registry` imports no rule, so that rules may look others up by name)
for _names, _factory in [
    (("majority", "majority_vote"), MajorityVote),
    (("qualified", "qualified_majority"), QualifiedMajority),
    (("mean", "soft_mean", "dd"), SoftMean),
    (("entropy", "entropy_weighted", "fedds"), EntropyWeighted),
    (("certainty", "certainty_weighted", "fedaux"), CertaintyWeighted),
    (("noisy_argmax", "gnmax"), NoisyArgmax),
    (("trimmed", "trimmed_vote"), TrimmedVote),
    (("reputation", "reputation_vote"), ReputationVote),
    (("quality", "quality_vote"), QualityVote),
    (("reliability", "reliability_vote"), ReliabilityVote),
    (("dawid_skene", "staple"), DawidSkene),
]:
    for _name in _names:
        register_consensus(_name, _factory)
del _names, _factory, _name


def __dir__() -> list[str]:
    return sorted(__all__)
