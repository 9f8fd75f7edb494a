"""Everything a private site may send the server, and why: the allow-list of its transcript.

A private site (one with ``[privacy]`` in its ``site.toml``) answers two kinds of message:
the handshake (``query``) and one round (``train``). Every field of every reply it may
send is listed in :data:`ALLOWED`, each with the reason it is either outside the site's ε
(public configuration, or a function of public configuration and of what the server sent)
or covered by it (the accounted release of labels). A field that is not listed must never
leave a private site: :func:`check_transcript` reads a site's transcript and returns the
fields that break this rule, and ``tests/test_private_transcript.py`` runs it over the
whole transcript of a private site of each mechanism.

Fields are named ``kind.record.key`` after the :func:`cotrain.flower.protocol.to_plain`
form of a message (``config.site.client-id``); an array record is named ``arrays.record``.

A DP-SGD site sends no privacy event: with ``sampling_rate`` and ``steps`` as public
configuration the round's event is the same for every site, and the server computes it.

What no list of fields can cover: whether a reply comes at all — a site that refuses to
start, or whose learner fails on its data, is seen to fail (with fixed words: see
:func:`cotrain.wire.envelope.masked_error`) — and when it comes: the server times each
exchange itself, and a fit takes longer on more rows. Neither is covered by ε.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cotrain.wire.envelope import BUDGET_SPENT, MASKED_MESSAGE

__all__ = ["ALLOWED", "Field", "check_transcript", "fields_of"]


@dataclass(frozen=True)
class Field:
    """One field a private site may send.

    Attributes
    ----------
    name : str
        ``kind.record.key`` (``arrays.record`` for an array record).
    message : str
        The reply that carries it: "handshake", "round" or "any".
    reason : str
        Why it is outside the site's ε or covered by it.
    """

    name: str
    message: str
    reason: str


#: every field a private site may send, with the reason it may
ALLOWED: tuple[Field, ...] = (
    Field(
        "config.site.client-id",
        "handshake",
        "The site's position in the federation, set in its site.toml: public configuration.",
    ),
    Field(
        "config.site.pool-hash",
        "handshake",
        "The SHA-256 fingerprint of the public pool, which every site holds: a function of "
        "public data.",
    ),
    Field(
        "config.site.n-public",
        "handshake",
        "The number of rows of the public pool: a function of public data.",
    ),
    Field(
        "config.site.learner",
        "handshake",
        "The class name of the learner configured in site.toml (nothing it learned): public "
        "configuration.",
    ),
    Field(
        "config.site.privacy",
        "handshake",
        "The site's privacy mechanism and its parameters, as configured in site.toml: public "
        "configuration.",
    ),
    Field(
        "config.site.classes",
        "handshake",
        "The label space declared in site.toml, the same for the whole federation: public "
        "configuration (not the labels the site's rows hold).",
    ),
    Field(
        "arrays.labels",
        "round",
        "The site's labels on the public pool, released through its privacy mechanism: this "
        "is the release its ε covers, accounted in its own ledger.",
    ),
    Field(
        "metrics.stats.broadcast-version",
        "round",
        "The consensus version the site now holds: a function of the broadcasts the server "
        "sent it.",
    ),
    Field(
        "metrics.stats.site-epsilon",
        "any",
        "The ε of the site's own ledger: a function of public configuration and of how many "
        "releases the site made.",
    ),
    Field(
        "config.error.type",
        "any",
        "The class name of the exception that stopped the site: a name from code, never "
        "text from data. PrivacyBudgetSpent is a function of public configuration and of "
        "how many releases the site made; any other failure, and its class, can depend on "
        "the private rows and is not covered by ε (the site's log has the reason).",
    ),
    Field(
        "config.error.message",
        "any",
        f'Fixed words, whatever the error: "{MASKED_MESSAGE}", or "{BUDGET_SPENT["message"]}" '
        "once its budget is spent; the real text stays in the site's log.",
    ),
)

_NAMES = frozenset(f.name for f in ALLOWED)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def fields_of(message: dict[str, Any]) -> list[str]:
    """The field names of one message in :func:`cotrain.flower.protocol.to_plain` form.

    Examples
    --------
    >>> fields_of({"config": {"site": {"client-id": 0}}, "arrays": {"labels": b"x"}})
    ['config.site.client-id', 'arrays.labels']
    """
    names: list[str] = []
    for kind in ("config", "metrics"):
        for record, values in message.get(kind, {}).items():
            names.extend(f"{kind}.{record}.{key}" for key in values)
    names.extend(f"arrays.{record}" for record in message.get("arrays", {}))
    unknown = set(message) - {"config", "metrics", "arrays"}
    return names + sorted(unknown)


def check_transcript(messages: Iterable[dict[str, Any]]) -> list[str]:
    """The fields of ``messages`` (a site's replies, in ``to_plain`` form) that a private
    site may not send: every field not in :data:`ALLOWED`, and an error whose message is
    not its fixed words or whose type is not a class name. Empty: the transcript is clean.

    Examples
    --------
    >>> check_transcript([{"config": {"site": {"client-id": 0, "n-samples": 120}}}])
    ['config.site.n-samples']
    >>> check_transcript([{"config": {"error": {"type": "ValueError", "message": "17 rows"}}}])
    ['config.error.message']
    >>> check_transcript([{"config": {"error": dict(BUDGET_SPENT)}}])
    []
    """
    offending: list[str] = []
    for message in messages:
        bad = [name for name in fields_of(message) if name not in _NAMES]
        error = message.get("config", {}).get("error")
        if error is not None:
            kind, text = str(error.get("type", "")), error.get("message")
            if not _IDENTIFIER.match(kind):
                bad.append("config.error.type")
            if text != (
                BUDGET_SPENT["message"] if kind == BUDGET_SPENT["type"] else MASKED_MESSAGE
            ):
                bad.append("config.error.message")
        offending.extend(name for name in bad if name not in offending)
    return offending
