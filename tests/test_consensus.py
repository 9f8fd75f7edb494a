"""Tests for the `consensus` package: known answers computed by hand, plus a naive reference."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import consensus
from consensus import (
    CertaintyWeighted,
    Consensus,
    EntropyWeighted,
    MajorityVote,
    QualifiedMajority,
    SoftMean,
    available_consensus,
    certainty_weighted,
    entropy_weighted,
    get_consensus,
    majority_vote,
    qualified_majority,
    register_consensus,
    soft_mean,
    vote_counts,
)

NAN = np.nan


def votes_of(*columns: list[int]) -> np.ndarray:
    """Vote matrix (m, n) from one list of m votes per example (easier to read by column)."""
    return np.array(columns, dtype=np.int64).T


# --------------------------------------------------------------------------- majority vote


def test_majority_plain():
    votes = votes_of([0, 0, 1], [1, 1, 0], [2, 1, 1], [2, 2, 2])
    out = majority_vote(votes, n_classes=3)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [0, 1, 1, 2])


def test_majority_ties_break_to_smallest_code():
    votes = votes_of([2, 2, 0, 0], [1, 2, 1, 2], [2, 1, -1, -1], [2, 1, 0, -1], [3, 3, 1, 1])
    np.testing.assert_array_equal(majority_vote(votes, n_classes=4), [0, 1, 1, 0, 1])


def test_majority_ignores_abstentions_and_all_abstain_gives_minus_one():
    # two abstentions outnumber each class, but -1 is not a class
    votes = votes_of([0, -1, -1, 1, 1], [-1, -1, -1, -1, -1], [-1, 2, -1, -1, -1])
    np.testing.assert_array_equal(majority_vote(votes, n_classes=3), [1, -1, 2])


def test_majority_weighted_per_client_flips_outcome():
    votes = votes_of([0, 0, 1])
    assert majority_vote(votes, 2)[0] == 0
    assert majority_vote(votes, 2, weights=[1.0, 1.0, 3.0])[0] == 1  # 2 vs 3
    assert majority_vote(votes, 2, weights=[1.0, 1.0, 2.0])[0] == 0  # 2 vs 2: tie -> 0
    assert majority_vote(votes, 2, weights=np.array([1, 1, 3]))[0] == 1  # integer weights


def test_majority_weighted_per_example_flips_one_outcome():
    votes = votes_of([0, 0, 1], [0, 0, 1])
    weights = np.array([[1.0, 1.0], [1.0, 1.0], [3.0, 1.0]])
    np.testing.assert_array_equal(majority_vote(votes, 2, weights=weights), [1, 0])


def test_majority_zero_weight_votes_count_as_absent():
    votes = votes_of([0, 1], [0, 1])
    np.testing.assert_array_equal(
        majority_vote(votes, 2, weights=np.array([[0.0, 0.0], [0.0, 2.0]])), [-1, 1]
    )


def test_majority_soft_input_reduced_to_argmax():
    probs = np.array(
        [
            [[0.6, 0.4], [0.5, 0.5], [NAN, NAN]],
            [[0.6, 0.4], [0.2, 0.8], [NAN, NAN]],
            [[0.1, 0.9], [0.5, 0.5], [NAN, NAN]],
        ]
    )
    # example 0: the mean favours class 1 (0.433 vs 0.567) but two argmax votes say 0;
    # example 1: rows [0.5, 0.5] vote 0 (first maximum); example 2: nobody voted
    np.testing.assert_array_equal(majority_vote(probs, 2), [0, 0, -1])
    np.testing.assert_array_equal(vote_counts(probs, 2), [[2.0, 1.0], [2.0, 1.0], [0.0, 0.0]])


def test_vote_counts_known_numbers():
    votes = votes_of([0, 1, -1], [2, 2, 2], [-1, -1, -1])
    np.testing.assert_array_equal(
        vote_counts(votes, 3), [[1.0, 1.0, 0.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]]
    )
    np.testing.assert_array_equal(
        vote_counts(votes, 3, weights=[0.5, 2.0, 4.0]),
        [[0.5, 2.0, 0.0], [0.0, 0.0, 6.5], [0.0, 0.0, 0.0]],
    )
    assert vote_counts(votes, 3).dtype == np.float64


@pytest.mark.parametrize(
    "dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint64]
)
def test_vote_dtypes_give_identical_results(dtype):
    rng = np.random.default_rng(1)
    low = 0 if np.issubdtype(dtype, np.unsignedinteger) else -1
    votes = rng.integers(low, 5, size=(7, 300))
    expected = majority_vote(votes, 5)
    np.testing.assert_array_equal(majority_vote(votes.astype(dtype), 5), expected)
    np.testing.assert_array_equal(
        qualified_majority(votes.astype(dtype), 5, quorum=0.4),
        qualified_majority(votes, 5, quorum=0.4),
    )


def test_empty_inputs():
    assert majority_vote(np.empty((3, 0), dtype=np.int64), 2).shape == (0,)
    np.testing.assert_array_equal(majority_vote(np.empty((0, 4), dtype=np.int64), 2), [-1] * 4)
    assert np.isnan(soft_mean(np.empty((0, 2, 3)), 3)).all()
    assert np.isnan(entropy_weighted(np.empty((0, 2, 3)), 3)).all()
    assert soft_mean(np.empty((0, 2, 3)), 3).shape == (2, 3)


# --------------------------------------------------------------------- naive reference


def naive_counts(votes: np.ndarray, n_classes: int, weights: np.ndarray | None) -> np.ndarray:
    m, n = votes.shape
    w = (
        np.ones((m, n))
        if weights is None
        else np.broadcast_to(weights if weights.ndim == 2 else weights[:, None], (m, n))
    )
    counts = np.zeros((n, n_classes))
    for j in range(n):  # a loop over examples: fine in a reference
        voted = votes[:, j] >= 0
        counts[j] = np.bincount(votes[voted, j], weights=w[voted, j], minlength=n_classes)
    return counts


def naive_majority(counts: np.ndarray, quorum: float | None = None) -> np.ndarray:
    out = np.full(len(counts), -1)
    for j, row in enumerate(counts):
        total = row.sum()
        if total > 0 and (quorum is None or row.max() >= quorum * total - 1e-9):
            out[j] = int(np.argmax(row))
    return out


@pytest.mark.parametrize("chunk", [None, 7, 64])  # small blocks exercise the block edges
@pytest.mark.parametrize("weighting", ["none", "client", "example", "integer"])
def test_vectorised_equals_naive_reference(monkeypatch, chunk, weighting):
    kernels = importlib.import_module("consensus._kernels")
    if chunk is not None:
        monkeypatch.setattr(kernels, "CHUNK_ELEMENTS", chunk)
    rng = np.random.default_rng(abs(hash((chunk, weighting))) % 2**32)
    for _ in range(5):
        m, n, n_classes = rng.integers(1, 12), rng.integers(1, 200), rng.integers(1, 6)
        votes = rng.integers(0, n_classes, size=(m, n))
        votes[rng.random((m, n)) < 0.3] = -1
        votes[:, rng.random(n) < 0.1] = -1  # some all-abstain columns
        weights = {
            "none": None,
            "client": rng.random(m),
            "example": rng.random((m, n)) * (rng.random((m, n)) > 0.1),
            "integer": rng.integers(0, 3, size=(m, n)).astype(float),
        }[weighting]
        counts = naive_counts(votes, n_classes, weights)
        np.testing.assert_allclose(vote_counts(votes, n_classes, weights), counts, atol=1e-12)
        if weighting in ("none", "integer"):  # exact counts, so ties are exact too
            np.testing.assert_array_equal(
                majority_vote(votes, n_classes, weights), naive_majority(counts)
            )
            for q in (0.5, 0.6, 1.0):
                np.testing.assert_array_equal(
                    qualified_majority(votes, n_classes, q, weights), naive_majority(counts, q)
                )
        else:
            np.testing.assert_array_equal(
                majority_vote(votes, n_classes, weights), naive_majority(counts)
            )


def test_bincount_argmax_reference_approach_agrees():
    """The reference implementation's per-example bincount().argmax() gives the same labels."""
    rng = np.random.default_rng(3)
    votes = rng.integers(0, 10, size=(5, 2000))
    reference = np.array([np.bincount(votes[:, j], minlength=10).argmax() for j in range(2000)])
    np.testing.assert_array_equal(majority_vote(votes, 10), reference)


