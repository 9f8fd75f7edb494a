"""Hostile input: property-based tests that every entry point either returns a valid
result or refuses its input with a clear ``ValueError`` / ``TypeError``.

Three surfaces are covered:

1. every consensus rule of the registry (built with default parameters, so rules registered
   later are covered automatically): validity of the output, invariance under permuting the
   clients, unanimity, and clear errors for everything outside the documented input domain;
2. every message codec (``HardLabels``, ``SoftLabels``, ``QuantizedSoftLabels``,
   ``DeltaHardLabels`` and the delta encoder/decoder): exact round trips on awkward but valid
   inputs, and arbitrary, forged, truncated or bit-flipped bytes are refused with
   ``ValueError`` (``TypeError`` for non-bytes) or decode canonically;
3. ``FederatedCoTrainer.fit``: generated malformed inputs are refused, naming the argument,
   before any client starts training.
"""

from __future__ import annotations

import lzma
import struct
import zlib
from typing import Any, ClassVar

import numpy as np
import pytest
import scipy.sparse
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.tree import DecisionTreeClassifier

from consensus import Consensus, available_consensus, get_consensus
from cotrain import FederatedCoTrainer
from cotrain.wire.compact import QuantizedSoftLabels
from cotrain.wire.delta import DELTA_HEADER_SIZE, DeltaHardLabels
from cotrain.wire.format import MalformedMessage, WireFormat
from cotrain.wire.messages import HardLabels, Message, SoftLabels, decode

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FEW = settings(SETTINGS, max_examples=20)
CLEAR_ERRORS = (ValueError, TypeError)


# ======================================================================================
# 1. consensus rules
# ======================================================================================


def _probe(name: str) -> tuple[str, bool, str | None]:
    """How to call the rule ``name`` with default parameters.

    Returns ``(name, needs_weights, skip_reason)``: ``needs_weights`` when the default rule
    refuses to run without ``weights`` (e.g. certainty weighting) but runs with them;
    ``skip_reason`` when it cannot run on a trivial valid input at all.
    """
    votes = np.zeros((2, 1), dtype=np.int64)
    try:
        get_consensus(name)(votes, n_classes=2)
        return name, False, None
    except Exception as first:
        try:
            get_consensus(name)(votes, n_classes=2, weights=np.ones(2))
            return name, True, None
        except Exception:
            return name, False, f"{name} cannot run with default parameters: {first!r}"


def _distinct_rules() -> list[tuple[str, bool, str | None]]:
    """One name per distinct default rule of the registry (aliases dropped)."""
    seen: set[tuple[type, str]] = set()
    rules = []
    for name in available_consensus():
        try:
            rule = get_consensus(name)
        except Exception as err:
            rules.append((name, False, f"get_consensus({name!r}) failed: {err!r}"))
            continue
        key = (type(rule), repr(rule))
        if key in seen:
            continue
        seen.add(key)
        rules.append(_probe(name))
    return rules


RULES = _distinct_rules()
RULE_IDS = [f"{type(get_consensus(name)).__name__}:{name}" for name, _, _ in RULES]


def _build(spec: tuple[str, bool, str | None]) -> tuple[Consensus, bool]:
    name, needs_weights, skip = spec
    if skip:
        pytest.skip(skip)
    return get_consensus(name), needs_weights


def _is_noisy(rule: Consensus) -> bool:
    """Random rules (a ``random_state`` parameter, e.g. NoisyArgmax): validity checks only."""
    return "random_state" in rule.get_params()


@st.composite
def consensus_case(draw, *, exact: bool = False, force_weights: bool = False):
    """A valid consensus input: ``(labels, n_classes, weights)``.

    ``exact``: weights are small integers and probabilities ratios of small integers, so that
    weighted vote counts are exact whatever the order of summation and permutation invariance
    can be checked without rounding ties.
    """
    m = draw(st.integers(1, 6))
    n = draw(st.integers(0, 7))
    c = draw(st.integers(2, 5))
    kind = draw(st.sampled_from(["hard", "soft"]))
    if kind == "hard":
        dtype = draw(st.sampled_from([np.int8, np.int16, np.int32, np.int64]))
        labels = draw(hnp.arrays(dtype, (m, n), elements=st.integers(-1, c - 1)))
    else:
        if exact:
            units = draw(hnp.arrays(np.int64, (m, n, c), elements=st.integers(0, 4)))
        else:
            units = draw(
                hnp.arrays(
                    np.float64,
                    (m, n, c),
                    elements=st.floats(0, 1, allow_subnormal=True) | st.just(0.0),
                )
            )
        units = units.astype(np.float64)
        empty = units.sum(axis=2) == 0
        units[empty] = 1.0
        labels = units / units.sum(axis=2, keepdims=True)
        absent = draw(hnp.arrays(np.bool_, (m, n)))
        labels[absent] = np.nan
        if not exact and draw(st.booleans()):
            labels = labels.astype(np.float32)
    shape = draw(st.sampled_from([(m,), (m, n)] + ([] if force_weights else [None])))
    if shape is None:
        weights = None
    elif exact:
        weights = draw(hnp.arrays(np.float64, shape, elements=st.sampled_from([0, 1, 2, 3, 8])))
    else:
        weights = draw(
            hnp.arrays(
                np.float64,
                shape,
                elements=st.floats(0, 1e300, allow_subnormal=True)
                | st.sampled_from([0.0, 5e-324, 1.0, 1e300]),
            )
        )
    return labels, c, weights


