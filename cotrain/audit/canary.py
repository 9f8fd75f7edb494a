"""One-run privacy auditing with canaries: an empirical lower bound on a release's ε.

What it measures
----------------
Steinke, Nasr & Jagielski (2023, "Privacy auditing with one (1) training run"): ``m`` canary
records are each put into the client's private data independently with probability 1/2;
the client releases **once** (one call of its release procedure, or one federated run); the
auditor — here the server, which sees the released labels on the public pool ``U`` — scores
every canary from the release, guesses IN for the ``k_plus`` highest scores, OUT for the
``k_minus`` lowest and abstains on the rest. If the release is (ε, δ)-DP with respect to one
record of the client's data (*record-level*, the unit of every ε in cotrain unless marked
otherwise) **under the neighbouring relation that separates "canary in" from "canary out"**,
the number of correct guesses out of ``r = k_plus + k_minus`` is dominated by
``Binomial(r, e^ε / (1 + e^ε))`` plus a δ term (:mod:`cotrain.audit.canary_bound`). The largest
ε those guesses reject at level β is the **empirical lower bound**: with probability at least
1 − β it does not exceed the true ε of the release. A bound *above* a claimed ε is proof, at
confidence 1 − β, that the accounting (or the implementation) is wrong.

Neighbouring relation
---------------------
A canary absent from the data set is **add/remove**: the data with canary ``i`` and without
it differ by one added record. That is the design here (``relation="add_or_remove"``) and the
bound is compared with the claim's **add/remove** ε — the library's headline relation. With
``relation="replace_one"`` an excluded canary is not absent but replaced by a substitute
record (same features, label ``y_substitutes[i]``): the data set's size never changes and the
bound is compared with the claim's replace-one ε. A claim is an
:class:`~cotrain.audit.claims.EpsilonClaim`, ε per relation; an audit refuses a claim that
states no ε for its own relation (a replace-one ε bounds nothing about adding a record — the
row count alone may reveal it — and an add/remove ε bounds replace-one only through group
privacy, at 2ε): relations are never compared silently.

δ
-
The bound is computed at the claim's δ. A Gaussian mechanism is never ε-DP at δ = 0, so a
claim that declares a Gaussian event must carry δ > 0 (``EpsilonClaim`` refuses δ = 0 for
it; :func:`~cotrain.audit.claims.declares_gaussian` reads a ``dp_event``). δ = 0 fits pure
mechanisms only (randomized response).

Power
-----
``r`` guesses among ``m`` canaries can certify at most
:func:`~cotrain.audit.canary_bound.max_certifiable_epsilon`
(all guesses right): about ``ln(r / ln(1/β))``, 4.42 for 250 guesses at β = 0.05. An audit
of a claim at or above that value cannot fail; :func:`one_run_audit` refuses it (ValueError)
unless ``allow_powerless=True``, which warns and records ``can_fail=False`` in the result.

The bound is a lower bound for the *one* canary design used; it is loose by design, and a
value of 0 means "no evidence of leakage", not "private".
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cotrain.audit.canary_bound import (
    canary_epsilon_lower_bound,
    check_probability,
    max_certifiable_epsilon,
)
from cotrain.audit.claims import EpsilonClaim
from cotrain.audit.lira import neighbor_agreement
from cotrain.audit.metrics import AuditResult
from cotrain.privacy.accounting.composition import check_relation
from learners.checks import check_int

__all__ = [
    "CanaryAudit",
    "audit_from_scores",
    "make_canaries",
    "one_run_audit",
]


def make_canaries(
    X_public: Any, classes: Any, n_canaries: int, *, random_state: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Canaries for a label release on ``U``: copies of distinct public points, random labels.

    A canary sits exactly on a public point, so the released label of that point is the
    natural place to read it (``n_neighbors=1`` in :func:`one_run_audit`), and carries a
    label drawn uniformly from ``classes`` (the auditor needs no true label of ``U``): a
    member canary pulls its public point towards a label the point would otherwise get with
    probability about 1/C.

    Parameters
    ----------
    X_public : array-like of shape (n_public, n_features)
    classes : array-like
        The labels to draw from.
    n_canaries : int
        ``m`` <= n_public.
    random_state : int or Generator, optional

    Returns
    -------
    X_canaries : ndarray of shape (m, n_features)
    y_canaries : ndarray of shape (m,)

    Examples
    --------
    >>> import numpy as np
    >>> Xc, yc = make_canaries(np.eye(4), [0, 1], 3, random_state=0)
    >>> Xc.shape, sorted(set(yc.tolist()) - {0, 1})
    ((3, 4), [])
    """
    Xp = np.asarray(X_public, dtype=np.float64)
    if Xp.ndim != 2:
        raise ValueError(f"X_public must be 2-D, got shape {Xp.shape}")
    m = check_int(n_canaries, "n_canaries", 1)
    if m > len(Xp):
        raise ValueError(f"n_canaries ({m}) cannot exceed the public points ({len(Xp)})")
    classes = np.asarray(classes)
    if classes.ndim != 1 or classes.size < 2:
        raise ValueError("classes must list at least two labels")
    rng = np.random.default_rng(random_state)
    rows = rng.choice(len(Xp), size=m, replace=False)
    return Xp[rows].copy(), classes[rng.integers(0, classes.size, size=m)]


