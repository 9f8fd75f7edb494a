"""Single-model membership attacks on what a client shares: Yeom, label-noise, confidence.

One observation of the target client, no shadow models (``"reference"``: one model): these
measure *average-case* leakage. Stronger evidence: :func:`cotrain.audit.lira_attack` and
:func:`cotrain.audit.one_run_audit`. Results carry the AUC and TPR at 0.1 % / 1 % FPR.

Threat model
------------
An honest-but-curious server runs the protocol faithfully but tries to learn whether a
given record is in a client's private data. It attacks what each method lets it see:

- **FedCT** (hard labels) and **PATE** (teacher votes): every round the client labels
  the public pool U the server chooses. A curious server can *forge* U: it puts candidate
  records (possible members and non-members) into the pool, and gets back the client's
  hard label on each. The default attack is the **Yeom (gap) attack**, ``attack="yeom"``:
  score ``1[label == true label]`` (Yeom et al. 2018; "gap attack" in Choquette-Choo et al.
  2021). For a binary score the ROC curve has one inner point, FPR = accuracy on
  non-members and TPR = accuracy on members, so its AUC is **exactly**
  ``0.5 + (acc_members − acc_nonmembers) / 2`` — the generalisation gap, nothing more —
  and can **never exceed** ``0.5 + (1 − acc_nonmembers) / 2 = 0.5 + test_error / 2``
  (FedCT's 0.522 on digits is that ceiling). Its TPR at an FPR below the non-members'
  accuracy is 0: it is no worst-case measure. Finer: the label's stability under small
  input noise (the server
  puts noisy copies into the pool as well, ``attack="label-noise"``), or calibration by a
  reference model (``attack="reference"``, below).
- **DD** (soft labels): the same forged pool, but the server gets the client's class
  probabilities: the confidence on the true label (``attack="confidence"``, computed as
  the logit-scaled ``log p_y − log Σ_{k≠y} p_k``, which ranks records as ``p_y`` and the
  loss ``−log p_y`` do — Yeom's loss-threshold attack — but does not saturate when ``p_y``
  rounds to 1), or the reference attack.
- **FedAvg / DP-FedAvg** (parameters): the server receives the client's parameters, so it
  can evaluate the client's model on *any* input, its training records included; the
  attack is the same confidence (loss) threshold attack on the model's outputs. This is a
  black-box attack on a white-box view: attacks that use gradients or activations can
  only be stronger, so the FedAvg VUL measured here is a lower bound.
- **Reference attack** (difficulty calibration, Watson et al. 2022; a one-model
  LiRA-lite, Carlini et al. 2022): the attacker trains its own *reference model* on data
  from the same distribution (e.g. the public pool, labelled by the attacker) and scores
  ``s_target(x) − p_ref,y(x)``: a record that the target gets right although it is hard
  for a model that never saw it is likely a member. It needs a reference model whose
  training data is disjoint from the non-members audited.

The functions here take the observation as a callable ``observe(X)`` that returns what
the server gets back for the forged inputs ``X``: labels (``kind="hard"``) or
probabilities (``kind="soft"``). For a fitted :class:`~cotrain.FederatedCoTrainer`,
:func:`audit_clients` uses ``clients_[i].predict`` / ``predict_proba``: exactly what
client ``i`` would send if the server slipped the candidates into U in one more round
after training (a *simulation* of the forged pool after training: the candidates do not
enter the client's training as pseudo-labelled data). With a label-privacy mechanism
(DP-FedCT) pass ``privatize``, which randomises the labels as the client would before
sending them.

The AUC is reported as it is (not ``max(auc, 1 − auc)``).

Examples
--------
>>> import numpy as np
>>> from sklearn.neighbors import KNeighborsClassifier
>>> from sklearn.datasets import make_classification
>>> X, y = make_classification(600, flip_y=0.3, random_state=0)
>>> model = KNeighborsClassifier(1).fit(X[:300], y[:300])     # memorises its data
>>> result = audit_labels(model.predict, X[:300], y[:300], X[300:], y[300:])
>>> result.attack, result.auc > 0.6
('yeom', True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cotrain.audit.metrics import AuditResult

__all__ = [
    "ATTACKS",
    "ClientsAudit",
    "audit_clients",
    "audit_labels",
    "audit_model",
    "label_privatizer",
    "membership_scores",
]

ATTACKS = ("yeom", "label-noise", "confidence", "reference")
"""Attack names: which apply depends on the observation (hard labels or probabilities)."""


@dataclass(frozen=True)
class ClientsAudit:
    """One attack against every client of a federated run.

    Attributes
    ----------
    results : list of AuditResult
        One per audited client, in client order.
    attack : str
        The attack used.
    mean_auc, max_auc : float
        Mean and maximum AUC over the clients (mean is the VUL reported).
    mean_tpr_at_1pct_fpr, mean_tpr_at_0_1pct_fpr : float
        Mean over the clients of the TPR at 1 % and 0.1 % FPR.

    Examples
    --------
    >>> audit = ClientsAudit([AuditResult(0.6, "yeom", 10, 10), AuditResult(0.7, "yeom", 10, 10)])
    >>> round(audit.mean_auc, 2), audit.max_auc
    (0.65, 0.7)
    """

    results: list[AuditResult] = field(default_factory=list)
    attack: str = ""

    @property
    def aucs(self) -> list[float]:
        """Per-client AUCs."""
        return [r.auc for r in self.results]

    @property
    def mean_auc(self) -> float:
        """Mean AUC over the clients."""
        return float(np.mean(self.aucs))

    @property
    def max_auc(self) -> float:
        """Largest AUC of any client."""
        return float(np.max(self.aucs))

    @property
    def mean_tpr_at_1pct_fpr(self) -> float:
        """Mean over the clients of the TPR at 1 % FPR."""
        return float(np.mean([r.tpr_at_1pct_fpr for r in self.results]))

    @property
    def mean_tpr_at_0_1pct_fpr(self) -> float:
        """Mean over the clients of the TPR at 0.1 % FPR."""
        return float(np.mean([r.tpr_at_0_1pct_fpr for r in self.results]))


def _classes_of(model: Any, classes: Any) -> np.ndarray:
    if classes is not None:
        return np.asarray(classes)
    learned = getattr(model, "classes_", None)
    if learned is None:
        raise ValueError("give classes= (the probability columns' labels)")
    return np.asarray(learned)


def _true_column(proba: np.ndarray, y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """``proba[i, column of y_i]``, 0 where ``y_i`` is not among ``classes``."""
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim != 2 or proba.shape[0] != len(y):
        raise ValueError(
            f"soft observations must have shape (n, n_classes) with n = {len(y)}, got {proba.shape}"
        )
    if proba.shape[1] != len(classes):
        raise ValueError(
            f"observations have {proba.shape[1]} columns but classes has {len(classes)}"
        )
    order = np.argsort(classes)
    pos = np.searchsorted(classes[order], y)
    pos = np.clip(pos, 0, len(classes) - 1)
    found = classes[order][pos] == y
    col = order[pos]
    out = proba[np.arange(len(y)), col]
    return np.where(found, out, 0.0)


def _logit_confidence(proba: Any, y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Logit-scaled confidence ``log p_y − log Σ_{k≠y} p_k`` (Carlini et al. 2022).

    Monotone in ``p_y`` (and in the loss ``−log p_y``), so it ranks records exactly as
    they do, except that it does not saturate: ``p_y`` rounds to 1.0 in floating point for
    confident models, and ties would hide the membership signal from the AUC.
    """
    proba = np.asarray(proba, dtype=np.float64)
    p_y = _true_column(proba, y, classes)
    others = _sum_others(proba, y, classes)  # summed directly: no cancellation near p_y = 1
    tiny = 1e-300
    return np.log(np.maximum(p_y, tiny)) - np.log(np.maximum(others, tiny))


