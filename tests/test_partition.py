"""Tests for cotrain.partition: coverage, balance, skew, determinism, label corruption."""

from __future__ import annotations

import numpy as np
import pytest

from cotrain.partition import dirichlet, iid, label_distribution, shards, two_alpha
from cotrain.robustness.corruption import label_noise, make_byzantine

Y10 = np.repeat(np.arange(10), 300)  # 10 balanced classes, 3000 examples, sorted


def assert_partition(parts: list[np.ndarray], n: int, n_clients: int) -> None:
    """Every index exactly once; int64, sorted, one array per client."""
    assert isinstance(parts, list)
    assert len(parts) == n_clients
    for p in parts:
        assert isinstance(p, np.ndarray)
        assert p.dtype == np.int64
        assert p.ndim == 1
        assert np.all(np.diff(p) > 0)  # sorted ascending, no duplicates within a client
    allidx = np.concatenate(parts)
    assert allidx.size == n  # disjoint ...
    np.testing.assert_array_equal(np.sort(allidx), np.arange(n))  # ... and covering


SPLITTERS = {
    "iid": lambda y, m, rs: iid(y, m, random_state=rs),
    "dirichlet": lambda y, m, rs: dirichlet(y, m, 0.5, random_state=rs),
    "two_alpha": lambda y, m, rs: two_alpha(y, m, 100.0, 0.01, random_state=rs),
    "shards": lambda y, m, rs: shards(y, m, 2, random_state=rs),
}


@pytest.mark.parametrize("name", sorted(SPLITTERS))
@pytest.mark.parametrize("n_clients", [1, 3, 10])
def test_every_splitter_is_an_exact_partition(name, n_clients):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, size=997)
    parts = SPLITTERS[name](y, n_clients, 1)
    assert_partition(parts, y.size, n_clients)


@pytest.mark.parametrize("name", sorted(SPLITTERS))
def test_seeded_determinism_and_seed_sensitivity(name):
    split = SPLITTERS[name]
    a = split(Y10, 5, 42)
    b = split(Y10, 5, 42)
    c = split(Y10, 5, 43)
    for pa, pb in zip(a, b, strict=True):
        np.testing.assert_array_equal(pa, pb)
    assert any(not np.array_equal(pa, pc) for pa, pc in zip(a, c, strict=True))
    # a Generator works too and is consumed
    g = np.random.default_rng(42)
    d = split(Y10, 5, g)
    e = split(Y10, 5, g)
    assert any(not np.array_equal(pd, pe) for pd, pe in zip(d, e, strict=True))


@pytest.mark.parametrize("name", sorted(SPLITTERS))
def test_string_and_object_labels(name):
    y = np.array(["cat", "dog", "bird", "fish"] * 100)
    parts = SPLITTERS[name](y, 4, 0)
    assert_partition(parts, y.size, 4)
    mixed = np.array([1, "a", 2.5, "b"] * 50, dtype=object)  # unorderable labels
    parts = SPLITTERS[name](mixed, 4, 0)
    assert_partition(parts, mixed.size, 4)


# ------------------------------------------------------------------------------------ iid


@pytest.mark.parametrize(("n", "m"), [(10, 3), (100, 7), (5, 5), (1, 1), (1001, 10)])
def test_iid_sizes_differ_by_at_most_one(n, m):
    parts = iid(np.zeros(n), m, random_state=0)
    assert_partition(parts, n, m)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    assert sum(sizes) == n


def test_iid_accepts_a_sample_count():
    by_count = iid(50, 4, random_state=3)
    by_labels = iid(np.arange(50), 4, random_state=3)
    for a, b in zip(by_count, by_labels, strict=True):
        np.testing.assert_array_equal(a, b)


def test_iid_label_shares_are_close_to_global():
    counts = label_distribution(Y10, iid(Y10, 3, random_state=0))
    shares = counts / counts.sum(axis=1, keepdims=True)
    assert np.abs(shares - 0.1).max() < 0.04


# ------------------------------------------------------------------------------ dirichlet


@pytest.mark.parametrize("alpha", [0.01, 0.04, 0.16, 0.64, 2.56, 10.24, 100.0])
def test_dirichlet_sizes_are_balanced(alpha):
    parts = dirichlet(Y10, 10, alpha, random_state=1)
    assert_partition(parts, Y10.size, 10)
    sizes = np.array([len(p) for p in parts])
    # per-class rounding moves a client by < 1 example per class
    assert sizes.max() - sizes.min() <= 10
    assert np.abs(sizes - Y10.size / 10).max() < 10


