"""The methods an experiment can run, as a registry: :data:`METHODS`.

Each entry maps a ``method.name`` to a :class:`Method`: a function that builds and fits
the model from a :class:`MethodInput`, the ``[method]`` keys it requires, which history
column is the accuracy of the model it delivers, and what an audit must know about the
labels the server saw. Adding a method is one entry; validation refuses names that are
not keys of :data:`METHODS` and lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotrain.experiment.errors import ExperimentError, InvalidValue
from cotrain.params import did_you_mean
from cotrain.persistence.checkpoint import checkpoint_blocker

__all__ = [
    "CERTAINTY_CONSENSUS",
    "CONSENSUS_METHODS",
    "METHODS",
    "QUALITY_CONSENSUS",
    "Method",
    "MethodInput",
    "check_method",
    "noise_replayable",
]

#: consensus names that take ``power``, ``quality_power``, ``top_k`` (``consensus.QualityVote``)
QUALITY_CONSENSUS = ("quality", "quality_vote")
#: consensus names whose scores come from ``[method.certainty]`` (FedAUX scorers)
CERTAINTY_CONSENSUS = ("certainty", "certainty_weighted", "fedaux", *QUALITY_CONSENSUS)
#: consensus names that take ``quorum`` (``consensus.QualifiedMajority``)
QUORUM_CONSENSUS = ("qualified", "qualified_majority")
#: methods whose server forms a consensus (``consensus`` and its parameters apply)
CONSENSUS_METHODS = ("fedct", "dp-fedct")


@dataclass
class MethodInput:
    """What a method is fitted on: the clients' learners and data, and its settings.

    Attributes
    ----------
    learners : list
        One new learner per client.
    X, y : list of arrays
        Each client's labelled rows.
    X_public : array
        The public unlabelled pool.
    y_public : array or None
        The pool's true labels where known (recorded, never trained on).
    eval_set : tuple
        ``(X_test, y_test)``.
    method : dict
        The resolved ``[method]`` table.
    seed : int
        The run's seed.
    folder : Path
        The run's folder (a FedCT run keeps its checkpoint there).

    Examples
    --------
    >>> from pathlib import Path
    >>> inp = MethodInput([], [], [], None, None, (None, None), {"rounds": 3}, 7, Path("."))
    >>> inp.common
    {'rounds': 3, 'random_state': 7}
    """

    learners: list[Any]
    X: list[Any]
    y: list[Any]
    X_public: Any
    y_public: Any
    eval_set: tuple[Any, Any]
    method: dict[str, Any]
    seed: int
    folder: Path

    @property
    def common(self) -> dict[str, Any]:
        """Keyword arguments every round-based method takes: ``rounds``, ``random_state``."""
        return {"rounds": self.method.get("rounds", 10), "random_state": self.seed}

    @property
    def classes(self) -> Any:
        """The dataset's label space: every label of its labelled, test and public rows.

        Public configuration of the experiment (the data file defines it), which a run with
        a privacy mechanism needs: it is not taken from what any one client holds.
        """
        import numpy as np

        labels = [*self.y, self.eval_set[1], self.y_public]
        return np.unique(np.concatenate([np.asarray(v).ravel() for v in labels if v is not None]))

    @property
    def reproducible_noise(self) -> bool:
        """``[method] reproducible_noise``: seed the privacy noise from the run's seed.

        False (the default): every release draws its noise from the operating system's
        entropy, so that the server, who knows the run's seed, cannot replay it.
        """
        return bool(self.method.get("reproducible_noise", False))


@dataclass(frozen=True)
class Method:
    """One entry of :data:`METHODS`.

    Attributes
    ----------
    fit : callable
        ``fit(MethodInput) -> model``: builds the model and fits it; the model has a
        ``history_`` of round records.
    requires : tuple of str
        ``[method]`` keys the method cannot run without (refused when the file is read).
    accuracy : str
        The round record's attribute that is the accuracy of the model the method
        delivers: the clients' own models (``mean_accuracy``) or one model
        (``consensus_accuracy``, e.g. PATE's student).
    audit_noise : callable, optional
        ``audit_noise(model, seed) -> dict``: keyword arguments of
        :func:`cotrain.audit.audit_clients` that describe the noise on the labels the
        server saw; None where it saw them as the clients computed them.

    Examples
    --------
    >>> METHODS["pate"].accuracy, METHODS["dp-fedct"].requires
    ('consensus_accuracy', ('privacy',))
    >>> def majority_of_locals(inp):  # a new method is one more entry
    ...     return METHODS["local"].fit(inp)
    >>> entry = Method(majority_of_locals, accuracy="consensus_accuracy")
    >>> entry.requires, entry.audit_noise is None
    ((), True)
    """

    fit: Callable[[MethodInput], Any]
    requires: tuple[str, ...] = ()
    accuracy: str = "mean_accuracy"
    audit_noise: Callable[[Any, int], dict[str, Any]] | None = None


def _fedct(inp: MethodInput, privacy: Any = None) -> Any:
    from cotrain import FederatedCoTrainer

    method = inp.method
    consensus = method.get("consensus", "majority")
    if consensus in QUORUM_CONSENSUS and "quorum" in method:
        from consensus import QualifiedMajority

        consensus = QualifiedMajority(quorum=float(method["quorum"]))
    elif consensus in CERTAINTY_CONSENSUS:
        consensus = _scored_consensus(inp, consensus)
    checkpointable = all(checkpoint_blocker(est) is None for est in inp.learners)
    model = FederatedCoTrainer(
        inp.learners,
        consensus=consensus,
        share=method.get("share", "hard"),
        participation=float(method.get("participation", 1.0)),
        early_stopping=method.get("early_stopping"),
        privacy=privacy,
        # with privacy, the label space is public configuration: the dataset's
        classes=None if privacy is None else inp.classes,
        # the paper's FedCT unless the file asks for trust ("auto" or a weight)
        trust=None if method.get("trust", "none") == "none" else method["trust"],
        # a learner that cannot be checkpointed restarts its run when resumed
        checkpoint_dir=inp.folder / "checkpoint" if checkpointable else None,
        reproducible_noise=inp.reproducible_noise,
        **inp.common,
    )
    resume = model.checkpoint_dir is not None and (inp.folder / "checkpoint" / "LATEST").exists()
    model.fit(
        inp.X,
        inp.y,
        X_public=inp.X_public,
        eval_set=inp.eval_set,
        y_public=inp.y_public,
        resume=resume,
    )
    return model


def _scored_consensus(inp: MethodInput, name: str) -> Any:
    """``QualityVote`` / ``CertaintyWeighted`` with FedAUX scores of each client's data.

    ``[method.certainty]`` (optional for ``quality``): each client fits a certainty scorer on
    its own rows against the public pool as negatives (``lam``, default 0.1) and the server
    gets its scores on the pool once, before round 1. ``dp = true`` releases each scorer with
    Gaussian noise, ``(epsilon, delta)``-DP for one private record of that client against the
    server (defaults 0.5, 1e-5); the trainer's ledger adds that ε to every client's
    record-level ε. The noise comes from the operating system's entropy — never from the
    run's seed, which the server knows — unless ``[method] reproducible_noise = true``.
    Without ``dp`` the scores carry no guarantee.
    """
    from consensus import CertaintyWeighted, QualityVote
    from cotrain.privacy.fedaux import fedaux_weights

    method, spec = inp.method, inp.method.get("certainty")
    scores, eps, delta = None, None, None
    if spec is not None:
        dp = bool(spec.get("dp", False))
        eps, delta = float(spec.get("epsilon", 0.5)), float(spec.get("delta", 1e-5))
        try:
            scores = fedaux_weights(
                inp.X,
                inp.X_public,
                inp.X_public,
                lam=float(spec.get("lam", 0.1)),
                epsilon=eps,
                delta=delta,
                random_state=inp.seed,
                dp=dp,
                reproducible_noise=inp.reproducible_noise,
            )
        except ValueError as err:
            raise ExperimentError(f"method.certainty: {err}") from err
        if not dp:
            eps, delta = None, None
    if name not in QUALITY_CONSENSUS:
        return CertaintyWeighted(scores, scorer_epsilon=eps, scorer_delta=delta)
    top_k = method.get("top_k")
    return QualityVote(
        scores,
        power=float(method.get("power", 16.0)),
        quality_power=float(method.get("quality_power", 1.0)),
        top_k=None if top_k is None else int(top_k),
        scorer_epsilon=eps,
        scorer_delta=delta,
    )


def _dp_fedct(inp: MethodInput) -> Any:
    return _fedct(inp, privacy=_privacy_mechanism(inp.method["privacy"]))


#: ``[method.privacy] mechanism = ...`` -> the class in cotrain.privacy
PRIVACY_MECHANISMS = {
    "randomized_response": "RandomizedResponse",
    "xor": "XORMechanism",
    "subsample_aggregate": "SubsampleAndAggregate",
    "secure_votes": "SecureTeacherVotes",
    "dpsgd": "DPSGD",
}


def _privacy_mechanism(spec: dict[str, Any]) -> Any:
    from cotrain import privacy

    kind = spec.get("mechanism", "randomized_response")
    if kind not in PRIVACY_MECHANISMS:
        raise InvalidValue(
            ("method", "privacy", "mechanism"),
            f"method.privacy.mechanism must be one of {', '.join(PRIVACY_MECHANISMS)}, "
            f"got {kind!r}{did_you_mean(str(kind), PRIVACY_MECHANISMS)}",
        )
    params = {k: v for k, v in spec.items() if k != "mechanism"}
    try:
        return getattr(privacy, PRIVACY_MECHANISMS[kind])(**params).validate()
    except (TypeError, ValueError) as err:
        raise InvalidValue(("method", "privacy"), f"method.privacy ({kind}): {err}") from None


#: ``[method]`` numbers and the smallest value each takes (strict: above it)
_BOUNDS = {
    "local_epochs": (1, False),
    "noise_sigma": (0, False),
    "clip_norm": (0, True),
    "noise_multiplier": (0, False),
}
#: ``[method]`` keys that are the trainer's own parameters (checked by cotrain.params)
_TRAINER_KEYS = ("share", "participation", "early_stopping", "trust", "rounds")


def check_method(method: dict[str, Any], n_clients: int) -> None:
    """Check what the values of a resolved ``[method]`` table mean, before anything runs.

    The consensus name (one of :func:`consensus.available_consensus`) and the parameters
    that go with it, the trainer's parameters (``share``, ``participation``,
    ``early_stopping``, ``trust``, ``rounds``: the library's own checks), the privacy
    mechanism (built and validated), and the baselines' numbers.

    Parameters
    ----------
    method : dict
        The resolved ``[method]`` table (its ``name`` is a key of :data:`METHODS`).
    n_clients : int
        The size of the federation.

    Raises
    ------
    InvalidValue
        With the key path of the value and the reason.

    Examples
    --------
    >>> check_method({"name": "fedct", "consensus": "qualified", "quorum": 0.9}, 5)
    >>> check_method({"name": "fedct", "consensus": "auto", "trust": "auto"}, 5)
    >>> try:
    ...     check_method({"name": "fedct", "consensus": "majorty"}, 5)
    ... except InvalidValue as err:
    ...     print(err.keys, str(err)[:40])
    ('method', 'consensus') unknown consensus 'majorty'; valid names
    >>> try:
    ...     check_method({"name": "fedct", "consensus": "majorty"}, 5)
    ... except InvalidValue as err:
    ...     print(str(err).split("; ")[-1])
    did you mean 'majority'?
    """
    from consensus import available_consensus, get_consensus
    from cotrain.params import check_params

    name = method["name"]
    if name in CONSENSUS_METHODS:
        consensus = method.get("consensus", "majority")
        try:
            if consensus != "auto":  # the trainer's default, resolved when it is built
                get_consensus(consensus)
        except (TypeError, ValueError) as err:
            names = ["auto", *available_consensus()]
            hint = did_you_mean(consensus, names) if "unknown" in str(err) else ""
            raise InvalidValue(("method", "consensus"), f"{err}{hint}") from None
        quorum = method.get("quorum")
        if quorum is not None and consensus.strip().lower() not in QUORUM_CONSENSUS:
            raise InvalidValue(
                ("method", "quorum"),
                f'method.quorum needs consensus = "qualified", got consensus = {consensus!r}',
            )
        if quorum is not None and not 0 < quorum <= 1:
            raise InvalidValue(
                ("method", "quorum"), f"method.quorum must be in (0, 1], got {quorum}"
            )
    for key in _TRAINER_KEYS:
        if key in method:
            value = None if key == "trust" and method[key] == "none" else method[key]
            try:
                check_params({key: value}, n_clients=n_clients)
            except (TypeError, ValueError) as err:
                raise InvalidValue(("method", key), f"method.{err}") from None
    for key, (low, strict) in _BOUNDS.items():
        value = method.get(key)
        if value is not None and (value <= low if strict else value < low):
            sign = ">" if strict else ">="
            raise InvalidValue(("method", key), f"method.{key} must be {sign} {low}, got {value}")
    if name == "dp-fedct":
        mechanism = _privacy_mechanism(method["privacy"])
        try:
            check_params({"privacy": mechanism, "share": method.get("share", "hard")})
        except ValueError as err:
            raise InvalidValue(("method", "privacy"), f"method.privacy: {err}") from None
    spec = method.get("certainty") or {}
    if spec.get("lam", 0.1) <= 0:
        raise InvalidValue(("method", "certainty", "lam"), "method.certainty.lam must be > 0")
    if spec.get("epsilon", 0.5) <= 0:
        raise InvalidValue(
            ("method", "certainty", "epsilon"), "method.certainty.epsilon must be > 0"
        )
    if not 0 < spec.get("delta", 1e-5) < 1:
        raise InvalidValue(
            ("method", "certainty", "delta"), "method.certainty.delta must be in (0, 1)"
        )


def _randomised_labels(model: Any, seed: int) -> dict[str, Any]:
    """What the server sees of a DP-FedCT client, for the audit.

    A label randomiser: the randomised labels of every round (noise calibrated to the run's
    |U|, not to the audit's pool). A DP-trained model: the model itself (its labels are
    post-processing). Teachers' votes: not auditable from the client's own model (which is
    trained on all its data and never released): refused.
    """
    from sklearn.base import clone

    from cotrain.audit import label_privatizer
    from cotrain.privacy import DPSGD, SecureTeacherVotes, SubsampleAndAggregate

    mechanism = model.privacy
    if isinstance(mechanism, DPSGD) or getattr(mechanism, "reports_events", False):
        return {}  # a DP-trained model: its labels are post-processing
    if isinstance(mechanism, (SubsampleAndAggregate, SecureTeacherVotes)):
        kind = (
            "secure_votes" if isinstance(mechanism, SecureTeacherVotes) else "subsample_aggregate"
        )
        raise ExperimentError(
            f"audit = true is not available for {kind}: the released labels come "
            "from teachers, not from the client's model; audit the release with "
            "cotrain.audit.lira_attack (see benchmarks/privacy_audit.py)"
        )
    if getattr(mechanism, "unit", "label") == "record" and mechanism.sensitivity is None:
        # the trivial sensitivity is the run's |U| labels, whatever pool the audit forges
        n_public = len(model.pseudo_label_codes_)
        bits = 2 if type(mechanism).__name__ == "XORMechanism" else 1
        mechanism = clone(mechanism, safe=False).set_params(sensitivity=bits * n_public)
    return {
        "privatize": label_privatizer(mechanism, model.classes_, seed),
        "n_releases": model.n_rounds_,
    }


def _dd(inp: MethodInput) -> Any:
    from cotrain.baselines import DistributedDistillation

    model = DistributedDistillation(inp.learners, **inp.common)
    model.fit(inp.X, inp.y, X_public=inp.X_public, eval_set=inp.eval_set, y_public=inp.y_public)
    return model


def _fedavg(inp: MethodInput) -> Any:
    from cotrain.baselines import FedAvg

    model = FedAvg(inp.learners[0], local_epochs=inp.method.get("local_epochs", 1), **inp.common)
    model.fit(inp.X, inp.y, eval_set=inp.eval_set)
    return model


def _dp_fedavg(inp: MethodInput) -> Any:
    from cotrain.baselines import DPFedAvg

    method = inp.method
    model = DPFedAvg(
        inp.learners[0],
        local_epochs=method.get("local_epochs", 1),
        clip_norm=float(method.get("clip_norm", 1.0)),
        noise_multiplier=float(method.get("noise_multiplier", 1.0)),
        reproducible_noise=inp.reproducible_noise,
        **inp.common,
    )
    model.fit(inp.X, inp.y, eval_set=inp.eval_set)
    return model


def _pate(inp: MethodInput) -> Any:
    from sklearn.base import clone

    from cotrain.baselines import PATE

    model = PATE(
        inp.learners,
        clone(inp.learners[0]),
        noise_sigma=float(inp.method.get("noise_sigma", 1.0)),
        random_state=inp.seed,
        reproducible_noise=inp.reproducible_noise,
    )
    model.fit(inp.X, inp.y, X_public=inp.X_public, eval_set=inp.eval_set)
    return model


def _local(inp: MethodInput) -> Any:
    from cotrain.baselines import LocalOnly

    return LocalOnly(inp.learners, random_state=inp.seed).fit(inp.X, inp.y, eval_set=inp.eval_set)


def _centralized(inp: MethodInput) -> Any:
    from cotrain.baselines import Centralized

    model = Centralized(inp.learners[0], random_state=inp.seed)
    model.fit(inp.X, inp.y, eval_set=inp.eval_set)
    return model


#: ``method.name`` -> :class:`Method`; the order is the order validation lists them in
METHODS: dict[str, Method] = {
    "fedct": Method(_fedct),
    "dp-fedct": Method(_dp_fedct, requires=("privacy",), audit_noise=_randomised_labels),
    "dd": Method(_dd),
    "fedavg": Method(_fedavg),
    "dp-fedavg": Method(_dp_fedavg),
    "pate": Method(_pate, accuracy="consensus_accuracy"),  # PATE delivers its one student
    "local": Method(_local),
    "centralized": Method(_centralized),
}


def noise_replayable(method: dict[str, Any]) -> bool:
    """Whether a run's privacy noise was seeded from the run's seed, so that whoever knows
    the seed (the server, a reader of the experiment file) can replay it and recover the
    clean release: ``[method] reproducible_noise = true`` on a method that adds noise.

    ``cotrain run`` records it as ``noise_replayable`` in ``result.json``; the run's ε does
    not hold against whoever knows the seed when it is True.

    Examples
    --------
    >>> noise_replayable({"name": "pate"}), noise_replayable({"name": "fedct"})
    (False, False)
    >>> noise_replayable({"name": "pate", "reproducible_noise": True})
    True
    >>> noise_replayable({"name": "fedct", "reproducible_noise": True})   # no noise at all
    False
    """
    if not method.get("reproducible_noise", False):
        return False
    certainty = method.get("certainty") or {}
    noisy = {
        "dp-fedct": True,
        "fedct": bool(certainty.get("dp", False)),
        "pate": float(method.get("noise_sigma", 1.0)) > 0,
        "dp-fedavg": float(method.get("noise_multiplier", 1.0)) > 0,
    }
    return noisy.get(method["name"], False)
