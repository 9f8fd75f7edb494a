"""`cotrain report` (one table, a column per results folder or published table) and
`accuracy.png` (curves, one-shot reference lines, integer rounds, an honest y-range)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cotrain.cli import main
from cotrain.experiment import ExperimentError, markdown_table, report
from cotrain.experiment.published import parse_summary_markdown, read_summary_markdown
from cotrain.experiment.report import (
    MIN_ACCURACY_SPAN,
    accuracy_figure,
    accuracy_limits,
    write_summary,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "results"

SUMMARY_HEAD = "variant,method,seeds,accuracy,accuracy_std,consensus_accuracy,paper,wall_s\n"


def results_folder(root: Path, name: str, rows: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "summary.csv").write_text(SUMMARY_HEAD + rows)
    return folder


PUBLISHED = """\
# table3

some description | with a pipe

seeds [0, 1]; total run time 10 s

| variant | method | accuracy | consensus | paper | gap | time s |
| --- | --- | --- | --- | --- | --- | --- |
| 5xDT | fedct | 0.815 ± 0.002 | 0.833 | 0.810 | +0.005 | 14 |
| A \\| B | fedct | 0.700 ± 0.010 | 0.710 | — | — | 3 |
| centralised DT | centralised | 0.798 ± 0.006 | 0.798 | 0.820 | -0.022 | 0 |
"""


def test_folder_and_published_file_side_by_side(tmp_path):
    measured = results_folder(
        tmp_path,
        "table3",
        "5xDT,fedct,5,0.822,0.004,0.83,0.81,12\n"
        "local,local,5,0.781,0.003,0.80,,1\n"
        "centralised DT,centralised,5,0.798,0.006,0.798,0.82,0\n",
    )
    published = tmp_path / "docs" / "table3_adult.md"
    published.parent.mkdir()
    published.write_text(PUBLISHED)
    lines = report([measured, published]).splitlines()
    assert lines == [
        "| variant | method | table3 | table3_adult.md | table3 − table3_adult.md | paper |",
        "| --- | --- | --- | --- | --- | --- |",
        "| 5xDT | fedct | 0.822 ± 0.004 | 0.815 ± 0.002 | +0.007 | 0.810 |",
        "| local | local | 0.781 ± 0.003 | — | — | — |",
        "| centralised DT | centralised | 0.798 ± 0.006 | 0.798 ± 0.006 | 0.000 | 0.820 |",
        "| A \\| B | fedct | — | 0.700 ± 0.010 | — | — |",
        "",
        f"columns: `table3` = {measured}; `table3_adult.md` = {published}",
    ]


def test_three_sources_have_no_difference_column_and_same_names_become_paths(tmp_path):
    one = results_folder(tmp_path / "a", "out", "FedCT,fedct,2,0.9,0.01,0.9,,1\n")
    two = results_folder(tmp_path / "b", "out", "FedCT,fedct,2,0.8,0.02,0.8,,1\n")
    three = results_folder(tmp_path, "other", "local,local,2,0.7,0.0,0.7,,1\n")
    lines = report([one, two, three]).splitlines()
    assert lines[:4] == [
        f"| variant | method | {one} | {two} | other |",
        "| --- | --- | --- | --- | --- |",
        "| FedCT | fedct | 0.900 ± 0.010 | 0.800 ± 0.020 | — |",
        "| local | local | — | — | 0.700 ± 0.000 |",
    ]
    # the very same folder twice: told apart by position
    head = report([one, one]).splitlines()[0]
    assert head == f"| variant | method | {one} #1 | {one} #2 | {one} #1 − {one} #2 |"


def test_a_summary_csv_or_summary_md_is_named_after_its_folder(tmp_path):
    folder = results_folder(tmp_path, "run7", "FedCT,fedct,2,0.9,0.01,0.9,0.85,1\n")
    (folder / "summary.md").write_text(
        "# run7\n\n" + markdown_table(pd.read_csv(folder / "summary.csv")) + "\n"
    )
    text = report([folder / "summary.csv", tmp_path / "run7" / "summary.md"])
    assert text.splitlines()[0] == (
        f"| variant | method | {folder / 'summary.csv'} | {folder / 'summary.md'} "
        f"| {folder / 'summary.csv'} − {folder / 'summary.md'} | paper |"
    )
    assert (
        text.splitlines()[2] == "| FedCT | fedct | 0.900 ± 0.010 | 0.900 ± 0.010 | 0.000 | 0.850 |"
    )
    assert report([folder / "summary.md"]).splitlines()[0] == "| variant | method | run7 | paper |"


def test_measured_against_the_real_published_table(tmp_path):
    published = read_summary_markdown(DOCS / "table3_adult.md")
    rows = "".join(
        f"{r['variant']},{r['method']},5,{r['accuracy'] + 0.001},0.001,0.8,,1\n" for r in published
    )
    measured = results_folder(tmp_path, "table3_adult", rows)
    lines = report([measured, DOCS / "table3_adult.md"]).splitlines()
    body = [line for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert len(body) == len(published) == 7
    assert all(line.split(" | ")[4] == "+0.001" for line in body)
    assert "| 5xDT | fedct | 0.816 ± 0.001 | 0.815 ± 0.002 | +0.001 | 0.810 |" in lines


#: the published summaries of `cotrain run` (one per experiment file); the other pages in
#: docs/results are benchmark write-ups with tables of their own shape
RUN_SUMMARIES = sorted(
    p for p in DOCS.glob("*.md") if (DOCS.parents[1] / "experiments" / f"{p.stem}.toml").exists()
)


def test_every_experiment_file_has_its_published_summary():
    assert len(RUN_SUMMARIES) == 10


@pytest.mark.parametrize("path", RUN_SUMMARIES, ids=lambda p: p.stem)
def test_every_published_results_file_parses(path):
    rows = read_summary_markdown(path)
    assert rows
    for row in rows:
        assert row["variant"] and row["method"]
        assert 0.0 <= row["accuracy"] <= 1.0
        assert np.isnan(row["accuracy_std"]) or 0.0 <= row["accuracy_std"] < 0.5


def test_parse_escaped_pipes_bare_numbers_and_bad_rows():
    rows = parse_summary_markdown(
        "| variant | method | accuracy |\n|---|---|---|\n"
        "| x \\| y | fedct | 0.9 |\n| z | local | — |\n\nafter the table | not a row |\n"
    )
    assert [r["variant"] for r in rows] == ["x | y", "z"]
    assert rows[0]["accuracy"] == 0.9 and np.isnan(rows[0]["accuracy_std"])
    assert np.isnan(rows[1]["accuracy"]) and np.isnan(rows[1]["paper"])
    with pytest.raises(ExperimentError, match=r"f.md:3: 2 cells where the header has 3"):
        parse_summary_markdown("| variant | method | accuracy |\n| --- |\n| a | b |\n", "f.md")
    with pytest.raises(ExperimentError, match=r"f.md:3: not a number"):
        parse_summary_markdown(
            "| variant | method | accuracy |\n| --- |\n| a | b | high |\n", "f.md"
        )
    with pytest.raises(ExperimentError, match="has no results table"):
        parse_summary_markdown("| a | b |\n| --- | --- |\n", "f.md")


def test_bad_sources_are_refused_with_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.md").write_text("# no table here\n")
    (tmp_path / "data.csv").write_text("a,b\n")
    for source, message in [
        (tmp_path / "missing", "no such results folder or file"),
        (tmp_path / "empty", "has no summary.csv"),
        (tmp_path / "notes.md", "has no results table"),
        (tmp_path / "data.csv", "neither a results folder"),
    ]:
        with pytest.raises(ExperimentError, match=message):
            report([source])
        assert main(["report", str(source)]) == 2
        assert message in capsys.readouterr().err
    with pytest.raises(ExperimentError, match="no results folder"):
        report([])


def test_gap_that_rounds_to_nothing_is_not_negative_zero():
    row = {
        "variant": "v",
        "method": "fedct",
        "accuracy": 0.8398,
        "accuracy_std": 0.004,
        "consensus_accuracy": 0.848,
        "paper": 0.84,
        "wall_s": 9.0,
    }
    assert markdown_table(pd.DataFrame([row])).splitlines()[2] == (
        "| v | fedct | 0.840 ± 0.004 | 0.848 | 0.840 | 0.000 | 9 |"
    )


def test_accuracy_limits_do_not_blow_up_a_small_change():
    bottom, top = accuracy_limits([0.841, 0.848, np.nan])
    assert top - bottom == pytest.approx(MIN_ACCURACY_SPAN)
    assert (bottom + top) / 2 == pytest.approx(0.8445)
    # wide data: their spread plus 10 % on each side
    assert accuracy_limits([0.5, 0.9]) == pytest.approx((0.46, 0.94))
    # kept inside [0, 1]
    assert accuracy_limits([0.99, 1.0]) == pytest.approx((0.9, 1.0))
    assert accuracy_limits([0.0, 0.02]) == pytest.approx((0.0, 0.1))
    assert accuracy_limits([0.0, 1.0]) == pytest.approx((0.0, 1.0))
    assert accuracy_limits([]) == (0.0, 1.0)


def write_history(folder: Path, variant: str, seed: int, column: dict[str, list[float]]):
    run = folder / "runs" / variant / f"seed-{seed}"
    run.mkdir(parents=True)
    frame = pd.DataFrame(column)
    frame.insert(0, "round", np.arange(1, len(frame) + 1))
    frame.to_csv(run / "history.csv")


def test_accuracy_figure_curves_reference_lines_integer_rounds(tmp_path):
    pytest.importorskip("matplotlib", reason="the report draws its figure with matplotlib")
    import matplotlib.pyplot as plt

    write_history(tmp_path, "FedCT", 0, {"mean_accuracy": [0.840, 0.845, 0.846]})
    write_history(tmp_path, "FedCT", 1, {"mean_accuracy": [0.842, 0.847, 0.848]})
    for seed in (0, 1):
        write_history(tmp_path, "local", seed, {"mean_accuracy": [0.841]})
        write_history(tmp_path, "centralised_DT", seed, {"mean_accuracy": [0.844]})
    summary = pd.DataFrame(
        {
            "variant": ["FedCT", "local", "centralised DT"],
            "method": ["fedct", "local", "centralised"],
            "accuracy": [0.847, 0.841, 0.844],
        }
    )
    fig = accuracy_figure(tmp_path, summary)
    try:
        ax = fig.axes[0]
        fig.canvas.draw()
        curve, local, central = ax.lines
        assert [line.get_label() for line in ax.lines] == [
            "FedCT",
            "local (one-shot)",
            "centralised DT (one-shot)",
        ]
        np.testing.assert_allclose(curve.get_xdata(), [1, 2, 3])
        np.testing.assert_allclose(curve.get_ydata(), [0.841, 0.846, 0.847])
        # reference lines: horizontal at the summary accuracy, across the whole axis
        for line, value in [(local, 0.841), (central, 0.844)]:
            np.testing.assert_allclose(line.get_ydata(), [value, value])
            assert line.get_linestyle() == "--"
        legend = [text.get_text() for text in ax.get_legend().get_texts()]
        assert legend == ["FedCT", "local (one-shot)", "centralised DT (one-shot)"]
        ticks = [t for t in ax.get_xticks() if 1 <= t <= 3]
        assert ticks == [1, 2, 3]
        assert ax.get_xlim() == (1, 3)
        bottom, top = ax.get_ylim()  # the 0.006 spread of the data is not blown up
        assert top - bottom == pytest.approx(MIN_ACCURACY_SPAN)
        assert bottom < 0.841 and top > 0.847
    finally:
        plt.close(fig)


def test_many_rounds_have_integer_ticks_and_one_shot_only_has_none(tmp_path):
    pytest.importorskip("matplotlib", reason="the report draws its figure with matplotlib")
    import matplotlib.pyplot as plt

    write_history(tmp_path, "FedCT", 0, {"mean_accuracy": list(np.linspace(0.5, 0.9, 13))})
    write_history(tmp_path, "local", 0, {"mean_accuracy": [0.6]})
    summary = pd.DataFrame(
        {"variant": ["FedCT", "local"], "method": ["fedct", "local"], "accuracy": [0.9, 0.6]}
    )
    fig = accuracy_figure(tmp_path, summary)
    try:
        fig.canvas.draw()
        ticks = fig.axes[0].get_xticks()
        assert len(ticks) >= 3 and all(float(t).is_integer() for t in ticks)
        assert fig.axes[0].get_ylim() == pytest.approx((0.46, 0.94))
    finally:
        plt.close(fig)
    fig = accuracy_figure(tmp_path, summary.iloc[1:])
    try:
        ax = fig.axes[0]
        assert len(ax.get_xticks()) == 0 and [line.get_label() for line in ax.lines] == [
            "local (one-shot)"
        ]
    finally:
        plt.close(fig)


def test_write_summary_plots_every_variant(tmp_path):
    pytest.importorskip("matplotlib", reason="the report draws its figure with matplotlib")
    write_history(tmp_path, "FedCT", 0, {"mean_accuracy": [0.8, 0.85]})
    write_history(tmp_path, "local", 0, {"mean_accuracy": [0.78]})
    results = [
        {
            "variant": "FedCT",
            "method": "fedct",
            "accuracy": 0.85,
            "consensus_accuracy": 0.86,
            "paper": None,
            "wall_s": 1.0,
        },
        {
            "variant": "local",
            "method": "local",
            "accuracy": 0.78,
            "consensus_accuracy": 0.8,
            "paper": None,
            "wall_s": 0.1,
        },
    ]
    write_summary(tmp_path, {"name": "x", "seeds": [0]}, results, wall=1.1)
    assert (tmp_path / "accuracy.png").stat().st_size > 5000
    lines = report([tmp_path]).splitlines()
    assert lines[2:4] == [
        "| FedCT | fedct | 0.850 ± 0.000 |",
        "| local | local | 0.780 ± 0.000 |",
    ]


def test_a_labelled_paper_column_is_read_as_the_papers_number():
    rows = parse_summary_markdown(
        "| variant | method | accuracy | paper (FashionMNIST) | gap (shape only) |\n"
        "| --- | --- | --- | --- | --- |\n| a | fedct | 0.929 ± 0.008 | 0.798 | +0.131 |\n"
    )
    assert rows[0]["paper"] == 0.798
    digits = read_summary_markdown(DOCS / "table2_digits.md")
    assert digits[0]["variant"] == "(100,2) FedCT" and digits[0]["paper"] == 0.798
