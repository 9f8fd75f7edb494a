"""What travels between the cotrain ServerApp and ClientApps, as Flower records.

Everything is a numeric array or a config value — never a pickle. Labels travel as
the same encoded bytes as in-process (packed, delta-coded or quantised label messages
from :mod:`cotrain.wire.messages`, :mod:`~cotrain.wire.compact` and
:mod:`~cotrain.wire.delta`), held in a ``uint8``
:class:`flwr.app.Array`, so the byte counts in the history are those of the messages.

Messages
--------
``query`` (handshake), server → site: nothing; site → server: ``site`` config record
with ``client-id`` (-1 if none), ``pool-hash``, ``n-public``, ``learner`` (its class
name), its declared ``privacy`` mechanism ("" for none) and, where its ``site.toml``
declares one, its label space ``classes``. A site without privacy adds its row count
(``n-samples``) and its label values (``labels``); a site that shares its evaluation data
(a public test set, see :mod:`cotrain.flower.evaluation`) adds ``eval-hash`` and the
evaluation labels (``eval-labels``). A private site sends neither: every field it may send
is listed, with why, in :mod:`cotrain.flower.transcript`. A site that cannot answer sends
an ``error`` config record instead (masked at a private site, see :func:`masked_error`).

``train`` (one round), server → site: ``round`` config record (round, client index,
seed, share, encoding, soft-dtype, soft-bits, pool-hash, classes, run-token,
``eval-proba``: whether sharing sites send evaluation probabilities, ``broadcast-ref``:
the consensus version the broadcast is delta-coded against, 0 for a full message) and,
from round 2, the ``labels`` array record with the broadcast; site → server: the
``labels`` array record with the upload, a ``stats`` metric record (learner time,
handler times, ``broadcast-version``: the consensus version the site now holds, its
acknowledgement; ``eval-accuracy`` where the site has evaluation data; a private site's
``site-epsilon``, its own ledger's ε), a sharing site's ``eval`` array record (its
predicted class codes on the evaluation data) and, when asked, ``eval-proba`` (float32
probabilities), a ``warnings`` config record and, for a mechanism whose round event the
server cannot compute (``reports_events``; none of cotrain's own: DP-SGD's is public
configuration), a ``privacy`` config record with that event; or an ``error`` config
record (type and message) when the step failed. A private site sends no warnings, no
learner or handler times, no trust, quality or evaluation accuracy, and an error message
of fixed words (:func:`masked_error`); its own log keeps the real one.

A secure-vote run (``SecureTeacherVotes``, :mod:`cotrain.flower.grid_transport`) adds to
the round's ``train`` message the plan's public sizes (``secure-n-sites``,
``secure-rounds``) and a ``queries`` array record (int32 positions in U); the site's reply
carries no labels, only ``broadcast-version`` (or an ``error``). Its shares reach the
server only masked, in the ``train`` messages of Flower's SecAgg+ workflow
(:mod:`cotrain.flower.secure_sum`), which a site tells apart by their content.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

LABELS = "labels"
ROUND = "round"
SITE = "site"
STATS = "stats"
#: a DP-trained site's privacy event of the round (dp-accounting JSON)
PRIVACY = "privacy"
WARNINGS = "warnings"
#: a sharing site's predicted class codes on the shared evaluation data
EVAL = "eval"
#: its probabilities there (little-endian float32), with a soft consensus
EVAL_PROBA = "eval-proba"
ERROR = "error"
PAYLOAD = "payload"


#: the message of every error a private site reports, whatever the real text (in its log)
MASKED_MESSAGE = "masked by the private site; its own log has the reason"
#: the error a private site sends once its own privacy budget is spent
BUDGET_SPENT = {"type": "PrivacyBudgetSpent", "message": "privacy budget spent"}


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


_BRACKETED = re.compile(r"\[[^\]]*\]|\([^)]*\)|\{[^}]*\}")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def sanitize(text: str, limit: int = 300) -> str:
    """An error text with its data values masked, as well as a pattern can.

    Exception messages can quote private values (a label, a feature value, a shape that
    reveals a size): bracketed and quoted parts become ``…`` and numbers ``#``; the text
    is cut to its first line and ``limit`` characters. Not enough for a private site's
    reply — unquoted words can still carry data (a class name, a column) — so a private
    site sends :func:`masked_error`'s fixed words instead.

    Examples
    --------
    >>> sanitize("y contains previously unseen labels: ['Alice' 'Bob'] at row 17")
    'y contains previously unseen labels: … at row #'
    >>> sanitize('Input X contains NaN in column "age" = 41.5')
    'Input X contains NaN in column … = #'
    """
    first = str(text).strip().splitlines()[0] if str(text).strip() else ""
    masked = _NUMBER.sub("#", _QUOTED.sub("…", _BRACKETED.sub("…", first)))
    return masked[:limit]


def to_array(data: bytes) -> Any:
    """An encoded label message as a ``uint8`` Flower Array."""
    from flwr.app import Array

    return Array(np.frombuffer(data, dtype=np.uint8).copy())


def from_array(array: Any) -> bytes:
    """The encoded label message held in a ``uint8`` Flower Array."""
    values = array.numpy()
    if values.dtype != np.uint8 or values.ndim != 1:
        raise ValueError(
            f"a label message must be a 1-D uint8 array, got {values.dtype} {values.shape}"
        )
    return values.tobytes()


def to_plain(content: Any) -> dict[str, dict[str, Any]]:
    """A message's records as plain Python values, the transport-neutral form.

    ``{"config": {name: {key: value}}, "metrics": {name: {key: value}}, "arrays": {name:
    bytes}}``: each array record holds one encoded label message (its ``payload``), kept
    as bytes. The site's round (:func:`cotrain.flower.client_app.site_train`) works on
    this form, so it runs the same in a ClientApp and in a site's warm worker process.

    Examples
    --------
    >>> from flwr.app import ArrayRecord, ConfigRecord, RecordDict
    >>> content = RecordDict({"round": ConfigRecord({"round": 2}),
    ...                       "labels": ArrayRecord({"payload": to_array(b"ab")})})
    >>> to_plain(content)
    {'config': {'round': {'round': 2}}, 'metrics': {}, 'arrays': {'labels': b'ab'}}
    >>> to_plain(from_plain(to_plain(content))) == to_plain(content)
    True
    """
    return {
        "config": {k: dict(v) for k, v in content.config_records.items()},
        "metrics": {k: dict(v) for k, v in content.metric_records.items()},
        "arrays": {k: from_array(v[PAYLOAD]) for k, v in content.array_records.items()},
    }


def from_plain(plain: dict[str, dict[str, Any]]) -> Any:
    """The Flower ``RecordDict`` of a :func:`to_plain` form."""
    from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

    content = RecordDict()
    for name, values in plain.get("config", {}).items():
        content[name] = ConfigRecord(values)
    for name, values in plain.get("metrics", {}).items():
        content[name] = MetricRecord(values)
    for name, data in plain.get("arrays", {}).items():
        content[name] = ArrayRecord({PAYLOAD: to_array(data)})
    return content


def labels_to_config(values: np.ndarray) -> list[int] | list[str]:
    """Class labels as a config list: integers stay integers, anything else is text."""
    values = np.asarray(values)
    if values.dtype.kind in "iub":
        return [int(v) for v in values]
    return [str(v) for v in values]


def warnings_to_config(counts: Counter) -> dict[str, Any]:
    """Counted learner warnings ``{(category, message): n}`` as a config record body."""
    items = sorted(counts.items())
    return {
        "categories": [c for (c, _), _ in items],
        "messages": [m[:500] for (_, m), _ in items],
        "counts": [int(n) for _, n in items],
    }


def warnings_from_config(record: Any) -> Counter:
    """The inverse of :func:`warnings_to_config`."""
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
