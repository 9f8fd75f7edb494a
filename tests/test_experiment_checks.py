"""What `cotrain run` says about a user's data and names, and what its results folder holds:
a CSV header detected with a warning where it is not stated (no silently lost first row),
one-hot encoded text columns announced once, "did you mean" for mistyped names, data
paths checked by kind, a per-client table in summary.md, history.csv without an unnamed
index."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_iris

from cotrain.cli import main
from cotrain.experiment import ExperimentError, ExperimentWarning, load_experiment, run_experiment
from cotrain.experiment.data import dataset_rows, detect_header, read_table

IRIS = """\
name = "iris"
seeds = [0]
[data]
path = "iris.csv"
target = 0
[split]
n_public = 60
n_labeled = 45
n_test = 45
n_clients = 3
[method]
name = "fedct"
rounds = 2
[[clients]]
learner = "DT"
"""


def iris_csv(folder: Path, header: bool) -> Path:
    X, y = load_iris(return_X_y=True)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    frame.insert(0, "species", y)
    path = folder / "iris.csv"
    frame.to_csv(path, index=False, header=header)
    return path


def messages(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, ExperimentWarning)]


def test_a_headerless_csv_without_header_stated_keeps_its_first_row(tmp_path):
    path = iris_csv(tmp_path, header=False)
    (tmp_path / "exp.toml").write_text(IRIS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_experiment(tmp_path / "exp.toml")
    said = messages(caught)
    assert len(said) == 1, said
    assert said[0].startswith(f"{path}: header not stated: the first row (0, 5.1, 3.5, 1.4, 0.2) ")
    assert "is read as data, not as column names" in said[0]
    assert "write header = false under [data] to say so" in said[0]
    assert dataset_rows({"path": str(path), "target": 0}) == 150  # not 149
    X, y = read_table(path, 0)
    assert X.shape == (150, 4) and y[0] == 0 and X[0, 0] == pytest.approx(5.1)


def test_a_csv_with_a_header_row_is_detected_and_a_stated_header_that_agrees_is_quiet(tmp_path):
    path = iris_csv(tmp_path, header=True)
    text = IRIS.replace("target = 0", 'target = "species"')
    (tmp_path / "exp.toml").write_text(text)
    with pytest.warns(ExperimentWarning, match="is read as the column names, since it holds text"):
        load_experiment(tmp_path / "exp.toml")
    assert detect_header(path)[0] is True
    (tmp_path / "exp.toml").write_text(text.replace("[split]", "header = true\n[split]"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_experiment(tmp_path / "exp.toml")


@pytest.mark.parametrize("stated", [False, True])
def test_a_stated_header_the_first_row_contradicts_is_warned(tmp_path, stated):
    path = iris_csv(tmp_path, header=not stated)
    text = IRIS.replace("[split]", f"header = {str(stated).lower()}\n[split]")
    text = text.replace("n_test = 45", "n_test = 44")  # header = true loses the first row
    (tmp_path / "exp.toml").write_text(text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_experiment(tmp_path / "exp.toml")
    said = [m for m in messages(caught) if "Check header" in m]
    assert len(said) == 1, messages(caught)
    if stated:  # a headerless file read with header = true
        assert said[0].startswith(f"{path}: header = true, but the first row (0, 5.1, ")
        assert "looks like data, not column names" in said[0]
    else:  # the case: a named file read as data, every column one-hot encoded
        assert said[0].startswith(f"{path}: header = false, but the first row (species, a, ")
        assert "turns every numeric column into text, one-hot encoded" in said[0]


def test_a_column_name_on_a_headerless_csv_says_header_false(tmp_path):
    iris_csv(tmp_path, header=False)
    (tmp_path / "exp.toml").write_text(IRIS.replace("target = 0", 'target = "species"'))
    with pytest.raises(ExperimentError) as info:
        load_experiment(tmp_path / "exp.toml")
    error = str(info.value)
    assert "header not stated, and the first row (0, 5.1, " in error
    assert "so it has no column 'species'" in error and "needs header = false" in error


def test_cotrain_run_announces_the_header_and_the_encoded_columns_once(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 300
    frame = pd.DataFrame({"x": rng.normal(size=n), "colour": rng.choice(["red", "blue"], n)})
    frame["city"] = rng.choice(["Bonn", "Paris", "Oslo"], n)
    frame["label"] = np.where(frame["x"] + (frame["colour"] == "red") > 0.5, "yes", "no")
    frame.to_csv(tmp_path / "mine.csv", index=False)
    text = """\
