"""dp-accounting privacy events as JSON types, and back: no pickle on the wire or on disk.

A DP-trained site reports its round's event in its reply (:mod:`cotrain.wire.envelope`),
and the ledgers keep the events they composed in their checkpoints
(:mod:`cotrain.privacy.ledgers`): both write it with :func:`event_to_json` and read it with
:func:`event_from_json`, which builds only dp_accounting's own event classes.

dp_accounting (and attrs, which it builds on) is imported only when an event is converted.
"""

from __future__ import annotations

from typing import Any

__all__ = ["event_from_json", "event_to_json"]


def event_to_json(event: Any) -> dict[str, Any]:
    """A dp-accounting event as JSON types (for checkpoints: no pickle).

    Examples
    --------
    >>> import dp_accounting as dp
    >>> e = dp.SelfComposedDpEvent(dp.PoissonSampledDpEvent(0.01, dp.GaussianDpEvent(1.0)), 5)
    >>> event_from_json(event_to_json(e)) == e
    True
    """
    import attr

    if not attr.has(type(event)) or not type(event).__module__.startswith("dp_accounting"):
        raise TypeError(f"only dp_accounting events can be stored, got {type(event).__name__}")
    out: dict[str, Any] = {"type": type(event).__name__}
    for f in attr.fields(type(event)):
        value = getattr(event, f.name)
        if isinstance(value, list | tuple):
            out[f.name] = [event_to_json(v) for v in value]
        elif attr.has(type(value)):
            out[f.name] = event_to_json(value)
        else:
            out[f.name] = value
    return out


def event_from_json(data: dict[str, Any]) -> Any:
    """The inverse of :func:`event_to_json` (only dp_accounting's own event classes)."""
    import dp_accounting

    name = data.get("type")
    cls = getattr(dp_accounting, str(name), None)
    if cls is None or not (isinstance(cls, type) and issubclass(cls, dp_accounting.DpEvent)):
        raise ValueError(f"not a dp_accounting event type: {name!r}")
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key == "type":
            continue
        if isinstance(value, dict):
            value = event_from_json(value)
        elif isinstance(value, list):
            value = [event_from_json(v) for v in value]
        kwargs[key] = value
    return cls(**kwargs)
