"""A federation member: one estimator and one private dataset.

:class:`Client` is the only place that touches private data. What leaves it each
round is an encoded message of labels on the public pool, never parameters and never
private examples. A client is set up once with what stays fixed over a run (its data,
the public pool, the wire format, its privacy mechanism, evaluation data) and then
needs only the round's broadcast, so a runtime can keep it resident in a worker
process (or at a Flower site) and send it nothing else.
"""

from __future__ import annotations

import secrets
import time
import warnings
from collections import Counter
from typing import Any

import numpy as np

from cotrain.federation.site import RoundRequest, Site, StepResult
from cotrain.privacy.ledgers.site_ledger import SiteLedger
from cotrain.privacy.mechanisms.base import ClientRound, as_mechanism
from cotrain.trust import (
    FixedTrust,
    PseudoLabelTrust,
    Trust,
    pseudo_labeled_rows,
    weighted_training_set,
    with_pseudo_labels,
)
from cotrain.wire.broadcast import BroadcastDecoder, Downlink, MissingReference
from cotrain.wire.compact import QuantizedSoftLabels
from cotrain.wire.endpoints import UploadSender
from cotrain.wire.format import WireFormat
from cotrain.wire.messages import HardLabels, SoftLabels, decode
from learners import ClassAlignedClassifier

__all__ = [
    "Client",
    "StepResult",
    "decode_labels",
]

#: why a client without a public pool (and its wire format) cannot run a round
NOT_SET_UP = "run_round needs a client set up with X_public (and a wire)"


