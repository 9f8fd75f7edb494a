"""PATE with the GNMax aggregator: noisy teacher votes label the public pool for a student."""

from __future__ import annotations

import time
from collections.abc import Sequence
from numbers import Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from consensus import vote_counts
from cotrain._validation import FitData, check_estimators, check_fit_inputs, check_params
from cotrain.baselines._common import (
    accuracy,
    check_predict_inputs,
    fit_local,
    label_bytes,
)
from cotrain.baselines.rounds import run_rounds
from cotrain.federation.seeding import seeded_clone
from cotrain.history import History, RoundRecord
from cotrain.privacy.fedaux.noise import replayable_noise
from cotrain.runtime.runtimes import make_runtime
from learners import ClassAlignedClassifier

__all__ = ["PATE", "gnmax"]


def gnmax(counts: np.ndarray, sigma: float, rng: np.random.Generator | None = None) -> np.ndarray:
    """GNMax aggregation: argmax of the vote counts plus Gaussian noise N(0, sigma²).

    Parameters
    ----------
    counts : ndarray of shape (n, n_classes)
        Teacher votes per class on each example (`consensus.vote_counts`).
    sigma : float
        Standard deviation of the noise added to every count; 0 gives the plain
        majority vote (ties to the smallest class).
    rng : numpy.random.Generator, optional
        Source of the noise (needed when ``sigma > 0``).

    Returns
    -------
    ndarray of int64, shape (n,)
        Pseudo-label codes.

    Examples
    --------
    >>> import numpy as np
    >>> gnmax(np.array([[2.0, 1.0], [1.0, 1.0]]), sigma=0.0)
    array([0, 0])
    """
    counts = np.asarray(counts, dtype=np.float64)
    if sigma > 0:
        if rng is None:
            raise ValueError("gnmax needs an rng when sigma > 0")
        counts = counts + rng.normal(0.0, sigma, size=counts.shape)
    return np.argmax(counts, axis=1).astype(np.int64)


