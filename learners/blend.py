"""BlendedClassifier: a site's own model mixed with its co-trained models.

A site that joins a federation keeps two views of the task: its *local* model, fitted on its
own labelled rows alone, and its *co-trained* models, fitted on its rows plus the federation's
pseudo-labelled pool. :class:`BlendedClassifier` predicts with the mixture

``p(x) = alpha · mean_k p_k(x) + (1 - alpha) · p_local(x)``

over the classes the site holds rows of (see :func:`blend_proba` for the classes it does
not: those only the co-trained models can predict), where ``alpha`` is chosen on the
site's own rows (see :class:`cotrain.trust.cross_fit.CrossFitTrust`):
0 keeps the site's model alone, 1 is plain co-training.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.validation import check_is_fitted

from ._aligned import ClassAlignedClassifier
from .sklearn_checks import WARM_START_REFIT, expected_failed_checks, input_tags_of

__all__ = ["BlendedClassifier", "blend_proba"]


def blend_proba(
    cotrained: NDArray[np.float64],
    local: NDArray[np.float64],
    alpha: float,
    held: NDArray[np.bool_] | None = None,
) -> NDArray[np.float64]:
    """Mix co-trained and local-only probabilities, the local model only where it can speak.

    A local model trained without any row of a class gives it probability 0, and the
    site's own rows cannot tell whether the federation's view of that class helps (none
    of them is of it). So the co-trained probability of every class the site does not
    hold passes through unchanged, and ``alpha`` mixes only the rest: the co-trained mass
    ``s`` on held classes is shared as ``alpha · co_c + (1 - alpha) · s · local_c``.
    With every class held this is ``alpha · co + (1 - alpha) · local``.

    Parameters
    ----------
    cotrained, local : ndarray of shape (n, C)
        Probabilities (rows summing to one); ``local`` is 0 on classes not held.
    alpha : float
        Weight of the co-trained models on held classes, in ``[0, 1]``.
    held : ndarray of bool, shape (C,), optional
        The classes the site holds rows of (None: all).

    Returns
    -------
    ndarray of shape (n, C)

    Examples
    --------
    >>> import numpy as np
    >>> co, local = np.array([[0.2, 0.3, 0.5]]), np.array([[1.0, 0.0, 0.0]])
    >>> blend_proba(co, local, 0.0, held=np.array([True, True, False])).tolist()
    [[0.5, 0.0, 0.5]]
    >>> blend_proba(co, local, 0.5).tolist()
    [[0.6, 0.15, 0.25]]
    """
    if held is None or held.all():
        return alpha * cotrained + (1.0 - alpha) * local
    out = cotrained.copy()
    mass = cotrained[:, held].sum(axis=1, keepdims=True)
    out[:, held] = alpha * cotrained[:, held] + (1.0 - alpha) * mass * local[:, held]
    return out


class BlendedClassifier(ClassifierMixin, BaseEstimator):
    """Mix a local-only model's probabilities with the mean of co-trained models'.

    Parameters
    ----------
    local : ClassAlignedClassifier
        The model fitted on the site's own rows only (fitted, or fitted by :meth:`fit`).
    cotrained : sequence of ClassAlignedClassifier, default=()
        Fitted co-trained models over the same classes (e.g. the cross-fitted models of
        :class:`cotrain.trust.cross_fit.CrossFitTrust`); their probabilities are averaged.
    alpha : float, default=0.0
        Weight in ``[0, 1]`` of the co-trained models (0: the local model alone, on the
        classes it holds).
    held : array-like of bool, shape (n_classes,), optional
        The classes the site holds rows of; the co-trained models alone predict the others
        (see :func:`blend_proba`). None: every class.

    Attributes
    ----------
    classes_ : ndarray
        The classes (the local model's).
    n_classes_ : int
    fit_time_ : float
        Seconds the last :meth:`fit` spent fitting (0 for a blend built from fitted models).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from learners import ClassAlignedClassifier
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
    >>> local = ClassAlignedClassifier(DecisionTreeClassifier(), classes=[0, 1]).fit(X, y)
    >>> flipped = ClassAlignedClassifier(DecisionTreeClassifier(), classes=[0, 1]).fit(X, 1 - y)
    >>> BlendedClassifier(local, cotrained=[flipped], alpha=0.25).fit_blend().predict_proba([[0.0]])
    array([[0.75, 0.25]])
    >>> BlendedClassifier(local, cotrained=[flipped], alpha=1.0).fit_blend().predict([[0.0]])
    array([1])
    """

    def __init__(
        self,
        local: Any,
        *,
        cotrained: Sequence[Any] = (),
        alpha: float = 0.0,
        held: Any = None,
    ) -> None:
        self.local = local
        self.cotrained = cotrained
        self.alpha = alpha
        self.held = held

    def _check_alpha(self) -> float:
        alpha = self.alpha
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
            raise TypeError(f"alpha must be a number in [0, 1], got {alpha!r}")
        if not 0.0 <= float(alpha) <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
        return float(alpha)

    def fit_blend(self) -> BlendedClassifier:
        """Take the given models as they are (already fitted); returns self."""
        self._check_alpha()
        check_is_fitted(self.local)
        for model in self.cotrained:
            check_is_fitted(model)
            if not np.array_equal(model.classes_, self.local.classes_):
                raise ValueError("every co-trained model must have the local model's classes_")
        self.classes_ = self.local.classes_
        self.n_classes_ = len(self.classes_)
        self.fit_time_ = 0.0
        return self

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> BlendedClassifier:
        """Fit a copy of the local model on ``X``, ``y`` and drop the co-trained models
        (the blend is then the local model alone, ``alpha`` unchanged but unused).

        Returns
        -------
        self : BlendedClassifier
        """
        self._check_alpha()
        local = (
            clone(self.local)
            if isinstance(self.local, ClassAlignedClassifier)
            else (ClassAlignedClassifier(clone(self.local)))
        )
        local.fit(X, y, sample_weight=sample_weight)
        self.local, self.cotrained = local, ()
        self.fit_blend()
        self.fit_time_ = float(getattr(local, "fit_time_", 0.0))
        return self

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """The blend of the mean co-trained probabilities and the local model's
        (:func:`blend_proba`), one column per class of ``classes_``."""
        check_is_fitted(self, "classes_")
        alpha = self._check_alpha()
        if alpha == 1.0 and len(self.cotrained):  # the local model has no say: not run
            return np.mean([m.predict_proba(X) for m in self.cotrained], axis=0)
        proba = self.local.predict_proba(X)
        held = None if self.held is None else np.asarray(self.held, dtype=bool)
        if len(self.cotrained) and (alpha > 0 or (held is not None and not held.all())):
            co = np.mean([m.predict_proba(X) for m in self.cotrained], axis=0)
            proba = blend_proba(co, proba, alpha, held)
        return proba

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """The most probable class of each row (ties to the first class)."""
        proba = self.predict_proba(X)  # first: NotFittedError before classes_ is read
        return self.classes_[proba.argmax(axis=1)]

    @property
    def n_features_in_(self) -> int:
        """Number of features the local model saw in ``fit`` (when it records them)."""
        check_is_fitted(self, "classes_")
        return int(self.local.n_features_in_)

    def __sklearn_tags__(self) -> Any:
        """The local model's input tags (what ``X`` may be: sparse, NaN, text, ...)."""
        return input_tags_of(super().__sklearn_tags__(), self.local)

    def _expected_failed_checks(self) -> dict[str, str]:
        """The scikit-learn checks a blend fails, and why (see
        :func:`learners.sklearn_checks.expected_failed_checks`)."""
        reason = (
            "a blend of fitted models held as parameters (as checkpoints store them): fit "
            "puts the fitted local model in `local` and empties `cotrained`"
        )
        failed = expected_failed_checks(self.local)
        for check in (*WARM_START_REFIT, "check_fit_idempotent"):
            failed.pop(check, None)  # fit starts from a clone of `local`: nothing continues
        failed["check_dont_overwrite_parameters"] = reason
        failed["check_estimators_overwrite_params"] = reason
        return failed
