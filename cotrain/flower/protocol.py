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
an ``error`` config record instead (masked at a private site, see
:func:`cotrain.wire.envelope.masked_error`).

``train`` (one round), server → site: ``round`` config record (round, client index,
seed, share, encoding, soft-dtype, soft-bits, pool-hash, classes, run-token,
``eval-proba``: whether sharing sites send evaluation probabilities, ``broadcast-ref``:
the consensus version the broadcast is delta-coded against, 0 for a full message) and,
from round 2, the ``labels`` array record with the broadcast; site → server: the
envelope of its :class:`~cotrain.wire.upload.Upload`, whose format (records ``labels``,
``stats``, ``privacy``, ``warnings`` or ``error``, and their keys) is owned by
:mod:`cotrain.wire.envelope` (:func:`~cotrain.wire.envelope.encode_upload` at the site,
:func:`~cotrain.wire.envelope.decode_upload` at the server, on :func:`to_plain`'s form),
plus the site's own evaluation: ``eval-accuracy`` in ``stats`` where the site has
evaluation data, a sharing site's ``eval`` array record (its predicted class codes on the
evaluation data) and, when asked, ``eval-proba`` (float32 probabilities). A private site
sends no warnings, no learner or handler times, no trust, quality or evaluation accuracy,
and an error message of fixed words (:func:`~cotrain.wire.envelope.masked_error`); its own
log keeps the real one.

A secure-vote run (``SecureTeacherVotes``, :mod:`cotrain.flower.grid_transport`) adds to
the round's ``train`` message the plan's public sizes (``secure-n-sites``,
``secure-rounds``) and a ``queries`` array record (int32 positions in U); the site's reply
carries no labels, only ``broadcast-version`` (or an ``error``). Its shares reach the
server only masked, in the ``train`` messages of Flower's SecAgg+ workflow
(:mod:`cotrain.flower.secure_sum`), which a site tells apart by their content.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

ROUND = "round"
SITE = "site"
#: a sharing site's predicted class codes on the shared evaluation data
EVAL = "eval"
#: its probabilities there (little-endian float32), with a soft consensus
EVAL_PROBA = "eval-proba"
PAYLOAD = "payload"


_BRACKETED = re.compile(r"\[[^\]]*\]|\([^)]*\)|\{[^}]*\}")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def sanitize(text: str, limit: int = 300) -> str:
    """An error text with its data values masked, as well as a pattern can.

    Exception messages can quote private values (a label, a feature value, a shape that
    reveals a size): bracketed and quoted parts become ``…`` and numbers ``#``; the text
    is cut to its first line and ``limit`` characters. Not enough for a private site's
    reply — unquoted words can still carry data (a class name, a column) — so a private
    site sends :func:`~cotrain.wire.envelope.masked_error`'s fixed words instead.

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
