"""docs/results: what the published tables say about themselves agrees."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
#: summaries whose 'paper' numbers are FashionMNIST's while ours are digits'
DIGITS = ["ablation_public_size", "privacy_utility", "scalability_clients", "table2_digits"]


@pytest.mark.parametrize("name", DIGITS)
def test_digits_tables_label_the_paper_gap_as_shape_only(name):
    text = (DOCS / "results" / f"{name}.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| variant |"))
    assert "| paper (FashionMNIST) | gap (shape only) |" in header


def test_every_summary_with_a_paper_gap_on_other_data_says_so():
    for path in sorted((DOCS / "results").glob("*.md")):
        text = path.read_text()
        header = next((li for li in text.splitlines() if li.startswith("| variant |")), "")
        if "FashionMNIST" in text.split("| variant |")[0] and "gap" in header:
            assert "gap (shape only)" in header, path.name


def test_breast_cancer_run_time_agrees_between_results_and_its_summary():
    summary = (DOCS / "results" / "table3_breast_cancer.md").read_text()
    seconds = re.search(r"total run time (\d+) s", summary).group(1)
    results = (DOCS / "results.md").read_text()
    row = next(li for li in results.splitlines() if li.startswith("| `table3_breast_cancer"))
    assert f"{seconds} s" in row