# --------------------------------------------------------------------- qualified majority


def test_qm_quorum_exactly_met_despite_float_error():
    nine_of_ten = votes_of([0] * 9 + [1])
    assert qualified_majority(nine_of_ten, 2, quorum=0.9)[0] == 0
    assert qualified_majority(nine_of_ten, 2, quorum=0.91)[0] == -1
    three_of_five = votes_of([1, 1, 1, 0, 2])
    assert qualified_majority(three_of_five, 3, quorum=0.6)[0] == 1
    assert qualified_majority(three_of_five, 3, quorum=0.61)[0] == -1
    # 14 of 25 is exactly 0.56, but 0.56 * 25 == 14.000000000000002 in floating point
    assert 0.56 * 25 > 14
    fourteen_of_25 = votes_of([1] * 14 + [0] * 11)
    assert qualified_majority(fourteen_of_25, 2, quorum=0.56)[0] == 1
    assert qualified_majority(fourteen_of_25, 2, quorum=0.57)[0] == -1
    # float weights: 8 x 0.1 sums to 0.7999999999999999, 0.8 x the total (1.0) is 0.8
    eight_of_ten = votes_of([0] * 8 + [1] * 2)
    assert qualified_majority(eight_of_ten, 2, quorum=0.8, weights=[0.1] * 10)[0] == 0
    assert qualified_majority(eight_of_ten, 2, quorum=0.81, weights=[0.1] * 10)[0] == -1


