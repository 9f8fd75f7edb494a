"""The API reference: one page per public module, written from the code when the docs build.

Every public module and package of ``cotrain``, ``consensus`` and ``learners`` (no part of
its dotted name starts with ``_``) gets a page in ``docs/api/generated/``: its docstring,
then, for a package, an autosummary table of its public names (``__all__``) and one of its
subpackages and modules, then every object the module *defines* and exports. Each object is
documented once, at its home: the module that defines it when that module is public and
exports it, else the first public module that exports it (a package re-exporting a name from
a private module). A name that other modules re-export is listed there with a link home.

Cross-references may name an object by any path it is importable at
(``cotrain.FederatedCoTrainer``, ``cotrain.trainer.FederatedCoTrainer``) or, inside a
docstring, by a name visible in the docstring's module (``FedAvg`` where the module imported
it): :func:`resolve_alias` turns such a target into the documented path. It resolves only what
imports to a documented object, so a misspelt or stale name still fails the build.

Smaller hooks: the package tables read each summary line in the scope of the object it
summarises (:class:`ContextAutosummary`); members that scikit-learn attaches to our classes
are skipped (:func:`skip_foreign`); a private base class shows as its public bases
(:func:`public_bases`); a docstring section numpydoc does not know is kept as a rubric instead
of being dropped (:func:`keep_other_sections`); data gets no signature
(:func:`data_signature`).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import PycodeError
from sphinx.ext.autosummary import Autosummary
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGES = ("cotrain", "consensus", "learners")
OUT = "api/generated"
#: values longer than this (as repr) are documented without their value
MAX_VALUE = 100


@dataclass
class Registry:
    """Where every public object is documented, and every path it is known by."""

    modules: dict[str, ModuleType] = field(default_factory=dict)
    exports: dict[str, list[str]] = field(default_factory=dict)
    #: id(object) -> "module.name" where it is documented
    home: dict[int, str] = field(default_factory=dict)
    #: "module.name" of a re-export -> its home
    alias: dict[str, str] = field(default_factory=dict)
    #: (module, name) -> value of the data documented there
    data: dict[tuple[str, str], Any] = field(default_factory=dict)


REGISTRY = Registry()


def _public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def _walk() -> dict[str, ModuleType]:
    found: dict[str, ModuleType] = {}
    for top in PACKAGES:
        package = importlib.import_module(top)
        found[top] = package
        for info in pkgutil.walk_packages(package.__path__, f"{top}."):
            if _public(info.name):
                found[info.name] = importlib.import_module(info.name)
    return dict(sorted(found.items()))


def _exports(module: ModuleType) -> list[str]:
    """``__all__`` (else the public classes and functions the module defines), plus the
    public module-level names its source documents with a ``#:`` comment."""
    names = getattr(module, "__all__", None)
    if names is not None:
        names = list(names)
    else:
        names = [
            name
            for name, obj in vars(module).items()
            if not name.startswith("_")
            and (inspect.isclass(obj) or inspect.isfunction(obj))
            and obj.__module__ == module.__name__
        ]
    try:
        documented = ModuleAnalyzer.for_module(module.__name__).find_attr_docs()
    except PycodeError:
        documented = {}
    for scope, name in documented:
        if scope == "" and not name.startswith("_") and name not in names:
            if hasattr(module, name):
                names.append(name)
    return names


