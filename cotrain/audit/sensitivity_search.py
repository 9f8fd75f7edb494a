"""An empirical *lower* bound on a client's sensitivity s*: search for a bad neighbour.

s* is the largest number of released labels (or one-hot bits) that replacing ONE private record
of a client can change, over every pair of neighbouring data sets D, D' and every round. No
search can compute it: a search finds neighbours that change *at least* so many labels, so its
result is a lower bound on s* — it can show that a claimed s* is too small, never that one is
large enough. The only s* valid for every learner is the trivial one: all |U| labels (2|U|
bits). Record-level DP for any learner comes by construction from subsample-and-aggregate
(:class:`cotrain.privacy.mechanisms.teachers.SubsampleAndAggregate`), not from a sensitivity
estimate.

:func:`sensitivity_lower_bound` replaces one record by adversarial neighbours (its label
flipped, the record moved to the extremes of the feature ranges or far outside them, copies of
other records) and refits along the co-training trajectory the client really follows: in round
t the client fits on D ∪ P_t (:func:`cotrain.trust.with_pseudo_labels`), continuing
from its
previous model if its learner warm-starts, so the neighbour's client fits on D' ∪ P_t from its
own previous model, and the labels both give U are compared round by round.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any, Literal

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from numpy.typing import ArrayLike, NDArray
from sklearn.base import clone
from threadpoolctl import threadpool_limits

from cotrain.trust.pool import with_pseudo_labels
from learners import ClassAlignedClassifier
from learners.checks import check_int

__all__ = ["STRATEGIES", "SensitivityLowerBound", "sensitivity_lower_bound"]

#: Neighbour strategies, in the order they are tried (see :func:`sensitivity_lower_bound`).
STRATEGIES = ("label_flip", "feature_extreme", "copy", "random_copy")
SCALE = 10.0  # "scaled": the record pushed this many times further from the data's centre
N_RANDOM_COPIES = 100  # the paper's n = 100 benign neighbours (random_copy, n_records=None)

# a neighbour: (strategy, record r, kind, argument, label code); its row is built when tried
Spec = tuple[str, int, str, int, int]


@dataclass(frozen=True)
class SensitivityLowerBound:
    """What :func:`sensitivity_lower_bound` found: a lower bound on s* and its witness.

    ``int(result)`` is ``value``. ``value`` is NOT a sensitivity to calibrate a mechanism with:
    the true s* is at least ``value`` and may be far larger (up to |U| labels).

    Attributes
    ----------
    value : int
        The largest count found, in ``unit``: changed labels, or 2 × changed labels for bits.
    unit : {"bits", "labels"}
    n_labels : int
        The same count in labels.
    record : int
        Row of the private data whose replacement changed them (-1 if nothing was tried).
    strategy : str
        Strategy of that neighbour (one of :data:`STRATEGIES`).
    detail : str
        The neighbour in words, e.g. ``"feature 3 set to its maximum, label 1"``.
    replacement : tuple of (ndarray, label)
        The replacing record (features, label): D' is D with ``record`` replaced by it.
    round : int
        Round (from 1) in which that neighbour changed the most labels.
    per_round : ndarray of int64, shape (n_rounds,)
        Largest count in labels of each round, over all neighbours.
    per_strategy : dict of str to int
        Largest count in labels of each strategy, over all rounds.
    counts : ndarray of int64, shape (n_neighbours, n_rounds)
        Changed labels of every neighbour tried in every round, in the order tried (strategy
        by strategy as given, record by record); the screen's fits are not included.
    records : ndarray of int64
        The records the strategies other than ``"random_copy"`` replaced.
    """

    value: int
    unit: Literal["bits", "labels"]
    n_labels: int
    record: int
    strategy: str
    detail: str
    replacement: tuple[NDArray[np.float64], Any] = field(repr=False)
    round: int
    per_round: NDArray[np.int64] = field(repr=False)
    per_strategy: dict[str, int] = field(repr=False)
    counts: NDArray[np.int64] = field(repr=False)
    records: NDArray[np.int64] = field(repr=False)

    def __int__(self) -> int:
        return int(self.value)


# --------------------------------------------------------------------------------------------
# input checks (all before any training)
# --------------------------------------------------------------------------------------------


def _matrix(value: Any, name: str) -> NDArray[np.float64]:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a numeric 2-D array, got {type(value).__name__}") from err
    if arr.ndim != 2 or arr.shape[1] == 0 or not np.isfinite(arr).all():
        raise ValueError(f"{name} must be a finite numeric 2-D array, got shape {arr.shape}")
    return arr


def _check_strategies(strategies: Any) -> tuple[str, ...]:
    if isinstance(strategies, str) or not isinstance(strategies, Sequence):
        raise TypeError(f"strategies must be a sequence of names from {STRATEGIES}")
    names = tuple(strategies)
    bad = [s for s in names if s not in STRATEGIES]
    if not names or bad or len(set(names)) != len(names):
        raise ValueError(f"strategies must be distinct names from {STRATEGIES}, got {strategies!r}")
    return names


def _check_pseudo(pseudo_labels: Any, n_public: int, n_classes: int) -> list[Any]:
    if isinstance(pseudo_labels, np.ndarray) or not isinstance(pseudo_labels, Sequence):
        raise TypeError("pseudo_labels must be a sequence with one entry per round (a list)")
    if len(pseudo_labels) == 0:
        raise ValueError("pseudo_labels must hold at least one round")
    out: list[Any] = []
    for t, p in enumerate(pseudo_labels, start=1):
        if p is None:
            out.append(None)
            continue
        arr = np.asarray(p)
        if arr.ndim == 1 and arr.shape[0] == n_public and np.issubdtype(arr.dtype, np.integer):
            if arr.size and (arr.min() < -1 or arr.max() >= n_classes):
                raise ValueError(f"pseudo_labels[{t - 1}] holds codes outside -1..{n_classes - 1}")
            out.append(arr.astype(np.int64))
        elif arr.ndim == 2 and arr.shape == (n_public, n_classes):
            out.append(arr.astype(np.float64))
        else:
            raise ValueError(
                f"pseudo_labels[{t - 1}] must be None, int codes of shape ({n_public},) with -1 "
                f"for abstain, or soft targets of shape ({n_public}, {n_classes}); got "
                f"{arr.dtype} of shape {arr.shape}"
            )
    return out


def _rng(random_state: Any) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or (
        isinstance(random_state, Integral) and not isinstance(random_state, bool)
    ):
        return np.random.default_rng(random_state)
    raise ValueError(
        f"random_state must be an int, a numpy Generator or None, got {random_state!r}"
    )


# --------------------------------------------------------------------------------------------
# neighbours
# --------------------------------------------------------------------------------------------


def _specs(
    strategy: str, records: NDArray[np.int64], y_codes: NDArray[np.int64], n_features: int, k: int
) -> list[Spec]:
    """Every neighbour of ``strategy`` for the chosen records (random_copy is drawn apart)."""
    out: list[Spec] = []
    n = y_codes.size
    for r in map(int, records):
        if strategy == "label_flip":
            out += [(strategy, r, "flip", -1, c) for c in range(k) if c != y_codes[r]]
        elif strategy == "feature_extreme":
            for f in range(n_features):
                out += [(strategy, r, side, f, c) for side in ("min", "max") for c in range(k)]
            for kind in ("all_min", "all_max", "scaled"):
                out += [(strategy, r, kind, -1, c) for c in range(k)]
        elif strategy == "copy":
            out += [(strategy, r, "copy", j, int(y_codes[j])) for j in range(n) if j != r]
    return out


def _row(spec: Spec, X: NDArray[np.float64], box: NDArray[np.float64]) -> NDArray[np.float64]:
    """The replacing record's features; ``box`` rows: minimum, maximum, centre of D ∪ U."""
    _, r, kind, arg, _ = spec
    if kind in ("copy", "random_copy"):
        return X[arg]
    x = X[r].copy()
    if kind in ("min", "max"):
        x[arg] = box[0 if kind == "min" else 1, arg]
    elif kind in ("all_min", "all_max"):
        x = box[0 if kind == "all_min" else 1].copy()
    elif kind == "scaled":
        x = box[2] + SCALE * (x - box[2])
    return x