def test_qm_not_met_and_default_quorum():
    votes = votes_of([0] * 8 + [1] * 2, [0] * 10)
    np.testing.assert_array_equal(qualified_majority(votes, 2), [-1, 0])  # quorum=0.9
    np.testing.assert_array_equal(qualified_majority(votes, 2, quorum=0.8), [0, 0])


def test_qm_share_counts_only_clients_that_voted():
    votes = votes_of([2, 2, 2, 0] + [-1] * 6, [-1] * 10)  # 3 of 4 voters
    np.testing.assert_array_equal(qualified_majority(votes, 3, quorum=0.75), [2, -1])
    np.testing.assert_array_equal(qualified_majority(votes, 3, quorum=0.76), [-1, -1])


def test_qm_unanimity():
    votes = votes_of([0, 0, 0], [0, 0, 1], [1, 1, -1], [-1, -1, -1])
    np.testing.assert_array_equal(qualified_majority(votes, 2, quorum=1.0), [0, -1, 1, -1])


def test_qm_weighted():
    votes = votes_of([0, 0, 1])
    assert qualified_majority(votes, 2, quorum=0.8, weights=[1.0, 1.0, 8.0])[0] == 1  # 8/10
    assert qualified_majority(votes, 2, quorum=0.81, weights=[1.0, 1.0, 8.0])[0] == -1


def test_qm_soft_input():
    probs = np.array([[[0.9, 0.1]], [[0.6, 0.4]], [[0.3, 0.7]]])
    assert qualified_majority(probs, 2, quorum=2 / 3)[0] == 0
    assert qualified_majority(probs, 2, quorum=0.7)[0] == -1


# --------------------------------------------------------------------------- soft mean


def test_soft_mean_known_numbers():
    probs = np.array(
        [
            [[0.8, 0.2], [0.5, 0.5], [NAN, NAN]],
            [[0.4, 0.6], [NAN, NAN], [NAN, NAN]],
        ]
    )
    out = soft_mean(probs, 2)
    np.testing.assert_allclose(out[:2], [[0.6, 0.4], [0.5, 0.5]])
    assert np.isnan(out[2]).all()
    # weighted: (3*0.8 + 1*0.4)/4 = 0.7
    np.testing.assert_allclose(
        soft_mean(probs, 2, weights=[3.0, 1.0])[:2], [[0.7, 0.3], [0.5, 0.5]]
    )
    per_example = np.array([[1.0, 1.0, 1.0], [3.0, 5.0, 1.0]])  # (0.8 + 3*0.4)/4 = 0.5
    np.testing.assert_allclose(
        soft_mean(probs, 2, weights=per_example)[:2], [[0.5, 0.5], [0.5, 0.5]]
    )


