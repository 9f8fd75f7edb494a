"""A site's one answer to a round request, whatever carries it.

:class:`Site` is a client (:class:`~cotrain.federation.client.Client`, the only code that
touches private data), its privacy ledger when it has a mechanism
(:class:`~cotrain.privacy.ledgers.site_ledger.SiteLedger`, in memory in a simulation, on the
site's disk when deployed) and what it keeps between rounds. :meth:`Site.answer` is where a
site decides what leaves it in a round:

1. the round itself (:meth:`~cotrain.federation.client.Client.compute_round`): decode the
   consensus, fit, label, randomise, encode;
2. a private site's rules, applied by its ledger
   (:meth:`~cotrain.privacy.ledgers.site_ledger.SiteLedger.serve`): a request it answered
   already gets the same reply (no refit, no fresh noise), a release past its budget is
   refused before the round runs, and a release is recorded, with the reply, before it
   leaves;
3. the release rule (:meth:`~cotrain.federation.site.StepResult.upload`) and the reply
   envelope (:func:`cotrain.wire.envelope.encode_upload`): the same bytes in process and on
   Flower.

A request says what it asks: a label round (:class:`RoundRequest`) or one step of a secure
sum (:class:`ShareRequest`: a site's noisy vote share on the round's queries, or the rows of
its answer share the server selected). The site applies the same rules to both — one ledger,
counted across runs; a repeated request gets the bytes sent the first time; the same key
asking something else (other queries, another selection, another plan) is refused — and a
share request adds the plan's own limits for its run, and a share enters one sum only
(:meth:`Site.contribute`: the same step asked for again is refused, not re-sent).

The in-process client (:meth:`~cotrain.federation.client.Client.run_round`,
:meth:`~cotrain.federation.secure_client.SecureClient.vote_round` and ``answer_round``), the
Flower ClientApp (:func:`cotrain.flower.client_app.site_train`) and the Flower secure site
(:mod:`cotrain.flower.secure_site`) are thin adapters over it: the in-process ones keep the
:class:`SiteAnswer`'s step result (its simulation-only predictions included), the deployed
ones send its reply (a share only ever through a secure sum).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from cotrain.privacy.ledgers.site_ledger import PrivacyBudgetSpent, Served, SiteLedger
from cotrain.privacy.mechanisms.secure_votes import SecurePlan, SkellamShifts
from cotrain.wire import envelope
from cotrain.wire.broadcast import Downlink
from cotrain.wire.upload import Upload

__all__ = [
    "RoundClient",
    "RoundRequest",
    "ShareRequest",
    "Site",
    "SiteAnswer",
    "StepResult",
    "other_plan",
    "plan_digest",
]


@dataclass
class StepResult(Upload):
    """What one client step computed: everything of an :class:`~cotrain.wire.upload.Upload`
    (its warnings, fit time, out-of-fold ``quality`` and pool weight ``trust`` as measured,
    whether or not they may leave), plus its predictions on the evaluation data
    (simulation only, never sent to the server; a deployment reports its own metrics).

    What leaves the client is :meth:`upload`, the one release rule: the in-process
    server receives it and a Flower site serialises it unchanged.
    """

    eval_codes: np.ndarray | None = None
    eval_proba: np.ndarray | None = None
    #: the client has a privacy mechanism: its learner's warnings, fit time, out-of-fold
    #: accuracy and pool weight are data-dependent side channels outside the ε, so they
    #: stay off the upload
    private: bool = False

    def upload(self) -> Upload:
        """What the client releases this round: the release rule, decided here only.

        Every client releases its labels (``message``), its failure if any, the round's
        privacy event (``dp_event``, a mechanism with ``reports_events``) and the consensus
        version it holds; a private client also its own ledger's ε (``site_epsilon``, a
        function of public configuration and of how many releases it made). A client
        without a privacy mechanism also releases its learner's
        warnings, its fit time, its out-of-fold accuracy (``quality``) and the pool weight
        it chose (``trust``); a private client keeps those to itself (they depend on its
        private records outside the accounted release).

        Examples
        --------
        >>> from collections import Counter
        >>> done = StepResult(0, b"labels", warnings=Counter({("UserWarning", "w"): 1}),
        ...                   learner_time_s=0.5, quality=0.9, trust=1.0)
        >>> done.upload().quality, done.upload().trust, done.upload().learner_time_s
        (0.9, 1.0, 0.5)
        >>> private = StepResult(0, b"labels", quality=0.9, trust=1.0, learner_time_s=0.5,
        ...                      private=True).upload()
        >>> private.message, private.quality, private.trust, private.learner_time_s
        (b'labels', None, None, None)
        """
        released = Upload(
            self.client_id,
            self.message,
            self.error,
            learner_time_s=None,
            dp_event=self.dp_event,
            broadcast_version=self.broadcast_version,
            site_epsilon=self.site_epsilon,
        )
        if not self.private:
            released.warnings = self.warnings
            released.learner_time_s = self.learner_time_s
            released.quality = self.quality
            released.trust = self.trust
        return released

    def released_evaluation(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The predictions on the evaluation data that may leave the client — where a
        deployment reports its own metrics: ``(eval_codes, eval_proba)``, or
        ``(None, None)`` for a private client (a model trained on its private records,
        scored outside the accounted release).

        Examples
        --------
        >>> import numpy as np
        >>> StepResult(0, eval_codes=np.array([1, 0])).released_evaluation()[0]
        array([1, 0])
        >>> StepResult(0, eval_codes=np.array([1, 0]), private=True).released_evaluation()
        (None, None)
        """
        if self.private:
            return None, None
        return self.eval_codes, self.eval_proba