def _voted(labels: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """(n,) whether some client with a positive weight voted on each example."""
    present = labels >= 0 if labels.ndim == 2 else ~np.isnan(labels).all(axis=2)
    if weights is not None:
        w = weights if weights.ndim == 2 else weights[:, None]
        present = present & (np.broadcast_to(w, present.shape) > 0)
    return present.any(axis=0)


def assert_valid_output(rule, out, labels, n_classes, weights) -> None:
    """The documented output contract of a consensus rule."""
    n = labels.shape[1]
    out = np.asarray(out)
    voted = _voted(labels, weights)
    if rule.output == "soft" or (labels.ndim == 3 and out.ndim == 2):
        assert out.shape == (n, n_classes), out.shape
        assert out.dtype.kind == "f", out.dtype
        nan_rows = np.isnan(out).all(axis=1)
        assert not np.isnan(out[~nan_rows]).any(), "a row mixes NaN and numbers"
        # a NaN row exactly where nobody (with a positive weight) voted
        np.testing.assert_array_equal(nan_rows, ~voted)
        rows = out[~nan_rows]
        assert np.isfinite(rows).all() and (rows >= 0).all()
        np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=0, atol=1e-5)
    else:
        assert out.shape == (n,), out.shape
        assert out.dtype == np.int64, out.dtype
        assert ((out >= -1) & (out < n_classes)).all(), out
        assert (out[~voted] == -1).all(), "a label where nobody voted"


@pytest.mark.parametrize("spec", RULES, ids=RULE_IDS)
@SETTINGS
@given(data=st.data())
def test_consensus_output_is_valid_for_any_accepted_input(spec, data):
    rule, needs_weights = _build(spec)
    labels, c, weights = data.draw(consensus_case(force_weights=needs_weights))
    before = (labels.copy(), None if weights is None else weights.copy())
    out = rule(labels, n_classes=c, weights=weights)
    assert_valid_output(rule, out, labels, c, weights)
    # the inputs are left untouched, and a deterministic rule gives the same result again
    np.testing.assert_array_equal(labels, before[0])
    if weights is not None:
        np.testing.assert_array_equal(weights, before[1])
    again = get_consensus(spec[0])
    if not _is_noisy(again):
        np.testing.assert_array_equal(again(labels, n_classes=c, weights=weights), out)


@pytest.mark.parametrize("spec", RULES, ids=RULE_IDS)
@SETTINGS
@given(data=st.data())
def test_consensus_is_invariant_to_client_order(spec, data):
    rule, needs_weights = _build(spec)
    if _is_noisy(rule):
        pytest.skip("random rule: validity only")
    labels, c, weights = data.draw(consensus_case(exact=True, force_weights=needs_weights))
    perm = np.array(data.draw(st.permutations(range(labels.shape[0]))), dtype=np.intp)
    out = rule(labels, n_classes=c, weights=weights)
    permuted = get_consensus(spec[0])(
        labels[perm], n_classes=c, weights=None if weights is None else weights[perm]
    )
    if out.dtype.kind == "f":
        np.testing.assert_allclose(permuted, out, rtol=0, atol=1e-12)
    else:
        np.testing.assert_array_equal(permuted, out)


@pytest.mark.parametrize("spec", RULES, ids=RULE_IDS)
@SETTINGS
@given(data=st.data(), exponent=st.sampled_from([-1074, -1060, -1030, -600, 300, 1015]))
def test_consensus_depends_only_on_weight_ratios(spec, data, exponent):
    # multiplying every weight by 2**exponent (exact, from subnormal to near-overflow scales)
    # changes nothing: weights are relative
    rule, _ = _build(spec)
    if _is_noisy(rule):
        pytest.skip("random rule: validity only")
    labels, c, weights = data.draw(consensus_case(exact=True, force_weights=True))
    out = rule(labels, n_classes=c, weights=weights)
    scaled = get_consensus(spec[0])(labels, n_classes=c, weights=np.ldexp(weights, exponent))
    if out.dtype.kind == "f":
        np.testing.assert_allclose(scaled, out, rtol=0, atol=1e-12)
    else:
        np.testing.assert_array_equal(scaled, out)


@settings(SETTINGS, max_examples=300)
@given(
    weights=hnp.arrays(np.float64, st.integers(1, 6), elements=st.integers(0, 12)),
    quorum=st.sampled_from([0.5, 0.6, 0.75, 0.8, 0.9, 0.95, 1.0]),
    data=st.data(),
)
def test_qualified_majority_quorum_is_exact_at_any_weight_scale(weights, quorum, data):
    # integer weights w and the same weights in units of the smallest subnormal (exact):
    # the quorum decision is the same, and it is the exact rational comparison
    votes = data.draw(hnp.arrays(np.int64, (weights.size, 1), elements=st.integers(-1, 2)))
    rule = get_consensus("qualified")
    rule.set_params(quorum=quorum)
    out = rule(votes, n_classes=3, weights=weights)
    tiny = rule(votes, n_classes=3, weights=np.ldexp(weights, -1074))
    np.testing.assert_array_equal(tiny, out)
    counts = np.bincount(votes[votes >= 0], weights=weights[votes[:, 0] >= 0], minlength=3)
    if counts.sum() == 0:
        assert out[0] == -1
    else:
        top = int(counts.max())
        met = top * 10**6 >= round(quorum * 10**6) * int(counts.sum())  # exact integers
        assert out[0] == (int(np.argmax(counts)) if met else -1)


def _unanimous_case(data, *, abstentions: bool):
    """Votes where every client that votes agrees: ``(labels, n_classes, weights, expected)``
    with ``expected`` the label (hard) or the shared probability row (soft) of each example."""
    m = data.draw(st.integers(1, 6))
    n = data.draw(st.integers(1, 6))
    c = data.draw(st.integers(2, 5))
    winner = data.draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, c - 1)))
    votes_mask = np.ones((m, n), dtype=bool)
    if abstentions:  # some clients abstain, at least one votes on each example
        votes_mask = data.draw(hnp.arrays(np.bool_, (m, n)))
        votes_mask[data.draw(st.integers(0, m - 1))] = True
    soft = data.draw(st.booleans())
    if soft:
        # one probability row per example, shared by every voter, with a unique argmax
        rows = data.draw(hnp.arrays(np.float64, (n, c), elements=st.floats(0, 1)))
        rows[np.arange(n), winner] = 2.0 + rows.max(axis=1)
        rows /= rows.sum(axis=1, keepdims=True)
        labels = np.broadcast_to(rows, (m, n, c)).copy()
        labels[~votes_mask] = np.nan
    else:
        rows = np.eye(c)[winner]
        labels = np.where(votes_mask, winner, -1)
    weights = None
    if data.draw(st.booleans()):
        weights = data.draw(hnp.arrays(np.float64, (m,), elements=st.sampled_from([0.5, 1, 7])))
        if abstentions and data.draw(st.booleans()):  # a zero weight is another abstention
            weights = np.where(votes_mask, weights[:, None], 0.0)
    return labels, c, weights, (winner, rows)


