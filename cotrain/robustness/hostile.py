"""Hostile and faulty clients for robustness experiments.

A co-training client's upload is its model's labels on the public pool, so a classifier
that *predicts* hostile labels makes a client Byzantine at the message level, whatever the
transport. :class:`HostileClassifier` wraps any classifier that way; :class:`CrashingClassifier`
and :class:`HangingClassifier` make a client fail or stall; :func:`make_hostile` turns a
seeded share of a federation's estimators hostile. (To poison a client's *training data*
instead, see :func:`cotrain.robustness.corruption.make_byzantine`.)

Examples
--------
>>> from sklearn.tree import DecisionTreeClassifier
>>> from cotrain.robustness.hostile import make_hostile
>>> estimators, hostile = make_hostile(
...     [DecisionTreeClassifier()] * 5, fraction=0.4, behavior="random", random_state=0)
>>> hostile.tolist()
[False, False, False, True, True]
"""

from __future__ import annotations

import numbers
import time
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.validation import check_is_fitted

from learners.checks import check_int

__all__ = [
    "BEHAVIORS",
    "CrashingClassifier",
    "FitCounter",
    "HangingClassifier",
    "HostileClassifier",
    "make_hostile",
]

#: The hostile behaviors of :class:`HostileClassifier`.
BEHAVIORS = ("random", "constant", "permuted", "noise")


def _fit_inner(estimator: Any, X: Any, y: Any, sample_weight: Any) -> Any:
    est = clone(estimator)
    if sample_weight is None:
        return est.fit(X, y)
    return est.fit(X, y, sample_weight=sample_weight)


def _data_key(X: Any, y: Any) -> int:
    """A 32-bit fingerprint of a training set's size and labels (seeds the hostile draws)."""
    y = np.asarray(y)
    if y.ndim == 1:
        codes = np.unique(y, return_inverse=True)[1]
    else:  # soft targets
        codes = np.unique(y.reshape(len(y), -1), axis=0, return_inverse=True)[1].reshape(-1)
    return zlib.crc32(codes.astype(np.int64).tobytes(), len(y) & 0xFFFFFFFF)


