"""Membership-inference metrics: ROC AUC and TPR at a low FPR, and the result object.

Every attack of :mod:`cotrain.audit` reports three numbers, members as the positive class:

- the ROC AUC (the average-case vulnerability "VUL" of the FedCT paper), and
- the true-positive rate at 0.1 % and at 1 % false-positive rate (Carlini et al. 2022,
  "Membership inference attacks from first principles"): how many members an attacker
  identifies *confidently*, the number that matters for a worst-case reading of privacy.

TPR at a target FPR is computed exactly from the empirical ROC curve, without interpolation:
the largest TPR of any threshold on the scores whose FPR is at most the target
(``sklearn.metrics.roc_curve(..., drop_intermediate=False)``; every point of that curve is a
deterministic threshold "member iff score ≥ t", so the number is attainable, not
interpolated). With ``n`` non-members the FPR grid is ``0, 1/n, 2/n, ...``: at 0.1 % FPR and
fewer than 1,000 non-members the number is the TPR at **zero** false positives, and a
single non-member that outscores all members makes it 0. Report the non-member count with it
(:class:`AuditResult` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

__all__ = ["LOW_FPRS", "AuditResult", "membership_auc", "membership_metrics", "tpr_at_fpr"]

LOW_FPRS = (0.001, 0.01)
"""The false-positive rates at which every audit reports the TPR (0.1 % and 1 %)."""


def _scores(member_scores: Any, nonmember_scores: Any) -> tuple[np.ndarray, np.ndarray]:
    m = np.asarray(member_scores, dtype=np.float64).ravel()
    n = np.asarray(nonmember_scores, dtype=np.float64).ravel()
    if m.size == 0 or n.size == 0:
        raise ValueError("membership scores need at least one member and one non-member score")
    if not (np.isfinite(m).all() and np.isfinite(n).all()):
        raise ValueError("membership scores must be finite")
    return m, n


def membership_auc(member_scores: Any, nonmember_scores: Any) -> float:
    """ROC AUC of membership scores, members as the positive class.

    Parameters
    ----------
    member_scores, nonmember_scores : array-like of shape (n,)
        Scores of members and of non-members; higher means "more likely a member".

    Returns
    -------
    float
        The AUC: 1.0 if every member scores above every non-member, 0.5 for scores
        that carry no information (ties count one half).

    Examples
    --------
    >>> membership_auc([0.9, 0.8], [0.1, 0.2])
    1.0
    >>> membership_auc([1, 1, 0], [1, 1, 0])
    0.5
    """
    m, n = _scores(member_scores, nonmember_scores)
    y = np.r_[np.ones(m.size), np.zeros(n.size)]
    return float(roc_auc_score(y, np.r_[m, n]))


def tpr_at_fpr(member_scores: Any, nonmember_scores: Any, fpr: float) -> float:
    """Largest TPR of a threshold on the scores whose FPR is at most ``fpr`` (exact ROC).

    Parameters
    ----------
    member_scores, nonmember_scores : array-like of shape (n,)
        As for :func:`membership_auc`.
    fpr : float
        Target false-positive rate in [0, 1].

    Returns
    -------
    float
        ``max{TPR(t) : FPR(t) ≤ fpr}`` over the thresholds ``t`` of the empirical ROC curve
        (no interpolation; 0.0 when even the strictest threshold has a false positive).

    Examples
    --------
    >>> tpr_at_fpr([5, 4, 1], [3, 2, 0, -1], 0.0)     # 2 members above every non-member
    0.6666666666666666
    >>> tpr_at_fpr([5, 4, 1], [6, 2, 0, -1], 0.0)     # a non-member scores highest
    0.0
    >>> tpr_at_fpr([5, 4, 1], [6, 2, 0, -1], 0.25)
    0.6666666666666666
    """
    m, n = _scores(member_scores, nonmember_scores)
    if isinstance(fpr, bool) or not 0.0 <= float(fpr) <= 1.0:
        raise ValueError(f"fpr must be a number in [0, 1], got {fpr!r}")
    y = np.r_[np.ones(m.size), np.zeros(n.size)]
    fprs, tprs, _ = roc_curve(y, np.r_[m, n], drop_intermediate=False)
    ok = fprs <= float(fpr) + 1e-12
    return float(tprs[ok].max()) if ok.any() else 0.0


def membership_metrics(member_scores: Any, nonmember_scores: Any) -> dict[str, float]:
    """AUC and TPR at each of :data:`LOW_FPRS`, as the fields of :class:`AuditResult`.

    Examples
    --------
    >>> membership_metrics([3, 2], [1, 0])
    {'auc': 1.0, 'tpr_at_0_1pct_fpr': 1.0, 'tpr_at_1pct_fpr': 1.0}
    """
    return {
        "auc": membership_auc(member_scores, nonmember_scores),
        "tpr_at_0_1pct_fpr": tpr_at_fpr(member_scores, nonmember_scores, LOW_FPRS[0]),
        "tpr_at_1pct_fpr": tpr_at_fpr(member_scores, nonmember_scores, LOW_FPRS[1]),
    }


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one membership-inference attack.

    Attributes
    ----------
    auc : float
        ROC AUC of the membership scores, members as positives (the vulnerability VUL).
    attack : str
        The attack: ``"yeom"``, ``"label-noise"``, ``"confidence"``, ``"reference"``
        (:mod:`cotrain.audit.membership`) or ``"lira"`` (:mod:`cotrain.audit.lira`).
    n_members, n_nonmembers : int
        Records scored on each side.
    tpr_at_0_1pct_fpr, tpr_at_1pct_fpr : float
        TPR at 0.1 % and 1 % FPR (:func:`tpr_at_fpr`; NaN when not computed). With fewer
        than 1,000 (100) non-members these are TPRs at zero false positives.

    Examples
    --------
    >>> AuditResult.from_scores([3, 2], [1, 0], attack="yeom").tpr_at_1pct_fpr
    1.0
    """

    auc: float
    attack: str
    n_members: int
    n_nonmembers: int
    tpr_at_0_1pct_fpr: float = float("nan")
    tpr_at_1pct_fpr: float = float("nan")

    @classmethod
    def from_scores(cls, member_scores: Any, nonmember_scores: Any, *, attack: str) -> AuditResult:
        """Result of an attack from its member and non-member scores (all metrics)."""
        metrics = membership_metrics(member_scores, nonmember_scores)
        return cls(
            attack=attack,
            n_members=int(np.size(member_scores)),
            n_nonmembers=int(np.size(nonmember_scores)),
            **metrics,
        )

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (for JSON).

        Examples
        --------
        >>> AuditResult(0.5, "yeom", 1, 1).as_dict()["attack"]
        'yeom'
        """
        return {
            "attack": self.attack,
            "auc": self.auc,
            "tpr_at_0_1pct_fpr": self.tpr_at_0_1pct_fpr,
            "tpr_at_1pct_fpr": self.tpr_at_1pct_fpr,
            "n_members": self.n_members,
            "n_nonmembers": self.n_nonmembers,
        }
