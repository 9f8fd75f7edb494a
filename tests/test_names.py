"""Public names: what dir() lists, American spelling, old names removed (or, in privacy,
flower and trust, kept as warned aliases), GPT2Classifier as LMClassifier's preset."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import warnings
from collections import Counter

import pytest
from sklearn.base import clone

PACKAGES = ("cotrain", "consensus", "learners")


def packages() -> list[str]:
    """Every package (not plain module) of the three import packages, private ones left out."""
    names = []
    for top in PACKAGES:
        names.append(top)
        root = importlib.import_module(top)
        for info in pkgutil.walk_packages(root.__path__, f"{top}."):
            if info.ispkg and not any(p.startswith("_") for p in info.name.split(".")):
                names.append(info.name)
    return names


def public_modules() -> list[str]:
    names = []
    for top in PACKAGES:
        names.append(top)
        root = importlib.import_module(top)
        for info in pkgutil.walk_packages(root.__path__, f"{top}."):
            if not any(p.startswith("_") for p in info.name.split(".")):
                names.append(info.name)
    return names


def test_the_walk_sees_the_subpackages():
    found = set(packages())
    assert {"cotrain.wire", "cotrain.federation", "cotrain.compression", "learners.lm"} <= found
    assert "consensus" in found and len(found) >= 18


@pytest.mark.parametrize("name", packages())
def test_dir_of_a_package_lists_its_public_names_only(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(name)
    listed = {n for n in dir(module) if not (n.startswith("__") and n.endswith("__"))}
    public = {n for n in module.__all__ if not n.startswith("__")}
    assert public <= listed  # what __all__ promises is there
    # anything else listed is one of the package's public submodules (no imported helper
    # such as Any or annotations, no private name)
    extra = listed - public
    assert not [n for n in extra if n.startswith("_")]
    assert [n for n in extra if not inspect.ismodule(getattr(module, n))] == []
    assert all(getattr(module, n).__name__ == f"{name}.{n}" for n in extra)


# ------------------------------------------------------------------------ spelling
# British spellings that public names must not use (checked word by word in snake_case
# and CamelCase names); words that merely end like them are allowed.
BRITISH = re.compile(
    r"^(\w*(is|ys)(e|ed|es|ing|ation|ations|er|ers)"
    r"|\w*(behavi|colo|neighb|favo|hono|labo|flavo)ours?|centres?"
    r"|\w*(labell|modell|cancell|travell)(ed|ing|er))$"
)
NOT_BRITISH = {
    "noise", "noised", "precise", "otherwise", "raise", "raises", "exercise", "promise",
    "likewise", "pairwise", "elementwise", "wise", "base", "case", "close", "false",
    "else", "response", "reverse", "inverse", "sparse", "parse", "parser", "dense", "use",
    "used", "uses", "user", "cause", "pause", "phase", "release", "released", "releases",
    "increase", "decrease", "analysis", "supervised", "unsupervised", "baseline",
    "axis", "this", "is", "basis", "those", "these", "purpose", "lose", "license",
}  # fmt: skip
# Names that keep a British spelling on purpose, each with its reason.
KEPT = {
    "lin_standardise": "imodels' own RuleFit parameter, passed through under its name",
}


def british_words(name: str) -> list[str]:
    words = []
    for part in name.split("_"):
        words += re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", part)
    return [w for w in map(str.lower, words) if BRITISH.match(w) and w not in NOT_BRITISH]


def test_the_spelling_check_knows_both_spellings():
    assert british_words("summarise_warnings") == ["summarise"]
    assert british_words("Centralised") == ["centralised"]
    assert british_words("BEHAVIOURS") == ["behaviours"]
    assert british_words("pseudo_labelled_rows") == ["labelled"]
    assert not british_words("summarize_warnings") and not british_words("Centralized")
    assert not british_words("reproducible_noise") and not british_words("quantize_probs")


def is_deprecated_alias(member) -> bool:
    """A property kept for one release under an old name (it warns; see the renames below)."""
    return isinstance(member, property) and (member.__doc__ or "").startswith("Deprecated")


def public_names(module):
    """(qualified name, name) of every public name, parameter and class attribute."""
    for attr in getattr(module, "__all__", []):
        if not hasattr(module, attr):  # a submodule, walked on its own
            importlib.import_module(f"{module.__name__}.{attr}")
        obj = getattr(module, attr)
        yield f"{module.__name__}.{attr}", attr
        if inspect.ismodule(obj):
            continue
        targets = [obj] if callable(obj) and not inspect.isclass(obj) else []
        if inspect.isclass(obj):
            members = {
                k: v
                for k, v in vars(obj).items()
                if not k.startswith("_") and not is_deprecated_alias(v)
            }
            yield from ((f"{attr}.{k}", k) for k in members)
            targets = [obj.__init__, *(v for v in members.values() if callable(v))]
        for target in targets:
            try:
                params = inspect.signature(target).parameters
            except (TypeError, ValueError):
                continue
            yield from ((f"{attr}({p}=)", p) for p in params)


@pytest.mark.slow
def test_public_names_use_american_spelling():
    british = []
    for name in public_modules():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(name)
        except ImportError:  # an optional extra that is not installed
            continue
        for where, public in public_names(module):
            if british_words(public) and public not in KEPT:
                british.append(where)
    assert sorted(set(british)) == []


# ------------------------------------------------------------- removed old names
@pytest.mark.parametrize(
    ("module", "old"),
    [
        ("cotrain.baselines", "Centralised"),
        ("cotrain.baselines", "SparseTernaryCompression"),
        ("cotrain.baselines.reference", "Centralised"),
        ("cotrain.history", "summarise_warnings"),
        ("cotrain.robustness", "BEHAVIOURS"),
        ("cotrain.robustness.hostile", "BEHAVIOURS"),
        ("cotrain.audit", "neighbour_agreement"),
        ("cotrain.audit.lira", "neighbour_agreement"),
        ("cotrain.demo", "summarise"),
        ("cotrain.federation", "make_ledger"),
        ("cotrain.flower.protocol", "sanitise"),
        ("cotrain.trust", "pseudo_labelled_rows"),
        ("cotrain.privacy", "one_shot_fedaux"),
    ],
)
def test_a_removed_old_name_is_gone(module, old):
    assert not hasattr(importlib.import_module(module), old)


@pytest.mark.parametrize("old", ["cotrain.client", "cotrain.baselines.stc", "learners.gpt2"])
def test_a_removed_old_module_path_is_gone(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_summarize_warnings_reports_each_warning_once():
    from cotrain import history

    counts = Counter({(0, "UserWarning", "odd"): 3, (2, "UserWarning", "odd"): 1})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history.summarize_warnings(counts)
    messages = [str(w.message) for w in caught if w.category is history.LearnerWarningSummary]
    assert messages == ["UserWarning raised 4 times by clients [0, 2] during fit: odd"]


# ------------------------------------------------------------- GPT2Classifier preset
def test_gpt2_classifier_is_lm_classifier_with_another_default_model():
    from learners import GPT2Classifier, LMClassifier

    lm = inspect.signature(LMClassifier.__init__).parameters
    gpt2 = inspect.signature(GPT2Classifier.__init__).parameters
    assert list(gpt2) == list(lm)  # the same parameters, in the same order
    for name, param in lm.items():
        other = gpt2[name]
        assert (other.kind, other.annotation) == (param.kind, param.annotation), name
        if name != "model":
            assert other.default == param.default, name
    assert gpt2["model"].default == "gpt2" and lm["model"].default is inspect.Parameter.empty
    given = {"tokenizer": None, "gguf_file": "m.gguf", "max_length": 64, "truncation_side": "right"}
    assert (
        GPT2Classifier("folder", **given).get_params()
        == LMClassifier("folder", **given).get_params()
        == GPT2Classifier(
            model="folder", gguf_file="m.gguf", max_length=64, truncation_side="right"
        ).get_params()
    )


def test_gpt2_classifier_get_params_set_params_clone():
    from learners import GPT2Classifier

    clf = GPT2Classifier(max_length=32, lr=1e-3, lora={"r": 4}, random_state=3)
    params = clf.get_params()
    assert params["model"] == "gpt2" and params["max_length"] == 32 and params["lr"] == 1e-3
    copy = clone(clf)
    assert type(copy) is GPT2Classifier and copy.get_params() == params
    copy.set_params(truncation_side="right", dtype=None)
    assert (copy.truncation_side, copy.dtype, clf.truncation_side) == ("right", None, "left")


def test_the_lm_tokenizer_module_names_nothing_after_gpt2():
    import learners.lm.tokenizer as tokenizer

    assert tokenizer.__name__ == "learners.lm.tokenizer"
    assert not [n for n in tokenizer.__all__ if "gpt" in n.lower()]


def test_removed_attribute_spellings_are_gone():
    from sklearn.tree import DecisionTreeClassifier

    from cotrain.privacy import DPSGD
    from cotrain.robustness import HostileClassifier

    assert not hasattr(DPSGD(sampling_rate=0.1, steps=20), "neighbours")
    assert not hasattr(HostileClassifier(DecisionTreeClassifier(), behavior="noise"), "behaviour")


def test_the_old_experiment_method_name_is_refused(tmp_path):
    from cotrain.experiment import METHODS, load_experiment
    from cotrain.experiment.report import ONE_SHOT

    text = """\
name = "small"
seeds = [0]

[data]
dataset = "breast_cancer"

[split]
n_public = 200
n_labeled = 60
n_test = 100
n_clients = 3

[method]
name = "{name}"

[[clients]]
learner = "DT"
"""
    path = tmp_path / "exp.toml"
    path.write_text(text.format(name="centralized"))
    load_experiment(path)
    path.write_text(text.format(name="centralised"))
    with pytest.raises(ValueError, match=r"method\.name must be one of"):
        load_experiment(path)
    assert "centralized" in METHODS and "centralised" not in METHODS
    assert {"centralized", "centralised"} <= set(ONE_SHOT)  # old summaries still plot
