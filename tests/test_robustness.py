"""Hostile clients and robust consensus: hand-computed votes and reputations, the simulation
helpers of `cotrain.robustness.hostile`, and a seeded end-to-end check on digits."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.ensemble import ExtraTreesClassifier
from sklearn.tree import DecisionTreeClassifier

from consensus import (
    MajorityVote,
    ReputationVote,
    TrimmedVote,
    client_agreement,
    get_consensus,
    majority_vote,
    trimmed_vote,
)
from cotrain import FederatedCoTrainer, partition
from cotrain.datasets.loaders import load_digits_split
from cotrain.robustness.hostile import (
    CrashingClassifier,
    FitCounter,
    HangingClassifier,
    HostileClassifier,
    make_hostile,
)

# ------------------------------------------------------------------------------ trimmed vote

# columns are examples; client 4 lies on every example and decides example 0 for class 1
LIAR_VOTES = np.array(
    [
        [0, 1, 2],
        [0, 1, 2],
        [1, 1, 2],
        [1, 0, 2],
        [1, 2, 0],
    ]
)


def test_trimmed_vote_drops_the_liar_by_hand():
    # preliminary majority: example 0 has 0,0,1,1,1 -> 1; example 1 -> 1; example 2 -> 2
    np.testing.assert_array_equal(majority_vote(LIAR_VOTES, 3), [1, 1, 2])
    # agreement with [1, 1, 2]: 2/3, 2/3, 1, 2/3, 1/3 -> client 4 (lowest) is trimmed
    np.testing.assert_allclose(
        client_agreement(LIAR_VOTES, [1, 1, 2]), [2 / 3, 2 / 3, 1, 2 / 3, 1 / 3]
    )
    labels, kept = trimmed_vote(LIAR_VOTES, 3, trim=0.2, return_kept=True)
    assert kept.tolist() == [True, True, True, True, False]
    # without client 4, example 0 is a 2-2 tie between 0 and 1 -> the smaller code, 0
    np.testing.assert_array_equal(labels, [0, 1, 2])
    assert labels.dtype == np.int64
    rule = TrimmedVote()
    np.testing.assert_array_equal(rule(LIAR_VOTES, n_classes=3), [0, 1, 2])
    assert rule.kept_.tolist() == kept.tolist()


def test_trimmed_vote_counts_and_ties():
    votes = np.array(
        [[0, 0], [0, 0], [0, 0], [0, 0], [0, 0], [1, 1], [1, 1], [1, 0], [0, 0], [1, 1]]
    )
    # 10 clients, trim 0.2 -> 2 dropped: agreement 1 for the 0-voters, 0.5 for client 7,
    # 0 for clients 5, 6, 9; the ties among the last are broken by row order (5, 6 dropped)
    _, kept = trimmed_vote(votes, 2, trim=0.2, return_kept=True)
    assert np.flatnonzero(~kept).tolist() == [5, 6]
    _, kept = trimmed_vote(votes, 2, trim=0.39, return_kept=True)  # floor(3.9) = 3
    assert np.flatnonzero(~kept).tolist() == [5, 6, 9]
    # at least one client is kept; one client is never trimmed
    _, kept = trimmed_vote(np.array([[0, 0], [1, 0]]), 2, trim=0.99, return_kept=True)
    assert kept.tolist() == [True, False]  # agreement 1 and 1/2
    # clients with the round's highest agreement are never trimmed: a unanimous vote
    # (abstentions aside) stays as it is
    unanimous = np.array([[-1, 2], [1, -1], [-1, -1], [1, 2]])
    labels, kept = trimmed_vote(unanimous, 3, trim=0.5, return_kept=True)
    assert kept.all()
    np.testing.assert_array_equal(labels, [1, 2])
    _, kept = trimmed_vote(votes[:1], 2, trim=0.9, return_kept=True)
    assert kept.tolist() == [True]
    # trim=0 is the plain majority vote, weighted or not
    rng = np.random.default_rng(0)
    v = rng.integers(-1, 4, size=(7, 50))
    w = rng.random(7)
    np.testing.assert_array_equal(trimmed_vote(v, 4, trim=0.0), majority_vote(v, 4))
    np.testing.assert_array_equal(
        trimmed_vote(v, 4, trim=0.0, weights=w), majority_vote(v, 4, weights=w)
    )


def test_trimmed_vote_weights_per_client_and_per_example():
    # the heavy honest client 3 wins the preliminary vote on example 1 (a 3:3 tie -> 0)
    w = np.array([1.0, 1.0, 1.0, 3.0, 1.0])
    labels, kept = trimmed_vote(LIAR_VOTES, 3, weights=w, return_kept=True)
    # preliminary: ex0 0:2 vs 1:5 -> 1; ex1 1:3 vs 0:3 -> 0 (tie); ex2 -> 2
    # agreement with [1, 0, 2]: 1/3, 1/3, 2/3, 1, 1/3 -> one of clients 0, 1, 4 is trimmed
    # (a tie, broken by a digest of the votes); either way the vote gives [1, 0, 2]
    assert kept.sum() == 4 and kept[2] and kept[3]
    np.testing.assert_array_equal(labels, [1, 0, 2])
    per_example = np.broadcast_to(w[:, None], LIAR_VOTES.shape)
    np.testing.assert_array_equal(trimmed_vote(LIAR_VOTES, 3, weights=per_example), labels)
    # a zero-weight client still counts for agreement but not in the vote
    zero = np.array([1.0, 1.0, 1.0, 1.0, 0.0])
    np.testing.assert_array_equal(trimmed_vote(LIAR_VOTES, 3, trim=0.0, weights=zero), [0, 1, 2])


def test_trimmed_vote_does_not_depend_on_client_order():
    rng = np.random.default_rng(3)
    honest = rng.integers(0, 3, size=(1, 40)).repeat(6, axis=0)
    honest[rng.random(honest.shape) < 0.2] = 1  # some disagreement among the honest
    votes = np.vstack([honest, np.full((2, 40), 2), np.full((2, 40), 0)])  # 2 tied blocs
    w = rng.integers(1, 4, size=10).astype(float)
    for weights in (None, w):
        out, kept = trimmed_vote(votes, 3, trim=0.3, weights=weights, return_kept=True)
        for seed in range(5):
            perm = np.random.default_rng(seed).permutation(10)
            pw = None if weights is None else weights[perm]
            out_p, kept_p = trimmed_vote(votes[perm], 3, trim=0.3, weights=pw, return_kept=True)
            np.testing.assert_array_equal(out_p, out)
            # the same multiset of (votes, weight) rows is dropped
            dropped = sorted(map(tuple, votes[~kept].tolist()))
            assert sorted(map(tuple, votes[perm][~kept_p].tolist())) == dropped
        # scaling the weights changes nothing
        if weights is not None:
            np.testing.assert_array_equal(trimmed_vote(votes, 3, 0.3, np.ldexp(w, -1000)), out)


def test_trimmed_vote_soft_input_and_validation():
    probs = np.eye(3)[LIAR_VOTES]  # one-hot (5, 3, 3)
    np.testing.assert_array_equal(trimmed_vote(probs, 3), [0, 1, 2])
    with pytest.raises(ValueError, match=r"trim must be in \[0, 1\)"):
        TrimmedVote(trim=1.0)(LIAR_VOTES, n_classes=3)
    with pytest.raises(TypeError, match="trim must be a real number"):
        trimmed_vote(LIAR_VOTES, 3, trim="0.2")
    with pytest.raises(ValueError, match="lie in"):
        trimmed_vote(LIAR_VOTES, 2)


def test_client_agreement_ignores_abstentions():
    votes = np.array([[0, 1, -1, 1], [-1, -1, -1, 0], [-1, -1, 2, 2]])
    out = client_agreement(votes, np.array([0, 1, 2, -1]))
    np.testing.assert_allclose(out, [1.0, np.nan, 1.0])


# --------------------------------------------------------------------------- reputation


def _round(rule, ids, votes):
    ids = np.asarray(ids)
    pseudo = rule(votes, n_classes=2, weights=rule.weights_for(ids, votes.shape[1]))
    rule.observe(ids, votes, pseudo)
    return pseudo


def three_rounds() -> tuple[ReputationVote, list[np.ndarray]]:
    rule = ReputationVote(decay=0.5)
    pseudos = [
        # round 1, weights 1, 1, 1: client 2 disagrees everywhere
        _round(rule, [0, 1, 2], np.array([[0, 1, 1, 0], [0, 1, 1, 0], [1, 0, 0, 1]])),
        # round 2, weights 1, 1, 0.5
        _round(rule, [0, 1, 2], np.array([[0, 0, 1, 1], [1, 0, 1, 0], [1, 1, 0, 1]])),
        # round 3: client 1 absent, new client 3 (weight 1), abstentions
        _round(rule, [0, 2, 3], np.array([[0, 0, -1, 1], [1, 1, 1, 1], [1, 0, 0, -1]])),
    ]
    return rule, pseudos


def test_reputation_three_rounds_by_hand():
    rule, pseudos = three_rounds()
    # round 1: majority [0, 1, 1, 0]; agreement 1, 1, 0 -> r = 1, 1, 0.5
    np.testing.assert_array_equal(pseudos[0], [0, 1, 1, 0])
    # round 2: ex0 0:1 vs 1:1.5 -> 1; ex1 0:2 vs 1:0.5 -> 0; ex2 1:2 -> 1; ex3 1:1.5 vs 0:1 -> 1
    # agreement 3/4, 3/4, 2/4 -> r = 0.875, 0.875, 0.5
    np.testing.assert_array_equal(pseudos[1], [1, 0, 1, 1])
    # round 3 (weights 0.875, 0.5, 1): ex0 0:0.875 vs 1:1.5 -> 1; ex1 0:1.875 vs 1:0.5 -> 0;
    # ex2 1:0.5 vs 0:1 -> 0; ex3 1:1.375 -> 1; agreement 2/3, 2/4, 3/3
    np.testing.assert_array_equal(pseudos[2], [1, 0, 0, 1])
    expected = [0.5 * 0.875 + 0.5 * 2 / 3, 0.875, 0.5, 1.0]
    np.testing.assert_allclose(rule.reputation_, expected)
    assert rule.rounds_ == 3
    np.testing.assert_allclose(rule.weights_for([3, 2, 7], 4), [1.0, 0.5, 1.0])  # 7: unseen
    # floor: weight = clip((r - floor) / (1 - floor), 0, 1)
    np.testing.assert_allclose(
        rule.set_params(floor=0.5).weights_for([0, 1, 2, 3], 4),
        [(expected[0] - 0.5) / 0.5, 0.75, 0.0, 1.0],
    )


def test_reputation_decay_extremes_and_all_zero_fallback():
    votes, pseudo = np.array([[0, 0], [1, 1]]), np.array([0, 0])
    frozen = ReputationVote(decay=1.0)
    frozen.observe([0, 1], votes, pseudo)
    np.testing.assert_allclose(frozen.weights_for([0, 1], 2), [1.0, 1.0])
    forgetful = ReputationVote(decay=0.0)
    forgetful.observe([0, 1], votes, pseudo)
    np.testing.assert_allclose(forgetful.weights_for([0, 1], 2), [1.0, 0.0])
    # every answering client worthless -> all get weight 1 instead of an empty consensus
    np.testing.assert_allclose(forgetful.weights_for([1], 2), [1.0])
    # without weights the rows are clients 0..m-1
    np.testing.assert_array_equal(forgetful(np.array([[0, 1], [1, 0]]), n_classes=2), [0, 1])


def test_reputation_soft_labels_and_base_rule():
    rule = ReputationVote(decay=0.0, base="trimmed")
    probs = np.eye(2)[np.array([[0, 1, 1], [0, 1, 1], [1, 0, 0]])]
    probs[2, 0] = np.nan  # client 2 did not vote on example 0
    rule.observe([0, 1, 2], probs, np.array([[1.0, 0.0], [0.0, 1.0], [np.nan, np.nan]]))
    # compared where consensus and client both have a label: client 2 only on example 1
    np.testing.assert_allclose(rule.reputation_, [1.0, 1.0, 0.0])
    assert repr(get_consensus(ReputationVote(base=TrimmedVote(trim=0.4)))).startswith("Reputation")
    with pytest.raises(ValueError, match="hard-label consensus"):
        ReputationVote(base="mean")(np.zeros((2, 1), dtype=int), n_classes=2)
    with pytest.raises(ValueError, match="unknown consensus"):
        ReputationVote(base="median")(np.zeros((2, 1), dtype=int), n_classes=2)
    with pytest.raises(ValueError, match=r"decay must be in \[0, 1\]"):
        ReputationVote(decay=1.5).weights_for([0], 1)
    with pytest.raises(ValueError, match=r"floor must be in \[0, 1\)"):
        ReputationVote(floor=1.0).weights_for([0], 1)
    with pytest.raises(ValueError, match="observe needs labels"):
        ReputationVote().observe([0], np.zeros((2, 3), dtype=int), np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="client_ids must be >= 0"):
        ReputationVote().weights_for([-1], 1)


def test_reputation_state_dict_round_trip(tmp_path):
    rule, _ = three_rounds()
    state = rule.state_dict()
    assert set(state) == {"reputation", "rounds"} and state["rounds"] == 3
    state["reputation"][0] = 0.0  # a copy: the rule is unchanged
    assert rule.reputation_[0] > 0.7
    state = rule.state_dict()

    restored = ReputationVote(decay=0.5).load_state_dict(state)
    np.testing.assert_array_equal(restored.reputation_, rule.reputation_)
    assert restored.rounds_ == 3
    # JSON (lists) and npz round trips
    as_json = json.loads(json.dumps({"reputation": state["reputation"].tolist(), "rounds": 3}))
    np.testing.assert_array_equal(
        ReputationVote().load_state_dict(as_json).weights_for([0, 1, 2, 3], 4),
        rule.weights_for([0, 1, 2, 3], 4),
    )
    np.savez(tmp_path / "rep.npz", **state)
    with np.load(tmp_path / "rep.npz") as npz:
        loaded = ReputationVote().load_state_dict(dict(npz))
    np.testing.assert_array_equal(loaded.reputation_, rule.reputation_)
    assert loaded.rounds_ == 3
    # the restored rule goes on exactly like the original
    votes = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [0, 1, 1, 1], [1, 1, 0, 1]])
    np.testing.assert_array_equal(
        _round(restored, [0, 1, 2, 3], votes), _round(rule, [0, 1, 2, 3], votes)
    )
    np.testing.assert_array_equal(restored.reputation_, rule.reputation_)
    # an empty state is a fresh rule; bad states are refused
    assert (
        ReputationVote().load_state_dict(ReputationVote().state_dict()).state_dict()["rounds"] == 0
    )
    with pytest.raises(ValueError, match="keys 'reputation' and 'rounds'"):
        ReputationVote().load_state_dict({"reputation": [1.0]})
    with pytest.raises(ValueError, match=r"values in \[0, 1\]"):
        ReputationVote().load_state_dict({"reputation": [1.5], "rounds": 1})


def test_reputation_clone_and_reset_give_fresh_state():
    rule, _ = three_rounds()
    fresh = clone(rule, safe=False)
    assert fresh.get_params() == rule.get_params()
    assert not hasattr(fresh, "reputation_") and fresh.state_dict()["rounds"] == 0
    np.testing.assert_array_equal(fresh.weights_for([0, 1, 2, 3], 4), np.ones(4))
    assert hasattr(rule, "reputation_")  # the original keeps its state
    rule.reset()
    assert rule.state_dict()["rounds"] == 0
    np.testing.assert_array_equal(rule.weights_for([0, 1, 2, 3], 4), np.ones(4))


def test_registry_names():
    assert type(get_consensus("trimmed")) is TrimmedVote
    assert get_consensus("trimmed_vote").trim == 0.2
    rule = get_consensus("Reputation")
    assert type(rule) is ReputationVote
    assert rule.get_params() == {"base": "majority", "decay": 0.5, "floor": 0.0}
    assert get_consensus("reputation") is not rule


# ------------------------------------------------------------------------ hostile models

X6 = np.arange(6.0).reshape(-1, 1)
Y6 = np.array([0, 0, 1, 1, 2, 2])


def test_hostile_classifier_seeded_outputs():
    def fitted(behavior, seed=0, **kw):
        return HostileClassifier(
            DecisionTreeClassifier(), behavior=behavior, random_state=seed, **kw
        ).fit(X6, Y6)

    # pinned outputs of the documented seeding (regression values)
    assert fitted("random").predict(X6).tolist() == fitted("random").predict(X6).tolist()
    first = fitted("random")
    a, b = first.predict(X6), first.predict(X6)  # a second call draws fresh labels
    assert not np.array_equal(a, b)
    assert a.tolist() == PINNED_RANDOM
    assert set(np.unique(a)) <= {0, 1, 2}
    assert fitted("random", seed=1).predict(X6).tolist() != PINNED_RANDOM

    liar = fitted("permuted")
    assert liar.permutation_.tolist() == PINNED_PERMUTATION
    np.testing.assert_array_equal(liar.predict(X6), np.array(PINNED_PERMUTATION)[Y6])
    assert fitted("constant").constant_ == PINNED_CONSTANT
    np.testing.assert_array_equal(fitted("constant").predict(X6), np.full(6, PINNED_CONSTANT))
    np.testing.assert_array_equal(fitted("constant", constant=1).predict(X6), np.full(6, 1))
    np.testing.assert_array_equal(fitted("noise", rate=0.0).predict(X6), Y6)  # rate 0: honest
    assert np.all(fitted("noise", rate=1.0).predict(X6) != Y6)  # rate 1: always another class

    # the fixed choices depend only on the seed: same seed, other data -> same liar
    other = HostileClassifier(DecisionTreeClassifier(), behavior="permuted", random_state=0).fit(
        X6[::-1], Y6
    )
    assert other.permutation_.tolist() == PINNED_PERMUTATION


PINNED_RANDOM = [2, 2, 2, 0, 1, 1]
PINNED_PERMUTATION = [2, 0, 1]
PINNED_CONSTANT = 2


def test_hostile_permuted_never_honest_and_consistent():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5))
    y = np.array(list("abcde"))[np.argmax(X, axis=1)]
    liar = HostileClassifier(
        DecisionTreeClassifier(random_state=0), behavior="permuted", random_state=3
    )
    liar.fit(X, y)
    honest = liar.estimator_.predict(X)
    lies = liar.predict(X)
    assert lies.dtype == honest.dtype and set(lies) <= set("abcde")
    assert not np.any(lies == honest)
    # a function of the honest class: the same honest class always gives the same lie
    pairs = set(zip(honest.tolist(), lies.tolist(), strict=True))
    assert len(pairs) == 5


def test_hostile_noise_and_random_rates_within_5_sigma():
    n, n_classes, rate = 20_000, 4, 0.3
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, n_classes))
    y = np.argmax(X, axis=1)
    noisy = HostileClassifier(
        DecisionTreeClassifier(random_state=0), behavior="noise", rate=rate, random_state=0
    ).fit(X, y)
    honest = noisy.estimator_.predict(X)
    flipped = noisy.predict(X) != honest
    sigma = np.sqrt(rate * (1 - rate) / n)
    assert abs(flipped.mean() - rate) < 5 * sigma
    random = HostileClassifier(DecisionTreeClassifier(), behavior="random", random_state=0).fit(
        X, y
    )
    shares = np.bincount(random.predict(X), minlength=n_classes) / n
    p = 1 / n_classes
    assert np.all(np.abs(shares - p) < 5 * np.sqrt(p * (1 - p) / n))
    proba = random.predict_proba(X[:10])
    assert proba.shape == (10, n_classes)
    np.testing.assert_array_equal(proba.sum(axis=1), np.ones(10))
    assert set(np.unique(proba)) == {0.0, 1.0}


def test_hostile_classifier_sklearn_conventions_and_errors():
    est = HostileClassifier(
        DecisionTreeClassifier(max_depth=2), behavior="noise", rate=0.2, random_state=1
    )
    copy = clone(est)
    assert copy.get_params(deep=False).keys() == est.get_params(deep=False).keys()
    assert copy.rate == 0.2 and copy.estimator is not est.estimator
    assert copy.get_params()["estimator__max_depth"] == 2
    assert HostileClassifier(DecisionTreeClassifier()).hostile_ is True
    assert not getattr(DecisionTreeClassifier(), "hostile_", False)
    fitted = clone(est).fit(X6, Y6)
    assert fitted.score(X6, Y6) <= 1.0  # ClassifierMixin works on the hostile answers
    for kwargs, match in [
        ({"behavior": "evil"}, "behavior must be one of"),
        ({"rate": 1.5}, "rate must be a probability"),
        ({"behavior": "random", "constant": 1}, "constant is only used"),
        ({"behavior": "constant", "constant": 7}, "not among the training classes"),
        ({"random_state": -1}, "random_state must be"),
    ]:
        with pytest.raises(ValueError, match=match):
            HostileClassifier(DecisionTreeClassifier(), **kwargs).fit(X6, Y6)
    with pytest.raises(ValueError, match="at least two classes"):
        HostileClassifier(DecisionTreeClassifier(), behavior="permuted").fit(X6, np.zeros(6))


def test_crashing_classifier_counts_across_clones():
    proto = CrashingClassifier(DecisionTreeClassifier(), after_fits=2)
    clones = [clone(proto) for _ in range(3)]
    assert all(c.counter is proto.counter for c in clones)
    clones[0].fit(X6, Y6)
    assert clones[1].fit(X6, Y6).predict(X6).tolist() == Y6.tolist()
    with pytest.raises(RuntimeError, match="deliberate crash in fit 3"):
        clones[2].fit(X6, Y6)
    assert proto.counter.count == 3
    proto.counter.reset()
    proto.fit(X6, Y6)  # counting again from 0
    # separately built objects count separately
    assert CrashingClassifier(DecisionTreeClassifier()).counter is not proto.counter
    with pytest.raises(RuntimeError):
        CrashingClassifier(DecisionTreeClassifier()).fit(X6, Y6)  # after_fits=0
    with pytest.raises(ValueError, match="after_fits must be"):
        CrashingClassifier(DecisionTreeClassifier(), after_fits=-1).fit(X6, Y6)
    assert isinstance(proto.counter, FitCounter)


def test_crashing_client_is_skipped_from_its_failing_round(cancer):
    ests = [
        DecisionTreeClassifier(),
        CrashingClassifier(DecisionTreeClassifier(), after_fits=1),
        DecisionTreeClassifier(),
    ]
    trainer = FederatedCoTrainer(  # plain FedCT: one fit per round, so the second fit fails
        ests, rounds=3, random_state=0, on_client_error="skip", trust=None
    ).fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])
    assert [sorted(r.failed) for r in trainer.history_] == [[], [1], [1]]
    assert "deliberate crash" in trainer.history_[1].failed[1]


def test_hanging_classifier_sleeps_after_its_free_fits():
    slow = HangingClassifier(DecisionTreeClassifier(), seconds=0.2, after_fits=1)
    start = time.perf_counter()
    clone(slow).fit(X6, Y6)
    assert time.perf_counter() - start < 0.2
    start = time.perf_counter()
    assert clone(slow).fit(X6, Y6).predict(X6).tolist() == Y6.tolist()
    assert time.perf_counter() - start >= 0.2
    with pytest.raises(ValueError, match="seconds must be"):
        HangingClassifier(DecisionTreeClassifier(), seconds=-1).fit(X6, Y6)


def test_make_hostile_mask_and_wrappers():
    base = [DecisionTreeClassifier(max_depth=d + 1) for d in range(10)]
    ests, mask = make_hostile(base, 0.2, "permuted", random_state=0)
    assert mask.dtype == bool and mask.sum() == 2
    _, mask2 = make_hostile(base, 0.2, "permuted", random_state=0)
    np.testing.assert_array_equal(mask, mask2)
    for i, (est, bad) in enumerate(zip(ests, mask, strict=True)):
        if bad:
            assert isinstance(est, HostileClassifier) and est.estimator is base[i]
            assert est.behavior == "permuted" and est.random_state == i
        else:
            assert est is base[i]
    _, colluding = make_hostile(base, 0.4, "constant", random_state=5, collude=True)
    colluders = make_hostile(base, 0.4, "constant", random_state=5, collude=True)[0]
    assert {colluders[i].random_state for i in np.flatnonzero(colluding)} == {5}
    assert make_hostile(base, 0.0, "random", random_state=0)[1].sum() == 0
    assert make_hostile(base, 1.0, "random", random_state=0)[1].all()
    assert make_hostile(base, 0.25, "random", random_state=0)[1].sum() == 2  # round(2.5) = 2
    crash, cmask = make_hostile(base, 0.3, "crash", random_state=0, after_fits=2)
    crashers = [crash[i] for i in np.flatnonzero(cmask)]
    assert all(isinstance(c, CrashingClassifier) and c.after_fits == 2 for c in crashers)
    assert len({id(c.counter) for c in crashers}) == 3
    noisy, nmask = make_hostile(base, 0.5, "noise", rate=0.3)
    assert all(
        noisy[i].rate == 0.3 and noisy[i].random_state is None for i in np.flatnonzero(nmask)
    )
    hang = make_hostile(base, 0.1, "hang", random_state=0, seconds=0.5)[0]
    assert sum(isinstance(h, HangingClassifier) for h in hang) == 1
    with pytest.raises(ValueError, match="fraction must be"):
        make_hostile(base, 1.2, "random")
    with pytest.raises(ValueError, match="behavior must be one of"):
        make_hostile(base, 0.2, "sneaky")


# -------------------------------------------------------------------------- end to end


def _honest_accuracy(consensus, fraction, kind="random", seed=0):
    data = load_digits_split(random_state=seed)
    parts = partition.iid(data.y_labeled, n_clients=10, random_state=seed)
    ests = [ExtraTreesClassifier(n_estimators=30) for _ in range(10)]
    ests, hostile = make_hostile(ests, fraction, kind, random_state=seed)
    trainer = FederatedCoTrainer(ests, consensus=consensus, rounds=5, random_state=seed)
    trainer.fit(
        [data.X_labeled[p] for p in parts],
        [data.y_labeled[p] for p in parts],
        X_public=data.X_public,
        eval_set=(data.X_test, data.y_test),
    )
    acc = trainer.history_[-1].client_accuracy
    return float(np.mean([acc[i] for i in range(10) if not hostile[i]])), trainer


@pytest.mark.slow
def test_end_to_end_random_label_clients_cost_honest_clients_little():
    honest, _ = _honest_accuracy("majority", 0.0)
    trimmed, _ = _honest_accuracy(TrimmedVote(trim=0.2), 0.2)
    rule = ReputationVote(floor=0.1)
    reputation, trainer = _honest_accuracy(rule, 0.2)
    # measured (seed 0): all honest 0.926; with 2 of 10 clients sending random labels the
    # 8 honest clients reach 0.926 (trimmed) and 0.930 (reputation): margin 0.02 each
    assert honest > 0.9
    assert trimmed >= honest - 0.02
    assert reputation >= honest - 0.02
    # the trainer worked on a clone: the caller's rule has no state, the clone saw 5 rounds
    assert not hasattr(rule, "reputation_")
    assert trainer.consensus_.rounds_ == 5
    hostile = np.array([isinstance(e, HostileClassifier) for e in trainer.estimators])
    reps = trainer.consensus_.reputation_
    assert reps[hostile].max() < reps[~hostile].min()  # the random clients lost their weight


def test_trainer_checks_robust_rules_before_training(cancer):
    for rule, match in [(ReputationVote(decay=2), "decay"), (TrimmedVote(trim=-0.1), "trim")]:
        with pytest.raises(ValueError, match=match):
            FederatedCoTrainer([DecisionTreeClassifier()] * 3, consensus=rule).fit(
                cancer["X"], cancer["y"], X_public=cancer["X_public"]
            )
    assert isinstance(get_consensus("majority"), MajorityVote)
