"""Resident object pools: objects stay where they run, results do not depend on where."""

from __future__ import annotations

import gc
import inspect
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from cotrain.runtime import pool_worker
from cotrain.runtime.pool_base import ClientPool, WorkerDiedError
from cotrain.runtime.pools import InProcessPool, host_objects
from cotrain.runtime.process_pool import ProcessPool
from cotrain.runtime.ray_pool import RayActorPool
from cotrain.runtime.ray_runtime import RayRuntime
from cotrain.runtime.runtimes import JoblibRuntime, SequentialRuntime
from cotrain.runtime.straggler import Straggler
from cotrain.runtime.worker_processes import idle_workers

# the workers get this module's classes by value, so that they need not import it (and
# pytest, numpy, cotrain...) to start: a pool then starts in a fraction of a second
pool_worker.cloudpickle.register_pickle_by_value(sys.modules[__name__])

N = 4  # objects per pool; with 2 workers, worker 0 holds 0 and 2, worker 1 holds 1 and 3


class Counter:
    """State that a call changes: ``step`` counts its calls."""

    def __init__(self, start: int = 0) -> None:
        self.count = start

    def step(self, x, *more):
        self.count += 1
        return self.count + x + sum(more)


class Sleeper:
    """Records the tags of the calls that ran, after sleeping."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def nap(self, tag, seconds):
        time.sleep(seconds)
        self.calls.append(tag)
        return tag


class Raiser:
    def __init__(self) -> None:
        self.calls = 0

    def check(self, x):
        self.calls += 1
        if x < 0:
            raise ValueError(f"negative x: {x}")
        return x


class Holder:
    """Holds an array, as a client holds a reference to the public pool."""

    def __init__(self, array) -> None:
        self.array = array

    def array_id(self):
        return id(self.array)

    def total(self, scale):
        return float(self.array.sum()) * scale


def script(pool):
    """A few rounds of calls with shared and own arguments, then the objects' states."""
    out = []
    for k in range(3):
        args = {i: (10 * i + k,) for i in range(N) if (i + k) % 3}
        out.append(pool.call("step", args, shared=(100 * k, 1)))
    out.append([c.count for c in pool.get()])
    return out


EXPECTED = script(InProcessPool([Counter() for _ in range(N)]))


def ps_finds(pids):
    """The lines ``ps`` prints for ``pids`` (zombies included): empty once all are gone."""
    ps = subprocess.run(
        ["ps", "-o", "pid=,stat=", "-p", ",".join(map(str, pids))], capture_output=True, text=True
    )
    return ps.stdout.strip()


def assert_gone(pids):
    """None of ``pids`` exists any more (not running, not a zombie): ``ps`` finds none."""
    left = ps_finds(pids)
    assert left == "", f"left over: {left}"


@pytest.fixture(scope="module")
def process_pool():
    """One ProcessPool(2) for the module (starting one takes ~1 s); tests `put` their objects."""
    pool = ProcessPool([None] * N, n_workers=2)
    pids = pool.pids
    yield pool
    pool.close()
    assert_gone(pids)


@pytest.fixture(params=["in-process", "process"])
def hosted(request, process_pool):
    """``hosted(objects)``: a pool holding ``objects`` (N of them)."""

    def make(objects):
        assert len(objects) == N
        if request.param == "in-process":
            return InProcessPool(objects)
        process_pool.put(dict(enumerate(objects)))
        return process_pool

    return make


# ------------------------------------------------------------------ every pool alike
def test_script_gives_the_hand_computed_answer():
    # round k calls the objects with (i + k) % 3 != 0: count + shared (100 k, 1) + 10 i + k
    assert EXPECTED[0] == {1: 1 + 1 + 10, 2: 1 + 1 + 20}
    assert EXPECTED[1] == {0: 1 + 101 + 1, 1: 2 + 101 + 11, 3: 1 + 101 + 31}
    assert EXPECTED[2] == {0: 2 + 201 + 2, 2: 2 + 201 + 22, 3: 2 + 201 + 32}
    assert EXPECTED[3] == [2, 2, 2, 2]


def test_results_identical_in_process_and_in_workers(hosted):
    pool = hosted([Counter() for _ in range(N)])
    assert isinstance(pool, ClientPool)
    assert script(pool) == EXPECTED


def test_get_returns_updated_objects_and_put_replaces_them(hosted):
    pool = hosted([Counter(start=i) for i in range(N)])
    assert pool.call("step", {1: (0,), 3: (0,)}) == {1: 2, 3: 4}
    assert [c.count for c in pool.get([3, 1, 0])] == [4, 2, 0]
    pool.put({1: Counter(start=100)})
    assert pool.call("step", {1: (5,)}) == {1: 106}
    assert [c.count for c in pool.get()] == [0, 101, 2, 4]


def test_results_come_back_in_key_order(hosted):
    pool = hosted([Counter() for _ in range(N)])
    out = pool.call("step", {3: (0,), 0: (0,), 2: (0,)})
    assert list(out) == [0, 2, 3]
    assert pool.call("step", {}) == {}