def _check_unanimity(spec, data, *, abstentions: bool) -> None:
    rule, needs_weights = _build(spec)
    labels, c, weights, (winner, rows) = _unanimous_case(data, abstentions=abstentions)
    if needs_weights and weights is None:
        weights = np.ones(labels.shape[0])
    out = rule(labels, n_classes=c, weights=weights)
    assert_valid_output(rule, out, labels, c, weights)
    if _is_noisy(rule):
        return
    if out.ndim == 2:
        np.testing.assert_allclose(out, rows, rtol=0, atol=1e-9)
    else:
        np.testing.assert_array_equal(out, winner)


@pytest.mark.parametrize("spec", RULES, ids=RULE_IDS)
@SETTINGS
@given(data=st.data())
def test_consensus_unanimity_gives_that_label(spec, data):
    _check_unanimity(spec, data, abstentions=False)


@pytest.mark.parametrize("spec", RULES, ids=RULE_IDS)
@SETTINGS
@given(data=st.data())
def test_consensus_unanimity_of_the_voters_ignores_abstainers(spec, data):
    # clients that abstain (-1, an all-NaN row, or weight 0) must not overturn the label
    # every voting client agrees on
    _check_unanimity(spec, data, abstentions=True)


# -- hostile consensus inputs -----------------------------------------------------------


@st.composite
def bad_consensus_call(draw):
    """A call outside the documented domain: ``(labels, n_classes, weights, words)``.

    ``words``: the error message must mention one of them (the argument at fault).
    """
    m = draw(st.integers(1, 4))
    n = draw(st.integers(1, 5))
    c = draw(st.integers(2, 4))
    votes = draw(hnp.arrays(np.int64, (m, n), elements=st.integers(-1, c - 1)))
    probs = np.full((m, n, c), 1.0 / c)
    labels, weights, words = votes, np.ones(m), ("labels", "votes", "probabilities")
    what = draw(
        st.sampled_from(
            [
                "ndim",
                "not an array",
                "float votes",
                "bool votes",
                "string votes",
                "object votes",
                "complex probs",
                "string probs",
                "vote too small",
                "vote too large",
                "ragged",
                "nan probs",
                "inf probs",
                "negative probs",
                "partial nan row",
                "wrong n_classes axis",
                "negative weight",
                "nonfinite weight",
                "weight shape",
                "string weights",
                "ragged weights",
                "overflowing weights",
                "n_classes < 1",
                "n_classes not int",
            ]
        )
    )
    if what == "ndim":
        ndim = draw(st.sampled_from([0, 1, 4, 5]))
        labels = np.zeros((1,) * ndim, dtype=np.int64)
    elif what == "not an array":
        labels = draw(st.sampled_from([None, "votes", {"a": 1}, 3, 2.5, object()]))
    elif what == "float votes":
        labels = votes.astype(np.float64)
        if draw(st.booleans()):
            labels[0, 0] = draw(st.sampled_from([np.nan, np.inf, -np.inf, 0.5]))
    elif what == "bool votes":
        labels = votes >= 0
    elif what == "string votes":
        labels = votes.astype(str)
    elif what == "object votes":
        labels = votes.astype(object)
        labels[0, 0] = draw(st.sampled_from([None, "a", 1.5, [1]]))
    elif what == "complex probs":
        labels = probs.astype(complex)
    elif what == "string probs":
        labels = probs.astype(str)
    elif what == "vote too small":
        labels = votes.copy()
        labels[draw(st.integers(0, m - 1)), 0] = draw(st.integers(-(2**62), -2))
    elif what == "vote too large":
        labels = votes.copy()
        labels[draw(st.integers(0, m - 1)), 0] = draw(st.integers(c, 2**62))
    elif what == "ragged":
        labels = [list(row) for row in votes.tolist()] + [[0] * (n + 1)]
    elif what in ("nan probs", "inf probs", "negative probs", "partial nan row"):
        labels = probs.copy()
        i, j, k = (
            draw(st.integers(0, m - 1)),
            draw(st.integers(0, n - 1)),
            draw(st.integers(0, c - 1)),
        )
        labels[i, j, k] = {
            "nan probs": np.nan,
            "partial nan row": np.nan,
            "inf probs": draw(st.sampled_from([np.inf, -np.inf])),
            "negative probs": draw(st.floats(-1e300, -1e-300)),
        }[what]
    elif what == "wrong n_classes axis":
        labels = np.full((m, n, c + draw(st.sampled_from([-1, 1, 5]))), 0.25)
    elif what == "negative weight":
        weights = np.ones(m)
        weights[draw(st.integers(0, m - 1))] = draw(st.floats(-1e300, -1e-300))
        words = ("weights",)
    elif what == "nonfinite weight":
        weights = np.ones((m, n))
        weights[0, draw(st.integers(0, n - 1))] = draw(st.sampled_from([np.nan, np.inf]))
        words = ("weights",)
    elif what == "weight shape":
        shape = draw(st.sampled_from([(m + 1,), (m, n + 1), (m + 1, n), (m, n, 1), ()]))
        weights = np.ones(shape)
        words = ("weights",)
    elif what == "string weights":
        weights = np.array(["1"] * m)
        words = ("weights",)
    elif what == "ragged weights":
        weights = [[1.0] * n] * (m - 1) + [[1.0] * (n + 1)]
        words = ("weights",)
    elif what == "overflowing weights":
        # finite, but their sum over the clients is not: the counts would overflow
        weights = np.full(m + 1, 1.7e308)
        labels = np.zeros((m + 1, n), dtype=np.int64)
        words = ("weights",)
    elif what == "n_classes < 1":
        c = draw(st.integers(-(2**40), 0))
        words = ("n_classes",)
    else:
        c = draw(st.sampled_from([2.0, "2", None, True, 2 + 0j, np.float64(3)]))
        words = ("n_classes",)
    return labels, c, weights, words, what


