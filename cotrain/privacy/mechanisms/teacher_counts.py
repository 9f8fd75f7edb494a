"""The teachers of subsample-and-aggregate: disjoint keyed-hash shards, one vote each.

:func:`teacher_votes` is the clean (not private) statistic that
:class:`~cotrain.privacy.mechanisms.teachers.SubsampleAndAggregate` perturbs at one site and
:class:`~cotrain.privacy.mechanisms.secure_votes.SecureTeacherVotes` sums across sites: the vote
counts ``(n_public, C)`` of ``n_teachers`` fresh clones of a site's learner, each trained on the
records a keyed hash of their content assigns it (plus the pseudo-labelled public rows). One
record changes one teacher, whatever the learner.
"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from sklearn.base import clone

from cotrain.privacy.mechanisms.shards import teacher_shards
from learners import ClassAlignedClassifier
from learners.checks import check_int

__all__ = ["teacher_votes"]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _rows(X: Any) -> int:
    return int(X.shape[0]) if hasattr(X, "shape") else len(X)


def _take(X: Any, idx: NDArray[np.intp]) -> Any:
    if hasattr(X, "iloc"):
        return X.iloc[idx]
    return [X[i] for i in idx] if isinstance(X, list) else X[idx]


def _stack(a: Any, b: Any) -> Any:
    """Rows of ``a`` then rows of ``b`` (numpy arrays, or scipy sparse matrices)."""
    if sparse.issparse(a) or sparse.issparse(b):
        return sparse.vstack([a, b], format="csr")
    return np.concatenate([np.asarray(a), np.asarray(b)])


# --------------------------------------------------------------------------------------------
# teachers
# --------------------------------------------------------------------------------------------


def _quiet_fit_predict(
    estimator: Any, X_fit: Any, y_fit: Any, X_public: Any, caught: Counter
) -> NDArray[Any]:
    """Fit a clone of ``estimator`` and predict ``X_public``; count its warnings instead."""
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        teacher = clone(estimator).fit(X_fit, y_fit)
        pred = np.asarray(teacher.predict(X_public)).ravel()
    caught.update((w.category, str(w.message)) for w in log)
    return pred


def teacher_votes(
    estimator: Any,
    X: Any,
    y: Any,
    X_public: Any,
    classes: Any,
    rng: np.random.Generator,
    *,
    n_teachers: int,
    X_extra: Any = None,
    y_extra: Any = None,
) -> NDArray[np.int64]:
    """The clean vote counts ``(n_public, C)`` of ``n_teachers`` teachers on the public pool.

    The private records are split with :func:`~cotrain.privacy.mechanisms.shards.teacher_shards`,
    keyed by ``rng.bytes(32)`` (drawn here, used once, never returned or sent): a keyed hash of
    each record's content picks its teacher. Teacher ``j`` is a fresh ``sklearn.base.clone``
    of ``estimator`` fitted on shard ``j`` ∪ (``X_extra``, ``y_extra``) and votes for its
    prediction on every public example. A teacher whose shard is empty trains on
    (``X_extra``, ``y_extra``) alone when those are given and non-empty; otherwise it
    **abstains**: it casts no vote, so a row of the result sums to the number of voting
    teachers (at most ``n_teachers``; 0 when every teacher abstains). Teachers never continue
    from a previously fitted model (a clone is unfitted). An estimator that is not a
    :class:`learners.ClassAlignedClassifier` is wrapped in one with ``classes`` (so a shard
    lacking classes, or holding one, still trains). Warnings raised by the teachers are
    collected and re-issued once per distinct message, prefixed by how many teachers raised
    it.

    This is the clean (not private) statistic that :class:`SubsampleAndAggregate` perturbs;
    it is public so that its sensitivity can be checked: with the same key, adding or
    removing one private record changes one teacher's training data (or starts / stops an
    abstaining teacher), hence each row of the result by at most one vote moved, added or
    removed.

    Parameters
    ----------
    estimator : classifier
        Unfitted scikit-learn-style classifier (cloned per teacher, never fitted itself).
    X, y : array-like
        The client's private rows (numeric of any shape, sparse, a data frame or text) and
        labels (values of ``classes``).
    X_public : array-like
        The public pool U.
    classes : array-like
        The global classes, sorted; the columns of the result.
    rng : numpy.random.Generator
        The client's privacy randomness: the shard key is drawn from it.
    n_teachers : int
        Number of teachers (>= 1; may exceed the number of rows: some then abstain or
        train on the pseudo-labelled rows alone).
    X_extra, y_extra : array-like, optional
        Public rows with a pseudo-label (P) and their labels, added to every teacher's shard.

    Returns
    -------
    ndarray of shape (n_public, C), int64
        Votes per public example and class; every row sums to the number of voting teachers.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0], [4.0], [5.0]]); y = np.array([0, 0, 0, 1, 1, 1])
    >>> teacher_votes(DecisionTreeClassifier(random_state=0), X, y, np.array([[-1.0], [9.0]]),
    ...               np.array([0, 1]), np.random.default_rng(1), n_teachers=2,
    ...               X_extra=np.array([[2.5]]), y_extra=np.array([1]))
    array([[2, 0],
           [0, 2]])

    Without pseudo-labelled rows, teachers with an empty shard abstain (here 2 of 8 vote):

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")   # each voting teacher holds a single row
    ...     votes = teacher_votes(DecisionTreeClassifier(random_state=0), X[:2], y[:2],
    ...                           np.array([[0.0]]), np.array([0, 1]),
    ...                           np.random.default_rng(0), n_teachers=8)
    >>> int(votes.sum())
    2
    """
    classes = np.asarray(classes)
    if classes.ndim != 1 or classes.size == 0 or np.any(classes[1:] <= classes[:-1]):
        raise ValueError("classes must be a non-empty 1-D array, sorted and unique")
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != _rows(X):
        raise ValueError("y must be 1-D labels with one per row of X")
    if (X_extra is None) != (y_extra is None):
        raise ValueError("give both X_extra and y_extra (the pseudo-labelled rows) or neither")
    if X_extra is not None:
        y_extra = np.asarray(y_extra)
        if y_extra.shape != (_rows(X_extra),):
            raise ValueError(
                f"y_extra must be 1-D labels with one per row of X_extra ({_rows(X_extra)}), "
                f"got {y_extra.shape} (soft pseudo-labels are not supported)"
            )
        if y_extra.size == 0:
            X_extra = y_extra = None
    k = check_int(n_teachers, "n_teachers", 1)
    shards = teacher_shards(X, y, k, rng.bytes(32))
    if not isinstance(estimator, ClassAlignedClassifier):
        estimator = ClassAlignedClassifier(estimator, classes=classes)

    n_public, n_classes = _rows(X_public), classes.size
    codes = []
    caught: Counter = Counter()
    for j, idx in enumerate(shards):
        if idx.size == 0 and X_extra is None:
            continue  # an empty shard and no pseudo-labelled rows: this teacher abstains
        if idx.size == 0:
            X_fit, y_fit = X_extra, y_extra
        else:
            X_fit, y_fit = _take(X, idx), y[idx]
            if X_extra is not None:
                X_fit, y_fit = _stack(X_fit, X_extra), np.concatenate([y_fit, y_extra])
        try:
            pred = _quiet_fit_predict(estimator, X_fit, y_fit, X_public, caught)
        except ValueError:  # e.g. fewer rows in its shard than the learner needs
            caught[(RuntimeWarning, "a teacher could not be fitted on its shard; it abstains")] += 1
            continue  # one teacher's vote, as any record's effect: within the sensitivity
        pos = np.searchsorted(classes, pred).clip(0, n_classes - 1)
        if pred.shape != (n_public,) or np.any(classes[pos] != pred):
            raise ValueError(
                f"teacher {j} predicted labels outside classes (or not one per public row)"
            )
        codes.append(pos)
    for (category, message), count in caught.items():
        warnings.warn(f"{count} of {len(codes)} teachers: {message}", category, stacklevel=2)
    if not codes:
        return np.zeros((n_public, n_classes), dtype=np.int64)
    # counts[i, c] = number of teachers voting c on example i (one bincount, no loop over i)
    flat = np.stack(codes) + n_classes * np.arange(n_public)[None, :]
    counts = np.bincount(flat.ravel(), minlength=n_public * n_classes)
    return counts.reshape(n_public, n_classes).astype(np.int64)