def test_soft_mean_weighted_without_absent_rows():
    probs = np.array([[[1.0, 0.0, 0.0]], [[0.0, 0.5, 0.5]]])
    np.testing.assert_allclose(soft_mean(probs, 3), [[0.5, 0.25, 0.25]])
    np.testing.assert_allclose(soft_mean(probs, 3, weights=[1.0, 3.0]), [[0.25, 0.375, 0.375]])


def test_soft_mean_of_hard_votes_is_one_hot_mean():
    votes = votes_of([0, 1, 1, -1], [2, 2, 2, 2], [-1, -1, -1, -1])
    out = soft_mean(votes, 3)
    np.testing.assert_allclose(out[:2], [[1 / 3, 2 / 3, 0.0], [0.0, 0.0, 1.0]])
    assert np.isnan(out[2]).all()
    np.testing.assert_allclose(soft_mean(votes, 3, weights=[2.0, 1.0, 1.0, 0.0])[0], [0.5, 0.5, 0])


# ------------------------------------------------------------------------ entropy weighted


def test_entropy_weighted_explicit_formula():
    p = np.array([[0.7, 0.2, 0.1], [1 / 3, 1 / 3, 1 / 3], [0.1, 0.1, 0.8]])
    k = 2.0
    h = np.array([-sum(q * np.log(q) for q in row) for row in p])  # H = -Σ p log p
    w = np.exp(-k * h) / np.exp(-k * h).sum()  # softmax over clients of -k·H
    expected = (w[:, None] * p).sum(axis=0)
    out = entropy_weighted(p[:, None, :], 3, k=k)
    np.testing.assert_allclose(out[0], expected, rtol=1e-12)
    # by hand: H = 0.80182, 1.09861 (= log 3), 0.63903; exp(-2H) = 0.20116, 1/9, 0.27858
    np.testing.assert_allclose(w, [0.34046, 0.18805, 0.47148], atol=1e-5)
    np.testing.assert_allclose(
        out[0],
        [
            0.34046 * 0.7 + 0.18805 / 3 + 0.47148 * 0.1,
            0.34046 * 0.2 + 0.18805 / 3 + 0.47148 * 0.1,
            0.34046 * 0.1 + 0.18805 / 3 + 0.47148 * 0.8,
        ],
        atol=1e-4,
    )


def test_entropy_weighted_one_hot_client_by_hand():
    probs = np.array([[[1.0, 0.0]], [[0.5, 0.5]]])  # H = 0 and log 2 (0·log 0 = 0)
    # k = 1: weights 1 : 1/2, normalised 2/3 : 1/3 -> [2/3 + 1/6, 1/6]
    np.testing.assert_allclose(entropy_weighted(probs, 2, k=1.0), [[5 / 6, 1 / 6]])


def test_entropy_weighted_k0_equals_soft_mean():
    rng = np.random.default_rng(4)
    probs = rng.dirichlet(np.ones(4), size=(6, 50))
    probs[rng.random((6, 50)) < 0.2] = NAN
    weights = rng.random((6, 50))
    np.testing.assert_allclose(entropy_weighted(probs, 4, k=0), soft_mean(probs, 4))
    np.testing.assert_allclose(
        entropy_weighted(probs, 4, k=0, weights=weights), soft_mean(probs, 4, weights=weights)
    )


def test_entropy_weighted_hard_votes_give_vote_shares():
    votes = votes_of([0, 1, 1, 2], [1, 1, -1, -1])
    expected = [[0.25, 0.5, 0.25], [0.0, 1.0, 0.0]]
    for k in (0.0, 5.0, 100.0):
        np.testing.assert_allclose(entropy_weighted(votes, 3, k=k), expected)


def test_entropy_weighted_confident_client_gets_larger_weight():
    probs = np.array([[[0.95, 0.05]], [[0.4, 0.6]]])
    mean = soft_mean(probs, 2)[0, 0]  # 0.675
    out = entropy_weighted(probs, 2, k=5.0)[0, 0]
    assert out > mean > 0.5
    assert entropy_weighted(probs, 2, k=50.0)[0, 0] > out  # more k, more trust in confidence


