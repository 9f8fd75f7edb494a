"""What `cotrain demo` prints: one seed without ± and in the singular, and a legend; the
light federation by default, the paper's with ``full=True``.

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
    """run_seed returns ROW for seed 0 and ROW with FedCT's mean client +0.02 for seed 1;
    the federations it was asked for are in the list returned."""
    asked = []

    def run_seed(make_estimators, seed, rounds=10, n_jobs=None, **kwargs):
        asked.append(make_estimators)
        return {**ROW, "fedct_mean_client": ROW["fedct_mean_client"] + 0.02 * seed}, None

    monkeypatch.setattr(demo, "run_seed", run_seed)
    monkeypatch.setattr(demo, "check_extras", lambda federation: None)  # core-only installs
    return asked


def test_one_seed_prints_no_spread_and_says_seed_in_the_singular(fake_seeds, capsys):
    table = demo.run_demo(seeds=1, rounds=10, verbose=0)
    out = capsys.readouterr().out
    assert "±" not in out.split("1 seed (seed 0)")[0]
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


def test_default_is_the_light_federation_and_full_the_papers(fake_seeds, capsys):
    demo.run_demo(seeds=2, rounds=10, verbose=0)
    out = capsys.readouterr().out
    assert fake_seeds == [demo.light_estimators] * 2
    assert out.startswith(
        "cotrain demo: federated co-training of DT, RF, naive Bayes, XGBoost, RF clients"
    )
    assert "cotrain demo --full" in out and "(Table 6), mean client acc" not in out
    assert [type(e).__name__ for e in demo.light_estimators()] == [
        "DecisionTreeClassifier", "RandomForestClassifier", "GaussianNB", "XGBoostClassifier",
        "RandomForestClassifier",
    ]  # fmt: skip

    fake_seeds.clear()
    demo.run_demo(seeds=2, rounds=10, verbose=0, full=True)
    out = capsys.readouterr().out
    assert fake_seeds == [demo.mixed_estimators] * 2
    assert "DT, RF, RuleFit, XGBoost, RF clients" in out.splitlines()[0]
    assert "rounds; FedCT paper (Table 6), mean client acc: 0.95 ± 0.001." in out


def test_bad_arguments_are_refused_before_any_seed_runs(fake_seeds, tmp_path):
    for kwargs, message in [
        ({"seeds": 0}, "seeds and rounds must be >= 1"),
        ({"rounds": 0}, "seeds and rounds must be >= 1"),
        ({"n_jobs": 0}, "n_jobs must be None or an integer other than 0"),
        ({"plot": str(tmp_path / "no" / "plot.png")}, "does not exist"),
        ({"plot": str(tmp_path)}, "is a folder"),
    ]:
        with pytest.raises(ValueError, match=message):
            demo.run_demo(verbose=0, **kwargs)
    assert fake_seeds == []


def test_a_missing_extra_is_named_before_anything_runs(monkeypatch):
    ran = []
    monkeypatch.setattr(demo, "run_seed", lambda *a, **k: ran.append(a))
    missing = demo.Federation("DT", list, (("no_such_module_x", "x"),), None, "")
    monkeypatch.setattr(demo, "DEMO", missing)
    with pytest.raises(ImportError, match=r"need no_such_module_x: pip install 'cotrain\[x\]'"):
        demo.run_demo(verbose=0)
    assert ran == []


def test_legend_explains_every_column_and_a_higher_local_vote(fake_seeds, capsys):
    demo.run_demo(seeds=1, rounds=10, verbose=0)
    out = capsys.readouterr().out
    legend = out.split("1 seed (seed 0), 10 rounds.")[1]
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
    monkeypatch.setattr(demo, "check_extras", lambda federation: None)  # core-only installs
    demo.run_demo(seeds=1, rounds=10, verbose=0)
    assert "is above FedCT's" not in capsys.readouterr().out


def test_note_says_so_when_the_sites_did_not_gain_either(monkeypatch, capsys):
    worse = {**ROW, "fedct_mean_client": 0.880}  # below local-only's 0.893
    monkeypatch.setattr(demo, "run_seed", lambda *a, **k: (worse, None))
    monkeypatch.setattr(demo, "check_extras", lambda federation: None)  # core-only installs
    demo.run_demo(seeds=1, rounds=10, verbose=0)
    note = " ".join(capsys.readouterr().out.split("Here ")[1].split())
    assert "did not raise the sites' own models either" in note
