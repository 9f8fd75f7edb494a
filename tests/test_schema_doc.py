"""cotrain.experiment.schema_doc: every key of an experiment file is described, none is stale,
and what the description says (defaults, allowed values) is what the runner does."""

from __future__ import annotations

from pathlib import Path

import pytest

from consensus import available_consensus, get_consensus
from cotrain.experiment.config import (
    CERTAINTY_KEYS,
    CLIENT_KEYS,
    PRIVACY_KEYS,
    SCHEMA,
    load_experiment,
)
from cotrain.experiment.data import BUNDLED, PARTITIONS, SHARED
from cotrain.experiment.errors import ExperimentError
from cotrain.experiment.learners import LEARNERS
from cotrain.experiment.methods import METHODS, PRIVACY_MECHANISMS, MethodInput
from cotrain.experiment.schema_doc import (
    KEYS,
    METHOD_SUMMARIES,
    REQUIRED,
    SECTIONS,
    UNSET,
    VARIANT_KEYS,
    privacy_defaults,
    schema_keys,
)
from cotrain.params import PARAMS
from cotrain.privacy.mechanisms.param_checks import UNITS

#: the consensus names when this module is imported (collection, before any test or doctest
#: registers a name of its own): what the reference documents
BUILT_IN_CONSENSUS = tuple(available_consensus())


def _walk(table, prefix=""):
    """Every dotted key of a schema table, recursively (independent of schema_keys)."""
    below = {
        "clients": CLIENT_KEYS,
        "variant": VARIANT_KEYS,
        "method.privacy": PRIVACY_KEYS,
        "method.certainty": CERTAINTY_KEYS,
    }
    keys = {}
    for key, expected in table.items():
        path = prefix + key
        keys[path] = dict if isinstance(expected, dict) else expected
        if isinstance(expected, dict):
            keys.update(_walk(expected, path + "."))
        if path in below:
            keys.update(_walk(below[path], path + "."))
    return keys


def test_every_schema_key_recursively_has_an_entry():
    keys = _walk(SCHEMA)
    assert {"data.dataset", "method.privacy.epsilon", "clients.learner", "variant.label"} <= set(
        keys
    )
    missing = set(keys) - set(KEYS)
    assert not missing, f"keys of the schema without an entry in schema_doc.KEYS: {missing}"


def test_no_entry_is_stale():
    stale = set(KEYS) - set(_walk(SCHEMA))
    assert not stale, f"entries of schema_doc.KEYS that the schema no longer has: {stale}"


def test_schema_keys_gives_the_schema_types_in_order():
    assert schema_keys() == _walk(SCHEMA)
    assert list(schema_keys())[:4] == list(SCHEMA)[:4]


@pytest.mark.parametrize("path", sorted(KEYS))
def test_every_entry_says_what_it_does_and_its_default(path):
    doc = KEYS[path]
    assert doc.description.strip(), path
    if doc.default is UNSET:
        assert doc.default_note, f"{path}: an unset default must say what happens"
    elif doc.default is not REQUIRED:  # a value of the key's own type
        expected = schema_keys()[path]
        types = expected if isinstance(expected, tuple) else (expected,)
        assert isinstance(doc.default, types), (path, doc.default, types)
        assert not isinstance(doc.default, bool) or bool in types, path


def test_sections_are_the_tables_of_the_file():
    keys = schema_keys()
    tables = {path for path in keys if any(k.startswith(f"{path}.") for k in keys)}
    assert tables >= {"data", "method.privacy", "clients", "variant"}
    assert set(SECTIONS) == {""} | tables