def test_entropy_weighted_extra_weights_absent_clients_and_stability():
    probs = np.array([[[0.9, 0.1], [NAN, NAN]], [[0.5, 0.5], [0.2, 0.8]]])
    out = entropy_weighted(probs, 2, k=5.0, weights=[0.0, 1.0])  # client 0 weighted out
    np.testing.assert_allclose(out, [[0.5, 0.5], [0.2, 0.8]])
    out = entropy_weighted(probs, 2, k=5.0, weights=[[1.0, 1.0], [0.0, 0.0]])
    np.testing.assert_allclose(out[0], [0.9, 0.1])
    assert np.isnan(out[1]).all()  # the only voter has weight 0
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # huge k: stable
        out = entropy_weighted(probs, 2, k=1e6)
    np.testing.assert_allclose(out, [[0.9, 0.1], [0.2, 0.8]])


# ----------------------------------------------------------------------- certainty weighted


def test_certainty_weighted_hard_and_soft():
    votes = votes_of([0, 1, 1], [0, 1, 1])
    scores = np.array([[0.9, 0.9], [0.5, 0.2], [0.5, 0.2]])
    out = certainty_weighted(votes, 2, scores)  # 0.9 vs 1.0, then 0.9 vs 0.4
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [1, 0])
    assert certainty_weighted(votes_of([0, 1]), 2, [0.5, 0.5])[0] == 0  # tie -> smallest
    probs = np.array([[[1.0, 0.0]], [[0.0, 1.0]], [[NAN, NAN]]])
    np.testing.assert_allclose(certainty_weighted(probs, 2, [3.0, 1.0, 100.0]), [[0.75, 0.25]])


def test_certainty_weighted_requires_weights():
    with pytest.raises(ValueError, match="needs weights"):
        certainty_weighted(votes_of([0, 1]), 2, None)


def test_certainty_weighted_class():
    scores = np.array([[0.1, 0.2, 0.3], [0.9, 0.9, 0.9], [0.5, 0.0, 0.5]])
    rule = CertaintyWeighted(scores=scores)
    np.testing.assert_array_equal(rule.weights_for([2, 0], n_public=3), scores[[2, 0]])
    np.testing.assert_array_equal(rule.weights_for(np.array([], dtype=int), 3).shape, (0, 3))
    with pytest.raises(ValueError, match="n_public=4"):
        rule.weights_for([0, 1], n_public=4)
    with pytest.raises(ValueError, match="client_ids must lie in"):
        rule.weights_for([0, 3], n_public=3)
    with pytest.raises(TypeError, match="client_ids"):
        rule.weights_for([0.5], n_public=3)
    votes = votes_of([0, 1, 1], [0, 1, 1], [1, 0, 0])
    np.testing.assert_array_equal(rule(votes, n_classes=2), [1, 1, 0])  # scores used as is
    with pytest.raises(ValueError, match="weights_for"):
        rule(votes[:2], n_classes=2)  # 2 rows, scores for 3 clients
    per_client = CertaintyWeighted(scores=[1.0, 2.0, 3.0])
    np.testing.assert_array_equal(per_client.weights_for([1], n_public=999), [2.0])
    assert CertaintyWeighted().weights_for([0, 1], 3) is None
    with pytest.raises(ValueError, match="needs certainty scores"):
        CertaintyWeighted()(votes, n_classes=2)
    with pytest.raises(ValueError, match="scores must be non-negative"):
        CertaintyWeighted(scores=[-1.0, 1.0]).weights_for([0], 3)
    assert CertaintyWeighted.output == "hard"


# ------------------------------------------------------------------------------ classes


