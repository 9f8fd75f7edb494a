"""What the MLflow and TensorBoard loggers share: the scalars of a round, rendered
parameters, argument checks and the warn-once failure policy (see :mod:`cotrain.tracking`)."""

from __future__ import annotations

import importlib.util
import math
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from cotrain.callbacks import Callback

if TYPE_CHECKING:  # pragma: no cover
    from cotrain.federation.loop import RoundLoop
    from cotrain.history import RoundRecord

__all__ = [
    "MAX_PARAM_LENGTH",
    "TrackingCallback",
    "TrackingWarning",
    "check_bool",
    "check_mapping",
    "check_optional_str",
    "owner_params",
    "render_param",
    "require_package",
    "round_metrics",
]

MAX_PARAM_LENGTH = 500
_MLFLOW_BATCH = 1000  # metrics per log_batch call (MLflow's limit)
_MLFLOW_PARAM_BATCH = 100  # params and tags per log_batch call (MLflow's limit)


class TrackingWarning(UserWarning):
    """A tracking backend failed; the logger stopped logging, the federation went on."""


def round_metrics(record: RoundRecord) -> dict[str, float]:
    """The numeric metrics of one round, as the loggers write them.

    Keys: ``coverage``, ``agreement``, ``changed`` (from round 2), ``bytes_up``,
    ``bytes_down``, ``time_s``, ``learner_time_s``; ``mean_accuracy``, ``std_accuracy``,
    ``consensus_accuracy``, ``pseudo_label_accuracy`` and ``epsilon`` when not None;
    ``client_<i>_accuracy`` per evaluated client; ``n_clients`` (asked), ``n_failed`` and
    ``n_timed_out``. Fields that are NaN (not measured, e.g. coverage in a baseline that
    has no consensus) are left out.

    Parameters
    ----------
    record : RoundRecord
        One round of a history.

    Returns
    -------
    dict of str to float

    Examples
    --------
    >>> from cotrain.history import RoundRecord
    >>> record = RoundRecord(round=2, clients=(0, 1, 2), failed={2: "boom"}, coverage=1.0,
    ...                      agreement=0.75, changed=3, bytes_up=94,
    ...                      client_accuracy={0: 0.9, 1: 0.8}, mean_accuracy=0.85)
    >>> metrics = round_metrics(record)
    >>> metrics["bytes_up"], metrics["client_1_accuracy"], metrics["n_failed"]
    (94.0, 0.8, 1.0)
    >>> "epsilon" in metrics
    False
    """
    metrics: dict[str, Any] = {
        "coverage": record.coverage,
        "agreement": record.agreement,
        "changed": record.changed,
        "bytes_up": record.bytes_up,
        "bytes_down": record.bytes_down,
        "time_s": record.time_s,
        "learner_time_s": record.learner_time_s,
        "mean_accuracy": record.mean_accuracy,
        "std_accuracy": record.std_accuracy,
        "consensus_accuracy": record.consensus_accuracy,
        "pseudo_label_accuracy": record.pseudo_label_accuracy,
        "epsilon": record.epsilon,
    }
    for client, accuracy in sorted(record.client_accuracy.items()):
        metrics[f"client_{client}_accuracy"] = accuracy
    metrics["n_clients"] = len(record.clients)
    metrics["n_failed"] = len(record.failed)
    metrics["n_timed_out"] = len(record.timed_out)
    out = {}
    for key, value in metrics.items():
        if value is None:
            continue
        value = float(value)
        if not math.isnan(value):
            out[key] = value
    return out