class PATE(ClassifierMixin, BaseEstimator):
    """Private Aggregation of Teacher Ensembles (PATE) with the GNMax aggregator.

    Every client trains one teacher, once, on its private data. Each teacher labels the
    public pool U and uploads the hard labels; the server counts the votes per class,
    adds Gaussian noise N(0, σ²) to every count and takes the argmax (GNMax, Papernot
    et al. 2018). One student is trained on U with these pseudo-labels; it is the
    model PATE outputs (``predict`` uses it).

    Parameters
    ----------
    teachers : list of classifiers
        One scikit-learn-style classifier per client (cloned, never mutated); clients
        may use different learners.
    student : classifier
        Trained on the pseudo-labelled public pool (cloned).
    noise_sigma : float, default=1.0
        Standard deviation σ of the Gaussian noise on every vote count; 0 gives the
        plain majority vote. With few teachers (one per client), any σ that protects
        a single vote flips many labels: PATE is designed for hundreds of teachers.
    classes : array-like, default=None
        The global label space; default: the union of all clients' labels.
    n_jobs : int, default=None
        Joblib workers for the teachers' fits.
    delta : float, default=1e-5
        δ of the reported ε. The ε (``epsilon_`` and the record's ``epsilon``) is the
        data-independent bound of :meth:`consensus.NoisyArgmax.dp_event`: one record can
        change its teacher's votes on all of U, L2 sensitivity sqrt(2·|U|) on the counts.
    random_state : int, default=None
        Seeds the teachers (as :class:`~cotrain.FederatedCoTrainer` seeds its clients)
        and the student; the GNMax noise only with ``reproducible_noise=True``.
    callbacks : list of cotrain.callbacks.Callback, default=None
        Called around PATE's one round, as for :class:`~cotrain.FederatedCoTrainer` (it
        runs on :class:`cotrain.federation.loop.RoundLoop`); e.g.
        :class:`cotrain.tracking.MLflowLogger`.
    verbose : int, default=0
        0: silent; 1: a progress bar; 2: also the round's line.
    reproducible_noise : bool, default=False
        False: the GNMax noise is drawn from the operating system's entropy, so whoever
        knows ``random_state`` cannot replay it and recover the clean vote argmax. True
        (simulations only; warns): seeded from ``random_state``, so a fit repeats exactly.

    Attributes
    ----------
    classes_ : ndarray
        Global classes.
    teachers_ : list of estimators
        The fitted teachers.
    student_ : estimator
        The fitted student.
    votes_ : ndarray of int64, shape (n_teachers, n_public)
        The teachers' label codes on U, as uploaded.
    pseudo_labels_ : ndarray, shape (n_public,)
        GNMax labels of U in the caller's label values.
    history_ : History
        One :class:`~cotrain.RoundRecord`: ``bytes_up`` the teachers' hard-label
        messages, ``bytes_down`` 0 (the student lives on the server), agreement of
        the teachers with the pseudo-labels; with ``eval_set`` the teachers' accuracies
        (``client_accuracy``, mean, std) and the student's as ``consensus_accuracy``.
    n_rounds_ : int
        Rounds run: 1.
    stopped_reason_ : str or None
        A callback's reason for stopping before the round, or None.
    noise_replayable_ : bool
        True when the GNMax noise was seeded from ``random_state``
        (``reproducible_noise=True``): the ε does not hold against whoever knows it.

    Notes
    -----
    The reported ε (``epsilon_``, and ``history_[0].epsilon``) is the data-independent
    bound of :meth:`consensus.NoisyArgmax.dp_event` at ``delta``; PATE's tighter,
    data-dependent GNMax analysis is not done. GNMax protects the aggregate, not each
    teacher's upload: the server sees every teacher's labels in the clear.

    PATE has one round (the teachers are fitted once), so there is nothing to resume and
    it takes no ``checkpoint_dir``; early stopping does not apply either.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain.baselines import PATE
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> pate = PATE([DecisionTreeClassifier()] * 3, DecisionTreeClassifier(),
    ...             noise_sigma=0.5, random_state=0)
    >>> pate = pate.fit([X[:40], X[40:80], X[80:120]], [y[:40], y[40:80], y[80:120]],
    ...                 X_public=X[120:400])
    >>> pate.pseudo_labels_.shape, pate.history_[0].bytes_up
    ((280,), 135)
    """

    def __init__(
        self,
        teachers: list[Any],
        student: Any,
        *,
        noise_sigma: float = 1.0,
        classes: ArrayLike | None = None,
        n_jobs: int | None = None,
        random_state: int | None = None,
        delta: float = 1e-5,
        callbacks: list[Any] | None = None,
        verbose: int = 0,
        reproducible_noise: bool = False,
    ) -> None:
        self.teachers = teachers
        self.student = student
        self.noise_sigma = noise_sigma
        self.classes = classes
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.delta = delta
        self.callbacks = callbacks
        self.verbose = verbose
        self.reproducible_noise = reproducible_noise

    def fit(
        self,
        X: ArrayLike | Sequence[ArrayLike],
        y: ArrayLike | Sequence[ArrayLike] | None = None,
        *,
        X_public: ArrayLike,
        groups: ArrayLike | None = None,
        eval_set: tuple[ArrayLike, ArrayLike] | None = None,
        y_public: ArrayLike | None = None,
    ) -> PATE:
        """Train the teachers, label U with GNMax, train the student.

        Parameters
        ----------
        X, y : list of array-like, or arrays with ``groups``
            The clients' private data, as for :meth:`cotrain.FederatedCoTrainer.fit`.
        X_public : array-like of shape (n_public, n_features)
            The public unlabeled pool U.
        groups : array-like, optional
            Client of each row when X and y are single arrays.
        eval_set : (X_eval, y_eval), optional
            Test data for the history's accuracies.
        y_public : array-like, optional
            Hidden truth of U, to score the pseudo-labels.

        Returns
        -------
        self
        """
        teachers = check_estimators(self.teachers, "hard")
        check_estimators([self.student], "hard")
        data = check_fit_inputs(
            X,
            y,
            X_public,
            groups=groups,
            n_estimators=len(teachers),
            classes=self.classes,
            eval_set=eval_set,
            y_public=y_public,
        )
        check_params(
            {
                "n_jobs": self.n_jobs,
                "random_state": self.random_state,
                "callbacks": self.callbacks,
                "verbose": self.verbose,
            },
            n_clients=len(teachers),
        )
        sigma = self.noise_sigma
        if (
            isinstance(sigma, bool)
            or not isinstance(sigma, Real)
            or not np.isfinite(sigma)
            or (sigma < 0)
        ):
            raise ValueError(f"noise_sigma must be a finite number >= 0, got {sigma!r}")
        # the GNMax noise: OS entropy, unless the warned opt-in seeds it from random_state
        self.noise_replayable_: bool = replayable_noise(
            self.random_state, self.reproducible_noise, "PATE", dp=sigma > 0
        )
        self.classes_: np.ndarray = data.classes
        self._row_shape = data.X_public.shape[1:]
        self.n_features_in_ = data.X_public.shape[1]
        self._fit_data: FitData = data
        self._fit_teachers: list[Any] = teachers
        self.history_ = History()
        try:
            self.stopped_reason_ = run_rounds(
                self,
                self._run_round,
                lambda: np.arange(len(teachers)),
                1,
                self.history_,
            )
        finally:  # the fitted model keeps no private data
            del self._fit_data, self._fit_teachers
        self.n_rounds_ = len(self.history_)
        return self

    def _run_round(self, t: int, sampled: np.ndarray) -> RoundRecord:
        """PATE's one round: fit the teachers, label U with GNMax, fit the student."""
        data, teachers = self._fit_data, [self._fit_teachers[i] for i in sampled]
        classes = data.classes
        n_classes = len(classes)
        noise_seed, *teacher_seeds = np.random.SeedSequence(self.random_state).spawn(
            len(self._fit_teachers) + 2
        )
        student_seed = teacher_seeds.pop()
        start = time.perf_counter()

        tasks = [
            (ClassAlignedClassifier(seeded_clone(est, s), classes=classes), Xi, yi, data.X_eval)
            for est, s, Xi, yi in zip(
                teachers, teacher_seeds, data.X_clients, data.y_clients, strict=True
            )
        ]
        with make_runtime(self.n_jobs) as runtime:
            results = runtime.map(fit_local, tasks)
        self._teachers = [r[0] for r in results]
        learner_time = sum(r[2] for r in results)

        t0 = time.perf_counter()
        votes = np.stack(
            [np.searchsorted(classes, m.predict(data.X_public)) for m in self._teachers]
        )
        learner_time += time.perf_counter() - t0
        bytes_up = sum(label_bytes(v, n_classes) for v in votes)  # what each teacher uploads
        pseudo = gnmax(
            vote_counts(votes, n_classes),
            float(self.noise_sigma),
            np.random.default_rng(noise_seed if self.noise_replayable_ else None),
        )
        self.votes_ = votes
        self.pseudo_label_codes_ = pseudo

        self._student = ClassAlignedClassifier(
            seeded_clone(self.student, student_seed), classes=classes
        )
        self._student.fit(data.pool, classes[pseudo])
        learner_time += self._student.fit_time_

        record: dict[str, Any] = {}
        if data.y_public_codes is not None:
            record["pseudo_label_accuracy"] = accuracy(pseudo, data.y_public_codes)
        if data.X_eval is not None and (y_eval := data.y_eval_codes) is not None:
            codes = np.stack([np.searchsorted(classes, r[1]) for r in results])
            acc = {i: accuracy(row, y_eval) for i, row in enumerate(codes)}
            t0 = time.perf_counter()
            student_pred = np.searchsorted(classes, self._student.predict(data.X_eval))
            learner_time += time.perf_counter() - t0
            record.update(
                client_accuracy=acc,
                mean_accuracy=float(np.mean(list(acc.values()))),
                std_accuracy=float(np.std(list(acc.values()))),
                consensus_accuracy=accuracy(student_pred, y_eval),
            )
        self.epsilon_ = _gnmax_epsilon(
            self.noise_sigma, self.delta, len(data.classes), data.pool.shape[0]
        )
        return RoundRecord(
            round=t,
            clients=tuple(int(i) for i in sampled),
            coverage=1.0,
            agreement=float(np.mean(votes == pseudo)),
            bytes_up=bytes_up,
            bytes_down=0,
            time_s=time.perf_counter() - start,
            learner_time_s=learner_time,
            epsilon=self.epsilon_,
            # GNMax on the server: the server sees every teacher's labels in the clear
            epsilon_unit="record",
            epsilon_adversary="broadcast observers",
            **record,
        )

    @property
    def teachers_(self) -> list[Any]:
        """The fitted teachers, one per client."""
        check_is_fitted(self, "history_")
        return [m.estimator_ for m in self._teachers]

    @property
    def student_(self) -> Any:
        """The fitted student."""
        check_is_fitted(self, "history_")
        return self._student.estimator_

    @property
    def pseudo_labels_(self) -> np.ndarray:
        """GNMax labels of the public pool, in the caller's label values."""
        check_is_fitted(self, "history_")
        return self.classes_[self.pseudo_label_codes_]

    def predict(self, X: ArrayLike) -> np.ndarray:
        """The student's predictions, in the caller's label values."""
        return self._student.predict(check_predict_inputs(self, X, [self._student]))

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """The student's probabilities, columns in ``classes_`` order."""
        return self._student.predict_proba(check_predict_inputs(self, X, [self._student]))


def _gnmax_epsilon(sigma: float, delta: float, n_classes: int, n_public: int) -> float | None:
    """ε of one GNMax release over the public pool (None without noise or dp-accounting)."""
    if not sigma:
        return None
    try:
        import dp_accounting  # noqa: F401
    except ImportError:
        return None
    from consensus import NoisyArgmax
    from cotrain.privacy import epsilon_spent

    event = NoisyArgmax(sigma=sigma, delta=delta).dp_event(n_classes, n_public)
    return float(epsilon_spent([event], delta))