class RoundClient(Protocol):
    """What a :class:`Site` needs of its client (:class:`~cotrain.federation.client.Client`)."""

    client_id: int
    site_ledger: SiteLedger | None

    def compute_round(
        self, t: int, downlink: Downlink, privacy_seed: int | None = None
    ) -> StepResult:
        """Round ``t`` itself: decode, fit, label, randomise, encode."""
        ...

    def repeated_result(self, message: bytes | None, dp_event: Any) -> StepResult:
        """The result of a request answered before."""
        ...

    def refusal(self, error: BaseException | None, site_epsilon: float) -> StepResult:
        """The result of a request refused before the round ran."""
        ...


@dataclass(frozen=True)
class RoundRequest:
    """What the server asks a site for in one label round.

    Attributes
    ----------
    round : int
        The round (from 1).
    downlink : Downlink
        The consensus the server sent (see :meth:`cotrain.federation.client.Client.run_round`).
    key : hashable
        What names the request in the site's ledger: the round in a simulation, ``(run
        token, round)`` when deployed (a site outlives runs).
    privacy_seed : int, optional
        Seeds the round's privacy noise (simulations with ``reproducible_noise`` only).
    """

    round: int
    downlink: Downlink
    key: Hashable
    privacy_seed: int | None = None

    #: a label round always releases; its key says all it asks; its event is the mechanism's
    releases = True
    digest = None
    event = None

    def compute(self, client: Any) -> StepResult:
        """The round itself at ``client``."""
        return client.compute_round(self.round, self.downlink, self.privacy_seed)

    def refused(self, ledger: SiteLedger) -> str | None:
        """A label round has no limit of its own beyond the ledger's budget."""
        return None


