"""The runnable examples still run (tiny settings; the real runs are in benchmarks/results)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))


@pytest.mark.slow
def test_compare_methods_runs_every_method(examples_on_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("xgboost")
    import compare_methods

    compare_methods.main(
        [
            "--seeds",
            "1",
            "--rounds",
            "2",
            "--fedavg-rounds",
            "2",
            "--max-epochs",
            "3",
            "--epochs-per-round",
            "1",
        ]
    )
    out = capsys.readouterr().out
    for method in [
        "FedCT",
        "DD",
        "FedAvg",
        "FedAvg + STC",
        "FedDF",
        "FedDS",
        "FedAUX",
        "PATE",
        "local only",
        "centralised",
        "mixed federation",
    ]:
        assert method in out
    sys.modules.pop("compare_methods", None)


@pytest.mark.slow
def test_finetune_gpt2_runs_offline(examples_on_path, capsys):
    pytest.importorskip("transformers")
    from cotrain.datasets.paths import data_home

    try:
        data_home()
    except FileNotFoundError:
        pytest.skip("shared data folder absent (set COTRAIN_DATA to run this test)")
    import finetune_gpt2

    table = finetune_gpt2.main(
        [
            "--clients",
            "3",
            "--labeled",
            "8",
            "--public",
            "12",
            "--test",
            "10",
            "--rounds",
            "1",
            "--max-length",
            "32",
            "--max-epochs",
            "1",
            "--lora",
            "--threads",
            "1",
            "--no-progress",
        ]
    )
    assert table["method"].tolist() == ["FedCT", "FedAvg"]
    # FedCT: 12 labels at 1 bit + 10-byte header; FedAvg: only LoRA adapters and head
    assert table["up bytes/round/client"].iloc[0] == 12
    assert table["up bytes/round/client"].iloc[1] > 1000
    sys.modules.pop("finetune_gpt2", None)


def test_flower_prepare_sites_writes_three_loadable_sites(monkeypatch, tmp_path, capsys):
    pytest.importorskip("flwr")
    monkeypatch.syspath_prepend(str(EXAMPLES / "flower"))
    import prepare_sites

    from cotrain.flower.site import load_site, pool_fingerprint

    prepare_sites.main(["--out", str(tmp_path), "--rounds", "2"])
    sites = [load_site(tmp_path / f"site-{i}") for i in range(3)]
    assert [s.client_id for s in sites] == [0, 1, 2]
    assert [type(s.estimator).__name__ for s in sites] == [
        "DecisionTreeClassifier",
        "LogisticRegression",
        "KNeighborsClassifier",
    ]
    assert sum(len(s.y) for s in sites) == 85  # the FedCT breast-cancer split
    pool = np.load(tmp_path / "public.npy")
    assert all(s.pool_hash == pool_fingerprint(pool) for s in sites)
    assert np.load(tmp_path / "in_process_consensus.npy").shape == (370,)
    assert "in-process run: test accuracy" in capsys.readouterr().out


@pytest.mark.slow
def test_private_federation_quick_prints_every_site_and_the_guarantee(examples_on_path, capsys):
    pytest.importorskip("dp_accounting")
    from cotrain.datasets.paths import data_home

    try:
        found = (data_home() / "adult").is_dir()
    except FileNotFoundError:
        found = False
    if not found:
        pytest.skip("the shared data folder with adult/ is not here")
    import private_federation

    out = private_federation.main(["--quick"])
    text = capsys.readouterr().out
    assert len(out["alone"]) == 20 and text.count("logistic regression") == 7
    assert out["epsilon"] <= 4.0 and out["answered"] == 1.0
    assert "per private record of any one site" in text and "add/remove" in text
    assert "secure aggregation reveals to the server only the sum" in text


def test_robustness_quick_prints_the_table(examples_on_path, capsys):
    import robustness

    results = robustness.main(["--quick", "--n-jobs", "1"])
    out = capsys.readouterr().out
    assert "| hostile clients | majority | qualified (0.9) | trimmed (0.2) | reputation |" in out
    assert "reputation + trimmed" in out
    assert "| random, 20% |" in out and "| crash, 20% |" in out
    assert len(results) == 3 * 5  # (all honest, random, crash) x 5 rules
    assert all(0.5 < acc <= 1.0 for acc in results.values())
    sys.modules.pop("robustness", None)


#: every script in examples/ and the optional modules its import needs
SCRIPTS = {
    "compare_methods": ["torch"],
    "fedaux_certainty": [],
    "finetune_gpt2": [],
    "finetune_lm": [],
    "mixed_models": [],
    "privacy_utility": ["torch"],
    "private_federation": ["dp_accounting"],
    "robustness": [],
    "text_mixed": [],
}
#: help texts that say nothing to someone who has not read the code
JARGON = ["local work b", "first local fit", "learners class", "seeds 1..N"]


class _ParserCaught(Exception):
    pass


def script_parser(name, monkeypatch):
    """The ArgumentParser that examples/NAME.py's main builds, caught before it parses."""
    import argparse

    caught = []

    def catch(self, *args, **kwargs):
        caught.append(self)
        raise _ParserCaught

    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    module = __import__(name)
    try:
        with pytest.raises(_ParserCaught):
            module.main([])
    finally:
        sys.modules.pop(name, None)
        sys.modules.pop("finetune_lm", None)
    return caught[0]