def test_dirichlet_balances_sizes_with_unequal_classes():
    rng = np.random.default_rng(5)
    y = rng.choice(5, size=3000, p=[0.5, 0.2, 0.15, 0.1, 0.05])
    for alpha in (0.01, 1.0, 100.0):
        sizes = np.array([len(p) for p in dirichlet(y, 7, alpha, random_state=2)])
        assert np.abs(sizes - 3000 / 7).max() < 5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dirichlet_small_alpha_gives_strong_skew(seed):
    counts = label_distribution(Y10, dirichlet(Y10, 10, 0.01, random_state=seed))
    top2 = np.sort(counts, axis=1)[:, -2:].sum(axis=1) / counts.sum(axis=1)
    assert np.mean(top2 >= 0.9) >= 0.8  # most clients: >= 90% of data in <= 2 classes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dirichlet_large_alpha_is_near_uniform(seed):
    counts = label_distribution(Y10, dirichlet(Y10, 10, 100.0, random_state=seed))
    shares = counts / counts.sum(axis=1, keepdims=True)
    assert np.abs(shares - 0.1).max() < 0.06
    assert (counts > 0).all()


def test_dirichlet_skew_decreases_with_alpha():
    def mean_top_share(alpha: float) -> float:
        vals = []
        for seed in range(3):
            c = label_distribution(Y10, dirichlet(Y10, 10, alpha, random_state=seed))
            vals.append(np.mean(c.max(axis=1) / c.sum(axis=1)))
        return float(np.mean(vals))

    shares = [mean_top_share(a) for a in (0.01, 0.16, 2.56, 100.0)]
    assert shares == sorted(shares, reverse=True)


def test_dirichlet_class_counts_are_preserved_exactly():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 6, size=1234)
    counts = label_distribution(y, dirichlet(y, 9, 0.3, random_state=0))
    np.testing.assert_array_equal(counts.sum(axis=0), np.bincount(y))


def test_dirichlet_many_clients_and_one_client():
    y = np.repeat(np.arange(3), 20)
    parts = dirichlet(y, 60, 0.1, random_state=0)  # as many clients as examples
    assert_partition(parts, 60, 60)
    parts = dirichlet(y, 1, 0.1, random_state=0)
    assert_partition(parts, 60, 1)


def test_dirichlet_max_iter_one_still_partitions():
    parts = dirichlet(Y10, 10, 0.01, random_state=0, max_iter=1)
    assert_partition(parts, Y10.size, 10)


# ------------------------------------------------------------------------------ two_alpha


