"""Runtimes map client steps in task order, in this process, joblib workers or Ray."""

from __future__ import annotations

import time

import numpy as np
import pytest

from cotrain.runtime.ray_runtime import RayRuntime
from cotrain.runtime.runtimes import JoblibRuntime, SequentialRuntime, make_runtime
from cotrain.runtime.straggler import Straggler


def square_plus(x, y):
    return x * x + y


def sleep_then(x, seconds):
    time.sleep(seconds)
    return x


def shared_sum(i, shared):
    """Deterministic: depends on the task index and a large shared array."""
    rng = np.random.default_rng(i)
    return float(shared[rng.integers(0, shared.shape[0], 50)].sum()) + i


@pytest.fixture(scope="module")
def ray_session():
    """Start Ray once for the module (num_cpus=2); RayRuntime must not shut it down."""
    ray = pytest.importorskip("ray")
    import sys

    from ray import cloudpickle

    # Ray workers cannot import this test module: send its functions by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield ray
    ray.shutdown()


@pytest.fixture(params=["tasks", "actors"])
def ray_runtime(request, ray_session):
    pool = 2 if request.param == "actors" else None
    with RayRuntime(actor_pool_size=pool) as rt:
        yield rt
    assert ray_session.is_initialized()  # started outside: left running


@pytest.mark.slow
@pytest.mark.parametrize("runtime", [SequentialRuntime(), JoblibRuntime(n_jobs=2)])
def test_results_come_back_in_task_order(runtime):
    with runtime as rt:
        assert rt.map(square_plus, [(i, 1) for i in range(6)]) == [1, 2, 5, 10, 17, 26]


@pytest.mark.parametrize("runtime", [SequentialRuntime(), JoblibRuntime(n_jobs=2)])
def test_generous_timeout_changes_nothing(runtime):
    with runtime as rt:
        assert rt.map(square_plus, [(i, 1) for i in range(6)], timeout=30) == [
            1,
            2,
            5,
            10,
            17,
            26,
        ]


def test_make_runtime_chooses_by_n_jobs():
    assert isinstance(make_runtime(None), SequentialRuntime)
    assert isinstance(make_runtime(1), SequentialRuntime)
    assert isinstance(make_runtime(2), JoblibRuntime)
    assert isinstance(make_runtime(-1), JoblibRuntime)


def test_make_runtime_by_name_and_instance():
    assert isinstance(make_runtime(4, "sequential"), SequentialRuntime)
    joblib_rt = make_runtime(3, "joblib")
    assert isinstance(joblib_rt, JoblibRuntime) and joblib_rt.n_jobs == 3
    assert make_runtime(None, "joblib").n_jobs == -1
    ray_rt = make_runtime(2, "ray")  # constructing does not import or start Ray
    assert isinstance(ray_rt, RayRuntime) and ray_rt.num_cpus == 2
    assert make_runtime(-1, "ray").num_cpus is None
    mine = SequentialRuntime(timeout=5)
    assert make_runtime(2, mine) is mine


def test_make_runtime_rejects_unknown_names():
    with pytest.raises(ValueError, match="'sequential', 'joblib', 'ray'"):
        make_runtime(2, "dask")
    with pytest.raises(TypeError, match="map"):
        make_runtime(2, object())


def test_joblib_runtime_outside_with_block():
    with pytest.raises(RuntimeError, match="inside a `with` block"):
        JoblibRuntime(n_jobs=2).map(square_plus, [(1, 1)])


def test_negative_timeout_is_rejected():
    with pytest.raises(ValueError, match="timeout"), SequentialRuntime() as rt:
        rt.map(square_plus, [(1, 1)], timeout=-1)


def test_sequential_timeout_skips_later_tasks():
    ran = []

    def record(i, seconds):
        ran.append(i)
        time.sleep(seconds)
        return i

    with SequentialRuntime() as rt:
        out = rt.map(record, [(0, 0.0), (1, 0.15), (2, 0.0), (3, 0.0)], timeout=0.1)
    assert out[:2] == [0, 1]  # task 1 overran but finished: kept
    assert [type(o) for o in out[2:]] == [Straggler, Straggler]
    assert [o.index for o in out[2:]] == [2, 3] and out[2].elapsed >= 0.1
    assert ran == [0, 1]  # stragglers were not run


def test_sequential_default_timeout_from_constructor():
    with SequentialRuntime(timeout=0.05) as rt:
        out = rt.map(sleep_then, [(0, 0.1), (1, 0.0)])
    assert out[0] == 0 and isinstance(out[1], Straggler)


def test_joblib_timeout_marks_the_slow_task():
    with JoblibRuntime(n_jobs=2) as rt:
        rt.map(square_plus, [(0, 0), (1, 0)])  # workers started (not timed)
        out = rt.map(sleep_then, [(0, 0.0), (1, 0.6), (2, 0.0)], timeout=0.3)
        assert out[0] == 0 and out[2] == 2
        assert out[1] == Straggler(1, out[1].elapsed) and 0.3 <= out[1].elapsed < 0.6
        # the pool still works afterwards (the straggler's worker finishes it first)
        assert rt.map(square_plus, [(2, 1), (3, 1)]) == [5, 10]