@pytest.mark.parametrize("spec", RULES, ids=RULE_IDS)
@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_consensus_refuses_hostile_input_clearly(spec, data):
    rule, _ = _build(spec)
    labels, c, weights, words, what = data.draw(bad_consensus_call())
    with pytest.raises(CLEAR_ERRORS) as info:
        rule(labels, n_classes=c, weights=weights)
    message = str(info.value)
    assert any(word in message for word in words), (what, message)


# ======================================================================================
# 2. message codecs
# ======================================================================================


def _hard_message(draw) -> bytes:
    c = draw(st.sampled_from([1, 2, 3, 5, 16, 17, 255, 256, 257, 2**16, 2**20, 2**32 - 2]))
    abstain = draw(st.booleans())
    n = draw(st.integers(0, 40))
    codes = draw(hnp.arrays(np.int64, (n,), elements=st.integers(-1 if abstain else 0, c - 1)))
    return HardLabels(codes, c, allow_abstain=abstain).to_bytes()


def _soft_message(draw) -> bytes:
    n, c = draw(st.integers(0, 6)), draw(st.integers(1, 5))
    probs = draw(hnp.arrays(np.float64, (n, c), elements=st.floats(0, 1)))
    if n:
        probs[draw(hnp.arrays(np.bool_, (n,)))] = np.nan
    return SoftLabels(probs, dtype=draw(st.sampled_from(["float32", "float16"]))).to_bytes()


def _quantized_message(draw) -> bytes:
    n, c = draw(st.integers(0, 6)), draw(st.integers(1, 5))
    probs = draw(hnp.arrays(np.float64, (n, c), elements=st.floats(0, 1)))
    probs[probs.sum(axis=1) == 0] = 1.0
    if n:
        probs[draw(hnp.arrays(np.bool_, (n,)))] = np.nan
    return QuantizedSoftLabels(probs, draw(st.integers(1, 16))).to_bytes()


def _delta_message(draw) -> tuple[bytes, np.ndarray | None]:
    c = draw(st.sampled_from([1, 2, 3, 10, 300]))
    abstain = draw(st.booleans())
    n = draw(st.integers(0, 60))
    low = -1 if abstain else 0
    previous = draw(hnp.arrays(np.int64, (n,), elements=st.integers(low, c - 1)))
    codes = previous.copy()
    changed = draw(hnp.arrays(np.bool_, (n,)))
    codes[changed] = draw(st.integers(low, c - 1))
    prev = draw(st.sampled_from([previous, None]))
    data = DeltaHardLabels.encode(
        codes,
        prev,
        c,
        compress=draw(st.sampled_from(["zlib", "lzma", "none"])),
        allow_abstain=abstain,
    )
    return data, previous


@st.composite
def any_message(draw):
    """A valid encoded message of any kind, with the previous labels a delta message needs."""
    kind = draw(st.sampled_from(["hard", "soft", "quantized", "delta"]))
    if kind == "delta":
        return _delta_message(draw)
    maker = {"hard": _hard_message, "soft": _soft_message, "quantized": _quantized_message}
    return maker[kind](draw), None


def _decode_fully(data: Any, previous: Any = None) -> Message | np.ndarray:
    """Decode, and for a delta message also apply it (the CRC is checked there)."""
    message = decode(data)
    if isinstance(message, DeltaHardLabels):
        return message.apply(previous)
    return message


def assert_canonical(message: Message, data: bytes) -> None:
    """A message that decodes re-encodes to exactly the bytes it came from."""
    assert isinstance(message, Message)
    assert message.to_bytes() == bytes(data)
    assert message.nbytes == len(data)


@SETTINGS
@given(st.binary(max_size=300))
def test_decoding_arbitrary_bytes_is_refused_or_canonical(data):
    try:
        message = decode(data)
    except ValueError:
        return
    assert_canonical(message, data)


@st.composite
def forged_message(draw):
    """A header of a known kind with arbitrary flags and sizes (up to 2**32 - 1 labels and
    classes) in front of a short payload, possibly a valid compressed stream."""
    kind = draw(st.integers(1, 4))
    flags = draw(st.integers(0, 255))
    big = st.sampled_from([0, 1, 2, 7, 8, 2**16, 2**31, 2**32 - 2, 2**32 - 1]) | st.integers(
        0, 2**32 - 1
    )
    n, c = draw(big), draw(big)
    body = draw(st.binary(max_size=64))
    if draw(st.booleans()):  # a genuine compressed stream, e.g. a bomb of zero bytes
        size = draw(st.sampled_from([0, 1, 100, 10_000, 1_000_000]))
        if draw(st.booleans()):
            co = zlib.compressobj(9, zlib.DEFLATED, -15)
            body = co.compress(bytes(size)) + co.flush()
        else:
            filters = [{"id": lzma.FILTER_LZMA2, "preset": 9, "dict_size": 1 << 20}]
            body = lzma.compress(bytes(size), format=lzma.FORMAT_RAW, filters=filters)
    extra = struct.pack("<I", draw(st.integers(0, 2**32 - 1))) if kind == 4 else b""
    return struct.pack("<BBII", kind, flags, n, c) + extra + body


