"""Tests for cotrain.datasets: paper splits, public-pool standardisation, loaders, data_home."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer

from cotrain import datasets
from cotrain.datasets import loaders, paths, splits, tabular
from cotrain.datasets.loaders import PAPER_SPLITS, load_breast_cancer_split, load_paper_split
from cotrain.datasets.paths import data_home
from cotrain.datasets.splits import paper_split
from cotrain.datasets.tabular import load_adult, load_wine_quality

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _real_data(sub: str, *files: str) -> Path:
    """The shared data folder if it has ``sub/files``; skip the test otherwise."""
    try:
        home = data_home()
    except FileNotFoundError as err:
        pytest.skip(f"shared data folder absent (set COTRAIN_DATA to run this test): {err}")
    for f in files:
        if not (home / sub / f).is_file():
            pytest.skip(f"{sub}/{f} not in the data folder {home}; set COTRAIN_DATA to run this")
    return home


WINE_ROWS_RED = [
    "7.4,0.7,0,1.9,0.076,11,34,0.9978,3.51,0.56,9.4,5",
    "7.8,0.88,0,2.6,0.098,25,67,0.9968,3.2,0.68,9.8,5",
    "7.4,0.7,0,1.9,0.076,11,34,0.9978,3.51,0.56,9.4,5",  # duplicate of the first row
    "11.2,0.28,0.56,1.9,0.075,17,60,0.998,3.16,0.58,9.8,6",
]
WINE_ROWS_WHITE = [
    "7,0.27,0.36,20.7,0.045,45,170,1.001,3,0.45,8.8,6",
    "6.3,0.3,0.34,1.6,0.049,14,132,0.994,3.3,0.49,9.5,6",
    "8.1,0.28,0.4,6.9,0.05,30,97,0.9951,3.26,0.44,10.1,7",
]
WINE_HEADER = (
    '"fixed acidity";"volatile acidity";"citric acid";"residual sugar";"chlorides";'
    '"free sulfur dioxide";"total sulfur dioxide";"density";"pH";"sulphates";"alcohol";'
    '"quality"'
)
ADULT_TRAIN = [
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, "
    "Male, 2174, 0, 40, United-States, <=50K",
    "52, Self-emp-inc, 287927, HS-grad, 9, Married-civ-spouse, Exec-managerial, Wife, White, "
    "Female, 15024, 0, 40, United-States, >50K",
    "54, ?, 180211, Some-college, 10, Married-civ-spouse, ?, Husband, Asian-Pac-Islander, Male, "
    "0, 0, 60, South, >50K",
]
ADULT_TEST = [
    "|1x3 Cross validator",
    "25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, "
    "0, 0, 40, United-States, <=50K.",
    "35, Self-emp-inc, 182148, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, "
    "White, Male, 0, 0, 60, Peru, >50K.",
    "",
]


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny data folder (wine in both file formats, adult) selected via COTRAIN_DATA."""
    (tmp_path / "wine_quality").mkdir()
    # red: the shared folder's format (comma, no header); white: the UCI original (';', header)
    (tmp_path / "wine_quality" / "winequality-red.csv").write_text("\n".join(WINE_ROWS_RED))
    (tmp_path / "wine_quality" / "winequality-white.csv").write_text(
        "\n".join([WINE_HEADER, *(r.replace(",", ";") for r in WINE_ROWS_WHITE)]) + "\n"
    )
    (tmp_path / "adult").mkdir()
    (tmp_path / "adult" / "adult-train.csv").write_text("\n".join(ADULT_TRAIN) + "\n")
    (tmp_path / "adult" / "adult-test.csv").write_text("\n".join(ADULT_TEST) + "\n")
    monkeypatch.setenv("COTRAIN_DATA", str(tmp_path))
    return tmp_path


# --------------------------------------------------------------------------------------------
# paper_split and breast cancer (bundled with scikit-learn: always runs)
# --------------------------------------------------------------------------------------------


def test_breast_cancer_split_sizes_and_disjoint():
    d = load_breast_cancer_split(random_state=0)
    assert d.X_public.shape == (370, 30)
    assert d.X_labeled.shape == (85, 30)
    assert d.X_test.shape == (114, 30)
    assert len(d.y_public) == 370 and len(d.y_labeled) == 85 and len(d.y_test) == 114
    parts = [set(d.idx_labeled), set(d.idx_public), set(d.idx_test)]
    assert sum(map(len, parts)) == 569
    assert not (parts[0] & parts[1]) and not (parts[0] & parts[2]) and not (parts[1] & parts[2])
    assert set().union(*parts) == set(range(569))
    assert list(d.target_names) == ["malignant", "benign"]
    assert len(d.feature_names) == 30
    assert "370" in d.description and "public" in d.description


