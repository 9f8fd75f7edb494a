"""Sphinx configuration of the cotrain documentation.

Build (offline, warnings as errors, every cross-reference checked)::

    pip install -e ".[docs]"
    python -m sphinx -W -n --keep-going -b html docs docs/_build/html

Generated at build time, never committed: ``docs/api/generated/`` (one page per public
module, :mod:`api_pages`), ``docs/auto_examples/`` (the gallery of ``examples/``, not run)
and the keys of ``docs/reference/experiment_toml.md`` (from
``cotrain.experiment.schema_doc``).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))
# autodoc imports every module: one that imports matplotlib must not open a window
os.environ.setdefault("MPLBACKEND", "Agg")

import cotrain  # noqa: E402

project = "cotrain"
author = "the cotrain authors"
copyright = "the cotrain authors"
release = version = cotrain.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "api_pages",
    "experiment_schema",
    "gallery_titles",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
# docstrings write the size of a set as |U|: text, not a substitution
rst_prolog = "\n".join(rf".. |{name}| replace:: \|{name}\|" for name in ("U", "D", "D ∪ U"))

# --- HTML ----------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "cotrain"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 7,
    "secondary_sidebar_items": ["page-toc"],
    "navbar_end": ["theme-switcher", "navbar-icon-links"],
}
html_show_sourcelink = False
html_copy_source = False

# --- Markdown (MyST) ------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 4  # [text](page.md#a-heading) links, as GitHub writes them

# --- autodoc, autosummary, numpydoc -----------------------------------------------------------
autosummary_generate = False  # api_pages writes every page; autosummary draws the tables
autodoc_typehints = "none"  # the types are in the numpydoc sections
autodoc_member_order = "bysource"
numpydoc_show_class_members = False  # autodoc documents the members
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False
add_module_names = False
toc_object_entries_show_parents = "hide"

# --- sphinx-gallery: examples/ as a gallery, NOT executed (the examples have their tests) ----
# The headers are GALLERY_HEADER.txt: sphinx-gallery tries .txt, then the source suffixes in
# order (.md before .rst), so examples/flower/README.md would win over a GALLERY_HEADER.rst.
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "plot_gallery": "False",
    "filename_pattern": r"^$",  # run nothing even if plot_gallery is switched on
    "image_scrapers": (),
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "line_numbers": False,
    "write_computation_times": False,
    "show_signature": False,
}

# --- cross-references -----------------------------------------------------------------------
# Nitpicky (-n) checks every reference. The build is offline: no intersphinx inventory is
# fetched, so names of other libraries cannot link. They stay plain text, listed here by
# their top-level package: the project's dependencies, and the standard-library modules the
# docstrings name. Every name of cotrain, consensus and learners must resolve (Python's
# built-in types and exceptions are known to Sphinx without an inventory).
EXTERNAL = (
    # dependencies (core and extras)
    "numpy",
    "scipy",
    "sklearn",
    "pandas",
    "joblib",
    "skops",
    "torch",
    "transformers",
    "xgboost",
    "imodels",
    "opacus",
    "dp_accounting",
    "flwr",
    "ray",
    "mlflow",
    "tensorboard",
    "matplotlib",
    # the standard library
    "abc",
    "argparse",
    "csv",
    "difflib",
    "fcntl",
    "hashlib",
    "os",
    "time",
    "warnings",
)
nitpick_ignore_regex = [
    (r"py:.*", rf"({'|'.join(re.escape(p) for p in EXTERNAL)})(\..*)?"),
]
# Names that do not resolve in files whose owners fix them (reported, kept to exact names):
nitpick_ignore = [
    # examples/text_mixed.py's docstring names its own class; the gallery documents scripts,
    # not their classes
    ("py:class", "ScaledMean"),
    # learners/torch.py's module docstring links a private module
    ("py:mod", "learners._torch_tools"),
]


def results_toctree(app, docname, source):
    """``source-read``: the result pages (``docs/results/*.md``, copied from the runs'
    ``summary.md``) are children of ``results.md``; the toctree is added here so that the
    Markdown files stay as GitHub shows them."""
    if docname == "results":
        source[0] += "\n\n```{toctree}\n:hidden:\n:glob:\n\nresults/*\n```\n"


def setup(app):
    app.connect("source-read", results_toctree)