def _sum_others(proba: np.ndarray, y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    mask = np.ones_like(proba, dtype=bool)
    cols = np.searchsorted(np.sort(classes), y).clip(0, len(classes) - 1)
    order = np.argsort(classes)
    found = np.sort(classes)[cols] == y
    rows = np.arange(len(y))[found]
    mask[rows, order[cols[found]]] = False
    return np.where(mask, np.clip(proba, 0.0, None), 0.0).sum(axis=1)


def _reference_score(reference: Any, X: Any, y: np.ndarray, kind: str) -> np.ndarray:
    """The reference model's confidence on the true label: ``p_y`` to calibrate a hard
    (0/1) score, the logit-scaled confidence to calibrate a soft one."""
    proba = reference.predict_proba(X)
    classes = _classes_of(reference, None)
    if kind == "hard":
        return _true_column(proba, y, classes)
    return _logit_confidence(proba, y, classes)


def membership_scores(
    observe: Callable[[Any], Any],
    X: Any,
    y: Any,
    *,
    kind: str = "hard",
    attack: str | None = None,
    classes: Any = None,
    reference: Any = None,
    n_noise: int = 10,
    noise_scale: float = 0.1,
    random_state: int | None = 0,
) -> np.ndarray:
    """Membership scores of candidate records from what the server observes.

    Parameters
    ----------
    observe : callable
        ``observe(X)`` returns what the server gets back for the inputs ``X``: labels
        ``(n,)`` (``kind="hard"``) or probabilities ``(n, n_classes)`` (``"soft"``).
        Hard labels may also come as ``(n_releases, n)``, e.g. the randomised labels of
        the same records released in several rounds under a label-privacy mechanism;
        the label score is then the share of releases equal to ``y``.
    X : array-like of shape (n, ...)
        Candidate records.
    y : array-like of shape (n,)
        Their true labels (the attacker knows the candidate records, labels included).
    kind : {"hard", "soft"}, default="hard"
        What ``observe`` returns.
    attack : str, optional
        ``"yeom"`` (hard: ``1[label == y]``, the Yeom gap attack; AUC = 0.5 + (member
        accuracy − non-member accuracy) / 2 exactly), ``"label-noise"`` (hard: the share of
        ``n_noise`` noisy copies, plus the record itself, labelled ``y``),
        ``"confidence"`` (soft: the logit-scaled confidence ``log p_y − log(1 − p_y)``,
        which ranks as ``p_y`` and the loss do but does not saturate at ``p_y = 1``), or
        ``"reference"`` (the hard score minus the reference model's ``p_y``, or the soft
        score minus the reference model's logit-scaled confidence). Default: ``"reference"`` with a
        reference model, else ``"yeom"`` for hard and ``"confidence"`` for soft.
    classes : array-like, optional
        Labels of the probability columns (soft observations); default ``arange``.
    reference : classifier, optional
        The attacker's fitted reference model (``predict_proba`` and ``classes_``).
    n_noise : int, default=10
        Noisy copies per record for ``"label-noise"``.
    noise_scale : float, default=0.1
        Gaussian noise for ``"label-noise"``, in units of each feature's standard
        deviation over ``X``.
    random_state : int, optional
        Seeds the noise.

    Returns
    -------
    ndarray of float64, shape (n,)
        Higher means more likely a member.

    Examples
    --------
    >>> import numpy as np
    >>> membership_scores(lambda X: np.array([0, 1, 1]), np.zeros((3, 2)), [0, 1, 0])
    array([1., 1., 0.])
    """
    y = np.asarray(y)
    n = len(y)
    if kind not in ("hard", "soft"):
        raise ValueError(f"kind must be 'hard' or 'soft', got {kind!r}")
    if attack is None:
        attack = (
            "reference" if reference is not None else ("yeom" if kind == "hard" else "confidence")
        )
    if attack not in ATTACKS:
        raise ValueError(f"attack must be one of {ATTACKS}, got {attack!r}")
    if attack == "reference" and reference is None:
        raise ValueError("attack='reference' needs a reference model")
    if attack in ("yeom", "label-noise") and kind != "hard":
        raise ValueError(f"attack={attack!r} needs hard labels (kind='hard')")
    if attack == "confidence" and kind != "soft":
        raise ValueError("attack='confidence' needs probabilities (kind='soft')")

    def target_score(X_query: Any) -> np.ndarray:
        out = observe(X_query)
        if kind == "hard":
            labels = np.asarray(out)
            if labels.shape == (n,):
                return (labels == y).astype(np.float64)
            if labels.ndim == 2 and labels.shape[1] == n:  # several releases of each label
                return (labels == y).mean(axis=0)
            raise ValueError(
                f"hard observations must have shape ({n},) or (n_releases, {n}), got {labels.shape}"
            )
        cls = np.arange(np.shape(out)[1]) if classes is None else np.asarray(classes)
        return _logit_confidence(out, y, cls)

    if attack == "label-noise":
        X_arr = np.asarray(X, dtype=np.float64)
        rng = np.random.default_rng(random_state)
        std = X_arr.std(axis=0, keepdims=True)
        total = target_score(X)
        for _ in range(n_noise):
            noisy = X_arr + rng.normal(size=X_arr.shape) * noise_scale * std
            total = total + target_score(noisy.astype(np.asarray(X).dtype, copy=False))
        return total / (n_noise + 1)
    score = target_score(X)
    if attack == "reference":
        score = score - _reference_score(reference, X, y, kind)
    return score


def audit_labels(
    observe: Callable[[Any], Any],
    members_X: Any,
    members_y: Any,
    nonmembers_X: Any,
    nonmembers_y: Any,
    *,
    kind: str = "hard",
    attack: str | None = None,
    reference: Any = None,
    classes: Any = None,
    **attack_params: Any,
) -> AuditResult:
    """Membership attack on labels a client shares on a (forged) public pool.

    The server puts the candidates (members and non-members of the client's private
    data) into the pool; ``observe`` returns the client's answers on them.

    Parameters
    ----------
    observe : callable
        ``observe(X)`` -> labels ``(n,)`` or probabilities ``(n, n_classes)``.
    members_X, members_y : array-like
        Records of the client's private training data, with their labels.
    nonmembers_X, nonmembers_y : array-like
        Records from the same distribution the client never trained on.
    kind : {"hard", "soft"}, default="hard"
        What ``observe`` returns (FedCT and PATE: hard; DD: soft).
    attack : str, optional
        See :func:`membership_scores`.
    reference : classifier, optional
        The attacker's reference model (its training data must not hold the
        non-members).
    classes : array-like, optional
        Labels of the probability columns for soft observations.
    **attack_params
        ``n_noise``, ``noise_scale``, ``random_state`` (see :func:`membership_scores`).

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> import numpy as np
    >>> X = np.arange(8.0).reshape(-1, 1)
    >>> truth = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    >>> answers = dict(zip(X.ravel(), [0, 1, 0, 1, 1, 1, 0, 0]))  # right on the members
    >>> observe = lambda Z: np.array([answers[v] for v in Z.ravel()])
    >>> audit_labels(observe, X[:4], truth[:4], X[4:], truth[4:]).auc
    0.75
    """
    mX, my = members_X, np.asarray(members_y)
    nX, ny = nonmembers_X, np.asarray(nonmembers_y)
    if len(my) == 0 or len(ny) == 0:
        raise ValueError("need at least one member and one non-member")
    if attack is None:
        attack = (
            "reference" if reference is not None else ("yeom" if kind == "hard" else "confidence")
        )
    common = {"kind": kind, "attack": attack, "classes": classes, "reference": reference}
    m_scores = membership_scores(observe, mX, my, **common, **attack_params)
    n_scores = membership_scores(observe, nX, ny, **common, **attack_params)
    return AuditResult.from_scores(m_scores, n_scores, attack=attack)


def audit_model(
    model: Any,
    members_X: Any,
    members_y: Any,
    nonmembers_X: Any,
    nonmembers_y: Any,
    *,
    attack: str | None = None,
    reference: Any = None,
    classes: Any = None,
    **attack_params: Any,
) -> AuditResult:
    """Membership attack on a model whose parameters the server holds (FedAvg).

    With the parameters the server can query the model on any input: the loss /
    confidence threshold attack (``attack="confidence"``, default without a
    reference), the reference attack, or the label-only attacks.

    Parameters
    ----------
    model : classifier
        A fitted model with ``predict_proba`` (columns in ``classes`` or
        ``model.classes_`` order) and ``predict``.
    members_X, members_y, nonmembers_X, nonmembers_y : array-like
        As for :func:`audit_labels`.
    attack : str, optional
        ``"confidence"`` (default), ``"reference"`` (default with ``reference``),
        ``"yeom"`` or ``"label-noise"``.
    reference : classifier, optional
        The attacker's reference model.
    classes : array-like, optional
        Labels of ``predict_proba``'s columns; default ``model.classes_``.
    **attack_params
        As for :func:`audit_labels`.

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X, y = make_classification(600, flip_y=0.2, random_state=0)
    >>> rf = RandomForestClassifier(50, random_state=0).fit(X[:300], y[:300])
    >>> audit_model(rf, X[:300], y[:300], X[300:], y[300:]).auc > 0.7
    True
    """
    if attack is None:
        attack = "reference" if reference is not None else "confidence"
    if attack in ("yeom", "label-noise"):
        return audit_labels(
            model.predict,
            members_X,
            members_y,
            nonmembers_X,
            nonmembers_y,
            kind="hard",
            attack=attack,
            reference=reference,
            **attack_params,
        )
    return audit_labels(
        model.predict_proba,
        members_X,
        members_y,
        nonmembers_X,
        nonmembers_y,
        kind="soft",
        attack=attack,
        reference=reference,
        classes=_classes_of(model, classes),
        **attack_params,
    )


def _aligned_observer(model: Any, kind: str, classes: np.ndarray) -> Callable[[Any], Any]:
    if kind == "hard":
        return model.predict

    def proba(X: Any) -> np.ndarray:
        p = np.asarray(model.predict_proba(X), dtype=np.float64)
        own = np.asarray(getattr(model, "classes_", classes))
        if len(own) == len(classes) and np.array_equal(own, classes):
            return p
        out = np.zeros((p.shape[0], len(classes)))
        out[:, np.searchsorted(classes, own)] = p
        return out

    return proba


def label_privatizer(
    mechanism: Any, classes: Any, seed: int | None = None
) -> Callable[[np.ndarray, int], np.ndarray]:
    """``privatize(labels, client)`` for :func:`audit_clients`: a client-side mechanism
    (e.g. :class:`cotrain.privacy.RandomizedResponse`) applied to label values, so a DP run
    is audited on the randomised labels the server receives.

    Examples
    --------
    >>> from cotrain.privacy import RandomizedResponse
    >>> privatize = label_privatizer(RandomizedResponse(epsilon=50.0), ["a", "b"], seed=0)
    >>> privatize(np.array(["a", "b", "b"]), 0).tolist()
    ['a', 'b', 'b']
    """
    classes = np.asarray(classes)
    rng = np.random.default_rng(seed)

    def privatize(labels: np.ndarray, client: int) -> np.ndarray:
        codes = np.searchsorted(classes, labels)
        return classes[np.asarray(mechanism.randomize(codes, len(classes), rng))]

    return privatize


def _client_models(fitted: Any) -> list[Any]:
    for name in ("clients_", "teachers_"):
        models = getattr(fitted, name, None)
        if models is not None:
            return list(models)
    raise TypeError(f"{type(fitted).__name__} has no clients_ or teachers_: pass a list of models")


def audit_clients(
    fitted: Any,
    members: Sequence[tuple[Any, Any]],
    nonmembers: tuple[Any, Any],
    *,
    kind: str | None = None,
    attack: str | None = None,
    reference: Any = None,
    classes: Any = None,
    privatize: Callable[[np.ndarray, int], np.ndarray] | None = None,
    n_releases: int = 1,
    **attack_params: Any,
) -> ClientsAudit:
    """Audit every client of a fitted federated run; VUL = mean AUC over clients.

    What the server observes of client ``i`` (:mod:`cotrain.audit` threat model):

    - :class:`~cotrain.FederatedCoTrainer` (FedCT, DD): ``clients_[i]``'s hard labels
      (``share="hard"``) or probabilities (``share="soft"``) on the candidates, as the
      client would send them if the server put them into U in a round after training;
    - :class:`~cotrain.baselines.PATE`: ``teachers_[i]``'s votes (hard);
    - :class:`~cotrain.baselines.FedAvg` / ``DPFedAvg``: ``clients_[i]``, the client's
      model after its last local training, whose parameters it uploaded: probabilities
      on any input (soft; the parameters allow any query).

    Parameters
    ----------
    fitted : fitted trainer or baseline, or list of fitted models
        The run to audit.
    members : sequence of (X_i, y_i)
        Client ``i``'s private training data (one pair per client).
    nonmembers : (X, y)
        Records no client trained on (e.g. held-out test data).
    kind : {"hard", "soft"}, optional
        Override what the server observes (default from the run, see above; a list of
        models defaults to "soft").
    attack, reference
        As for :func:`audit_labels`.
    classes : array-like, optional
        The global classes (default ``fitted.classes_``).
    privatize : callable, optional
        ``privatize(labels, client) -> labels``: a label-privacy mechanism applied to
        the client's hard labels before the server sees them (DP-FedCT).
    n_releases : int, default=1
        With ``privatize``: how many independently randomised releases of the
        candidates' labels the server collects (e.g. the number of rounds the forged
        candidates stay in U, matching the rounds the accounted ε composes over); the
        label score is the share of releases equal to the true label.
    **attack_params
        As for :func:`audit_labels`.

    Returns
    -------
    ClientsAudit

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain import FederatedCoTrainer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> parts = [slice(0, 60), slice(60, 120)]
    >>> fedct = FederatedCoTrainer([DecisionTreeClassifier()] * 2, rounds=2, random_state=0)
    >>> fedct = fedct.fit([X[p] for p in parts], [y[p] for p in parts], X_public=X[120:400])
    >>> audit = audit_clients(fedct, [(X[p], y[p]) for p in parts], (X[400:], y[400:]))
    >>> len(audit.aucs), audit.attack
    (2, 'yeom')
    """
    if isinstance(fitted, list | tuple):
        models, default_kind = list(fitted), "soft"
    else:
        models = _client_models(fitted)
        share = getattr(fitted, "share", None)
        if hasattr(fitted, "teachers_") or share == "hard":
            default_kind = "hard"
        else:
            default_kind = "soft"
        if classes is None:
            classes = getattr(fitted, "classes_", None)
    kind = default_kind if kind is None else kind
    if len(members) != len(models):
        raise ValueError(f"members has {len(members)} clients, the run has {len(models)}")
    nX, ny = nonmembers
    if classes is None:
        classes = np.unique(np.concatenate([np.asarray(m[1]) for m in members] + [ny]))
    classes = np.asarray(classes)
    results = []
    chosen = attack
    for i, (model, (mX, my)) in enumerate(zip(models, members, strict=True)):
        if model is None:
            continue
        observe = _aligned_observer(model, kind, classes)
        if privatize is not None:
            if kind != "hard":
                raise ValueError("privatize applies to hard labels only")
            observe = _privatized(observe, privatize, i, n_releases)
        res = audit_labels(
            observe,
            mX,
            my,
            nX,
            ny,
            kind=kind,
            attack=attack,
            reference=reference,
            classes=classes,
            **attack_params,
        )
        chosen = res.attack
        results.append(res)
    return ClientsAudit(results, chosen or "")


def _privatized(
    observe: Callable[[Any], Any],
    privatize: Callable[[np.ndarray, int], np.ndarray],
    client: int,
    n_releases: int,
) -> Callable[[Any], Any]:
    if n_releases < 1:
        raise ValueError(f"n_releases must be >= 1, got {n_releases!r}")

    def wrapped(X: Any) -> np.ndarray:
        labels = np.asarray(observe(X))
        if n_releases == 1:
            return np.asarray(privatize(labels, client))
        return np.stack([np.asarray(privatize(labels, client)) for _ in range(n_releases)])

    return wrapped