@dataclass(frozen=True)
class CanaryAudit:
    """Outcome of :func:`one_run_audit` (or :func:`audit_from_scores`).

    Attributes
    ----------
    epsilon_lower_bound : float
        Empirical record-level ε lower bound at confidence ``1 − beta``, under ``relation``.
    beta, delta : float
        Confidence parameter and the δ the bound is computed at.
    n_canaries, n_included : int
        ``m`` and how many canaries the coin flips put into the client's data.
    n_guesses, n_correct : int
        ``r = k_plus + k_minus`` and the correct guesses ``v``.
    membership : AuditResult
        The canary scores as a membership attack (``attack="canary"``): AUC and TPR at
        0.1 % / 1 % FPR of included against excluded canaries.
    relation : {"add_or_remove", "replace_one"}, default="add_or_remove"
        The neighbouring relation the experiment tests (canary absent, or replaced).
    max_certifiable_epsilon : float
        The design's power: the largest ε any outcome could certify
        (:func:`~cotrain.audit.canary_bound.max_certifiable_epsilon`).
    claimed_epsilon : float or None
        The audited claim's ε under ``relation``, when a claim was given.

    Examples
    --------
    >>> a = CanaryAudit(0.0, 0.05, 0.0, 10, 5, 4, 2, AuditResult(0.5, "canary", 5, 5))
    >>> a.accuracy, a.relation
    (0.5, 'add_or_remove')
    """

    epsilon_lower_bound: float
    beta: float
    delta: float
    n_canaries: int
    n_included: int
    n_guesses: int
    n_correct: int
    membership: AuditResult
    relation: str = "add_or_remove"
    max_certifiable_epsilon: float = field(default=float("nan"))
    claimed_epsilon: float | None = None

    @property
    def accuracy(self) -> float:
        """Share of correct guesses ``v / r``."""
        return self.n_correct / self.n_guesses if self.n_guesses else float("nan")

    @property
    def can_fail(self) -> bool | None:
        """Whether the design could refute the claim (``max_certifiable > claimed``); None
        without a claim."""
        if self.claimed_epsilon is None:
            return None
        return bool(self.max_certifiable_epsilon > self.claimed_epsilon)

    @property
    def violated(self) -> bool | None:
        """Whether the bound exceeds the claimed ε (the claim is refuted at level β); None
        without a claim."""
        if self.claimed_epsilon is None:
            return None
        return bool(self.epsilon_lower_bound > self.claimed_epsilon)

    def as_dict(self) -> dict[str, Any]:
        """The fields (and ``can_fail``, ``violated``) as a plain dict (for JSON)."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "membership"}
        out["can_fail"], out["violated"] = self.can_fail, self.violated
        out["membership"] = self.membership.as_dict()
        return out


def _plan(
    m: int,
    k_plus: Any,
    k_minus: Any,
    beta: Any,
    delta: Any,
    relation: Any,
    claim: EpsilonClaim | None,
    allow_powerless: bool,
) -> tuple[int, int, float, float, str, float, float | None]:
    """Check a design before any release: guesses, δ from the claim, relation, power."""
    kp = check_int(k_plus, "k_plus", 0)
    km = check_int(k_minus, "k_minus", 0)
    if kp + km == 0 or kp + km > m:
        raise ValueError(f"k_plus + k_minus must be in 1..{m} (the canaries), got {kp + km}")
    beta = check_probability(beta, "beta", closed_low=False)
    relation = check_relation(relation)
    claimed = None
    if claim is not None:
        if not isinstance(claim, EpsilonClaim):
            raise TypeError(f"claim must be an EpsilonClaim, got {type(claim).__name__}")
        claimed = claim.epsilon_for(relation)
        if delta is not None and float(delta) != claim.delta:
            raise ValueError(
                f"delta ({delta!r}) differs from the claim's δ ({claim.delta!r}): the bound "
                "must be computed at the δ of the claim it is compared with"
            )
        delta = claim.delta
    elif delta is None:
        warnings.warn(
            "one_run_audit without delta= (or claim=) audits pure ε-DP (δ = 0), which fits "
            "no Gaussian mechanism; pass delta= or claim= (required in the next release)",
            FutureWarning,
            stacklevel=3,
        )
        delta = 0.0
    delta = check_probability(delta, "delta", closed_low=True)
    power = max_certifiable_epsilon(m, kp + km, beta=beta, delta=delta)
    if claimed is not None and power <= claimed:
        message = (
            f"this audit cannot fail: {kp + km} guesses among {m} canaries certify at most "
            f"ε = {power:.3f} at β = {beta:g}, δ = {delta:g}, and the claim is ε = {claimed:g} "
            f"({relation}); use more guesses (certifying ε needs about ln(1/β)·e^ε of them) "
            "or audit a smaller ε"
        )
        if not allow_powerless:
            raise ValueError(message)
        warnings.warn(message, UserWarning, stacklevel=3)
    return kp, km, beta, delta, relation, power, claimed


def _audit(
    scores: np.ndarray,
    included: np.ndarray,
    plan: tuple[int, int, float, float, str, float, float | None],
    rng: np.random.Generator,
) -> CanaryAudit:
    kp, km, beta, delta, relation, power, claimed = plan
    m = len(scores)
    ranking = np.lexsort((rng.random(m), -scores))  # highest score first, random ties
    guess_in, guess_out = ranking[:kp], ranking[m - km :] if km else ranking[:0]
    correct = int(included[guess_in].sum() + (~included[guess_out]).sum())
    eps = canary_epsilon_lower_bound(kp + km, correct, beta=beta, delta=delta, n_canaries=m)
    if included.all() or not included.any():
        membership = AuditResult(
            float("nan"), "canary", int(included.sum()), int(m - included.sum())
        )
    else:
        membership = AuditResult.from_scores(scores[included], scores[~included], attack="canary")
    return CanaryAudit(
        epsilon_lower_bound=eps,
        beta=beta,
        delta=delta,
        n_canaries=m,
        n_included=int(included.sum()),
        n_guesses=kp + km,
        n_correct=correct,
        membership=membership,
        relation=relation,
        max_certifiable_epsilon=power,
        claimed_epsilon=claimed,
    )


def audit_from_scores(
    scores: Any,
    included: Any,
    *,
    k_plus: int,
    k_minus: int = 0,
    beta: float = 0.05,
    delta: float | None = None,
    relation: str = "add_or_remove",
    claim: EpsilonClaim | None = None,
    allow_powerless: bool = False,
    random_state: Any = None,
) -> CanaryAudit:
    """Guess and bound from canary scores an experiment already produced.

    For a release that is not labels on a public pool (a model, noisy statistics): the
    caller drew ``included`` (independent fair coins, one per canary, **before** the
    release), ran the mechanism once, and scored every canary (higher = more likely IN).
    The guesses and the bound are those of :func:`one_run_audit`, under ``relation`` —
    the relation the caller's experiment realises (canary absent: add/remove).

    Parameters
    ----------
    scores : array-like of shape (m,)
    included : array-like of bool, shape (m,)
        The coin flips.
    k_plus, k_minus, beta, delta, relation, claim, allow_powerless, random_state
        As in :func:`one_run_audit` (``random_state`` seeds the tie-breaking only).

    Returns
    -------
    CanaryAudit

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> included = rng.random(1000) < 0.5
    >>> scores = included + rng.normal(0, 0.5, 1000)     # a Gaussian with σ = Δ / 2
    >>> a = audit_from_scores(scores, included, k_plus=100, k_minus=100, delta=1e-5,
    ...                       random_state=0)
    >>> a.n_correct, round(a.epsilon_lower_bound, 2), round(a.max_certifiable_epsilon, 2)
    (200, 4.17, 4.17)
    """
    s = np.asarray(scores, dtype=np.float64)
    inc = np.asarray(included)
    if s.ndim != 1 or inc.shape != s.shape:
        raise ValueError(
            f"scores and included must be 1-D of the same length, got {s.shape} and {inc.shape}"
        )
    if inc.dtype != np.bool_:
        raise TypeError(f"included must be boolean (the coin flips), got dtype {inc.dtype}")
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite")
    plan = _plan(len(s), k_plus, k_minus, beta, delta, relation, claim, allow_powerless)
    return _audit(s, inc, plan, np.random.default_rng(random_state))


def one_run_audit(
    release: Callable[[Any, Any], Any],
    X: Any,
    y: Any,
    X_canaries: Any,
    y_canaries: Any,
    X_public: Any,
    *,
    k_plus: int,
    k_minus: int = 0,
    n_neighbors: int = 1,
    beta: float = 0.05,
    delta: float | None = None,
    relation: str = "add_or_remove",
    y_substitutes: Any = None,
    claim: EpsilonClaim | None = None,
    allow_powerless: bool = False,
    random_state: Any = None,
) -> CanaryAudit:
    """Run the one-release canary experiment against ``release`` and bound its ε from below.

    Each canary joins the client's data ``(X, y)`` with probability 1/2 (independent coin
    flips); under ``relation="replace_one"`` an excluded canary's slot holds its substitute
    ``(X_canaries[i], y_substitutes[i])`` instead, so the data's size never changes.
    ``release`` is called **once**; canary ``i`` is scored by the share of its
    ``n_neighbors`` nearest public points whose released label is ``y_canaries[i]``
    (:func:`~cotrain.audit.lira.neighbor_agreement`); the auditor guesses IN for the
    ``k_plus`` highest scores and OUT for the ``k_minus`` lowest (ties broken at random,
    independently of the coin flips), and
    :func:`~cotrain.audit.canary_bound.canary_epsilon_lower_bound` turns the number
    of correct guesses into the bound. ``k_plus`` and ``k_minus`` must be fixed before the
    run: choosing them after seeing the scores voids the confidence level.

    With ``claim``, the audit checks it: δ is the claim's, the bound is compared with the
    claim's ε **under the same relation** (a claim without it is refused), and a design that
    cannot certify more than the claimed ε is refused before the release (ValueError), or,
    with ``allow_powerless=True``, run with a warning and ``can_fail=False`` in the result.

    Parameters
    ----------
    release : callable
        ``release(X, y) -> labels`` on ``X_public``, shape ``(n_public,)`` (the client's
        learner, its labelling of ``U`` and its privacy mechanism).
    X, y : array-like
        The client's own private data (always included).
    X_canaries, y_canaries : array-like
        The ``m`` canaries (e.g. from :func:`make_canaries`).
    X_public : array-like of shape (n_public, n_features)
    k_plus, k_minus : int
        Guesses IN and OUT (``k_plus + k_minus <= m``).
    n_neighbors : int, default=1
        Public points read per canary.
    beta : float, default=0.05
        Confidence: the bound holds with probability >= 1 − β.
    delta : float, optional
        δ of the guarantee audited: the claim's by default; without a claim give it (0 only
        for a pure ε-DP mechanism such as randomized response). Omitting both audits at
        δ = 0 with a ``FutureWarning`` (required in the next release).
    relation : {"add_or_remove", "replace_one"}, default="add_or_remove"
        The neighbouring relation the experiment realises (module docstring).
    y_substitutes : array-like of shape (m,), optional
        ``relation="replace_one"`` only (and required there): the label of each excluded
        canary's substitute, different from ``y_canaries``.
    claim : EpsilonClaim, optional
        The accounting to check.
    allow_powerless : bool, default=False
        Run (with a ``UserWarning``) a claim the design cannot refute.
    random_state : int or Generator, optional
        Seeds the coin flips and the tie-breaking (not the mechanism).

    Returns
    -------
    CanaryAudit

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.neighbors import KNeighborsClassifier
    >>> rng = np.random.default_rng(0)
    >>> X_pub = rng.normal(size=(400, 5)); X = rng.normal(size=(100, 5))
    >>> y = rng.integers(0, 10, 100)
    >>> release = lambda X_, y_: KNeighborsClassifier(1).fit(X_, y_).predict(X_pub)
    >>> Xc, yc = make_canaries(X_pub, np.arange(10), 200, random_state=1)
    >>> claim = EpsilonClaim({"add_or_remove": 2.0}, delta=0.0)   # false: no noise at all
    >>> audit = one_run_audit(release, X, y, Xc, yc, X_pub, k_plus=50, k_minus=50,
    ...                       claim=claim, random_state=2)
    >>> audit.n_correct, round(audit.epsilon_lower_bound, 2), audit.violated
    (98, 2.72, True)
    """
    if not callable(release):
        raise TypeError("release must be callable: release(X, y) -> labels on X_public")
    Xd = np.asarray(X, dtype=np.float64)
    Xc = np.asarray(X_canaries, dtype=np.float64)
    Xp = np.asarray(X_public, dtype=np.float64)
    yd, yc = np.asarray(y), np.asarray(y_canaries)
    if Xd.ndim != 2 or Xc.ndim != 2 or Xp.ndim != 2:
        raise ValueError("X, X_canaries and X_public must be 2-D feature arrays")
    if len(yd) != len(Xd) or len(yc) != len(Xc):
        raise ValueError("X and y (X_canaries and y_canaries) must have the same length")
    if not (Xd.shape[1] == Xc.shape[1] == Xp.shape[1]):
        raise ValueError("X, X_canaries and X_public must have the same number of features")
    check_int(n_neighbors, "n_neighbors", 1)
    m = len(yc)
    plan = _plan(m, k_plus, k_minus, beta, delta, relation, claim, allow_powerless)
    if plan[4] == "replace_one":
        if y_substitutes is None:
            raise ValueError(
                "relation='replace_one' needs y_substitutes: each excluded canary is replaced "
                "by a substitute record (its features, that label), keeping the data's size"
            )
        ys = np.asarray(y_substitutes)
        if ys.shape != yc.shape or (ys == yc).any():
            raise ValueError(
                "y_substitutes must have one label per canary, each different from the "
                "canary's (a substitute equal to the canary changes nothing)"
            )
    elif y_substitutes is not None:
        raise ValueError("y_substitutes is for relation='replace_one' only")
    rng = np.random.default_rng(random_state)

    included = rng.random(m) < 0.5
    if plan[4] == "replace_one":
        X_run = np.concatenate([Xd, Xc])
        y_run = np.concatenate([yd, np.where(included, yc, ys)])
    else:
        X_run = np.concatenate([Xd, Xc[included]])
        y_run = np.concatenate([yd, yc[included]])
    order = rng.permutation(len(y_run))
    labels = np.asarray(release(X_run[order], y_run[order]))
    if labels.shape != (len(Xp),):
        raise ValueError(f"release must return shape ({len(Xp)},), got {labels.shape}")
    scores = neighbor_agreement(labels, Xc, yc, Xp, n_neighbors=n_neighbors).mean(axis=1)
    return _audit(scores, included, plan, rng)
