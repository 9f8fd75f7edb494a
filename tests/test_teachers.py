"""cotrain.privacy.mechanisms.teachers: subsample-and-aggregate (PATE inside a client), record-level
DP."""

from __future__ import annotations

import math
import warnings
from collections import Counter

import numpy as np
import pytest
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

from cotrain.privacy.accounting.epsilon import epsilon_spent, gaussian_epsilon
from cotrain.privacy.mechanisms.shards import teacher_shards
from cotrain.privacy.mechanisms.teacher_counts import teacher_votes
from cotrain.privacy.mechanisms.teachers import SubsampleAndAggregate
from learners import ClassAlignedClassifier

CLASSES3 = np.array([0, 1, 2])


def blobs(n: int = 90, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    X = rng.normal(size=(n, 2)) + 4.0 * np.stack([y == 1, y == 2], axis=1)
    return X, y


# ------------------------------------------------------------------ (a) hand-computed aggregate


def test_gnmax_hand_computed_noisy_argmax():
    counts = np.array([[5, 4, 1], [0, 2, 8]])
    # default_rng(6).normal(0, 2, (2, 3)) = [[ 2.106,  3.553, -5.107], [-0.276, 2.027, 2.704]]
    # noisy counts: [[7.106, 7.553, -4.107], [-0.276, 4.027, 10.704]] -> argmax [1, 2]
    noise = np.random.default_rng(6).normal(0.0, 2.0, size=(2, 3))
    np.testing.assert_allclose(
        noise, [[2.10623151, 3.55298261, -5.10658368], [-0.27593012, 2.02743882, 2.70428365]]
    )
    out = SubsampleAndAggregate(sigma=2.0).aggregate_votes(counts, np.random.default_rng(6))
    assert out.dtype == np.int64
    assert out.tolist() == [1, 2]  # the noise overturned the 5-4 margin on the first example
    # tiny noise: the clean argmax
    tiny = SubsampleAndAggregate(sigma=1e-6).aggregate_votes(counts, np.random.default_rng(6))
    assert tiny.tolist() == [0, 2]


def test_rr_aggregate_is_clean_argmax_with_lowest_code_ties_then_rr():
    counts = np.array([[3, 3, 0], [0, 1, 5], [2, 0, 2]])
    huge = SubsampleAndAggregate(epsilon=1e6, aggregate="rr")
    assert huge.aggregate_votes(counts, np.random.default_rng(0)).tolist() == [0, 2, 0]
    # small ε: per-label randomized response at ε/n, keep probability e^{ε'}/(e^{ε'} + K - 1)
    n = 30_000
    many = np.tile([[9, 1, 0]], (n, 1))
    rr = SubsampleAndAggregate(epsilon=3_000.0, aggregate="rr")  # ε' = 0.1 per label
    kept = np.mean(rr.aggregate_votes(many, np.random.default_rng(1)) == 0)
    keep = math.exp(0.1) / (math.exp(0.1) + 2)
    assert abs(kept - keep) < 5 * math.sqrt(keep * (1 - keep) / n)


def test_release_is_aggregate_of_teacher_votes_with_the_same_rng():
    X, y = blobs()
    U = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0], [2.0, 2.0]])
    tree = ClassAlignedClassifier(DecisionTreeClassifier(random_state=0), classes=CLASSES3)
    mech = SubsampleAndAggregate(n_teachers=9, sigma=1.5)
    out = mech.release(tree, X, y, U, CLASSES3, np.random.default_rng(5))
    rng = np.random.default_rng(5)
    counts = teacher_votes(tree, X, y, U, CLASSES3, rng, n_teachers=9)
    assert counts.shape == (4, 3) and counts.dtype == np.int64
    assert counts.sum(axis=1).tolist() == [9, 9, 9, 9]
    assert counts[:3].argmax(axis=1).tolist() == [0, 1, 2]
    assert out.dtype == np.int64 and out.shape == (4,)
    assert out.tolist() == mech.aggregate_votes(counts, rng).tolist()
    assert not hasattr(tree, "estimator_")  # the client's estimator itself is never fitted


