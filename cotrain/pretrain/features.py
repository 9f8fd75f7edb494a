"""PretrainedFeatures: a pretrained extractor as a scikit-learn transformer (no torch at
import)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from cotrain.pretrain.extractor import PretrainedExtractor

__all__ = ["PretrainedFeatures"]


class PretrainedFeatures(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """The features of a body pretrained on the public pool, as a pipeline step.

    An optional input transform for non-neural learners:
    ``make_pipeline(PretrainedFeatures(ext), LogisticRegression())`` is a client of
    :class:`~cotrain.FederatedCoTrainer` like any other. The extractor was fitted at the
    server on public data only; ``fit`` learns nothing (it checks the input size), so a
    client's private rows never change it.

    Parameters
    ----------
    extractor : PretrainedExtractor
        From :func:`~cotrain.pretrain.pretrain_images` or
        :func:`~cotrain.pretrain.pretrain_tabular`.
    standardize : bool, default=True
        Standardise the features with the public pool's mean and standard deviation
        (recorded at pretraining, see :meth:`PretrainedExtractor.fit_feature_scaling`):
        raw ReLU features are small, and regularised linear learners need them scaled.

    Attributes
    ----------
    n_features_in_ : int
        Columns seen in ``fit`` (``prod`` of an image's shape for flat images).
    n_features_out_ : int
        ``extractor.embedding_dim``.

    Examples
    --------
    >>> import pytest
    >>> _ = pytest.importorskip("torch")
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from cotrain.pretrain import PretrainedFeatures, pretrain_images
    >>> X, y = load_digits(return_X_y=True)
    >>> ext = pretrain_images(X[:300] / 16, epochs=2, width=4, random_state=0)
    >>> clf = make_pipeline(PretrainedFeatures(ext), LogisticRegression(max_iter=500))
    >>> clf.fit(X[300:400] / 16, y[300:400]).predict(X[:2] / 16).shape
    (2,)
    """

    def __init__(self, extractor: PretrainedExtractor, standardize: bool = True) -> None:
        self.extractor = extractor
        self.standardize = standardize

    def fit(self, X: ArrayLike, y: Any = None) -> PretrainedFeatures:
        """Check `X` against the extractor's input size (nothing is learned).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs scaled like the public pool.
        y : ignored

        Returns
        -------
        self : PretrainedFeatures
        """
        if not isinstance(self.extractor, PretrainedExtractor):
            raise TypeError(
                "extractor must be a PretrainedExtractor (from cotrain.pretrain), got "
                f"{type(self.extractor).__name__}"
            )
        if not isinstance(self.standardize, bool | np.bool_):
            raise TypeError(f"standardize must be True or False, got {self.standardize!r}")
        X = validate_data(self, X, reset=True, dtype=np.float32)
        if X.shape[1] != self.extractor.n_features:
            raise ValueError(
                f"X has {X.shape[1]} features, the extractor was pretrained on "
                f"{self.extractor.n_features}"
            )
        self.n_features_out_ = self.extractor.embedding_dim
        return self

    @property
    def _n_features_out(self) -> int:
        return self.n_features_out_

    def transform(self, X: ArrayLike) -> NDArray[np.float32]:
        """The pretrained features of `X`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        ndarray of shape (n_samples, embedding_dim)
            Float32 features.
        """
        check_is_fitted(self, "n_features_out_")
        X = validate_data(self, X, reset=False, dtype=np.float32)
        return self.extractor.transform(X, standardize=bool(self.standardize))
