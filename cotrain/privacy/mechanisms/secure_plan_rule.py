"""Choosing a secure-sum plan from public facts, without tuning on anyone's data.

:class:`~cotrain.privacy.SecureTeacherVotes` leaves three choices to its user: teachers per
site, queries per release and releases. Tuning them on the private data would spend privacy
(and nobody holds the whole federation's data to tune on), so :func:`suggest_secure_plan`
picks them from what everyone knows before the run — sites, rows per site, |U|, classes, ε —
by one rule:

1. **Ask every example of U once over the run, in** ``releases`` **releases** (default 4): a
   quarter of U per release; later releases go where the released sums were least sure.
2. **Noise from ε alone.** ε fixes the noise σ (votes) every count of the sum keeps
   (:meth:`SecureTeacherVotes.plan`), whatever the teachers are: σ grows with the answers.
3. **The fewest, largest teachers whose votes outweigh the noise:** the federation's
   ``n_sites · n_teachers`` votes per query must be at least ``σ / noise_share``
   (default 0.25: the noise's standard deviation at most a quarter of all the votes), with
   at least ``min_teacher_rows`` (default 20) private rows per teacher.
4. **If the sites' rows cannot reach that, ask fewer queries** (σ shrinks as their square
   root) until they can. If that leaves fewer than ``10 × classes`` answers over the run,
   ε is too small for this federation: the plan says so (``sufficient`` is False) and a
   warning tells the user to expect little gain.

Where the constants come from: the two plans first tuned by hand (on Adult, 40 sites of 500
rows, and on wine quality, 20 sites of 200 rows, ε = 4) both put σ at 0.21–0.22 of the
votes, and wine's best teachers had 20 rows; abalone and digits were not used
(``benchmarks/private_federation.py`` measures the rule on all four).

Examples
--------
>>> plan = suggest_secure_plan(n_sites=40, rows_per_site=500, n_public=1000, n_classes=2,
...                            epsilon=4.0)
>>> plan.n_teachers, plan.queries, plan.releases, plan.rounds, plan.sufficient
(5, 250, 4, 5, True)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

from cotrain.privacy.mechanisms.param_checks import check_delta, check_positive
from cotrain.privacy.mechanisms.secure_votes import SecureTeacherVotes
from learners.checks import check_int

__all__ = ["SuggestedPlan", "suggest_secure_plan"]

#: answers over the run, per class, below which ε is called too small for the federation
MIN_ANSWERS_PER_CLASS = 10


@dataclass(frozen=True)
class SuggestedPlan:
    """A secure-sum plan chosen by :func:`suggest_secure_plan`, and how noisy it is.

    Attributes
    ----------
    n_teachers : int
        Teachers per site.
    queries : int
        Public examples asked per release.
    releases : int
        Released sums over the run.
    rounds : int
        The trainer's ``rounds``: ``releases + 1`` (the last round trains on the last
        release and releases nothing).
    sigma : float
        Standard deviation (votes) of the noise on every count of the sum.
    noise_share : float
        ``sigma`` over the federation's votes per query (``n_sites · n_teachers``).
    sufficient : bool
        False when ε is too small for the federation (fewer than ``10 × classes`` answers
        over the run even with the smallest teachers allowed): expect little gain.
    n_sites, epsilon, delta, dropouts, colluders
        The facts the plan was made for.
    """

    n_teachers: int
    queries: int
    releases: int
    rounds: int
    sigma: float
    noise_share: float
    sufficient: bool
    n_sites: int
    epsilon: float
    delta: float
    dropouts: int = 0
    colluders: int = 0

    def mechanism(self, **kwargs: Any) -> SecureTeacherVotes:
        """The :class:`~cotrain.privacy.SecureTeacherVotes` of this plan (``n_sites`` and
        the releases fixed, so a deployed site can state them); ``kwargs`` adds the rest
        (``budget``, ``threshold``, ...). The rule plans the plain answer; with
        ``threshold`` the mechanism calibrates its check and answer noise to the same ε
        itself, so its σ is not :attr:`sigma`.

        Examples
        --------
        >>> plan = suggest_secure_plan(n_sites=20, rows_per_site=200, n_public=800,
        ...                            n_classes=3, epsilon=4.0)
        >>> votes = plan.mechanism(budget=8.0)
        >>> votes.n_teachers == plan.n_teachers, votes.rounds, votes.n_sites, votes.budget
        (True, 4, 20, 8.0)
        """
        return SecureTeacherVotes(
            n_teachers=self.n_teachers, epsilon=self.epsilon, queries=self.queries,
            rounds=self.releases, n_sites=self.n_sites, delta=self.delta,
            dropouts=self.dropouts, colluders=self.colluders, **kwargs,
        )  # fmt: skip


def suggest_secure_plan(
    n_sites: int,
    rows_per_site: int,
    n_public: int,
    n_classes: int,
    epsilon: float,
    *,
    delta: float = 1e-5,
    releases: int = 4,
    noise_share: float = 0.25,
    min_teacher_rows: int = 20,
    dropouts: int = 0,
    colluders: int = 0,
) -> SuggestedPlan:
    """Teachers, queries and releases for :class:`~cotrain.privacy.SecureTeacherVotes`
    from public facts only (the rule is in the module docstring).

    Parameters
    ----------
    n_sites : int
        Sites that contribute to every sum.
    rows_per_site : int
        Private rows of the smallest site (a public figure the sites agree to state).
    n_public : int
        |U|, the public pool.
    n_classes : int
    epsilon : float
        ε of one private record for the whole run (add/remove, against the server).
    delta : float, default=1e-5
    releases : int, default=4
        Released sums over the run (fewer when |U| is smaller).
    noise_share : float, default=0.25
        The largest noise σ allowed, as a share of the federation's votes per query.
    min_teacher_rows : int, default=20
        Fewest private rows a teacher trains on.
    dropouts, colluders : int, default=0
        As :class:`~cotrain.privacy.SecureTeacherVotes` (they raise σ).

    Returns
    -------
    SuggestedPlan

    Raises
    ------
    ValueError
        If a fact is not a positive number of the right kind.

    Warns
    -----
    UserWarning
        When ε is too small for the federation (``sufficient`` is False).

    Examples
    --------
    >>> plan = suggest_secure_plan(n_sites=12, rows_per_site=200, n_public=800, n_classes=3,
    ...                            epsilon=4.0)
    >>> plan.n_teachers, plan.queries < 200, plan.noise_share <= 0.25
    (10, True, True)
    """
    n_sites = check_int(n_sites, "n_sites", 1)
    rows_per_site = check_int(rows_per_site, "rows_per_site", 1)
    n_public = check_int(n_public, "n_public", 1)
    n_classes = check_int(n_classes, "n_classes", 2)
    epsilon_ = check_positive(epsilon, "epsilon")
    check_delta(delta)
    releases = min(check_int(releases, "releases", 1), n_public)
    share = check_positive(noise_share, "noise_share")
    min_rows = check_int(min_teacher_rows, "min_teacher_rows", 1)
    assert epsilon_ is not None and share is not None

    def sigma(queries: int) -> float:
        votes = SecureTeacherVotes(
            n_teachers=1, epsilon=epsilon_, queries=queries, rounds=releases, delta=delta,
            dropouts=dropouts, colluders=colluders,
        )  # fmt: skip
        return math.sqrt(votes.plan(n_sites, n_public, n_classes, releases + 1).mu_answer)

    queries = math.ceil(n_public / releases)
    noise = sigma(queries)
    most_teachers = max(1, rows_per_site // min_rows)
    teachers = max(1, math.ceil(noise / (share * n_sites)))
    if teachers > most_teachers:  # ask fewer queries: σ shrinks as their square root
        teachers, target = most_teachers, share * n_sites * most_teachers
        queries = max(1, math.floor(queries * (target / noise) ** 2))
        noise = sigma(queries)
        while noise > target and queries > 1:  # σ is not exactly √-proportional: again
            queries = max(1, min(queries - 1, math.floor(queries * (target / noise) ** 2)))
            noise = sigma(queries)
    achieved = noise / (n_sites * teachers)
    sufficient = achieved <= share and queries * releases >= MIN_ANSWERS_PER_CLASS * n_classes
    if not sufficient:
        warnings.warn(
            f"epsilon={epsilon_} is too small for {n_sites} sites of {rows_per_site} rows: "
            f"even {teachers} teacher(s) of {rows_per_site // teachers} rows per site answer "
            f"only {queries * releases} public example(s) over the run with noise "
            f"{achieved:.2f} of the votes; expect little gain over training alone",
            UserWarning,
            stacklevel=2,
        )
    return SuggestedPlan(
        teachers, queries, releases, releases + 1, noise, achieved, sufficient, n_sites,
        epsilon_, float(delta), int(dropouts), int(colluders),
    )  # fmt: skip
