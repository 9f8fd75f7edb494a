"""The reply envelope (``cotrain.wire.envelope``): the exact records and cached bytes of a
site's reply for each kind of upload, and what the server decodes from them.

The bytes below are those a private site's ledger keeps on disk (``reply_to_bytes``): a
change here makes the replies cached by deployed sites unreadable or different, and a
change in the records changes what a Flower reply carries.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from cotrain.federation.site import StepResult
from cotrain.privacy.ledgers.site_ledger import PrivacyBudgetSpent
from cotrain.wire import envelope
from cotrain.wire.envelope import (
    RemoteClientError,
    decode_upload,
    encode_upload,
    reply_from_bytes,
    reply_to_bytes,
)
from cotrain.wire.upload import Upload

MASKED = "masked by the private site; its own log has the reason"
EPSILON_RULE = "site-epsilon must be finite and >= 0"


@pytest.fixture
def clock(monkeypatch):
    """The handler's end time, fixed: 101.5 s."""
    monkeypatch.setattr(envelope.time, "time", lambda: 101.5)


def _fields(upload: Upload) -> dict:
    return {
        "client_id": upload.client_id,
        "message": upload.message,
        "error": None if upload.error is None else repr(upload.error),
        "warnings": dict(upload.warnings),
        "learner_time_s": upload.learner_time_s,
        "dp_event": upload.dp_event,
        "broadcast_version": upload.broadcast_version,
        "quality": upload.quality,
        "trust": upload.trust,
        "site_epsilon": upload.site_epsilon,
    }


# ------------------------------------------------------------------ known replies


def test_a_non_private_upload(clock):
    upload = Upload(
        4,
        b"\x05\x06",
        warnings=Counter({("UserWarning", "w"): 2}),
        learner_time_s=0.25,
        broadcast_version=3,
        quality=0.8,
        trust=0.5,
    )
    records = encode_upload(upload, private=False, started=100.0)
    assert records == {
        "config": {"warnings": {"categories": ["UserWarning"], "messages": ["w"], "counts": [2]}},
        "metrics": {
            "stats": {
                "broadcast-version": 3,
                "learner-time-s": 0.25,
                "handler-start": 100.0,
                "handler-end": 101.5,
                "trust": 0.5,
                "quality": 0.8,
            }
        },
        "arrays": {"labels": b"\x05\x06"},
    }
    # the order a Flower metric record is built in, as before the codec
    assert list(records["metrics"]["stats"]) == [
        "broadcast-version", "learner-time-s", "handler-start", "handler-end", "trust", "quality"
    ]  # fmt: skip
    assert reply_to_bytes(records) == (
        b'{"arrays": {"labels": "BQY="}, "config": {"warnings": {"categories": ["UserWarning"], '
        b'"counts": [2], "messages": ["w"]}}, "metrics": {"stats": {"broadcast-version": 3, '
        b'"handler-end": 101.5, "handler-start": 100.0, "learner-time-s": 0.25, "quality": 0.8, '
        b'"trust": 0.5}}}'
    )
    assert reply_from_bytes(reply_to_bytes(records)) == records
    assert _fields(decode_upload(4, records)) == _fields(upload)


def test_a_private_upload_carries_what_the_release_rule_let_out(clock):
    result = StepResult(
        1,
        b"\x01",
        warnings=Counter({("UserWarning", "17 rows"): 1}),
        learner_time_s=0.5,
        broadcast_version=2,
        quality=0.9,
        trust=0.75,
        site_epsilon=1.25,
        private=True,
    )
    records = encode_upload(result.upload(), private=True, started=100.0)
    assert records == {
        "config": {},
        "metrics": {"stats": {"broadcast-version": 2, "site-epsilon": 1.25}},
        "arrays": {"labels": b"\x01"},
    }
    assert reply_to_bytes(records) == (
        b'{"arrays": {"labels": "AQ=="}, "config": {}, '
        b'"metrics": {"stats": {"broadcast-version": 2, "site-epsilon": 1.25}}}'
    )
    decoded = decode_upload(1, records)
    assert _fields(decoded) == _fields(result.upload())
    assert decoded.learner_time_s is None and decoded.quality is None and not decoded.warnings


def test_the_codec_encodes_what_the_upload_holds_and_a_private_site_sends_no_timestamps(clock):
    """The release rule is StepResult.upload()'s: the codec does not drop fields itself."""
    upload = Upload(0, b"\x01", learner_time_s=0.5, trust=0.25)
    stats = encode_upload(upload, private=True, started=100.0)["metrics"]["stats"]
    assert stats == {"broadcast-version": 0, "learner-time-s": 0.5, "trust": 0.25}
    assert "handler-start" not in encode_upload(upload, private=False)["metrics"]["stats"]


def test_a_refusal_with_the_sites_epsilon(clock):
    refusal = Upload(1, error=PrivacyBudgetSpent("ε 8.01 > 8"), site_epsilon=7.5)
    records = encode_upload(refusal, private=True, started=100.0)
    assert records == {
        "config": {"error": {"type": "PrivacyBudgetSpent", "message": "privacy budget spent"}},
        "metrics": {"stats": {"site-epsilon": 7.5}},
        "arrays": {},
    }
    assert reply_to_bytes(records) == (
        b'{"arrays": {}, "config": {"error": {"message": "privacy budget spent", '
        b'"type": "PrivacyBudgetSpent"}}, "metrics": {"stats": {"site-epsilon": 7.5}}}'
    )
    decoded = decode_upload(1, records)
    assert isinstance(decoded.error, RemoteClientError)
    assert str(decoded.error) == "PrivacyBudgetSpent: privacy budget spent"
    assert decoded.site_epsilon == 7.5 and decoded.message is None