def render_param(value: Any, max_length: int = MAX_PARAM_LENGTH) -> str | None:
    """A parameter value as a short, stable string, or None when it cannot be shown.

    Scalars and strings as ``str``; estimators and containers as their ``repr`` on one
    line; objects whose ``repr`` is the default ``<... at 0x...>`` (it changes every run)
    as their qualified name; anything longer than ``max_length`` cut with ``...``.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> render_param(DecisionTreeClassifier(max_depth=3))
    'DecisionTreeClassifier(max_depth=3)'
    >>> render_param(object())
    'object'
    >>> render_param("x" * 600, max_length=10)
    'xxxxxxx...'
    """
    if value is None or isinstance(value, bool | int | float | str | np.generic):
        text = str(value)
    elif isinstance(value, os.PathLike):
        text = os.fspath(value)
        text = text.decode(errors="replace") if isinstance(text, bytes) else text
    else:
        try:
            text = repr(value)
        except Exception:  # a broken __repr__: leave the parameter out
            return None
        if " at 0x" in text:  # the default repr: an address, different in every run
            kind = value if callable(value) and hasattr(value, "__qualname__") else type(value)
            text = f"{getattr(kind, '__module__', '')}.{kind.__qualname__}".lstrip(".")
            text = text.removeprefix("builtins.")
    text = " ".join(text.split())  # multi-line reprs (lists of estimators) on one line
    if len(text) > max_length:
        text = text[: max_length - 3] + "..."
    return text


def owner_params(loop: RoundLoop) -> dict[str, str]:
    """``loop.owner.get_params(deep=False)`` rendered with :func:`render_param`.

    Empty when the owner has no ``get_params``. Left out: parameters that cannot be
    rendered, and ``callbacks`` (how the run is observed, not what it computes; it holds
    the loggers themselves).
    """
    get_params = getattr(loop.owner, "get_params", None)
    if not callable(get_params):
        return {}
    params = {}
    for key, value in sorted(get_params(deep=False).items()):
        if key == "callbacks":
            continue
        text = render_param(value)
        if text is not None:
            params[str(key)] = text
    return params


def check_bool(value: Any, name: str) -> None:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__}")


def check_optional_str(value: Any, name: str) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string or None, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} must not be empty")


def check_mapping(value: Any, name: str) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping of str to values, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str) or not key:
            raise TypeError(f"{name} keys must be non-empty strings, got {key!r}")


def require_package(module: str, extra: str, cls: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ImportError(f'{cls} needs {module}: pip install "cotrain[{extra}]"')


class TrackingCallback(Callback):
    """The failure policy shared by the loggers (see the module docstring)."""

    _defaults: tuple[tuple[str, Any], ...] = ()
    _runtime: tuple[str, ...] = ()  # open handles: dropped from copies and pickles

    def __init__(self, strict: bool) -> None:
        check_bool(strict, "strict")
        self.strict = strict
        self.error_: BaseException | None = None
        self._active = False

    def _guard(self, action: str, fn: Callable[..., None], *args: Any) -> bool:
        """Run ``fn``; on failure warn once, stop logging for this fit (or raise if strict)."""
        try:
            fn(*args)
        except Exception as err:
            if self.strict:
                raise
            self._active = False
            if self.error_ is None:
                self.error_ = err
                warnings.warn(
                    f"{type(self).__name__}: {action} failed ({type(err).__name__}: {err}); "
                    "tracking is off for the rest of this fit, the federation goes on",
                    TrackingWarning,
                    stacklevel=4,
                )
            self._after_failure()
            return False
        return True

    def _after_failure(self) -> None:
        """Release what the failed fit held, without raising."""

    def on_fit_start(self, loop: RoundLoop) -> None:
        self._after_failure()  # a previous fit that ended with an exception
        self.error_ = None
        self._active = True
        self._guard("opening the log", self._open, loop)

    def on_round_end(self, loop: RoundLoop, record: RoundRecord) -> None:
        if self._active:
            self._guard(f"logging round {record.round}", self._log_records, [record])

    def on_fit_end(self, loop: RoundLoop) -> None:
        if self._active:
            self._guard("closing the log", self._close, loop)
        else:
            self._after_failure()
        self._active = False

    def _open(self, loop: RoundLoop) -> None:
        raise NotImplementedError

    def _log_records(self, records: Iterable[RoundRecord]) -> None:
        raise NotImplementedError

    def _close(self, loop: RoundLoop) -> None:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in self._runtime:
            state[key] = None
        state["_active"] = False
        return state

    def __repr__(self) -> str:
        args = [
            f"{name}={getattr(self, name)!r}"
            for name, default in self._defaults
            if getattr(self, name) != default
        ]
        return f"{type(self).__name__}({', '.join(args)})"