def plan_digest(plan: SecurePlan) -> str:
    """SHA-256 of a plan's public sizes and noise: a site's shares in one run share it.

    Examples
    --------
    >>> plan = SecurePlan(2, 4, 2, 2, answers=2, mu_answer=4.0, mu_check=16.0, delta=1e-5)
    >>> len(plan_digest(plan)), plan_digest(plan) == plan_digest(SecurePlan(**asdict(plan)))
    (64, True)
    """
    return hashlib.sha256(json.dumps(asdict(plan), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class ShareRequest:
    """What the server asks a secure-sum site for in one step of a round
    (:class:`~cotrain.privacy.SecureTeacherVotes`).

    Attributes
    ----------
    round : int
        The round (from 1).
    step : {"first", "answer"}
        The first share on the round's queries (it fits the site's model and teachers
        first), or the rows of the answer share the server selected.
    positions : ndarray of int
        The queries (positions in U; none: the round after the last release, which trains
        and sends nothing), or the selected rows (positions among the queries).
    plan : SecurePlan
        The plan the site computed for the request from its own mechanism.
    run : tuple, default=()
        The run's name in the site's ledger: ``()`` in a simulation, ``(run token,)`` when
        deployed.
    downlink : Downlink, optional
        The consensus the server sent (the first step).
    privacy_seed : int, optional
        Seeds the noise (simulations with ``reproducible_noise`` only).

    Examples
    --------
    >>> plan = SecurePlan(2, 4, 2, 2, answers=2, mu_answer=4.0, mu_check=16.0, delta=1e-5)
    >>> ask = ShareRequest(3, "first", np.arange(4), plan, run=("a1b2",))
    >>> ask.key, ask.event
    (('a1b2', 3, 'first'), SkellamShifts(mu=16.0, shifts=8))
    """

    round: int
    step: str
    positions: np.ndarray
    plan: SecurePlan
    run: tuple[str, ...] = ()
    downlink: Downlink | None = None
    privacy_seed: int | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        """The request's name in the site's ledger: (run…, round, step)."""
        return (*self.run, int(self.round), self.step)

    @property
    def releases(self) -> bool:
        """Whether it sends a share (a first step without queries only trains)."""
        return self.step == "answer" or self.positions.size > 0

    @property
    def event(self) -> SkellamShifts:
        """The share's privacy event under the plan (:meth:`SecurePlan.step_event`)."""
        return self.plan.step_event(self.step)

    @property
    def digest(self) -> str:
        """``<plan>/<positions>`` (SHA-256 of each): what the request asks beyond its key."""
        asked = hashlib.sha256(np.asarray(self.positions, dtype="<i8").tobytes()).hexdigest()
        return f"{plan_digest(self.plan)}/{asked}"

    def compute(self, client: Any) -> StepResult:
        """The step itself at ``client``
        (:class:`~cotrain.federation.secure_client.SecureClient`)."""
        if self.step == "first":
            return client.compute_first(
                self.round, self.downlink or Downlink(None), self.privacy_seed, self.positions
            )
        return client.compute_answer(self.round, self.positions)

    def refused(self, ledger: SiteLedger) -> str | None:
        """Why the site refuses the request under its run's plan (None: it does not): a
        share for a round outside the plan's ``1..rounds`` (so a run gets at most the
        planned releases, one per round, whatever the order it asks them in), or the run's
        earlier shares sent under another plan (:func:`other_plan`).

        Examples
        --------
        >>> from cotrain.privacy.ledgers.site_ledger import SiteLedger
        >>> from cotrain.privacy import SecureTeacherVotes
        >>> plan = SecurePlan(2, 4, 2, 2, answers=4, mu_answer=4.0, mu_check=None, delta=1e-5)
        >>> ledger = SiteLedger(SecureTeacherVotes(mu=4.0), 2, 4)
        >>> ShareRequest(0, "first", np.arange(4), plan).refused(ledger)
        'round 0 is outside the plan (rounds 1 to 2)'
        >>> ShareRequest(1, "first", np.arange(4), plan).refused(ledger) is None
        True
        """
        if self.releases and not 1 <= int(self.round) <= self.plan.rounds:
            return f"round {int(self.round)} is outside the plan (rounds 1 to {self.plan.rounds})"
        return other_plan(ledger, self.run, self.plan)


def other_plan(ledger: SiteLedger, run: tuple[str, ...], plan: SecurePlan) -> str | None:
    """Why a share of ``run`` under ``plan`` is refused because the run's earlier shares were
    recorded under another plan (None: they were not). A request's digest starts with its
    plan's (:func:`plan_digest`)."""
    planned = plan_digest(plan)
    if any((sent.digest or "").split("/")[0] != planned for sent in ledger.sent(_run_prefix(run))):
        return "the server changed the run's public configuration"
    return None


def _run_prefix(run: tuple[str, ...]) -> str:
    """The start of the ledger keys of ``run``'s requests (all of them in a simulation)."""
    return SiteLedger.key(run) + "/" if run else ""


@dataclass
class SiteAnswer:
    """A site's answer to one request.

    Attributes
    ----------
    result : StepResult
        What the site computed, as the release rule sees it: for a repeated request, the
        cached release (and, in a simulation, the model's current predictions); for a
        refusal, the error.
    reply : dict
        What leaves the site: the envelope's records
        (:func:`cotrain.wire.envelope.encode_upload`) plus what the site's ``evaluation``
        added; for a repeated request, exactly the records sent the first time.
    outcome : {"computed", "repeat", "refused"}
        The round ran (released, or failed and released nothing), a repeated request was
        answered from the ledger, or the ledger refused.
    """

    result: StepResult
    reply: dict[str, Any]
    outcome: str


class Site:
    """A client, its ledger and what it keeps, answering round requests (see the module
    docstring).

    Parameters
    ----------
    client : Client or RoundClient
        Set up with the public pool and its wire format.
    ledger : SiteLedger, optional
        A private site's ledger (default: the client's own, in memory; None for a client
        without a privacy mechanism).
    keep : callable, optional
        ``keep(result)``, called when a round released, before the reply leaves: where a
        deployed site stores its model and upload reference between rounds.
    evaluation : callable, optional
        ``evaluation(result, reply)``: adds what the site reports about its own evaluation
        data to the reply (a deployed site).
    started : float, optional
        When the transport's handler started (``time.time()``), for the reply's timings.
    notes : Counter, optional
        ``(category, message) -> count`` of warnings the transport adds to a round that
        ran (e.g. a deployed site that could not restore its last model).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from cotrain.federation.client import Client
    >>> X = np.arange(8.0).reshape(-1, 1); y = (X[:, 0] > 3).astype(int)
    >>> client = Client(0, DecisionTreeClassifier(random_state=0), X, y, np.array([0, 1]),
    ...                 X_public=np.array([[0.5], [6.5]]))
    >>> answer = Site(client).answer(RoundRequest(1, Downlink(None), key=1))
    >>> answer.outcome, answer.reply["arrays"]["labels"] == answer.result.message
    ('computed', True)
    """

    def __init__(
        self,
        client: RoundClient,
        ledger: SiteLedger | None = None,
        *,
        keep: Callable[[StepResult], None] | None = None,
        evaluation: Callable[[StepResult, dict[str, Any]], None] | None = None,
        started: float | None = None,
        notes: Counter[tuple[str, str]] | None = None,
    ) -> None:
        self.client = client
        self.ledger = client.site_ledger if ledger is None else ledger
        self.keep = keep
        self.evaluation = evaluation
        self.started = started
        self.notes = Counter() if notes is None else notes

    def answer(self, request: RoundRequest | ShareRequest) -> SiteAnswer:
        """The site's answer to ``request`` (see the module docstring). Never raises for
        the round's own failure: it is the answer's ``error``."""
        client, ledger = self.client, self.ledger
        if ledger is None or not request.releases:
            result = request.compute(client)
            return SiteAnswer(result, self._reply(result, None), "computed")

        def compute() -> tuple[StepResult, Callable[[float], bytes]]:
            step = request.compute(client)
            return step, lambda epsilon: envelope.reply_to_bytes(self._reply(step, epsilon))

        # one request at a time, under the site's rules (its ledger's lock)
        with ledger.transaction():
            reason = request.refused(ledger)
            if reason is None:
                served = ledger.serve(
                    request.key, compute, digest=request.digest, event=request.event
                )
            else:
                served = Served("refused", None, None, PrivacyBudgetSpent(reason), ledger.epsilon())
        if served.outcome == "repeat":  # exactly what it sent the first time
            reply = envelope.reply_from_bytes(served.reply or b"")
            labels = reply["arrays"].get(envelope.LABELS)
            result = client.repeated_result(labels, served.dp_event)
            result.site_epsilon = served.epsilon
            return SiteAnswer(result, reply, "repeat")
        if served.computed is None:  # refused before the round ran
            return self._refused(served.error or PrivacyBudgetSpent())
        result = served.computed
        if served.reply is not None:  # released, and recorded with its reply
            reply = envelope.reply_from_bytes(served.reply)
            return SiteAnswer(result, reply, "computed")
        # failed (nothing released), or its reported event was larger than assumed
        result.error, result.message, result.dp_event = served.error, None, None
        outcome = "computed" if served.outcome == "failed" else "refused"
        return SiteAnswer(result, self._reply(result, served.epsilon), outcome)

    def contribute(self, request: ShareRequest) -> SiteAnswer:
        """The site's share for one secure sum: :meth:`answer`, then the share claimed in the
        ledger (:meth:`~cotrain.privacy.ledgers.site_ledger.SiteLedger.claim`). A share
        enters one sum only: the same step asked again — under any name, for any set of
        sites — is refused, since two sums that differ by this site would reveal it."""
        ledger = self.ledger
        if ledger is None:
            raise ValueError("a secure-sum site keeps a ledger")
        with ledger.transaction():
            answer = self.answer(request)
            if answer.result.error is None and request.releases:
                if not ledger.claim(request.key):
                    return self._refused(PrivacyBudgetSpent("the share went into a sum already"))
        return answer

    def _refused(self, error: BaseException) -> SiteAnswer:
        assert self.ledger is not None
        result = self.client.refusal(error, self.ledger.epsilon())
        reply = envelope.encode_upload(result.upload(), private=True, started=self.started)
        return SiteAnswer(result, reply, "refused")

    def _reply(self, result: StepResult, site_epsilon: float | None) -> dict[str, Any]:
        """The reply for a round that ran: keep the site's state if it released, then the
        envelope of what the release rule lets leave, and the site's evaluation."""
        result.site_epsilon = site_epsilon
        result.warnings.update(self.notes)
        if result.error is None and self.keep is not None:
            self.keep(result)
        private, started = result.private, self.started
        reply = envelope.encode_upload(result.upload(), private=private, started=started)
        if self.evaluation is not None:
            self.evaluation(result, reply)
        return reply