def test_classes_delegate_and_describe_themselves():
    votes = votes_of([0, 0, 1], [1, 1, 0], [0, 1, -1])
    probs = np.array([[[0.8, 0.2]], [[0.4, 0.6]]])
    np.testing.assert_array_equal(MajorityVote()(votes, n_classes=2), [0, 1, 0])
    np.testing.assert_array_equal(QualifiedMajority(quorum=0.6)(votes, n_classes=2), [0, 1, -1])
    np.testing.assert_allclose(SoftMean()(probs, n_classes=2), [[0.6, 0.4]])
    np.testing.assert_allclose(
        EntropyWeighted(k=0.0)(probs, n_classes=2, weights=[1.0, 0.0]), [[0.8, 0.2]]
    )
    assert [c.output for c in (MajorityVote, QualifiedMajority, SoftMean, EntropyWeighted)] == [
        "hard",
        "hard",
        "soft",
        "soft",
    ]
    assert repr(QualifiedMajority()) == "QualifiedMajority(quorum=0.9)"
    assert repr(MajorityVote()) == "MajorityVote()"
    assert "shape=(2, 3)" in repr(CertaintyWeighted(np.ones((2, 3))))
    assert EntropyWeighted(k=2).get_params() == {"k": 2}
    rule = QualifiedMajority().set_params(quorum=0.5)
    assert rule.quorum == 0.5
    with pytest.raises(ValueError, match="invalid parameter 'k'"):
        rule.set_params(k=1)
    assert MajorityVote().weights_for([0, 1], 3) is None
    with pytest.raises(TypeError):
        Consensus()  # abstract


def test_parameters_stored_untouched_and_validated_on_call():
    rule = QualifiedMajority(quorum=2)  # no error yet
    assert rule.quorum == 2
    with pytest.raises(ValueError, match="quorum must be in"):
        rule(votes_of([0]), n_classes=1)
    with pytest.raises(ValueError, match="k must be"):
        EntropyWeighted(k=-1)(votes_of([0]), n_classes=1)


def test_sklearn_clone():
    clone = pytest.importorskip("sklearn.base").clone
    rule = QualifiedMajority(quorum=0.7)
    copy = clone(rule)
    assert copy is not rule and copy.quorum == 0.7


# ----------------------------------------------------------------------------- registry


@pytest.mark.parametrize(
    ("names", "cls"),
    [
        (["majority", "majority_vote", "MAJORITY"], MajorityVote),
        (["qualified", "qualified_majority"], QualifiedMajority),
        (["mean", "soft_mean", "dd", "DD"], SoftMean),
        (["entropy", "entropy_weighted", "fedds", "FedDS"], EntropyWeighted),
        (["certainty", "certainty_weighted", "fedaux"], CertaintyWeighted),
    ],
)
def test_registry_names(names, cls):
    for name in names:
        rule = get_consensus(name)
        assert type(rule) is cls
        assert get_consensus(name) is not rule  # a fresh object each time
    assert get_consensus("qualified").quorum == 0.9
    assert get_consensus("fedds").k == 5.0


def test_registry_instances_errors_and_registration(monkeypatch):
    from consensus import registry

    # the names this test registers must not outlive it (other tests list the registry)
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    rule = QualifiedMajority(quorum=0.5)
    assert get_consensus(rule) is rule
    with pytest.raises(ValueError, match=r"unknown consensus 'median'.*majority"):
        get_consensus("median")
    with pytest.raises(ValueError, match=r"did you mean 'majority'\?$"):
        get_consensus("majorty")
    with pytest.raises(TypeError, match=r"name .* or a Consensus instance"):
        get_consensus(3)
    with pytest.raises(TypeError):
        get_consensus(MajorityVote)  # a class, not an instance
    assert {"majority", "qualified", "dd", "fedds", "fedaux"} <= set(available_consensus())
    assert available_consensus() == sorted(available_consensus())

    register_consensus("test_qm_half", partial(QualifiedMajority, quorum=0.5))
    assert get_consensus("test_qm_half").quorum == 0.5
    assert "test_qm_half" in available_consensus()
    with pytest.raises(ValueError, match="already registered"):
        register_consensus("test_qm_half", MajorityVote)
    register_consensus("test_qm_half", MajorityVote, overwrite=True)
    assert type(get_consensus("test_qm_half")) is MajorityVote
    register_consensus("test_not_a_rule", dict)
    with pytest.raises(TypeError, match="not a Consensus"):
        get_consensus("test_not_a_rule")
    with pytest.raises(TypeError, match="callable"):
        register_consensus("test_bad", 42)


# --------------------------------------------------------------------------- validation