@SETTINGS
@given(forged_message())
def test_forged_headers_never_allocate_or_crash(data):
    # a header claiming up to 2**32 - 1 labels must be checked against the payload before
    # anything of that size is allocated (a MemoryError or a hang would fail this test)
    try:
        result = _decode_fully(data)
    except ValueError:
        return
    if isinstance(result, Message):
        assert_canonical(result, data)
    else:  # a delta message whose CRC matched: canonical too
        assert_canonical(decode(data), data)


@FEW
@given(any_message())
def test_every_bytes_like_type_decodes_alike(case):
    encoded, previous = case
    expected = _decode_fully(encoded, previous)
    strided = np.zeros(2 * len(encoded), dtype=np.uint8)
    strided[::2] = np.frombuffer(encoded, dtype=np.uint8)
    for data in (
        bytearray(encoded),
        memoryview(encoded),
        memoryview(strided)[::2],  # not contiguous
        memoryview(np.frombuffer(encoded, dtype=np.uint8).reshape(1, -1)),  # 2-D
    ):
        result = _decode_fully(data, previous)
        if isinstance(result, Message):
            assert result.to_bytes() == encoded
        else:
            np.testing.assert_array_equal(result, expected)


@SETTINGS
@given(any_message(), st.data())
def test_truncated_messages_are_refused(case, data):
    encoded, previous = case
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(ValueError):
        _decode_fully(encoded[:cut], previous)
    with pytest.raises(ValueError):
        _decode_fully(encoded + data.draw(st.binary(min_size=1, max_size=8)), previous)


@SETTINGS
@given(any_message(), st.data())
def test_flipped_bits_are_refused_or_decode_canonically(case, data):
    encoded, previous = case
    bad = bytearray(encoded)
    for _ in range(data.draw(st.integers(1, 3))):
        bad[data.draw(st.integers(0, len(bad) - 1))] ^= 1 << data.draw(st.integers(0, 7))
    assume(bytes(bad) != encoded)
    try:
        result = _decode_fully(bytes(bad), previous)
    except ValueError:
        return
    # kinds without a CRC may decode another valid message, but never a mangled one;
    # a delta message (CRC-protected) must never decode after a corruption
    assert isinstance(result, Message), "a corrupted DeltaHardLabels message passed its CRC"
    assert_canonical(result, bad)


@FEW
@given(any_message(), st.data())
def test_delta_receiver_state_survives_hostile_messages(case, data):
    wire = WireFormat(n_classes=4, n_public=10, encoding="delta")
    sender, receiver = wire.sender(), wire.receiver()
    codes = data.draw(hnp.arrays(np.int64, (10,), elements=st.integers(0, 3)))
    receiver.decode(sender.encode(codes, round=1, ref_round=0), round=1)
    hostile = data.draw(st.sampled_from([case[0], case[0][:5], b"", bytes(30)]))
    try:
        decoded = receiver.decode(hostile, round=2)
    except MalformedMessage:  # unchanged by the failure
        assert receiver.ref_round == 1
        np.testing.assert_array_equal(receiver.state_dict()["codes"], codes)
    else:
        assert receiver.ref_round == 2
        np.testing.assert_array_equal(receiver.state_dict()["codes"], decoded)
    before = receiver.state_dict()
    with pytest.raises(MalformedMessage, match="bytes"):  # not bytes: refused, state kept
        receiver.decode("not bytes", round=3)
    assert receiver.ref_round == before["round"]
    np.testing.assert_array_equal(receiver.state_dict()["codes"], before["codes"])


NOT_BYTES = st.one_of(
    st.none(),
    st.integers(),
    st.floats(),
    st.text(),
    st.lists(st.integers(0, 255), max_size=20),
    st.just(np.zeros(20, dtype=np.uint8)),
    st.just(object()),
)


@FEW
@given(NOT_BYTES)
def test_decoding_non_bytes_is_a_type_error(value):
    with pytest.raises(TypeError):
        decode(value)
    for cls in (HardLabels, SoftLabels, QuantizedSoftLabels, DeltaHardLabels):
        with pytest.raises(TypeError):
            cls.from_bytes(value)
    with pytest.raises(TypeError):
        DeltaHardLabels.decode(value, None)


@FEW
@given(any_message(), st.data())
def test_decoding_with_the_wrong_class_is_refused(case, data):
    encoded, _ = case
    kind = type(decode(encoded))
    other = data.draw(
        st.sampled_from([c for c in (HardLabels, SoftLabels, QuantizedSoftLabels) if c is not kind])
    )
    with pytest.raises(ValueError, match="expected a"):
        other.from_bytes(encoded)


@FEW
@given(st.data())
def test_delta_apply_refuses_hostile_previous(data):
    previous = np.arange(12) % 3
    codes = previous.copy()
    codes[::4] = (codes[::4] + 1) % 3
    message = decode(DeltaHardLabels.encode(codes, previous, 3, compress="none"))
    assert message.layout != "full"
    hostile = data.draw(
        st.sampled_from(
            [
                None,
                previous[:-1],
                previous.astype(float),
                previous.astype(str),
                previous.reshape(3, 4),
                np.append(previous, 0),
                "abc",
                12,
                (previous + 1) % 3,
            ]
        )
    )
    with pytest.raises(CLEAR_ERRORS):
        message.apply(hostile)
    np.testing.assert_array_equal(message.apply(previous), codes)


# -- constructors: hostile values are refused, awkward valid ones round-trip exactly --------

HOSTILE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.lists(st.integers(-3, 3) | st.floats() | st.none(), max_size=4),
    st.lists(st.lists(st.floats(-1, 2) | st.integers(-1, 3), max_size=3), max_size=4),
    hnp.arrays(hnp.scalar_dtypes(), hnp.array_shapes(min_dims=0, max_dims=3, max_side=3)),
)


@SETTINGS
@given(
    codes=HOSTILE_VALUES,
    n_classes=HOSTILE_VALUES | st.integers(1, 300),
    abstain=st.booleans(),
)
def test_hard_labels_constructor_refuses_or_round_trips(codes, n_classes, abstain):
    try:
        message = HardLabels(codes, n_classes, allow_abstain=abstain)
    except CLEAR_ERRORS:
        return
    back = decode(message.to_bytes())
    np.testing.assert_array_equal(back.codes, np.asarray(codes).astype(np.int64))
    assert back.n_classes == message.n_classes == int(n_classes)


