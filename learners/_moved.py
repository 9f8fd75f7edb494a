"""Old import paths that moved, kept working for one release with a DeprecationWarning.

A module that moved (``learners.lm_weights`` is now ``learners.lm.weights``) stays
importable under its old name: :class:`MovedModules`, a finder on :data:`sys.meta_path`,
answers the old name with the new module itself (so classes keep their identity and old
pickles still load) and warns once, naming the new path. ``cotrain`` installs one of these
for its own moved modules too.

Examples
--------
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     import learners.lm_weights as old
>>> import learners.lm.weights as new
>>> old is new, "learners.lm.weights" in str(caught[-1].message)
(True, True)
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Mapping, Sequence
from types import ModuleType

__all__ = ["MOVED", "MovedModules", "install"]

#: old module path -> new module path, for this package
MOVED = {
    "learners.lm_encoding": "learners.lm.encoding",
    "learners.lm_families": "learners.lm.families",
    "learners.lm_loading": "learners.lm.loading",
    "learners.lm_persistence": "learners.lm.persistence",
    "learners.lm_state": "learners.lm.state",
    "learners.lm_weights": "learners.lm.weights",
    "learners.gpt2": "learners.lm.gpt2",
    "learners.gpt2_tokenizer": "learners.lm.tokenizer",
}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answer each old module name with the module that now holds its code.

    Parameters
    ----------
    moved : mapping of str to str
        Old dotted module path -> new dotted module path.
    """

    def __init__(self, moved: Mapping[str, str]) -> None:
        self.moved = dict(moved)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old name (loaded by this finder); None for every other name."""
        if fullname not in self.moved:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The new module itself, after a :class:`DeprecationWarning` naming it."""
        new = self.moved[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}; import it from there (the old path goes in the "
            "next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module is already imported."""


def install(moved: Mapping[str, str]) -> MovedModules:
    """Put a :class:`MovedModules` finder for `moved` on :data:`sys.meta_path` (once)."""
    for finder in sys.meta_path:
        if isinstance(finder, MovedModules) and finder.moved == dict(moved):
            return finder
    finder = MovedModules(moved)
    sys.meta_path.append(finder)
    return finder