def _assigns(module: ModuleType, name: str) -> bool:
    """Whether the module's source assigns ``name`` at the top level."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return False
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def _is_routine(obj: Any) -> bool:
    return inspect.isclass(obj) or inspect.isroutine(obj)


def build_registry() -> Registry:
    """Import every public module and decide where each exported object is documented.

    Classes and functions are matched by identity (a re-export is the same object); data
    by the module that assigns it (equal small values may share an identity).
    """
    reg = Registry()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.modules = _walk()
    reg.exports = {name: _exports(mod) for name, mod in reg.modules.items()}
    exporters: dict[int, list[tuple[str, str]]] = {}
    objects: dict[int, Any] = {}
    for modname, names in reg.exports.items():
        for name in names:
            obj = getattr(reg.modules[modname], name)
            if inspect.ismodule(obj):
                continue
            if not _is_routine(obj):
                reg.data[(modname, name)] = obj
                continue
            exporters.setdefault(id(obj), []).append((modname, name))
            objects[id(obj)] = obj
    for key, places in exporters.items():
        obj = objects[key]
        defining = getattr(obj, "__module__", None)
        home = next((p for p in places if p[0] == defining), None)
        if home is None:  # defined in a private module: the shortest public path
            home = min(places, key=lambda p: (p[0].count("."), p[0], p[1]))
        reg.home[key] = f"{home[0]}.{home[1]}"
        for place in places:
            if place != home:
                reg.alias[f"{place[0]}.{place[1]}"] = reg.home[key]
        qualname = getattr(obj, "__qualname__", None)
        if defining and qualname and f"{defining}.{qualname}" != reg.home[key]:
            reg.alias.setdefault(f"{defining}.{qualname}", reg.home[key])
    for (modname, name), obj in list(reg.data.items()):
        if _assigns(reg.modules[modname], name):
            continue
        same = [
            (m, n)
            for (m, n), o in reg.data.items()
            if o is obj and n == name and _assigns(reg.modules[m], n)
        ]
        if same:  # a re-export of data assigned in another public module
            reg.alias[f"{modname}.{name}"] = f"{same[0][0]}.{name}"
            del reg.data[(modname, name)]
    return reg


def _directive(obj: Any) -> str:
    if inspect.isclass(obj):
        return "autoexception" if issubclass(obj, BaseException) else "autoclass"
    if inspect.isroutine(obj) or (callable(obj) and hasattr(obj, "__wrapped__")):
        return "autofunction"
    return "autodata"


def _heading(text: str, char: str) -> list[str]:
    return [text, char * len(text), ""]


def _page(reg: Registry, modname: str) -> str:
    module = reg.modules[modname]
    is_package = hasattr(module, "__path__")
    lines = [*_heading(modname, "="), f".. automodule:: {modname}", ""]
    children = [
        m for m in reg.modules if m.startswith(f"{modname}.") and "." not in m[len(modname) + 1 :]
    ]
    own, elsewhere, modules = [], [], []
    for name in reg.exports[modname]:
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            if obj.__name__ in reg.modules:
                modules.append(obj.__name__)
            continue
        if (modname, name) in reg.data:
            target: str | None = f"{modname}.{name}"
        else:
            target = reg.home.get(id(obj)) or reg.alias.get(f"{modname}.{name}")
        (own if target == f"{modname}.{name}" else elsewhere).append((name, obj, target))
    lines += [".. currentmodule:: None", ""]  # the tables name full paths
    if is_package and (own or elsewhere or modules):
        lines += _heading("Public API", "-")
        lines += [".. autosummary::", "   :nosignatures:", ""]
        for _name, _obj, target in own + elsewhere:
            lines.append(f"   ~{target}")
        lines += [f"   {m}" for m in modules]
        lines.append("")
    elif elsewhere:
        lines += _heading("Also exported here", "-")
        lines += [".. autosummary::", "   :nosignatures:", ""]
        lines += [f"   ~{target}" for _n, _o, target in elsewhere]
        lines.append("")
    if children:
        subpackages = [c for c in children if hasattr(reg.modules[c], "__path__")]
        plain = [c for c in children if c not in subpackages]
        for title, group in (("Subpackages", subpackages), ("Modules", plain)):
            if group:
                lines += _heading(title, "-")
                lines += [".. autosummary::", "   :nosignatures:", ""]
                lines += [f"   {c}" for c in group]
                lines += ["", ".. toctree::", "   :hidden:", ""]
                lines += [f"   {c}" for c in group]
                lines.append("")
    if own:
        lines += _heading("Reference" if is_package else "Contents", "-")
        lines += [f".. currentmodule:: {modname}", ""]
        for name, obj, _target in own:
            directive = _directive(obj)
            lines.append(f".. {directive}:: {name}")
            if directive == "autoclass" or directive == "autoexception":
                lines += ["   :members:", "   :show-inheritance:"]
            if directive == "autodata" and len(repr(obj)) > MAX_VALUE:
                lines.append("   :no-value:")
            lines.append("")
    return "\n".join(lines)


def write_pages(app: Sphinx) -> None:
    """Write ``docs/api/generated/<module>.rst`` for every public module (builder-inited)."""
    global REGISTRY
    REGISTRY = build_registry()
    out = Path(app.srcdir) / OUT
    out.mkdir(parents=True, exist_ok=True)
    wanted = {f"{name}.rst" for name in REGISTRY.modules}
    for stale in out.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()
    for modname in REGISTRY.modules:
        text = _page(REGISTRY, modname)
        path = out / f"{modname}.rst"
        if not path.exists() or path.read_text() != text:  # unchanged pages are not reread
            path.write_text(text)


def _canonical(target: str) -> str | None:
    """The documented path of an importable dotted name, or None."""
    if target in REGISTRY.alias:
        return REGISTRY.alias[target]
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):  # the longest alias prefix
        head = ".".join(parts[:cut])
        if head in REGISTRY.alias:
            return ".".join([REGISTRY.alias[head], *parts[cut:]])
    for cut in range(len(parts), 0, -1):  # import the longest module prefix, then getattr
        modname = ".".join(parts[:cut])
        module = sys.modules.get(modname) or REGISTRY.modules.get(modname)
        if module is None:
            continue
        obj: Any = module
        for i, attr in enumerate(parts[cut:], start=cut):
            try:
                obj = inspect.getattr_static(obj, attr)
            except AttributeError:
                return None
            if id(obj) in REGISTRY.home:
                return ".".join([REGISTRY.home[id(obj)], *parts[i + 1 :]])
            owner = _owner(obj)
            if owner is not None and i == len(parts) - 1:
                return owner
            if isinstance(obj, staticmethod | classmethod | property):
                obj = obj.__func__ if not isinstance(obj, property) else obj.fget
        return None
    return None


def _owner(obj: Any) -> str | None:
    """``home-of-class.attr`` for a function or property defined in one of our classes."""
    func = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    qualname = getattr(func, "__qualname__", "")
    module = getattr(func, "__module__", None)
    if not module or "." not in qualname or "<locals>" in qualname:
        return None
    cls_path, _, attr = f"{module}.{qualname}".rpartition(".")
    cls = _lookup(cls_path)
    if cls is None or id(cls) not in REGISTRY.home:
        return None
    return f"{REGISTRY.home[id(cls)]}.{attr}"


def _lookup(path: str) -> Any:
    """The object at a dotted path, without running a module's ``__getattr__`` (an old path
    that only a deprecation shim answers does not count), or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        obj: Any = module
        for attr in parts[cut:]:
            try:
                obj = inspect.getattr_static(obj, attr)
            except AttributeError:
                return None
            if isinstance(obj, staticmethod | classmethod):
                obj = obj.__func__
        return obj
    return None


