"""What `cotrain demo` prints: one seed without ± and in the singular, and a legend.

The federation itself is replaced by fixed per-seed rows (``run_seed`` is monkeypatched), so
the printed text is checked against known numbers in well under a second; the real run is
covered by tests/test_cli.py.
"""

from __future__ import annotations

import pytest

from cotrain import demo

ROW = dict(
    fedct_mean_client=0.921,
    fedct_consensus=0.925,
    local_mean_client=0.893,
    local_consensus=0.930,
    centralised=0.944,
    bytes_up_per_round=285.0,
    bytes_down_per_round=285.0,
    fit_time_s=1.0,
)


@pytest.fixture
def fake_seeds(monkeypatch):
    """run_seed returns ROW for seed 0 and ROW with FedCT's mean client +0.02 for seed 1."""

    def run_seed(make_estimators, seed, rounds=10, n_jobs=None, **kwargs):
        return {**ROW, "fedct_mean_client": ROW["fedct_mean_client"] + 0.02 * seed}, None

    monkeypatch.setattr(demo, "run_seed", run_seed)


def test_one_seed_prints_no_spread_and_says_seed_in_the_singular(fake_seeds, capsys):
    table = demo.run_demo(seeds=1, rounds=10, verbose=0)
    out = capsys.readouterr().out
    assert "±" not in out.split("FedCT paper")[0]  # the paper's own ± 0.001 is quoted after
    assert "1 seed (seed 0), 10 rounds" in out
    assert "1 seeds" not in out and "over 1" not in out
    assert table["mean client acc"].tolist() == ["0.921", "0.893", "0.944"]
    assert table["consensus acc"].tolist() == ["0.925", "0.930", "-"]


def test_several_seeds_print_mean_and_std(fake_seeds, capsys):
    table = demo.run_demo(seeds=2, rounds=3, verbose=0)
    out = capsys.readouterr().out
    assert "mean ± std over 2 seeds (0..1), 3 rounds" in out
    assert table["mean client acc"].iloc[0] == "0.931 ± 0.010"  # 0.921 and 0.941
    assert table["consensus acc"].iloc[1] == "0.930 ± 0.000"


def test_legend_explains_every_column_and_a_higher_local_vote(fake_seeds, capsys):
    demo.run_demo(seeds=1, rounds=10, verbose=0)
    out = capsys.readouterr().out
    legend = out.split("FedCT paper (Table 6)")[1]
    for column in ["mean client acc", "consensus acc", "bytes up/round"]:
        assert f"\n{column}  " in legend
    assert "Centralised" in legend
    assert "ensemble" in legend and "which no single site holds" in legend
    # local-only's vote 0.930 > FedCT's 0.925: the output says so, in test examples
    note = " ".join(out.split("Here ")[1].split())
    assert note.startswith("local-only's vote (0.930) is above FedCT's (0.925), by 0.6 of 114")
    assert "raised the sites' own models (first column), not the vote" in note


def test_no_note_when_fedct_vote_is_not_below(monkeypatch, capsys):
    better = {**ROW, "fedct_consensus": 0.940}
    monkeypatch.setattr(demo, "run_seed", lambda *a, **k: (better, None))
    demo.run_demo(seeds=1, rounds=10, verbose=0)
    assert "is above FedCT's" not in capsys.readouterr().out


def test_note_says_so_when_the_sites_did_not_gain_either(monkeypatch, capsys):
    worse = {**ROW, "fedct_mean_client": 0.880}  # below local-only's 0.893
    monkeypatch.setattr(demo, "run_seed", lambda *a, **k: (worse, None))
    demo.run_demo(seeds=1, rounds=10, verbose=0)
    note = " ".join(capsys.readouterr().out.split("Here ")[1].split())
    assert "did not raise the sites' own models either" in note