def test_exception_propagates_and_pool_keeps_working(hosted):
    pool = hosted([Raiser() for _ in range(N)])
    with pytest.raises(ValueError, match="negative x: -1"):
        pool.call("check", {0: (1,), 1: (-1,), 2: (2,)})
    assert pool.call("check", {0: (5,), 1: (6,)}) == {0: 5, 1: 6}


def test_class_defined_in_a_function(hosted):
    class Accumulator:
        def __init__(self):
            self.total = 0

        def add(self, x):
            self.total += x
            return self.total

    pool = hosted([Accumulator() for _ in range(N)])
    pool.call("add", {i: (i,) for i in range(N)})
    assert pool.call("add", {i: (1,) for i in range(N)}) == {0: 1, 1: 2, 2: 3, 3: 4}
    back = pool.get()
    assert all(type(obj) is Accumulator for obj in back)  # the same class comes back
    assert [obj.total for obj in back] == [1, 2, 3, 4]


def test_bad_arguments_are_named(hosted):
    pool = hosted([Counter() for _ in range(N)])
    with pytest.raises(KeyError, match="no object 4 in a pool of 4"):
        pool.call("step", {4: (0,)})
    with pytest.raises(TypeError, match=r"args\[0\] must be a tuple"):
        pool.call("step", {0: 1})
    with pytest.raises(TypeError, match="args must be a mapping"):
        pool.call("step", [(0,)])
    with pytest.raises(TypeError, match="shared must be a tuple"):
        pool.call("step", {0: ()}, shared=5)
    with pytest.raises(ValueError, match="timeout"):
        pool.call("step", {0: (1,)}, timeout=-1)
    with pytest.raises(KeyError, match="get: no object -1"):
        pool.get([-1])
    with pytest.raises(KeyError, match="put: no object 9"):
        pool.put({9: Counter()})


# -------------------------------------------------------------------- InProcessPool
def test_in_process_objects_are_called_in_place():
    objects = [Counter() for _ in range(N)]
    pool = InProcessPool(objects)
    pool.call("step", {0: (0,)})
    assert objects[0].count == 1 and pool.get()[0] is objects[0]


def test_in_process_timeout_skips_later_calls():
    objects = [Sleeper() for _ in range(N)]
    with InProcessPool(objects) as pool:
        out = pool.call("nap", {0: ("a", 0.0), 1: ("a", 0.15), 2: ("a", 0.0)}, timeout=0.1)
    assert out[0] == "a" and out[1] == "a"  # call 1 overran but finished: kept
    assert out[2] == Straggler(2, out[2].elapsed) and out[2].elapsed >= 0.1
    assert [o.calls for o in objects[:3]] == [["a"], ["a"], []]  # the straggler did not run
    with pytest.raises(RuntimeError, match="closed"):
        pool.call("nap", {0: ("b", 0.0)})


# ---------------------------------------------------------------------- ProcessPool
def test_state_lives_in_the_workers(process_pool):
    objects = [Counter() for _ in range(N)]
    process_pool.put(dict(enumerate(objects)))
    for _ in range(3):
        out = process_pool.call("step", {i: (0,) for i in range(N)})
    assert out == {i: 3 for i in range(N)}  # each worker kept its objects' counts
    assert [c.count for c in objects] == [0] * N  # the originals here never moved
    assert process_pool.held_by(0) == [0, 2] and process_pool.held_by(1) == [1, 3]


def test_objects_of_a_worker_share_one_copy_of_a_shared_array(process_pool):
    public = np.arange(100_000, dtype=np.float64)  # the public pool, shared by reference
    process_pool.put({i: Holder(public) for i in range(N)})
    ids = process_pool.call("array_id", {i: () for i in range(N)})
    assert ids[0] == ids[2] and ids[1] == ids[3]  # one pickle per worker: sent once
    assert process_pool.call("total", {0: (), 3: ()}, shared=(2,)) == {
        0: float(public.sum()) * 2,
        3: float(public.sum()) * 2,
    }


def test_exception_carries_the_worker_traceback(process_pool):
    process_pool.put({i: Raiser() for i in range(N)})
    with pytest.raises(ValueError, match="negative x: -3") as info:
        process_pool.call("check", {3: (-3,)})
    remote = str(info.value.__cause__)  # the worker's traceback, as text
    # it runs from the worker's loop down to the method's frame, at the line that raised,
    # and ends with the error; the frame's file name is not asserted: cloudpickle >= 3.1
    # names code pickled by value "<dynamic-code>", older releases the test file
    lines, first = inspect.getsourcelines(Raiser.check)
    raised_at = first + next(k for k, line in enumerate(lines) if "raise ValueError" in line)
    assert remote.lstrip('\n"').startswith("Traceback (most recent call last):")
    assert "pool_worker.py" in remote  # the worker's own frames travel too
    assert f"line {raised_at}, in check\n" in remote
    assert remote.rstrip('\n"').endswith("ValueError: negative x: -3")
    assert any("object 3's check()" in note for note in info.value.__notes__)


