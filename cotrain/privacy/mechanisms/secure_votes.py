"""Teacher votes summed across sites under secure aggregation: the noise is paid once.

:class:`~cotrain.privacy.SubsampleAndAggregate` makes each site hide one of its records among
its own few teachers, so each site adds noise of tens of votes per count to histograms of
8–100 votes. :class:`SecureTeacherVotes` keeps the teachers (keyed-hash shards, one fresh
clone of the site's learner per shard, trained with the pseudo-labelled pool P) but sums their
vote histograms **across all sites** under secure aggregation: every site adds its share of
integer Skellam noise (:mod:`cotrain.privacy.mechanisms.skellam`) to its histogram on the round's
public queries, and the server learns only the sum over sites. One record still moves one vote, so
the noise the sum needs is the same as one site's, but it is paid once for the federation while
the vote margins grow with the number of sites.

The protocol of one round (in-process: :mod:`cotrain.federation.secure_sum`; the server
object receives only sums):

1. The server chooses the round's queries from public information only (every example of U,
   or, with ``queries=``, the examples the released sums were least sure of).
2. **Check** (only with ``threshold``): each site sends its histogram on the queries plus
   ``Sk(share_check)``; the server learns the sum and keeps the queries whose noisy top count
   reaches ``threshold`` × (contributing sites × ``n_teachers``) — at most ``answers`` of them,
   the largest first (Confident-GNMax, Papernot et al. 2018, with Skellam noise).
3. **Answer**: each site sends its histogram on the kept queries plus ``Sk(share_answer)``
   (without ``threshold``: on every query, in one step); the argmax of the sum labels them.
   Queries that are not answered keep the label an earlier round gave them, or none.

**Accounting** (:class:`SecurePlan`, exact up to dp-accounting's pessimistic discretisation;
unit: one private record of one site; relation: add/remove; adversary: the server and anyone
who sees the sums). A record lies in one teacher's shard at its site, so adding or removing it
moves that teacher's vote: on each query, at most two counts of the summed histogram change,
each by one. A round is therefore ``2 · n_queries`` unit shifts of ``Sk(μ_check)`` (the check)
and ``2 · answers`` unit shifts of ``Sk(μ_answer)`` (the answers), composed over rounds. The
answer slots are accounted **whether or not they are used**: which queries are answered is a
function of the released check sum, so the answers are an adaptively chosen sequence of at
most ``answers`` mechanisms per round, each dominated by the same pair of Skellam
distributions, and the composition of their worst case bounds the run (data-independent; no
data-dependent analysis is applied here). The bound holds under stated assumptions
(:meth:`SecurePlan.assumptions`): secure aggregation reveals nothing but the sum of at least
``n_sites - dropouts`` sites' vectors, at most ``colluders`` sites reveal their own noise to the
server, and every site draws its share honestly (each site over-provisions its share,
:func:`~cotrain.privacy.mechanisms.skellam.skellam_site_share`, so that the noise nobody but honest
answering sites knows is at least ``Sk(μ)``).

Examples
--------
>>> votes = SecureTeacherVotes(n_teachers=20, epsilon=4.0)
>>> plan = votes.plan(n_sites=10, n_public=200, n_classes=2, rounds=3)   # 2 releases
>>> plan.rounds, plan.answers, round(plan.mu_answer) > 0, plan.epsilon() <= 4.0
(2, 200, True, True)
>>> round(plan.share_answer * 10 / plan.mu_answer, 6)   # ten sites, no dropouts: a tenth each
1.0
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from cotrain.privacy.mechanisms.base import ClientRound, LabelMechanism
from cotrain.privacy.mechanisms.param_checks import check_delta, check_epsilon, check_positive
from cotrain.privacy.mechanisms.skellam import skellam_noise, skellam_pld, skellam_site_share
from cotrain.privacy.mechanisms.teacher_counts import teacher_votes
from learners.checks import check_int

__all__ = ["SecurePlan", "SecureTeacherVotes", "SkellamShifts", "plan_epsilon", "shifts_epsilon"]


def plan_epsilon(
    mu_answer: float,
    answer_shifts: int,
    delta: float,
    mu_check: float | None = None,
    check_shifts: int = 0,
) -> float:
    """ε (add/remove of one record) of ``answer_shifts`` unit shifts of ``Sk(mu_answer)``
    composed with ``check_shifts`` unit shifts of ``Sk(mu_check)``.

    Examples
    --------
    >>> from cotrain.privacy.mechanisms.skellam import skellam_epsilon
    >>> plan_epsilon(4000.0, 200, 1e-5) == skellam_epsilon(4000.0, 100, 1e-5)
    True
    """
    events = [SkellamShifts(mu_answer, check_int(answer_shifts, "answer_shifts", 1))]
    if mu_check is not None and check_shifts > 0:
        events.append(SkellamShifts(mu_check, check_shifts))
    return shifts_epsilon(events, delta)


@dataclass(frozen=True)
class SkellamShifts:
    """The privacy event of one share a site contributed to a secure sum: ``shifts`` unit
    shifts of ``Sk(mu)`` (two per asked query and answer slot, see the module docstring),
    ``mu`` being the variance the *sum* keeps under the plan's assumptions.

    A secure site's own ledger records one per share it sends
    (:class:`~cotrain.privacy.ledgers.site_ledger.SiteLedger`), whatever run asked for it,
    and composes them with :func:`shifts_epsilon`.

    Examples
    --------
    >>> e = SkellamShifts(400.0, 20)
    >>> SkellamShifts.from_json(e.to_json()) == e
    True
    """

    mu: float
    shifts: int

    def to_json(self) -> dict[str, Any]:
        """JSON types, for a ledger on disk."""
        return {"type": "SkellamShifts", "mu": float(self.mu), "shifts": int(self.shifts)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SkellamShifts:
        """The inverse of :meth:`to_json`."""
        return cls(float(data["mu"]), int(data["shifts"]))


def shifts_epsilon(events: Any, delta: float) -> float:
    """ε (add/remove of one record) of ``events`` (:class:`SkellamShifts`), composed: the
    shifts of each noise level added up, the levels composed from the least noisy on — for
    a run that kept its plan, exactly :meth:`SecurePlan.epsilon` of its releases.

    Examples
    --------
    >>> plan = SecurePlan(4, 10, 2, 2, answers=5, mu_answer=400.0, mu_check=1600.0,
    ...                   delta=1e-5)
    >>> one = [plan.step_event("first"), plan.step_event("answer")]
    >>> shifts_epsilon(one * 2, 1e-5) == plan.epsilon(2)
    True
    >>> shifts_epsilon([], 1e-5)
    0.0
    """
    totals: dict[float, int] = {}
    for event in events:
        totals[float(event.mu)] = totals.get(float(event.mu), 0) + int(event.shifts)
    if not totals:
        return 0.0
    return _composed_shifts(tuple(sorted(totals.items())), check_delta(delta))


@functools.lru_cache(maxsize=256)
def _composed_shifts(totals: tuple[tuple[float, int], ...], delta: float) -> float:
    """ε of the ``(mu, shifts)`` totals, from the least noisy level on (cached: every site
    of a run, and every look-up of one ledger, asks for the same totals)."""
    pld = skellam_pld(*totals[0])
    for mu, shifts in totals[1:]:
        pld = pld.compose(skellam_pld(mu, shifts))
    return float(pld.get_epsilon_for_delta(delta))


@dataclass(frozen=True)
class SecurePlan:
    """The public noise plan of a secure-sum run: what every site adds and what it costs.

    Every site computes the same plan from public configuration (the mechanism's parameters,
    the number of sites, |U|, the classes and the rounds), so no site needs the server's word
    for its noise.

    Attributes
    ----------
    n_sites, n_queries, n_classes, rounds : int
        Sites asked to contribute; public examples asked per round; classes; rounds planned.
    answers : int
        Answer slots per round (``n_queries`` without a threshold): the most queries a site
        answers in one round, accounted whether used or not.
    mu_answer : float
        Skellam variance every answered count of the sum keeps (at least, under the
        assumptions).
    mu_check : float or None
        The same for the threshold check's counts (None: no check).
    delta : float
    dropouts, colluders : int
        Sites that may fail to contribute, and sites that may reveal their noise.

    Examples
    --------
    >>> plan = SecurePlan(4, 10, 2, 1, answers=10, mu_answer=400.0, mu_check=None,
    ...                   delta=1e-5, dropouts=1, colluders=0)
    >>> plan.share_answer                  # 400 / (4 - 1)
    133.33333333333334
    >>> plan.shifts(rounds=1)              # 2 unit shifts per answered query
    (20, 0)
    """

    n_sites: int
    n_queries: int
    n_classes: int
    rounds: int
    answers: int
    mu_answer: float
    mu_check: float | None
    delta: float
    dropouts: int = 0
    colluders: int = 0

    @property
    def share_answer(self) -> float:
        """The Skellam parameter each site adds to its answer histogram."""
        return skellam_site_share(self.mu_answer, self.n_sites, self.dropouts, self.colluders)

    @property
    def share_check(self) -> float | None:
        """The Skellam parameter each site adds to its check histogram (None: no check)."""
        if self.mu_check is None:
            return None
        return skellam_site_share(self.mu_check, self.n_sites, self.dropouts, self.colluders)

    @property
    def min_sites(self) -> int:
        """Fewest contributing sites whose sum keeps the planned noise."""
        return self.n_sites - self.dropouts

    def shifts(self, rounds: int) -> tuple[int, int]:
        """``(answer unit shifts, check unit shifts)`` of ``rounds`` rounds."""
        checks = 0 if self.mu_check is None else 2 * self.n_queries * rounds
        return 2 * self.answers * rounds, checks

    def step_event(self, step: str) -> SkellamShifts:
        """The event of one share a site sends at ``step`` of a round: ``"first"`` (the
        check share on every query, or without a check the answer share) or ``"answer"``
        (the answer share on the selected rows, every slot accounted).

        Examples
        --------
        >>> plan = SecurePlan(4, 10, 2, 1, answers=5, mu_answer=400.0, mu_check=1600.0,
        ...                   delta=1e-5)
        >>> plan.step_event("first"), plan.step_event("answer")
        (SkellamShifts(mu=1600.0, shifts=20), SkellamShifts(mu=400.0, shifts=10))
        """
        if step == "answer" or (step == "first" and self.mu_check is None):
            return SkellamShifts(self.mu_answer, 2 * self.answers)
        if step == "first" and self.mu_check is not None:
            return SkellamShifts(self.mu_check, 2 * self.n_queries)
        raise ValueError(f"step must be 'first' or 'answer', got {step!r}")

    def epsilon(self, rounds: int | None = None) -> float:
        """ε of one record after ``rounds`` rounds (default: every planned round), at
        :attr:`delta`, add/remove, against the server: a bound (see the module docstring).

        Examples
        --------
        >>> plan = SecurePlan(10, 100, 2, 2, answers=100, mu_answer=4000.0, mu_check=None,
        ...                   delta=1e-5)
        >>> plan.epsilon(1) < plan.epsilon() < 2 * plan.epsilon(1)
        True
        >>> plan.epsilon(0)
        0.0
        """
        rounds = self.rounds if rounds is None else check_int(rounds, "rounds", 0)
        if rounds == 0:
            return 0.0
        answer, check = self.shifts(rounds)
        return plan_epsilon(self.mu_answer, answer, self.delta, self.mu_check, check)

    def assumptions(self) -> list[str]:
        """What the bound assumes, in sentences (for every report that prints ε)."""
        return [
            "secure aggregation reveals to the server only the sum of the sites' vectors, "
            f"never one site's; at least {self.min_sites} of the {self.n_sites} sites "
            "contribute to every sum (a sum with fewer is not revealed); on Flower, SecAgg+ "
            "(flwr 1.41) relays the sites' public keys without authenticating them, so this "
            "holds against a server that follows the SecAgg+ protocol",
            f"at most {self.colluders} site(s) reveal their own noise to the server",
            "every site draws its Skellam share honestly from fresh randomness",
            "the server is curious; it may choose the queries, but every site enforces the "
            "plan (at most the planned rounds and answer slots, the same reply to a repeated "
            "request)",
        ]

    def describe(self) -> str:
        """The guarantee in one sentence."""
        return (
            "one private training record of any one site, against the server and anyone who "
            "sees the summed vote histograms (add/remove; assumptions: "
            + "; ".join(self.assumptions())
            + ")"
        )


class SecureTeacherVotes(LabelMechanism):
    """Record-level DP labels for any learner, teacher votes summed across sites under
    secure aggregation (``FederatedCoTrainer(privacy=SecureTeacherVotes(...))``).

    Each site trains ``n_teachers`` teachers on keyed-hash shards of its private records
    (each with the pseudo-labelled pool P), adds its share of Skellam noise to their vote
    histogram on the round's queries, and the server learns only the sum over sites (see the
    module docstring for the protocol and its accounting). The site's own model — its
    learner on all its rows ∪ P — never leaves it. With ``threshold``, the sum answers a
    query only where its noisy top count clears the threshold (Confident-GNMax), and the
    clients train on the answered part of U.

    Parameters
    ----------
    n_teachers : int, default=50
        Teachers per site (>= 1).
    epsilon : float, optional
        ε of one private record **for the whole run** (all ``rounds``), at ``delta``,
        add/remove; the noise is calibrated to it. Give exactly one of ``epsilon`` and
        ``mu``.
    mu : float, optional
        The Skellam variance each answered count of the sum keeps (σ² in votes²).
    rounds : int, optional
        Releases the budget is planned over; None: one fewer than the trainer's ``rounds``
        (at least one). After the last release the sites train once more, on the last
        consensus, and release nothing — a release in the trainer's last round would reach
        no site's model — and the trainer stops (``stopped_reason_ == "privacy budget"``
        when rounds were left). A site refuses a release past the plan. A deployed site
        states it (and ``n_sites``) in its own ``[privacy]``, so no server can claim
        another.
    n_sites : int, optional
        The federation's number of sites the noise is planned for (each site adds
        ``1/(n_sites - dropouts - colluders)`` of it); None: the trainer's number of clients.
        A plan for another number is refused. A deployed site requires it: a server that
        claimed more sites would shrink every site's share of the noise.
    threshold : float, optional
        Confident-GNMax: answer a query only where the check sum's top count is at least
        ``threshold`` × (contributing sites × ``n_teachers``), in (0, 1]. None: answer
        every query in one step.
    max_answered : float, default=0.5
        With ``threshold``: the share of a round's queries that may be answered (the answer
        slots, accounted whether used or not), in (0, 1].
    check_noise : float, default=2.0
        With ``threshold``: the check's noise standard deviation over the answer's (>= 1;
        a noisier check is cheaper).
    queries : int or float, optional
        Public examples asked per round: a count, or a share of U in (0, 1]; None: all of
        U. After the first round the server asks, from public information only, the
        examples never answered and then those whose last released sum had the smallest
        margin.
    dropouts, colluders : int, default=0
        Sites that may fail to contribute to a sum, and sites that may reveal their own
        noise to the server; each site over-provisions its noise for both.
    delta : float, default=1e-5
    budget : float, optional
        The site's ε budget over **every run** it takes part in (one private record,
        add/remove, against the server, under the plan's assumptions): its own ledger
        (:class:`~cotrain.privacy.ledgers.site_ledger.SiteLedger`, on its disk when
        deployed) composes every share it sent (:func:`shifts_epsilon`) and refuses one
        that would pass it. None: unlimited in process, and at a deployed site
        :data:`~cotrain.privacy.ledgers.site_ledger.DEFAULT_SITE_BUDGET`; ``math.inf``: no
        limit there either (each run still keeps to its plan).

    Attributes
    ----------
    unit : "record"
    adversary : "server"
    neighbors : "add_or_remove"
    accountable : False
        Its releases are accounted for the whole federation by the run's
        :class:`~cotrain.privacy.ledgers.secure_ledger.SecureVotesLedger`, not per client.
    reports_events : True
        Each share's event (:meth:`SecurePlan.step_event`) is the site's to record: its own
        ledger composes them across runs (:meth:`reported_epsilon`).
    model_trusts : True
        A site's own model never leaves it (only its teachers' noisy votes do), so the trusts
        that build a site's predictor apply: ``trust="auto"`` is
        :class:`~cotrain.trust.cross_fit.CrossFitTrust` (blend with the local-only
        model) as without privacy. Its out-of-fold accuracy and weights stay at the site.

    Examples
    --------
    >>> votes = SecureTeacherVotes(n_teachers=10, mu=900.0, threshold=0.6)
    >>> plan = votes.plan(n_sites=5, n_public=40, n_classes=3, rounds=1)
    >>> plan.answers, plan.mu_check, plan.share_answer   # 20 slots, check σ twice the answer's
    (20, 3600.0, 180.0)
    """

    reports_events = True
    round_protocol = "secure-sum"
    model_trusts: ClassVar[bool] = True

    def __init__(
        self,
        *,
        n_teachers: int = 50,
        epsilon: float | None = None,
        mu: float | None = None,
        rounds: int | None = None,
        n_sites: int | None = None,
        threshold: float | None = None,
        max_answered: float = 0.5,
        check_noise: float = 2.0,
        queries: int | float | None = None,
        dropouts: int = 0,
        colluders: int = 0,
        delta: float = 1e-5,
        budget: float | None = None,
    ) -> None:
        self.n_teachers = n_teachers
        self.epsilon = epsilon
        self.mu = mu
        self.rounds = rounds
        self.n_sites = n_sites
        self.threshold = threshold
        self.max_answered = max_answered
        self.check_noise = check_noise
        self.queries = queries
        self.dropouts = dropouts
        self.colluders = colluders
        self.delta = delta
        self.budget = budget

    # ------------------------------------------------------------------ parameters
    @property
    def accountable(self) -> bool:
        """False: the run's :class:`~cotrain.privacy.ledgers.secure_ledger.SecureVotesLedger`
        accounts the sums for the whole federation (not a per-client ledger)."""
        return False

    def _check_params(self) -> None:
        check_int(self.n_teachers, "n_teachers", 1)
        check_epsilon(self.epsilon, "epsilon", allow_none=True)
        check_positive(self.mu, "mu", allow_none=True)
        if (self.epsilon is None) == (self.mu is None):
            raise ValueError(
                "SecureTeacherVotes needs exactly one of epsilon (the whole run's ε, to "
                f"calibrate the noise) and mu (the noise variance), got epsilon="
                f"{self.epsilon!r}, mu={self.mu!r}"
            )
        if self.rounds is not None:
            check_int(self.rounds, "rounds", 1)
        if self.n_sites is not None:
            check_int(self.n_sites, "n_sites", 1)
        if self.threshold is not None:
            _check_share(self.threshold, "threshold")
        _check_share(self.max_answered, "max_answered")
        check = check_positive(self.check_noise, "check_noise")
        if check is None or check < 1:
            raise ValueError(f"check_noise must be a number >= 1, got {self.check_noise!r}")
        if self.queries is not None:
            _check_queries(self.queries)
        check_int(self.dropouts, "dropouts", 0)
        check_int(self.colluders, "colluders", 0)
        super()._check_params()

    def n_queries(self, n_public: int) -> int:
        """Public examples asked per round.

        Examples
        --------
        >>> SecureTeacherVotes(mu=1.0, queries=0.25).n_queries(1000)
        250
        >>> SecureTeacherVotes(mu=1.0).n_queries(1000)
        1000
        """
        self._check_params()
        n_public = check_int(n_public, "n_public", 1)
        if self.queries is None:
            return n_public
        asked = _check_queries(self.queries)
        count = asked if isinstance(asked, int) else math.ceil(asked * n_public)
        return max(1, min(count, n_public))

    def plan(self, n_sites: int, n_public: int, n_classes: int, rounds: int) -> SecurePlan:
        """The run's :class:`SecurePlan` (the noise calibrated to ``epsilon`` if given).

        ``rounds`` is the trainer's: the plan covers ``rounds - 1`` releases (at least
        one) unless the mechanism's own ``rounds`` is set.

        Raises
        ------
        ValueError
            If a parameter is invalid, ``dropouts + colluders >= n_sites``, or ``n_sites``
            is not the mechanism's own ``n_sites``.
        """
        self._check_params()
        n_sites = check_int(n_sites, "n_sites", 1)
        if self.n_sites is not None and n_sites != self.n_sites:
            raise ValueError(
                f"SecureTeacherVotes(n_sites={self.n_sites}) plans its noise for "
                f"{self.n_sites} sites; this federation has {n_sites}"
            )
        n_classes = check_int(n_classes, "n_classes", 1)
        rounds = check_int(rounds, "rounds", 1)
        rounds = max(1, rounds - 1) if self.rounds is None else int(self.rounds)
        skellam_site_share(1.0, n_sites, int(self.dropouts), int(self.colluders))  # checks both
        n_q = self.n_queries(n_public)
        answers = n_q if self.threshold is None else max(1, math.ceil(self.max_answered * n_q))
        ratio = None if self.threshold is None else float(self.check_noise) ** 2

        def make(mu: float) -> SecurePlan:
            return SecurePlan(
                n_sites,
                n_q,
                n_classes,
                rounds,
                answers,
                mu,
                None if ratio is None else ratio * mu,
                float(self.delta),
                int(self.dropouts),
                int(self.colluders),
            )

        if self.mu is not None:
            return make(float(self.mu))
        target = check_positive(self.epsilon, "epsilon")
        assert target is not None  # exactly one of epsilon and mu is given (checked above)
        answer, check = make(1.0).shifts(rounds)
        # start from the Gaussian limit (L2² = shifts / μ) and search on a log scale
        lo = 1e-3
        hi = max(1.0, 2 * (answer + check) * math.log(1.25 / self.delta) / target**2) * 4
        while make(hi).epsilon() > target:
            lo, hi = hi, hi * 4
        while hi / lo > 1.005:
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if make(mid).epsilon() > target else (lo, mid)
        return make(hi)

    # ------------------------------------------------------------------ the protocol
    def check_federation(self, consensus: Any, estimators: list[Any]) -> None:
        """The sum's argmax is the consensus: refuse any rule other than a plain majority.

        Examples
        --------
        >>> from consensus import SoftMean
        >>> SecureTeacherVotes(mu=1.0).check_federation(SoftMean(), [])
        Traceback (most recent call last):
        ...
        ValueError: privacy=SecureTeacherVotes forms the consensus from the summed teacher \