def test_a_failure_masked_at_a_private_site():
    failed = Upload(2, error=ValueError("row 17 is 'Alice'"))
    records = encode_upload(failed, private=True, started=100.0)
    assert records == {
        "config": {"error": {"type": "ValueError", "message": MASKED}},
        "metrics": {},
        "arrays": {},
    }
    assert reply_to_bytes(records) == (
        b'{"arrays": {}, "config": {"error": {"message": "masked by the private site; its own '
        b'log has the reason", "type": "ValueError"}}, "metrics": {}}'
    )
    assert str(decode_upload(2, records).error) == f"ValueError: {MASKED}"


def test_a_failure_unmasked_at_a_site_without_privacy():
    failed = Upload(
        2,
        error=ValueError("row 17 is 'Alice'"),
        warnings=Counter({("UserWarning", "w"): 1}),
        learner_time_s=0.3,
    )
    records = encode_upload(failed, private=False, started=100.0)
    assert records == {
        "config": {
            "error": {"type": "ValueError", "message": "row 17 is 'Alice'"},
            "warnings": {"categories": ["UserWarning"], "messages": ["w"], "counts": [1]},
        },
        "metrics": {},  # no times, no version with a failure
        "arrays": {},
    }
    decoded = decode_upload(2, records)
    assert str(decoded.error) == "ValueError: row 17 is 'Alice'"
    assert decoded.warnings == Counter({("UserWarning", "w"): 1})
    long = encode_upload(Upload(2, error=ValueError("x" * 2500)), private=False)
    assert long["config"]["error"]["message"] == "x" * 2000


def test_a_dp_event():
    dp = pytest.importorskip("dp_accounting")
    upload = Upload(0, b"\x02", learner_time_s=None, dp_event=dp.GaussianDpEvent(2.0))
    records = encode_upload(upload, private=True)
    assert records["config"] == {
        "privacy": {"dp-event": '{"type": "GaussianDpEvent", "noise_multiplier": 2.0}'}
    }
    assert reply_to_bytes(records) == (
        b'{"arrays": {"labels": "Ag=="}, "config": {"privacy": {"dp-event": "{\\"type\\": '
        b'\\"GaussianDpEvent\\", \\"noise_multiplier\\": 2.0}"}}, '
        b'"metrics": {"stats": {"broadcast-version": 0}}}'
    )
    assert decode_upload(0, reply_from_bytes(reply_to_bytes(records))).dp_event == (
        dp.GaussianDpEvent(2.0)
    )


def test_an_upload_with_neither_labels_nor_error_is_refused():
    with pytest.raises(ValueError, match="client 5's upload has neither a message nor an error"):
        encode_upload(Upload(5), private=False)


# ------------------------------------------------------------------ malformed replies


def _reply(**stats) -> dict:
    return {
        "config": {},
        "metrics": {"stats": {"broadcast-version": 1, **stats}},
        "arrays": {"labels": b"\x01"},
    }


@pytest.mark.parametrize(
    "records, error, text",
    [
        (_reply(quality=1.5), ValueError, "quality must be in [0, 1], got 1.5"),
        (_reply(trust=-0.25), ValueError, "trust must be in [0, 1], got -0.25"),
        (_reply(trust=math.nan), ValueError, "trust must be in [0, 1], got nan"),
        (_reply(**{"site-epsilon": -1.0}), ValueError, f"{EPSILON_RULE}, got -1.0"),
        (_reply(**{"site-epsilon": math.inf}), ValueError, f"{EPSILON_RULE}, got inf"),
        ({"config": {}, "metrics": {"stats": {}}, "arrays": {}}, KeyError, "'labels'"),
        ({"config": {}, "metrics": {}, "arrays": {"labels": b"\x01"}}, KeyError, "'stats'"),
        ({**_reply(), "arrays": {"labels": [1]}}, TypeError, "the labels must be bytes, got list"),
        (
            {**_reply(), "config": {"privacy": {"dp-event": '{"type": "Pickle"}'}}},
            ValueError,
            "not a dp_accounting event type: 'Pickle'",
        ),
    ],
    ids=["quality", "trust", "trust-nan", "negative-eps", "inf-eps", "no-labels", "no-stats",
         "labels-type", "dp-event-type"],
)  # fmt: skip
def test_a_malformed_reply_raises(records, error, text):
    if "privacy" in records["config"]:
        pytest.importorskip("dp_accounting")
    with pytest.raises(error) as raised:
        decode_upload(1, records)
    assert str(raised.value) == text


def test_a_bad_site_epsilon_is_malformed_even_on_a_failure():
    records = {
        "config": {"error": {"type": "ValueError", "message": MASKED}},
        "metrics": {"stats": {"site-epsilon": -2.0}},
    }
    with pytest.raises(ValueError, match="site-epsilon must be finite"):
        decode_upload(1, records)


def test_the_server_decodes_flower_records_as_the_site_encoded_them(clock):
    """Through Flower's records and back (``protocol.to_plain``), as the ServerApp reads."""
    pytest.importorskip("flwr")
    from cotrain.flower import protocol

    upload = Upload(3, b"\x07\x08\x09", learner_time_s=0.5, broadcast_version=4, trust=1.0)
    records = encode_upload(upload, private=False, started=100.0)
    plain = protocol.to_plain(protocol.from_plain(records))
    assert plain == records
    assert _fields(decode_upload(3, plain)) == _fields(upload)