def test_teacher_votes_hand_counted_with_pseudo_labeled_rows():
    X = np.arange(6.0)[:, None]
    y = np.array([0, 0, 0, 1, 1, 1])
    U = np.array([[-1.0], [9.0]])
    # the key teacher_votes draws from this rng: records 0-3 to teacher 0, 4-5 to teacher 1
    shards = teacher_shards(X, y, 2, np.random.default_rng(0).bytes(32))
    assert [s.tolist() for s in shards] == [[0, 1, 2, 3], [4, 5]]
    votes = teacher_votes(
        DecisionTreeClassifier(random_state=0),  # a bare learner is wrapped with classes
        X,
        y,
        U,
        np.array([0, 1]),
        np.random.default_rng(0),
        n_teachers=2,
        X_extra=np.array([[-5.0], [20.0]]),
        y_extra=np.array([0, 1]),
    )
    assert votes.tolist() == [[2, 0], [0, 2]]


# ------------------------------------------------------------------ (b) one record, one vote


def test_shards_are_a_keyed_partition_by_record_content_not_position():
    X, y = blobs(103)
    key = np.random.default_rng(3).bytes(32)
    a = teacher_shards(X, y, 10, key)
    assert all(np.array_equal(s, t) for s, t in zip(a, teacher_shards(X, y, 10, key), strict=True))
    assert np.array_equal(np.sort(np.concatenate(a)), np.arange(103))
    # sizes are random (multinomial): measured with this key
    assert [len(s) for s in a] == [len(s) for s in teacher_shards(X, y, 10, key)]
    assert sum(len(s) for s in a) == 103 and max(len(s) for s in a) > 11
    # a record keeps its teacher when the rows are permuted: content, not position
    perm = np.random.default_rng(4).permutation(103)
    b = teacher_shards(X[perm], y[perm], 10, key)
    teacher_a = np.empty(103, dtype=int)
    teacher_b = np.empty(103, dtype=int)
    for j, (s, t) in enumerate(zip(a, b, strict=True)):
        teacher_a[s], teacher_b[t] = j, j
    assert np.array_equal(teacher_b, teacher_a[perm])
    # another key, another assignment; the label is part of the record
    other = teacher_shards(X, y, 10, np.random.default_rng(5).bytes(32))
    assert any(not np.array_equal(s, t) for s, t in zip(a, other, strict=True))
    flipped = teacher_shards(X, (y + 1) % 3, 10, key)
    assert any(not np.array_equal(s, t) for s, t in zip(a, flipped, strict=True))


@pytest.mark.parametrize(
    "learner",
    [KNeighborsClassifier(n_neighbors=1), DecisionTreeClassifier(random_state=0)],
    ids=["1nn", "tree"],
)
@pytest.mark.parametrize("row", [0, 17, 89])
def test_replacing_one_record_moves_at_most_two_votes_per_public_example(learner, row):
    X, y = blobs()
    rng_u = np.random.default_rng(1)
    U = rng_u.uniform(-3, 7, size=(400, 2))
    extra = rng_u.uniform(-3, 7, size=(30, 2))
    y_extra = rng_u.integers(0, 3, size=30)
    X2, y2 = X.copy(), y.copy()
    X2[row], y2[row] = X[row] + np.array([3.0, -2.0]), (y[row] + 1) % 3  # a different record
    est = ClassAlignedClassifier(learner, classes=CLASSES3)
    kw = {"n_teachers": 10, "X_extra": extra, "y_extra": y_extra}
    c1 = teacher_votes(est, X, y, U, CLASSES3, np.random.default_rng(7), **kw)
    c2 = teacher_votes(est, X2, y2, U, CLASSES3, np.random.default_rng(7), **kw)
    moved = np.abs(c1 - c2).sum(axis=1)
    # replace-one = remove then add: the two records may sit with two teachers, each moving
    # one vote (L1 <= 4 per example, L2 <= 2 sqrt(2 n)); add/remove: tests/test_relations.py
    assert moved.max() <= 4
    assert np.linalg.norm(c1 - c2) <= 2 * math.sqrt(2 * len(U))
    assert (moved > 0).any()  # the replaced record did change its teacher's votes
    # removing the record alone moves one teacher: at most one vote per example
    keep = np.arange(len(X)) != row
    c3 = teacher_votes(est, X[keep], y[keep], U, CLASSES3, np.random.default_rng(7), **kw)
    assert np.abs(c1 - c3).sum(axis=1).max() <= 2
    assert np.linalg.norm(c1 - c3) <= math.sqrt(2 * len(U))
    # a single teacher holding all the data: its votes move on many examples, still one each
    d1 = teacher_votes(est, X, y, U, CLASSES3, np.random.default_rng(7), n_teachers=1)
    d2 = teacher_votes(est, X2, y2, U, CLASSES3, np.random.default_rng(7), n_teachers=1)
    assert np.abs(d1 - d2).sum(axis=1).max() <= 2


