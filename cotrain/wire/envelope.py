"""A site's reply envelope: an :class:`~cotrain.wire.upload.Upload` as records, and back.

A deployed site (a Flower ClientApp, or its warm worker process) answers a round with one
reply that carries its :class:`~cotrain.wire.upload.Upload`. This module owns that reply's
format, both halves: :func:`encode_upload` at the site and :func:`decode_upload` at the
server, in the transport-neutral form ``{"config": {name: {key: value}}, "metrics": {name:
{key: value}}, "arrays": {name: bytes}}`` (what :func:`cotrain.flower.protocol.to_plain`
and :func:`~cotrain.flower.protocol.from_plain` convert to and from Flower's records).

The records of a reply:

- ``labels`` array: the encoded label message (:attr:`Upload.message`), absent when the
  site failed;
- ``stats`` metrics: ``broadcast-version`` (the consensus version the site now holds),
  ``learner-time-s``, ``trust`` and ``quality`` (where the upload carries them),
  ``handler-start``/``handler-end`` (the site handler's timestamps, never from a private
  site) and ``site-epsilon`` (a private site's own ledger ε, on every reply, refusals too);
- ``privacy`` config: ``dp-event``, the round's dp-accounting event as JSON text
  (:mod:`cotrain.wire.dp_events`), for a mechanism that reports its events;
- ``warnings`` config: the learner's counted warnings (:func:`warnings_to_config`);
- ``error`` config: ``type`` and ``message`` of the failure instead of labels and stats;
  a private site's message is fixed words (:func:`masked_error`).

What a client may release is not decided here but by
:meth:`cotrain.federation.site.StepResult.upload`: the codec writes what the upload holds.
Only what the transport adds is the codec's to withhold at a private site: its handler's
timestamps, and an error's text.

A private site's ledger keeps the exact reply it sent (so a repeated request gets the same
bytes): :func:`reply_to_bytes` and :func:`reply_from_bytes` are that cached form.

Examples
--------
>>> records = encode_upload(Upload(3, b"\\x01\\x02", learner_time_s=0.5), private=False)
>>> records  # doctest: +NORMALIZE_WHITESPACE
{'config': {}, 'metrics': {'stats': {'broadcast-version': 0, 'learner-time-s': 0.5}},
 'arrays': {'labels': b'\\x01\\x02'}}
>>> decode_upload(3, records).message
b'\\x01\\x02'
"""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from typing import Any

from cotrain.wire.dp_events import event_from_json, event_to_json
from cotrain.wire.upload import Upload

__all__ = [
    "BUDGET_SPENT",
    "ERROR",
    "LABELS",
    "MASKED_MESSAGE",
    "PRIVACY",
    "STATS",
    "WARNINGS",
    "RemoteClientError",
    "decode_upload",
    "encode_upload",
    "masked_error",
    "remote_error",
    "reply_from_bytes",
    "reply_to_bytes",
    "warnings_from_config",
    "warnings_to_config",
]

#: array record: an encoded label message (the upload; from the server, the broadcast)
LABELS = "labels"
#: metric record: the reply's numbers (broadcast version, times, trust, quality, site ε)
STATS = "stats"
#: config record: a DP-trained site's privacy event of the round (dp-accounting JSON)
PRIVACY = "privacy"
#: config record: the learner's counted warnings
WARNINGS = "warnings"
#: config record: a failure's ``type`` and ``message``
ERROR = "error"

#: the message of every error a private site reports, whatever the real text (in its log)
MASKED_MESSAGE = "masked by the private site; its own log has the reason"
#: the error a private site sends once its own privacy budget is spent
BUDGET_SPENT = {"type": "PrivacyBudgetSpent", "message": "privacy budget spent"}
#: the longest error text a site without privacy sends
_MAX_ERROR_TEXT = 2000


class RemoteClientError(RuntimeError):
    """An exception raised at a site, as reported back to the server."""


def masked_error(error: BaseException) -> dict[str, str]:
    """A private site's ``error`` record for ``error``: its class name and fixed words.

    The message never depends on the exception's text (which can quote a label, a value
    or a row count); a spent budget has its own fixed words (:data:`BUDGET_SPENT`).

    Examples
    --------
    >>> masked_error(ValueError("17 rows, labels ['Alice']"))
    {'type': 'ValueError', 'message': 'masked by the private site; its own log has the reason'}
    >>> PrivacyBudgetSpent = type("PrivacyBudgetSpent", (RuntimeError,), {})
    >>> masked_error(PrivacyBudgetSpent("ε 8.01 > 8"))
    {'type': 'PrivacyBudgetSpent', 'message': 'privacy budget spent'}
    """
    name = type(error).__name__
    if name == BUDGET_SPENT["type"]:
        return dict(BUDGET_SPENT)
    return {"type": name, "message": MASKED_MESSAGE}


