"""`ParamsMixin`: scikit-learn's ``get_params`` / ``set_params`` without scikit-learn.

Consensus rules (:class:`consensus.Consensus`) and the label-privacy mechanisms of
``cotrain.privacy`` share it, so that ``sklearn.base.clone(obj, safe=False)``, ``get_params``,
``set_params`` and ``repr`` behave the same for all of them. It lives here, in the package
that depends on nothing but numpy, because ``cotrain`` may import ``consensus`` but never the
reverse.
"""

from __future__ import annotations

import inspect
from typing import Any, Self

import numpy as np

__all__ = ["ParamsMixin"]


def _short_repr(value: Any) -> str:
    """``repr`` of a parameter value, with arrays summarised by shape and dtype."""
    if isinstance(value, np.ndarray):
        return f"<array shape={value.shape} dtype={value.dtype}>"
    return repr(value)


class ParamsMixin:
    """Parameters as passed to ``__init__``, read and set the scikit-learn way.

    The parameters of a class are the named arguments of its ``__init__`` (not ``self``,
    ``*args`` or ``**kwargs``), which ``__init__`` must store untouched under the same
    names. Then:

    - ``get_params(deep=False)`` returns them; ``get_params()`` (``deep=True``) also lists
      ``name__sub`` entries for every parameter value that itself has ``get_params``
      (e.g. a ``base`` consensus rule);
    - ``set_params(**params)`` sets them (``name__sub`` sets the nested object's), and
      raises ``ValueError`` naming an unknown parameter and the valid ones;
    - ``sklearn.base.clone(obj, safe=False)`` builds a fresh, unfitted copy;
    - ``repr`` shows them, arrays summarised by shape and dtype.

    Examples
    --------
    >>> class Noise(ParamsMixin):
    ...     def __init__(self, sigma=1.0, delta=1e-5):
    ...         self.sigma = sigma
    ...         self.delta = delta
    >>> Noise(sigma=2.0)
    Noise(delta=1e-05, sigma=2.0)
    >>> Noise().set_params(sigma=0.5).get_params()
    {'delta': 1e-05, 'sigma': 0.5}
    >>> Noise().set_params(scale=3)
    Traceback (most recent call last):
    ...
    ValueError: invalid parameter 'scale' for Noise; valid parameters are ['delta', 'sigma']
    """

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """Sorted names of the ``__init__`` arguments (scikit-learn's convention)."""
        init = cls.__init__
        if init is object.__init__:
            return []
        params = inspect.signature(init).parameters.values()
        return sorted(
            p.name
            for p in params
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )

    # the name this code base used before the mixin; kept for callers and subclasses
    _param_names = _get_param_names

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Parameters of this object, as passed to ``__init__``.

        Parameters
        ----------
        deep : bool, default=True
            Also list the parameters of parameter values that have ``get_params`` themselves,
            as ``name__sub``.

        Returns
        -------
        dict
            Parameter name to value.

        Examples
        --------
        >>> from consensus import QualifiedMajority, ReputationVote
        >>> QualifiedMajority(quorum=0.8).get_params()
        {'quorum': 0.8}
        >>> ReputationVote(base=QualifiedMajority(quorum=0.8)).get_params()["base__quorum"]
        0.8
        """
        out: dict[str, Any] = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            out[name] = value
            nested = getattr(value, "get_params", None)
            if deep and not isinstance(value, type) and callable(nested):
                out.update((f"{name}__{k}", v) for k, v in nested(deep=True).items())
        return out

    def set_params(self, **params: Any) -> Self:
        """Set parameters (validated when next used) and return ``self``.

        Parameters
        ----------
        **params
            New values by parameter name; ``name__sub`` sets parameter ``sub`` of the object
            held in parameter ``name``.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            For a name that is not a parameter (the message lists the valid ones).

        Examples
        --------
        >>> from consensus import EntropyWeighted, QualifiedMajority, ReputationVote
        >>> EntropyWeighted().set_params(k=0.1)
        EntropyWeighted(k=0.1)
        >>> ReputationVote(base=QualifiedMajority()).set_params(base__quorum=0.6).base
        QualifiedMajority(quorum=0.6)
        """
        valid = self._get_param_names()
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, sep, sub = key.partition("__")
            if name not in valid:
                raise ValueError(
                    f"invalid parameter {name!r} for {type(self).__name__}; "
                    f"valid parameters are {valid}"
                )
            if sep:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            inner = getattr(self, name)
            if not callable(getattr(inner, "set_params", None)):
                key = f"{name}__{next(iter(sub_params))}"
                raise ValueError(
                    f"invalid parameter {key!r} for {type(self).__name__}: "
                    f"{name}={_short_repr(inner)} has no parameters"
                )
            inner.set_params(**sub_params)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={_short_repr(v)}" for k, v in self.get_params(deep=False).items())
        return f"{type(self).__name__}({args})"