@SETTINGS
@given(probs=HOSTILE_VALUES, dtype=st.sampled_from(["float32", "float16"]))
def test_soft_labels_constructor_refuses_or_round_trips(probs, dtype):
    try:
        message = SoftLabels(probs, dtype=dtype)
    except CLEAR_ERRORS:
        return
    back = decode(message.to_bytes())
    np.testing.assert_array_equal(back.probs, message.probs)
    assert back.probs.dtype == message.probs.dtype


@SETTINGS
@given(probs=HOSTILE_VALUES, bits=HOSTILE_VALUES | st.integers(1, 16))
def test_quantized_constructor_refuses_or_round_trips(probs, bits):
    try:
        message = QuantizedSoftLabels(probs, bits)
    except CLEAR_ERRORS:
        return
    back = decode(message.to_bytes())
    np.testing.assert_array_equal(back.q, message.q)


@SETTINGS
@given(
    rows=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, max_side=5),
        elements=st.floats(0, 1.7e308, allow_subnormal=True)
        | st.sampled_from([0.0, 5e-324, 1e-310, 1e300, 1.7e308]),
    ),
    bits=st.integers(1, 16),
)
def test_quantized_extreme_magnitudes_round_trip(rows, bits):
    # finite non-negative rows of any magnitude (subnormal to near-overflow) are valid input
    rows[(rows == 0).all(axis=1)] = np.nan
    message = QuantizedSoftLabels(rows, bits)
    L = 2**bits - 1
    live = ~np.isnan(rows[:, 0])
    assert (message.q[live].sum(axis=1) == L).all()
    scaled = rows[live] / rows[live].max(axis=1, keepdims=True)  # no overflow, no underflow
    p = scaled / scaled.sum(axis=1, keepdims=True)
    assert (np.abs(message.q[live] / L - p) < 1 / L + 1e-12).all()
    back = decode(message.to_bytes())
    np.testing.assert_array_equal(back.q, message.q)
    np.testing.assert_array_equal(np.isnan(back.probs).all(axis=1), ~live)


@SETTINGS
@given(
    codes=HOSTILE_VALUES,
    previous=HOSTILE_VALUES,
    n_classes=HOSTILE_VALUES | st.integers(1, 300),
    compress=st.sampled_from(["zlib", "lzma", "none", "bz2", None, 1]),
    level=HOSTILE_VALUES | st.integers(0, 9),
    abstain=st.booleans(),
)
def test_delta_encode_refuses_or_round_trips(codes, previous, n_classes, compress, level, abstain):
    try:
        data = DeltaHardLabels.encode(
            codes, previous, n_classes, compress=compress, level=level, allow_abstain=abstain
        )
    except CLEAR_ERRORS:
        return
    decoded = DeltaHardLabels.decode(data, previous)
    np.testing.assert_array_equal(decoded, np.asarray(codes).astype(np.int64).reshape(-1))
    assert len(data) >= DELTA_HEADER_SIZE


@FEW
@given(n_classes=HOSTILE_VALUES, codes=HOSTILE_VALUES)
def test_delta_sender_refuses_without_changing_state(n_classes, codes):
    try:
        n_public = len(codes)
    except TypeError:
        n_public = 1
    try:
        wire = WireFormat(n_classes=n_classes, n_public=n_public, encoding="delta")
    except CLEAR_ERRORS:
        return
    sender = wire.sender()
    sender.load_state_dict({"round": 1, "codes": np.zeros(n_public, dtype=np.int64)})
    try:
        data = sender.encode(codes, round=2, ref_round=1)
    except CLEAR_ERRORS:
        assert sender.state_dict()["round"] == 1
        np.testing.assert_array_equal(sender.state_dict()["codes"], np.zeros(n_public))
        return
    receiver = wire.receiver()
    receiver.load_state_dict({"round": 1, "codes": np.zeros(n_public, dtype=np.int64)})
    np.testing.assert_array_equal(receiver.decode(data, round=2), sender.state_dict()["codes"])


# ======================================================================================
# 3. FederatedCoTrainer.fit with malformed inputs
# ======================================================================================


class FitRecorder(DecisionTreeClassifier):
    """A decision tree that records every ``fit`` (shared across the trainer's clones)."""

    calls: ClassVar[list[int]] = []

    def fit(self, X, y, sample_weight=None, check_input=True):
        FitRecorder.calls.append(len(X))
        return super().fit(X, y, sample_weight=sample_weight, check_input=check_input)

    def __sklearn_tags__(self):
        # stands for a learner without NaN support (trees take NaN since scikit-learn 1.3,
        # and the trainer now lets a NaN-capable learner decide)
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


N_CLIENTS, N_FEATURES, N_ROWS, N_PUBLIC = 3, 4, 8, 10