def remote_error(record: dict[str, Any]) -> RemoteClientError:
    """The :class:`RemoteClientError` of a reply's ``error`` record.

    Examples
    --------
    >>> remote_error({"type": "ValueError", "message": "bad pool"})
    RemoteClientError('ValueError: bad pool')
    """
    return RemoteClientError(f"{record['type']}: {record['message']}")


def warnings_to_config(counts: Counter[tuple[str, str]]) -> dict[str, Any]:
    """Counted learner warnings ``{(category, message): n}`` as a config record body
    (sorted; each message cut to 500 characters).

    Examples
    --------
    >>> warnings_to_config(Counter({("UserWarning", "b"): 2, ("FutureWarning", "a"): 1}))
    {'categories': ['FutureWarning', 'UserWarning'], 'messages': ['a', 'b'], 'counts': [1, 2]}
    """
    items = sorted(counts.items())
    return {
        "categories": [c for (c, _), _ in items],
        "messages": [m[:500] for (_, m), _ in items],
        "counts": [int(n) for _, n in items],
    }


def warnings_from_config(record: Any) -> Counter[tuple[str, str]]:
    """The inverse of :func:`warnings_to_config` (an empty count for no record).

    Examples
    --------
    >>> warnings_from_config({"categories": ["UserWarning"], "messages": ["b"], "counts": [2]})
    Counter({('UserWarning', 'b'): 2})
    >>> warnings_from_config(None)
    Counter()
    """
    if record is None or "counts" not in record:
        return Counter()
    return Counter(
        {
            (c, m): int(n)
            for c, m, n in zip(
                record["categories"], record["messages"], record["counts"], strict=True
            )
        }
    )


def encode_upload(
    upload: Upload, *, private: bool, started: float | None = None
) -> dict[str, dict[str, Any]]:
    """A site's reply records carrying ``upload``, field by field.

    The codec writes every field ``upload`` holds: what a client may release is decided
    before, by :meth:`cotrain.federation.site.StepResult.upload` (a private client's
    upload holds no warnings, learner time, trust or quality). What ``private`` withholds is
    what only the transport adds: the handler's timestamps, and the text of an error.

    Parameters
    ----------
    upload : Upload
        What the client releases this round.
    private : bool
        A private site: no handler timestamps, and an error as :func:`masked_error`'s fixed
        words (its log keeps the full text). Every field it may send is listed, with why, in
        :mod:`cotrain.flower.transcript`.
    started : float, optional
        When the site's handler started (``time.time()``): a site without privacy sends it
        and the time the reply was built (``handler-start``, ``handler-end``), for the
        round's timings. None: no timestamps.

    Returns
    -------
    dict
        The reply's records: ``{"config": ..., "metrics": ..., "arrays": ...}``.

    Raises
    ------
    ValueError
        If ``upload`` has neither a message nor an error.

    Examples
    --------
    >>> encode_upload(Upload(0, b"\\x01", learner_time_s=0.5, trust=0.25), private=False)
    ... # doctest: +NORMALIZE_WHITESPACE
    {'config': {}, 'metrics': {'stats': {'broadcast-version': 0, 'learner-time-s': 0.5,
     'trust': 0.25}}, 'arrays': {'labels': b'\\x01'}}
    >>> encode_upload(Upload(0, error=ValueError("row 17 is 'Alice'")), private=True)
    ... # doctest: +NORMALIZE_WHITESPACE
    {'config': {'error': {'type': 'ValueError',
     'message': 'masked by the private site; its own log has the reason'}},
     'metrics': {}, 'arrays': {}}
    """
    config: dict[str, Any] = {}
    metrics: dict[str, Any] = {}
    arrays: dict[str, bytes] = {}
    stats: dict[str, float | int] = {}
    if upload.error is not None:
        config[ERROR] = (
            masked_error(upload.error)
            if private
            else {
                "type": type(upload.error).__name__,
                "message": str(upload.error)[:_MAX_ERROR_TEXT],
            }
        )
    else:
        if upload.message is None:
            raise ValueError(
                f"client {upload.client_id}'s upload has neither a message nor an error"
            )
        arrays[LABELS] = upload.message
        if upload.dp_event is not None:  # the round's privacy event, for the ledger
            config[PRIVACY] = {"dp-event": json.dumps(event_to_json(upload.dp_event))}
        stats["broadcast-version"] = int(upload.broadcast_version or 0)
        if upload.learner_time_s is not None:
            stats["learner-time-s"] = float(upload.learner_time_s)
        if started is not None and not private:  # the transport's own timings
            stats["handler-start"], stats["handler-end"] = started, time.time()
        if upload.trust is not None:  # the pool weight it chose
            stats["trust"] = float(upload.trust)
        if upload.quality is not None:  # its out-of-fold accuracy
            stats["quality"] = float(upload.quality)
    if upload.site_epsilon is not None:  # a private site's own ledger ε (public config, releases)
        stats["site-epsilon"] = float(upload.site_epsilon)
    if stats:
        metrics[STATS] = stats
    if upload.warnings:
        config[WARNINGS] = warnings_to_config(upload.warnings)
    return {"config": config, "metrics": metrics, "arrays": arrays}


