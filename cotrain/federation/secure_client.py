"""A site of a secure-sum run: its own model, and noisy teacher-vote shares for the sum.

:class:`SecureClient` is a :class:`~cotrain.federation.client.Client` whose uploads are
shares of a secure sum (:class:`~cotrain.privacy.mechanisms.secure_votes.SecureTeacherVotes`). Each
round it fits its own model on its rows ∪ P as every client does (the model never leaves
it), then:

* :meth:`~SecureClient.vote_round`: trains its teachers, computes their vote histogram on
  the round's queries, and sends the check share (``votes + Sk(share_check)``) — or, without
  a threshold, the answer share (``votes + Sk(share_answer)``) — keeping the answer share
  for the second step;
* :meth:`~SecureClient.answer_round`: sends the answer share's rows the server selected.

The site enforces the public plan itself, whatever the server asks: at most the planned
rounds, at most ``answers`` selected rows per round, one selection per round, and the same
bytes for a repeated request (no fresh noise); anything else is refused with a
:class:`~cotrain.privacy.ledgers.site_ledger.PrivacyBudgetSpent` error, a client failure.
"""

from __future__ import annotations

import secrets
import warnings
from collections import Counter
from typing import Any

import numpy as np

from cotrain.federation.client import Client
from cotrain.federation.secure_sum import encode_share
from cotrain.federation.site import StepResult
from cotrain.privacy.ledgers.site_ledger import PrivacyBudgetSpent
from cotrain.privacy.mechanisms.base import ClientRound
from cotrain.privacy.mechanisms.secure_votes import SecurePlan
from cotrain.wire.broadcast import Downlink

__all__ = ["SecureClient"]


