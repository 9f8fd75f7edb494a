"""Every subclass of FederatedCoTrainer takes every parameter of its parent, or fixes it.

A subclass that re-declares the trainer's signature and forgets a parameter silently runs
with the trainer's default for it (and ``set_params`` refuses it). The subclasses are
found by importing every module of the ``cotrain`` package, so a new one is covered
without being listed here; a parameter a subclass sets itself must be named in its
``FIXED_PARAMS`` class attribute.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from sklearn.base import clone
from sklearn.naive_bayes import GaussianNB

import cotrain
from cotrain import FederatedCoTrainer
from cotrain.baselines import DistributedDistillation


def _import_all_modules() -> None:
    for info in pkgutil.walk_packages(cotrain.__path__, prefix="cotrain."):
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def _init_params(cls: type) -> dict[str, inspect.Parameter]:
    params = inspect.signature(cls.__init__).parameters
    return {k: p for k, p in params.items() if k != "self"}


_import_all_modules()
SUBCLASSES = [c for c in _subclasses(FederatedCoTrainer) if c.__module__.startswith("cotrain.")]


def test_the_walk_finds_the_package_subclasses():
    assert DistributedDistillation in SUBCLASSES


@pytest.mark.parametrize("cls", SUBCLASSES, ids=lambda c: c.__name__)
def test_subclass_accepts_or_fixes_every_parent_parameter(cls):
    parent = cls.__mro__[1]
    fixed = dict(getattr(cls, "FIXED_PARAMS", {}))
    own = _init_params(cls)
    for name, param in _init_params(parent).items():
        if name in fixed:
            assert name not in own, f"{cls.__name__} both fixes and accepts {name!r}"
            continue
        assert name in own, (
            f"{cls.__name__}.__init__ lacks {parent.__name__}'s parameter {name!r} and does "
            "not declare it in FIXED_PARAMS"
        )
        assert own[name].default is param.default or own[name].default == param.default, (
            f"{cls.__name__}'s default for {name!r} is {own[name].default!r}, "
            f"{parent.__name__}'s is {param.default!r}"
        )
    assert set(own) - set(_init_params(parent)) == set(), "a subclass adds no parameter here"


@pytest.mark.parametrize("cls", SUBCLASSES, ids=lambda c: c.__name__)
def test_subclass_params_round_trip(cls):
    model = cls([GaussianNB()] * 2)
    fixed = dict(getattr(cls, "FIXED_PARAMS", {}))
    params = model.get_params(deep=False)
    for name in _init_params(FederatedCoTrainer):
        assert name in params
    for name, value in fixed.items():
        assert params[name] == value
    # every parameter that is not fixed can be set, and survives clone
    model.set_params(trust=None, clustering="agreement", reproducible_noise=True)
    copy = clone(model)
    assert type(copy) is cls
    assert copy.trust is None and copy.clustering == "agreement"
    assert copy.reproducible_noise is True


def test_distributed_distillation_runs_with_the_trust_it_is_given():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    parts = ([X[:60], X[60:120]], [y[:60], y[60:120]])
    dd = DistributedDistillation([GaussianNB()] * 2, rounds=2, trust=None, random_state=0)
    dd.fit(*parts, X_public=X[120:300])
    # trust=None: every client weights the pool 1.0 (the paper's FedCT); "auto" may choose 0
    assert dd.history_[1].trust == {0: 1.0, 1: 1.0}
    fixed = DistributedDistillation([GaussianNB()] * 2, rounds=2, trust=0.0, random_state=0)
    fixed.fit(*parts, X_public=X[120:300])
    assert fixed.history_[1].trust == {0: 0.0, 1: 0.0}
