"""Record-level DP for any learner: subsample-and-aggregate (PATE) inside each client.

A client that wants its uploads to be differentially private with respect to **one record of
its private data**, whatever its learner, does not release its own model's labels. It splits
its private rows into ``n_teachers`` disjoint shards by a keyed hash of each record
(:func:`cotrain.privacy.mechanisms.shards.teacher_shards`, a key the client draws each round and
never sends), trains one *teacher* (a fresh copy of its learner) per shard — each shard joined with
the pseudo-labelled public rows P, which are public — lets every teacher vote on each public
example, and releases a noisy aggregate of the votes (:class:`SubsampleAndAggregate`). One
private record lies in exactly one shard, chosen by its own content, so adding or removing it
changes one teacher and at most one vote per public example, for any learner: the sensitivity
holds by construction, not by analysis of the learner.

The client's own prediction model — the learner trained on all its private data ∪ P — is
unaffected: it never leaves the site and is what the client predicts with; only the noisy
aggregate of the teachers' votes is uploaded.

Examples
--------
>>> import numpy as np
>>> from sklearn.tree import DecisionTreeClassifier
>>> from cotrain.privacy.mechanisms.teachers import SubsampleAndAggregate
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(60, 2)); y = (X[:, 0] > 0).astype(np.int64)
>>> U = np.array([[-2.0, 0.0], [2.0, 0.0]])
>>> sa = SubsampleAndAggregate(n_teachers=6, sigma=1.0)
>>> sa.release(DecisionTreeClassifier(random_state=0), X, y, U, np.array([0, 1]),
...            np.random.default_rng(1))
array([0, 1])
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from cotrain.privacy.accounting.composition import check_relation
from cotrain.privacy.accounting.epsilon import (
    gaussian_event,
    gaussian_noise_multiplier,
    noop_event,
)
from cotrain.privacy.mechanisms.base import (
    ClientRound,
    LabelMechanism,
    RandomizedResponse,
    Release,
)
from cotrain.privacy.mechanisms.param_checks import check_epsilon, check_positive
from cotrain.privacy.mechanisms.teacher_counts import teacher_votes
from learners.checks import check_int

__all__ = ["SubsampleAndAggregate"]


# --------------------------------------------------------------------------------------------
# the mechanism
# --------------------------------------------------------------------------------------------


class SubsampleAndAggregate(LabelMechanism):
    """Record-level DP labels for any learner: disjoint teachers, noisy vote aggregate (PATE).

    Applied by the client to its data and learner, not to its model's labels: each round,
    the client's :meth:`release_round` calls :meth:`release`, which splits the client's
    private records into ``n_teachers`` disjoint shards by a keyed hash of each record
    (:func:`~cotrain.privacy.mechanisms.shards.teacher_shards`; the key is drawn from the client's
    privacy randomness every round and never sent; shards have random sizes and may be
    empty), fits a fresh clone of the learner on each shard ∪ P (the public rows with a
    pseudo-label — public information), lets the teachers vote on every public example, and
    releases a noisy aggregate of the vote counts ``(n_public, C)``. A teacher whose shard
    is empty trains on P alone when P is non-empty, and otherwise abstains (casts no vote):

    * ``aggregate="gnmax"`` (default): add iid ``N(0, σ²)`` to every count and take the
      argmax (ties have probability zero; ``numpy.argmax`` would take the lowest code);
    * ``aggregate="rr"``: the argmax of the clean counts (ties, and a row where every
      teacher abstains: lowest code), then K-ary randomized response on each label with
      per-label ε' = ``epsilon / n_labels`` (:class:`~cotrain.privacy.RandomizedResponse`
      with ``sensitivity = n_labels``).

    The client's own model (its learner on all its private data ∪ P) is not involved: it
    never leaves the site and remains what the client predicts with.

    Why this is DP (unit: one private record of the client; adversary: the server and
    everyone who sees the upload or what follows from it, since the noise and the key are
    drawn at the client). Fix the key. A record's teacher is a function of the record and
    the key alone, so the other records keep their teachers whatever record is added or
    removed; P is the same for both data sets (it is the previous rounds' public consensus).

    * **Add/remove** (D′ = D ± one record r, the headline relation): r lies in exactly one
      shard, so exactly one teacher's training data change and every other teacher casts
      identical votes. The changed teacher moves its vote on a public example (the count
      vector loses one in a class and gains one in another: L2 ≤ sqrt(2)), or starts or
      stops voting (an abstaining teacher whose empty shard gains r: L2 = 1 ≤ sqrt(2)). Over
      the ``n_labels`` examples of a round the count matrix moves by
      **L2 ≤ Δ = sqrt(2·n_labels)**, for any learner — nothing was assumed of it.
    * **Replace-one** (D′ = D with r replaced by r′ = remove r, then add r′): r and r′ may hash
      to two different teachers, and both may move their vote on an example the same way (the
      count of one class loses 2 and another gains 2: L2 = sqrt(8)), so the bound is twice
      the add/remove one, **L2 ≤ 2·sqrt(2·n_labels)**, and it is attained; it is exactly how
      dp-accounting reads a Gaussian event under ``REPLACE_ONE``.

    * "gnmax": adding N(0, σ²) to every count is the Gaussian mechanism; the argmax is
      post-processing. One round's event is ``gaussian_event(σ / sqrt(2·n_labels))`` read
      under either relation (noise multiplier ``σ/Δ`` under add/remove, ``σ/(2Δ)`` under
      replace-one; :meth:`relation_event`). With ``epsilon=`` the noise is calibrated for the
      headline add/remove relation, ``σ = z(ε, δ)·sqrt(2·n_labels)``
      (:func:`~cotrain.privacy.gaussian_noise_multiplier`, analytic Gaussian mechanism), so
      **σ grows with the number of public labels released per round**; the round is then
      exactly (ε, δ)-DP under add/remove (and less private under replace-one).
    * "rr": the clean argmax may change on every public example under either relation
      (s* = n_labels labels: the trivial bound, true of any two data sets), so per-label
      randomized response at ε/n_labels makes the round ε-DP at δ = 0 by group privacy, the
      same ε under both relations; the event is that RR self-composed n_labels times (the
      accountant composes it exactly and reports less than ε at δ > 0).

    Rounds compose: :meth:`dp_event` is one round's event and the trainer's ledger composes
    the rounds a client takes part in (adaptive composition: teachers of a later round train
    on pseudo-labels that depend on earlier releases, which are already accounted).

    **Confident-GNMax** (``threshold``, "gnmax" only; Papernot et al. 2018): the client adds
    ``N(0, σ_check²)`` to each example's *top* vote count and answers only the examples whose
    noisy top count reaches ``threshold · n_teachers`` — at most ``max_answered`` of them
    (the answer slots), the largest noisy top counts first — with the GNMax argmax at σ; the
    other examples are sent as abstentions (code -1, which the wire then carries), and the
    consensus and the clients' training use the answered ones. One record moves each top
    count by at most one (L2 ≤ sqrt(n_labels) over the round) and each answered example's
    counts as above (L2 ≤ sqrt(2·slots), slots accounted whether used or not: which examples
    are answered depends only on the check's output). Two Gaussian mechanisms compose to one
    exactly: the round's event is ``gaussian_event(z)`` with ``1/z² = n_labels/σ_check² +
    2·slots/σ²``, read under replace-one at twice both sensitivities. With ``epsilon=`` the
    noise is calibrated so that the round is (ε, δ)-DP: ``σ = z(ε, δ)·sqrt(n_labels /
    check_noise² + 2·slots)`` and ``σ_check = check_noise · σ``. The accounting is
    data-independent (PATE's data-dependent analysis is not implemented).

    Parameters
    ----------
    n_teachers : int, default=50
        Number of disjoint teachers (>= 1; it may exceed the client's private rows: the
        teachers with an empty shard then train on P alone, or abstain). More teachers give
        larger vote margins (robust to noise) but smaller shards.
    sigma : float, optional
        "gnmax" only: standard deviation of the noise on each count (> 0).
    epsilon : float, optional
        ε of one round's release w.r.t. one private record (> 0): at ``delta`` for "gnmax"
        (σ calibrated from it), at δ = 0 for "rr" (which requires it). For "gnmax" give
        exactly one of ``sigma`` and ``epsilon``.
    aggregate : {"gnmax", "rr"}, default="gnmax"
        How the votes are aggregated (see above).
    budget : float, optional
        Total ε per client over the whole run; the trainer stops before a round that would
        exceed it. None = no limit in process; a deployed site's ledger then stops at
        :data:`~cotrain.privacy.ledgers.site_ledger.DEFAULT_SITE_BUDGET`, and ``math.inf``
        means no limit there either.
    delta : float, default=1e-5
        δ for calibration and reporting.
    threshold : float, optional
        Confident-GNMax: answer an example only where its noisy top count reaches
        ``threshold · n_teachers``, in (0, 1]; None: answer every example.
    check_noise : float, default=2.0
        With ``threshold``: σ_check / σ (>= 1: a noisier check is cheaper).
    max_answered : float, default=1.0
        With ``threshold``: the share of a round's examples that may be answered (the answer
        slots, accounted whether used or not), in (0, 1].

    Attributes
    ----------
    shares : ("hard",)
        Its teachers vote hard labels (and train on a hard consensus).
    unit : "record"
        The guarantee is about one private training record of the client.
    adversary : "server"
        Noise is added at the client: it holds against the server and everyone after it.
    neighbors : "add_or_remove"
        The relation of :meth:`dp_event`; :meth:`relation_event` gives replace-one too.

    Examples
    --------
    >>> sa = SubsampleAndAggregate(n_teachers=50, epsilon=2.0)
    >>> round(sa.noise_std(n_labels=500), 2)       # z(2, 1e-5) * sqrt(2 * 500)
    63.05
    >>> sa.dp_event(n_classes=10, n_labels=500)    # doctest: +ELLIPSIS
    GaussianDpEvent(noise_multiplier=1.9938...)
    >>> SubsampleAndAggregate(sigma=10.0).dp_event(10, 50)   # 10 / sqrt(100)
    GaussianDpEvent(noise_multiplier=1.0)
    >>> SubsampleAndAggregate(sigma=10.0).l2_sensitivity(50, "replace_one")   # 2 * sqrt(100)
    20.0
    >>> import numpy as np
    >>> counts = np.array([[7, 3], [1, 9]])
    >>> SubsampleAndAggregate(sigma=1e-3).aggregate_votes(counts, np.random.default_rng(0))
    array([0, 1])
    """

    shares: ClassVar[tuple[str, ...]] = ("hard",)
    unit: str = "record"
    adversary: ClassVar[str] = "server"
    neighbors: ClassVar[str] = "add_or_remove"

    def __init__(
        self,
        *,
        n_teachers: int = 50,
        sigma: float | None = None,
        epsilon: float | None = None,
        aggregate: Literal["gnmax", "rr"] = "gnmax",
        budget: float | None = None,
        delta: float = 1e-5,
        threshold: float | None = None,
        check_noise: float = 2.0,
        max_answered: float = 1.0,
    ) -> None:
        self.n_teachers = n_teachers
        self.sigma = sigma
        self.epsilon = epsilon
        self.aggregate = aggregate
        self.budget = budget
        self.delta = delta
        self.threshold = threshold
        self.check_noise = check_noise
        self.max_answered = max_answered

    # ------------------------------------------------------------------ parameters
    def _check_params(self) -> None:
        if self.threshold is not None:
            threshold = check_positive(self.threshold, "threshold")
            if threshold is None or threshold > 1 or self.aggregate != "gnmax":
                raise ValueError(
                    "threshold (Confident-GNMax) must be a number in (0, 1] with "
                    f"aggregate='gnmax', got threshold={self.threshold!r}, "
                    f"aggregate={self.aggregate!r}"
                )
            ratio = check_positive(self.check_noise, "check_noise")
            if ratio is None or ratio < 1:
                raise ValueError(f"check_noise must be a number >= 1, got {self.check_noise!r}")
            share = check_positive(self.max_answered, "max_answered")
            if share is None or share > 1:
                raise ValueError(
                    f"max_answered must be a number in (0, 1], got {self.max_answered!r}"
                )
        check_int(self.n_teachers, "n_teachers", 1)
        if self.aggregate not in ("gnmax", "rr"):
            raise ValueError(f"aggregate must be 'gnmax' or 'rr', got {self.aggregate!r}")
        check_positive(self.sigma, "sigma", allow_none=True)
        check_epsilon(self.epsilon, "epsilon", allow_none=True)
        if self.aggregate == "gnmax" and (self.sigma is None) == (self.epsilon is None):
            raise ValueError(
                "aggregate='gnmax' needs exactly one of sigma (the noise std on each vote "
                f"count) and epsilon (to calibrate it), got sigma={self.sigma!r}, "
                f"epsilon={self.epsilon!r}"
            )
        if self.aggregate == "rr" and (self.epsilon is None or self.sigma is not None):
            raise ValueError(
                "aggregate='rr' needs epsilon (the ε of one round at δ = 0) and no sigma, "
                f"got sigma={self.sigma!r}, epsilon={self.epsilon!r}"
            )
        super()._check_params()

    def l2_sensitivity(self, n_labels: int, relation: str = "add_or_remove") -> float:
        """L2 sensitivity of one round's vote counts w.r.t. one record: ``sqrt(2·n_labels)``
        under add/remove (one teacher changes), ``2·sqrt(2·n_labels)`` under replace-one (two
        teachers may change; see the class docstring).

        Examples
        --------
        >>> SubsampleAndAggregate(sigma=1.0).l2_sensitivity(8)
        4.0
        >>> SubsampleAndAggregate(sigma=1.0).l2_sensitivity(8, relation="replace_one")
        8.0
        """
        twice = check_relation(relation) == "replace_one"
        return (2.0 if twice else 1.0) * math.sqrt(2.0 * check_int(n_labels, "n_labels", 0))

    def noise_std(self, n_labels: int) -> float:
        """σ on each vote count ("gnmax"): ``sigma``, or ``z(ε, δ)·sqrt(2·n_labels)``.

        Examples
        --------
        >>> round(SubsampleAndAggregate(epsilon=1.0).noise_std(n_labels=2), 3)   # 3.7306 * 2
        7.461
        """
        self._check_params()
        if self.aggregate != "gnmax":
            raise ValueError(f"noise_std is defined for aggregate='gnmax', not {self.aggregate!r}")
        if self.sigma is not None:
            return float(self.sigma)
        z = gaussian_noise_multiplier(float(self.epsilon), float(self.delta))
        if self.threshold is None:
            return z * self.l2_sensitivity(n_labels)
        ratio = float(self.check_noise)
        return z * math.sqrt(n_labels / ratio**2 + 2.0 * self.slots(n_labels))

    @property
    def abstains(self) -> bool:
        """Whether its uploads may abstain (Confident-GNMax: ``threshold`` is set)."""
        return self.threshold is not None

    def slots(self, n_labels: int) -> int:
        """How many of a round's ``n_labels`` examples may be answered: all of them without
        a threshold, else ``ceil(max_answered · n_labels)``.

        Examples
        --------
        >>> SubsampleAndAggregate(sigma=1.0, threshold=0.6, max_answered=0.3).slots(10)
        3
        """
        self._check_params()
        n = check_int(n_labels, "n_labels", 0)
        if self.threshold is None:
            return n
        return min(n, math.ceil(float(self.max_answered) * n))

    def check_std(self, n_labels: int) -> float:
        """σ_check on each example's top count (Confident-GNMax): ``check_noise · σ``."""
        return float(self.check_noise) * self.noise_std(n_labels)

    def _rr(self, n_labels: int) -> RandomizedResponse:
        """The randomized response of "rr": ε per round, s* = n_labels labels."""
        return RandomizedResponse(
            epsilon=float(self.epsilon), sensitivity=max(1, n_labels), delta=self.delta
        )

    # ------------------------------------------------------------------ the protocol
    def check_federation(self, consensus: Any, estimators: list[Any]) -> None:
        """Its teachers train on hard pseudo-labels: refuse a consensus that outputs soft
        ones.

        Examples
        --------
        >>> from consensus import SoftMean
        >>> SubsampleAndAggregate(sigma=1.0).check_federation(SoftMean(), [])
        Traceback (most recent call last):
        ...
        ValueError: privacy=SubsampleAndAggregate trains its teachers on hard pseudo-labels; \
consensus=SoftMean outputs 'soft' labels: use a hard consensus (e.g. 'majority')
        """
        output = getattr(consensus, "output", "hard")
        if output != "hard":
            raise ValueError(
                f"privacy={type(self).__name__} trains its teachers on hard pseudo-labels; "
                f"consensus={type(consensus).__name__} outputs {output!r} labels: use a "
                "hard consensus (e.g. 'majority')"
            )

    def release_round(self, step: ClientRound, rng: np.random.Generator) -> Release:
        """The client's upload of one round: :meth:`release` of its learner and data (the
        client's own labels, ``step.labels``, are not used).

        Examples
        --------
        >>> from sklearn.tree import DecisionTreeClassifier
        >>> X = np.repeat(np.array([[0.0], [1.0]]), 10, axis=0); y = np.repeat([0, 1], 10)
        >>> step = ClientRound(np.zeros(2, dtype=np.int64), np.array([0, 1]),
        ...                    DecisionTreeClassifier(), X, y, np.array([[0.0], [1.0]]))
        >>> SubsampleAndAggregate(n_teachers=2, sigma=1e-3).release_round(
        ...     step, np.random.default_rng(0)).labels
        array([0, 1])
        """
        codes = self.release(
            step.model,
            step.X,
            step.y,
            step.X_public,
            step.classes,
            rng,
            X_extra=step.X_pool,
            y_extra=step.y_pool,
        )
        return Release(codes)

    # ------------------------------------------------------------------ release
    def aggregate_votes(self, counts: Any, rng: np.random.Generator) -> NDArray[np.int64]:
        """Noisy aggregate of vote counts ``(n_labels, C)`` → int64 codes ``(n_labels,)``.

        "gnmax": ``argmax(counts + N(0, σ²))`` per row, σ = :meth:`noise_std` of
        ``n_labels`` rows. "rr": clean argmax (ties: lowest code), then K-ary randomized
        response at ε/n_labels per label.

        Examples
        --------
        >>> import numpy as np
        >>> counts = np.array([[5, 4, 1], [0, 2, 8]])
        >>> noise = np.random.default_rng(6).normal(0.0, 2.0, size=(2, 3))
        >>> (counts + noise).argmax(axis=1)
        array([1, 2])
        >>> SubsampleAndAggregate(sigma=2.0).aggregate_votes(counts, np.random.default_rng(6))
        array([1, 2])
        """
        self._check_params()
        counts = np.asarray(counts)
        if counts.ndim != 2 or counts.shape[1] < 1:
            raise ValueError(f"counts must have shape (n_labels, C), got {counts.shape}")
        n, k = counts.shape
        if self.aggregate == "gnmax" and self.threshold is not None:
            return self._confident(counts, rng)
        if self.aggregate == "gnmax":
            noisy = counts + rng.normal(0.0, self.noise_std(n), size=counts.shape)
            return noisy.argmax(axis=1).astype(np.int64)
        clean = counts.argmax(axis=1).astype(np.int64)
        return self._rr(n).randomize(clean, k, rng)

    def _confident(self, counts: NDArray[Any], rng: np.random.Generator) -> NDArray[np.int64]:
        """Confident-GNMax: -1 where the noisy top count misses the threshold (or no slot
        is left), the GNMax argmax elsewhere."""
        n = counts.shape[0]
        top = counts.max(axis=1) + rng.normal(0.0, self.check_std(n), size=n)
        keep = np.flatnonzero(top >= float(self.threshold) * int(self.n_teachers))
        slots = self.slots(n)
        if keep.size > slots:  # the largest noisy top counts (post-processing of the check)
            keep = np.sort(keep[np.argsort(-top[keep], kind="stable")[:slots]])
        codes = np.full(n, -1, dtype=np.int64)
        noisy = counts[keep] + rng.normal(0.0, self.noise_std(n), size=(keep.size, counts.shape[1]))
        codes[keep] = noisy.argmax(axis=1)
        return codes

    def release(
        self,
        estimator: Any,
        X: Any,
        y: Any,
        X_public: Any,
        classes: Any,
        rng: np.random.Generator,
        *,
        X_extra: Any = None,
        y_extra: Any = None,
    ) -> NDArray[np.int64]:
        """The client's private upload of one round: int64 codes ``(n_public,)`` into classes.

        ``aggregate_votes(teacher_votes(...), rng)``: ``n_teachers`` clones of ``estimator``
        on disjoint shards of (``X``, ``y``) chosen by a keyed hash of each record (key from
        ``rng``), each with (``X_extra``, ``y_extra``), vote on ``X_public`` (a teacher with
        an empty shard and no such rows abstains); the counts are aggregated with noise.
        ``estimator`` itself is never fitted.

        Parameters
        ----------
        estimator : classifier
            The client's learner (normally its :class:`learners.ClassAlignedClassifier`).
        X, y : array-like
            The client's private rows and labels (values of ``classes``).
        X_public : array-like
            The public pool U; one label is released per row.
        classes : array-like
            The global classes, sorted.
        rng : numpy.random.Generator
            The client's privacy randomness (the shard key, then the noise).
        X_extra, y_extra : array-like, optional
            The public rows that carry a pseudo-label (P) and those labels.

        Returns
        -------
        ndarray of shape (n_public,), int64
            Codes into ``classes``.

        Raises
        ------
        ValueError
            If a parameter is invalid.
        """
        self._check_params()
        counts = teacher_votes(
            estimator,
            X,
            y,
            X_public,
            classes,
            rng,
            n_teachers=int(self.n_teachers),
            X_extra=X_extra,
            y_extra=y_extra,
        )
        return self.aggregate_votes(counts, rng)

    def randomize(self, labels: Any, n_classes: int, rng: np.random.Generator) -> Any:
        """Not available: this mechanism is applied by the client to its data, not to labels.

        Raises
        ------
        TypeError
            Always; use :meth:`release`.
        """
        raise TypeError(
            "SubsampleAndAggregate is applied by the client to its data and learner, not to "
            "labels; use release(estimator, X, y, X_public, classes, rng)"
        )

    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """The privacy event of ONE round's release of ``n_labels`` labels (one record).

        "gnmax": ``gaussian_event(σ / sqrt(2·n_labels))``. "rr": K-ary randomized response
        at ε/n_labels self-composed n_labels times. A no-op when nothing is released or
        there is a single class.

        Examples
        --------
        >>> event = SubsampleAndAggregate(epsilon=1.0, aggregate="rr").dp_event(10, 4)
        >>> event.count, event.event.num_buckets   # 4 labels of 10-ary RR at ε/4 each
        (4, 10)
        """
        self._check_params()
        k = check_int(n_classes, "n_classes", 1)
        n = check_int(n_labels, "n_labels", 0)
        if n == 0 or k == 1:
            return noop_event()
        if self.aggregate == "rr":
            return self._rr(n).dp_event(k, n)
        if self.threshold is not None:  # the check and the answers: one Gaussian, exactly
            inverse = n / self.check_std(n) ** 2 + 2.0 * self.slots(n) / self.noise_std(n) ** 2
            return gaussian_event(1.0 / math.sqrt(inverse))
        return gaussian_event(self.noise_std(n) / self.l2_sensitivity(n))

    def relation_event(self, n_classes: int, n_labels: int, relation: str) -> Any:
        """One round's event under ``relation``: :meth:`dp_event` for both relations.

        "gnmax": ``GaussianDpEvent(σ / sqrt(2·n_labels))``, which dp-accounting reads under
        ``REPLACE_ONE`` at twice the sensitivity — exactly the replace-one bound
        ``2·sqrt(2·n_labels)`` (class docstring). "rr": the trivial bound, the same under
        both.

        Examples
        --------
        >>> from cotrain.privacy.accounting.epsilon import epsilon_spent
        >>> sa = SubsampleAndAggregate(sigma=40.0)
        >>> [round(epsilon_spent([sa.relation_event(10, 300, r)] * 2, 1e-5, relation=r), 4)
        ...  for r in ("add_or_remove", "replace_one")]
        [3.7086, 8.3854]
        """
        check_relation(relation)
        return self.dp_event(n_classes, n_labels)
