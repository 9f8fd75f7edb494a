"""DP-SGD for torch clients: record-level privacy by training the model privately.

``FederatedCoTrainer(privacy=DPSGD(...))`` makes every client train its torch model with
DP-SGD (Opacus, :class:`learners.dp_torch.DPTorchClassifier`): Poisson-sampled batches,
per-record gradient clipping and Gaussian noise. The labels a client uploads are then
post-processing of a differentially private model and are released without further noise.

What is protected: **one private record** of a client (unit ``"record"``), for
**add/remove-one** neighbours (the relation of the Poisson-sampled Gaussian analysis that
Opacus and dp-accounting use), against **the server** (adversary ``"server"``: it sees the
labels; the guarantee holds even for anyone who sees the model). Replace-one neighbours
cost more: :func:`dpsgd_epsilon` with ``neighbors="replace_one"`` (and
:meth:`DPSGD.epsilon`) account them directly, so both can be printed.

Accounting: the Poisson rate ``sampling_rate`` and the number of ``steps`` per fit are public
configuration, so a round's privacy event,
``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ/C)), steps)``, is the same
for every client and does not depend on its number of rows: the server computes it
(:meth:`DPSGD.dp_event`) and a client sends nothing about its private rows besides its labels.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from numbers import Real
from typing import Any, ClassVar, Literal

import numpy as np

from cotrain.privacy.mechanisms.base import ClientRound, LabelMechanism, Release
from cotrain.privacy.mechanisms.param_checks import check_delta, check_positive
from learners.checks import check_int

__all__ = ["DPSGD", "dpsgd_epsilon"]


def _torch_classes() -> tuple[type, type]:
    try:
        from learners.dp_torch import DPTorchClassifier
        from learners.torch import TorchClassifier
    except ImportError as exc:
        raise ImportError(
            f'DP-SGD needs torch, opacus and dp-accounting: pip install "cotrain[torch,dp]" ({exc})'
        ) from exc
    return TorchClassifier, DPTorchClassifier


class DPSGD(LabelMechanism):
    """Record-level DP for torch clients: each client trains its model with DP-SGD (Opacus).

    Not a label mechanism: it changes how a client *trains*, and the labels it uploads are
    post-processing of its DP model, released unchanged. At set-up the client replaces its
    estimator by ``prepare(estimator)``, a :class:`~learners.dp_torch.DPTorchClassifier` with
    the same parameters plus the DP ones; before each fit it seeds the training noise
    (``before_fit``). Every fit samples each training row (private, and pseudo-labelled
    public) with probability ``sampling_rate`` and runs exactly ``steps`` DP-SGD steps,
    whatever the number of rows, so the round's privacy event is public configuration: the
    server's ledger composes :meth:`dp_event` over the rounds a client took part in, and the
    client reports nothing (``reports_events`` False).

    Guarantee: (ε, δ)-DP with respect to **one private record** of the client, add/remove-one
    neighbours (replace-one: :meth:`epsilon` with ``neighbors="replace_one"``), against the
    server (and anyone who sees the model or its labels), with ε the composition of one
    :meth:`dp_event` per round at ``delta``. The proof is in
    :class:`~learners.dp_torch.DPTorchClassifier`; it needs every training row at a weight
    that does not depend on the private rows, so the client trains with the pool at full
    weight (``trust`` None or 1; any other trust is refused, see
    :func:`cotrain.trust.client_trust`). ``loss_curve_`` stays local (not private).

    Parameters
    ----------
    noise_multiplier : float, default=1.0
        σ / C of every DP-SGD step (> 0).
    max_grad_norm : float, default=1.0
        C, the per-record gradient clipping norm (> 0).
    sampling_rate : float
        q in (0, 1], the Poisson rate of every step: each training row joins a step's batch
        with probability q. Required: it is public configuration (the default of Opacus,
        batch size / number of rows, would depend on the private rows).
    steps : int
        DP-SGD steps of every fit (≥ 1), the first fit included. Required, for the same
        reason (epochs over the rows would make it depend on their number).
    budget : float, optional
        Total ε per client over the run (add/remove-one); None = no limit in process;
        a deployed site's ledger then stops at
        :data:`~cotrain.privacy.ledgers.site_ledger.DEFAULT_SITE_BUDGET`, and ``math.inf``
        means no limit there either.
    delta : float, default=1e-5
        δ at which ε is reported.
    secure_mode : bool, default=False
        Cryptographically secure noise and sampling (needs torchcsprng; see
        :class:`~learners.dp_torch.DPTorchClassifier`).

    The client's ``batch_size`` is the constant the noisy gradient sum is divided by (a
    learning-rate scale, not a privacy parameter); set it near ``sampling_rate`` times the
    usual number of training rows.

    Attributes
    ----------
    shares : ("hard", "soft")
        Labels of either kind are post-processing of the DP model.
    reports_events : False
        The server computes each round's event (:meth:`dp_event`): the client sends none.
    cross_validated_trust : False
        The client trains at full pool weight: choosing it by cross-validation would look at
        its private records outside the accounted ε.
    unit : "record"
        ε is per private record of a client.
    adversary : "server"
        Who the guarantee is against (it also holds against anyone who sees the model).
    neighbors : "add_or_remove"
        The neighboring relation of the headline ε; :meth:`epsilon` also gives the
        replace-one ε.

    Examples
    --------
    >>> import numpy as np
    >>> from learners import TorchClassifier
    >>> mech = DPSGD(noise_multiplier=1.0, max_grad_norm=1.0, sampling_rate=0.1, steps=10)
    >>> mech.dp_event(n_classes=2, n_labels=50)        # the same for every client and round
    SelfComposedDpEvent(event=PoissonSampledDpEvent(sampling_probability=0.1, \
event=GaussianDpEvent(noise_multiplier=1.0)), count=10)
    >>> est = mech.prepare(TorchClassifier(module_params={"hidden": (8,)}, batch_size=10,
    ...                                    random_state=0))
    >>> type(est).__name__, est.sample_rate, est.steps_per_fit
    ('DPTorchClassifier', 0.1, 10)
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = (X[:, 0] > 0).astype(int)
    >>> mech.round_event(est.fit(X, y)) == mech.dp_event(2, 50)
    True
    >>> round(mech.epsilon(rounds=1), 3), round(mech.epsilon(1, neighbors="replace_one"), 3)
    (2.855, 3.434)
    >>> DPSGD(noise_multiplier=1.0).validate()
    Traceback (most recent call last):
    ...
    ValueError: DPSGD needs sampling_rate (the Poisson rate q of every step) and steps (DP-SGD \
steps per fit) as public configuration: derived from a client's number of rows they would \
reveal it; e.g. DPSGD(noise_multiplier=1.0, max_grad_norm=1.0, sampling_rate=0.1, steps=20)
    """

    shares: ClassVar[tuple[str, ...]] = ("hard", "soft")
    reports_events: ClassVar[bool] = False
    cross_validated_trust: ClassVar[bool] = False
    unit: ClassVar[str] = "record"
    adversary: ClassVar[str] = "server"
    neighbors: ClassVar[str] = "add_or_remove"

    def relation_event(self, n_classes: int, n_labels: int, relation: str) -> Any:
        """One round's event under ``relation``: :meth:`dp_event` for both relations.

        The ledger reads it as dp-accounting does under that relation
        (:mod:`cotrain.privacy.accounting.composition`): the Poisson-sampled Gaussian's add/remove
        PLD, or its ``REPLACE_ONE`` PLD (the replaced record's slot sampled with probability q,
        its clipped gradient moving by up to twice the clipping norm) — the same ε as
        :meth:`epsilon` with ``neighbors=relation``.
        """
        from cotrain.privacy.accounting.composition import check_relation

        check_relation(relation)
        return self.dp_event(n_classes, n_labels)

    def __init__(
        self,
        *,
        noise_multiplier: float = 1.0,
        max_grad_norm: float = 1.0,
        sampling_rate: float | None = None,
        steps: int | None = None,
        budget: float | None = None,
        delta: float = 1e-5,
        secure_mode: bool = False,
    ) -> None:
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.sampling_rate = sampling_rate
        self.steps = steps
        self.budget = budget
        self.delta = delta
        self.secure_mode = secure_mode

    def _check_params(self) -> None:
        if self.sampling_rate is None or self.steps is None:
            raise ValueError(
                "DPSGD needs sampling_rate (the Poisson rate q of every step) and steps "
                "(DP-SGD steps per fit) as public configuration: derived from a client's "
                "number of rows they would reveal it; e.g. DPSGD(noise_multiplier=1.0, "
                "max_grad_norm=1.0, sampling_rate=0.1, steps=20)"
            )
        check_positive(self.noise_multiplier, "noise_multiplier")
        check_positive(self.max_grad_norm, "max_grad_norm")
        rate = self.sampling_rate
        if isinstance(rate, bool) or not isinstance(rate, Real) or not 0.0 < float(rate) <= 1.0:
            raise ValueError(f"sampling_rate must be a number in (0, 1], got {rate!r}")
        check_int(self.steps, "steps", 1)
        if not isinstance(self.secure_mode, bool | np.bool_):
            raise TypeError(f"secure_mode must be True or False, got {self.secure_mode!r}")
        super()._check_params()

    # ------------------------------------------------------------------ the protocol
    def check_federation(self, consensus: Any, estimators: list[Any]) -> None:
        """Every client's estimator must be one DP-SGD can train (see :meth:`prepare`).

        Raises
        ------
        TypeError or ValueError
            Naming the first client whose estimator :meth:`prepare` refuses.

        Examples
        --------
        >>> from sklearn.linear_model import LogisticRegression
        >>> DPSGD(sampling_rate=0.1, steps=20).check_federation(None, [LogisticRegression()])
        Traceback (most recent call last):
        ...
        TypeError: client 0: DP-SGD needs a torch client (learners.TorchClassifier or \
learners.dp_torch.DPTorchClassifier), got LogisticRegression
        """
        from sklearn.base import clone

        for i, est in enumerate(estimators):
            try:
                self.prepare(clone(est))
            except (TypeError, ValueError) as err:
                raise type(err)(f"client {i}: {err}") from err

    def before_fit(self, model: Any, seed: int | None) -> None:
        """Seed the training noise of the client's next fit (:meth:`seed_noise`)."""
        self.seed_noise(model, seed)

    def release_round(self, step: ClientRound, rng: np.random.Generator) -> Release:
        """The client's labels unchanged (post-processing of its DP model), and no event:
        the server computes it (:meth:`dp_event`).

        Raises
        ------
        RuntimeError
            If any fit of the model so far was not the configured one (an event other than
            :meth:`dp_event`, e.g. a fit that failed half-way; a fit of no step is
            harmless): the labels would not be covered by the accounted ε, so nothing is
            released.
        """
        import dp_accounting as dp

        self.round_event(step.model)  # the client's DP model, fitted
        configured = self._event()
        events = getattr(step.model, "estimator_", step.model).dp_events_
        for event in events:
            if event != configured and not isinstance(event, dp.NoOpDpEvent):
                raise RuntimeError(
                    f"a fit of the client's model ({event}) is not the configured DP-SGD "
                    f"round ({configured}): its labels are not released"
                )
        return Release(step.labels)

    # ------------------------------------------------------------------ client side
    def prepare(self, estimator: Any) -> Any:
        """The client's estimator made to train with DP-SGD (the input is not changed).

        Parameters
        ----------
        estimator : TorchClassifier or DPTorchClassifier
            A :class:`~learners.TorchClassifier` becomes an unfitted
            :class:`~learners.dp_torch.DPTorchClassifier` with the same parameters plus this
            mechanism's ``noise_multiplier``, ``max_grad_norm``, ``secure_mode``,
            ``sampling_rate`` (its ``sample_rate``) and ``steps`` (its ``steps_per_fit``); a
            ``DPTorchClassifier`` is cloned and given them (the mechanism's values win).
            Fitted state is dropped: training done without this mechanism is not accounted.

        Returns
        -------
        DPTorchClassifier
            Unfitted, its parameters validated.

        Raises
        ------
        TypeError
            For any other estimator (DP-SGD needs a torch client), including subclasses of
            ``TorchClassifier`` other than ``DPTorchClassifier`` (their own training would be
            replaced; derive them from ``DPTorchClassifier`` instead).
        ValueError
            For invalid parameters. ImportError if ``secure_mode=True`` and torchcsprng is
            missing.

        Examples
        --------
        >>> from sklearn.linear_model import LogisticRegression
        >>> DPSGD(sampling_rate=0.1, steps=20).prepare(LogisticRegression())
        Traceback (most recent call last):
        ...
        TypeError: DP-SGD needs a torch client (learners.TorchClassifier or \
learners.dp_torch.DPTorchClassifier), got LogisticRegression
        """
        self._check_params()
        from sklearn.base import clone

        torch_cls, dp_cls = _torch_classes()
        dp_params = {
            "noise_multiplier": float(self.noise_multiplier),
            "max_grad_norm": float(self.max_grad_norm),
            "secure_mode": bool(self.secure_mode),
            "sample_rate": float(self.sampling_rate),  # type: ignore[arg-type]  # checked
            "steps_per_fit": int(self.steps),  # type: ignore[arg-type]  # checked
        }
        if isinstance(estimator, dp_cls):
            prepared = clone(estimator).set_params(**dp_params)
        elif type(estimator) is torch_cls:
            prepared = dp_cls(**{**clone(estimator).get_params(deep=False), **dp_params})
        elif isinstance(estimator, torch_cls):
            raise TypeError(
                f"DP-SGD can convert a TorchClassifier, not its subclass "
                f"{type(estimator).__name__} (its own training would be replaced): derive it "
                "from learners.dp_torch.DPTorchClassifier instead"
            )
        else:
            raise TypeError(
                "DP-SGD needs a torch client (learners.TorchClassifier or "
                f"learners.dp_torch.DPTorchClassifier), got {type(estimator).__name__}"
            )
        prepared._check_params()
        return prepared

    def round_event(self, fitted_estimator: Any) -> Any:
        """The privacy event of the training done in the estimator's last fit.

        Parameters
        ----------
        fitted_estimator : DPTorchClassifier
            The client's fitted model (a :class:`~learners.ClassAlignedClassifier` around
            one is unwrapped).

        Returns
        -------
        dp_accounting.DpEvent
            ``fitted_estimator.dp_events_[-1]``:
            ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ/C)), steps)``,
            equal to :meth:`dp_event` for a model this mechanism prepared (a check the
            client makes before it releases anything; it is not sent).

        Raises
        ------
        TypeError
            If the estimator was not trained with DP-SGD.
        ValueError
            If it has not been fitted.
        """
        est = getattr(fitted_estimator, "estimator_", fitted_estimator)
        _, dp_cls = _torch_classes()
        if not isinstance(est, dp_cls):
            raise TypeError(
                "round_event needs the client's DPTorchClassifier (from DPSGD.prepare), got "
                f"{type(est).__name__}"
            )
        events = getattr(est, "dp_events_", None)
        if not events:
            raise ValueError("the DPTorchClassifier has not been fitted: no round event yet")
        return events[-1]

    def seed_noise(self, model: Any, seed: int | None) -> None:
        """Seed the next fit's noise: None (the default in a federation) draws it from the
        operating system's entropy; an int (``reproducible_noise=True`` only) makes it
        reproducible — and replayable by whoever knows the seed.

        ``model`` is the client's :class:`~learners.ClassAlignedClassifier` (its prototype
        estimator's ``noise_seed`` carries over to the model that continues training) or a
        DPTorchClassifier.

        Examples
        --------
        >>> from learners.dp_torch import DPTorchClassifier
        >>> est = DPTorchClassifier()
        >>> DPSGD().seed_noise(est, 7); est.noise_seed
        7
        """
        target = getattr(model, "estimator", model)
        target.set_params(noise_seed=None if seed is None else int(seed))

    def reported_epsilon(
        self,
        events: Sequence[Any],
        delta: float,
        neighbors: Literal["add_or_remove", "replace_one"] = "add_or_remove",
    ) -> float:
        """ε of a client's round events (dp-accounting's PLD, composed incrementally).

        Under ``neighbors`` (default add/remove-one, the relation of :attr:`neighbors`;
        ``"replace_one"`` gives the replace-one ε): the same as :func:`dpsgd_epsilon`.

        Examples
        --------
        >>> import dp_accounting as dp
        >>> step = dp.PoissonSampledDpEvent(0.05, dp.GaussianDpEvent(1.0))
        >>> events = [dp.SelfComposedDpEvent(step, 100)]
        >>> DPSGD().reported_epsilon(events, 1e-5) == dpsgd_epsilon(events, 1e-5)
        True
        >>> e = DPSGD().reported_epsilon(events, 1e-5, neighbors="replace_one")
        >>> e == dpsgd_epsilon(events, 1e-5, neighbors="replace_one")
        True
        """
        events = tuple(events)
        if not events:
            return 0.0
        cache = self.__dict__.setdefault("_pld_cache", {})
        key = (events, float(delta), neighbors)
        if key not in cache:
            # a client's events only grow: extend the accountant of the list without the
            # last event instead of recomposing every round from the first
            previous = cache.get((events[:-1], float(delta), neighbors))
            accountant = copy.deepcopy(previous[0]) if previous is not None else _pld(neighbors)
            for event in events[-1:] if previous is not None else events:
                accountant.compose(event, 1)
            cache[key] = (accountant, _pld_epsilon(accountant, float(delta)))
            while len(cache) > 512:  # bounded: the oldest entries go first
                cache.pop(next(iter(cache)))
        return cache[key][1]

    def epsilon(
        self, rounds: int, neighbors: Literal["add_or_remove", "replace_one"] = "add_or_remove"
    ) -> float:
        """ε at ``delta`` of a client that took part in ``rounds`` rounds (one private record,
        against the server; dp-accounting's PLD of ``rounds`` × :meth:`dp_event`).

        Parameters
        ----------
        rounds : int
            Rounds (fits whose labels were released), ≥ 0.
        neighbors : {"add_or_remove", "replace_one"}, default="add_or_remove"
            The neighboring relation.

        Examples
        --------
        >>> mech = DPSGD(noise_multiplier=1.0, sampling_rate=0.05, steps=100)
        >>> round(mech.epsilon(2), 2), round(mech.epsilon(2, neighbors="replace_one"), 2)
        (4.77, 7.11)
        """
        self._check_params()
        rounds = check_int(rounds, "rounds", 0)
        return dpsgd_epsilon([self._event()] * rounds, self.delta, neighbors=neighbors)

    # ------------------------------------------------------------------ not a label mechanism
    def randomize(self, labels: np.ndarray, n_classes: int, rng: np.random.Generator) -> Any:
        """Not available: DP-SGD protects the model; its labels are released unchanged.

        Raises
        ------
        TypeError
            Always.
        """
        raise TypeError(
            "DPSGD is not a label mechanism: the client trains with "
            "DP-SGD and releases its labels as they are; there is nothing to randomize"
        )

    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """The privacy event of one client's round: ``steps`` Poisson-sampled Gaussian steps.

        ``SelfComposedDpEvent(PoissonSampledDpEvent(sampling_rate,
        GaussianDpEvent(noise_multiplier)), steps)``, w.r.t. one private record (add/remove
        one); the same for every client and round, whatever ``n_classes``, ``n_labels`` and
        the client's rows: the server computes it.

        Examples
        --------
        >>> DPSGD(noise_multiplier=2.0, sampling_rate=0.2, steps=5).dp_event(10, 300)
        SelfComposedDpEvent(event=PoissonSampledDpEvent(sampling_probability=0.2, \
event=GaussianDpEvent(noise_multiplier=2.0)), count=5)
        """
        self._check_params()
        return self._event()

    def _event(self) -> Any:
        import dp_accounting as dp

        step = dp.PoissonSampledDpEvent(
            float(self.sampling_rate),  # type: ignore[arg-type]  # checked by _check_params
            dp.GaussianDpEvent(float(self.noise_multiplier)),
        )
        return dp.SelfComposedDpEvent(step, int(self.steps))  # type: ignore[arg-type]


