"""The trainer's parameters, declared once: type, allowed values, default, and their checks.

:data:`PARAMS` is one table of :class:`Param` entries, one per parameter of
:class:`cotrain.FederatedCoTrainer` (the Flower strategy and the baselines share the names
they have in common); :data:`RULES` are the constraints between parameters. Everything
that validates parameters calls :func:`check_params`, which checks the keys it is given
against the table with one convention:

- ``TypeError`` for a value of the wrong type,
- ``ValueError`` for a value of the right type outside what is allowed,

each naming the parameter, what was expected and what was given.

Examples
--------
>>> from cotrain.params import PARAMS, check_params
>>> PARAMS["rounds"].default
20
>>> PARAMS["rounds"].describe()
'an integer >= 1'
>>> check_params({"rounds": 5, "share": "soft"})
>>> check_params({"rounds": 0})
Traceback (most recent call last):
...
ValueError: rounds must be >= 1, got 0
>>> check_params({"participation": "all"})
Traceback (most recent call last):
...
TypeError: participation must be a number in (0, 1], got str 'all'
>>> check_params({"min_clients": 4}, n_clients=3)
Traceback (most recent call last):
...
ValueError: min_clients=4 exceeds the number of clients (3)
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Final, Literal

import numpy as np

from consensus import Consensus
from cotrain.callbacks import Callback
from cotrain.clustering import AgreementClustering
from cotrain.trust import MODEL_TRUSTS

__all__ = [
    "CALLBACK_HOOKS",
    "PARAMS",
    "REQUIRED",
    "RULES",
    "Interval",
    "Param",
    "Rule",
    "check_classifier",
    "check_params",
    "did_you_mean",
    "param_defaults",
]


class _Required:
    """Marker of a parameter without a default (it must be given)."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a parameter that has none.
REQUIRED: Final = _Required()

#: The hooks that make an object a round-loop callback (see :mod:`cotrain.callbacks`).
CALLBACK_HOOKS: Final = ("on_fit_start", "on_round_start", "on_round_end", "on_fit_end")

_TYPE_WORDS: dict[type, str] = {
    Integral: "an integer",
    Real: "a number",
    str: "a str",
    list: "a list",
    tuple: "a tuple",
    np.random.SeedSequence: "a numpy.random.SeedSequence",
    Consensus: "a consensus.Consensus",
    Callback: "a cotrain.callbacks.Callback",
    AgreementClustering: "a cotrain.clustering.AgreementClustering",
    os.PathLike: "an os.PathLike",
}


