"""The `Consensus` base class: a callable holding the parameters of one consensus rule."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._params import ParamsMixin

__all__ = ["Consensus"]


class Consensus(ParamsMixin, ABC):
    """Base class of consensus rules: turn many clients' labels into one pseudo-label.

    A consensus object is a thin callable wrapper around one of the pure functions of
    :mod:`consensus`. It follows scikit-learn's parameter conventions: ``__init__`` stores its
    arguments untouched, they are validated when the object is called, and `get_params` /
    `set_params` work (so ``sklearn.base.clone`` does too).

    Subclasses implement ``__call__`` and set the class attribute ``output``. Everything else
    is an optional hook, declared here with a default that does nothing, so that the trainer
    and the Flower server call it on every rule without probing for it:

    - `weights_for` — per-client weights of a round (default: None, unweighted);
    - `observe` — a stateful rule learns from each round's labels and consensus (default:
      nothing to learn), e.g. `ReputationVote`;
    - `state_dict` / `load_state_dict` — the learned state, for checkpoints (default: none,
      ``{}``);
    - `accountable`, `dp_event`, `delta`, `budget` — the privacy accounting of a noisy rule
      (default: not accountable), e.g. `NoisyArgmax`.

    Attributes
    ----------
    output : {"hard", "soft"}
        What ``__call__`` returns for hard-vote input: ``"hard"`` means pseudo-labels of shape
        ``(n,)`` with -1 where the consensus abstains; ``"soft"`` means soft targets of shape
        ``(n, n_classes)`` with a NaN row where nobody voted.
    delta : float or None
        δ at which the ε of an accountable rule is reported (None for a rule without noise).
    budget : float or None
        Total ε per client an accountable rule allows (None = no limit).
    uses_quality : bool
        True when `weights_for` takes ``quality=``: the server then passes each client's own
        quality (e.g. its out-of-fold accuracy, ``(m,)`` float, NaN where not sent).
    predicts_with_quality : bool
        True when the quality weights are per client (not per public example): a
        federation's prediction rule then weighs each model's prediction on new data by its
        client's released quality, as the consensus weighs its votes on the pool.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import Consensus, majority_vote
    >>> class Plurality(Consensus):
    ...     output = "hard"
    ...     def __call__(self, labels, *, n_classes, weights=None):
    ...         return majority_vote(labels, n_classes, weights)
    >>> Plurality()(np.array([[0, 1], [0, 1], [1, 1]]), n_classes=2)
    array([0, 1])
    >>> Plurality()
    Plurality()
    """

    output: ClassVar[Literal["hard", "soft"]] = "hard"
    uses_quality: ClassVar[bool] = False
    predicts_with_quality: ClassVar[bool] = False
    delta: float | None = None
    budget: float | None = None

    @abstractmethod
    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[Any]:
        """Return the consensus of ``labels``.

        Parameters
        ----------
        labels : array-like
            Hard votes ``(m, n)`` of integer class codes with -1 for "did not vote", or
            probabilities ``(m, n, n_classes)`` with an all-NaN row for "did not vote".
        n_classes : int
            Number of classes C (global label space).
        weights : array-like of shape (m,) or (m, n), optional
            Non-negative weight per client, or per client per example.

        Returns
        -------
        ndarray
            ``(n,)`` int64 pseudo-labels (-1 = abstain) or ``(n, n_classes)`` float64 targets.
        """

    def weights_for(self, client_ids: ArrayLike, n_public: int) -> NDArray[np.float64] | None:
        """Weights to pass to ``__call__`` for the given clients, or None.

        The trainer calls this each round with the integer ids of the clients whose labels
        are in ``labels`` (in that row order) and the size of the public pool, and passes the
        result as ``weights``. The default has no weights of its own and returns None.

        Parameters
        ----------
        client_ids : array-like of int, shape (m,)
        n_public : int

        Returns
        -------
        ndarray of shape (m,) or (m, n_public), or None

        Examples
        --------
        >>> from consensus import MajorityVote
        >>> MajorityVote().weights_for([0, 2], n_public=10) is None
        True
        """
        return None

    # ------------------------------------------------------------------ state across rounds

    def observe(self, client_ids: ArrayLike, labels: ArrayLike, pseudo: ArrayLike) -> None:
        """Learn from one round: the clients' labels and the consensus formed from them.

        The server calls this after every round with the rows it passed to ``__call__``.
        The default does nothing: most rules keep no state between rounds. Stateful rules
        (`ReputationVote`) override it.

        Parameters
        ----------
        client_ids : array-like of int, shape (m,)
            The clients whose labels are the rows of ``labels``.
        labels : array-like
            Their hard votes ``(m, n)`` or probabilities ``(m, n, n_classes)``.
        pseudo : array-like
            The round's consensus: hard ``(n,)`` (-1 = abstained) or soft ``(n, n_classes)``.

        Examples
        --------
        >>> import numpy as np
        >>> from consensus import MajorityVote
        >>> rule = MajorityVote()
        >>> votes = np.array([[0, 1], [0, 0]])
        >>> rule.observe([0, 1], votes, rule(votes, n_classes=2)) is None
        True
        """
        return None

    def state_dict(self) -> dict[str, Any]:
        """What the rule has learned across rounds, for checkpoints (default: ``{}``).

        Returns
        -------
        dict
            Numbers, strings, lists and numpy arrays only; `load_state_dict` takes it back.

        Examples
        --------
        >>> from consensus import MajorityVote
        >>> MajorityVote().state_dict()
        {}
        """
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> Self | None:
        """Restore what `state_dict` returned.

        The default accepts only the empty state of a rule that keeps none.

        Parameters
        ----------
        state : mapping
            A `state_dict` of a rule of this class.

        Returns
        -------
        None or Consensus
            None; a subclass may return the rule itself for chaining (as
            :meth:`consensus.ReputationVote.load_state_dict` does).

        Raises
        ------
        TypeError
            If ``state`` is not a mapping.
        ValueError
            If ``state`` has keys this rule does not keep.

        Examples
        --------
        >>> from consensus import MajorityVote
        >>> MajorityVote().load_state_dict({})
        >>> MajorityVote().load_state_dict({"reputation": [1.0]})
        Traceback (most recent call last):
        ...
        ValueError: MajorityVote keeps no state: expected an empty state, got keys ['reputation']
        """
        if not isinstance(state, Mapping):
            raise TypeError(
                f"state must be a dict (from {type(self).__name__}.state_dict()), "
                f"got {type(state).__name__}"
            )
        if state:
            raise ValueError(
                f"{type(self).__name__} keeps no state: expected an empty state, "
                f"got keys {sorted(map(str, state))}"
            )
        return None

    # ------------------------------------------------------------------ privacy accounting

    @property
    def accountable(self) -> bool:
        """Whether the rule adds noise whose privacy must be accounted (default: False).

        A rule that returns True also implements `dp_event` and sets `delta` (and,
        optionally, `budget`); the trainer then composes its events over rounds.

        Examples
        --------
        >>> from consensus import MajorityVote, NoisyArgmax
        >>> MajorityVote().accountable, NoisyArgmax(sigma=2.0).accountable
        (False, True)
        """
        return False

    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """The privacy event of one round for one record of a client's data.

        Only an `accountable` rule has one; the default raises.

        Parameters
        ----------
        n_classes : int
            Number of classes.
        n_labels : int
            Labels released per round (the size of the public pool).

        Returns
        -------
        object
            A ``dp_accounting`` event (or a stand-in with the same attributes).

        Raises
        ------
        NotImplementedError
            For a rule without noise (``accountable`` is False).

        Examples
        --------
        >>> from consensus import MajorityVote
        >>> MajorityVote().dp_event(n_classes=2, n_labels=10)
        Traceback (most recent call last):
        ...
        NotImplementedError: MajorityVote adds no noise: it has no privacy event to account
        """
        raise NotImplementedError(
            f"{type(self).__name__} adds no noise: it has no privacy event to account"
        )