# ------------------------------------------------------------------ (c) accounting


@pytest.mark.parametrize("n_labels", [1, 50, 1000])
def test_gnmax_event_matches_the_analytic_gaussian(n_labels):
    sigma = 40.0
    event = SubsampleAndAggregate(sigma=sigma).dp_event(10, n_labels)
    z = sigma / math.sqrt(2 * n_labels)
    assert event.noise_multiplier == pytest.approx(z, rel=1e-12)
    assert epsilon_spent([event], 1e-5) == pytest.approx(gaussian_epsilon(z, 1e-5), rel=1e-9)
    # five rounds compose to one Gaussian with z / sqrt(5)
    five = epsilon_spent([event] * 5, 1e-5)
    assert five == pytest.approx(gaussian_epsilon(z / math.sqrt(5), 1e-5), rel=1e-9)


@pytest.mark.parametrize("eps", [0.5, 2.0, 8.0])
def test_epsilon_calibrates_sigma_per_round(eps):
    mech = SubsampleAndAggregate(epsilon=eps, delta=1e-5)
    for n in (10, 1000):
        assert epsilon_spent([mech.dp_event(3, n)], 1e-5) == pytest.approx(eps, rel=1e-6)
    # σ grows with the labels released per round: sqrt(2 n)
    assert mech.noise_std(1000) / mech.noise_std(10) == pytest.approx(10.0, rel=1e-12)


def test_rr_event_is_eps_at_delta_zero_and_less_at_delta():
    mech = SubsampleAndAggregate(epsilon=4.0, aggregate="rr")
    event = mech.dp_event(10, 200)
    assert event.count == 200
    assert epsilon_spent([event], 1e-5, accountant="basic") == pytest.approx(4.0, rel=1e-9)
    assert epsilon_spent([event], 1e-5) < 4.0


def test_nothing_released_is_a_noop():
    mech = SubsampleAndAggregate(sigma=1.0)
    assert epsilon_spent([mech.dp_event(10, 0)], 1e-5) == 0.0
    assert epsilon_spent([mech.dp_event(1, 100)], 1e-5) == 0.0


# ------------------------------------------------------------------ (d) validation


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({}, "exactly one of sigma"),
        ({"sigma": 1.0, "epsilon": 1.0}, "exactly one of sigma"),
        ({"sigma": -1.0}, "sigma must be"),
        ({"sigma": math.inf}, "sigma must be"),
        ({"epsilon": 0.0}, "epsilon must be"),
        ({"sigma": True}, "sigma must be"),
        ({"aggregate": "rr"}, "aggregate='rr' needs epsilon"),
        ({"aggregate": "rr", "epsilon": 1.0, "sigma": 2.0}, "aggregate='rr' needs epsilon"),
        ({"aggregate": "mean", "sigma": 1.0}, "aggregate must be"),
        ({"sigma": 1.0, "n_teachers": 0}, "n_teachers must be"),
        ({"sigma": 1.0, "n_teachers": 2.0}, "n_teachers must be"),
        ({"sigma": 1.0, "delta": 0.0}, "delta"),
        ({"sigma": 1.0, "budget": -3}, "budget"),
    ],
)
def test_invalid_parameters_raise_value_error(kwargs, match):
    mech = SubsampleAndAggregate(**kwargs)  # stored untouched, checked on first use
    with pytest.raises(ValueError, match=match):
        mech.validate()
    with pytest.raises(ValueError, match=match):
        mech.dp_event(3, 10)


def test_more_teachers_than_rows_abstain_or_train_on_the_pool_alone():
    X, y = blobs(12)
    fits: list[int] = []

    class Counting(DecisionTreeClassifier):
        def fit(self, X, y, sample_weight=None, check_input=True):
            fits.append(len(X))
            return super().fit(X, y)

    key_shards = teacher_shards(X, y, 50, np.random.default_rng(0).bytes(32))
    busy = sum(len(s) > 0 for s in key_shards)
    assert busy <= 12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one-row teachers hold a single class
        votes = teacher_votes(Counting(), X, y, X[:3], CLASSES3, np.random.default_rng(0),
                              n_teachers=50)  # fmt: skip
    # no error (nor any message that states the row count): the 50 - busy empty teachers abstain
    assert votes.sum(axis=1).tolist() == [busy] * 3
    # with pseudo-labelled rows, an empty teacher trains on them alone and votes
    fits.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        votes = teacher_votes(Counting(), X, y, X[:3], CLASSES3, np.random.default_rng(0),
                              n_teachers=50, X_extra=X[:3], y_extra=y[:3])  # fmt: skip
    assert votes.sum(axis=1).tolist() == [50] * 3
    assert sorted(fits).count(3) == 50 - busy
    # with no private row at all, every teacher abstains: zero votes, still a valid release
    empty = teacher_votes(Counting(), X[:0], y[:0], X[:2], CLASSES3, np.random.default_rng(0),
                          n_teachers=4)  # fmt: skip
    assert empty.tolist() == [[0, 0, 0], [0, 0, 0]]