name = "mine"
seeds = [0, 1]
[data]
path = "mine.csv"
target = "label"
[split]
n_public = 150
n_labeled = 60
n_test = 90
n_clients = 2
[method]
name = "local"
[[clients]]
learner = "DT"
[[variant]]
label = "a"
[[variant]]
label = "b"
"""
    (tmp_path / "exp.toml").write_text(text)
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "exp.toml"), "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    encoded = (
        f"cotrain run: warning: {tmp_path / 'mine.csv'}: 2 non-numeric feature columns one-hot "
        "encoded into 5 indicator columns: 'colour' (2 values), 'city' (3 values); 1 numeric "
        "column used unchanged"
    )
    assert err.count(encoded) == 1, err  # two variants and two seeds: said once
    assert err.count("header not stated") == 1
    X, _ = read_table(tmp_path / "mine.csv", "label")
    assert X.shape == (n, 1 + 2 + 3)


def test_mistyped_names_in_an_experiment_file_get_a_suggestion(tmp_path):
    base = IRIS.replace('path = "iris.csv"\ntarget = 0', 'dataset = "breast_cancer"').replace(
        "n_public = 60\nn_labeled = 45\nn_test = 45", "n_public = 200\nn_labeled = 60\nn_test = 100"
    )
    cases = [
        ('learner = "DT"', 'learner = "xgbost"',
         "unknown learner 'xgbost'; did you mean 'XGBoost'?"),
        ('learner = "DT"', 'learner = "sklearn.tree.DecisionTreeClassifer"',
         "sklearn.tree has no 'DecisionTreeClassifer'; did you mean 'DecisionTreeClassifier'?"),
        ("rounds = 2", 'rounds = 2\nconsensus = "majorty"',
         "unknown consensus 'majorty'; valid names are "),
        ("rounds = 2", 'rounds = 2\nconsensus = "majorty"', "; did you mean 'majority'?"),
        ('name = "fedct"', 'name = "fedtc"', "got 'fedtc'; did you mean 'fedct'?"),
        ('dataset = "breast_cancer"', 'dataset = "digit"',
         "unknown dataset 'digit'; did you mean 'digits'?"),
        ("n_clients = 3", 'n_clients = 3\npartition = "diriclet"\nalpha = 1',
         "unknown partition 'diriclet'; did you mean 'dirichlet'?"),
        ("rounds = 2", "rouns = 2", "unknown key 'method.rouns'; did you mean 'rounds'?"),
    ]  # fmt: skip
    for old, new, message in cases:
        assert old in base
        (tmp_path / "exp.toml").write_text(base.replace(old, new, 1))
        with pytest.raises(ExperimentError) as info:
            load_experiment(tmp_path / "exp.toml")
        assert message in str(info.value), str(info.value)


def test_data_paths_are_checked_by_kind(tmp_path):
    (tmp_path / "iris.xlsx").write_text("")
    (tmp_path / "folder.csv").mkdir()
    for path, message in [
        ("iris.xlsx", "the file is read by its extension, one of .csv, .npz, .npy, .parquet; "
         "got '.xlsx'"),
        ("folder.csv", "folder.csv is a folder, not a data file"),
    ]:  # fmt: skip
        (tmp_path / "exp.toml").write_text(IRIS.replace("iris.csv", path))
        with pytest.raises(ExperimentError, match=r"exp\.toml:4: ") as info:
            load_experiment(tmp_path / "exp.toml")
        assert message in str(info.value)
    (tmp_path / "broken.npz").write_bytes(b"not a zip")
    (tmp_path / "exp.toml").write_text(IRIS.replace("iris.csv", "broken.npz"))
    with pytest.raises(ExperimentError, match=r"cannot read .*broken.npz as a .npz with arrays X"):
        load_experiment(tmp_path / "exp.toml")


def test_summary_has_a_per_client_table_and_history_no_unnamed_index(tmp_path, capsys):
    text = """\
name = "mixed"
seeds = [0, 1]
[data]
dataset = "breast_cancer"
[split]
n_public = 200
n_labeled = 60
n_test = 100
n_clients = 3
[method]
name = "fedct"
rounds = 2
[[clients]]
learner = "DT"
count = 2
params = { max_depth = 3 }
[[clients]]
learner = "sklearn.naive_bayes.GaussianNB"
count = 1
[[variant]]
label = "FedCT"
[[variant]]
label = "pooled"
method = { name = "centralized" }
clients = [{ learner = "NB", count = 3 }]
"""
    (tmp_path / "exp.toml").write_text(text)
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "exp.toml"), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    summary = (out / "summary.md").read_text()
    assert "## Per client" in summary and "## Per client" in printed
    table = summary.split("## Per client")[1]
    assert "| variant | client 0 | client 1 | client 2 |" in table
    row = next(line for line in table.splitlines() if line.startswith("| FedCT |"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    assert [c.split("(")[-1] for c in cells] == ["DT)", "DT)", "GaussianNB)"]
    results = [
        json.loads((out / "runs" / "FedCT" / f"seed-{s}" / "result.json").read_text())
        for s in (0, 1)
    ]
    for i, cell in enumerate(cells):
        values = [r["client_accuracy"][str(i)] for r in results]
        assert cell.startswith(f"{np.mean(values):.3f} ± {np.std(values):.3f}")
    # the mean of the clients is the table's accuracy
    assert np.mean(list(results[0]["client_accuracy"].values())) == pytest.approx(
        results[0]["accuracy"]
    )
    assert "| pooled |" not in table  # one model: no clients to show
    history = pd.read_csv(out / "runs" / "FedCT" / "seed-0" / "history.csv")
    assert history.columns[0] == "round"
    assert not any(c.startswith("Unnamed") for c in history.columns)
    assert history["round"].tolist() == [1, 2]
    assert {"accuracy_client_0", "accuracy_client_2"} <= set(history.columns)
    # cotrain report still reads the summary's first table
    assert main(["report", str(out / "summary.md")]) == 0
    assert "| FedCT | fedct |" in capsys.readouterr().out


def test_summary_csv_has_each_clients_accuracy_and_marks_clients_below_local(tmp_path):
    text = """\
