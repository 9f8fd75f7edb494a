"""The shape of the code: no import cycles, no private names across modules, one direction.

The import graph is read from the source with :mod:`ast` (nothing is imported): one node per
module of ``cotrain``, ``consensus`` and ``learners`` (a package is its ``__init__``), and an
edge for every import of another of these modules, wherever it is written — at the top, in a
function (a lazy import hides a dependency, it does not remove it) or under
``TYPE_CHECKING``. ``from pkg import name`` depends on ``pkg.name`` when that is a module,
else on ``pkg``; importing ``a.b.c`` is not counted as depending on ``a`` and ``a.b``
(otherwise every package that re-exports its submodules would be a cycle).

The rules (see the design page, "Layout"):

- no import cycles between modules;
- no ``_private`` name imported from another module: a helper used elsewhere gets a public
  name (a private *module* such as ``cotrain._validation`` may be imported, its public names);
- dependencies point one way: ``consensus`` and ``learners`` never import ``cotrain``, and
  neither imports the other;
- the layers of ``cotrain`` (:data:`LAYERS`), checked transitively: a module breaks its layer
  when anything it imports, directly or through any chain of modules of the graph, is in a
  layer it must not import.

Module and function sizes are reported, not capped: ``python benchmarks/code_size.py``.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PACKAGES = ("cotrain", "consensus", "learners")

#: Packages each package must never import (dependencies point cotrain -> consensus, learners).
FORBIDDEN = {"consensus": ("cotrain", "learners"), "learners": ("cotrain", "consensus")}


# --------------------------------------------------------------------------- the graph


@dataclass
class Module:
    """One module of the checked packages: its dotted name, file, and what it imports."""

    name: str
    path: Path
    is_package: bool
    imports: set[str] = field(default_factory=set)  # modules of the checked packages
    private_names: list[str] = field(default_factory=list)  # "module._name" imported
    all_imported: set[str] = field(default_factory=set)  # every module named, any package


def find_modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, Module]:
    """Every ``.py`` file under the packages (found without importing them), by dotted name."""
    modules = {}
    for package in packages:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, package
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(root.rglob("*.py")):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            modules[".".join(parts)] = Module(".".join(parts), path, is_package)
    return modules


def imported_module(importer: Module, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` statement reads from, relative imports resolved."""
    if node.level == 0:
        return node.module or ""
    package = importer.name.split(".")
    if not importer.is_package:
        package.pop()  # a module's level-1 relative import is its package
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, node.module] if node.module else package)


