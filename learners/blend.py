"""BlendedClassifier: a site's own model mixed with its co-trained models.

A site that joins a federation keeps two views of the task: its *local* model, fitted on its
own labelled rows alone, and its *co-trained* models, fitted on its rows plus the federation's
pseudo-labelled pool. :class:`BlendedClassifier` predicts with the mixture

``p(x) = alpha · mean_k p_k(x) + (1 - alpha) · p_local(x)``

where ``alpha`` is chosen on the site's own rows (see
:class:`cotrain.federation.cross_fit.CrossFitTrust`):
0 keeps the site's model alone, 1 is plain co-training.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.validation import check_is_fitted

from ._aligned import ClassAlignedClassifier

__all__ = ["BlendedClassifier"]


class BlendedClassifier(ClassifierMixin, BaseEstimator):
    """Mix a local-only model's probabilities with the mean of co-trained models'.

    Parameters
    ----------
    local : ClassAlignedClassifier
        The model fitted on the site's own rows only (fitted, or fitted by :meth:`fit`).
    cotrained : sequence of ClassAlignedClassifier, default=()
        Fitted co-trained models over the same classes (e.g. the cross-fitted models of
        :class:`cotrain.federation.cross_fit.CrossFitTrust`); their probabilities are averaged.
    alpha : float, default=0.0
        Weight in ``[0, 1]`` of the co-trained models (0: the local model alone).

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
    >>> BlendedClassifier(local, [flipped], alpha=0.25).fit_blend().predict_proba([[0.0]])
    array([[0.75, 0.25]])
    >>> BlendedClassifier(local, [flipped], alpha=1.0).fit_blend().predict([[0.0]])
    array([1])
    """

    def __init__(self, local: Any, cotrained: Sequence[Any] = (), alpha: float = 0.0) -> None:
        self.local = local
        self.cotrained = cotrained
        self.alpha = alpha

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

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> BlendedClassifier:
        """Fit a copy of the local model on ``X``, ``y`` and drop the co-trained models
        (the blend is then the local model alone, ``alpha`` unchanged but unused).

        Returns
        -------
        self : BlendedClassifier
        """
        self._check_alpha()
        local = clone(self.local) if isinstance(self.local, ClassAlignedClassifier) else (
            ClassAlignedClassifier(clone(self.local))
        )  # fmt: skip
        local.fit(X, y, sample_weight=sample_weight)
        self.local, self.cotrained = local, ()
        self.fit_blend()
        self.fit_time_ = float(getattr(local, "fit_time_", 0.0))
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """``alpha`` times the mean co-trained probabilities plus ``1 - alpha`` times the
        local model's, one column per class of ``classes_``."""
        check_is_fitted(self, "classes_")
        alpha = self._check_alpha()
        proba = self.local.predict_proba(X)
        if alpha > 0 and len(self.cotrained):
            co = np.mean([m.predict_proba(X) for m in self.cotrained], axis=0)
            proba = alpha * co + (1.0 - alpha) * proba
        return proba

    def predict(self, X: Any) -> NDArray[Any]:
        """The most probable class of each row (ties to the first class)."""
        return self.classes_[self.predict_proba(X).argmax(axis=1)]