def decode_upload(client_id: int, records: dict[str, dict[str, Any]]) -> Upload:
    """The :class:`~cotrain.wire.upload.Upload` that a site's reply ``records`` carry, as
    the server receives it from an in-process client.

    A reply with an ``error`` record is the site's failure: an upload whose ``error`` is a
    :class:`RemoteClientError` (with the site's ε, if it sent one).

    Parameters
    ----------
    client_id : int
        The client index of the site that replied (the server knows who answered).
    records : dict
        The reply's records, as :func:`encode_upload` builds them
        (:func:`cotrain.flower.protocol.to_plain` of a Flower reply).

    Returns
    -------
    Upload

    Raises
    ------
    KeyError, TypeError or ValueError
        If the reply is malformed: a record missing (``labels`` or ``stats`` of a reply
        without an error), a value of the wrong type, ``site-epsilon`` not finite and
        non-negative, ``quality`` or ``trust`` outside [0, 1]. The server makes it that
        site's failure (``on_client_error`` decides the rest).

    Examples
    --------
    >>> records = {"config": {}, "arrays": {"labels": b"\\x07"},
    ...            "metrics": {"stats": {"broadcast-version": 1, "quality": 0.75}}}
    >>> upload = decode_upload(2, records)
    >>> upload.message, upload.broadcast_version, upload.quality, upload.learner_time_s
    (b'\\x07', 1, 0.75, None)
    >>> decode_upload(2, {"config": {"error": {"type": "ValueError", "message": "no"}}}).error
    RemoteClientError('ValueError: no')
    >>> records["metrics"]["stats"]["quality"] = 1.5
    >>> decode_upload(2, records)
    Traceback (most recent call last):
    ...
    ValueError: quality must be in [0, 1], got 1.5
    """
    config = records.get("config", {})
    metrics = records.get("metrics", {})
    upload = Upload(client_id, warnings=warnings_from_config(config.get(WARNINGS)))
    said = metrics.get(STATS, {}).get("site-epsilon")
    if said is not None:  # a private site's own ledger ε, on every reply (refusals too)
        upload.site_epsilon = float(said)
        if not 0.0 <= upload.site_epsilon < float("inf"):
            raise ValueError(f"site-epsilon must be finite and >= 0, got {said!r}")
    if ERROR in config:
        upload.error = remote_error(config[ERROR])
        return upload
    message = records.get("arrays", {})[LABELS]
    if not isinstance(message, bytes):
        raise TypeError(f"the labels must be bytes, got {type(message).__name__}")
    upload.message = message
    stats = metrics[STATS]
    # absent: not released (a private site), as the in-process upload holds it
    learner_time = stats.get("learner-time-s")
    upload.learner_time_s = None if learner_time is None else float(learner_time)
    if "broadcast-version" in stats:  # the consensus the site now holds
        upload.broadcast_version = int(stats["broadcast-version"])
    if "quality" in stats:  # the site's own out-of-fold accuracy, for the consensus
        upload.quality = float(stats["quality"])
        if not 0.0 <= upload.quality <= 1.0:
            raise ValueError(f"quality must be in [0, 1], got {upload.quality!r}")
    if "trust" in stats:  # the pool weight it chose for its fit
        upload.trust = float(stats["trust"])
        if not 0.0 <= upload.trust <= 1.0:
            raise ValueError(f"trust must be in [0, 1], got {upload.trust!r}")
    if PRIVACY in config:  # a DP-trained site's round
        upload.dp_event = event_from_json(json.loads(str(config[PRIVACY]["dp-event"])))
    return upload


def reply_to_bytes(records: dict[str, dict[str, Any]]) -> bytes:
    """A site's reply records as the bytes its ledger caches: JSON with the ``arrays``
    (bytes) in base64, keys sorted.

    Examples
    --------
    >>> reply = {"config": {}, "metrics": {"stats": {"site-epsilon": 1.5}},
    ...          "arrays": {"labels": b"\\x01\\x02"}}
    >>> reply_to_bytes(reply)
    b'{"arrays": {"labels": "AQI="}, "config": {}, "metrics": {"stats": {"site-epsilon": 1.5}}}'
    >>> reply_from_bytes(reply_to_bytes(reply)) == reply
    True
    """
    arrays = {k: base64.b64encode(bytes(v)).decode("ascii") for k, v in records["arrays"].items()}
    return json.dumps({**records, "arrays": arrays}, sort_keys=True).encode("utf-8")


def reply_from_bytes(data: bytes) -> dict[str, Any]:
    """The reply records of :func:`reply_to_bytes`'s bytes."""
    reply = json.loads(data.decode("utf-8"))
    reply["arrays"] = {
        k: base64.b64decode(v, validate=True) for k, v in reply.get("arrays", {}).items()
    }
    return dict(reply)
