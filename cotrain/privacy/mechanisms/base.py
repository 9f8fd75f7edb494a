"""Privacy mechanisms applied on a client before its labels on the public pool U leave it.

What is protected
-----------------
A client's release in one round is ``f(D)``: the labels its model, trained on its private data
D (and the pseudo-labelled pool), gives the public examples U. Every mechanism declares

* its **unit** — ``"record"``: differential privacy with respect to one record of D (the
  whole release of a round changes little when one private training record is added or
  removed), the guarantee a hospital or a bank reads an ε as; or
  ``"label"``: with respect to one *released public label* (each label of U protected on its
  own). A label-level ε is NOT a guarantee about any private record — one record can change
  many released labels — and is kept only for comparison with the literature; it is never
  summed or tabulated with record-level ε;
* its **adversary** — ``"server"``: the noise is drawn at the client (from the operating
  system's entropy, so no seed known to the server can replay it), so the guarantee holds
  against the server and everyone downstream of it; ``"broadcast observers"``: the noise is
  added by the server (GNMax, :class:`consensus.NoisyArgmax`), which itself sees clean votes;
* its **neighbouring relation** — ``neighbors``, the relation in which ``dp_event`` is
  stated: ``"add_or_remove"`` (D′ = D plus or minus one record; the headline of every
  record-level ε in cotrain) — and, through :meth:`LabelMechanism.relation_event`, the event
  under ``"replace_one"`` (D′ = D with one record replaced, i.e. removed then another added)
  when the mechanism can bound it. Events are read as dp-accounting reads them under that
  relation (:mod:`cotrain.privacy.accounting.composition`).

The label randomisers' bounds per relation: the trivial bound (all released labels) holds for
*any* two data sets, so it is the same under both relations. A user-given ``sensitivity``
s* is the user's claim under add/remove (one record added or removed changes at most s*
released values); replace-one is removal then addition, so it changes at most ``2·s*``
values (triangle inequality, capped at the trivial bound) and that is what the replace-one
event uses. (:func:`cotrain.audit.sensitivity_lower_bound` searches replace-one neighbours:
a lower bound L found there means the add/remove s* is at least L/2.)

The label randomisers (:class:`RandomizedResponse` here,
:class:`~cotrain.privacy.mechanisms.xor.XORMechanism` and
:class:`~cotrain.privacy.mechanisms.soft_labels.GaussianSoftLabels`) are record-level only through
the sensitivity ``s*``: the number of released values one private record can change. Without
``sensitivity`` they take the trivial bound that holds for every learner — all |U| labels (2|U|
bits, all rows) — which is honest but noisy. A smaller ``sensitivity`` is *your claim*: no
function can compute it for a general learner (:func:`cotrain.audit.sensitivity_lower_bound`
only finds a lower bound). Record-level DP by construction, for any learner, comes from
:class:`cotrain.privacy.SubsampleAndAggregate` (teachers on disjoint shards of D) or from DP-SGD
training of a torch client (:class:`cotrain.privacy.DPSGD`).

One release per round; rounds compose (:func:`cotrain.privacy.epsilon_spent`), and
``dp_event(C, |U|)`` is the privacy event of one round that the trainer's ledger composes.

Parameters follow scikit-learn's convention: ``__init__`` stores them untouched, they are
validated on first use (``randomize``, ``dp_event``, or an explicit ``validate()``), and
``get_params`` / ``set_params`` work.

The mechanism protocol
----------------------
A mechanism is an object the client calls at each step of its round; nothing in the client
or the server switches on what kind of mechanism it is. :class:`LabelMechanism` declares
every hook with a default, so a subclass overrides only what it changes:

====================================================  ==============================================
``check_federation(consensus, estimators)``           once, before any training (trainer and
                                                      ServerApp): refuse a federation it cannot
                                                      protect (default: accept)
``prepare(estimator)``                                once, when a client is built: the estimator
                                                      the client trains (default: unchanged)
``before_fit(model, seed)``                           each round, before the client fits (default:
                                                      nothing); ``seed`` is None unless
                                                      ``reproducible_noise``
``release_round(step, rng)``                          each round, after the fit: the
                                                      :class:`Release` (labels and, when the client
                                                      must report it, the round's privacy event)
                                                      made from the :class:`ClientRound` ``step``;
                                                      default: ``randomize(step.labels, C, rng)``
``dp_event(n_classes, n_labels)``                     on the server: one round's privacy event
                                                      (under ``neighbors``), which the ledger
                                                      composes
``relation_event(n_classes, n_labels, relation)``     on the server: one round's event under
                                                      ``relation``; None when the mechanism states
                                                      no bound for it (default: ``dp_event`` for
                                                      ``neighbors``, None otherwise)
====================================================  ==============================================

and four class attributes: ``neighbors`` (the relation of ``dp_event``, default
``"add_or_remove"``), ``shares`` (the ``share`` settings whose labels it can release),
``reports_events`` (True: the server cannot compute the round's event, the client reports it
with its upload — which then tells the server about the client's data: prefer a mechanism
whose event is public configuration, as :class:`~cotrain.privacy.DPSGD`'s is) and
``cross_validated_trust`` (False: the guarantee covers only what the client's private
training does, so every training row keeps weight 1: no cross-validated or fixed pool weight
below 1, see :func:`cotrain.trust.client_trust`).

Anything passed as ``privacy=`` that is not a :class:`LabelMechanism` is refused by
:func:`as_mechanism` with a ``TypeError`` that says what to implement.

Examples
--------
A custom label randomiser: it flips every label with probability 1/2 to the next class and
declares the round's privacy event (here one binary randomized response per label, at its
own ε).

>>> import numpy as np
>>> from cotrain.privacy.accounting.epsilon import rr_event, self_composed
>>> class CoinFlip(LabelMechanism):
...     def __init__(self, budget=None, delta=1e-5):
...         self.budget = budget
...         self.delta = delta
...     def randomize(self, labels, n_classes, rng):
...         flip = rng.random(len(labels)) < 0.5
...         return np.where(flip, (labels + 1) % n_classes, labels)
...     def dp_event(self, n_classes, n_labels):
...         return self_composed(rr_event(1.0, 2), n_labels)
>>> step = ClientRound(np.array([0, 0, 1]), classes=np.array(["a", "b"]))
>>> CoinFlip().release_round(step, np.random.default_rng(0)).labels   # flips the last two
array([0, 1, 0])
>>> CoinFlip().shares, CoinFlip().reports_events, CoinFlip().cross_validated_trust
(('hard',), False, True)
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import NDArray

from consensus import ParamsMixin
from cotrain.privacy.accounting.composition import check_relation
from cotrain.privacy.accounting.epsilon import noop_event, rr_event, self_composed
from cotrain.privacy.mechanisms.param_checks import (
    check_delta,
    check_epsilon,
    check_hard_codes,
    check_n_classes,
    check_n_labels,
    check_positive,
    check_sensitivity_for_unit,
    check_unit,
)

__all__ = ["ClientRound", "LabelMechanism", "RandomizedResponse", "Release", "as_mechanism"]


# --------------------------------------------------------------------------------------------
# what the client hands a mechanism, and what it gets back
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientRound:
    """What a client hands its mechanism in one round, after its fit (at the client: the
    private data never leaves it through this object).

    Attributes
    ----------
    labels : ndarray
        The fitted model's labels on the public pool: int64 codes ``(n_public,)`` into
        ``classes`` (hard sharing) or probabilities ``(n_public, C)`` (soft sharing).
    classes : ndarray
        The global classes, sorted.
    model : classifier, optional
        The client's fitted model (a :class:`learners.ClassAlignedClassifier`).
    X, y : ndarray, optional
        The client's private rows and labels.
    X_public : ndarray, optional
        The public pool U.
    X_pool, y_pool : ndarray, optional
        The public rows that carry a pseudo-label this round (P) and those labels (empty
        in round 1).

    Examples
    --------
    >>> import numpy as np
    >>> step = ClientRound(np.array([0, 2, 1]), classes=np.array(["a", "b", "c"]))
    >>> step.n_classes, step.n_labels
    (3, 3)
    """

    labels: np.ndarray
    classes: np.ndarray
    model: Any = None
    X: Any = None
    y: Any = None
    X_public: Any = None
    X_pool: Any = None
    y_pool: Any = None

    @property
    def n_classes(self) -> int:
        """C, the number of global classes."""
        return len(self.classes)

    @property
    def n_labels(self) -> int:
        """How many labels the client releases (one per public row)."""
        return int(np.shape(self.labels)[0])


@dataclass(frozen=True)
class Release:
    """What a mechanism gives back for one round: the labels that leave the client (in the
    form of :attr:`ClientRound.labels`) and, for a mechanism whose event only the client
    knows (``reports_events``), the round's privacy event for the ledger.

    Examples
    --------
    >>> import numpy as np
    >>> Release(np.array([1, 0])).dp_event is None
    True
    """

    labels: np.ndarray
    dp_event: Any = None


# --------------------------------------------------------------------------------------------
# base class
# --------------------------------------------------------------------------------------------


class LabelMechanism(ParamsMixin, ABC):
    """Base class of label-privacy mechanisms (``FederatedCoTrainer(privacy=...)``).

    Subclasses store their ``__init__`` arguments untouched (validated in ``_check_params``
    on first use) and implement `dp_event` and either `randomize` (a label randomiser) or
    `release_round` (a mechanism that releases labels some other way); the other hooks of
    the protocol (see the module docstring) have defaults. Parameters work the
    scikit-learn way for every mechanism, through :class:`consensus._params.ParamsMixin`
    (shared with the consensus rules): ``get_params`` / ``set_params`` / ``repr`` and
    ``sklearn.base.clone(mechanism, safe=False)``.

    The privacy-accounting hooks are declared here, with the same names as on a noisy
    consensus (:class:`consensus.NoisyArgmax`), so that the trainer's ledger treats both
    alike (:func:`cotrain.privacy.accounting.epsilon.is_accounted`): `accountable` (True: every
    mechanism adds noise), `dp_event`, `delta` and `budget`.

    Attributes
    ----------
    shares : tuple of {"hard", "soft"}
        The ``share`` settings whose labels the mechanism can release: with ``"hard"``,
        ``randomize`` takes and returns int64 codes ``(n,)`` in ``0..C-1``; with ``"soft"``,
        probabilities ``(n, C)``. Default ``("hard",)``.
    reports_events : bool
        True when the round's privacy event depends on the client's own training, so the
        client reports it with its upload (``Release.dp_event``) and the ledger composes
        those; False (default): the server computes it, ``dp_event(C, |U|)``.
    round_protocol : {"labels", "secure-sum"}
        The round the mechanism needs (:mod:`cotrain.federation.rounds`), whatever carries
        it: ``"labels"`` (default), each client releases its own labels
        (:class:`~cotrain.federation.rounds.LabelRound`); ``"secure-sum"``, the sites send
        noisy vote shares and the server learns only their sum
        (:class:`~cotrain.federation.rounds.SecureRound`; the mechanism then provides
        ``plan``, ``site_votes`` and ``noisy_share``, as
        :class:`~cotrain.privacy.mechanisms.secure_votes.SecureTeacherVotes` does).
    cross_validated_trust : bool
        Whether the client may choose its pool weight by cross-validation on its private
        rows (``trust="auto"``); False when the guarantee covers only the client's private
        training (DP-SGD), which then trains at full weight. Default True.
    unit : {"record", "label"}
        What one ε protects: one private training record of the client, or one released
        public label (see the module docstring).
    adversary : {"server", "broadcast observers"}
        Against whom the guarantee holds: client-side noise holds against the server.
    neighbors : {"add_or_remove", "replace_one"}
        The neighbouring relation in which :meth:`dp_event` is stated (default
        ``"add_or_remove"``, the headline relation); :meth:`relation_event` gives the event
        under either relation, or None where the mechanism states no bound.
    budget : float or None
        Total ε per client over the whole run; the trainer stops before a round that would
        exceed it. None = no limit in process; a deployed site's ledger then stops at
        :data:`~cotrain.privacy.ledgers.site_ledger.DEFAULT_SITE_BUDGET`, and ``math.inf``
        means no limit there either.
    delta : float
        δ at which the total ε is reported (and, for Gaussian noise, calibrated).

    Examples
    --------
    >>> import numpy as np
    >>> class Flip(LabelMechanism):
    ...     def __init__(self, budget=None, delta=1e-5):
    ...         self.budget = budget
    ...         self.delta = delta
    ...     def randomize(self, labels, n_classes, rng):
    ...         return (np.asarray(labels) + 1) % n_classes
    ...     def dp_event(self, n_classes, n_labels):
    ...         return noop_event()
    >>> Flip().randomize(np.array([0, 1]), 2, np.random.default_rng(0))
    array([1, 0])
    >>> Flip(budget=3.0)
    Flip(budget=3.0, delta=1e-05)
    >>> Flip().accountable
    True
    """

    shares: ClassVar[tuple[str, ...]] = ("hard",)
    reports_events: ClassVar[bool] = False
    round_protocol: ClassVar[str] = "labels"
    cross_validated_trust: ClassVar[bool] = True
    adversary: ClassVar[str] = "server"
    neighbors: ClassVar[str] = "add_or_remove"

    budget: float | None = None
    delta: float
    unit: str = "record"

    # ------------------------------------------------------------------ the protocol
    def check_federation(self, consensus: Any, estimators: list[Any]) -> None:
        """Refuse, before any training, a federation this mechanism cannot protect.

        Called once by the trainer and the ServerApp with the run's consensus and the
        clients' estimators (default: every federation is accepted).

        Raises
        ------
        ValueError or TypeError
            Naming the client or the parameter at fault.
        """

    def prepare(self, estimator: Any) -> Any:
        """The estimator a client trains, made from its own (once, when the client is
        built; default: the estimator unchanged). The input must not be changed.

        Examples
        --------
        >>> RandomizedResponse(epsilon=1.0).prepare("any learner")
        'any learner'
        """
        return estimator

    def before_fit(self, model: Any, seed: int | None) -> None:
        """Called by the client each round before it fits ``model`` (default: nothing).

        ``seed`` seeds this round's privacy noise in a simulation with
        ``reproducible_noise=True``; None (always, in a deployment): the noise comes from
        the operating system's entropy.
        """

    def release_round(self, step: ClientRound, rng: np.random.Generator) -> Release:
        """The labels that leave the client this round (and the event it reports, if any).

        Default: ``Release(randomize(step.labels, step.n_classes, rng))``.

        Parameters
        ----------
        step : ClientRound
            The client's fitted model, its labels on the public pool and its data.
        rng : numpy.random.Generator
            The client's privacy randomness for this round.

        Returns
        -------
        Release

        Examples
        --------
        >>> import numpy as np
        >>> rr = RandomizedResponse(epsilon=50.0, unit="label")
        >>> step = ClientRound(np.array([0, 1, 1]), classes=np.array([0, 1]))
        >>> rr.release_round(step, np.random.default_rng(0)).labels
        array([0, 1, 1])
        """
        return Release(self.randomize(step.labels, step.n_classes, rng))

    def randomize(self, labels: np.ndarray, n_classes: int, rng: np.random.Generator) -> np.ndarray:
        """Return the noisy labels the client releases (vectorised, no per-example loop).

        A label randomiser implements it; a mechanism that overrides :meth:`release_round`
        need not.

        Raises
        ------
        NotImplementedError
            In the base class.
        """
        raise NotImplementedError(
            f"{type(self).__name__} implements neither randomize(labels, n_classes, rng) nor "
            "release_round(step, rng)"
        )

    @abstractmethod
    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """The privacy event of ONE client's release of ``n_labels`` labels in ONE round,
        with respect to one record of its private data, under :attr:`neighbors`."""

    def relation_event(self, n_classes: int, n_labels: int, relation: str) -> Any:
        """One round's privacy event under ``relation``, or None if no bound is stated.

        The event is read as dp-accounting reads it under that relation (a Gaussian event
        has twice its sensitivity under ``"replace_one"``; see
        :mod:`cotrain.privacy.accounting.composition`). Default: :meth:`dp_event` for
        :attr:`neighbors` and None for the other relation — a mechanism that bounds both
        overrides it (every mechanism of :mod:`cotrain.privacy` does).

        Parameters
        ----------
        n_classes, n_labels : int
            As for :meth:`dp_event`.
        relation : {"add_or_remove", "replace_one"}

        Returns
        -------
        DpEvent or None

        Examples
        --------
        >>> class Flip(LabelMechanism):
        ...     delta = 1e-5
        ...     def dp_event(self, n_classes, n_labels):
        ...         return rr_event(0.5, 2)
        >>> Flip().relation_event(2, 10, "add_or_remove")
        RandomizedResponseDpEvent(noise_parameter=0.5, num_buckets=2)
        >>> Flip().relation_event(2, 10, "replace_one") is None
        True
        """
        if check_relation(relation) == self.neighbors:
            return self.dp_event(n_classes, n_labels)
        return None

    @property
    def accountable(self) -> bool:
        """Whether the mechanism's releases must be accounted: always True for a mechanism
        (the same hook as :attr:`consensus.Consensus.accountable`).

        Examples
        --------
        >>> RandomizedResponse(epsilon=1.0).accountable
        True
        """
        return True

    def _check_params(self) -> None:
        if self.budget != math.inf:  # math.inf: no limit, even at a deployed site
            check_positive(self.budget, "budget", allow_none=True)
        check_delta(self.delta)
        check_unit(self.unit)

    def guarantee(self) -> dict[str, str]:
        """What the ε of this mechanism protects and against whom.

        Examples
        --------
        >>> RandomizedResponse(epsilon=1.0).guarantee()
        {'unit': 'record', 'adversary': 'server'}
        >>> RandomizedResponse(epsilon=1.0, unit="label").guarantee()["unit"]
        'label'
        """
        self._check_params()
        return {"unit": str(self.unit), "adversary": str(self.adversary)}

    def validate(self) -> Self:
        """Check the parameters now (they are otherwise checked on first use); return self."""
        self._check_params()
        return self


# --------------------------------------------------------------------------------------------
# K-ary randomized response
# --------------------------------------------------------------------------------------------


class RandomizedResponse(LabelMechanism):
    """K-ary randomized response on each released hard label.

    Each label is kept with probability ``e^{ε'}/(e^{ε'} + K − 1)`` and otherwise replaced
    by a uniformly random *other* class.

    What is protected depends on ``unit``:

    * ``unit="record"`` (the default): one round's release is ``epsilon``-DP (δ = 0) with
      respect to one private training record of the client added or removed, against the
      server. One record can change at most ``s*`` released labels, so each label gets
      ``ε' = epsilon / s*`` and group privacy over the changed labels gives ``epsilon``.
      ``s*`` is ``sensitivity`` when given (your claim, under add/remove; see the module
      docstring) and otherwise every released label — the trivial bound, valid for any
      learner and any two data sets (so the same under replace-one) and very noisy for a
      large pool (at δ > 0 the accountant reports less than ``epsilon`` for it: the loss of
      many tiny independent steps concentrates). With a claimed s*, replace-one neighbours
      change at most ``2·s*`` labels (:meth:`relation_event`).
    * ``unit="label"``: each released public label is ``epsilon``-DP on its own
      (``ε' = epsilon``). This protects no private record and is kept only to compare with
      the literature; the trainer warns when it is used.

    Rounds compose (see ``dp_event``).

    Parameters
    ----------
    epsilon : float
        ε of one round's release (> 0), in the unit of ``unit``.
    sensitivity : int, optional
        s* in *labels* for ``unit="record"``: how many released labels one private record can
        change (>= 1); None = all released labels. Must be None or 1 for ``unit="label"``.
    budget : float, optional
        Total ε per client over the run; None = no limit in process; a deployed
        site's ledger then stops at
        :data:`~cotrain.privacy.ledgers.site_ledger.DEFAULT_SITE_BUDGET`, and ``math.inf``
        means no limit there either.
    delta : float, default=1e-5
        δ at which the composed ε is reported.
    unit : {"record", "label"}, default="record"
        What ``epsilon`` protects.

    Examples
    --------
    >>> import numpy as np
    >>> rr = RandomizedResponse(epsilon=2.0, unit="label")
    >>> round(rr.keep_probability(n_classes=10), 4)         # e^2 / (e^2 + 9)
    0.4509
    >>> noisy = rr.randomize(np.zeros(100_000, dtype=np.int64), 10, np.random.default_rng(0))
    >>> bool(abs((noisy == 0).mean() - 0.4509) < 0.01)
    True
    >>> rr.dp_event(n_classes=10, n_labels=1000)  # doctest: +ELLIPSIS
    RandomizedResponseDpEvent(noise_parameter=0.6101..., num_buckets=10)

    Record level with a claimed sensitivity of 50 labels: ε' = 2/50 per label; without a
    claim, all 1000 released labels: ε' = 2/1000.

    >>> round(RandomizedResponse(epsilon=2.0, sensitivity=50).keep_probability(10), 4)
    0.1037
    >>> round(RandomizedResponse(epsilon=2.0).keep_probability(10, n_labels=1000), 4)
    0.1002
    """

    def __init__(
        self,
        *,
        epsilon: float,
        sensitivity: int | None = None,
        budget: float | None = None,
        delta: float = 1e-5,
        unit: str = "record",
    ) -> None:
        self.epsilon = epsilon
        self.sensitivity = sensitivity
        self.budget = budget
        self.delta = delta
        self.unit = unit

    def _check_params(self) -> None:
        check_epsilon(self.epsilon, "epsilon")
        check_sensitivity_for_unit(self.sensitivity, self.unit, 1, "labels")
        super()._check_params()

    def _changed_labels(self, n_labels: int | None) -> int:
        """s*: how many released labels one unit of protection covers."""
        if self.unit == "label":
            return 1
        if self.sensitivity is not None:
            return int(self.sensitivity)
        if n_labels is None:
            raise ValueError(
                "n_labels is needed: with unit='record' and sensitivity=None, s* is the number "
                "of released labels"
            )
        return max(1, check_n_labels(n_labels))

    def label_epsilon(self, n_labels: int | None = None) -> float:
        """Per-label ε' = epsilon / s* (s* = 1 for ``unit="label"``)."""
        self._check_params()
        return float(self.epsilon) / self._changed_labels(n_labels)

    def keep_probability(self, n_classes: int, n_labels: int | None = None) -> float:
        """Probability that a label is released unchanged: ``e^{ε'}/(e^{ε'} + K − 1)``
        (``n_labels``: labels released per round, needed when s* defaults to all of them)."""
        k = check_n_classes(n_classes)
        eps = self.label_epsilon(n_labels)
        return float(1.0 / (1.0 + (k - 1) * math.exp(-eps)))

    def randomize(
        self, labels: np.ndarray, n_classes: int, rng: np.random.Generator
    ) -> NDArray[np.int64]:
        """Randomize hard labels: int64 codes ``(n,)`` in ``0..C-1`` → noisy codes ``(n,)``.

        A label is kept with probability :meth:`keep_probability`, else shifted by a uniform
        offset in ``1..C-1`` (modulo C), i.e. replaced by a uniformly random other class.
        """
        k = check_n_classes(n_classes)
        codes = check_hard_codes(labels, k)
        if k == 1 or codes.size == 0:
            return codes.copy()
        keep_p = self.keep_probability(k, codes.size)
        flip = rng.random(codes.size) >= keep_p
        shift = rng.integers(1, k, size=codes.size)
        return np.where(flip, (codes + shift) % k, codes).astype(np.int64)

    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """Privacy event of one round: ``min(s*, n_labels)`` compositions of K-ary RR at ε'.

        ``RandomizedResponseDpEvent(q, K)`` with ``q = K/(e^{ε'} + K − 1)`` (dp-accounting's
        RR outputs a uniform bucket with prob. q) is exactly one label's release; a changed
        record affects at most ``min(s*, n_labels)`` labels, so one round is their
        self-composition (``SelfComposedDpEvent``). Its ε at δ = 0 is ``epsilon`` (or less
        when n_labels < s*). For ``unit="label"`` it is one label's event. Compose with
        :func:`cotrain.privacy.epsilon_spent`, which applies the repeat count
        (dp-accounting's PLD accountant would silently drop it).
        """
        return self._event(n_classes, n_labels, 1)

    def relation_event(self, n_classes: int, n_labels: int, relation: str) -> Any:
        """One round's event under ``relation``: :meth:`dp_event` under add/remove; under
        replace-one, ``min(2·s*, n_labels)`` labels at ε' when s* is a claimed
        ``sensitivity`` (removal then addition; at most ``2·epsilon`` at δ = 0), and the same
        event as add/remove for the trivial bound (all labels: any two data sets) and for
        ``unit="label"``.

        Examples
        --------
        >>> rr = RandomizedResponse(epsilon=1.0, sensitivity=5)
        >>> rr.relation_event(10, 100, "replace_one").count          # 2 * 5 labels
        10
        >>> RandomizedResponse(epsilon=1.0).relation_event(10, 100, "replace_one").count
        100
        """
        twice = check_relation(relation) == "replace_one" and self.unit == "record"
        return self._event(n_classes, n_labels, 2 if twice else 1)

    def _event(self, n_classes: int, n_labels: int, factor: int) -> Any:
        """``min(factor·s*, n_labels)`` compositions of K-ary RR at ε' = epsilon / s*."""
        k = check_n_classes(n_classes)
        n = check_n_labels(n_labels)
        if k == 1 or n == 0:
            return noop_event()
        eps = self.label_epsilon(n)
        count = min(factor * self._changed_labels(n), n)
        q = k * math.exp(-eps) / (1.0 + (k - 1) * math.exp(-eps))
        return self_composed(rr_event(q, k), count)


def as_mechanism(privacy: Any) -> Any:
    """The mechanism the client and the server call for ``privacy``: the object itself.

    Parameters
    ----------
    privacy : LabelMechanism or None
        What the user passed as ``privacy=``.

    Returns
    -------
    LabelMechanism or None
        ``privacy`` itself; None for None.

    Raises
    ------
    TypeError
        For an object that is not a :class:`LabelMechanism`.

    Examples
    --------
    >>> rr = RandomizedResponse(epsilon=1.0)
    >>> as_mechanism(rr) is rr, as_mechanism(None)
    (True, None)
    >>> as_mechanism("rr")
    Traceback (most recent call last):
    ...
    TypeError: privacy must be a cotrain.privacy.LabelMechanism (implement dp_event and \
randomize or release_round), got str
    """
    if privacy is None or isinstance(privacy, LabelMechanism):
        return privacy
    raise TypeError(
        "privacy must be a cotrain.privacy.LabelMechanism (implement dp_event and "
        f"randomize or release_round), got {type(privacy).__name__}"
    )