class SecureClient(Client):
    """A private site of a secure-sum run (see the module docstring).

    Parameters
    ----------
    *args, **kwargs
        As for :class:`~cotrain.federation.client.Client`, with ``privacy`` a
        :class:`~cotrain.privacy.mechanisms.secure_votes.SecureTeacherVotes`.
    plan : SecurePlan
        The run's public noise plan.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain.privacy.mechanisms.secure_votes import SecureTeacherVotes
    >>> votes = SecureTeacherVotes(n_teachers=2, mu=4.0)
    >>> plan = votes.plan(n_sites=1, n_public=2, n_classes=2, rounds=1)
    >>> X = np.arange(20.0).reshape(-1, 1); y = (X[:, 0] >= 10).astype(np.int64)
    >>> site = SecureClient(0, DecisionTreeClassifier(random_state=0), X, y, np.array([0, 1]),
    ...                     X_public=np.array([[1.0], [18.0]]), privacy=votes, plan=plan)
    >>> step = site.vote_round(1, None, 0, np.array([0, 1]))
    >>> len(step.message)               # 2 queries x 2 classes x int32
    16
    >>> site.vote_round(2, None, 0, np.array([0, 1])).error   # past the planned round
    PrivacyBudgetSpent('privacy budget spent')
    >>> site.vote_round(2, None, 0, np.array([], dtype=int)).message   # train, release nothing
    b''
    """

    def __init__(self, *args: Any, plan: SecurePlan, **kwargs: Any) -> None:
        super().__init__(*args, own_ledger=False, **kwargs)
        self.plan = plan
        #: round -> what this site sent: queries, the step-1 bytes, the selection and its bytes
        self.sent: dict[int, dict[str, Any]] = {}
        #: the answer share of the latest round, kept for its second step (never sent whole)
        self._answer_share: tuple[int, np.ndarray] | None = None

    def vote_round(
        self,
        t: int,
        downlink: Downlink | bytes | None,
        privacy_seed: int | None,
        queries: np.ndarray,
    ) -> StepResult:
        """Step 1 of round ``t``: fit the own model, then send the first share on
        ``queries`` (check share with a threshold, else answer share). Never raises."""
        if self.X_public is None or self.broadcasts is None:
            raise ValueError("vote_round needs a client set up with X_public (and a wire)")
        queries = np.asarray(queries, dtype=np.intp)
        result = StepResult(self.client_id, private=True)
        earlier = self.sent.get(t)
        if earlier is not None:  # asked again: the same bytes, or a refusal
            if np.array_equal(earlier["queries"], queries):
                result.message = earlier["first"]
            else:
                result.error = PrivacyBudgetSpent("round already answered for other queries")
            return result
        if queries.size and (
            len(self.sent) >= self.plan.rounds
            or queries.size != self.plan.n_queries
            or np.unique(queries).size != queries.size  # a repeated query would cost twice
            or queries.min() < 0
            or queries.max() >= len(self.X_public)
        ):
            result.error = PrivacyBudgetSpent()
            return result
        if downlink is None or isinstance(downlink, bytes):
            downlink = Downlink(downlink)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                pseudo = self._decode_broadcast(t, downlink)
                self._fit_and_label(pseudo, result)
                result.message = (
                    self._first_share(t, pseudo, queries, privacy_seed) if queries.size else b""
                )  # no queries: the round after the last release trains and sends nothing
            except Exception as err:  # a failed round releases nothing
                result.error = err
        result.warnings = Counter((w.category.__name__, str(w.message)) for w in caught)
        result.broadcast_version = self.broadcasts.version
        return result

    def _first_share(
        self, t: int, pseudo: np.ndarray | None, queries: np.ndarray, seed: int | None
    ) -> bytes:
        rng = np.random.default_rng(secrets.randbits(128) if seed is None else seed)
        X_public = self.X_public
        if X_public is None:  # pragma: no cover - vote_round checked it
            raise ValueError("the client has no public pool")
        X_train, y_train = self.training_set(X_public, pseudo)
        n = self.n_samples
        step = ClientRound(
            np.zeros(0, dtype=np.int64),
            self.classes,
            self.estimator,
            self._X,
            self._y,
            self.X_public,
            X_pool=X_train[n:],
            y_pool=y_train[n:],
        )
        votes = self.privacy.site_votes(step, queries, rng)
        answer = self.privacy.noisy_share(votes, self.plan.share_answer, rng)
        first = answer
        if self.plan.share_check is not None:
            first = self.privacy.noisy_share(votes, self.plan.share_check, rng)
            self._answer_share = (t, answer)
        message = encode_share(first)
        self.sent[t] = {"queries": queries, "first": message, "selected": None, "answer": None}
        return message

    def answer_round(self, t: int, selected: np.ndarray) -> StepResult:
        """Step 2 of round ``t``: the answer share's rows ``selected`` (positions among the
        round's queries). Never raises."""
        selected = np.asarray(selected, dtype=np.intp)
        result = StepResult(self.client_id, private=True)
        sent = self.sent.get(t)
        if sent is None or self.plan.share_check is None:
            result.error = PrivacyBudgetSpent("no check share was sent for this round")
        elif sent["selected"] is not None:  # one selection per round, repeated verbatim
            if np.array_equal(sent["selected"], selected):
                result.message = sent["answer"]
            else:
                result.error = PrivacyBudgetSpent("round already answered for other queries")
        elif (
            selected.size > self.plan.answers
            or np.unique(selected).size != selected.size
            or (selected.size and (selected.min() < 0 or selected.max() >= self.plan.n_queries))
            or self._answer_share is None
            or self._answer_share[0] != t
        ):
            result.error = PrivacyBudgetSpent(
                f"at most {self.plan.answers} distinct query positions may be answered"
            )
        else:
            message = encode_share(self._answer_share[1][selected])
            sent.update(selected=selected, answer=message)
            self._answer_share = None
            result.message = message
        result.broadcast_version = None if self.broadcasts is None else self.broadcasts.version
        return result

    @property
    def answer_share(self) -> tuple[int, np.ndarray] | None:
        """``(round, share)``: the answer share kept for the second step of that round
        (None once sent or without a check). A deployed site keeps it on its own disk
        between its two steps (:mod:`cotrain.flower.secure_site`); it never leaves whole."""
        return self._answer_share

    @answer_share.setter
    def answer_share(self, value: tuple[int, np.ndarray] | None) -> None:
        self._answer_share = None if value is None else (int(value[0]), np.asarray(value[1]))

    def sent_state(self) -> dict[str, Any]:
        """What this site sent, per round, as JSON values (its enforcement of the plan)."""
        return {
            str(t): {
                "queries": s["queries"].tolist(),
                "first": s["first"].hex(),
                "selected": None if s["selected"] is None else s["selected"].tolist(),
                "answer": None if s["answer"] is None else s["answer"].hex(),
            }
            for t, s in self.sent.items()
        }

    def load_sent_state(self, sent: dict[str, Any]) -> None:
        """Put a :meth:`sent_state` back."""
        self.sent = {
            int(t): {
                "queries": np.asarray(s["queries"], dtype=np.intp),
                "first": bytes.fromhex(s["first"]),
                "selected": None if s["selected"] is None else np.asarray(s["selected"]),
                "answer": None if s["answer"] is None else bytes.fromhex(s["answer"]),
            }
            for t, s in sent.items()
        }

    def state_dict(self) -> dict[str, Any]:
        """The client's state plus what it sent (its enforcement of the plan)."""
        state = super().state_dict()
        state["secure_sent"] = self.sent_state()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back."""
        super().load_state_dict(state)
        self.load_sent_state(state.get("secure_sent", {}))