def _words(items: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _given(value: Any) -> str:
    """What was given, for messages: the type, and the value when it is short."""
    if isinstance(value, str | bytes | bool | Integral | Real | np.generic):
        return f"{type(value).__name__} {value!r}"
    return type(value).__name__


@dataclass(frozen=True)
class Interval:
    """The numbers a numeric parameter may take.

    Parameters
    ----------
    low, high : float, optional
        Bounds (None: unbounded on that side).
    closed : {"both", "left", "right", "neither"}, default="both"
        Which bounds belong to the interval.

    Examples
    --------
    >>> Interval(0, 1, closed="right")
    Interval(low=0, high=1, closed='right')
    >>> str(Interval(0, 1, closed="right")), str(Interval(1)), str(Interval(0, closed="neither"))
    ('in (0, 1]', '>= 1', '> 0')
    >>> Interval(1, 16).violation(17)
    '<= 16'
    >>> Interval(1, 16).violation(3) is None
    True
    """

    low: float | None = None
    high: float | None = None
    closed: Literal["both", "left", "right", "neither"] = "both"

    @property
    def _low_closed(self) -> bool:
        return self.closed in ("both", "left")

    @property
    def _high_closed(self) -> bool:
        return self.closed in ("both", "right")

    def _low_text(self) -> str:
        return f"{'>=' if self._low_closed else '>'} {self.low}"

    def _high_text(self) -> str:
        return f"{'<=' if self._high_closed else '<'} {self.high}"

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            left, right = "[" if self._low_closed else "(", "]" if self._high_closed else ")"
            return f"in {left}{self.low}, {self.high}{right}"
        if self.low is not None:
            return self._low_text()
        if self.high is not None:
            return self._high_text()
        return "any number"

    def violation(self, value: float) -> str | None:
        """The bound that ``value`` breaks (e.g. ``">= 1"``), or None if it is inside.

        NaN breaks every bound.
        """
        if self.low is not None and not (
            value >= self.low if self._low_closed else value > self.low
        ):
            return self._low_text()
        if self.high is not None and not (
            value <= self.high if self._high_closed else value < self.high
        ):
            return self._high_text()
        return None


@dataclass(frozen=True)
class Param:
    """What one parameter accepts, and its default.

    A value passes when it is None and ``none`` is set, or when it is an instance of one of
    ``types`` (``bool`` counts as a number only where ``bool`` is listed) or has every
    method in ``methods``. A ``str`` must then be one of ``options`` (when given), a number
    lie in ``interval`` and differ from every value in ``exclude``, and every item of a
    list or tuple satisfy ``items``. A parameter with neither ``types``, ``methods`` nor
    ``options`` is not checked here (``checked_by`` says where it is).

    Parameters
    ----------
    default : object, default=REQUIRED
        The trainer's default (:data:`REQUIRED` for a parameter without one).
    types : tuple of type, default=()
        Accepted types.
    none : bool, default=False
        Whether None is accepted.
    options : tuple of str, default=()
        The strings accepted (implies ``str`` in ``types``).
    interval : Interval, optional
        The numbers accepted.
    exclude : tuple, default=()
        Values of an accepted type that are nevertheless refused (``n_jobs=0``).
    methods : tuple of str, default=()
        Duck typing: an object with all these methods is accepted whatever its type.
    items : Param, optional
        What each item of a list or tuple value must be.
    expected : str, optional
        The wording of what is accepted, replacing the generated :meth:`describe`.
    checked_by : str, optional
        For a parameter not checked here: what checks it.

    Examples
    --------
    >>> p = Param(None, types=(Integral,), none=True, interval=Interval(1, 16))
    >>> p.describe()
    'None or an integer in [1, 16]'
    >>> p.check("soft_bits", 8)
    >>> p.check("soft_bits", 2.5)
    Traceback (most recent call last):
    ...
    TypeError: soft_bits must be None or an integer in [1, 16], got float 2.5
    """

    default: Any = REQUIRED
    types: tuple[type, ...] = ()
    none: bool = False
    options: tuple[str, ...] = ()
    interval: Interval | None = None
    exclude: tuple[Any, ...] = ()
    methods: tuple[str, ...] = ()
    items: Param | None = None
    expected: str | None = None
    checked_by: str | None = None

    @property
    def checked(self) -> bool:
        """Whether :meth:`check` constrains the value at all."""
        return bool(self.types or self.methods or self.options)

    def _types(self) -> tuple[type, ...]:
        return (*self.types, str) if self.options and str not in self.types else self.types

    def describe(self) -> str:
        """What the parameter accepts, in words (as error messages say it)."""
        if self.expected is not None:
            return self.expected
        if not self.checked:
            return f"checked by {self.checked_by}" if self.checked_by else "anything"
        parts = ["None"] if self.none else []
        if self.options:
            parts += [repr(o) for o in self.options]
        for t in self.types:
            if t is str and self.options:
                continue
            word = _TYPE_WORDS.get(t, f"a {t.__module__}.{t.__qualname__}")
            if issubclass(t, Real):
                if self.exclude:
                    word += f" other than {_words([repr(v) for v in self.exclude])}"
                if self.interval is not None:
                    word += f" {self.interval}"
            parts.append(word)
        if self.items is not None:
            parts = [p for p in parts if p not in ("a list", "a tuple")]
            parts.append(f"a list or tuple of: {self.items.describe()}")
        if self.methods:
            names = [f"{m}()" for m in self.methods]
            noun = "method" if len(names) == 1 else "methods"
            parts.append(f"an object with {'a ' if len(names) == 1 else ''}{_words(names)} {noun}")
        return _words(parts)

    def _type_ok(self, value: Any) -> bool:
        types = self._types()
        if isinstance(value, bool | np.bool_) and bool not in types:
            return False
        if types and isinstance(value, types):
            return True
        return bool(self.methods) and all(callable(getattr(value, m, None)) for m in self.methods)

    def check(self, name: str, value: Any) -> None:
        """Raise ``TypeError`` / ``ValueError`` naming ``name`` unless ``value`` passes."""
        if value is None and self.none:
            return
        if not self.checked:
            return
        if not self._type_ok(value):
            raise TypeError(f"{name} must be {self.describe()}, got {_given(value)}")
        if isinstance(value, str) and self.options and value not in self.options:
            hint = did_you_mean(value, self.options)
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}{hint}")
        if isinstance(value, Real) and not isinstance(value, bool):
            if any(value == v for v in self.exclude):
                raise ValueError(f"{name} must be {self.describe()}, got {value!r}")
            bound = None if self.interval is None else self.interval.violation(value)
            if bound is not None:
                raise ValueError(f"{name} must be {bound}, got {value!r}")
        if self.items is not None and isinstance(value, list | tuple):
            for i, item in enumerate(value):
                self.items.check(f"{name}[{i}]", item)