votes (their argmax); consensus=SoftMean cannot apply: use consensus='majority' or 'auto'
        """
        from consensus import MajorityVote

        if type(consensus) is not MajorityVote:
            raise ValueError(
                "privacy=SecureTeacherVotes forms the consensus from the summed teacher votes "
                f"(their argmax); consensus={type(consensus).__name__} cannot apply: use "
                "consensus='majority' or 'auto'"
            )

    def site_votes(
        self, step: ClientRound, queries: NDArray[np.intp], rng: np.random.Generator
    ) -> NDArray[np.int64]:
        """A site's clean teacher vote histogram ``(len(queries), C)`` on the queries
        (:func:`~cotrain.privacy.mechanisms.teacher_counts.teacher_votes`, shard key from ``rng``);
        it never leaves the site without noise (:meth:`noisy_share`).

        Examples
        --------
        >>> from sklearn.tree import DecisionTreeClassifier
        >>> X = np.arange(40.0).reshape(-1, 1); y = (X[:, 0] >= 20).astype(np.int64)
        >>> step = ClientRound(np.zeros(2, dtype=np.int64), np.array([0, 1]),
        ...                    DecisionTreeClassifier(), X, y, np.array([[1.0], [38.0]]))
        >>> votes = SecureTeacherVotes(n_teachers=3, mu=1.0).site_votes(
        ...     step, np.array([1]), np.random.default_rng(0))
        >>> votes                 # three teachers, each on its own shard, vote on U[1]
        array([[0, 3]])
        """
        self._check_params()
        X_public = step.X_public
        if hasattr(X_public, "iloc"):
            asked = X_public.iloc[queries]
        elif isinstance(X_public, list):
            asked = [X_public[i] for i in queries]
        else:
            asked = X_public[queries]
        return teacher_votes(
            step.model,
            step.X,
            step.y,
            asked,
            step.classes,
            rng,
            n_teachers=int(self.n_teachers),
            X_extra=step.X_pool,
            y_extra=step.y_pool,
        )

    @staticmethod
    def noisy_share(votes: Any, share: float, rng: np.random.Generator) -> NDArray[np.int64]:
        """``votes + Sk(share)`` on every count: what a site contributes to a secure sum.

        Examples
        --------
        >>> share = SecureTeacherVotes.noisy_share(np.array([[3, 1]]), 50.0,
        ...                                        np.random.default_rng(0))
        >>> share.shape, share.dtype
        ((1, 2), dtype('int64'))
        """
        votes = np.asarray(votes, dtype=np.int64)
        return votes + skellam_noise(share, votes.shape, rng)

    def randomize(self, labels: Any, n_classes: int, rng: np.random.Generator) -> Any:
        """Not available: a site contributes noisy vote shares to a secure sum.

        Raises
        ------
        TypeError
            Always.
        """
        raise TypeError(
            "SecureTeacherVotes contributes noisy teacher-vote shares to a secure sum across "
            "sites; it does not randomise one client's labels"
        )

    def reported_epsilon(
        self, events: Any, delta: float, neighbors: str = "add_or_remove"
    ) -> float | None:
        """ε of the shares a site sent (their :class:`SkellamShifts`, composed by
        :func:`shifts_epsilon`), add/remove; None under another relation (not stated).

        Examples
        --------
        >>> plan = SecureTeacherVotes(mu=400.0).plan(n_sites=4, n_public=10, n_classes=2,
        ...                                            rounds=2)
        >>> votes = SecureTeacherVotes(mu=400.0)
        >>> votes.reported_epsilon([plan.step_event("first")], 1e-5) == plan.epsilon(1)
        True
        >>> votes.reported_epsilon([], 1e-5, neighbors="replace_one") is None
        True
        """
        if neighbors != "add_or_remove":
            return None
        return shifts_epsilon(events, delta)

    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """Not per client: the federation's :class:`SecurePlan` accounts the sums.

        Raises
        ------
        NotImplementedError
            Always; use :meth:`plan` and :meth:`SecurePlan.epsilon`.
        """
        raise NotImplementedError(
            "SecureTeacherVotes has no per-client event: one record's privacy loss comes from "
            "the noise of the summed histogram, accounted by SecurePlan.epsilon"
        )


def _check_share(value: Any, name: str) -> float:
    checked = check_positive(value, name)
    if checked is None or checked > 1:
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    return checked


def _check_queries(value: Any) -> int | float:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return check_int(value, "queries", 1)
    return _check_share(value, "queries")
