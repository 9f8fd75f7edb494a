"""DP-SGD for torch clients: record-level privacy by training the model privately.

``FederatedCoTrainer(privacy=DPSGD(...))`` makes every client train its torch model with
DP-SGD (Opacus, :class:`learners.dp_torch.DPTorchClassifier`): Poisson-sampled batches,
per-record gradient clipping and Gaussian noise. The labels a client uploads are then
post-processing of a differentially private model and are released without further noise.

What is protected: **one private record** of a client (unit ``"record"``), for
**add/remove-one** neighbours (the relation of the Poisson-sampled Gaussian analysis that
Opacus and dp-accounting use), against **the server** (adversary ``"server"``: it sees the
labels; the guarantee holds even for anyone who sees the model). Replace-one neighbours,
which the label mechanisms of :mod:`cotrain.privacy.mechanisms` use, cost more:
:func:`dpsgd_epsilon` with ``neighbors="replace_one"`` accounts them directly.

Accounting: the privacy event of a round depends on the client's own training (its number of
rows n sets the sampling rate q = batch_size / n and the steps per epoch), which the server
cannot know, so :meth:`DPSGD.dp_event` refuses; the client reports
:meth:`DPSGD.round_event` of its fitted model with its upload, and the ledger composes those.
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Sequence
from numbers import Real
from typing import Any, ClassVar, Literal

import numpy as np

from cotrain.privacy.mechanisms import ClientRound, LabelMechanism, Release
from cotrain.privacy.param_checks import check_positive
from learners._deprecation import renamed_keywords

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
    (``before_fit``), and after it, ``release_round`` returns the labels with
    ``round_event(fitted)``, the privacy event of that fit's training, which the client
    reports with its upload and the ledger composes over rounds (``reports_events``).

    Guarantee: (ε, δ)-DP with respect to **one private record** of the client, add/remove-one
    neighbours, against the server (and anyone who sees the model or its labels), with ε the
    composition of the client's round events at ``delta``. See
    :class:`~learners.dp_torch.DPTorchClassifier` for the assumptions (the number of training
    rows is public; sample weights per row; ``loss_curve_`` is not private).

    Parameters
    ----------
    noise_multiplier : float, default=1.0
        σ / C of every DP-SGD step (> 0).
    max_grad_norm : float, default=1.0
        C, the per-record gradient clipping norm (> 0).
    budget : float, optional
        Total ε per client over the run; None = no limit.
    delta : float, default=1e-5
        δ at which ε is reported.
    secure_mode : bool, default=False
        Cryptographically secure noise and sampling (needs torchcsprng; see
        :class:`~learners.dp_torch.DPTorchClassifier`).

    Attributes
    ----------
    shares : ("hard", "soft")
        Labels of either kind are post-processing of the DP model.
    reports_events : True
        The client reports each round's event (its own training), not the server.
    cross_validated_trust : False
        The client trains at full pool weight: choosing it by cross-validation would look at
        its private records outside the accounted ε.
    unit : "record"
        ε is per private record of a client.
    adversary : "server"
        Who the guarantee is against (it also holds against anyone who sees the model).
    neighbors : "add_or_remove"
        The neighboring relation of the guarantee (``neighbours``: its deprecated
        spelling).

    Examples
    --------
    >>> import numpy as np
    >>> from learners import TorchClassifier
    >>> mech = DPSGD(noise_multiplier=1.0, max_grad_norm=1.0)
    >>> est = mech.prepare(TorchClassifier(module_params={"hidden": (8,)}, batch_size=10,
    ...                                    max_epochs=1, random_state=0))
    >>> type(est).__name__, est.noise_multiplier, est.batch_size
    ('DPTorchClassifier', 1.0, 10)
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = (X[:, 0] > 0).astype(int)
    >>> mech.round_event(est.fit(X, y))       # 1 epoch: 10 steps at q = 10/100
    SelfComposedDpEvent(event=PoissonSampledDpEvent(sampling_probability=0.1, \
event=GaussianDpEvent(noise_multiplier=1.0)), count=10)
    >>> round(dpsgd_epsilon([mech.round_event(est)], mech.delta, accountant="rdp"), 3)
    3.442
    """

    shares: ClassVar[tuple[str, ...]] = ("hard", "soft")
    reports_events: ClassVar[bool] = True
    cross_validated_trust: ClassVar[bool] = False
    unit: ClassVar[str] = "record"
    adversary: ClassVar[str] = "server"
    neighbors: ClassVar[str] = "add_or_remove"

    @property
    def neighbours(self) -> str:
        """Deprecated spelling of :attr:`neighbors`."""
        warnings.warn(
            "DPSGD.neighbours is deprecated: use neighbors (the old name goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.neighbors

    def __init__(
        self,
        noise_multiplier: float = 1.0,
        max_grad_norm: float = 1.0,
        budget: float | None = None,
        delta: float = 1e-5,
        secure_mode: bool = False,
    ) -> None:
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.budget = budget
        self.delta = delta
        self.secure_mode = secure_mode

    def _check_params(self) -> None:
        check_positive(self.noise_multiplier, "noise_multiplier")
        check_positive(self.max_grad_norm, "max_grad_norm")
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
        >>> DPSGD().check_federation(None, [LogisticRegression()])
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
        """The client's labels unchanged (post-processing of its DP model) with the privacy
        event of the fit that made them (:meth:`round_event` of ``step.model``)."""
        return Release(step.labels, self.round_event(step.model))

    # ------------------------------------------------------------------ client side
    def prepare(self, estimator: Any) -> Any:
        """The client's estimator made to train with DP-SGD (the input is not changed).

        Parameters
        ----------
        estimator : TorchClassifier or DPTorchClassifier
            A :class:`~learners.TorchClassifier` becomes an unfitted
            :class:`~learners.dp_torch.DPTorchClassifier` with the same parameters plus this
            mechanism's ``noise_multiplier``, ``max_grad_norm`` and ``secure_mode``; a
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
        >>> DPSGD().prepare(LogisticRegression())
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
        }
        if isinstance(estimator, dp_cls):
            prepared = clone(estimator).set_params(**dp_params)
        elif type(estimator) is torch_cls:
            prepared = dp_cls(**clone(estimator).get_params(deep=False), **dp_params)
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
            ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ/C)), steps)``.

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

    def reported_epsilon(self, events: Sequence[Any], delta: float) -> float:
        """ε of a client's reported round events, as the trainer's ledger reports it.

        Replace-one neighbours, so that it means the same as every other record-level ε of
        this library (:func:`dpsgd_epsilon` with ``neighbors="replace_one"``, PLD).

        Examples
        --------
        >>> import dp_accounting as dp
        >>> step = dp.PoissonSampledDpEvent(0.05, dp.GaussianDpEvent(1.0))
        >>> e = DPSGD().reported_epsilon([dp.SelfComposedDpEvent(step, 100)], 1e-5)
        >>> e > dpsgd_epsilon([dp.SelfComposedDpEvent(step, 100)], 1e-5)   # add/remove
        True
        """
        events = tuple(events)
        if not events:
            return 0.0
        cache = self.__dict__.setdefault("_pld_cache", {})
        key = (events, float(delta))
        if key not in cache:
            # a client's events only grow: extend the accountant of the list without the
            # last event instead of recomposing every round from the first
            previous = cache.get((events[:-1], float(delta)))
            accountant = copy.deepcopy(previous[0]) if previous is not None else _replace_one_pld()
            for event in events[-1:] if previous is not None else events:
                accountant.compose(event, 1)
            cache[key] = (accountant, _pld_epsilon(accountant, float(delta)))
            while len(cache) > 512:  # bounded: the oldest entries go first
                cache.pop(next(iter(cache)))
        return cache[key][1]

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
        """Not available on the server: the event depends on the client's training.

        The ledger uses the event each client reports with its upload,
        :meth:`round_event` of its fitted model.

        Raises
        ------
        TypeError
            Always.
        """
        raise TypeError(
            "DPSGD's privacy event depends on each client's training (its sampling rate "
            "batch_size / n_rows and its number of steps), which the server does not know: "
            "account the event the client reports, DPSGD.round_event(fitted_estimator)"
        )


def _replace_one_pld() -> Any:
    """An empty dp-accounting PLD accountant for replace-one neighbours."""
    import dp_accounting as dp

    return dp.pld.PLDAccountant(dp.NeighboringRelation.REPLACE_ONE)


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
    **old: Any,
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
        The neighboring relation (``neighbours=``: its deprecated spelling);
        ``"replace_one"`` needs ``accountant="pld"``
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

    if isinstance(delta, bool) or not isinstance(delta, Real) or not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    relations = {
        "add_or_remove": dp.NeighboringRelation.ADD_OR_REMOVE_ONE,
        "replace_one": dp.NeighboringRelation.REPLACE_ONE,
    }
    neighbors = renamed_keywords(
        "dpsgd_epsilon", old, {"neighbours": "neighbors"}, strict=True
    ).get("neighbors", neighbors)
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
