"""Helpers of ``benchmarks/untuned_mixed.py`` (issues 28, 40): sizes, splits, loaders and
checks."""

from __future__ import annotations

import doctest
import importlib
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("untuned_mixed")
    finally:
        sys.path.remove(str(BENCHMARKS))


FOLDERS = {"pima": "pima_diabetes", "oil_spill": "oil_spill", "abalone": "abalone"}


def _shared_data(name: str) -> Path:
    """The shared data folder, or skip when it (or the dataset's folder) is absent."""
    from cotrain.datasets.paths import data_home

    try:
        folder = data_home()
    except FileNotFoundError:
        pytest.skip("the shared data folder (../shared/data or COTRAIN_DATA) is absent")
    if not (folder / FOLDERS[name]).is_dir():
        pytest.skip(f"{folder / FOLDERS[name]} is absent from the shared data folder")
    return folder


def test_docstring_examples(bench):
    result = doctest.testmod(bench)
    assert result.attempted >= 10 and result.failed == 0


@pytest.mark.parametrize(
    ("name", "n", "rows", "expected"),
    [
        ("abalone", 4177, 150, {"site": 150, "public": 1500, "test": 2000}),
        ("wine_quality", 5320, 200, {"site": 200, "public": 2000, "test": 2000}),
        ("adult", 2700, 150, {"site": 150, "public": 1500, "test": 600}),
        ("pima", 768, 150, {"site": 100, "public": 176, "test": 192}),
        ("oil_spill", 937, 150, {"site": 100, "public": 303, "test": 234}),
        ("digits", 1797, 150, {"site": 100, "public": 948, "test": 449}),
        ("breast_cancer", 569, 150, {"site": 75, "public": 127, "test": 142}),
    ],
)
def test_split_sizes(bench, name, n, rows, expected):
    assert bench.split_sizes(name, n, rows) == expected


def test_split_sizes_too_many_rows(bench):
    with pytest.raises(ValueError, match="rows=500 is too large for 'abalone'"):
        bench.split_sizes("abalone", 4177, rows=500)


def test_split_is_disjoint_stratified_and_standardised_on_public(bench):
    X, y = bench.load("digits")
    X = np.column_stack([np.arange(len(y)), X])  # column 0 names the row
    sizes = bench.split_sizes("digits", len(y))
    Xs, ys, U, yU, Xt, yt = bench.split(X, y, sizes, seed=3)
    assert [len(v) for v in ys] == [100] * 4 and len(U) == len(yU) == 948 and len(yt) == 449
    assert all(len(np.unique(v)) == 10 for v in ys)  # stratified: every site sees every digit
    ids = np.concatenate([*(v[:, 0] for v in Xs), U[:, 0], Xt[:, 0]])
    assert len(np.unique(ids.round(9))) == len(y)  # disjoint, and together all rows
    np.testing.assert_allclose(U.mean(axis=0), 0, atol=1e-9)
    assert not np.allclose(Xt.mean(axis=0), 0, atol=1e-3)
    again = bench.split(X, y, sizes, seed=3)
    np.testing.assert_array_equal(again[1][0], ys[0])


@pytest.mark.parametrize(
    ("name", "shape", "classes"),
    [("pima", (768, 8), 2), ("oil_spill", (937, 48), 2), ("abalone", (4177, 10), 3)],
)
def test_shared_datasets(bench, name, shape, classes):
    _shared_data(name)
    X, y = bench.load(name)
    assert X.shape == shape and X.dtype == np.float64
    assert sorted(np.unique(y).tolist()) == list(range(classes))


def test_abalone_rings_binned(bench):
    folder = _shared_data("abalone")
    _, y = bench.load("abalone")
    rings = pd.read_csv(folder / "abalone" / "abalone.csv", header=None).iloc[:, -1]
    np.testing.assert_array_equal(y, np.where(rings <= 8, 0, np.where(rings <= 10, 1, 2)))


def test_unknown_dataset(bench):
    with pytest.raises(ValueError, match="name must be one of"):
        bench.load("iris")


def test_checks_pass_and_fail_with_known_numbers(bench):
    rows = []
    for seed, t_default in [(0, 2.5), (1, 3.0)]:
        for site, local, default in [("DT", 0.70, 0.75), ("LR", 0.80, 0.79)]:
            rows.append(dict(dataset="d", seed=seed, method="local", site=site, accuracy=local))
            for method, acc, t in [("default", default, t_default), ("fedct", 0.7, 2.0)]:
                rows.append(
                    dict(dataset="d", seed=seed, method=method, site=site, accuracy=acc, seconds=t)
                )
        for method, t in [("default", t_default), ("fedct", 2.0)]:
            rows.append(
                dict(
                    dataset="d",
                    seed=seed,
                    method=method,
                    site="consensus",
                    accuracy=0.78,
                    seconds=t,
                )
            )
        rows.append(dict(dataset="d", seed=seed, method="default", site="distill", accuracy=0.8))
    summary = bench.summarise(pd.DataFrame(rows))["d"]
    assert summary["best_site"] == "LR"
    assert summary["site_gain"] == pytest.approx({"DT": 0.05, "LR": -0.01})
    assert summary["mean_gain"] == pytest.approx(0.02)
    assert summary["fedct_gain"] == pytest.approx(-0.05)
    assert summary["consensus_gap"] == pytest.approx(-0.02)
    assert summary["distill_gap"] == pytest.approx(0.0)
    assert summary["time_ratio"] == pytest.approx((1.25 + 1.5) / 2)
    lines = bench.checks({"d": summary})
    assert [line[:8] for line in lines] == ["FAIL (a)", "PASS (b)", "FAIL (c)", "PASS (d)"]
    assert "d/LR -0.0100" in lines[0]
    assert lines[2].endswith("failures: d consensus -0.0200")  # distill() is at the best site


def test_checks_skip_without_the_methods(bench):
    rows = [dict(dataset="d", seed=0, method="local", site="DT", accuracy=0.7)]
    lines = bench.checks(bench.summarise(pd.DataFrame(rows)))
    assert [line[:8] for line in lines] == ["SKIP (a)", "SKIP (b)", "SKIP (c)", "SKIP (d)"]


def test_run_one_round(bench):
    pytest.importorskip("xgboost")  # one of the four sites is an XGBoostClassifier
    rows = bench.run("breast_cancer", seed=0, rows=150, rounds=1, methods=["local", "fedct"])
    frame = pd.DataFrame(rows)
    assert frame.groupby("method").site.apply(list).to_dict() == {
        "fedct": ["DT", "RF", "XGB", "LR", "consensus", "distill"],
        "local": ["DT", "RF", "XGB", "LR"],
    }
    assert frame.accuracy.between(0.8, 1.0).all()
    consensus = frame[frame.site == "consensus"].iloc[0]
    assert consensus.rounds_run == 1 and consensus.seconds > 0
    assert len(consensus.public["pseudo_label_accuracy"]) == 1
