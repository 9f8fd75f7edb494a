"""Inputs beyond numeric tables: raw text (for text learners) and image tensors."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from cotrain import FederatedCoTrainer

GOOD = ["good", "great", "fine", "lovely", "superb", "excellent"]
BAD = ["bad", "awful", "poor", "terrible", "boring", "dreadful"]


def reviews(n, rng):
    y = rng.integers(0, 2, n)
    words = [rng.choice(GOOD if label else BAD, size=4) for label in y]
    return [" ".join(w) + " film" for w in words], np.where(y == 1, "pos", "neg")


def text_clients():
    rng = np.random.default_rng(0)
    X, y = zip(*(reviews(12, rng) for _ in range(3)), strict=True)
    U, _ = reviews(60, rng)
    X_test, y_test = reviews(40, rng)
    return list(X), list(y), U, X_test, y_test


def tfidf_lr():
    return make_pipeline(TfidfVectorizer(), LogisticRegression())


def test_text_federation_with_tfidf_pipelines():
    X, y, U, X_test, y_test = text_clients()
    trainer = FederatedCoTrainer([tfidf_lr() for _ in range(3)], rounds=2, random_state=0)
    trainer.fit(X, y, X_public=U, eval_set=(X_test, y_test))
    assert trainer.score(X_test, y_test) >= 0.9
    assert set(trainer.pseudo_labels_) <= {"neg", "pos"}
    assert trainer.history_[-1].mean_accuracy >= 0.9
    assert not hasattr(trainer, "n_features_in_")
    student = trainer.distill(tfidf_lr())
    assert student.score(X_test, y_test) >= 0.9


def test_text_pool_with_numeric_client_is_refused():
    X, y, U, _, _ = text_clients()
    X[1] = np.zeros((12, 3))
    with pytest.raises(ValueError, match=r"X\[1\] \(client 1\) must be a 1-D sequence of str"):
        FederatedCoTrainer([tfidf_lr() for _ in range(3)]).fit(X, y, X_public=U)


def test_predict_on_text_needs_text():
    X, y, U, X_test, _ = text_clients()
    trainer = FederatedCoTrainer([tfidf_lr() for _ in range(3)], rounds=1).fit(X, y, X_public=U)
    with pytest.raises(TypeError, match="must be a 1-D sequence of strings"):
        trainer.predict(None)
    with pytest.raises(ValueError, match="must be a 1-D sequence of strings"):
        trainer.predict(np.array([["a", "b"]]))
    assert trainer.predict(X_test[:3]).shape == (3,)


def flatten(X):
    return X.reshape(len(X), -1)


def test_image_tensors_keep_their_shape_and_are_checked():
    digits = load_digits()
    images = (digits.images / 16.0)[:, None]  # (n, 1, 8, 8)
    y = digits.target
    model = make_pipeline(FunctionTransformer(flatten), LogisticRegression(max_iter=300))
    X = [images[i * 60 : (i + 1) * 60] for i in range(3)]
    Y = [y[i * 60 : (i + 1) * 60] for i in range(3)]
    trainer = FederatedCoTrainer([model] * 3, rounds=2, random_state=0).fit(
        X, Y, X_public=images[200:700]
    )
    assert trainer.score(images[1000:], y[1000:]) >= 0.78  # this seeded run scores 0.831
    with pytest.raises(ValueError, match=r"feature shape \(1, 4, 4\).*feature shape \(1, 8, 8\)"):
        FederatedCoTrainer([model] * 3).fit(
            [X[0], X[1], images[:60, :, :4, :4]], Y, X_public=images[200:700]
        )