def test_breast_cancer_rows_match_source_unstandardised():
    raw = load_breast_cancer()
    d = load_breast_cancer_split(random_state=3, standardize=False)
    assert d.scaler is None
    np.testing.assert_array_equal(d.X_labeled, raw.data[d.idx_labeled])
    np.testing.assert_array_equal(d.y_test, raw.target[d.idx_test])
    np.testing.assert_array_equal(d.y_public, raw.target[d.idx_public])


def test_split_is_reproducible_and_seed_dependent():
    a = load_breast_cancer_split(random_state=7)
    b = load_breast_cancer_split(random_state=7)
    c = load_breast_cancer_split(random_state=8)
    np.testing.assert_array_equal(a.idx_labeled, b.idx_labeled)
    np.testing.assert_array_equal(a.X_test, b.X_test)
    assert set(a.idx_labeled) != set(c.idx_labeled)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stratification_keeps_class_ratio(seed):
    raw = load_breast_cancer()
    overall = raw.target.mean()  # ~0.627 benign
    d = load_breast_cancer_split(random_state=seed)
    for y in (d.y_labeled, d.y_public, d.y_test):
        # stratified: within one row of the exact proportion
        assert abs(y.mean() - overall) <= 1.0 / len(y) + 1e-9


def test_standardisation_uses_public_pool_only():
    raw = load_breast_cancer()
    d = load_breast_cancer_split(random_state=0)
    np.testing.assert_allclose(d.X_public.mean(axis=0), 0.0, atol=1e-9)
    np.testing.assert_allclose(d.X_public.std(axis=0), 1.0, atol=1e-9)
    # the scaler's statistics are those of the raw public rows, not of all the data
    np.testing.assert_allclose(d.scaler.mean_, raw.data[d.idx_public].mean(axis=0))
    assert not np.allclose(d.scaler.mean_, raw.data.mean(axis=0))
    # the labeled (private) part is transformed, not re-centred on itself
    assert np.abs(d.X_labeled.mean(axis=0)).max() > 0.05
    np.testing.assert_allclose(d.X_labeled, d.scaler.transform(raw.data[d.idx_labeled]))


def test_paper_split_exact_sizes_and_unused_rows():
    X = np.arange(300, dtype=float).reshape(150, 2)
    y = np.array(["a", "b", "c"] * 50)
    s = paper_split(X, y, n_labeled=20, n_public=40, n_test=30, random_state=0)
    assert (len(s.y_labeled), len(s.y_public), len(s.y_test)) == (20, 40, 30)
    idx = np.concatenate([s.idx_labeled, s.idx_public, s.idx_test])
    assert len(np.unique(idx)) == 90
    np.testing.assert_array_equal(s.X_public, X[s.idx_public])
    np.testing.assert_array_equal(s.y_public, y[s.idx_public])
    for part in (s.y_labeled, s.y_public, s.y_test):
        _, counts = np.unique(part, return_counts=True)
        assert counts.max() - counts.min() <= 1


def test_paper_split_accepts_pandas():
    X = pd.DataFrame({"a": range(60), "b": range(60, 120)})
    y = pd.Series([0, 1] * 30)
    s = paper_split(X, y, n_labeled=10, n_public=20, n_test=30, random_state=1)
    assert isinstance(s.X_labeled, pd.DataFrame) and len(s.X_labeled) == 10
    assert isinstance(s.y_test, pd.Series) and len(s.y_test) == 30


def test_paper_split_too_large_names_numbers():
    X, y = np.zeros((50, 2)), np.repeat([0, 1], 25)
    with pytest.raises(ValueError, match=r"n_labeled=30 .*n_public=20 .*n_test=10 .*60.*50"):
        paper_split(X, y, n_labeled=30, n_public=20, n_test=10)


def test_paper_split_bad_arguments():
    X, y = np.zeros((50, 2)), np.repeat([0, 1], 25)
    with pytest.raises(ValueError, match="n_test"):
        paper_split(X, y, n_labeled=5, n_public=5, n_test=-1)
    with pytest.raises(TypeError, match="n_public"):
        paper_split(X, y, n_labeled=5, n_public=5.0, n_test=5)
    with pytest.raises(ValueError, match="49 rows"):
        paper_split(X[:49], y, n_labeled=5, n_public=5, n_test=5)


def test_paper_split_falls_back_when_stratification_impossible():
    X = np.zeros((20, 1))
    y = np.array([0] * 19 + [1])  # class 1 has a single member
    with pytest.warns(UserWarning, match="stratif"):
        s = paper_split(X, y, n_labeled=5, n_public=5, n_test=5, random_state=0)
    assert (len(s.y_labeled), len(s.y_public), len(s.y_test)) == (5, 5, 5)