name = "gain"
seeds = [0, 1]
[data]
dataset = "breast_cancer"
[split]
n_public = 200
n_labeled = 45
n_test = 150
n_clients = 3
[method]
name = "fedct"
rounds = 2
[[clients]]
learner = "DT"
count = 2
params = { max_depth = 2 }
[[clients]]
learner = "sklearn.naive_bayes.GaussianNB"
count = 1
[[variant]]
label = "FedCT"
[[variant]]
label = "alone"
method = { name = "local" }
"""
    (tmp_path / "exp.toml").write_text(text)
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "exp.toml"), "--out", str(out), "--quiet"]) == 0
    summary = pd.read_csv(out / "summary.csv").set_index("variant")
    means = {}
    for variant in ("FedCT", "alone"):
        runs = [json.loads((out / "runs" / variant / f"seed-{s}" / "result.json").read_text())
                for s in (0, 1)]  # fmt: skip
        means[variant] = [np.mean([r["client_accuracy"][str(i)] for r in runs]) for i in range(3)]
        got = [summary.loc[variant, f"client_{i}_accuracy"] for i in range(3)]
        np.testing.assert_allclose(got, means[variant])
    table = (out / "summary.md").read_text().split("## Per client")[1]
    row = next(line for line in table.splitlines() if line.startswith("| FedCT |"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    below = [i for i in range(3) if means["FedCT"][i] < means["alone"][i]]
    assert [i for i, c in enumerate(cells) if "▼" in c] == below
    for i in below:
        assert f"▼ {means['FedCT'][i] - means['alone'][i]:.3f} vs local" in cells[i]
    named = ", ".join(
        f"FedCT client {i} ({means['FedCT'][i] - means['alone'][i]:.3f})" for i in below
    )
    assert f"Below their local model (variant alone): {named or 'none'}." in table
    assert "▼" not in next(line for line in table.splitlines() if line.startswith("| alone |"))


def test_run_experiment_refuses_an_out_that_is_a_file(tmp_path):
    (tmp_path / "exp.toml").write_text(IRIS.replace("target = 0", "target = 0\nheader = false"))
    iris_csv(tmp_path, header=False)
    (tmp_path / "taken").write_text("")
    with pytest.raises(ExperimentError, match=r"^out .*taken is a file, not a folder"):
        run_experiment(tmp_path / "exp.toml", tmp_path / "taken", verbose=0)


def iris_with_markers(folder: Path) -> Path:
    """iris with a named header and "?" in 6 cells of column b (a missing-value marker)."""
    X, y = load_iris(return_X_y=True)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"]).astype(object)
    frame.insert(0, "species", y)
    frame.loc[[3, 20, 41, 77, 99, 130], "b"] = "?"
    path = folder / "iris.csv"
    frame.to_csv(path, index=False)
    return path


def test_missing_value_markers_are_read_as_nan_never_one_hot(tmp_path):
    path = iris_with_markers(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        X, _ = read_table(path, "species", True, announce=True)
    assert X.shape == (150, 4)  # b stays one numeric column
    assert np.isnan(X[:, 1]).sum() == 6 and not np.isnan(np.delete(X, 1, axis=1)).any()
    said = messages(caught)
    assert len(said) == 1, said
    assert "1 numeric column read with missing-value markers as NaN: 'b' (6 × '?')" in said[0]
    assert 'write na_values = ["?"] under [data]' in said[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        named, _ = read_table(path, "species", True, announce=True, na_values=["?"])
    assert not messages(caught)  # stated: nothing to say
    np.testing.assert_array_equal(named, X)


def test_na_values_in_a_file_runs_local_only_and_fedct_on_nan(tmp_path):
    iris_with_markers(tmp_path)
    text = IRIS.replace("target = 0", 'target = "species"\nheader = true\nna_values = ["?"]')
    text += '[[variant]]\nlabel = "FedCT"\n'
    text += '[[variant]]\nlabel = "local"\nmethod = { name = "local" }\n'
    (tmp_path / "exp.toml").write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExperimentWarning)  # na_values stated: no warning
        out = run_experiment(tmp_path / "exp.toml", tmp_path / "out", verbose=0)
    summary = pd.read_csv(out / "summary.csv").set_index("variant")
    assert summary.loc["local", "accuracy"] > 0.7 and summary.loc["FedCT", "accuracy"] > 0.7
    bad = text.replace('na_values = ["?"]', "na_values = [0]")
    (tmp_path / "bad.toml").write_text(bad)
    with pytest.raises(ExperimentError, match="na_values must be a list of strings"):
        load_experiment(tmp_path / "bad.toml")