def _describe(spec: Spec, classes: NDArray[Any]) -> str:
    _, _, kind, arg, c = spec
    label = f"label {np.asarray(classes[c]).item()!r}"
    return {
        "flip": f"label flipped to {np.asarray(classes[c]).item()!r}",
        "min": f"feature {arg} set to its minimum, {label}",
        "max": f"feature {arg} set to its maximum, {label}",
        "all_min": f"every feature at its minimum, {label}",
        "all_max": f"every feature at its maximum, {label}",
        "scaled": f"moved {SCALE:g}x further from the centre, {label}",
        "copy": f"copy of record {arg}",
        "random_copy": f"copy of record {arg} (random pair)",
    }[kind]


def _trajectory(
    estimator: Any,
    X: NDArray[np.float64],
    y: NDArray[Any],
    X_public: NDArray[np.float64],
    pseudo: list[Any],
    classes: NDArray[Any],
) -> NDArray[np.int64]:
    """Codes the client releases on U in each round: fit on D ∪ P_t, continuing its model."""
    model = ClassAlignedClassifier(estimator, classes=classes)
    out = np.empty((len(pseudo), X_public.shape[0]), dtype=np.int64)
    for t, p in enumerate(pseudo):
        model.fit(*with_pseudo_labels(X, y, X_public, p, classes))
        out[t] = np.searchsorted(classes, model.predict(X_public))
    return out