def test_two_alpha_covers_all_and_splits_half_half():
    y = np.tile(np.arange(10), 200)
    rs = 7
    parts = two_alpha(y, 5, 0.01, 0.01, random_state=rs)
    assert_partition(parts, y.size, 5)
    # reproduce the halves: the first draw of the generator is the permutation
    perm = np.random.default_rng(rs).permutation(y.size)
    first = np.zeros(y.size, dtype=bool)
    first[perm[: y.size // 2]] = True
    in_first = sum(int(first[p].sum()) for p in parts)
    assert in_first == y.size // 2
    sizes = np.array([len(p) for p in parts])
    assert np.abs(sizes - y.size / 5).max() <= 2 * 10  # each half balanced to <= C per client


def test_two_alpha_strong_protocol_mixes_iid_and_skewed_halves():
    y = np.tile(np.arange(10), 400)
    counts = label_distribution(y, two_alpha(y, 10, 100.0, 0.01, random_state=0))
    shares = counts / counts.sum(axis=1, keepdims=True)
    # the iid half gives every client every class ...
    assert (counts > 0).all()
    assert shares.min() > 0.02
    # ... the alpha = 0.01 half makes one class stand out on every client
    assert (shares.max(axis=1) > 0.3).mean() >= 0.8


def test_two_alpha_odd_size():
    y = np.arange(11) % 2
    assert_partition(two_alpha(y, 3, 1.0, 2.0, random_state=0), 11, 3)


# --------------------------------------------------------------------------------- shards


def test_shards_limit_classes_per_client():
    for seed in range(5):
        for k in (1, 2, 3):
            parts = shards(Y10, 5, shards_per_client=k, random_state=seed)
            assert_partition(parts, Y10.size, 5)
            n_classes = (label_distribution(Y10, parts) > 0).sum(axis=1)
            assert (n_classes <= 2 * k).all()  # <= k (+1 per shard straddling a boundary)
            sizes = [len(p) for p in parts]
            assert max(sizes) - min(sizes) <= k


def test_shards_aligned_with_classes_give_exact_class_counts():
    parts = shards(Y10, 5, shards_per_client=2, random_state=0)  # shard = exactly one class
    counts = label_distribution(Y10, parts)
    assert ((counts > 0).sum(axis=1) == 2).all()
    assert set(np.unique(counts)) == {0, 300}


def test_shards_are_contiguous_in_label_order():
    y = np.random.default_rng(0).permutation(Y10)
    parts = shards(y, 10, shards_per_client=1, random_state=0)
    for p in parts:
        assert len(np.unique(y[p])) == 1  # one shard of 300 = one whole class


def test_shards_errors():
    with pytest.raises(ValueError, match="shards_per_client"):
        shards(np.arange(10), 4, shards_per_client=3)
    with pytest.raises(ValueError, match="shards_per_client"):
        shards(np.arange(10), 2, shards_per_client=0)


# ---------------------------------------------------------------------------- label_noise


@pytest.mark.parametrize("rate", [0.0, 0.01, 0.2, 0.5, 1.0])
def test_label_noise_flips_exactly(rate):
    y = np.random.default_rng(0).integers(0, 5, size=1003)
    noisy = label_noise(y, rate, random_state=1)
    assert noisy.dtype == y.dtype
    assert noisy.shape == y.shape
    assert int((noisy != y).sum()) == round(rate * y.size)
    assert set(np.unique(noisy)) <= set(np.unique(y))
    assert noisy is not y


def test_label_noise_targets_are_uniform_over_other_classes():
    y = np.zeros(30000, dtype=np.int64)
    noisy = label_noise(y, 1.0, classes=[0, 1, 2, 3], random_state=0)
    assert (noisy != 0).all()
    freq = np.bincount(noisy, minlength=4)[1:] / y.size
    np.testing.assert_allclose(freq, 1 / 3, atol=0.015)


def test_label_noise_string_labels_and_wider_classes():
    y = np.array(["a", "b"] * 50)
    noisy = label_noise(y, 0.3, random_state=0)
    assert noisy.dtype == y.dtype
    assert int((noisy != y).sum()) == 30
    # a given class longer than the dtype of y widens the result instead of truncating it
    noisy = label_noise(y, 1.0, classes=["a", "b", "longer"], random_state=0)
    assert "longer" in set(noisy.tolist())
    assert (noisy != y).all()


def test_label_noise_does_not_modify_input():
    y = np.arange(20) % 3
    before = y.copy()
    label_noise(y, 0.5, random_state=0)
    np.testing.assert_array_equal(y, before)


def test_label_noise_errors():
    y = np.array([0, 1, 0, 1])
    for rate in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="rate"):
            label_noise(y, rate)
    with pytest.raises(TypeError, match="rate"):
        label_noise(y, "0.1")
    with pytest.raises(ValueError, match="two classes"):
        label_noise(np.zeros(10), 0.5)
    with pytest.raises(ValueError, match="not in classes"):
        label_noise(y, 0.5, classes=[0, 2])
    with pytest.raises(ValueError, match="duplicates"):
        label_noise(y, 0.5, classes=[0, 1, 1])
    assert (label_noise(np.zeros(10), 0.0) == 0).all()  # nothing to flip: one class is fine


# ------------------------------------------------------------------------- make_byzantine


def test_byzantine_permuted_is_always_wrong_and_consistent():
    y = np.random.default_rng(0).integers(0, 7, size=2000)
    for seed in range(10):
        bad = make_byzantine(y, "permuted", random_state=seed)
        assert bad.dtype == y.dtype
        assert (bad != y).all()
        # a function of the true label: each class maps to exactly one other class
        mapping = {int(t): set(bad[y == t].tolist()) for t in np.unique(y)}
        assert all(len(v) == 1 for v in mapping.values())
        images = [next(iter(v)) for v in mapping.values()]
        assert sorted(images) == sorted(mapping)  # a permutation of the classes


def test_byzantine_permuted_two_classes_swaps():
    y = np.array(["x", "y", "y", "x"])
    expected = np.array(["y", "x", "x", "y"])
    np.testing.assert_array_equal(make_byzantine(y, "permuted", random_state=0), expected)


def test_byzantine_random_is_uniform_and_independent():
    y = np.zeros(40000, dtype=np.int64)
    bad = make_byzantine(y, "random", classes=[0, 1, 2, 3], random_state=0)
    np.testing.assert_allclose(np.bincount(bad, minlength=4) / y.size, 0.25, atol=0.01)


def test_byzantine_constant():
    y = np.array(["a", "b", "c"] * 10)
    bad = make_byzantine(y, "constant", random_state=0)
    assert len(set(bad.tolist())) == 1
    assert bad[0] in {"a", "b", "c"}
    bad = make_byzantine(y, "constant", constant="b")
    assert (bad == "b").all()
    assert bad.dtype == y.dtype
    with pytest.raises(ValueError, match="constant"):
        make_byzantine(y, "constant", constant="zzz")
    with pytest.raises(ValueError, match="constant"):
        make_byzantine(y, "random", constant="a")


def test_byzantine_errors():
    y = np.array([0, 1, 2])
    with pytest.raises(ValueError, match="kind"):
        make_byzantine(y, "evil")
    with pytest.raises(ValueError, match="two classes"):
        make_byzantine(np.zeros(5), "permuted")
    with pytest.raises(ValueError, match="not in classes"):
        make_byzantine(y, "permuted", classes=[0, 1])


def test_label_corruption_lives_in_robustness_only():
    """One function, one name: the package and the defining module, not partition."""
    from cotrain import partition, robustness
    from cotrain.robustness import corruption

    for name in ("label_noise", "make_byzantine"):
        assert getattr(robustness, name) is getattr(corruption, name), name
        assert name in robustness.__all__
        assert not hasattr(partition, name) and name not in partition.__all__
    assert robustness.BYZANTINE_KINDS == ("random", "constant", "permuted")
    y = np.array([0, 1, 2, 0, 1, 2])
    assert corruption.make_byzantine(y, "constant", constant=1).tolist() == [1] * 6
    with pytest.raises(ValueError, match=r"kind must be one of \('random', 'constant', 'perm"):
        corruption.make_byzantine(y, "evil")


# --------------------------------------------------------------------- label_distribution


def test_label_distribution_counts_and_class_order():
    y = np.array(["b", "a", "b", "c", "a"])
    parts = [np.array([0, 1]), np.array([2, 3, 4]), np.array([], dtype=np.int64)]
    np.testing.assert_array_equal(label_distribution(y, parts), [[1, 1, 0], [1, 1, 1], [0, 0, 0]])
    np.testing.assert_array_equal(
        label_distribution(y, parts, classes=["c", "b", "a", "d"]),
        [[0, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0]],
    )
    with pytest.raises(ValueError, match="outside"):
        label_distribution(y, [np.array([5])])


# --------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("name", sorted(SPLITTERS))
def test_common_input_errors(name):
    split = SPLITTERS[name]
    with pytest.raises(ValueError, match="n_clients"):
        split(np.arange(10), 0, 0)
    with pytest.raises(ValueError, match="n_clients"):
        split(np.arange(10), 11, 0)
    with pytest.raises(TypeError, match="n_clients"):
        split(np.arange(10), 2.5, 0)
    with pytest.raises(ValueError, match="empty"):
        split(np.array([]), 1, 0)
    with pytest.raises(ValueError, match="1-D"):
        split(np.zeros((4, 2)), 2, 0)
    with pytest.raises(TypeError, match="random_state"):
        split(np.arange(10), 2, "seed")


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("nan"), float("inf")])
def test_dirichlet_alpha_errors(alpha):
    with pytest.raises(ValueError, match="alpha"):
        dirichlet(Y10, 3, alpha)
    with pytest.raises(ValueError, match="alpha1"):
        two_alpha(Y10, 3, alpha, 1.0)
    with pytest.raises(ValueError, match="alpha2"):
        two_alpha(Y10, 3, 1.0, alpha)


def test_dirichlet_other_errors():
    with pytest.raises(TypeError, match="alpha"):
        dirichlet(Y10, 3, "1")
    with pytest.raises(ValueError, match="max_iter"):
        dirichlet(Y10, 3, 1.0, max_iter=0)
    with pytest.raises(ValueError, match="y must be"):
        iid(0, 1)