def test_allowed_values_are_the_runners_own_tables():
    assert KEYS["data.dataset"].choices == BUNDLED + SHARED
    assert KEYS["split.partition"].choices == PARTITIONS
    assert KEYS["method.name"].choices == tuple(METHODS)
    assert KEYS["method.consensus"].choices == ("auto", *BUILT_IN_CONSENSUS)  # auto: Python's
    assert KEYS["method.privacy.mechanism"].choices == tuple(PRIVACY_MECHANISMS)
    assert KEYS["method.privacy.unit"].choices == UNITS
    assert KEYS["method.share"].choices == PARAMS["share"].options
    assert KEYS["clients.learner"].choices == tuple(LEARNERS)
    assert set(METHOD_SUMMARIES) == set(METHODS)


def test_every_privacy_key_is_taken_by_some_mechanism():
    for key in PRIVACY_KEYS:
        if key != "mechanism":
            assert privacy_defaults(key), f"no mechanism takes [method.privacy] {key}"
    assert privacy_defaults("epsilon")["randomized_response"] is REQUIRED


def test_defaults_are_the_runners():
    inp = MethodInput([], [], [], None, None, (None, None), {}, 0, Path("."))
    assert inp.common["rounds"] == KEYS["method.rounds"].default
    assert inp.reproducible_noise is KEYS["method.reproducible_noise"].default
    assert get_consensus("qualified").quorum == KEYS["method.quorum"].default
    quality = get_consensus("quality")
    assert quality.power == KEYS["method.power"].default
    assert quality.quality_power == KEYS["method.quality_power"].default
    assert PARAMS["share"].default == KEYS["method.share"].default


BASE = """name = "doc"
seeds = [0]
[data]
dataset = "digits"
[split]
n_clients = 3
{split}
[method]
{method}
[[clients]]
learner = "DT"
{extra}
"""


def _load(tmp_path, split="", method='name = "fedct"', extra=""):
    path = tmp_path / "exp.toml"
    path.write_text(BASE.format(split=split, method=method, extra=extra))
    return load_experiment(path, check_data=False)


@pytest.mark.parametrize("partition", PARTITIONS)
def test_every_partition_named_is_accepted(tmp_path, partition):
    alpha = {"dirichlet": "alpha = 0.5", "two_alpha": "alpha = [0.1, 10.0]"}.get(partition, "")
    _load(tmp_path, split=f'partition = "{partition}"\n{alpha}')


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_named_is_accepted(tmp_path, name):
    privacy = "privacy = { epsilon = 1.0 }" if name == "dp-fedct" else ""
    _load(tmp_path, method=f'name = "{name}"\n{privacy}')


@pytest.mark.parametrize("name", BUILT_IN_CONSENSUS)
def test_every_consensus_named_is_accepted(tmp_path, name):
    scored = name in KEYS["method.certainty"].applies_to  # certainty scores: required or taken
    method = f'name = "fedct"\nconsensus = "{name}"\n'
    method += "certainty = { lam = 0.1 }" if scored else ""
    _load(tmp_path, method=method)


def test_variant_keys_are_the_ones_load_experiment_reads(tmp_path):
    variant = '[[variant]]\nlabel = "a"\npaper = 0.9\nseeds = [1, 2]\n'
    _, runs = _load(tmp_path, extra=variant)
    assert [(r.variant, r.seed, r.paper) for r in runs] == [("a", 1, 0.9), ("a", 2, 0.9)]
    with pytest.raises(ExperimentError, match="unknown key 'labels'"):
        _load(tmp_path, extra='[[variant]]\nlabel = "a"\nlabels = "b"\n')


def test_the_reference_page_lists_every_key_learner_and_consensus_name(monkeypatch):
    pytest.importorskip("sphinx")  # the docs extension that renders it (the docs extra)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "docs" / "_ext"))
    import experiment_schema

    text = experiment_schema.reference_rst()
    for path in KEYS:
        assert f".. confval:: {path}\n" in text, path
    for name, (module, cls, _params) in LEARNERS.items():
        assert f"``{name}``" in text and f"{module}.{cls}" in text, name
    for name in BUILT_IN_CONSENSUS:
        assert f"``{name}``" in text, name
    for mechanism in PRIVACY_MECHANISMS:
        assert f"``{mechanism}``" in text, mechanism