@pytest.mark.slow
def test_timeout_returns_finished_results_and_drops_late_ones(process_pool):
    process_pool.put({i: Sleeper() for i in range(N)})
    process_pool.call("nap", {i: ("warm", 0.0) for i in range(N)})
    # worker 1 naps on object 1; object 3, queued behind it, is stolen by idle worker 0
    # (before work stealing it waited there and straggled: see test_straggler_...)
    args = {0: ("a", 0.0), 1: ("a", 1.5), 2: ("a", 0.0), 3: ("a", 0.0)}
    start = time.perf_counter()
    out = process_pool.call("nap", args, timeout=0.5)
    assert time.perf_counter() - start < 1.2  # returned at the deadline, not after the nap
    assert out[0] == "a" and out[2] == "a"  # streamed back before the deadline
    assert out[1] == Straggler(1, out[1].elapsed) and 0.5 <= out[1].elapsed < 1.5
    assert out[3] == "a" and process_pool.held_by(0) == [0, 2, 3]
    # the next call gets its own results, not call k's late one (tagged and dropped)
    assert process_pool.call("nap", {i: ("b", 0.0) for i in range(N)}) == {i: "b" for i in range(N)}
    calls = [s.calls for s in process_pool.get()]
    assert calls[1] == ["warm", "a", "b"]  # the running straggler finished, state kept
    assert calls[3] == ["warm", "a", "b"]  # the stolen one ran in worker 0
    assert calls[0] == calls[2] == ["warm", "a", "b"]


@pytest.mark.slow
def test_real_clients_give_the_same_messages(process_pool):
    """cotrain Clients (pickled by reference: the workers import cotrain) stay resident."""
    from sklearn.tree import DecisionTreeClassifier

    from cotrain.federation.client import Client

    rng = np.random.default_rng(0)
    public = rng.normal(size=(60, 3))

    def clients():
        out = []
        for i in range(N):
            X = np.random.default_rng(i).normal(size=(12, 3))
            y = (X[:, i % 3] > 0).astype(int)
            est = DecisionTreeClassifier(random_state=0)
            out.append(Client(i, est, X, y, np.array([0, 1]), X_public=public))
        return out

    def rounds(pool):
        messages, broadcast = [], None
        for t in (1, 2):
            out = pool.call("run_round", {i: (t, broadcast) for i in range(N)})
            messages.append([out[i].message for i in range(N)])
            broadcast = out[0].message  # any valid hard-label message will do
        return messages, [c.model.predict(public).tolist() for c in pool.get()]

    process_pool.put(dict(enumerate(clients())))
    assert rounds(process_pool) == rounds(InProcessPool(clients()))


