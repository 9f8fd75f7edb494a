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

Both are answered as every private site answers (:class:`~cotrain.federation.site.Site`,
with the client's own :class:`~cotrain.privacy.ledgers.site_ledger.SiteLedger`): every share
is recorded with its event before it leaves, the ledger's ``budget`` holds across runs, and
a share enters one sum only (:meth:`~cotrain.federation.site.Site.contribute`): the same step
asked again — for the same or other queries, another selection — is refused. The plan's own
limits are checked here (:meth:`~SecureClient.compute_first`,
:meth:`~SecureClient.compute_answer`) and there (at most the planned rounds per run):
anything else is refused with a
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
from cotrain.federation.site import ShareRequest, Site, StepResult
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
    PrivacyBudgetSpent('round 2 is outside the plan (rounds 1 to 1)')
    >>> site.vote_round(2, None, 0, np.array([], dtype=int)).message   # train, release nothing
    b''
    >>> site.site_ledger.releases, site.site_ledger.epsilon() == plan.epsilon(1)
    (1, True)
    """

    def __init__(self, *args: Any, plan: SecurePlan, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan = plan
        #: the answer share of the latest round, kept for its second step (never sent whole)
        self.answer_share: tuple[int, np.ndarray] | None = None

    def vote_round(
        self,
        t: int,
        downlink: Downlink | bytes | None,
        privacy_seed: int | None,
        queries: np.ndarray,
    ) -> StepResult:
        """Step 1 of round ``t``, as the site contributes it to the sum
        (:meth:`~cotrain.federation.site.Site.contribute`): fit the own model, then the first
        share on ``queries`` (check share with a threshold, else answer share); asked again,
        refused. Never raises."""
        if self.X_public is None or self.broadcasts is None:
            raise ValueError("vote_round needs a client set up with X_public (and a wire)")
        if downlink is None or isinstance(downlink, bytes):
            downlink = Downlink(downlink)
        positions = np.asarray(queries, dtype=np.intp)
        ask = ShareRequest(t, "first", positions, self.plan, (), downlink, privacy_seed)
        return Site(self).contribute(ask).result

    def answer_round(self, t: int, selected: np.ndarray) -> StepResult:
        """Step 2 of round ``t``, as the site contributes it: the answer share's rows
        ``selected`` (positions among the round's queries); asked again, refused. Never
        raises."""
        ask = ShareRequest(t, "answer", np.asarray(selected, dtype=np.intp), self.plan)
        return Site(self).contribute(ask).result

    def compute_first(
        self, t: int, downlink: Downlink, privacy_seed: int | None, queries: np.ndarray
    ) -> StepResult:
        """Step 1 itself, without the site's rules (:meth:`vote_round` applies them): the
        queries checked against the plan, the own model fitted, the teachers' noisy first
        share; the answer share kept. A failure goes into the result's ``error``."""
        result = StepResult(self.client_id, private=True)
        if queries.size and (
            queries.size != self.plan.n_queries
            or np.unique(queries).size != queries.size  # a repeated query would cost twice
            or queries.min() < 0
            or queries.max() >= len(self._pool)
        ):
            result.error = PrivacyBudgetSpent("the queries are not the plan's")
            return result
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
        result.broadcast_version = self._decoder.version
        return result

    def _first_share(
        self, t: int, pseudo: np.ndarray | None, queries: np.ndarray, seed: int | None
    ) -> bytes:
        rng = np.random.default_rng(secrets.randbits(128) if seed is None else seed)
        X_train, y_train = self.training_set(self._pool, pseudo)
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
            self.answer_share = (t, answer)
        return encode_share(first)

    def compute_answer(self, t: int, selected: np.ndarray) -> StepResult:
        """Step 2 itself, without the site's rules (:meth:`answer_round` applies them): the
        selection checked against the plan and the answer share kept for round ``t``."""
        result = StepResult(self.client_id, private=True)
        kept = self.answer_share
        if kept is None or kept[0] != t:
            result.error = PrivacyBudgetSpent("no check share was sent for this round")
        elif (
            selected.size > self.plan.answers
            or np.unique(selected).size != selected.size
            or (selected.size and (selected.min() < 0 or selected.max() >= self.plan.n_queries))
        ):
            result.error = PrivacyBudgetSpent(
                f"at most {self.plan.answers} distinct query positions may be answered"
            )
        else:
            result.message = encode_share(kept[1][selected])
            self.answer_share = None
        result.broadcast_version = self._decoder.version
        return result
