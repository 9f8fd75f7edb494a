"""A federation member: one estimator and one private dataset.

:class:`Client` is the only place that touches private data. What leaves it each
round is an encoded message of labels on the public pool, never parameters and never
private examples.
"""

from __future__ import annotations

import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cotrain.compact import DeltaHardLabels, QuantizedSoftLabels
from cotrain.messages import HardLabels, SoftLabels, decode
from learners import ClassAlignedClassifier


@dataclass
class StepResult:
    """What one client step returns to the server side of the round."""

    client_id: int
    model: ClassAlignedClassifier | None = None
    message: bytes | None = None
    learner_time_s: float = 0.0
    warnings: Counter = field(default_factory=Counter)
    eval_codes: np.ndarray | None = None
    eval_proba: np.ndarray | None = None
    sent_codes: np.ndarray | None = None
    error: BaseException | None = None


class Client:
    """One client of the federation: its estimator and its private data D_i.

    Each round the client fits its model on D_i ∪ P (its private data plus the public
    examples that carry a pseudo-label; P replaces the previous round's P, it never
    accumulates), then labels the public pool and encodes the labels as a message.

    Parameters
    ----------
    client_id : int
        Position of the client in the federation.
    estimator : classifier
        A scikit-learn-style classifier; it is wrapped (not mutated) in a
        :class:`learners.ClassAlignedClassifier` that speaks the global label space.
    X, y : ndarray
        The client's private training data, labels in the caller's values.
    classes : ndarray
        The global classes, sorted.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array(["a", "a", "b", "b"])
    >>> client = Client(0, DecisionTreeClassifier(random_state=0), X, y, np.array(["a", "b"]))
    >>> result = client.step(X_public=np.array([[0.5], [2.5]]), broadcast=None, share="hard")
    >>> len(result.message)  # 10-byte header + 2 labels packed at 1 bit each
    11
    """

    def __init__(
        self, client_id: int, estimator: Any, X: np.ndarray, y: np.ndarray, classes: np.ndarray
    ) -> None:
        self.client_id = client_id
        self.classes = classes
        self.model = ClassAlignedClassifier(estimator, classes=classes)
        self.fitted = False
        # the latest (hard codes, probabilities) on the evaluation data, for the history
        self.last_eval: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
        # hard codes of the last upload the server received (delta coding's reference)
        self.last_sent: np.ndarray | None = None
        self._X = X
        self._y = y

    @property
    def n_samples(self) -> int:
        """Number of private training examples."""
        return self._X.shape[0]

    def training_set(
        self, X_public: np.ndarray, pseudo: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """D_i ∪ P: private data plus the public rows that carry a pseudo-label."""
        return with_pseudo_labels(self._X, self._y, X_public, pseudo, self.classes)

    def step(
        self,
        X_public: np.ndarray,
        broadcast: bytes | None,
        share: str,
        X_eval: np.ndarray | None = None,
        eval_proba: bool = False,
        soft_dtype: str = "float32",
        privacy: Any = None,
        privacy_seed: int | None = None,
        encoding: str = "packed",
        soft_bits: int | None = None,
    ) -> StepResult:
        """Run one round on this client: decode P, fit on D_i ∪ P, label U, encode.

        With a ``privacy`` mechanism the labels on U are randomised (seeded by
        ``privacy_seed``) before they are encoded, so only noisy labels leave the client.

        Never raises: a failure is returned in ``StepResult.error`` with the previous
        model left in place, so the server decides whether to skip the client.
        """
        result = StepResult(self.client_id)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                pseudo = None if broadcast is None else decode_labels(broadcast)
                X_train, y_train = self.training_set(X_public, pseudo)
                self.model.fit(X_train, y_train)
                start = time.perf_counter()
                on_public = (
                    self.model.predict_proba(X_public)
                    if share == "soft"
                    else self.model.predict(X_public)
                )
                if X_eval is not None:
                    eval_labels = self.model.predict(X_eval)
                    if eval_proba:
                        result.eval_proba = self.model.predict_proba(X_eval)
                result.learner_time_s = self.model.fit_time_ + time.perf_counter() - start
                if X_eval is not None:
                    result.eval_codes = self.codes(eval_labels)
                labels = on_public if share == "soft" else self.codes(on_public)
                if privacy is not None:  # randomised here, before anything leaves the client
                    rng = np.random.default_rng(privacy_seed)
                    labels = privacy.randomize(labels, len(self.classes), rng)
                result.message = self.encode(labels, share, encoding, soft_dtype, soft_bits)
                if share == "hard":
                    result.sent_codes = labels
                result.model = self.model
            except Exception as err:  # reported to the server, which raises or skips
                result.error = err
        result.warnings = Counter((w.category.__name__, str(w.message)) for w in caught)
        return result

    def encode(
        self,
        labels: np.ndarray,
        share: str,
        encoding: str = "packed",
        soft_dtype: str = "float32",
        soft_bits: int | None = None,
    ) -> bytes:
        """The upload: hard codes packed, or delta-coded against :attr:`last_sent`; soft
        labels as floats, or quantised to ``soft_bits`` bits per class."""
        if share == "soft":
            if soft_bits is not None:
                return QuantizedSoftLabels(labels, bits=soft_bits).to_bytes()
            return SoftLabels(labels, dtype=soft_dtype).to_bytes()
        if encoding == "delta":
            return DeltaHardLabels.encode(labels, self.last_sent, len(self.classes))
        return HardLabels(labels, len(self.classes)).to_bytes()

    def codes(self, labels: np.ndarray) -> np.ndarray:
        """Indices of global-class labels in ``classes``."""
        return np.searchsorted(self.classes, labels).astype(np.int64)


def with_pseudo_labels(
    X: np.ndarray,
    y: np.ndarray,
    X_public: np.ndarray,
    pseudo: np.ndarray | None,
    classes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Append the pseudo-labelled public rows P to a labelled set (D ∪ P).

    ``pseudo`` is ``None`` (no consensus yet), hard codes ``(n_public,)`` with ``-1``
    for abstain, or soft targets ``(n_public, C)`` with NaN rows for abstain. Soft
    targets give 2-D training targets, with the labelled rows one-hot.

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.zeros((1, 2)), np.array(["b"])
    >>> U = np.ones((3, 2))
    >>> Xp, yp = with_pseudo_labels(X, y, U, np.array([0, -1, 1]), np.array(["a", "b"]))
    >>> yp.tolist()
    ['b', 'a', 'b']
    """
    if pseudo is None:
        return X, y
    if pseudo.ndim == 1:
        keep = pseudo >= 0
        return np.concatenate([X, X_public[keep]]), np.concatenate([y, classes[pseudo[keep]]])
    keep = ~np.isnan(pseudo).any(axis=1)
    own = (y[:, None] == classes[None, :]).astype(np.float64)
    return (
        np.concatenate([X, X_public[keep]]),
        np.concatenate([own, pseudo[keep].astype(np.float64)]),
    )


def decode_labels(data: bytes) -> np.ndarray:
    """Labels carried by an encoded message: hard codes ``(n,)`` or probabilities ``(n, C)``.

    Examples
    --------
    >>> import numpy as np
    >>> decode_labels(HardLabels(np.array([1, 0, 2]), 3).to_bytes()).tolist()
    [1, 0, 2]
    """
    message = decode(data)
    return message.codes if isinstance(message, HardLabels) else message.probs


def run_client_step(client: Client, step: dict[str, Any], privacy_seed: int | None) -> StepResult:
    """Module-level entry point so runtimes can ship a client step to a worker.

    ``step`` holds the arguments every client of the round receives (see
    :meth:`Client.step`); ``privacy_seed`` is this client's own.
    """
    return client.step(**step, privacy_seed=privacy_seed)