def _derangement(n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """A uniformly random permutation of ``range(n)`` with no fixed point (``n >= 2``)."""
    while True:  # rejection: succeeds with probability ~ 1/e per draw
        perm = rng.permutation(n)
        if not np.any(perm == np.arange(n)):
            return perm


class HostileClassifier(ClassifierMixin, BaseEstimator):
    """A classifier that trains honestly and answers with hostile labels.

    ``fit`` fits a clone of ``estimator`` as usual; ``predict`` and ``predict_proba`` return
    hostile answers instead of the inner model's. Used as a co-training client, it uploads
    those labels on the public pool: a Byzantine client.

    Parameters
    ----------
    estimator : classifier
        Any scikit-learn-style classifier (cloned, never mutated).
    behavior : {"random", "constant", "permuted", "noise"}, default="random"
        - ``"random"``: each label drawn uniformly from ``classes_``, independently of the
          input;
        - ``"constant"``: always ``constant``, or (if None) one class drawn at fit time;
        - ``"permuted"``: a fixed derangement of ``classes_`` (drawn at fit time) applied to
          the honest prediction: every answer is wrong, consistently — a confident liar;
        - ``"noise"``: each honest prediction replaced, with probability ``rate``, by one of
          the *other* classes drawn uniformly.
    rate : float, default=1.0
        Flip probability of ``"noise"``, in [0, 1]; ignored by the other behaviors.
    constant : label, optional
        The class answered by ``"constant"``; must be one of the training labels.
    random_state : int or None, default=None
        Seed of every hostile draw (see Notes; the trainer gives each client's unset
        ``random_state`` its own seed).

    Attributes
    ----------
    estimator_ : classifier
        The fitted inner (honest) model.
    classes_ : ndarray
        The classes seen in ``fit`` (the hostile labels are drawn from them).
    permutation_ : ndarray of int or None
        ``"permuted"``: the honest class index ``k`` is answered as ``classes_[perm[k]]``.
    constant_ : label or None
        ``"constant"``: the class answered.
    hostile_ : bool
        Always True: marks a hostile client for experiments (see also `make_hostile`).

    Notes
    -----
    Randomness: the fixed choices (the derangement of ``"permuted"``, the class of
    ``"constant"``) are drawn from ``random_state`` alone, so a seeded client keeps them across
    the trainer's per-round refits, and clients given the *same* seed collude (one
    derangement, one class). The labels of ``"random"`` and ``"noise"`` come from a generator
    seeded by ``(random_state, a fingerprint of the training labels, the number of prediction
    calls since fit)``: deterministic given the seed, the training data and the order of
    calls, and a second call on the same input gives *fresh* labels (``predict_proba`` is
    one-hot and makes its own draw, so it need not match an earlier ``predict``). The trainer
    refits a fresh clone each round, so a ``"random"`` client's labels change between rounds
    only when its training set (the pseudo-labels) does. With ``random_state=None`` every
    draw is seeded by the training labels alone.

    ``"permuted"`` needs at least two classes. A client whose training set holds one class is
    fitted with a constant model by :class:`learners.ClassAlignedClassifier` instead, which
    bypasses this wrapper (it then answers honestly).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X = np.arange(6.0).reshape(-1, 1); y = np.array([0, 0, 1, 1, 2, 2])
    >>> liar = HostileClassifier(DecisionTreeClassifier(), behavior="permuted", random_state=0)
    >>> liar = liar.fit(X, y)
    >>> liar.estimator_.predict(X).tolist()
    [0, 0, 1, 1, 2, 2]
    >>> bool(np.all(liar.predict(X) != y))
    True
    >>> spite = HostileClassifier(DecisionTreeClassifier(), behavior="constant", constant=1)
    >>> spite.fit(X, y).predict(X)
    array([1, 1, 1, 1, 1, 1])
    >>> liar.hostile_
    True
    """

    hostile_ = True

    def __init__(
        self,
        estimator: Any,
        *,
        behavior: str = "random",
        rate: float = 1.0,
        constant: Any = None,
        random_state: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.behavior = behavior
        self.rate = rate
        self.constant = constant
        self.random_state = random_state

    def _check_params(self) -> float:
        if self.behavior not in BEHAVIORS:
            raise ValueError(f"behavior must be one of {BEHAVIORS}, got {self.behavior!r}")
        rate = self.rate
        if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0 <= rate <= 1:
            raise ValueError(f"rate must be a probability in [0, 1], got {rate!r}")
        if self.constant is not None and self.behavior != "constant":
            raise ValueError(
                f"constant is only used with behavior='constant', got {self.behavior!r}"
            )
        if self.random_state is not None and (
            isinstance(self.random_state, bool)
            or not isinstance(self.random_state, numbers.Integral)
            or self.random_state < 0
        ):
            raise ValueError(f"random_state must be None or an int >= 0, got {self.random_state!r}")
        return float(rate)

    def _rng(self, stream: int | None) -> np.random.Generator:
        """Stream None: the per-fit choices (seed only, so they stay fixed across refits when
        seeded); stream k: the k-th prediction call since fit (seed and training labels)."""
        entropy = [] if self.random_state is None else [int(self.random_state)]
        if stream is not None or self.random_state is None:
            entropy += [self._fit_key, 0 if stream is None else stream]
        return np.random.default_rng(np.random.SeedSequence(entropy))

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> HostileClassifier:
        """Fit the inner estimator on ``X``, ``y`` and draw the fixed hostile choices.

        Parameters
        ----------
        X : array-like
            Training inputs, passed to the inner estimator as they are.
        y : array-like of shape (n_samples,)
            Labels.
        sample_weight : array-like of shape (n_samples,), optional
            Passed on to the inner estimator when given.

        Returns
        -------
        self
        """
        self._check_params()
        self.estimator_ = _fit_inner(self.estimator, X, y, sample_weight)
        self.classes_ = np.asarray(getattr(self.estimator_, "classes_", np.unique(y)))
        self._fit_key = _data_key(X, y)
        self._calls = 0
        rng = self._rng(None)
        self.permutation_: NDArray[np.int64] | None = None
        self.constant_ = None
        if self.behavior == "permuted":
            if self.classes_.size < 2:
                raise ValueError("behavior='permuted' needs at least two classes")
            self.permutation_ = _derangement(self.classes_.size, rng)
        elif self.behavior == "constant":
            if self.constant is None:
                self.constant_ = self.classes_[rng.integers(self.classes_.size)]
            else:
                matches = np.flatnonzero(self.classes_ == self.constant)
                if matches.size == 0:
                    raise ValueError(
                        f"constant={self.constant!r} is not among the training classes "
                        f"{self.classes_.tolist()}"
                    )
                self.constant_ = self.classes_[matches[0]]
        return self

    def _hostile_codes(self, X: Any) -> NDArray[np.int64]:
        check_is_fitted(self, "estimator_")
        self._calls += 1
        rng = self._rng(self._calls)
        n_classes = self.classes_.size
        if self.behavior == "random":
            n = len(X) if not hasattr(X, "shape") else X.shape[0]
            return rng.integers(0, n_classes, size=n)
        if self.behavior == "constant":
            code = int(np.flatnonzero(self.classes_ == self.constant_)[0])
            n = len(X) if not hasattr(X, "shape") else X.shape[0]
            return np.full(n, code, dtype=np.int64)
        honest = np.searchsorted(self.classes_, np.asarray(self.estimator_.predict(X)))
        if self.behavior == "permuted" and self.permutation_ is not None:
            return self.permutation_[honest]
        if n_classes < 2:
            return honest
        flip = rng.random(honest.size) < self.rate
        shift = rng.integers(1, n_classes, size=honest.size)
        return np.where(flip, (honest + shift) % n_classes, honest)

    def predict(self, X: Any) -> NDArray[Any]:
        """Hostile labels for ``X`` (values from ``classes_``).

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self.classes_[self._hostile_codes(X)]

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """One-hot probabilities of hostile labels (a fresh draw, as `predict`).

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in ``classes_`` order.
        """
        codes = self._hostile_codes(X)
        out = np.zeros((codes.size, self.classes_.size))
        out[np.arange(codes.size), codes] = 1.0
        return out


class FitCounter:
    """A fit counter shared by an estimator and all its clones.

    ``copy.deepcopy`` (which ``sklearn.base.clone`` applies to parameters) returns the same
    object, so the trainer's per-round clones of :class:`CrashingClassifier` and
    :class:`HangingClassifier` all add to one count. The count lives in one process: with a
    process-based runtime (``n_jobs`` > 1, Ray) every worker counts its own fits.

    Examples
    --------
    >>> import copy
    >>> counter = FitCounter()
    >>> copy.deepcopy(counter) is counter
    True
    >>> counter.increment(), counter.increment(), counter.count
    (1, 2, 2)
    >>> counter.reset().count
    0
    """

    def __init__(self) -> None:
        self.count = 0

    def increment(self) -> int:
        """Add one fit and return the new count."""
        self.count += 1
        return self.count

    def reset(self) -> FitCounter:
        """Set the count back to 0 and return ``self``."""
        self.count = 0
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FitCounter:
        return self

    def __copy__(self) -> FitCounter:
        return self

    def __repr__(self) -> str:
        return f"FitCounter(count={self.count})"


class CrashingClassifier(ClassifierMixin, BaseEstimator):
    """A classifier whose ``fit`` raises ``RuntimeError`` once it has been fitted enough.

    The first ``after_fits`` fits (counted over this object and all its clones, through the
    shared ``counter``) train ``estimator`` normally; every later fit raises. In a
    co-training run with every client asked each round, ``after_fits=k`` answers rounds
    1..k and fails from round k + 1 on (``after_fits=0``: never answers). Run the trainer
    with ``on_client_error="skip"`` to let the federation go on without it.

    Parameters
    ----------
    estimator : classifier
        The classifier trained while the client still works.
    after_fits : int, default=0
        Successful fits before the crashes start.
    counter : FitCounter, optional
        The shared fit count; None creates a fresh one (so separately constructed objects
        count separately, and ``clone`` shares it). It keeps counting across ``fit`` calls of
        a trainer: call ``counter.reset()`` before reusing the object in a new run.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.base import clone
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X, y = np.arange(4.0).reshape(-1, 1), [0, 0, 1, 1]
    >>> flaky = CrashingClassifier(DecisionTreeClassifier(), after_fits=1)
    >>> clone(flaky).fit(X, y).predict(X).tolist()
    [0, 0, 1, 1]
    >>> clone(flaky).fit(X, y)
    Traceback (most recent call last):
    ...
    RuntimeError: CrashingClassifier: deliberate crash in fit 2 (after_fits=1)
    """

    def __init__(
        self, estimator: Any, *, after_fits: int = 0, counter: FitCounter | None = None
    ) -> None:
        self.estimator = estimator
        self.after_fits = after_fits
        # a fresh shared counter; clone() passes this object back in, so clones share it
        self.counter = FitCounter() if counter is None else counter

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> CrashingClassifier:
        """Fit ``estimator``, or raise ``RuntimeError`` once ``after_fits`` fits are done.

        Returns
        -------
        self
        """
        after = check_int(self.after_fits, "after_fits", 0)
        n = self.counter.increment()
        if n > after:
            raise RuntimeError(
                f"CrashingClassifier: deliberate crash in fit {n} (after_fits={after})"
            )
        self.estimator_: Any = _fit_inner(self.estimator, X, y, sample_weight)
        self.classes_ = self.estimator_.classes_
        return self

    def predict(self, X: Any) -> NDArray[Any]:
        """The inner model's predictions."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict(X)

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """The inner model's probabilities."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict_proba(X)


class HangingClassifier(ClassifierMixin, BaseEstimator):
    """A classifier whose ``fit`` sleeps ``seconds`` once it has been fitted enough.

    The first ``after_fits`` fits (counted over this object and its clones through the shared
    ``counter``, as in :class:`CrashingClassifier`) are normal; every later fit sleeps
    ``seconds`` and then fits normally. With the trainer's ``round_timeout`` the client turns
    into a straggler from round ``after_fits + 1`` on.

    Parameters
    ----------
    estimator : classifier
        The classifier to train.
    seconds : float
        How long each later fit sleeps (>= 0).
    after_fits : int, default=0
        Fits without the delay.
    counter : FitCounter, optional
        The shared fit count; None creates a fresh one.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X, y = np.arange(4.0).reshape(-1, 1), [0, 0, 1, 1]
    >>> slow = HangingClassifier(DecisionTreeClassifier(), seconds=0.01)
    >>> slow.fit(X, y).predict(X).tolist()
    [0, 0, 1, 1]
    """

    def __init__(
        self,
        estimator: Any,
        *,
        seconds: float,
        after_fits: int = 0,
        counter: FitCounter | None = None,
    ) -> None:
        self.estimator = estimator
        self.seconds = seconds
        self.after_fits = after_fits
        self.counter = FitCounter() if counter is None else counter

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> HangingClassifier:
        """Sleep (once ``after_fits`` fits are done), then fit ``estimator``.

        Returns
        -------
        self
        """
        after = check_int(self.after_fits, "after_fits", 0)
        seconds = self.seconds
        if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or seconds < 0:
            raise ValueError(f"seconds must be a number >= 0, got {seconds!r}")
        if self.counter.increment() > after:
            time.sleep(float(seconds))
        self.estimator_: Any = _fit_inner(self.estimator, X, y, sample_weight)
        self.classes_ = self.estimator_.classes_
        return self

    def predict(self, X: Any) -> NDArray[Any]:
        """The inner model's predictions."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict(X)

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """The inner model's probabilities."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict_proba(X)


def make_hostile(
    estimators: Sequence[Any],
    fraction: float,
    behavior: str = "random",
    random_state: int | np.random.Generator | None = None,
    *,
    collude: bool = False,
    **kwargs: Any,
) -> tuple[list[Any], NDArray[np.bool_]]:
    """Make a seeded share of a federation's estimators hostile.

    Parameters
    ----------
    estimators : sequence of classifiers
        One per client.
    fraction : float
        Share of the clients to make hostile, in [0, 1]; ``round(fraction * m)`` of them
        (Python's rounding: halves to even), chosen at random with ``random_state``.
    behavior : {"random", "constant", "permuted", "noise", "crash", "hang"}, default="random"
        A :class:`HostileClassifier` behavior, or ``"crash"`` (:class:`CrashingClassifier`)
        or ``"hang"`` (:class:`HangingClassifier`, needs ``seconds=``).
    random_state : int, Generator or None
        Chooses the hostile clients. For the :class:`HostileClassifier` behaviors an int
        also seeds each wrapper: ``random_state + client index``, or ``random_state`` for all
        of them with ``collude=True`` (None leaves them unseeded: the trainer then seeds
        each client differently).
    collude : bool, default=False
        Give every hostile wrapper the same seed, so that ``"permuted"`` clients share one
        derangement and ``"constant"`` clients one class: a colluding bloc that votes alike.
    **kwargs
        Passed to the wrapper: ``rate``, ``constant`` (hostile); ``after_fits`` (crash,
        hang); ``seconds`` (hang).

    Returns
    -------
    estimators : list
        The honest estimators unchanged (the same objects) and the hostile ones wrapped.
    hostile : ndarray of bool, shape (m,)
        Which clients are hostile.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> ests, mask = make_hostile([DecisionTreeClassifier()] * 4, 0.5, "noise",
    ...                           random_state=1, rate=0.3)
    >>> mask.tolist()
    [False, True, True, False]
    >>> type(ests[1]).__name__, ests[1].rate, ests[1].random_state
    ('HostileClassifier', 0.3, 2)
    >>> make_hostile(ests, 0.5, "crash", random_state=1)[0][1].after_fits
    0
    """
    estimators = list(estimators)
    m = len(estimators)
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, numbers.Real)
        or not (0 <= fraction <= 1)
    ):
        raise ValueError(f"fraction must be a number in [0, 1], got {fraction!r}")
    kinds = (*BEHAVIORS, "crash", "hang")
    if behavior not in kinds:
        raise ValueError(f"behavior must be one of {kinds}, got {behavior!r}")
    rng = np.random.default_rng(random_state)
    chosen = np.sort(rng.choice(m, size=round(fraction * m), replace=False)) if m else []
    mask = np.zeros(m, dtype=bool)
    mask[chosen] = True
    out = list(estimators)
    for i in np.flatnonzero(mask):
        est = estimators[i]
        if behavior == "crash":
            out[i] = CrashingClassifier(est, **kwargs)
        elif behavior == "hang":
            out[i] = HangingClassifier(est, **kwargs)
        else:
            params = dict(kwargs)
            if isinstance(random_state, numbers.Integral):
                params["random_state"] = int(random_state) + (0 if collude else int(i))
            out[i] = HostileClassifier(est, behavior=behavior, **params)
    return out, mask
