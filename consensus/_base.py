"""The `Consensus` base class: a callable holding the parameters of one consensus rule."""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Consensus"]


def _short_repr(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"<array shape={value.shape} dtype={value.dtype}>"
    return repr(value)


class Consensus(ABC):
    """Base class of consensus rules: turn many clients' labels into one pseudo-label.

    A consensus object is a thin callable wrapper around one of the pure functions of
    :mod:`consensus`. It follows scikit-learn's parameter conventions: ``__init__`` stores its
    arguments untouched, they are validated when the object is called, and `get_params` /
    `set_params` work (so ``sklearn.base.clone`` does too).

    Subclasses implement ``__call__`` and set the class attribute ``output``.

    Attributes
    ----------
    output : {"hard", "soft"}
        What ``__call__`` returns for hard-vote input: ``"hard"`` means pseudo-labels of shape
        ``(n,)`` with -1 where the consensus abstains; ``"soft"`` means soft targets of shape
        ``(n, n_classes)`` with a NaN row where nobody voted.

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

    @classmethod
    def _param_names(cls) -> list[str]:
        init = cls.__init__
        if init is object.__init__:
            return []
        params = inspect.signature(init).parameters.values()
        return sorted(
            p.name
            for p in params
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Parameters of this consensus rule, as passed to ``__init__``.

        Parameters
        ----------
        deep : bool, default=True
            Accepted for scikit-learn compatibility; consensus parameters hold no estimators.

        Returns
        -------
        dict

        Examples
        --------
        >>> from consensus import QualifiedMajority
        >>> QualifiedMajority(quorum=0.8).get_params()
        {'quorum': 0.8}
        """
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Self:
        """Set parameters (validated when the object is next called) and return ``self``.

        Examples
        --------
        >>> from consensus import EntropyWeighted
        >>> EntropyWeighted().set_params(k=0.1)
        EntropyWeighted(k=0.1)
        """
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(
                    f"invalid parameter {name!r} for {type(self).__name__}; "
                    f"valid parameters are {valid}"
                )
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={_short_repr(v)}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"