#: Every parameter of :class:`cotrain.FederatedCoTrainer`, with the trainer's defaults.
PARAMS: Final[dict[str, Param]] = {
    "estimators": Param(checked_by="cotrain._validation.check_estimators"),
    "consensus": Param(
        "auto",
        types=(str, Consensus),
        expected="a name (str) or a Consensus instance",
        checked_by="consensus.get_consensus (names and the rule's own parameters; 'auto': "
        "cotrain.federation.setup.auto_consensus)",
    ),
    "share": Param("hard", options=("hard", "soft")),
    "soft_dtype": Param("float32", options=("float32", "float16")),
    "encoding": Param("packed", options=("packed", "delta")),
    "soft_bits": Param(None, types=(Integral,), none=True, interval=Interval(1, 16)),
    "trust": Param(
        "auto",
        types=(Real, *MODEL_TRUSTS),
        none=True,
        options=("auto",),
        interval=Interval(0, 1),
        methods=("choose",),
        expected="'auto', None, a weight in [0, 1], a cotrain.trust.PseudoLabelTrust, "
        + ", ".join(f"a {t.__module__}.{t.__name__}" for t in MODEL_TRUSTS),
    ),
    "clustering": Param(
        None,
        types=(AgreementClustering,),
        none=True,
        options=("agreement",),
        expected="None, 'agreement' or a cotrain.clustering.AgreementClustering",
    ),
    "rounds": Param(20, types=(Integral,), interval=Interval(1)),
    "participation": Param(1.0, types=(Real,), interval=Interval(0, 1, closed="right")),
    "privacy": Param(
        None,
        none=True,
        methods=("randomize", "dp_event"),
        expected=(
            "a label-privacy mechanism from cotrain.privacy (with randomize() and dp_event()) "
            "or None"
        ),
    ),
    "reproducible_noise": Param(False, types=(bool,)),
    "early_stopping": Param(None, types=(Integral,), none=True, interval=Interval(1)),
    "on_client_error": Param("raise", options=("raise", "skip")),
    "min_clients": Param(1, types=(Integral,), interval=Interval(1)),
    "classes": Param(None, checked_by="cotrain._validation.resolve_classes"),
    "n_jobs": Param(None, types=(Integral,), none=True, exclude=(0,)),
    "runtime": Param(None, none=True, options=("sequential", "joblib", "ray"), methods=("map",)),
    "round_timeout": Param(None, types=(Real,), none=True, interval=Interval(0, closed="neither")),
    "checkpoint_dir": Param(
        None,
        types=(str, os.PathLike),
        none=True,
        expected="a path (str or os.PathLike) or None",
    ),
    "callbacks": Param(
        None,
        types=(list, tuple),
        none=True,
        expected="None or a list or tuple of callbacks (see cotrain.callbacks)",
        items=Param(
            types=(Callback,),
            methods=CALLBACK_HOOKS,
            expected=(
                "a cotrain.callbacks.Callback or an object with on_fit_start(), "
                "on_round_start(), on_round_end() and on_fit_end() methods"
            ),
        ),
    ),
    "random_state": Param(None, types=(Integral, np.random.SeedSequence), none=True),
    "verbose": Param(0, types=(Integral,), interval=Interval(0)),
}


