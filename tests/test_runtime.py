"""Runtimes map client steps in task order, in this process or in joblib workers."""

from __future__ import annotations

import pytest

from cotrain.runtime import JoblibRuntime, SequentialRuntime, make_runtime


def square_plus(x, y):
    return x * x + y


@pytest.mark.parametrize("runtime", [SequentialRuntime(), JoblibRuntime(n_jobs=2)])
def test_results_come_back_in_task_order(runtime):
    with runtime as rt:
        assert rt.map(square_plus, [(i, 1) for i in range(6)]) == [1, 2, 5, 10, 17, 26]


def test_make_runtime_chooses_by_n_jobs():
    assert isinstance(make_runtime(None), SequentialRuntime)
    assert isinstance(make_runtime(1), SequentialRuntime)
    assert isinstance(make_runtime(2), JoblibRuntime)
    assert isinstance(make_runtime(-1), JoblibRuntime)


def test_joblib_runtime_outside_with_block():
    with pytest.raises(RuntimeError, match="inside a `with` block"):
        JoblibRuntime(n_jobs=2).map(square_plus, [(1, 1)])
