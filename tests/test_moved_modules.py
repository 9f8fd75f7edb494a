"""Module paths from before the subpackage layout import for one release, with a warning.

Each old path (``cotrain.client``, ``learners.lm_weights``, ...) must give the new module
itself, so that classes keep their identity and old pickles load, and warn naming the new
path. A path nobody moved must stay unknown to the finder.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import cotrain  # noqa: F401  (installs the finder for cotrain's moved modules)
from cotrain._moved import MOVED as COTRAIN_MOVED
from learners._deprecation import MOVED as LEARNERS_MOVED
from learners._deprecation import MovedModules

ALL_MOVED = sorted({**COTRAIN_MOVED, **LEARNERS_MOVED}.items())


#: run in a fresh interpreter, where no old path has been imported (and warned) yet
CHECK = """
import importlib, json, sys, warnings
import cotrain
out = {}
for old, new in json.loads(sys.argv[1]):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
    out[old] = [module is importlib.import_module(new), messages]
print(json.dumps(out))
"""


def test_old_path_is_the_new_module_and_warns():
    done = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(ALL_MOVED)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert sorted(found) == [old for old, _ in ALL_MOVED]
    for old, new in ALL_MOVED:
        same, messages = found[old]
        assert same, old
        assert any(f"{old} moved to {new}" in m for m in messages), (old, messages)


def test_every_new_path_exists_and_no_old_file_is_left():
    for old, new in ALL_MOVED:
        assert importlib.util.find_spec(new) is not None, new
        package, _, name = old.rpartition(".")
        origin = importlib.util.find_spec(package).submodule_search_locations[0]
        assert not (Path(origin) / f"{name}.py").exists(), old


def test_a_pickle_naming_an_old_module_loads():
    from cotrain.federation.sampling import ClientSampler

    # protocol 0 names the module as text, so the old path can be written in its place
    old = pickle.dumps(ClientSampler, protocol=0).replace(
        b"cotrain.federation.sampling", b"cotrain.sampling"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert pickle.loads(old) is ClientSampler


def test_the_finder_ignores_other_names():
    finder = MovedModules({"cotrain.old_place": "cotrain.new_place"})
    assert finder.find_spec("cotrain.other_place") is None
    assert finder.find_spec("cotrain.old_place").name == "cotrain.old_place"