# --------------------------------------------------------------------------------------------
# constraints between parameters
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """A constraint between parameters, checked when any of ``params`` is given.

    Parameters
    ----------
    params : tuple of str
        The parameters it relates; those not given take their :data:`PARAMS` default.
    check : callable
        ``check(values, n_clients)`` raises ``ValueError`` (or ``TypeError``) when the
        values break the rule; ``values`` holds every name in ``params``.
    doc : str
        The rule in words.

    Examples
    --------
    >>> [rule.doc for rule in RULES]  # doctest: +NORMALIZE_WHITESPACE
    ['min_clients is at most the number of clients',
     "a privacy mechanism randomises the kind of labels share sends ('hard' or 'soft')"]
    """

    params: tuple[str, ...]
    check: Callable[[Mapping[str, Any], int | None], None]
    doc: str


def _min_clients_within_federation(values: Mapping[str, Any], n_clients: int | None) -> None:
    if n_clients is not None and values["min_clients"] > n_clients:
        raise ValueError(
            f"min_clients={values['min_clients']} exceeds the number of clients ({n_clients})"
        )


def _privacy_matches_share(values: Mapping[str, Any], n_clients: int | None) -> None:
    privacy, share = values["privacy"], values["share"]
    if privacy is None:
        return
    from cotrain.privacy.mechanisms.base import as_mechanism

    shares = tuple(as_mechanism(privacy).shares)  # the kinds of labels it can release
    if share not in shares:
        raise ValueError(
            f"privacy mechanism {type(privacy).__name__} randomises {' or '.join(shares)} "
            f"labels but share={share!r}"
        )


#: Constraints between parameters (each checked after the parameters themselves).
RULES: Final[tuple[Rule, ...]] = (
    Rule(
        ("min_clients",),
        _min_clients_within_federation,
        "min_clients is at most the number of clients",
    ),
    Rule(
        ("privacy", "share"),
        _privacy_matches_share,
        "a privacy mechanism randomises the kind of labels share sends ('hard' or 'soft')",
    ),
)


def param_defaults() -> dict[str, Any]:
    """The default of every parameter that has one, from :data:`PARAMS`.

    Examples
    --------
    >>> param_defaults()["rounds"], "estimators" in param_defaults()
    (20, False)
    """
    return {name: p.default for name, p in PARAMS.items() if p.default is not REQUIRED}