class Client:
    """One client of the federation: its estimator and its private data D_i.

    Each round the client fits its model on D_i ∪ P (its private data plus the public
    examples that carry a pseudo-label; P replaces the previous round's P, it never
    accumulates), then labels the public pool, randomises the labels with its privacy
    mechanism if it has one, and encodes them as a message.

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
    X_public : ndarray, optional
        The public pool U (needed by :meth:`run_round`).
    wire : cotrain.wire.WireFormat, optional
        How labels travel; default: packed hard labels on ``X_public``.
    privacy : cotrain.privacy mechanism, optional
        The client calls its hooks (:mod:`cotrain.privacy.mechanisms.base`): ``prepare`` once on
        the estimator, ``before_fit`` each round, then ``release_round`` on the fitted
        model's labels before anything leaves the client (randomised labels, teachers'
        votes, or a DP-trained model's labels with the round's privacy event for the
        ledger). Its noise comes from the operating system's entropy unless
        :meth:`run_round` is given a ``privacy_seed``. A private client
        keeps its own ledger (:attr:`site_ledger`, a
        :class:`~cotrain.privacy.ledgers.site_ledger.SiteLedger`): a round it answered already is
        answered with the same bytes, and past its mechanism's ``budget`` it refuses
        (:class:`~cotrain.privacy.ledgers.site_ledger.PrivacyBudgetSpent` in the step's ``error``).
    own_ledger : bool, default=True
        Whether a private client keeps that ledger itself (in memory, in its
        ``state_dict``); False where its caller keeps one (a Flower site, on its disk,
        keyed by run and round: :func:`cotrain.flower.client_app.site_train`).
    X_eval : ndarray, optional
        Evaluation data predicted every round (for the history; never trained on).
    eval_proba : bool, default=False
        Also return probabilities on ``X_eval`` (for a soft consensus's accuracy).
    trust : cotrain.trust.PseudoLabelTrust, FixedTrust or Trust, optional
        How much weight the pseudo-labelled pool gets in each fit (default: full weight,
        the paper's FedCT). A :class:`~cotrain.trust.PseudoLabelTrust` chooses it every
        round by cross-validation on the private rows; its out-of-fold accuracy is sent
        as the upload's ``quality`` (not by a private client: see :meth:`StepResult.upload`).
        A model trust (:class:`~cotrain.trust.Trust`) fits the client's models, labels the
        pool and builds its predictor itself.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array(["a", "a", "b", "b"])
    >>> client = Client(0, DecisionTreeClassifier(random_state=0), X, y, np.array(["a", "b"]),
    ...                 X_public=np.array([[0.5], [2.5]]))
    >>> result = client.run_round(1)  # round 1: no consensus yet
    >>> len(result.message)  # 10-byte header + 2 labels packed at 1 bit each
    11
    """

    def __init__(
        self,
        client_id: int,
        estimator: Any,
        X: np.ndarray,
        y: np.ndarray,
        classes: np.ndarray,
        *,
        X_public: np.ndarray | None = None,
        wire: WireFormat | None = None,
        privacy: Any = None,
        own_ledger: bool = True,
        X_eval: np.ndarray | None = None,
        eval_proba: bool = False,
        trust: FixedTrust | PseudoLabelTrust | Trust | None = None,
    ) -> None:
        self.client_id = client_id
        self.classes = classes
        privacy = as_mechanism(privacy)
        if privacy is not None:  # e.g. DP-SGD trains a private version of the estimator
            estimator = privacy.prepare(estimator)
        #: the learner as given (after the privacy mechanism's ``prepare``): unfitted
        self.estimator = estimator
        self.model = ClassAlignedClassifier(estimator, classes=classes)
        self.fitted = False
        self.X_public = X_public
        if wire is None and X_public is not None:
            wire = WireFormat(n_classes=len(classes), n_public=len(X_public))
        self.wire = wire
        self.sender = None if wire is None else wire.sender()
        #: the consensus versions this client decoded (delta-coded broadcasts)
        self.broadcasts = None if wire is None else BroadcastDecoder(wire)
        self.privacy = privacy
        #: a private client's own record of every release it sent (None: not private)
        self.site_ledger = (
            None
            if privacy is None or X_public is None or not own_ledger
            else SiteLedger(privacy, len(classes), len(X_public))
        )
        self.X_eval = X_eval
        self.eval_proba = eval_proba
        self.trust = FixedTrust(1.0) if trust is None else trust
        #: what the trust keeps between rounds (out-of-fold accuracy of private-only fits)
        self.trust_cache: dict[str, Any] = {}
        self._X = X
        self._y = y

    # what a client that runs rounds has (:meth:`run_round` checks it before anything else)
    @property
    def _pool(self) -> np.ndarray:
        if self.X_public is None:
            raise ValueError(NOT_SET_UP)
        return self.X_public

    @property
    def _wire(self) -> WireFormat:
        if self.wire is None:
            raise ValueError(NOT_SET_UP)
        return self.wire

    @property
    def _sender(self) -> UploadSender:
        if self.sender is None:
            raise ValueError(NOT_SET_UP)
        return self.sender

    @property
    def _decoder(self) -> BroadcastDecoder:
        if self.broadcasts is None:
            raise ValueError(NOT_SET_UP)
        return self.broadcasts

    @property
    def n_samples(self) -> int:
        """Number of private training examples."""
        return self._X.shape[0]

    @property
    def last_sent(self) -> np.ndarray | None:
        """Hard codes of this client's last upload (delta coding's reference)."""
        return None if self.sender is None else self.sender.state_dict()["codes"]

    def training_set(
        self, X_public: np.ndarray, pseudo: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """D_i ∪ P: private data plus the public rows that carry a pseudo-label."""
        return with_pseudo_labels(self._X, self._y, X_public, pseudo, self.classes)

    def run_round(
        self,
        t: int,
        downlink: Downlink | bytes | None = None,
        privacy_seed: int | None = None,
    ) -> StepResult:
        """Run round ``t`` on this client: decode P, fit on D_i ∪ P, label U, encode.

        Parameters
        ----------
        t : int
            The round (from 1).
        downlink : Downlink, bytes or None, default=None
            What the server sent this client for the round
            (:meth:`cotrain.federation.server.CoTrainingServer.configure_round`): the
            consensus of the previous round, delta-coded against a consensus version the
            client acknowledged or in full (see :mod:`cotrain.wire.broadcast`), and
            ``ref_round``, the round of this client's last upload the server decoded (the
            reference of a delta-coded upload). Bytes: a full broadcast, with no upload
            reference; None: no consensus yet (round 1). A client that no longer holds
            the version a delta refers to trains on its own data alone this round, with
            a warning, and reports that it holds none.
        privacy_seed : int, optional
            Seeds this round's privacy noise — only for simulations with
            ``reproducible_noise``; None (the default): the noise is drawn from the operating
            system's entropy, so nobody who knows the run's ``random_state`` can replay it.

        Returns
        -------
        StepResult
            Never raises: a failure is returned in ``error`` with the previous model left
            in place, so the server decides whether to skip the client. A private client
            asked again for a round it answered returns the same message (no refit, no
            fresh noise); one whose next release would exceed its budget returns a
            :class:`~cotrain.privacy.ledgers.site_ledger.PrivacyBudgetSpent` error; a failed
            round releases nothing and is not counted.
        """
        if self.wire is None or self.X_public is None:
            raise ValueError(NOT_SET_UP)
        if downlink is None or isinstance(downlink, bytes):
            downlink = Downlink(downlink)
        elif not isinstance(downlink, Downlink):
            raise TypeError(
                f"downlink must be a Downlink, bytes or None, got {type(downlink).__name__}"
            )
        # a private client answers under its ledger's rules, as a deployed site does
        return Site(self).answer(RoundRequest(t, downlink, t, privacy_seed)).result

    def compute_round(
        self, t: int, downlink: Downlink, privacy_seed: int | None = None
    ) -> StepResult:
        """Round ``t`` itself, without a private site's rules (a
        :class:`~cotrain.federation.site.Site` applies them): decode P, fit, label,
        randomise, encode. A failure goes into the result's ``error``."""
        result = StepResult(self.client_id, private=self.privacy is not None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                pseudo = self._decode_broadcast(t, downlink)
                if self.privacy is not None:  # e.g. seeds DP-SGD's training noise
                    self.privacy.before_fit(self.model, privacy_seed)
                self.trust_cache["round"] = t  # a model trust may refit by the round
                labels = self._fit_and_label(pseudo, result)
                if self.privacy is not None:  # applied before anything leaves the client
                    labels = self._release(labels, pseudo, privacy_seed, result)
                result.message = self._sender.encode(labels, t, downlink.ref_round)
            except Exception as err:  # reported to the server, which raises or skips
                result.error = err
        result.warnings = Counter((w.category.__name__, str(w.message)) for w in caught)
        result.broadcast_version = self._decoder.version
        return result

    def repeated_result(self, message: bytes | None, dp_event: Any) -> StepResult:
        """The result of a request answered before: the release sent then (no refit, no
        fresh noise), and the current model's predictions for a simulation's scoring."""
        result = StepResult(self.client_id, message, dp_event=dp_event, private=True)
        if self.fitted and self.X_eval is not None:  # simulation-only scoring
            result.eval_codes = self.codes(self.model.predict(self.X_eval))
            if self.eval_proba:
                result.eval_proba = self.model.predict_proba(self.X_eval)
        result.broadcast_version = self._decoder.version
        return result

    def refusal(self, error: BaseException | None, site_epsilon: float) -> StepResult:
        """The result of a request the client's ledger refused before the round ran."""
        return StepResult(
            self.client_id,
            error=error,
            private=True,
            site_epsilon=site_epsilon,
            broadcast_version=self._decoder.version,
        )

    def _decode_broadcast(self, t: int, downlink: Downlink) -> np.ndarray | None:
        """The consensus of round ``t - 1``; None (and a warning) when it is a delta
        against a version this client lost."""
        try:
            return self._decoder.decode(downlink, version=t - 1)
        except MissingReference as err:
            self._decoder.forget()
            warnings.warn(
                f"{err}; training on the private data alone this round",
                RuntimeWarning,
                stacklevel=2,
            )
            return None

    def _release(
        self, labels: np.ndarray, pseudo: np.ndarray | None, seed: int | None, result: StepResult
    ) -> np.ndarray:
        """The labels that leave the client: its mechanism's ``release_round`` (and the
        round's privacy event, when the mechanism reports one)."""
        rng = np.random.default_rng(secrets.randbits(128) if seed is None else seed)
        X_train, y_train = self.training_set(self._pool, pseudo)
        n = self.n_samples
        step = ClientRound(
            labels,
            self.classes,
            self.model,
            self._X,
            self._y,
            self._pool,
            X_pool=X_train[n:],
            y_pool=y_train[n:],
        )
        release = self.privacy.release_round(step, rng)
        result.dp_event = release.dp_event
        return release.labels

    def _fit_and_label(self, pseudo: np.ndarray | None, result: StepResult) -> np.ndarray:
        """Fit on D_i ∪ P; return the labels on U (codes, or probabilities for soft
        sharing) and put the evaluation predictions and learner time in ``result``."""
        if isinstance(self.trust, Trust):  # it fits, labels and builds the predictor
            return self._cross_fit_and_label(self.trust, pseudo, result)
        start = time.perf_counter()
        X_train, y_train, weight = self._X, self._y, None
        if pseudo is not None:  # how much the pool counts: see cotrain.trust
            X_pool, y_pool = pseudo_labeled_rows(self._pool, pseudo, self.classes)
            choice = self.trust.choose(
                self.model.estimator,
                self._X,
                self._y,
                X_pool,
                y_pool,
                self.classes,
                cache=self.trust_cache,
            )
            X_train, y_train, weight = weighted_training_set(
                self.model.estimator,
                self._X,
                self._y,
                X_pool,
                y_pool,
                self.classes,
                choice.weight,
                getattr(self.trust, "random_state", None),
            )
            result.trust, result.quality = choice.weight, choice.quality
        self.model.fit(X_train, y_train, sample_weight=weight)
        self.fitted = True
        trust_time = time.perf_counter() - start - self.model.fit_time_
        start = time.perf_counter()
        soft = self._wire.share == "soft"
        on_public = self.model.predict_proba(self._pool) if soft else self.model.predict(self._pool)
        if self.X_eval is not None:
            result.eval_codes = self.codes(self.model.predict(self.X_eval))
            if self.eval_proba:
                result.eval_proba = self.model.predict_proba(self.X_eval)
        result.learner_time_s = trust_time + self.model.fit_time_ + time.perf_counter() - start
        return on_public if soft else self.codes(on_public)

    def _cross_fit_and_label(
        self, trust: Trust, pseudo: np.ndarray | None, result: StepResult
    ) -> np.ndarray:
        """:meth:`_fit_and_label` of a client with a model trust
        (:class:`~cotrain.trust.Trust`, e.g. :class:`~cotrain.trust.CrossFitTrust`): the
        trust fits the models, labels U and builds the client's predictor."""
        start = time.perf_counter()
        if self.fitted and "local" not in self.trust_cache:  # restored from a checkpoint
            trust.resume(self.model.estimator_, self.trust_cache)
        out = trust.fit_round(
            self.estimator,
            self._X,
            self._y,
            self._pool,
            pseudo,
            self.classes,
            self.trust_cache,
        )
        self.model = ClassAlignedClassifier.from_fitted(out.model, self.classes, out.fit_time)
        self.fitted = True
        result.trust, result.quality = out.alpha, out.quality
        if self.X_eval is not None:
            proba = self.model.predict_proba(self.X_eval)
            result.eval_codes = proba.argmax(axis=1).astype(np.int64)
            if self.eval_proba:
                result.eval_proba = proba
        result.learner_time_s = time.perf_counter() - start
        if self._wire.share == "soft":
            return out.on_public
        return out.on_public.argmax(axis=1).astype(np.int64)

    def codes(self, labels: np.ndarray) -> np.ndarray:
        """Indices of global-class labels in ``classes``."""
        return np.searchsorted(self.classes, labels).astype(np.int64)

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """What the client keeps between rounds: its model (an object: checkpoints store
        it with skops), whether it is fitted, its delta-coding state and, private, its own
        ledger (every release it sent, with the bytes)."""
        return {
            "model": self.model if self.fitted else None,
            "fitted": self.fitted,
            "sender": None if self.sender is None else self.sender.state_dict(),
            "broadcasts": None if self.broadcasts is None else self.broadcasts.state_dict(),
            "site_ledger": None if self.site_ledger is None else self.site_ledger.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        if state["fitted"]:
            self.model, self.fitted = state["model"], True
        if state["sender"] is not None and self.sender is not None:
            self.sender.load_state_dict(state["sender"])
        if state.get("broadcasts") is not None and self.broadcasts is not None:
            self.broadcasts.load_state_dict(state["broadcasts"])
        if state.get("site_ledger") is not None and self.site_ledger is not None:
            self.site_ledger.load_state_dict(state["site_ledger"])


def decode_labels(data: bytes) -> np.ndarray:
    """Labels carried by an encoded message: hard codes ``(n,)`` or probabilities ``(n, C)``.

    Examples
    --------
    >>> import numpy as np
    >>> from cotrain.wire.messages import HardLabels
    >>> decode_labels(HardLabels(np.array([1, 0, 2]), 3).to_bytes()).tolist()
    [1, 0, 2]
    """
    message = decode(data)
    if isinstance(message, HardLabels):
        return message.codes
    if isinstance(message, SoftLabels | QuantizedSoftLabels):
        return message.probs
    raise TypeError(f"a {type(message).__name__} carries no labels without its reference")