def test_threshold_randomize_and_bad_inputs():
    with pytest.raises(ValueError, match=r"threshold \(Confident-GNMax\) must be a number"):
        SubsampleAndAggregate(sigma=1.0, threshold=20.0).validate()  # a share of the teachers
    with pytest.raises(TypeError, match="use release"):
        SubsampleAndAggregate(sigma=1.0).randomize(np.array([0, 1]), 2, np.random.default_rng(0))
    X, y = blobs(30)
    mech = SubsampleAndAggregate(n_teachers=3, sigma=1.0)
    tree = DecisionTreeClassifier(random_state=0)
    with pytest.raises(ValueError, match="X_extra and y_extra"):
        mech.release(tree, X, y, X[:2], CLASSES3, np.random.default_rng(0), X_extra=X[:2])
    with pytest.raises(ValueError, match="y must be 1-D"):
        mech.release(tree, X, y[:-1], X[:2], CLASSES3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="classes must be"):
        mech.release(tree, X, y, X[:2], np.array([2, 1, 0]), np.random.default_rng(0))


def test_declared_kind_unit_adversary_and_params():
    mech = SubsampleAndAggregate(n_teachers=20, epsilon=2.0)
    assert (mech.shares, mech.unit, mech.adversary) == (("hard",), "record", "server")
    assert not mech.reports_events and mech.cross_validated_trust
    assert mech.accountable
    copy = clone(mech, safe=False)
    assert copy.get_params() == mech.get_params()
    assert copy.set_params(n_teachers=5).n_teachers == 5


# ------------------------------------------------------------------ warnings, inputs


class Noisy(ClassifierMixin, BaseEstimator):
    """A learner that warns on every fit (as an unconverged solver would)."""

    def fit(self, X, y):
        warnings.warn("did not converge", RuntimeWarning, stacklevel=2)
        self.tree_ = DecisionTreeClassifier(random_state=0).fit(X, y)
        self.classes_ = self.tree_.classes_
        return self

    def predict(self, X):
        return self.tree_.predict(X)


def test_teacher_warnings_are_reported_once_each_with_a_count():
    X, y = blobs(60)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SubsampleAndAggregate(n_teachers=5, sigma=1.0).release(
            Noisy(), X, y, X[:5], CLASSES3, np.random.default_rng(0)
        )
    assert [str(w.message) for w in caught] == ["5 of 5 teachers: did not converge"]
    assert caught[0].category is RuntimeWarning
    # 21 rows hashed to 21 teachers: the teachers with a single class fit a constant model
    # (one warning each), reported once per class with its count; empty teachers abstain
    shards = teacher_shards(X[:21], y[:21], 21, np.random.default_rng(0).bytes(32))
    busy = [set(y[:21][s].tolist()) for s in shards if len(s)]
    single = Counter(next(iter(c)) for c in busy if len(c) == 1)
    assert len(busy) == 13 and sorted(single.values()) == [2, 2, 4]  # measured with this key
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        votes = teacher_votes(
            DecisionTreeClassifier(),
            X[:21],
            y[:21],
            X[:4],
            CLASSES3,
            np.random.default_rng(0),
            n_teachers=21,
        )
    assert votes.sum(axis=1).tolist() == [13] * 4
    counts = sorted(int(str(w.message).split(" of ")[0]) for w in caught)
    assert counts == sorted(single.values())
    assert all("single class" in str(w.message) and " of 13 teachers" in str(w.message)
               for w in caught)  # fmt: skip


def test_sparse_private_and_extra_rows():
    X, y = blobs(60)
    U = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    votes = teacher_votes(
        DecisionTreeClassifier(random_state=0),
        sparse.csr_matrix(X),
        y,
        U,
        CLASSES3,
        np.random.default_rng(0),
        n_teachers=4,
        X_extra=sparse.csr_matrix(U),
        y_extra=np.array([0, 1, 2]),
    )
    assert votes.tolist() == [[4, 0, 0], [0, 4, 0], [0, 0, 4]]


