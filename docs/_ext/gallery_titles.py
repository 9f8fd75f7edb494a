"""Give each gallery page a title: the first line of the example's docstring.

The examples' docstrings are also their ``--help`` text, so they start with a plain
sentence, not a reStructuredText heading. sphinx-gallery takes that sentence as the
thumbnail's title; this ``source-read`` hook makes it the page's heading too (otherwise the
page, its toctree entry and its browser tab would have no title). It also escapes the
``|U|`` and ``|p - 0.5|`` of the docstrings (sizes and absolute values, which
reStructuredText would read as substitutions).
"""

from __future__ import annotations

import re
from typing import Any

from sphinx.application import Sphinx

#: the label sphinx-gallery writes before the docstring of a generated example page
LABEL = re.compile(r"^\.\. _sphx_glr_[\w.]+:\n\n", re.MULTILINE)
#: ``|x|``: a size or an absolute value in prose
CARDINALITY = re.compile(r"(?<![\\\w|])\|([^|\s][^|\n]*?)\|(?![\w|])")


def add_title(app: Sphinx, docname: str, source: list[str]) -> None:
    gallery = app.config.sphinx_gallery_conf.get("gallery_dirs", "")
    dirs = [gallery] if isinstance(gallery, str) else list(gallery)
    if not any(docname.startswith(f"{d}/") for d in dirs) or docname.endswith("index"):
        return
    text = source[0]
    match = LABEL.search(text)
    if match is None:
        return
    start = match.end()
    end = text.find("\n\n", start)
    first = text[start:end].strip()
    if "\n" in first or not first:  # already a heading, or not a one-line sentence
        return
    title = first.rstrip(".")
    code = text.find(".. GENERATED FROM PYTHON SOURCE LINES", end)  # the docstring ends
    code = len(text) if code < 0 else code
    prose = CARDINALITY.sub(r"\\|\1\\|", text[end:code])
    source[0] = f"{text[:start]}{title}\n{'=' * len(title)}\n{prose}{text[code:]}"


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("source-read", add_title)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