def test_paper_split_zero_size_part():
    X, y = np.zeros((30, 1)), np.repeat([0, 1], 15)
    s = paper_split(X, y, n_labeled=0, n_public=20, n_test=10, random_state=0)
    assert len(s.y_labeled) == 0 and len(s.y_public) == 20 and len(s.y_test) == 10


def test_paper_splits_table():
    assert PAPER_SPLITS["breast_cancer"] == {"n_public": 370, "n_labeled": 85, "n_test": 114}
    assert PAPER_SPLITS["wine_quality"] == {"n_public": 4100, "n_labeled": 136, "n_test": 1059}
    assert PAPER_SPLITS["adult"] == {"n_public": 10000, "n_labeled": 31073, "n_test": 7769}


def test_load_paper_split_breast_cancer_and_unknown_name():
    d = load_paper_split("breast_cancer", random_state=0)
    e = load_breast_cancer_split(random_state=0)
    np.testing.assert_allclose(d.X_labeled, e.X_labeled)
    assert d.sizes == PAPER_SPLITS["breast_cancer"]
    np.testing.assert_array_equal(d.classes, [0, 1])
    with pytest.raises(ValueError, match="unknown dataset"):
        load_paper_split("mnist")


# --------------------------------------------------------------------------------------------
# data_home
# --------------------------------------------------------------------------------------------


def test_data_home_explicit_path_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("COTRAIN_DATA", str(tmp_path / "nowhere"))
    assert data_home(tmp_path) == tmp_path.resolve()


def test_data_home_env_override(fake_home):
    assert data_home() == fake_home.resolve()


def test_data_home_missing_explicit_and_env(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match=r"data_home=.*COTRAIN_DATA"):
        data_home(tmp_path / "missing")
    monkeypatch.setenv("COTRAIN_DATA", str(tmp_path / "missing-env"))
    with pytest.raises(FileNotFoundError, match=r"COTRAIN_DATA=.*missing-env"):
        data_home()


def test_data_home_nothing_found_lists_tries(tmp_path, monkeypatch):
    monkeypatch.delenv("COTRAIN_DATA", raising=False)
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    fake_module = tmp_path / "x" / "repo" / "cotrain" / "datasets" / "d.py"
    monkeypatch.setattr(paths, "__file__", str(fake_module))
    with pytest.raises(FileNotFoundError) as info:
        data_home()
    msg = str(info.value)
    assert "COTRAIN_DATA" in msg
    assert str(tmp_path / "a" / "shared" / "data") in msg.replace("/b/..", "")
    assert str(tmp_path / "x" / "shared" / "data") in msg


