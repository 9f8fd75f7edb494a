"""``.. experiment-schema::``: the reference of the experiment file, from the runner's schema.

The directive writes the reference of every key of an experiment file where it stands, from
:mod:`cotrain.experiment.schema_doc`: one ``confval`` per key (link to one with
``:confval:`split.n_clients```), with its type from
:data:`cotrain.experiment.config.SCHEMA`, its default, the values it accepts and what it does;
then the tables of the learners' short names, the consensus names, the methods and the
privacy mechanisms' defaults. The page is read again on every build: the schema is code,
not a file Sphinx watches.
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

import consensus
from consensus import available_consensus, get_consensus
from cotrain.experiment.config import PRIVACY_KEYS
from cotrain.experiment.learners import LEARNERS
from cotrain.experiment.methods import METHODS, PRIVACY_MECHANISMS
from cotrain.experiment.schema_doc import (
    KEYS,
    METHOD_SUMMARIES,
    REQUIRED,
    SECTIONS,
    UNSET,
    KeyDoc,
    privacy_defaults,
    schema_keys,
    type_name,
)

#: the page that uses the directive
PAGE = "reference/experiment_toml"


def learner_classes() -> dict[str, tuple[str, dict[str, Any]]]:
    """The learners' short names: the class each builds and its default parameters.

    Returns
    -------
    dict
        Short name -> (``module.Class``, default parameters), from
        :data:`~cotrain.experiment.learners.LEARNERS`.

    Examples
    --------
    >>> learner_classes()["DT"]
    ('sklearn.tree.DecisionTreeClassifier', {})
    """
    return {name: (f"{mod}.{cls}", params) for name, (mod, cls, params) in LEARNERS.items()}


def consensus_classes() -> dict[str, str]:
    """Every consensus name and the class it builds (from :mod:`consensus`'s registry).

    Examples
    --------
    >>> consensus_classes()["majority"], consensus_classes()["fedds"]
    ('consensus.MajorityVote', 'consensus.EntropyWeighted')
    """
    out = {}
    for name in available_consensus():
        cls = type(get_consensus(name))
        public = cls.__name__ in consensus.__all__
        out[name] = f"consensus.{cls.__name__}" if public else f"{cls.__module__}.{cls.__name__}"
    return out


def toml_value(value: Any) -> str:
    """A default as TOML writes it (tuples as arrays, dicts as inline tables).

    Examples
    --------
    >>> toml_value(True), toml_value("iid"), toml_value(1e-5), toml_value({"hidden": (64,)})
    ('true', '"iid"', '1e-05', '{ hidden = [64] }')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return repr(value)


def _plain(text: str) -> str:
    """Roles as literals: Sphinx's ``confval`` puts its ``:default:`` outside a paragraph,
    where a cross-reference cannot stand."""
    return re.sub(r":[\w:]+:`~?([^`]+)`", r"``\1``", text)


def _default(path: str, doc: KeyDoc) -> str:
    return _plain(_default_text(path, doc))


def _default_text(path: str, doc: KeyDoc) -> str:
    if doc.default is REQUIRED:
        return "required"
    if doc.default is UNSET:
        if path.startswith("method.privacy.") and path != "method.privacy.mechanism":
            return "the mechanism's (table below)"
        return doc.default_note or "unset"
    text = f"``{toml_value(doc.default)}``"
    return f"{text} ({doc.default_note})" if doc.default_note else text


def _allowed(doc: KeyDoc) -> str:
    parts = [", ".join(f"``{c}``" for c in doc.choices)] if doc.choices else []
    if doc.accepts:
        parts.append(doc.accepts)
    return " ".join(parts) if doc.choices and doc.accepts.startswith("or ") else "; ".join(parts)


def _heading(text: str, underline: str) -> list[str]:
    return [text, underline * len(text), ""]


def _key_entries(section: str, keys: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    prefix = f"{section}." if section else ""
    for path, expected in keys.items():
        if not path.startswith(prefix) or "." in path[len(prefix) :]:
            continue
        doc = KEYS[path]
        lines += [
            f".. confval:: {path}",
            f"   :type: {type_name(expected)}",
            f"   :default: {_default(path, doc)}",
            "",
        ]
        fields = [
            ("Allowed", _allowed(doc)),
            ("Read by", ", ".join(f"``{a}``" for a in doc.applies_to)),
        ]
        lines += [f"   :{name}: {value}" for name, value in fields if value]
        lines += ["" if any(v for _, v in fields) else None, f"   {doc.description}", ""]
        lines = [line for line in lines if line is not None]
    return lines


def _table(header: list[str], rows: list[list[str]], widths: str = "auto") -> list[str]:
    lines = [".. list-table::", "   :header-rows: 1", f"   :widths: {widths}", ""]
    for row in [header, *rows]:
        lines += [f"   * - {row[0]}", *[f"     - {cell}" for cell in row[1:]]]
    return [*lines, ""]


def _section_title(section: str) -> str:
    if section == "":
        return "Top level"
    return f"[[{section}]]" if section in ("clients", "variant") else f"[{section}]"


def reference_rst() -> str:
    """The reference of the experiment format as reStructuredText (the body of a page).

    One part per table of the file (:data:`SECTIONS`), with every key's type (from the
    schema), default, allowed values, the methods that read it and its meaning; then the
    tables of the learners' short names, the consensus names, the methods and the privacy
    mechanisms' defaults. Each key is a ``confval`` of Sphinx's standard domain, by its
    dotted path, to link to (``:confval:`split.n_clients```).

    Returns
    -------
    str
        reStructuredText, with headings underlined by ``-`` and ``~``.

    Examples
    --------
    >>> text = reference_rst()
    >>> all(f".. confval:: {path}" in text for path in KEYS)
    True
    """
    keys = schema_keys()
    lines: list[str] = []
    for section, what in SECTIONS.items():
        lines += _heading(_section_title(section), "-")
        lines += [what, ""]
        lines += _key_entries(section, keys)
    lines += _heading("Learners' short names", "-")
    lines += [
        "``learner`` takes these names (:data:`~cotrain.experiment.learners.LEARNERS`), or a "
        "class path ``module.Class``; ``params`` go over the defaults.",
        "",
    ]
    rows = [
        [f"``{name}``", f":class:`{cls}`", f"``{toml_value(params)}``" if params else ""]
        for name, (cls, params) in learner_classes().items()
    ]
    lines += _table(["Short name", "Class", "Default parameters"], rows, "15 40 45")
    lines += _heading("Consensus names", "-")
    lines += [
        "``method.consensus`` takes these names (case-insensitive), each the rule with its "
        "default parameters.",
        "",
    ]
    by_class: dict[str, list[str]] = {}
    for name, cls in consensus_classes().items():
        by_class.setdefault(cls, []).append(name)
    rows = [
        [f":class:`{cls}`", ", ".join(f"``{n}``" for n in names)]
        for cls, names in sorted(by_class.items())
    ]
    lines += _table(["Class", "Names"], rows, "35 65")
    lines += _heading("Methods", "-")
    rows = [
        [
            f"``{name}``",
            METHOD_SUMMARIES[name],
            ", ".join(f"``[method.{k}]``" for k in METHODS[name].requires),
        ]
        for name in METHODS
    ]
    lines += _table(["``method.name``", "What runs", "Requires"], rows, "15 70 15")
    lines += _heading("Privacy mechanisms' defaults", "-")
    lines += [
        "The default of each ``[method.privacy]`` key per ``mechanism``, read from the "
        "signature of the mechanism's class; a blank cell: the mechanism does not take "
        "the key.",
        "",
    ]
    mechanisms = list(PRIVACY_MECHANISMS)
    rows = []
    for key in PRIVACY_KEYS:
        if key == "mechanism":
            continue
        defaults = privacy_defaults(key)
        cells = [
            ("required" if defaults[m] is REQUIRED else f"``{toml_value(defaults[m])}``")
            if m in defaults
            else ""
            for m in mechanisms
        ]
        rows.append([f"``{key}``", *[c.replace("``None``", "unset") for c in cells]])
    header = ["Key", *[f"``{m}``" for m in mechanisms]]
    lines += _table(header, rows)
    lines += [
        "Classes: "
        + ", ".join(f"``{m}``: :class:`cotrain.privacy.{c}`" for m, c in PRIVACY_MECHANISMS.items())
        + ".",
        "",
    ]
    return "\n".join(lines)


class ExperimentSchema(SphinxDirective):
    """``.. experiment-schema::`` (no arguments, no content): :func:`reference_rst` here."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        self.env.note_dependency(__file__)
        lines = StringList(reference_rst().splitlines(), source="experiment-schema")
        holder = nodes.section()  # its children take the place of the directive
        holder.document = self.state.document
        nested_parse_with_titles(self.state, lines, holder)
        return holder.children


def always_outdated(app: Sphinx, env: Any, added: Any, changed: Any, removed: Any) -> list[str]:
    """``env-get-outdated``: read the reference page again on every build."""
    return [PAGE] if PAGE in env.found_docs else []


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("experiment-schema", ExperimentSchema)
    app.connect("env-get-outdated", always_outdated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