V = votes_of([0, 1], [1, 1])  # 2 clients x 2 examples
P = np.full((2, 2, 2), 0.5)  # 2 clients x 2 examples x 2 classes


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: majority_vote(np.zeros(3, dtype=int), 2), ValueError, "ndim=1"),
        (lambda: majority_vote(np.zeros((1, 1, 2, 2)), 2), ValueError, "ndim=4"),
        (lambda: majority_vote(V.astype(float), 2), TypeError, "integer dtype"),
        (lambda: majority_vote(V.astype(bool), 2), TypeError, "integer dtype"),
        (lambda: majority_vote(V - 2, 2), ValueError, r"\[-1, 1\].*\[-2, -1\]"),
        (lambda: majority_vote(V + 1, 2), ValueError, r"lie in \[-1, 1\]"),
        (lambda: soft_mean(P, 3), ValueError, "last dimension n_classes=3"),
        (lambda: soft_mean(P - 0.6, 2), ValueError, "non-negative"),
        (lambda: soft_mean(np.where(P > 0, np.inf, 0), 2), ValueError, "finite"),
        (lambda: soft_mean(np.array([[[0.5, NAN]]]), 2), ValueError, r"labels\[0, 0\] mixes NaN"),
        (lambda: soft_mean(P.astype(complex), 2), TypeError, "real numbers"),
        (lambda: majority_vote(V, 2, weights=[1.0]), ValueError, r"shape \(2,\).*\(2, 2\)"),
        (lambda: majority_vote(V, 2, weights=np.ones((2, 3))), ValueError, "weights must have"),
        (lambda: majority_vote(V, 2, weights=[1.0, -1.0]), ValueError, "non-negative"),
        (lambda: majority_vote(V, 2, weights=[1.0, NAN]), ValueError, "weights must be finite"),
        (lambda: soft_mean(P, 2, weights=[np.inf, 1.0]), ValueError, "weights must be finite"),
        (lambda: majority_vote(V, 2, weights=["a", "b"]), TypeError, "weights must be"),
        (lambda: majority_vote(V, 0), ValueError, "n_classes must be >= 1"),
        (lambda: majority_vote(V, 2.0), TypeError, "n_classes must be an integer"),
        (lambda: majority_vote(V, True), TypeError, "n_classes must be an integer"),
        (lambda: qualified_majority(V, 2, quorum=0), ValueError, r"quorum must be in \(0, 1\]"),
        (lambda: qualified_majority(V, 2, quorum=1.1), ValueError, "quorum must be in"),
        (lambda: qualified_majority(V, 2, quorum=NAN), ValueError, "quorum must be in"),
        (lambda: qualified_majority(V, 2, quorum="0.9"), TypeError, "quorum must be a real"),
        (lambda: entropy_weighted(P, 2, k=-0.1), ValueError, "k must be a finite real"),
        (lambda: entropy_weighted(P, 2, k=np.inf), ValueError, "k must be a finite real"),
        (lambda: entropy_weighted(P, 2, k=NAN), ValueError, "k must be a finite real"),
        (lambda: entropy_weighted(P, 2, k=None), TypeError, "k must be a finite real"),
        (lambda: vote_counts(V, 2, weights=np.ones((2, 2, 1))), ValueError, "weights must have"),
        (lambda: certainty_weighted(P, 2, weights=[1.0]), ValueError, "weights must have"),
    ],
)
def test_validation_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_validation_accepts_lists_and_numpy_scalars():
    np.testing.assert_array_equal(majority_vote([[0, 1], [0, 0]], np.int64(2)), [0, 0])
    np.testing.assert_array_equal(qualified_majority(V, 2, quorum=np.float32(0.5)), [0, 1])
    assert entropy_weighted(P, 2, k=np.float64(1.0)).shape == (2, 2)


# ----------------------------------------------------------------------- package hygiene


@pytest.mark.parametrize(
    "module",
    [
        "consensus",
        "consensus._base",
        "consensus.hard",
        "consensus.soft",
        "consensus.certainty",
        "consensus.registry",
    ],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_every_public_name_has_an_example():
    for name in consensus.__all__:
        assert "Examples" in (getattr(consensus, name).__doc__ or ""), name


def test_consensus_imports_neither_cotrain_nor_learners():
    root = Path(consensus.__file__).resolve().parent.parent
    code = (
        "import sys, consensus; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('cotrain', 'learners')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True)
    for path in Path(consensus.__file__).parent.glob("*.py"):
        text = path.read_text()
        assert "import cotrain" not in text and "from cotrain" not in text, path
        assert "import learners" not in text and "from learners" not in text, path