def _pld(neighbors: str) -> Any:
    """An empty dp-accounting PLD accountant for ``neighbors`` ("add_or_remove" or
    "replace_one")."""
    import dp_accounting as dp

    relations = {
        "add_or_remove": dp.NeighboringRelation.ADD_OR_REMOVE_ONE,
        "replace_one": dp.NeighboringRelation.REPLACE_ONE,
    }
    if neighbors not in relations:
        raise ValueError(f"neighbors must be 'add_or_remove' or 'replace_one', got {neighbors!r}")
    return dp.pld.PLDAccountant(relations[neighbors])


def _pld_epsilon(accountant: Any, delta: float) -> float:
    """ε of an accountant at δ, with absl's chatter silenced."""
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        return float(accountant.get_epsilon(delta))
    finally:
        absl.setLevel(level)


def dpsgd_epsilon(
    events: Sequence[Any],
    delta: float,
    *,
    accountant: Literal["pld", "rdp"] = "pld",
    neighbors: Literal["add_or_remove", "replace_one"] = "add_or_remove",
) -> float:
    """ε at `delta` of DP-SGD round events (one client's), composed with their step counts.

    dp-accounting's accountants handle a ``SelfComposedDpEvent`` of a Poisson-sampled
    Gaussian with its count in one go (fast); expanding it step by step, as
    :func:`cotrain.privacy.epsilon_spent` does for events it has no closed form for, gives
    the same ε far more slowly.

    Parameters
    ----------
    events : sequence of dp_accounting.DpEvent
        E.g. ``DPTorchClassifier.dp_events_`` or the ``round_event`` of every round.
    delta : float
        δ in (0, 1).
    accountant : {"pld", "rdp"}, default="pld"
        dp-accounting's ``PLDAccountant`` (tight) or ``RdpAccountant`` (an upper bound; the
        one Opacus' ``accountant="rdp"`` reproduces).
    neighbors : {"add_or_remove", "replace_one"}, default="add_or_remove"
        The neighboring relation; ``"replace_one"`` needs ``accountant="pld"``
        (dp-accounting's RDP accountant does not support it for Poisson sampling).

    Returns
    -------
    float
        ε ≥ 0 w.r.t. one private record; 0.0 for an empty list.

    Examples
    --------
    >>> import dp_accounting as dp
    >>> step = dp.PoissonSampledDpEvent(0.05, dp.GaussianDpEvent(1.0))
    >>> events = [dp.SelfComposedDpEvent(step, 100)] * 2
    >>> round(dpsgd_epsilon(events, 1e-5, accountant="rdp"), 2)
    5.37
    >>> round(dpsgd_epsilon(events, 1e-5), 2)
    4.77
    >>> round(dpsgd_epsilon(events, 1e-5, neighbors="replace_one"), 2)
    7.11
    """
    import dp_accounting as dp

    delta = check_delta(delta)
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    relations = {
        "add_or_remove": dp.NeighboringRelation.ADD_OR_REMOVE_ONE,
        "replace_one": dp.NeighboringRelation.REPLACE_ONE,
    }
    if neighbors not in relations:
        raise ValueError(f"neighbors must be 'add_or_remove' or 'replace_one', got {neighbors!r}")
    if accountant == "rdp" and neighbors == "replace_one":
        raise ValueError(
            "dp-accounting's RDP accountant has no replace-one analysis of Poisson sampling: "
            "use accountant='pld' with neighbors='replace_one'"
        )
    relation = relations[neighbors]
    acc = (
        dp.pld.PLDAccountant(relation)
        if accountant == "pld"
        else dp.rdp.RdpAccountant(neighboring_relation=relation)
    )
    if not events:
        return 0.0
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        acc.compose(dp.ComposedDpEvent(list(events)), 1)
        return float(acc.get_epsilon(float(delta)))
    finally:
        absl.setLevel(level)