def check_params(params: Mapping[str, Any], n_clients: int | None = None) -> None:
    """Validate parameters against :data:`PARAMS` and :data:`RULES` (scikit-learn: at fit).

    Only the keys given are checked; keys the table does not know (a subclass's own
    parameters) are left to their owner. A rule between parameters is checked when any of
    its parameters is given, the others taking their defaults.

    Parameters
    ----------
    params : mapping
        Parameter name to value, e.g. ``trainer.get_params(deep=False)``.
    n_clients : int, optional
        Size of the federation, for rules that need it (``min_clients``); None skips them.

    Raises
    ------
    TypeError
        A value of the wrong type (the message names the parameter, what it accepts, and
        what was given; a bad item of a list is named by its position, ``callbacks[1]``).
    ValueError
        A value of the right type that is not allowed, or a broken rule.

    Examples
    --------
    >>> check_params({"share": "soft", "soft_bits": 8, "min_clients": 2}, n_clients=3)
    >>> check_params({"share": "logits"})
    Traceback (most recent call last):
    ...
    ValueError: share must be 'hard' or 'soft', got 'logits'
    >>> check_params({"callbacks": [len]})
    Traceback (most recent call last):
    ...
    TypeError: callbacks[0] must be a cotrain.callbacks.Callback or an object with \
on_fit_start(), on_round_start(), on_round_end() and on_fit_end() methods, got \
builtin_function_or_method
    """
    for name, spec in PARAMS.items():
        if name in params:
            spec.check(name, params[name])
    for rule in RULES:
        if any(name in params for name in rule.params):
            values = {name: params.get(name, PARAMS[name].default) for name in rule.params}
            rule.check(values, n_clients)


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the choice closest to a mistyped name, else ``""``.

    The one place every lookup by name suggests a correction: consensus names, learners,
    methods, datasets, partitions, ``cotrain`` subcommands and the options of
    :data:`PARAMS`. The match ignores case (``"rf"`` finds ``"RF"``) and uses
    :func:`difflib.get_close_matches` (similarity of at least 0.6); an exact match of
    another case is suggested first.

    Parameters
    ----------
    name : str
        The name as given.
    choices : iterable of str
        The valid names.

    Returns
    -------
    str
        The text to append to an "unknown name" message.

    Examples
    --------
    >>> did_you_mean("majorty", ["majority", "mean", "qualified"])
    "; did you mean 'majority'?"
    >>> did_you_mean("xgboost", ["DT", "RF", "XGBoost"])
    "; did you mean 'XGBoost'?"
    >>> did_you_mean("zzz", ["majority", "mean"])
    ''
    """
    options = [str(c) for c in choices]
    folded = {c.lower(): c for c in reversed(options)}
    text = str(name).strip().lower()
    match = folded.get(text) or next(iter(difflib.get_close_matches(text, folded, n=1)), None)
    return "" if match is None else f"; did you mean {folded.get(match, match)!r}?"


def check_classifier(estimator: Any, what: str) -> None:
    """Refuse an estimator that is not a classifier, naming what it was given as.

    A scikit-learn estimator whose tags say it is a regressor (or another kind) is
    refused; an object without tags passes if it has ``fit`` and ``predict`` (any
    scikit-learn-style classifier may take part).

    Parameters
    ----------
    estimator : object
        What was given.
    what : str
        How the message names it, e.g. ``"distill(estimator)"``.

    Raises
    ------
    TypeError
        Not a classifier, or without ``fit``/``predict``.

    Examples
    --------
    >>> from sklearn.linear_model import LinearRegression, LogisticRegression
    >>> check_classifier(LogisticRegression(), "distill(estimator)")
    >>> check_classifier(LinearRegression(), "distill(estimator)")
    Traceback (most recent call last):
    ...
    TypeError: distill(estimator) must be a classifier (it is fitted on the consensus class \
labels), got LinearRegression, a regressor
    """
    from sklearn.utils import get_tags

    name = type(estimator).__name__
    for method in ("fit", "predict"):
        if not callable(getattr(estimator, method, None)):
            raise TypeError(
                f"{what} must be a scikit-learn-style classifier, got {name} (no {method}())"
            )
    try:
        kind = get_tags(estimator).estimator_type
    except (AttributeError, TypeError):
        kind = None
    if kind not in (None, "classifier"):
        raise TypeError(
            f"{what} must be a classifier (it is fitted on the consensus class labels), "
            f"got {name}, a {kind}"
        )
