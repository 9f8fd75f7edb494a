"""Certainty-weighted consensus (FedAUX eq. 3): each client's vote weighted by s_i(x)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._base import Consensus
from ._validation import check_client_ids, check_inputs, check_nonnegative_finite
from .hard import plurality_winners
from .soft import weighted_mean

__all__ = ["CertaintyWeighted", "certainty_weighted"]


def certainty_weighted(
    labels: ArrayLike, n_classes: int, weights: ArrayLike
) -> NDArray[np.int64] | NDArray[np.float64]:
    """FedAUX certainty-weighted consensus: ``Σ_i s_i(x) f_i(x) / Σ_i s_i(x)``.

    Parameters
    ----------
    labels : array-like
        Hard votes ``(m, n)`` (-1 = did not vote) or probabilities ``(m, n, n_classes)``
        (all-NaN row = did not vote).
    n_classes : int
        Number of classes C.
    weights : array-like of shape (m,) or (m, n)
        Required. Non-negative certainty scores ``s_i(x)`` of each client, e.g. FedAUX's
        ``sigmoid(<w_i, h(x)>) + 1e-8`` ("x looks like client i's data").

    Returns
    -------
    ndarray
        The output follows the input. Hard votes: ``(n,)`` int64 weighted-vote labels (ties to
        the smallest class code, -1 where nobody voted). Probabilities: ``(n, n_classes)``
        float64 weighted mean of probabilities (NaN row where nobody voted).

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import certainty_weighted
    >>> votes = np.array([[0, 0],
    ...                   [1, 1],
    ...                   [1, 0]])
    >>> scores = np.array([[0.9, 0.9],
    ...                    [0.5, 0.2],
    ...                    [0.5, 0.2]])
    >>> certainty_weighted(votes, n_classes=2, weights=scores)
    array([1, 0])
    >>> probs = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])
    >>> certainty_weighted(probs, n_classes=2, weights=[3.0, 1.0])
    array([[0.75, 0.25]])
    """
    if weights is None:
        raise ValueError(
            "certainty_weighted needs weights: the clients' certainty scores s_i(x), of shape "
            "(n_clients,) or (n_clients, n_examples)"
        )
    checked = check_inputs(labels, n_classes, weights)
    if checked.kind == "hard":
        return plurality_winners(checked.values, checked.n_classes, checked.weights, None)
    return weighted_mean(checked)


class CertaintyWeighted(Consensus):
    """Certainty-weighted consensus (FedAUX); see `certainty_weighted`.

    Parameters
    ----------
    scores : array-like of shape (n_clients_total, n_public) or (n_clients_total,), optional
        Certainty scores of every client of the federation (row ``i`` = client id ``i``),
        per public example or one per client. When None, weights must be passed at call time.
    scorer_epsilon, scorer_delta : float, optional
        The (ε, δ) each client spent on its scores, when they come from its private data
        (``cotrain.privacy.fedaux_weights(epsilon=..., delta=...)``: a DP certainty scorer
        per client, record-level, released to the server once before the run). Given, the
        trainer's privacy ledger adds them to every client's record-level ε against the
        server by basic composition (``ε + scorer_epsilon`` at ``δ + scorer_delta``).

    Attributes
    ----------
    output : "hard"
        The output follows the input: hard votes (the trainer's default sharing) give hard
        labels ``(n,)``; probabilities give soft targets ``(n, n_classes)``.

    Notes
    -----
    The trainer calls ``weights_for(client_ids, n_public)`` each round, which returns
    ``scores[client_ids]``, and passes the result as ``weights``. Called directly without
    ``weights``, the object uses ``scores`` as they are, which requires one row per row of
    ``labels``.

    Examples
    --------
    >>> import numpy as np
    >>> from consensus import CertaintyWeighted
    >>> rule = CertaintyWeighted(scores=np.array([0.1, 0.9, 0.3]))
    >>> w = rule.weights_for([2, 0], n_public=4)
    >>> w
    array([0.3, 0.1])
    >>> rule(np.array([[1, 1, 0, 0], [0, 1, 0, 1]]), n_classes=2, weights=w)
    array([1, 1, 0, 0])
    """

    output: ClassVar[Literal["hard", "soft"]] = "hard"

    #: the scores' privacy is record-level and the server receives them
    unit = "record"
    adversary = "server"
    budget = None
    #: the FedAUX scorer's bound (output perturbation, sensitivity 2/(λN)) is proved for
    #: replace-one neighbours only: a run with these scores is reported under replace-one
    neighbors = "replace_one"

    def __init__(
        self,
        scores: ArrayLike | None = None,
        *,
        scorer_epsilon: float | None = None,
        scorer_delta: float | None = None,
    ) -> None:
        self.scores = scores
        self.scorer_epsilon = scorer_epsilon
        self.scorer_delta = scorer_delta

    @property
    def accountable(self) -> bool:
        """True when the scores' privacy cost is given (``scorer_epsilon``).

        Examples
        --------
        >>> CertaintyWeighted([1.0, 2.0]).accountable
        False
        >>> CertaintyWeighted([1.0, 2.0], scorer_epsilon=0.1, scorer_delta=1e-5).accountable
        True
        """
        return self.one_off_privacy() is not None

    def one_off_privacy(self) -> tuple[float, float] | None:
        """(ε, δ) of the one release of each client's scores, or None."""
        eps, delta = self.scorer_epsilon, self.scorer_delta
        if eps is None and delta is None:
            return None
        if eps is None or not (float(eps) >= 0 and np.isfinite(float(eps))):
            raise ValueError(f"scorer_epsilon must be a finite number >= 0, got {eps!r}")
        if delta is None or not 0.0 <= float(delta) < 1.0:
            raise ValueError(f"scorer_delta must be a number in [0, 1), got {delta!r}")
        return float(eps), float(delta)

    #: No per-round release: the ledger reports at the other mechanisms' δ.
    delta: None = None

    def dp_event(self, n_classes: int, n_labels: int) -> Any:
        """None: nothing is released per round beyond the (already private) scores, whose
        one-off cost is :meth:`one_off_privacy`. Without ``scorer_epsilon`` the rule adds no
        noise and, like every noiseless rule, raises ``NotImplementedError``."""
        if not self.accountable:
            return super().dp_event(n_classes, n_labels)
        return None

    def _checked_scores(self) -> NDArray[np.float64]:
        if self.scores is None:  # the callers check first: a rule without scores has none
            raise ValueError("CertaintyWeighted has no scores (scores=None)")
        scores = check_nonnegative_finite(self.scores, "scores")
        if scores.ndim not in (1, 2):
            raise ValueError(
                "CertaintyWeighted scores must have shape (n_clients_total,) or "
                f"(n_clients_total, n_public); got shape {scores.shape}"
            )
        return scores

    def weights_for(self, client_ids: ArrayLike, n_public: int) -> NDArray[np.float64] | None:
        """Return ``scores[client_ids]`` (None when ``scores`` is None).

        Parameters
        ----------
        client_ids : array-like of int, shape (m,)
            Ids of the clients whose labels are in the rows of ``labels``, in row order.
        n_public : int
            Size of the public pool; must match the second dimension of 2-D ``scores``.

        Returns
        -------
        ndarray of shape (m,) or (m, n_public), or None

        Examples
        --------
        >>> import numpy as np
        >>> from consensus import CertaintyWeighted
        >>> CertaintyWeighted(np.arange(6.0).reshape(3, 2)).weights_for([1, 2], n_public=2)
        array([[2., 3.],
               [4., 5.]])
        """
        if self.scores is None:
            return None
        scores = self._checked_scores()
        if scores.ndim == 2 and scores.shape[1] != n_public:
            raise ValueError(
                f"CertaintyWeighted scores cover {scores.shape[1]} public examples but the public "
                f"pool has n_public={n_public} examples"
            )
        ids = check_client_ids(client_ids, n_clients=scores.shape[0])
        return scores[ids]

    def __call__(
        self, labels: ArrayLike, *, n_classes: int, weights: ArrayLike | None = None
    ) -> NDArray[Any]:
        if weights is None:
            if self.scores is None:
                raise ValueError(
                    "CertaintyWeighted needs certainty scores: construct it with "
                    "scores=(n_clients,) or (n_clients, n_public) array, or pass weights= "
                    "when calling it"
                )
            weights = self._scores_for_rows(labels)
        return certainty_weighted(labels, n_classes, weights)

    def _scores_for_rows(self, labels: ArrayLike) -> NDArray[np.float64]:
        """The scores as the weights of a call without ``weights``: one row per vote row."""
        weights = self._checked_scores()
        m = np.shape(labels)[0] if np.ndim(labels) else 0
        if weights.shape[0] != m:
            raise ValueError(
                f"{type(self).__name__} has scores for {weights.shape[0]} clients but labels "
                f"has {m} rows; pass weights=rule.weights_for(client_ids, n_public)"
            )
        return weights