def test_classes_found_through_sys_path(tmp_path, monkeypatch):
    """A class pickled by reference from a module on this process's sys.path."""
    (tmp_path / "pool_toy_module.py").write_text(
        "class Box:\n    n = 0\n\n    def bump(self):\n        self.n += 1\n        return self.n\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import pool_toy_module

    with ProcessPool([pool_toy_module.Box()], n_workers=1) as pool:
        pool.call("bump", {0: ()})
        assert pool.call("bump", {0: ()}) == {0: 2}


@pytest.mark.slow
def test_default_timeout(process_pool):
    process_pool.put({i: Sleeper() for i in range(N)})
    process_pool.timeout = 0.3  # as ProcessPool(..., timeout=0.3) or a runtime's timeout
    try:
        assert process_pool.call("nap", {0: ("a", 0.0)}) == {0: "a"}
        out = process_pool.call("nap", {0: ("b", 0.8), 2: ("b", 0.0)})
        # object 2's call, queued behind object 0's nap, was stolen by the idle worker
        assert isinstance(out[0], Straggler) and out[2] == "b"
        assert process_pool.call("nap", {0: ("c", 0.8)}, timeout=30) == {0: "c"}
    finally:
        process_pool.timeout = None


def test_killed_worker_raises_naming_its_objects():
    pool = ProcessPool([Counter() for _ in range(5)], n_workers=2)
    pids = pool.pids
    assert pool.call("step", {i: (0,) for i in range(5)}) == {i: 1 for i in range(5)}
    os.kill(pids[1], signal.SIGKILL)
    with pytest.raises(WorkerDiedError, match=r"worker 1 .*SIGKILL.* objects \[1, 3\]"):
        pool.call("step", {i: (0,) for i in range(5)})
    with pytest.raises(WorkerDiedError, match="objects"):  # and it stays broken
        pool.get()
    assert_gone(pids)  # the surviving worker was stopped too


def test_worker_killed_during_a_call_does_not_hang():
    pool = ProcessPool([Sleeper(), Sleeper()], n_workers=1)
    pids = pool.pids
    threading.Timer(0.3, os.kill, (pids[0], signal.SIGKILL)).start()
    start = time.perf_counter()
    with pytest.raises(WorkerDiedError, match=r"worker 0 .* objects \[0, 1\]"):
        pool.call("nap", {0: ("a", 30.0), 1: ("a", 0.0)})
    assert time.perf_counter() - start < 10
    assert_gone(pids)


def test_workers_stop_on_exception_and_garbage_collection():
    with pytest.raises(ZeroDivisionError), ProcessPool([Counter()], n_workers=1) as pool:
        pids = pool.pids
        1 / 0  # noqa: B018
    assert_gone(pids)
    pool = ProcessPool([Counter()], n_workers=1)
    pids = pool.pids
    del pool
    gc.collect()
    assert_gone(pids)


def test_process_pool_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_workers"):
        ProcessPool([1], n_workers=0)
    with pytest.raises(ValueError, match="threads_per_worker"):
        ProcessPool([1], n_workers=1, threads_per_worker=0)


# ------------------------------------------------------------------- work stealing
class Napper(Counter):
    """A counter whose ``step`` may nap first; ``pid`` says where it lives."""

    def nap_step(self, seconds, x=0):
        time.sleep(seconds)
        return self.step(x)

    def pid(self):
        return os.getpid()


class Unpicklable(Napper):
    """Cannot be pickled once ``arm`` ran in its worker (it then holds a lock)."""

    def arm(self):
        self.lock = threading.Lock()


class SlowToPickle(Napper):
    """Pickling it takes ``seconds`` once ``arm`` ran in its worker."""

    armed = 0.0

    def arm(self, seconds):
        self.armed = seconds

    def __getstate__(self):
        time.sleep(self.armed)
        return dict(self.__dict__)


@pytest.mark.slow
def test_a_stolen_object_moves_whole_and_stays():
    """Object 2 waits behind object 0's nap in worker 0; idle worker 1 steals it, with its
    state, and keeps it: the same results as in this process."""

    def rounds(pool):
        out = [pool.call("nap_step", {i: (0.0, 10 * i) for i in range(N)}) for _ in range(2)]
        out.append(pool.call("nap_step", {0: (1.0,), 1: (0.0,), 2: (0.0, 5), 3: (0.0,)}))
        out.append(pool.call("step", {2: (0,)}))
        return out, [c.count for c in pool.get()]

    expected = rounds(InProcessPool([Napper(start=i) for i in range(N)]))
    with ProcessPool([Napper(start=i) for i in range(N)], n_workers=2) as pool:
        assert pool.placement == [0, 1, 0, 1] and pool.held_by(0) == [0, 2]
        assert rounds(pool) == expected  # object 2 counted 3, 4, then 5 and 6 in worker 1
        assert pool.placement == [0, 1, 1, 1]
        assert pool.held_by(0) == [0] and pool.held_by(1) == [1, 2, 3]
        pids = pool.call("pid", {i: () for i in range(N)})
        assert pids == {0: pool.pids[0], 1: pool.pids[1], 2: pool.pids[1], 3: pool.pids[1]}
        assert all(type(c) is Napper for c in pool.get())  # the same class came back
        pool.put({2: Napper(start=100)})  # put replaces it where it lives now
        assert pool.call("pid", {2: ()}) == {2: pool.pids[1]}
        assert pool.call("step", {2: (0,)}) == {2: 101}


@pytest.mark.slow
def test_straggler_is_only_the_slow_object():
    """The trainer's straggler scenario at pool level: slow object 0, fast 1 and 2 over
    2 workers (2 lives behind 0 in worker 0); only 0 straggles."""
    with ProcessPool([Sleeper() for _ in range(3)], n_workers=2) as pool:
        pool.call("nap", {i: ("warm", 0.0) for i in range(3)})
        out = pool.call("nap", {0: ("slow", 1.5), 1: ("a", 0.0), 2: ("a", 0.0)}, timeout=0.75)
        assert out[1] == out[2] == "a"
        assert out[0] == Straggler(0, out[0].elapsed) and 0.75 <= out[0].elapsed < 1.5
        assert pool.held_by(0) == [0] and pool.held_by(1) == [1, 2]
        # worker 0 still runs 0's late nap: the others' calls need not wait for it
        start = time.perf_counter()
        out = pool.call("nap", {1: ("b", 0.0), 2: ("b", 0.0)}, timeout=0.5)
        assert out == {1: "b", 2: "b"} and time.perf_counter() - start < 0.5
        assert pool.call("nap", {i: ("c", 0.0) for i in range(3)}) == {i: "c" for i in range(3)}
        assert [s.calls for s in pool.get()] == [
            ["warm", "slow", "c"],  # the running straggler finished, its result dropped
            ["warm", "a", "b", "c"],
            ["warm", "a", "b", "c"],
        ]


@pytest.mark.slow
def test_queued_calls_straggle_when_every_worker_is_busy():
    """Both workers nap, so object 2's call is still not started at the deadline: it
    straggles, does not run, and its object stays where it was."""
    with ProcessPool([Sleeper() for _ in range(3)], n_workers=2) as pool:
        pool.call("nap", {i: ("warm", 0.0) for i in range(3)})
        args = {0: ("slow", 1.0), 1: ("slow", 1.0), 2: ("a", 0.0)}
        out = pool.call("nap", args, timeout=0.5)
        assert all(isinstance(out[i], Straggler) for i in range(3))
        assert [o.index for o in out.values()] == [0, 1, 2]
        assert pool.placement == [0, 1, 0]
        assert [s.calls for s in pool.get()] == [["warm", "slow"], ["warm", "slow"], ["warm"]]


def test_steal_after_none_keeps_the_static_placement():
    with ProcessPool([Sleeper() for _ in range(3)], n_workers=2, steal_after=None) as pool:
        out = pool.call("nap", {0: ("slow", 0.8), 1: ("a", 0.0), 2: ("a", 0.0)}, timeout=0.4)
        assert out[1] == "a" and isinstance(out[0], Straggler) and isinstance(out[2], Straggler)
        assert pool.placement == [0, 1, 0]
    with pytest.raises(ValueError, match="steal_after"):
        ProcessPool([1], n_workers=1, steal_after=-1)


@pytest.mark.slow
def test_an_object_that_cannot_be_pickled_is_not_stolen():
    with ProcessPool([Napper(), Napper(), Unpicklable()], n_workers=2) as pool:
        pool.call("arm", {2: ()})
        out = pool.call("nap_step", {0: (0.5,), 1: (0.0,), 2: (0.0,)})
        assert out == {0: 1, 1: 1, 2: 1}  # the release was refused: 2 ran behind 0
        assert pool.placement == [0, 1, 0]
        assert pool.call("nap_step", {0: (0.3,), 2: (0.0,)}) == {0: 2, 2: 2}  # not retried
        assert pool.call("pid", {2: ()}) == {2: pool.pids[0]}


@pytest.mark.slow
def test_a_steal_in_flight_at_the_deadline_lands_without_running():
    """Object 2 is being pickled in worker 0 when the deadline comes: its call
    straggles, the object arrives in worker 1 all the same and has not run."""
    with ProcessPool([Napper(), Napper(), SlowToPickle()], n_workers=2) as pool:
        pool.call("arm", {2: (0.6,)})
        out = pool.call("nap_step", {0: (1.0,), 1: (0.0,), 2: (0.0,)}, timeout=0.4)
        assert out[1] == 1 and isinstance(out[0], Straggler) and isinstance(out[2], Straggler)
        assert pool.placement == [0, 1, 1]
        assert pool.call("step", {2: (0,)}) == {2: 1}  # its straggling call never ran
        assert pool.call("pid", {2: ()}) == {2: pool.pids[1]}


def test_victim_killed_during_a_steal_raises_naming_its_objects():
    pool = ProcessPool([Napper(), Napper(), SlowToPickle()], n_workers=2)
    pids = pool.pids
    pool.call("arm", {2: (30.0,)})  # releasing object 2 will take 30 s
    threading.Timer(0.5, os.kill, (pids[0], signal.SIGKILL)).start()
    start = time.perf_counter()
    with pytest.raises(WorkerDiedError, match=r"worker 0 .*SIGKILL.* objects \[0, 2\]"):
        pool.call("nap_step", {0: (30.0,), 1: (0.0,), 2: (0.0,)})
    assert time.perf_counter() - start < 10
    assert_gone(pids)


# ------------------------------------------------------------------------- runtimes
def test_runtimes_host_pools():
    with SequentialRuntime(timeout=7) as rt, rt.host([Counter()]) as pool:
        assert isinstance(pool, InProcessPool) and pool.timeout == 7
    with JoblibRuntime(n_jobs=1) as rt:
        assert isinstance(rt.host([Counter()]), InProcessPool)
    with JoblibRuntime(n_jobs=2, timeout=9, reuse_workers=False) as rt:
        pool = rt.host([Counter() for _ in range(N)])
        assert isinstance(pool, ProcessPool) and pool.n_workers == 2 and pool.timeout == 9
        assert script(pool) == EXPECTED
        pids = pool.pids
    assert_gone(pids)  # closed with the runtime
    with pytest.raises(RuntimeError, match="inside a `with` block"):
        JoblibRuntime(n_jobs=2).host([Counter()])


@pytest.mark.slow
def test_joblib_runtime_starts_loky_only_for_map():
    with JoblibRuntime(n_jobs=2) as rt:
        with rt.host([Counter() for _ in range(N)]) as pool:
            assert script(pool) == EXPECTED
        assert rt._parallel is None  # a fit that only hosts its clients starts no loky pool
        assert rt.map(pow, [(2, 3), (3, 2)], timeout=30) == [8, 9]
        assert rt._parallel is not None
    assert rt._parallel is None
    with pytest.raises(RuntimeError, match="inside a `with` block"):
        rt.map(pow, [(2, 3)])


class MapOnly:
    """A user runtime without ``host`` whose ``map`` runs tasks on copies (another
    process, as far as the objects can tell)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return None

    def map(self, fn, tasks, timeout=None):
        return [fn(*pickle.loads(pickle.dumps(tuple(task)))) for task in tasks]


def test_host_objects_falls_back_to_shipping_objects_through_map():
    with MapOnly() as rt, host_objects(rt, [Counter() for _ in range(N)]) as pool:
        assert isinstance(pool, InProcessPool) and pool.runtime is rt
        assert script(pool) == EXPECTED  # the updated copies were written back
    with SequentialRuntime() as rt:
        assert host_objects(rt, [Counter()]).runtime is None  # the runtime's own host
    with pytest.raises(TypeError, match="map"):
        InProcessPool([], runtime=object())


# ------------------------------------------------------------ reused worker processes
class Secret:
    """State that must not outlive its pool: counted by ``Probe`` in the workers."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.blob = np.full(1000, 7.0)

    def pid(self):
        return os.getpid()


class Probe:
    """Looks around the worker it lives in."""

    def secrets(self):
        """How many ``Secret`` objects this worker still holds (anywhere, after a GC)."""
        gc.collect()
        return sum(type(o).__name__ == "Secret" for o in gc.get_objects())

    def pid(self):
        return os.getpid()

    def modules(self):
        """The worker's loaded modules of cotrain and scikit-learn."""
        return sorted(name for name in sys.modules if name.split(".")[0] in ("cotrain", "sklearn"))


def test_a_worker_starts_without_importing_cotrain():
    """The worker runs cotrain/runtime/pool_worker.py on its own: no cotrain (nor scikit-learn)."""
    with ProcessPool([Probe()], n_workers=1) as pool:
        assert pool.call("modules", {0: ()}) == {0: []}


@pytest.fixture
def idle():
    """The idle worker cache, emptied before and after the test (its timeout restored)."""
    idle_workers.clear()
    timeout = idle_workers.timeout
    yield idle_workers
    idle_workers.timeout = timeout
    idle_workers.clear()


def wait_until(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_joblib_runtime_reuses_its_workers_across_with_blocks(idle):
    with JoblibRuntime(n_jobs=2) as rt, rt.host([Counter() for _ in range(N)]) as pool:
        assert script(pool) == EXPECTED and pool.reused_workers == 0
        first = pool.pids
    assert sorted(idle.pids) == sorted(first)  # kept, idle, after the block
    with JoblibRuntime(n_jobs=2) as rt, rt.host([Counter() for _ in range(N)]) as pool:
        assert pool.pids == first and pool.reused_workers == 2 and len(idle) == 0
        assert script(pool) == EXPECTED  # fresh objects: the old counts are gone
    idle.clear()
    assert_gone(first)


def test_a_reused_worker_holds_nothing_of_the_previous_pool(idle):
    with ProcessPool([Secret(f"s{i}") for i in range(N)], n_workers=2, reuse=True) as pool:
        pids = pool.pids
        assert pool.call("pid", {i: () for i in range(N)}) == {i: pids[i % 2] for i in range(N)}
    with ProcessPool([Probe(), Probe()], n_workers=2, reuse=True) as pool:
        assert pool.reused_workers == 2 and sorted(pool.pids) == sorted(pids)
        assert pool.call("secrets", {0: (), 1: ()}) == {0: 0, 1: 0}  # all dropped
        with pytest.raises(KeyError, match="no object 2"):  # and not reachable by id
            pool.call("pid", {2: ()})
    with ProcessPool([Probe() for _ in range(N)], n_workers=2, reuse=True) as pool:
        # ids 2 and 3 existed in the first pool: they are the new objects, not the old
        assert pool.call("secrets", {i: () for i in range(N)}) == {i: 0 for i in range(N)}
        assert all(type(obj) is Probe for obj in pool.get())


def test_a_direct_process_pool_does_not_reuse_by_default(idle):
    with ProcessPool([Counter(), Counter()], n_workers=2, reuse=True) as pool:
        kept = pool.pids
    with ProcessPool([Counter(), Counter()], n_workers=2) as pool:
        assert pool.reused_workers == 0 and not set(pool.pids) & set(kept)
        own = pool.pids
    assert_gone(own)
    assert sorted(idle.pids) == sorted(kept)  # the reuse pool's idle workers were not taken


def test_a_dead_idle_worker_is_reaped_and_never_reused(idle):
    with ProcessPool([Counter() for _ in range(N)], n_workers=2, reuse=True) as pool:
        pids = pool.pids
    os.kill(pids[0], signal.SIGKILL)
    assert wait_until(lambda: pids[0] not in idle.pids)  # noticed while idle
    assert_gone([pids[0]])  # and reaped: no zombie
    with ProcessPool([Counter() for _ in range(N)], n_workers=2, reuse=True) as pool:
        assert pool.reused_workers == 1 and pids[1] in pool.pids and pids[0] not in pool.pids
        assert script(pool) == EXPECTED


def test_a_worker_that_dies_unnoticed_is_not_taken(idle):
    """A worker killed just before a pool asks (the watcher has not looked yet)."""
    with ProcessPool([Counter(), Counter()], n_workers=2, reuse=True) as pool:
        pids = pool.pids
    os.kill(pids[1], signal.SIGKILL)
    with ProcessPool([Counter(), Counter()], n_workers=2, reuse=True) as pool:
        assert pool.reused_workers == 1 and pool.pids[0] == pids[0] and pids[1] not in pool.pids
        assert pool.call("step", {0: (0,), 1: (0,)}) == {0: 1, 1: 1}
    assert wait_until(lambda: not ps_finds([pids[1]]))  # reaped when found dead
    assert_gone([pids[1]])


def test_idle_workers_stop_after_the_idle_timeout(idle):
    idle.timeout = 0.3
    with ProcessPool([Counter(), Counter()], n_workers=2, reuse=True) as pool:
        pids = pool.pids
    assert sorted(idle.pids) == sorted(pids)
    assert wait_until(lambda: len(idle) == 0)
    assert wait_until(lambda: not ps_finds(pids))
    assert_gone(pids)


def test_a_worker_still_running_a_straggler_is_stopped_not_kept(idle):
    pool = ProcessPool([Sleeper(), Sleeper()], n_workers=2, reuse=True, shutdown_timeout=0.3)
    pids = pool.pids
    out = pool.call("nap", {0: ("slow", 30.0), 1: ("a", 0.0)}, timeout=0.2)
    assert isinstance(out[0], Straggler) and out[1] == "a"
    start = time.perf_counter()
    pool.close()
    assert time.perf_counter() - start < 5
    assert idle.pids == [pids[1]]
    assert_gone([pids[0]])


def test_workers_with_another_thread_limit_are_not_reused(idle):
    with ProcessPool([Counter()], n_workers=1, threads_per_worker=1, reuse=True) as pool:
        one = pool.pids
    with ProcessPool([Counter()], n_workers=1, threads_per_worker=2, reuse=True) as pool:
        assert pool.reused_workers == 0 and pool.pids != one
        two = pool.pids
    assert_gone(one)  # stopped: the program moved on to another kind of pool
    assert idle.pids == two


@pytest.mark.slow
def test_trainer_fits_reuse_the_workers_with_the_same_results(idle, cancer):
    from sklearn.tree import DecisionTreeClassifier

    from cotrain import FederatedCoTrainer

    def fit():
        trainer = FederatedCoTrainer(
            [DecisionTreeClassifier(max_depth=3) for _ in range(4)],
            rounds=2,
            n_jobs=2,
            random_state=0,
        )
        X = cancer["X"] + cancer["X"][:1]
        y = cancer["y"] + cancer["y"][:1]
        trainer.fit(X, y, X_public=cancer["X_public"])
        return trainer.pseudo_label_codes_, trainer.predict(cancer["X_public"])

    first = fit()
    pids = idle.pids
    assert len(pids) == 2
    second = fit()
    assert idle.pids == pids  # the same two processes served the second fit
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def test_a_forked_child_forgets_the_idle_workers(idle):
    with ProcessPool([Counter(), Counter()], n_workers=2, reuse=True) as pool:
        pids = pool.pids
    child = os.fork()
    if child == 0:  # the child must neither use nor stop its parent's workers
        os._exit(0 if len(idle_workers) == 0 and idle_workers.pids == [] else 1)
    assert os.waitpid(child, 0)[1] == 0
    with ProcessPool([Counter(), Counter()], n_workers=2, reuse=True) as pool:
        assert pool.pids == pids and pool.call("step", {0: (0,), 1: (0,)}) == {0: 1, 1: 1}


@pytest.mark.slow
def test_idle_workers_stop_at_interpreter_exit():
    code = (
        "from cotrain.runtime.runtimes import JoblibRuntime\n"
        "with JoblibRuntime(n_jobs=2) as rt, rt.host([[1], [2]]) as pool:\n"
        "    pool.call('append', {0: (3,)})\n"
        "    print(*pool.pids)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 2
    assert_gone(pids)


# ------------------------------------------------------------------------------ Ray
@pytest.fixture(scope="module")
def ray_session():
    """Ray once for the module (num_cpus=2); RayRuntime leaves it running."""
    ray = pytest.importorskip("ray")
    from ray import cloudpickle as ray_cloudpickle

    # Ray workers cannot import this test module: send its classes by value
    ray_cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_actor_pool(ray_session):
    """Same results, state kept in the actors, errors as themselves, stragglers."""
    with RayRuntime(timeout=5) as rt:
        pool = rt.host([Counter() for _ in range(N)])
        assert isinstance(pool, RayActorPool) and isinstance(pool, ClientPool)
        assert pool.n_actors == 2 and pool.timeout == 5  # one actor per CPU
        assert script(pool) == EXPECTED
        pool.put({0: Counter(start=50)})
        assert pool.call("step", {0: (0,)}) == {0: 51}
        pool.put({i: Raiser() for i in range(N)})
        with pytest.raises(ValueError, match="negative x: -2"):
            pool.call("check", {0: (1,), 2: (-2,)})
        assert pool.call("check", {1: (4,)}) == {1: 4}
        pool.put({i: Sleeper() for i in range(N)})
        out = pool.call("nap", {0: ("a", 0.0), 1: ("a", 1.0), 2: ("a", 0.0)}, timeout=0.4)
        assert out[0] == "a" and out[2] == "a"
        assert out[1] == Straggler(1, out[1].elapsed)
        assert pool.call("nap", {1: ("b", 0.0)}) == {1: "b"}  # not the late "a"
        assert pool.get([1])[0].calls == ["a", "b"]  # the running straggler kept its state
        ray_session.kill(pool._actors[1])
        with pytest.raises(WorkerDiedError, match=r"actor 1 died .* objects \[1, 3\]"):
            pool.call("nap", {i: ("c", 0.0) for i in range(N)})
    with pytest.raises(RuntimeError, match="closed"):  # closed with the runtime
        pool.call("check", {1: (4,)})


class CountingActor:
    """Spy on a Ray actor handle: logs the name of every ``actor.method.remote(...)``."""

    def __init__(self, actor, log) -> None:
        self.actor, self.log = actor, log

    def __getattr__(self, name):
        method, log = getattr(self.actor, name), self.log

        class Remote:
            def remote(self, *args, **kwargs):
                log.append(name)
                return method.remote(*args, **kwargs)

        return Remote()


def spy_on_actors(pool):
    """Replace the pool's actor handles by spies; returns the log and the real handles."""
    log, actors = [], pool._actors
    pool._actors = [CountingActor(a, log) for a in actors]
    return log, actors


@pytest.mark.slow
def test_ray_batched_and_per_client_calls_agree(ray_session):
    """Without a timeout one Ray call per actor, with one one per object: same answers."""
    with RayRuntime() as rt, rt.host([Counter() for _ in range(N)]) as batched:
        assert batched.timeout is None and batched.n_actors == 2
        log, actors = spy_on_actors(batched)
        try:
            answers = []
            for k in range(3):
                args = {i: (10 * i + k,) for i in range(N) if (i + k) % 3}
                del log[:]
                answers.append(batched.call("step", args, shared=(100 * k, 1)))
                # one call per actor that holds an object of args, never one per object
                assert log == ["call_batch"] * len({i % 2 for i in args}), (k, log)
            del log[:]
            assert batched.call("step", {}) == {} and log == []
        finally:
            batched._actors = actors  # close() must kill the real actors
        answers.append([c.count for c in batched.get()])
        assert answers == EXPECTED
    with RayRuntime(timeout=60) as rt, rt.host([Counter() for _ in range(N)]) as per_client:
        log, actors = spy_on_actors(per_client)
        try:
            args = {i: (i,) for i in range(N)}
            assert per_client.call("step", args) == {i: 1 + i for i in range(N)}
            assert log == ["call"] * N  # a timeout in force: one call per object
            del log[:]
            assert per_client.call("step", args, timeout=None) == {i: 2 + i for i in range(N)}
            assert log == ["call"] * N  # None: the pool's own timeout (60 s) is in force
        finally:
            per_client._actors = actors
        per_client.put({i: Counter() for i in range(N)})
        assert script(per_client) == EXPECTED  # same results and states as batched


@pytest.mark.slow
def test_ray_exception_in_a_batch_names_its_object(ray_session):
    """Actor 0 holds objects 0 and 2, actor 1 holds 1 and 3 (2 actors, no timeout)."""
    from ray.exceptions import RayTaskError

    with RayRuntime() as rt, rt.host([Raiser() for _ in range(N)]) as pool:
        with pytest.raises(ValueError, match="negative x: -2") as info:
            pool.call("check", {0: (1,), 1: (3,), 2: (-2,), 3: (-3,)})
        assert info.value.__notes__ == ["(raised in RayActorPool actor 0 by object 2's check())"]
        assert isinstance(info.value.__cause__, RayTaskError)
        assert [r.calls for r in pool.get()] == [1, 1, 1, 1]
        # actor 0 is read first, but the lowest failing id is object 1, in actor 1
        with pytest.raises(ValueError, match="negative x: -1") as info:
            pool.call("check", {1: (-1,), 2: (-2,)})
        assert info.value.__notes__ == ["(raised in RayActorPool actor 1 by object 1's check())"]
        # an actor stops at its first exception: object 2 (after 0 in actor 0) is not called
        with pytest.raises(ValueError, match="negative x: -5"):
            pool.call("check", {0: (-5,), 1: (7,), 2: (8,)})
        assert [r.calls for r in pool.get()] == [2, 3, 2, 1]
        assert pool.call("check", {i: (i,) for i in range(N)}) == {0: 0, 1: 1, 2: 2, 3: 3}


@pytest.mark.slow
def test_ray_dead_actor_raises_in_a_batch(ray_session):
    with RayRuntime() as rt:
        pool = rt.host([Counter() for _ in range(N)])
        assert pool.call("step", {i: (0,) for i in range(N)}) == {i: 1 for i in range(N)}
        ray_session.kill(pool._actors[0])
        with pytest.raises(WorkerDiedError, match=r"actor 0 died .* objects \[0, 2\]"):
            pool.call("step", {i: (0,) for i in range(N)})
        with pytest.raises(WorkerDiedError):  # the pool stays broken
            pool.call("step", {1: (0,)})