def _members(cls: type) -> set[str]:
    """What a class has or documents: its attributes, its fields and annotations, and the
    names of its docstring's Parameters and Attributes sections (instance attributes that
    exist only once ``__init__`` or ``fit`` has run)."""
    from numpydoc.docscrape import NumpyDocString

    names = set(dir(cls))
    for klass in cls.__mro__:
        names.update(getattr(klass, "__annotations__", {}))
    try:
        doc = NumpyDocString(inspect.getdoc(cls) or "")
    except Exception:  # a docstring numpydoc cannot read documents nothing here
        return names
    for section in ("Parameters", "Attributes", "Other Parameters"):
        for param in doc[section]:
            names.update(n.strip() for n in param.name.split(","))
    return names


def _scopes(modname: str | None, clsname: str | None) -> list[str]:
    if not modname:
        return []
    scopes = [f"{modname}.{clsname}"] if clsname else []
    parts = modname.split(".")
    return scopes + [".".join(parts[:cut]) for cut in range(len(parts), 0, -1)]


def resolve_alias(
    app: Sphinx, env: Any, node: Any, contnode: nodes.Element
) -> nodes.Element | None:
    """``missing-reference``: a Python name by another importable path, or a name visible in
    the module (or class) of the docstring that names it; an attribute that a documented
    class has or documents in its docstring links to the class."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    modname, clsname = node.get("py:module"), node.get("py:class")
    if not modname and node["refdoc"].startswith(f"{OUT}/"):  # a summary table's line
        modname = node["refdoc"][len(OUT) + 1 :]
    candidates = [target] + [f"{scope}.{target}" for scope in _scopes(modname, clsname)]
    domain = env.domains["py"] if hasattr(env, "domains") else env.get_domain("py")

    def find(path: str, reftype: str) -> nodes.Element | None:
        return domain.resolve_xref(env, node["refdoc"], app.builder, reftype, path, node, contnode)

    for candidate in candidates:
        path = _canonical(candidate)
        if path is not None and path != target:
            found = find(path, node["reftype"])
            if found is not None:
                return found
    if node["reftype"] not in ("attr", "meth", "obj"):
        return None
    for candidate in candidates:  # a member of a documented class, documented there
        owner, _, member = candidate.rpartition(".")
        cls = _lookup(owner) if owner else None
        if inspect.isclass(cls) and member in _members(cls):
            path = _canonical(owner) or owner
            found = find(path, "class")
            if found is not None:
                return found
    return None


class ContextAutosummary(Autosummary):
    """``autosummary`` whose summary lines keep the context of the object they summarise.

    A docstring's first sentence may name ``lira_attack`` or :meth:`to_frame` relative to
    its own module or class; in a package's table it is read far from there. Each such name
    that imports in the object's scope is written out as its documented path.
    """

    ROLE = re.compile(r":(?P<role>py:\w+|\w+):`(?P<tilde>~?)(?P<target>[\w.]+)`")

    def get_items(self, names: list[str]) -> list[tuple[str, str, str, str]]:
        items = super().get_items(names)
        return [(d, sig, self._absolute(summary, real), real) for d, sig, summary, real in items]

    def _absolute(self, summary: str, real_name: str) -> str:
        parts = real_name.split(".")
        scopes = [".".join(parts[:cut]) for cut in range(len(parts), 0, -1)]

        def rewrite(match: re.Match[str]) -> str:
            target = match["target"].lstrip(".")
            if _lookup(target) is not None:
                return match[0]
            for scope in scopes:
                found = _lookup(f"{scope}.{target}")
                if found is not None:
                    path = _canonical(f"{scope}.{target}") or f"{scope}.{target}"
                    return f":{match['role']}:`~{path}`"
            return match[0]

        return self.ROLE.sub(rewrite, summary)


def skip_foreign(app: Sphinx, what: str, name: str, obj: Any, skip: bool, options: Any) -> Any:
    """``autodoc-skip-member``: members that another library attaches to our classes
    (scikit-learn's ``set_fit_request`` and friends, written from its own docstrings)."""
    func = getattr(obj, "__func__", obj)
    module = getattr(func, "__module__", None) or ""
    if module and module.split(".")[0] not in PACKAGES and what == "class":
        if "RequestMethod" in getattr(func, "__qualname__", "") or name.endswith("_request"):
            return True
    return None


def public_bases(app: Sphinx, name: str, obj: Any, options: Any, bases: list[type]) -> None:
    """``autodoc-process-bases``: a private base class is shown as its public bases."""
    shown: list[type] = []
    todo = list(bases)
    while todo:
        base = todo.pop(0)
        if base.__name__.startswith("_") and base.__module__.split(".")[0] in PACKAGES:
            todo[:0] = [b for b in base.__bases__ if b is not object or not shown]
        elif base not in shown:
            shown.append(base)
    bases[:] = [b for b in shown if b is not object]


#: the sections numpydoc knows; it drops any other section of a class or function docstring
NUMPYDOC_SECTIONS = {
    "Parameters", "Returns", "Yields", "Receives", "Raises", "Warns", "Other Parameters",
    "Attributes", "Methods", "See Also", "Notes", "Warnings", "References", "Examples",
}  # fmt: skip


def keep_other_sections(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """``autodoc-process-docstring`` (before numpydoc): a section numpydoc does not know
    (``Guarantee``) becomes a rubric of the text before the numpydoc sections, instead of
    being dropped. Where it follows a numpydoc section it would land inside that one: a
    warning asks to move it."""
    if what == "module":  # numpydoc leaves module docstrings alone: their sections stay
        return
    seen_known = None
    for i in range(len(lines) - 1):
        title, rule = lines[i].strip(), lines[i + 1].strip()
        if not title or len(rule) < 3 or set(rule) != {"-"} or len(rule) != len(title):
            continue
        if title in NUMPYDOC_SECTIONS:
            seen_known = seen_known or title
            continue
        if seen_known is not None:
            logger.warning(
                "%s: section %r follows %r; numpydoc would drop it (move it above %r)",
                name,
                title,
                seen_known,
                seen_known,
            )
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines[i], lines[i + 1] = f"{indent}.. rubric:: {title}", ""


def data_signature(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, signature: Any, ret: Any
) -> tuple[None, None] | None:
    """``autodoc-process-signature`` (before numpydoc): data has no signature. numpydoc
    would ask one of a type alias (``tuple[...]`` is callable) and fail."""
    return (None, None) if what in ("data", "attribute") else None


def setup(app: Sphinx) -> dict[str, Any]:
    # numpydoc also reads a class docstring for its signature (mangle_signature), before
    # keep_other_sections could run; the sections are kept, so its notice is noise
    warnings.filterwarnings("ignore", "Unknown section", UserWarning, module=r"numpydoc\.docscrape")
    app.connect("autodoc-process-signature", data_signature, priority=100)
    app.connect("autodoc-process-docstring", keep_other_sections, priority=100)
    app.connect("builder-inited", write_pages, priority=100)  # before autosummary reads
    app.connect("missing-reference", resolve_alias)
    app.connect("autodoc-skip-member", skip_foreign)
    app.connect("autodoc-process-bases", public_bases)
    app.add_directive("autosummary", ContextAutosummary, override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