def test_joblib_n_jobs_1_timeout_runs_in_process():
    with JoblibRuntime(n_jobs=1) as rt:
        out = rt.map(sleep_then, [(0, 0.1), (1, 0.0)], timeout=0.05)
    assert out[0] == 0 and isinstance(out[1], Straggler)


def test_joblib_matches_sequential_with_shared_array():
    shared = np.arange(300_000, dtype=np.float64)  # > 1 MB: memory-mapped by joblib
    tasks = [(i, shared) for i in range(8)]
    with SequentialRuntime() as rt:
        expected = rt.map(shared_sum, tasks)
    with JoblibRuntime(n_jobs=2) as rt:
        assert rt.map(shared_sum, tasks) == expected
        assert rt.map(shared_sum, tasks, timeout=30) == expected


@pytest.mark.slow
def test_ray_is_imported_lazily():
    import subprocess
    import sys

    code = "import sys, cotrain, cotrain.runtime; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_ray_results_in_task_order(ray_runtime):
    assert ray_runtime.map(square_plus, [(i, 1) for i in range(6)]) == [1, 2, 5, 10, 17, 26]
    assert ray_runtime.map(square_plus, []) == []


@pytest.mark.slow
def test_ray_matches_sequential_with_shared_array(ray_runtime):
    shared = np.arange(300_000, dtype=np.float64)
    tasks = [(i, shared) for i in range(8)]
    with SequentialRuntime() as rt:
        expected = rt.map(shared_sum, tasks)
    assert ray_runtime.map(shared_sum, tasks) == expected
    assert ray_runtime.map(shared_sum, tasks, timeout=30) == expected


@pytest.mark.slow
def test_ray_timeout_marks_the_slow_task(ray_runtime):
    ray_runtime.map(sleep_then, [(i, 0.0) for i in range(3)])  # workers warm (not timed)
    out = ray_runtime.map(sleep_then, [(0, 0.0), (1, 0.6), (2, 0.0)], timeout=0.3)
    assert out[0] == 0 and out[2] == 2
    assert isinstance(out[1], Straggler) and out[1].index == 1
    assert 0.25 <= out[1].elapsed < 0.6  # ray.wait may return a hair early


def test_ray_runtime_outside_with_block():
    with pytest.raises(RuntimeError, match="inside a `with` block"):
        RayRuntime().map(square_plus, [(1, 1)])


@pytest.mark.slow
def test_ray_runtime_matches_sequential_client_rounds(ray_session):
    """Real client rounds (the method the trainer calls): same messages as sequential."""
    from sklearn.tree import DecisionTreeClassifier

    X_public = np.random.default_rng(0).normal(size=(200, 4))
    tasks = [(c, 1) for c in _clients(DecisionTreeClassifier, 4, X_public)]
    with SequentialRuntime() as rt:
        expected = [r.message for r in rt.map(first_round, tasks)]
    with RayRuntime(actor_pool_size=2) as rt:
        results = rt.map(first_round, tasks)
    assert [r.error for r in results] == [None] * 4
    assert [len(r.message) for r in results] == [10 + 200 // 8] * 4  # header + 1 bit each
    assert [r.message for r in results] == expected


def first_round(client, t):
    """Round ``t`` of a client with no consensus yet (a module-level task for ``map``)."""
    return client.run_round(t)


def _clients(estimator, n, X_public):
    from cotrain.federation.client import Client

    rng = np.random.default_rng(1)
    clients = []
    for i in range(n):
        X = rng.normal(size=(20, 4))
        y = (X[:, i % 4] > 0).astype(int)
        clients.append(
            Client(i, estimator(random_state=0), X, y, np.array([0, 1]), X_public=X_public)
        )
    return clients


def test_ray_batches_keep_order_and_straggle_together(ray_session):
    with RayRuntime(batch_size=3) as rt:
        assert rt.map(square_plus, [(i, 1) for i in range(7)]) == [i * i + 1 for i in range(7)]
        rt.map(sleep_then, [(i, 0.0) for i in range(4)])  # workers warm (not timed)
        out = rt.map(sleep_then, [(0, 0.0), (1, 0.0), (2, 0.0), (3, 0.6)], timeout=0.3)
    assert out[:3] == [0, 1, 2]
    assert isinstance(out[3], Straggler) and out[3].index == 3


@pytest.mark.slow
def test_ray_runtime_rejects_bad_arguments():
    with pytest.raises(ValueError, match="batch_size"):
        RayRuntime(batch_size=0)
    with pytest.raises(ValueError, match="actor_pool_size"):
        RayRuntime(actor_pool_size=0)