def test_data_home_relative_to_cwd(tmp_path, monkeypatch):
    monkeypatch.delenv("COTRAIN_DATA", raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    assert data_home() == (tmp_path / "shared" / "data").resolve()


def test_loader_missing_file_message(tmp_path, monkeypatch):
    monkeypatch.setenv("COTRAIN_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"wine_quality/winequality-red\.csv"):
        load_wine_quality()
    with pytest.raises(FileNotFoundError, match=r"adult/adult-train\.csv"):
        load_adult()


def test_data_file_finds_a_file_and_names_a_missing_one(fake_home):
    (fake_home / "sub").mkdir(exist_ok=True)
    (fake_home / "sub" / "f.csv").write_text("1,2\n")
    assert paths.data_file(None, "sub", "f.csv") == fake_home.resolve() / "sub" / "f.csv"
    with pytest.raises(FileNotFoundError, match=r"sub/g\.csv not found .*COTRAIN_DATA"):
        paths.data_file(None, "sub", "g.csv")


def test_standardize_on_public_scales_every_part_by_the_pool():
    split = paper_split(
        np.array([[0.0], [2.0], [4.0], [6.0], [10.0]]),
        np.array([0, 1, 0, 1, 0]),
        n_labeled=1,
        n_public=2,
        n_test=2,
        random_state=0,
        stratify=False,
    )
    parts = ("X_labeled", "X_public", "X_test")
    raw = {part: np.asarray(split[part], dtype=float).copy() for part in parts}
    scaler = splits.standardize_on_public(split)
    mean, std = raw["X_public"].mean(), raw["X_public"].std()
    assert scaler.mean_.tolist() == [mean]
    for part, before in raw.items():
        np.testing.assert_allclose(split[part], (before - mean) / std)


def test_split_modules_own_their_names_and_the_package_presents_them():
    """Each name has one home module, presented by ``cotrain.datasets``, not by ``loaders``."""
    moved = {
        "data_home": paths,
        "paper_split": splits,
        "load_adult": tabular,
        "load_wine_quality": tabular,
        "ADULT_COLUMNS": tabular,
        "WINE_FEATURES": tabular,
    }
    for name, home in moved.items():
        assert getattr(datasets, name) is getattr(home, name), name
        assert name not in loaders.__all__


# --------------------------------------------------------------------------------------------
# loaders on a fake tiny data folder (always run)
# --------------------------------------------------------------------------------------------


def test_fake_wine_both_formats_and_dedup(fake_home):
    X, y, names = load_wine_quality()
    assert X.shape == (6, 11)  # 7 rows, one duplicate
    assert X.dtype == float
    assert list(y).count("red") == 3 and list(y).count("white") == 3
    assert names[0] == "fixed acidity" and names[-1] == "alcohol"
    Xq, yq, nq = load_wine_quality(target="quality")
    assert Xq.shape == (6, 12) and nq[-1] == "is_red"
    assert sorted(set(yq.tolist())) == [5, 6, 7]
    np.testing.assert_array_equal(Xq[:, -1], (y == "red").astype(float))
    with pytest.raises(ValueError, match="target"):
        load_wine_quality(target="colour")


def test_fake_wine_standardize(fake_home):
    X, _, _ = load_wine_quality(standardize=True)
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-9)


def test_fake_adult(fake_home):
    X, y, names = load_adult()
    assert X.shape[0] == 4  # the row with '?' dropped, the '|1x3' line and blank line skipped
    assert sorted(set(y.tolist())) == ["<=50K", ">50K"]
    assert not np.isnan(X).any()
    assert names[:6] == [
        "age",
        "fnlwgt",
        "education-num",
        "capital-gain",
        "capital-loss",
        "hours-per-week",
    ]
    assert "native-country_Peru" in names and "workclass_Private" in names
    onehot = X[:, 6:]
    assert set(np.unique(onehot)) <= {0.0, 1.0}
    # one active level per categorical column: 8 categorical columns
    np.testing.assert_array_equal(onehot.sum(axis=1), 8)
    Xc, _, namesc = load_adult(missing="category")
    assert Xc.shape[0] == 5 and "workclass_?" in namesc and "occupation_?" in namesc
    with pytest.raises(ValueError, match="missing"):
        load_adult(missing="impute")


# --------------------------------------------------------------------------------------------
# the real shared data (skip when the folder is absent)
# --------------------------------------------------------------------------------------------


def test_real_wine_quality():
    home = _real_data("wine_quality", "winequality-red.csv", "winequality-white.csv")
    X, y, _ = load_wine_quality(home)
    assert X.shape == (5320, 11)  # 6,497 rows less 1,177 duplicates
    assert not np.isnan(X).any()
    vals, counts = np.unique(y, return_counts=True)
    assert list(vals) == ["red", "white"]
    assert counts.tolist() == [1359, 3961]
    Xq, yq, _ = load_wine_quality(home, target="quality")
    assert Xq.shape == (5320, 12)
    assert set(yq.tolist()) <= set(range(3, 10))


def test_real_wine_paper_split():
    home = _real_data("wine_quality", "winequality-red.csv", "winequality-white.csv")
    d = load_paper_split("wine_quality", data_home=home, random_state=0)
    assert d.X_public.shape == (4100, 11)
    assert d.X_labeled.shape == (136, 11)
    assert d.X_test.shape == (1059, 11)
    np.testing.assert_allclose(d.X_public.mean(axis=0), 0.0, atol=1e-9)
    frac_red = 1359 / 5320
    assert abs((d.y_labeled == "red").mean() - frac_red) < 0.02


def test_real_adult():
    home = _real_data("adult", "adult-train.csv", "adult-test.csv")
    X, y, names = load_adult(home)
    assert X.shape == (45222, 104)  # 48,842 rows less 3,620 with a missing value
    assert not np.isnan(X).any()
    vals, counts = np.unique(y, return_counts=True)
    assert list(vals) == ["<=50K", ">50K"]
    assert counts.sum() == 45222
    assert all(not n.endswith("_?") for n in names)
    np.testing.assert_array_equal(X[:, 6:].sum(axis=1), 8)
    Xc, _, _ = load_adult(home, missing="category")
    assert Xc.shape[0] == 48842 == sum(PAPER_SPLITS["adult"].values())


def test_real_adult_paper_split_adapts_sizes():
    home = _real_data("adult", "adult-train.csv", "adult-test.csv")
    with pytest.warns(UserWarning, match="shrinking n_labeled from 31073 to 27453"):
        d = load_paper_split("adult", data_home=home, random_state=0)
    assert d.sizes == {"n_public": 10000, "n_labeled": 27453, "n_test": 7769}
    assert d.X_public.shape == (10000, 104) and d.X_test.shape == (7769, 104)
    np.testing.assert_allclose(d.X_public.mean(axis=0), 0.0, atol=1e-9)
    e = load_paper_split("adult", data_home=home, random_state=0, adult_missing="category")
    assert e.sizes == PAPER_SPLITS["adult"]