def read_imports(module: Module, source: str, known: set[str]) -> None:
    """Fill in `module`'s imports from its `source`; `known` are the modules of the graph."""
    for node in ast.walk(ast.parse(source, filename=str(module.path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                module.all_imported.add(alias.name)
                if alias.name in known:
                    module.imports.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            source_module = imported_module(module, node)
            module.all_imported.add(source_module)
            for alias in node.names:
                submodule = f"{source_module}.{alias.name}"
                if submodule in known:  # ``from pkg import module``
                    module.imports.add(submodule)
                    module.all_imported.add(submodule)
                    continue
                if source_module in known:
                    module.imports.add(source_module)
                    private = alias.name.startswith("_") and not alias.name.startswith("__")
                    if private and source_module != module.name:
                        module.private_names.append(submodule)
    module.imports.discard(module.name)


@functools.cache
def import_graph() -> dict[str, Module]:
    """The modules of the checked packages with their imports."""
    modules = find_modules()
    for module in modules.values():
        read_imports(module, module.path.read_text(encoding="utf-8"), set(modules))
    return modules


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of a directed graph: its strongly connected components of two or more
    nodes, each sorted. Two nodes are in one component when each reaches the other."""
    reach = {}
    for start in edges:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        reach[start] = seen
    components = {frozenset({u} | {v for v in reach[u] if u in reach.get(v, ())}) for u in edges}
    return sorted(sorted(c) for c in components if len(c) > 1)


# --------------------------------------------------------------------------- the tools


def _module(name: str, source: str, known: set[str], is_package: bool = False) -> Module:
    module = Module(name, Path(f"{name}.py"), is_package)
    read_imports(module, source, known)
    return module


def test_imports_are_resolved_as_python_resolves_them():
    known = {"pkg", "pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c", "other"}
    source = (
        "from . import b\n"  # pkg.b, a module
        "from .sub.c import helper, _hidden\n"
        "from pkg import sub\n"  # a subpackage
        "import other\n"
        "import numpy as np\n"
        "def lazy():\n"
        "    from ._util import _thing\n"  # not a known module: ignored
    )
    a = _module("pkg.a", source, known)
    assert a.imports == {"pkg.b", "pkg.sub.c", "pkg.sub", "other"}
    assert a.private_names == ["pkg.sub.c._hidden"]
    assert {"numpy", "pkg._util"} <= a.all_imported
    init = _module("pkg.sub", "from . import c\nfrom .. import a\nfrom .c import x", known, True)
    assert init.imports == {"pkg.sub.c", "pkg.a"}
    c = _module("pkg.sub.c", "from .. import _version\nfrom ..a import _x\n", known)
    assert c.imports == {"pkg", "pkg.a"}
    assert c.private_names == ["pkg._version", "pkg.a._x"]


def test_cycles_are_the_strongly_connected_components():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert import_cycles(edges) == [["a", "b", "c"], ["d", "e"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_covers_the_packages():
    modules = import_graph()
    for package in PACKAGES:
        assert package in modules and modules[package].is_package
    assert "consensus.registry" in modules["consensus.robust"].imports  # relative import
    assert "learners._aligned" in modules["learners"].imports


# --------------------------------------------------------------------------- the rules


def test_no_import_cycles():
    edges = {name: module.imports for name, module in import_graph().items()}
    cycles = import_cycles(edges)
    assert not cycles, "modules that import each other (directly or around a loop):\n" + (
        "\n".join(" <-> ".join(cycle) for cycle in cycles)
    )


def test_no_private_names_imported_from_other_modules():
    found = sorted(
        f"{name} imports {private}"
        for name, module in import_graph().items()
        for private in module.private_names
    )
    assert not found, (
        "a _private name used by another module should be public in the module that owns it "
        "(or in a small shared module):\n" + "\n".join(found)
    )


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_dependencies_point_one_way(package):
    found = sorted(
        f"{name} imports {imported}"
        for name, module in import_graph().items()
        if name.split(".")[0] == package
        for imported in module.all_imported
        if imported.split(".")[0] in FORBIDDEN[package]
    )
    assert not found, f"{package} must not import {' or '.join(FORBIDDEN[package])}:\n" + (
        "\n".join(found)
    )


# --------------------------------------------------------------------------- the layers

#: DESIGN.md, "Inside cotrain/": subpackage -> the parts of ``cotrain`` it must never import
#: (besides itself), directly or through other modules. ``wire``, ``runtime`` and
#: ``compression`` import nothing else from cotrain; ``privacy`` sits below ``trust`` (which
#: reads a client's privacy mechanism), ``trust`` below ``audit`` (the sensitivity search fits
#: a client as it trains) and ``federation``, ``federation`` below ``persistence`` and the
#: trainer; and ``baselines``, ``flower`` and ``experiment`` are on top: nothing below imports
#: them.
TOP = ("cotrain.baselines", "cotrain.flower", "cotrain.experiment", "cotrain.cli")
FEDERATION_AND_UP = ("cotrain.federation", "cotrain.persistence", "cotrain.trainer", *TOP)
LAYERS = {
    "cotrain.wire": ("cotrain",),
    "cotrain.runtime": ("cotrain",),
    "cotrain.compression": ("cotrain",),
    "cotrain.privacy": ("cotrain.trust", "cotrain.audit", *FEDERATION_AND_UP),
    "cotrain.trust": ("cotrain.audit", *FEDERATION_AND_UP),
    "cotrain.audit": FEDERATION_AND_UP,
    "cotrain.federation": ("cotrain.persistence", "cotrain.trainer", *TOP),
    "cotrain.persistence": TOP,
    "cotrain.trainer": TOP,
    "cotrain.callbacks": ("cotrain.federation", "cotrain.trainer", *TOP),
    "cotrain.history": ("cotrain.federation", "cotrain.trainer", *TOP),
}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def import_chains(modules: dict[str, Module], start: str) -> dict[str, list[str]]:
    """Every module ``start`` imports, directly or through a chain of modules of the graph,
    with the shortest such chain (``[start, ..., module]``; breadth first, in name order)."""
    chains = {start: [start]}
    todo = [start]
    while todo:
        nxt = []
        for name in todo:
            for imported in sorted(modules[name].all_imported):
                if imported in chains:
                    continue
                chains[imported] = [*chains[name], imported]
                if imported in modules:
                    nxt.append(imported)
        todo = nxt
    del chains[start]
    return chains


def layer_violations(modules: dict[str, Module], transitive: bool = True) -> list[str]:
    """Every module of a layer that imports a module its layer must not import: directly,
    or (``transitive``) through any chain of modules of the graph."""
    found = []
    for name, module in modules.items():
        for layer, forbidden in LAYERS.items():
            if not _within(name, layer):
                continue
            if transitive:
                chains = import_chains(modules, name)
            else:
                chains = {imported: [name, imported] for imported in module.all_imported}
            for imported, chain in sorted(chains.items()):
                if _within(imported, layer) or not any(_within(imported, f) for f in forbidden):
                    continue
                via = f" via {' -> '.join(chain[1:-1])}" if len(chain) > 2 else ""
                found.append(f"{name} imports {imported}{via} (below: {', '.join(forbidden)})")
    return sorted(found)


def test_layers_of_the_design():
    found = layer_violations(import_graph())
    assert not found, "an import against the layering of DESIGN.md:\n" + "\n".join(found)


def test_layer_check_catches_a_wire_module_importing_the_federation():
    known = {"cotrain.wire.format", "cotrain.federation.client", "cotrain.clustering"}
    wire = _module("cotrain.wire.format", "from cotrain.federation.client import Client\n", known)
    ok = _module("cotrain.federation.client", "from cotrain.wire.format import W\n", known)
    free = _module("cotrain.clustering", "from cotrain.baselines.fedavg import FedAvg\n", known)
    modules = {m.name: m for m in (wire, ok, free)}  # clustering is in no layer
    assert layer_violations(modules) == [
        "cotrain.wire.format imports cotrain.federation.client (below: cotrain)"
    ]


def test_layer_check_follows_imports_through_other_modules():
    # trust.a -> clustering (no layer) -> federation.c: only c is below trust's layer
    known = {"cotrain.trust.a", "cotrain.clustering", "cotrain.federation.c"}
    a = _module("cotrain.trust.a", "from cotrain.clustering import cluster\n", known)
    b = _module("cotrain.clustering", "def f():\n    from cotrain.federation.c import C\n", known)
    c = _module("cotrain.federation.c", "import numpy\n", known)
    modules = {m.name: m for m in (a, b, c)}
    assert layer_violations(modules, transitive=False) == []  # the direct check misses it
    found = layer_violations(modules)
    assert len(found) == 1
    assert found[0].startswith(
        "cotrain.trust.a imports cotrain.federation.c via cotrain.clustering (below: "
    )
    assert import_chains(modules, "cotrain.trust.a") == {
        "cotrain.clustering": ["cotrain.trust.a", "cotrain.clustering"],
        "cotrain.federation.c": ["cotrain.trust.a", "cotrain.clustering", "cotrain.federation.c"],
        "numpy": ["cotrain.trust.a", "cotrain.clustering", "cotrain.federation.c", "numpy"],
    }


#: modules allowed at the root of ``cotrain`` (the facade and the pieces every part uses)
ROOT_LIMIT = 12


def test_the_root_keeps_the_facade_only():
    root = Path(importlib.util.find_spec("cotrain").origin).parent
    modules = sorted(p.name for p in root.glob("*.py"))
    assert len(modules) <= ROOT_LIMIT, f"{len(modules)} modules at cotrain/'s root: {modules}"


def test_the_size_report_lists_the_largest_modules_and_longest_functions():
    spec = importlib.util.spec_from_file_location(
        "code_size", Path(__file__).resolve().parents[1] / "benchmarks" / "code_size.py"
    )
    code_size = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code_size)
    modules, functions = code_size.sizes()
    assert {name for name, _ in modules} == set(import_graph())  # the same modules
    assert [n for _, n in modules] == sorted((n for _, n in modules), reverse=True)
    assert [n for _, n in functions] == sorted((n for _, n in functions), reverse=True)
    assert "cotrain.trust.protocol.Trust.fit_round" in dict(functions)
    text = code_size.report(top=3)
    assert text.count("\n  ") == 6 and modules[0][0] in text and functions[0][0] in text