def _count_chunk(
    specs: list[Spec],
    estimator: Any,
    X: NDArray[np.float64],
    y: NDArray[Any],
    X_public: NDArray[np.float64],
    pseudo: list[Any],
    classes: NDArray[Any],
    base: NDArray[np.int64],
    box: NDArray[np.float64],
) -> NDArray[np.int64]:
    counts = np.empty((len(specs), len(pseudo)), dtype=np.int64)
    # thousands of small fits: one BLAS/OpenMP thread each (threads of small fits contend, up to
    # 15x slower), parallelism over neighbours instead; convergence / single-class chatter off
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, spec in enumerate(specs):
            r = spec[1]
            Xn, yn = X.copy(), y.copy()
            Xn[r], yn[r] = _row(spec, X, box), classes[spec[4]]
            labels = _trajectory(estimator, Xn, yn, X_public, pseudo, classes)
            counts[i] = np.count_nonzero(labels != base, axis=1)
    return counts


def _count(specs: list[Spec], task: tuple[Any, ...], n_jobs: int | None) -> NDArray[np.int64]:
    """Changed labels of every neighbour in every round of ``task``'s trajectory (joblib)."""
    workers = effective_n_jobs(n_jobs)  # about 4 chunks per worker; one chunk when serial
    size = max(1, -(-len(specs) // (1 if workers == 1 else 4 * workers)))
    parts = Parallel(n_jobs=n_jobs)(
        delayed(_count_chunk)(specs[i : i + size], *task) for i in range(0, len(specs), size)
    )
    return np.concatenate(parts) if parts else np.zeros((0, len(task[4])), dtype=np.int64)


def _screen(
    wanted: int | None,
    codes: NDArray[np.int64],
    k: int,
    task: tuple[Any, ...],
    n_jobs: int | None,
) -> NDArray[np.int64]:
    """The records to search: all, or the ``wanted`` ones whose cheap neighbours (label flips,
    corners, scaled) change the most labels in the first round (ties: lower index first)."""
    n = codes.size
    if wanted is None or wanted >= n:
        return np.arange(n)
    every = np.arange(n)  # no feature: only the corner and scaled neighbours
    specs = _specs("label_flip", every, codes, 0, k) + _specs("feature_extreme", every, codes, 0, k)
    est, X, y, U, pseudo, cls, base, box = task
    first = _count(specs, (est, X, y, U, pseudo[:1], cls, base[:1], box), n_jobs)[:, 0]
    score = np.zeros(n, dtype=np.int64)
    np.maximum.at(score, np.array([sp[1] for sp in specs]), first)
    return np.sort(np.argsort(-score, kind="stable")[:wanted])


# --------------------------------------------------------------------------------------------
# the search
# --------------------------------------------------------------------------------------------


def sensitivity_lower_bound(
    estimator: Any,
    X: ArrayLike,
    y: ArrayLike,
    X_public: ArrayLike,
    *,
    pseudo_labels: Sequence[Any] | None = None,
    n_rounds: int | None = None,
    classes: ArrayLike | None = None,
    n_records: int | None = None,
    strategies: Sequence[str] = ("label_flip", "feature_extreme", "copy"),
    unit: Literal["bits", "labels"] = "bits",
    random_state: int | np.random.Generator | None = None,
    n_jobs: int | None = None,
) -> SensitivityLowerBound:
    """Empirical lower bound on s*: the most released labels one replaced record changes.

    Replaces one private record at a time by adversarial neighbours, refits the client along
    its co-training trajectory for D and for every neighbour D', and returns the largest number
    of labels on U that differ between the two releases of one round, over all neighbours and
    rounds. It is a **lower bound**: the true s* (a maximum over *all* neighbours) is at least
    this and can be far larger, so this number must not be given to a mechanism as its
    sensitivity. Use it to refute a claimed s* (a claim below it is false). The only s* valid
    for every learner is the trivial one, |U| labels (2|U| bits); record-level DP for any
    learner comes by construction from subsample-and-aggregate
    (:class:`cotrain.privacy.mechanisms.teachers.SubsampleAndAggregate`).

    Neighbours of a record r (with label y_r; C classes; d features; ranges taken over D ∪ U):

    * ``"label_flip"``: (x_r, c) for every class c ≠ y_r (C − 1 neighbours);
    * ``"feature_extreme"``: x_r with one feature set to its minimum or its maximum, every
      feature at its minimum, every feature at its maximum, and x_r moved 10 times further
      from the centre (the mean of D ∪ U), each with every label (2dC + 3C neighbours);
    * ``"copy"``: a copy of every other record (x_j, y_j), j ≠ r (n − 1 neighbours);
    * ``"random_copy"``: the benign neighbours of the paper's estimate (fedct §5): ``n_records``
      random pairs (r, j ≠ r), r replaced by a copy of j (100 pairs when ``n_records`` is
      None). They stay inside the data distribution and find far fewer changes.

    The trajectory: in round t the client fits on D ∪ P_t
    (:func:`cotrain.trust.with_pseudo_labels`; P_t replaces P_{t-1}) through
    :class:`learners.ClassAlignedClassifier` exactly as a :class:`cotrain.Client` does, so a
    learner that warm-starts continues from its own previous model — the neighbour's client
    from the neighbour's model. P_t is the same for both: it is the public consensus of earlier
    rounds, on which each round's privacy loss is conditioned (adaptive composition). Give the
    P_t of a real run in ``pseudo_labels``; without them a lone client is simulated: P_1 =
    none, P_{t+1} = its own labels of round t. Released labels are compared as hard labels
    (``predict``); a soft release (:class:`~cotrain.privacy.GaussianSoftLabels`) changes in
    general on every row, so its s* is all |U| rows.

    Cost: about (C − 1 + 2dC + 3C + n − 1) × ``n_records`` × rounds fits, plus about 4C·n
    first-round fits for the screen when ``n_records`` < n (the screen is a heuristic: the
    search is exhaustive only over the records it keeps). Each fit runs on one BLAS/OpenMP
    thread; ``n_jobs`` parallelises over neighbours. Breast cancer (56 private rows, d = 30,
    |U| = 250, 3 records, 3 rounds: 1,638 fits and a 392-fit screen): about 6 s of CPU for a
    logistic regression, 4 s for a depth-3 tree.

    Parameters
    ----------
    estimator : scikit-learn classifier
        The client's learner, never fitted itself. If it has a ``random_state`` parameter that
        is None, every fit uses one fixed seed (drawn from ``random_state``), so the counts
        reflect the replaced record, not the learner's own randomness.
    X : array-like of shape (n, d)
        The client's private features (numeric, finite; n >= 2).
    y : array-like of shape (n,)
        The client's private labels.
    X_public : array-like of shape (|U|, d)
        The public pool U.
    pseudo_labels : sequence, optional
        P_t of each round, as the client receives them: None (no consensus yet), int codes
        into ``classes`` of shape (|U|,) with -1 for abstain, or soft targets (|U|, C). One
        entry per round. Default: the simulated lone client.
    n_rounds : int, optional
        Rounds to simulate without ``pseudo_labels`` (default 3); with them, None or their
        length.
    classes : array-like, optional
        The global classes, sorted (default: those of ``y``).
    n_records : int, optional
        How many records to replace (default: all n). Fewer are chosen by a cheap screen: the
        ``n_records`` records whose label-flip, corner and scaled neighbours change the most
        labels in the first round (ties: lowest index); then every strategy is tried on them
        over all rounds. For ``"random_copy"`` it is the number of random pairs instead.
    strategies : sequence of str, default=("label_flip", "feature_extreme", "copy")
        Neighbour strategies from :data:`STRATEGIES`, tried in this order.
    unit : {"bits", "labels"}, default="bits"
        ``"bits"``: 2 × changed labels (one-hot bit flips,
        :class:`~cotrain.privacy.XORMechanism`'s unit);
        ``"labels"``: changed labels (:class:`~cotrain.privacy.RandomizedResponse`'s unit).
    random_state : int, Generator or None
        Seeds the ``"random_copy"`` pairs and the learner's seed as above.
    n_jobs : int, optional
        Parallel fits (joblib).

    Returns
    -------
    SensitivityLowerBound
        ``value`` (the bound, in ``unit``; ``int(result)``) and its witness: ``record``,
        ``strategy``, ``detail``, ``replacement``, ``round``, plus ``per_round``,
        ``per_strategy``, every neighbour's ``counts`` (in labels) and the ``records``
        searched.

    Raises
    ------
    ValueError, TypeError
        On bad input, naming the argument, before any fit.

    Examples
    --------
    One record moved far outside the data with the wrong label tilts a logistic regression
    across many public points; the paper's random copies of other records find far fewer:

    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> X = np.arange(8.0)[:, None]; y = (X[:, 0] >= 4).astype(int)
    >>> U = np.linspace(0.0, 7.0, 29)[:, None]
    >>> found = sensitivity_lower_bound(LogisticRegression(), X, y, U, n_rounds=1,
    ...                                 unit="labels", random_state=0)
    >>> found.value, found.record, found.strategy, found.detail
    (15, 0, 'feature_extreme', 'moved 10x further from the centre, label 1')
    >>> found.per_strategy
    {'label_flip': 6, 'feature_extreme': 15, 'copy': 4}
    >>> sensitivity_lower_bound(LogisticRegression(), X, y, U, n_rounds=1, unit="labels",
    ...                         strategies=("random_copy",), random_state=0).value
    4
    """
    names = _check_strategies(strategies)
    if unit not in ("bits", "labels"):
        raise ValueError(f"unit must be 'bits' or 'labels', got {unit!r}")
    factor = 2 if unit == "bits" else 1
    if not (hasattr(estimator, "fit") and hasattr(estimator, "predict")):
        raise TypeError(f"estimator must have fit and predict, got {type(estimator).__name__}")
    X_arr, U = _matrix(X, "X"), _matrix(X_public, "X_public")
    y_arr = np.asarray(y)
    n = X_arr.shape[0]
    if y_arr.shape != (n,):
        raise ValueError(f"y must have shape ({n},) to match X, got {y_arr.shape}")
    if n < 2:
        raise ValueError(f"X, y must hold at least 2 records to form neighbours, got {n}")
    if U.shape[1] != X_arr.shape[1]:
        raise ValueError(f"X_public has {U.shape[1]} features but X has {X_arr.shape[1]}")
    cls = np.unique(y_arr) if classes is None else np.asarray(classes)
    if cls.ndim != 1 or cls.size == 0 or not np.array_equal(cls, np.unique(cls)):
        raise ValueError("classes must be a non-empty 1-D array, sorted and unique")
    codes = np.searchsorted(cls, y_arr).clip(0, cls.size - 1)
    if not np.array_equal(cls[codes], y_arr):
        raise ValueError("y holds labels that are not in classes")
    y_arr = cls[codes]  # in the classes' dtype, so a replaced label always fits
    rounds = None if n_rounds is None else check_int(n_rounds, "n_rounds", 1)
    if pseudo_labels is not None:
        pseudo: list[Any] | None = _check_pseudo(pseudo_labels, U.shape[0], cls.size)
        if rounds is not None and rounds != len(pseudo):
            raise ValueError(f"n_rounds={rounds} but pseudo_labels holds {len(pseudo)} rounds")
    else:
        pseudo, rounds = None, 3 if rounds is None else rounds
    wanted = None if n_records is None else check_int(n_records, "n_records", 1)
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral)):
        raise ValueError(f"n_jobs must be an integer or None, got {n_jobs!r}")
    rng = _rng(random_state)

    est = clone(estimator)
    params = est.get_params() if hasattr(est, "get_params") else {}
    if "random_state" in params and params["random_state"] is None:
        est.set_params(random_state=int(rng.integers(2**31 - 1)))

    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if pseudo is None:  # a lone client: its own labels of round t are P_{t+1}
            pseudo, base = [None], _trajectory(est, X_arr, y_arr, U, [None], cls)
            for _ in range(int(rounds) - 1):
                pseudo.append(base[-1])
                base = _trajectory(est, X_arr, y_arr, U, pseudo, cls)
        else:
            base = _trajectory(est, X_arr, y_arr, U, pseudo, cls)

    both = np.concatenate([X_arr, U])
    box = np.stack([both.min(axis=0), both.max(axis=0), both.mean(axis=0)])
    task = (est, X_arr, y_arr, U, pseudo, cls, base, box)
    specs: list[Spec] = []
    records: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
    for name in names:
        if name == "random_copy":  # drawn exactly as the paper's estimate draws them
            m = N_RANDOM_COPIES if wanted is None else wanted
            replaced = rng.integers(n, size=m)
            donors = (replaced + rng.integers(1, n, size=m)) % n  # uniform j != r
            specs += [
                (name, int(r), name, int(j), int(codes[j]))
                for r, j in zip(replaced, donors, strict=True)
            ]
            continue
        if records.size == 0:
            records = _screen(wanted, codes, cls.size, task, n_jobs)
        specs += _specs(name, records, codes, X_arr.shape[1], cls.size)
    counts = _count(specs, task, n_jobs)

    per_strategy = {s: int(counts[[sp[0] == s for sp in specs]].max(initial=0)) for s in names}
    if counts.size == 0:
        return SensitivityLowerBound(
            0,
            unit,
            0,
            -1,
            "",
            "no neighbour tried",
            (np.empty(0), None),
            0,
            np.zeros(len(pseudo), dtype=np.int64),
            per_strategy,
            counts,
            records,
        )
    i, t = np.unravel_index(int(np.argmax(counts)), counts.shape)
    spec = specs[int(i)]
    best = int(counts[i, t])
    return SensitivityLowerBound(
        value=factor * best,
        unit=unit,
        n_labels=best,
        record=spec[1],
        strategy=spec[0],
        detail=_describe(spec, cls),
        replacement=(_row(spec, X_arr, box), cls[spec[4]]),
        round=int(t) + 1,
        per_round=counts.max(axis=0),
        per_strategy=per_strategy,
        counts=counts,
        records=records,
    )