def test_every_example_script_is_checked():
    assert sorted(SCRIPTS) == sorted(p.stem for p in EXAMPLES.glob("*.py"))


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_option_of_every_example_has_a_description(name, monkeypatch):
    import argparse

    for module in SCRIPTS[name]:
        pytest.importorskip(module)
    parser = script_parser(name, monkeypatch)
    options = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    assert options
    for action in options:
        text = (action.help or "").strip()
        flag = "/".join(action.option_strings)
        assert len(text) >= 12, f"{name} {flag}: no description ({action.help!r})"
        assert not any(j in text for j in JARGON), f"{name} {flag}: {text!r}"
    parser.format_help()  # every %(default)s expands


def test_finetune_gpt2_help_shows_its_own_defaults(monkeypatch, capsys):
    parser = script_parser("finetune_gpt2", monkeypatch)
    text = " ".join(parser.format_help().split())
    assert text.startswith("usage:") and "The GPT-2 preset of" in text
    assert "(default 5)" in text and "(default: tiny-gpt2)" in text  # rounds, model
    assert "(default GPT2Classifier)" in text and "(default fedct,fedavg)" in text


def test_finetune_gpt2_quick_is_small(examples_on_path):
    import finetune_gpt2
    import finetune_lm

    args = finetune_lm.parse_args(["--quick"], preset=finetune_gpt2.PRESET)
    assert (args.clients, args.labeled, args.public, args.test) == (3, 16, 16, 40)
    assert (args.rounds, args.max_epochs, args.max_length, args.lora) == (2, 1, 64, True)
    assert args.methods == ["fedct", "fedavg"] and args.model == "tiny-gpt2"
    assert args.learner == "GPT2Classifier" and args.lr == 5e-4
    explicit = finetune_lm.parse_args(["--quick", "--rounds", "4"], preset=finetune_gpt2.PRESET)
    assert explicit.rounds == 4
    for name in ("finetune_gpt2", "finetune_lm"):
        sys.modules.pop(name, None)


@pytest.mark.slow
def test_mixed_models_quick_leaves_out_rulefit_and_says_so(examples_on_path, capsys):
    pytest.importorskip("xgboost")
    import mixed_models

    args = mixed_models.parse_args(["--quick"])
    assert (args.seeds, args.rounds, args.max_public, args.adult_labeled) == (1, 2, 500, 1000)
    assert args.skip_learners == ["RuleFit"]
    assert mixed_models.parse_args(["--quick", "--skip-learners"]).skip_learners == []

    table = mixed_models.main(["--quick", "--datasets", "breast_cancer"])
    out = capsys.readouterr().out
    assert "--quick: 1 seed, 2 rounds" in out and "Not a reproduction" in out
    skipped = table[table["FedCT local (ours)"] == "skipped"]["clients"].tolist()
    assert skipped == ["5xRuleFit", "DT,RF,RuleFit,XGBoost,RF", "DT,MLP,RuleFit,XGBoost,RF"]
    assert "skipped BreastCancer 5xRuleFit: RuleFit client(s), left out by --quick" in out
    ran = table[table["FedCT local (ours)"] != "skipped"].set_index("clients")
    # seed 0, 2 rounds (measured 0.898, 0.909, 0.921): one test example is 0.009
    for clients, acc in {"5xDT": 0.898, "5xXGBoost": 0.909, "5xRF": 0.921}.items():
        assert abs(float(ran.loc[clients, "FedCT local (ours)"]) - acc) <= 0.03
    sys.modules.pop("mixed_models", None)


def test_finetune_gpt2_shows_a_bar_per_round_and_per_client(examples_on_path, capsys):
    pytest.importorskip("transformers")
    from cotrain.datasets.paths import data_home

    try:
        data_home()
    except FileNotFoundError:
        pytest.skip("shared data folder absent (set COTRAIN_DATA to run this test)")
    import finetune_gpt2

    tiny = ["--quick", "--labeled", "8", "--public", "12", "--test", "10", "--max-length", "32"]
    finetune_gpt2.main([*tiny, "--methods", "fedct"])
    err = capsys.readouterr().err
    assert "FedCT: 100%" in err and "2/2" in err  # the bar over rounds ends
    assert "clients:" in err and "3/3" in err  # the bar over the clients of a round
    for name in ("finetune_gpt2", "finetune_lm"):
        sys.modules.pop(name, None)


def docstring_commands_outside_literal_blocks(text: str) -> list[str]:
    """Indented command lines of a module docstring that reStructuredText would render as
    a quoted paragraph (its smart quotes turn ``--quick`` into ``–quick`` and the lines run
    together) instead of a literal block: the paragraph before them must end in ``::``."""
    import ast

    doc = ast.get_docstring(ast.parse(text), clean=False) or ""
    lines, bad = doc.splitlines(), []
    for i, line in enumerate(lines):
        if not line.startswith("    ") or not line.strip().startswith(("python ", "cotrain ")):
            continue
        j = i - 1
        while j >= 0 and (not lines[j].strip() or lines[j].startswith("    ")):
            j -= 1
        if j < 0 or not lines[j].rstrip().endswith("::"):
            bad.append(line.strip())
    return bad


def test_docstring_commands_are_literal_blocks():
    assert docstring_commands_outside_literal_blocks('"""Text.\n\n    python x.py --quick\n"""')
    assert not docstring_commands_outside_literal_blocks(
        '"""Text.\n\nRun::\n\n    python x.py --quick\n"""'
    )
    bad = {
        path.name: found
        for path in sorted(EXAMPLES.rglob("*.py"))
        if (found := docstring_commands_outside_literal_blocks(path.read_text()))
    }
    assert not bad, f"commands the gallery would print with en dashes: {bad}"