def _good_inputs(seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "X": [rng.normal(size=(N_ROWS, N_FEATURES)) for _ in range(N_CLIENTS)],
        "y": [np.array([0, 1] * (N_ROWS // 2)) for _ in range(N_CLIENTS)],
        "X_public": rng.normal(size=(N_PUBLIC, N_FEATURES)),
    }


def _ragged(rows: int, cols: int) -> list[list[float]]:
    return [[0.0] * cols for _ in range(rows - 1)] + [[0.0] * (cols + 1)]


# Hostile values for one client's features, with the words the error must contain
# (``{i}`` is the client index).
BAD_FEATURES = [
    ("nan", lambda d, X: _poke(d, X, np.nan), r"X\[{i}\].*NaN"),
    ("inf", lambda d, X: _poke(d, X, d.draw(st.sampled_from([np.inf, -np.inf]))), r"X\[{i}\]"),
    ("1-D", lambda d, X: X[:, 0], r"X\[{i}\]"),
    ("scalar", lambda d, X: d.draw(st.floats() | st.integers() | st.text()), r"X\[{i}\]"),
    ("strings", lambda d, X: X.astype(str).astype(object) + "x", r"X\[{i}\]"),
    (
        "object mix",
        lambda d, X: _poke(
            d, X.astype(object), d.draw(st.sampled_from(["a", None, [1, 2], {"a": 1}, b"x"]))
        ),
        r"X\[{i}\]",
    ),
    ("complex", lambda d, X: X + 1j, r"X\[{i}\]"),
    ("ragged", lambda d, X: _ragged(N_ROWS, N_FEATURES), r"X\[{i}\]"),
    (
        "empty",
        lambda d, X: d.draw(st.sampled_from([np.zeros((0, N_FEATURES)), [], ()])),
        r"client {i} has no training data",
    ),
    ("no features", lambda d, X: np.zeros((N_ROWS, 0)), r"X\[{i}\]"),
    (
        "feature count",
        lambda d, X: np.zeros(
            (N_ROWS, d.draw(st.sampled_from([1, N_FEATURES - 1, N_FEATURES + 1, 50])))
        ),
        r"X\[{i}\].*features",
    ),
    ("image-shaped", lambda d, X: np.zeros((N_ROWS, 1, 2, 2)), r"X\[{i}\]"),
    ("sparse", lambda d, X: scipy.sparse.csr_matrix(X), r"X\[{i}\]"),
    ("dict", lambda d, X: {"a": X[:, 0]}, r"X\[{i}\]"),
    ("none", lambda d, X: None, r"X\[{i}\]"),
]

BAD_LABELS = [
    (
        "nan",
        lambda d, y: _poke(d, y.astype(float), d.draw(st.sampled_from([np.nan, np.inf, -np.inf]))),
        r"y\[{i}\].*NaN or infinite",
    ),
    ("none", lambda d, y: _poke(d, y.astype(object), None), r"y\[{i}\].*missing"),
    (
        "mixed types",
        lambda d, y: _poke(d, y.astype(object), d.draw(st.sampled_from(["a", b"b", 1.5 + 2j]))),
        r"y\[{i}\]",
    ),
    ("length", lambda d, y: y[: d.draw(st.integers(0, len(y) - 1))], r"y\[{i}\].*labels but"),
    ("longer", lambda d, y: np.append(y, [0] * d.draw(st.integers(1, 5))), r"y\[{i}\]"),
    ("2-D", lambda d, y: np.stack([y, y], axis=1), r"y\[{i}\].*1-D"),
    ("scalar", lambda d, y: d.draw(st.integers() | st.text() | st.floats()), r"y\[{i}\]"),
    ("ragged", lambda d, y: [[0]] * (N_ROWS - 1) + [[0, 1]], r"y\[{i}\]"),
    ("none at all", lambda d, y: None, r"y\[{i}\]"),
    ("strings", lambda d, y: np.where(y == 0, "a", "b"), r"y: clients use labels of different"),
    ("complex", lambda d, y: y + 1j, r"y\[{i}\]"),
]


def _poke(data, arr: np.ndarray, value: Any) -> np.ndarray:
    """``arr`` with ``value`` written at one drawn position."""
    arr = np.array(arr, dtype=object if not isinstance(value, float) else arr.dtype)
    index = tuple(data.draw(st.integers(0, s - 1)) for s in arr.shape)
    arr[index] = value
    return arr


def _bad_param(data) -> tuple[dict[str, Any], str]:
    """One hostile constructor parameter and the words its error must contain."""
    name = data.draw(
        st.sampled_from(
            [
                "rounds",
                "participation",
                "min_clients",
                "early_stopping",
                "soft_bits",
                "verbose",
                "n_jobs",
                "round_timeout",
                "random_state",
                "share",
                "soft_dtype",
                "encoding",
                "on_client_error",
                "runtime",
                "consensus",
                "classes",
            ]
        )
    )
    not_int = st.floats(allow_nan=True) | st.text(max_size=3) | st.booleans() | st.none()
    if name == "rounds":
        value = data.draw(st.integers(-(2**63), 0) | not_int | st.just(np.float64(2)))
    elif name == "participation":
        value = data.draw(
            st.floats(max_value=0)
            | st.floats(min_value=1, exclude_min=True)
            | st.just(float("nan"))
            | st.text(max_size=3)
            | st.booleans()
            | st.none()
        )
    elif name in ("min_clients", "early_stopping", "soft_bits"):
        value = data.draw(st.integers(-(2**40), 0) | not_int.filter(lambda v: v is not None))
        if name == "min_clients" and data.draw(st.booleans()):
            value = data.draw(st.integers(N_CLIENTS + 1, 2**40))
        if name == "soft_bits" and data.draw(st.booleans()):
            value = data.draw(st.integers(17, 2**40))
    elif name == "verbose":
        value = data.draw(st.integers(-(2**40), -1) | not_int)
    elif name == "n_jobs":
        value = data.draw(st.just(0) | st.floats() | st.text(max_size=3) | st.booleans())
    elif name == "round_timeout":
        value = data.draw(st.floats(max_value=0) | st.just(float("nan")) | st.text(max_size=2))
    elif name == "random_state":
        value = data.draw(st.floats() | st.text(max_size=3) | st.lists(st.integers(), max_size=2))
    elif name == "consensus":
        value = data.draw(
            st.text(max_size=5).filter(lambda s: s.strip().lower() not in available_consensus())
            | st.integers()
            | st.none()
        )
    elif name == "classes":
        value = data.draw(
            st.sampled_from(
                [
                    [0],
                    [1, 2],
                    [0, 1, 1],
                    [[0, 1]],
                    [0, [1, 2]],
                    [0, "a", None],
                    ["a", "b"],
                    5,
                ]
            )
        )
    else:
        value = data.draw(
            st.text(max_size=6).filter(
                lambda s: (
                    s
                    not in (
                        "hard",
                        "soft",
                        "float32",
                        "float16",
                        "packed",
                        "delta",
                        "raise",
                        "skip",
                        "sequential",
                        "joblib",
                        "ray",
                    )
                )
            )
            | st.integers()
        )
        if name == "runtime" and isinstance(value, int):
            value = object()  # no map() method
    return {name: value}, name


def _bad_fit_call(data) -> tuple[dict[str, Any], dict[str, Any], str, str]:
    """Hostile ``fit`` inputs: (trainer params, fit kwargs, regex the error must match)."""
    inputs = _good_inputs(data.draw(st.integers(0, 2**16)))
    params: dict[str, Any] = {}
    where = data.draw(
        st.sampled_from(
            [
                "features",
                "labels",
                "X_public",
                "structure",
                "param",
                "eval_set",
                "y_public",
                "groups",
            ]
        )
    )
    i = data.draw(st.integers(0, N_CLIENTS - 1))
    if where == "features":
        what, make, match = data.draw(st.sampled_from(BAD_FEATURES))
        inputs["X"][i] = make(data, inputs["X"][i])
        match = match.format(i=i)
    elif where == "labels":
        what, make, match = data.draw(st.sampled_from(BAD_LABELS))
        inputs["y"][i] = make(data, inputs["y"][i])
        match = match.format(i=i)
    elif where == "X_public":
        what, make, _ = data.draw(
            st.sampled_from([b for b in BAD_FEATURES if b[0] not in ("empty", "feature count")])
        )
        inputs["X_public"] = make(data, inputs["X_public"])
        match = "X_public"
        if what == "1-D":
            match = "X_public|X\\[0\\]"  # a 1-D pool of numbers: a 1-D array, not 2-D
    elif where == "structure":
        what = data.draw(
            st.sampled_from(["X not list", "y not list", "fewer X", "fewer y", "no clients"])
        )
        if what == "X not list":
            inputs["X"] = np.concatenate(inputs["X"])
            match = "X must be a list"
        elif what == "y not list":
            inputs["y"] = np.concatenate(inputs["y"])
            match = "y must be a list"
        elif what == "fewer X":
            inputs["X"] = inputs["X"][:-1]
            match = "X has 2 clients but y has 3"
        elif what == "fewer y":
            inputs["y"] = inputs["y"][:-1]
            match = "X has 3 clients but y has 2"
        else:
            inputs["X"], inputs["y"] = [], []
            match = "X and y are empty"
    elif where == "param":
        params, match = _bad_param(data)
        what = f"{match}={next(iter(params.values()))!r}"
        if match == "consensus":
            match = "consensus"
        elif match == "classes":
            match = "classes"
    elif where == "eval_set":
        what = data.draw(st.sampled_from(["not pair", "features", "labels", "label type"]))
        X_eval, y_eval = np.zeros((5, N_FEATURES)), np.zeros(5, dtype=int)
        if what == "not pair":
            inputs["eval_set"] = data.draw(
                st.sampled_from([X_eval, (X_eval,), (X_eval, y_eval, y_eval), {"a": 1}])
            )
        elif what == "features":
            inputs["eval_set"] = (data.draw(st.sampled_from(BAD_FEATURES))[1](data, X_eval), y_eval)
        elif what == "labels":
            inputs["eval_set"] = (
                X_eval,
                data.draw(st.sampled_from([b for b in BAD_LABELS if b[0] != "strings"]))[1](
                    data, y_eval
                ),
            )
        else:
            inputs["eval_set"] = (X_eval, np.array(["a"] * 5))
        match = "eval_set"
    elif where == "y_public":
        what = data.draw(st.sampled_from(["length", "nan", "ragged", "2-D", "label type"]))
        y_public = np.zeros(N_PUBLIC, dtype=int)
        inputs["y_public"] = {
            "length": y_public[:-1],
            "nan": np.full(N_PUBLIC, np.nan),
            "ragged": [[0]] * (N_PUBLIC - 1) + [[0, 1]],
            "2-D": np.zeros((N_PUBLIC, 2)),
            "label type": np.array(["a"] * N_PUBLIC),
        }[what]
        match = "y_public"
    else:
        what = data.draw(st.sampled_from(["length", "2-D", "ragged", "mixed types"]))
        X_all, y_all = np.concatenate(inputs["X"]), np.concatenate(inputs["y"])
        rows = len(y_all)
        inputs["X"], inputs["y"] = X_all, y_all
        inputs["groups"] = {
            "length": np.zeros(rows - 1, dtype=int),
            "2-D": np.zeros((rows, 2), dtype=int),
            "ragged": [[0]] * (rows - 1) + [[0, 1]],
            "mixed types": np.array([0, "a", None] * (rows // 3), dtype=object),
        }[what]
        match = "groups"
    return params, inputs, match, f"{where}: {what}"


@settings(SETTINGS, max_examples=150)
@given(data=st.data())
def test_fit_refuses_malformed_input_before_training(data):
    params, inputs, match, what = _bad_fit_call(data)
    FitRecorder.calls = []
    trainer = FederatedCoTrainer(
        [FitRecorder() for _ in range(N_CLIENTS)], **{"rounds": 1, **params}
    )
    with pytest.raises(CLEAR_ERRORS) as info:
        trainer.fit(inputs.pop("X"), inputs.pop("y"), **inputs)
    assert FitRecorder.calls == [], f"training started before validation ({what})"
    assert info.match(match), (what, str(info.value))


@FEW
@given(seed=st.integers(0, 2**16))
def test_fit_runs_on_the_untouched_inputs(seed):
    # the control for the test above: the same federation, unharmed, does train
    FitRecorder.calls = []
    inputs = _good_inputs(seed)
    trainer = FederatedCoTrainer([FitRecorder() for _ in range(N_CLIENTS)], rounds=1)
    trainer.fit(inputs.pop("X"), inputs.pop("y"), **inputs)
    assert len(FitRecorder.calls) >= N_CLIENTS