# ------------------------------------------------------------------ (e) accuracy floor


@pytest.fixture(scope="module")
def digits_client():
    X, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(0).permutation(len(X))
    private, public = perm[:400], perm[400:900]
    model = ClassAlignedClassifier(
        RandomForestClassifier(n_estimators=20, random_state=0), classes=np.arange(10)
    )
    full = model.fit(X[private], y[private]).predict(X[public])
    return X[private], y[private], X[public], y[public], model, full


def test_digits_release_agrees_with_the_full_data_model(digits_client):
    X, y, U, y_u, model, full = digits_client
    mech = SubsampleAndAggregate(n_teachers=20, epsilon=1000.0)
    out = mech.release(model, X, y, U, np.arange(10), np.random.default_rng(0))
    # measured: agreement 0.838 (seeds 0-2: 0.838-0.862), accuracy 0.826; 20 rows per teacher
    assert np.mean(out == full) >= 0.78
    assert np.mean(out == y_u) >= 0.77


def test_digits_teachers_with_the_pseudo_labelled_pool_agree_more(digits_client):
    X, y, U, _, model, full = digits_client
    mech = SubsampleAndAggregate(n_teachers=20, epsilon=1000.0)
    out = mech.release(
        model, X, y, U, np.arange(10), np.random.default_rng(0), X_extra=U[:250], y_extra=full[:250]
    )
    # P is public: teachers trained on it agree with the full-data model far more, also on
    # the public rows outside P (measured 0.916 there, seeds 0-2: 0.916-0.936; 0.838 without P)
    assert np.mean(out[250:] == full[250:]) >= 0.88


# ------------------------------------------------------------------ end to end in the trainer


def test_trainer_accounts_subsample_and_aggregate_per_record():
    from sklearn.datasets import load_breast_cancer

    from cotrain import FederatedCoTrainer

    X, y = load_breast_cancer(return_X_y=True)
    Xs, ys = [X[:100], X[100:200], X[200:300]], [y[:100], y[100:200], y[200:300]]
    fit = {"X_public": X[300:500], "eval_set": (X[500:], y[500:])}
    trees = [DecisionTreeClassifier(random_state=0)] * 3
    mech = SubsampleAndAggregate(n_teachers=5, sigma=30.0)
    trainer = FederatedCoTrainer(trees, rounds=3, random_state=0, privacy=mech, classes=[0, 1]).fit(
        Xs, ys, **fit
    )
    report = trainer.privacy_report()
    assert (report["unit"], report["adversary"]) == ("record", "server")
    # three Gaussian rounds, each with noise multiplier 30 / sqrt(2 * 200)
    expected = gaussian_epsilon(30.0 / math.sqrt(400) / math.sqrt(3), 1e-5)
    assert report["max_epsilon"] == pytest.approx(expected, rel=1e-9)
    assert [c["rounds"] for c in report["clients"]] == [3, 3, 3]
    # a budget stops the run before the round that would exceed it
    one, two = (gaussian_epsilon(1.5 / math.sqrt(r), 1e-5) for r in (1, 2))
    capped = SubsampleAndAggregate(n_teachers=5, sigma=30.0, budget=(one + two) / 2)
    trainer = FederatedCoTrainer(
        trees, rounds=3, random_state=0, privacy=capped, classes=[0, 1]
    ).fit(Xs, ys, **fit)
    assert trainer.stopped_reason_ == "privacy budget"
    assert trainer.privacy_report()["max_epsilon"] == pytest.approx(one, rel=1e-9)


class _NeverFits(DecisionTreeClassifier):
    def fit(self, X, y, sample_weight=None):
        raise AssertionError("the warning must come before any training")


def test_too_many_teachers_for_a_client_is_warned_before_training():
    from cotrain import FederatedCoTrainer

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(n, 3)) for n in (80, 20)]
    y = [(x[:, 0] > 0).astype(int) for x in X]
    trainer = FederatedCoTrainer(
        [_NeverFits(), _NeverFits()],
        rounds=1,
        privacy=SubsampleAndAggregate(n_teachers=50, sigma=1.0),
        classes=[0, 1],
        on_client_error="raise",
    )
    with pytest.warns(UserWarning, match=r"client 1 \(20 rows\): about 17 teachers") as caught:
        with pytest.raises(RuntimeError, match="the warning must come before any training"):
            trainer.fit(X, y, X_public=rng.normal(size=(40, 3)))
    assert not any("client 0" in str(w.message) for w in caught)  # 80 rows: enough
