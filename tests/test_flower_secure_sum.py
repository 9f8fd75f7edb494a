"""The exact integer sum of the sites' vectors under Flower's SecAgg+ (issue 29).

Three tiers, all through Flower's own :class:`~flwr.server.workflow.SecAggPlusWorkflow`
and :func:`~flwr.client.mod.secaggplus_mod`:

- a wire-faithful in-process Grid (every message goes through Flower's protobuf serde, as
  on the wire; each node keeps its own Context): exactness at the edges of the range,
  dropouts, refusals and what the ServerApp receives, in well under a second each;
- Flower's simulation engine (``run_simulation``, Ray): 5 SuperNodes, one dropping out;
- a real deployment (:class:`~cotrain.flower.local.localhost.LocalFederation`): a SuperLink
  and 4 SuperNodes as processes over TLS, one dropping out.

"What the ServerApp sees" is every reply that reaches it through the Grid, each array in
it decoded (the masked vectors are ``.npy`` bytes in a config record): none may equal a
site's vector, nor its offset encoding ``v + bound``.
"""

from __future__ import annotations

import json
import sys
import textwrap
import time

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Context, Error, Message, RecordDict
from flwr.common.serde import message_from_proto, message_to_proto

from cotrain.flower import secure_sum as ss
from cotrain.flower.local.flwr_cli import app_pyproject
from cotrain.flower.secure_sum import (
    SecureSumError,
    exact_ranges,
    is_secure_sum_message,
    secagg_sum,
    secure_sum_handler,
)
from tests.test_flower_strategy import task_identity  # noqa: F401 (autouse fixture)

B = 2**20


def site_vector(seed: int, shape=(40, 3), bound: int = B) -> np.ndarray:
    """A site's noisy vote histogram stand-in: any integers in [-bound, bound], with the
    extremes present (so exactness is checked where rounding or wrapping would show)."""
    v = np.random.default_rng(seed).integers(-bound, bound + 1, size=shape)
    v.flat[0], v.flat[1] = bound, -bound
    return v


def arrays_in(message: Message) -> list[np.ndarray]:
    """Every array a message carries: array records, and ``.npy`` bytes in config records."""
    from flwr.common import bytes_to_ndarray

    found: list[np.ndarray] = []
    if not message.has_content():
        return found
    for record in message.content.array_records.values():
        found += [array.numpy() for array in record.values()]
    for record in message.content.config_records.values():
        for value in record.values():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, bytes) and item.startswith(b"\x93NUMPY"):
                    found.append(bytes_to_ndarray(item))
    return found


def holds_a_site_vector(arrays, vectors, bound=B) -> bool:
    """Whether any array equals a site's vector or its offset encoding, in any shape."""
    for a in arrays:
        for v in vectors:
            if a.size == v.size and (
                np.array_equal(a.ravel(), v.ravel()) or np.array_equal(a.ravel(), v.ravel() + bound)
            ):
                return True
    return False


class WireGrid:
    """A Grid whose SuperNodes answer at once, in this process, with their own Context.

    Messages and replies go through Flower's protobuf serde both ways, as on the wire
    (each node gets its own copy). ``vectors[node]`` is that site's vector; ``drop``:
    sites whose vector function fails (a dropout in the masked-vector stage);
    ``tamper(message)`` may rewrite a message before it is delivered. ``replies`` keeps
    every reply the ServerApp received.
    """

    def __init__(self, vectors, drop=(), tamper=None, min_sites=2, bound=None):
        self.vectors, self.drop, self.tamper = vectors, set(drop), tamper
        self.states = {node: RecordDict() for node in vectors}
        self.handler = secure_sum_handler(self.vector, min_sites=min_sites, bound=bound)
        self.replies: list[Message] = []
        self.calls: list[str] = []

    def vector(self, config, context):
        if context.node_id in self.drop:
            raise RuntimeError(f"site {context.node_id} lost its disk (row 17 = 'Alice')")
        return self.vectors[context.node_id]

    def get_node_ids(self):
        return list(self.vectors)

    def send_and_receive(self, messages, *, timeout=None):
        replies = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = msg.object_id
            msg = message_from_proto(message_to_proto(msg))
            if self.tamper is not None:
                self.tamper(msg)
            node = msg.metadata.dst_node_id
            stage = msg.content.config_records["secaggplus_configs"].get("stage", "?")
            self.calls.append(f"{node}:{stage}")
            context = Context(1, node, {}, self.states[node], {})
            try:
                reply = self.handler(msg, context)
            except Exception as err:  # what Flower sends back for a failed ClientApp
                reply = Message(Error(2, f"{type(err).__name__}: {err}"), reply_to=msg)
            reply.metadata.__dict__["_message_id"] = reply.object_id
            reply = message_from_proto(message_to_proto(reply))
            self.replies.append(reply)
            replies.append(reply)
        return replies

    def seen_arrays(self):
        return [a for reply in self.replies for a in arrays_in(reply)]


def nodes(n, shape=(40, 3), bound=B):
    return {1000 + 7 * i: site_vector(i, shape, bound) for i in range(n)}


# ------------------------------------------------------------------ the encoding
def test_exact_ranges_make_the_quantiser_the_identity():
    from flwr.common.secure_aggregation.quantization import dequantize, quantize

    r = exact_ranges(B, 5)
    assert r == {
        "clipping_range": float(B),
        "quantization_range": 2 * B,
        "modulus_range": 2**32,
        "max_weight": 1.0,
    }
    v = np.array([-B, -B + 1, -1, 0, 1, B - 1, B], dtype=np.int64)
    for _ in range(20):  # Flower's stochastic rounding never fires on integers
        q = quantize([v * 1.0], r["clipping_range"], r["quantization_range"])[0]
        assert np.array_equal(q, v + B)
    back = dequantize([v + B], r["clipping_range"], r["quantization_range"])[0]
    assert np.array_equal(back, v)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((0, 3), "bound must be"),
        ((2**30, 3), "bound must be"),
        ((B, 0), "n_sites"),
        ((B, 3, 3 * 2**20), "power of two"),
        ((B, 3, 2**33), "power of two"),
        ((B, 2048), "modulus_range"),  # 2048 * 2**21 = 2**32: would wrap
        ((4, 4, 32), "modulus_range"),  # 4 * 8 = 32
    ],
)
def test_exact_ranges_refuses_what_would_wrap_or_round(args, words):
    with pytest.raises(ValueError, match=words):
        exact_ranges(*args)


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"node_ids": [1, 2]}, "at least 3"),
        ({"node_ids": [1, 1, 2]}, "distinct"),
        ({"num_shares": 4}, "odd"),
        ({"num_shares": 2}, "num_shares"),
        ({"reconstruction_threshold": 1}, "reconstruction_threshold"),
        ({"reconstruction_threshold": 6}, "reconstruction_threshold"),
        ({"bound": 2**31}, "bound"),
    ],
)
def test_bad_parameters_fail_before_any_message(params, words):
    grid = WireGrid(nodes(5))
    kwargs = {"node_ids": list(grid.vectors), "shape": (40, 3), "query": "q", **params}
    with pytest.raises(ValueError, match=words):
        secagg_sum(grid, **kwargs)
    assert grid.calls == []


# ---------------------------------------------------- the protocol, in process
@pytest.mark.parametrize(
    ("n", "shape", "bound", "modulus"),
    [
        (3, (40, 3), B, 2**32),
        (5, (1000, 10), B, 2**32),
        (4, (7,), 7, 64),  # the tightest modulus: 4 sites * 2 * 7 = 56 < 64
        (3, (2, 2, 2), 2**29, 2**32),  # the largest bound that fits 3 sites in 2**32
    ],
)
def test_the_server_gets_the_exact_integer_sum(n, shape, bound, modulus):
    vectors = nodes(n, shape, bound)
    grid = WireGrid(vectors)
    result = secagg_sum(
        grid, list(vectors), shape=shape, query="q", bound=bound, modulus_range=modulus
    )
    expected = np.sum(list(vectors.values()), axis=0)
    assert result.total.dtype == np.int64 and result.total.shape == shape
    assert np.array_equal(result.total, expected)
    assert result.node_ids == tuple(sorted(vectors)) and result.dropped == ()
    # the four SecAgg+ stages, one message per site each
    assert len(grid.calls) == 4 * n


def test_the_server_receives_no_site_vector():
    vectors = nodes(5)
    grid = WireGrid(vectors)
    result = secagg_sum(grid, list(vectors), shape=(40, 3), query="q")
    seen = grid.seen_arrays()
    masked = [a for a in seen if a.shape == (40, 3)]
    assert len(masked) == 5  # one masked vector per site reached the server...
    assert not holds_a_site_vector(seen, vectors.values())  # ...and nothing else of it
    for a in masked:  # each masked entry is spread over [0, 2**32), not near v + bound
        assert a.min() >= 0 and a.max() < 2**32 and np.median(a) > 2 * B
    assert not holds_a_site_vector([result.total], vectors.values())


def test_one_dropout_within_the_threshold_gives_the_sum_of_the_rest():
    vectors = nodes(5)
    dropped = 1000 + 7 * 2
    grid = WireGrid(vectors, drop={dropped})
    result = secagg_sum(grid, list(vectors), shape=(40, 3), query="q")
    rest = [v for node, v in vectors.items() if node != dropped]
    assert np.array_equal(result.total, np.sum(rest, axis=0))
    assert result.dropped == (dropped,) and dropped not in result.node_ids
    # the server gets fixed words, not the site's exception text
    assert result.failures and all(ss.REFUSED in f and "Alice" not in f for f in result.failures)
    assert not holds_a_site_vector(grid.seen_arrays(), vectors.values())


def test_two_dropouts_with_a_sparse_neighbourhood():
    vectors = nodes(5)
    out = {1000, 1000 + 7 * 4}
    grid = WireGrid(vectors, drop=out)
    result = secagg_sum(
        grid, list(vectors), shape=(40, 3), query="q", num_shares=5, reconstruction_threshold=3
    )
    rest = [v for node, v in vectors.items() if node not in out]
    assert np.array_equal(result.total, np.sum(rest, axis=0))
    assert result.dropped == tuple(sorted(out))


def test_more_dropouts_than_the_threshold_allows_raise():
    vectors = nodes(4)  # num_shares 4, threshold 3: one dropout at most
    grid = WireGrid(vectors, drop=list(vectors)[:2])
    with pytest.raises(SecureSumError, match="halted"):
        secagg_sum(grid, list(vectors), shape=(40, 3), query="q")


def test_a_site_outside_the_bound_refuses_instead_of_clipping():
    vectors = nodes(4)
    vectors[1007] = vectors[1007].copy()
    vectors[1007][3, 1] = B + 1
    grid = WireGrid(vectors)
    result = secagg_sum(grid, list(vectors), shape=(40, 3), query="q")
    assert result.dropped == (1007,)
    assert np.array_equal(result.total, np.sum([vectors[n] for n in result.node_ids], axis=0))
    assert all(str(B + 1) not in f for f in result.failures)


@pytest.mark.parametrize("bad", ["float", "shape"])
def test_a_vector_of_another_type_or_shape_is_refused(bad):
    vectors = nodes(4)
    vectors[1000] = vectors[1000] * 1.0 if bad == "float" else vectors[1000][:, :2]
    result = secagg_sum(WireGrid(vectors), list(vectors), shape=(40, 3), query="q")
    assert result.dropped == (1000,)


def test_a_site_contributes_to_a_query_once_per_run():
    vectors = nodes(4)
    grid = WireGrid(vectors)
    first = secagg_sum(grid, list(vectors), shape=(40, 3), query="run-1/round-3")
    # asking again (e.g. without one site, to difference it out) is refused by every site
    with pytest.raises(SecureSumError):
        secagg_sum(grid, list(vectors)[1:], shape=(40, 3), query="run-1/round-3")
    again = secagg_sum(grid, list(vectors), shape=(40, 3), query="run-1/round-4")
    assert np.array_equal(first.total, again.total)


def test_a_site_refuses_a_threshold_below_its_min_sites():
    """A site whose noise plan needs 4 contributors refuses sums unmasked from 3."""
    vectors = nodes(5)
    with pytest.raises(SecureSumError):  # default threshold 5 // 2 + 1 = 3
        secagg_sum(WireGrid(vectors, min_sites=4), list(vectors), shape=(40, 3), query="q")
    grid = WireGrid(vectors, drop={1000}, min_sites=4)
    result = secagg_sum(grid, list(vectors), shape=(40, 3), query="q", reconstruction_threshold=4)
    assert result.dropped == (1000,) and len(result.node_ids) == 4
    # one more dropout would leave 3 < 4 live neighbours: no sum at all
    grid = WireGrid(vectors, drop={1000, 1007}, min_sites=4)
    with pytest.raises(SecureSumError):
        secagg_sum(grid, list(vectors), shape=(40, 3), query="q", reconstruction_threshold=4)


def test_a_site_with_its_own_bound_refuses_another():
    """A server announcing a smaller bound (to learn from refusals whether a vector
    exceeds it) gets no contribution from sites that declare their own."""
    vectors = nodes(4)
    grid = WireGrid(vectors, bound=B)
    with pytest.raises(SecureSumError):
        secagg_sum(grid, list(vectors), shape=(40, 3), query="q", bound=B // 2)
    result = secagg_sum(grid, list(vectors), shape=(40, 3), query="q2", bound=B)
    assert np.array_equal(result.total, np.sum(list(vectors.values()), axis=0))


def test_sites_check_the_servers_parameters(monkeypatch):
    """A server whose SecAgg+ ranges would round or clip gets no contribution."""
    monkeypatch.setattr(
        ss,
        "exact_ranges",
        lambda bound, n, modulus: {
            "clipping_range": 8.0,  # Flower's default for model weights
            "quantization_range": 2**22,
            "modulus_range": modulus,
            "max_weight": 1.0,
        },
    )
    vectors = nodes(4)
    with pytest.raises(SecureSumError):
        secagg_sum(WireGrid(vectors), list(vectors), shape=(40, 3), query="q")


def test_an_unmask_request_for_both_secrets_of_a_site_is_refused(monkeypatch):
    """A server that names a site alive and dropped to the same neighbour gets the shares
    of its mask seed *and* of its key, i.e. its vector: Flower's mod hands both out, the
    handler refuses."""
    from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, Key

    vectors = nodes(4)
    victim = 1007

    def tamper(msg):
        configs = msg.content.config_records[RECORD_KEY_CONFIGS]
        if configs.get(Key.STAGE) == "unmask":
            configs[Key.DEAD_NODE_ID_LIST] = [*configs[Key.DEAD_NODE_ID_LIST], victim]

    def unmask_replies(grid):
        return [r for r, c in zip(grid.replies, grid.calls, strict=True) if c.endswith("unmask")]

    grid = WireGrid(vectors, tamper=tamper)
    with pytest.raises(SecureSumError):
        secagg_sum(grid, list(vectors), shape=(40, 3), query="q")
    assert unmask_replies(grid) and all(r.has_error() for r in unmask_replies(grid))

    # without the handler's check, every neighbour sends both shares of the victim
    monkeypatch.setattr(ss, "_check_unmask_request", lambda message: None)
    grid = WireGrid(vectors, tamper=tamper)
    try:
        secagg_sum(grid, list(vectors), shape=(40, 3), query="q")
    except Exception:
        pass  # whatever the workflow makes of it: the shares have left the sites
    for reply in unmask_replies(grid):
        named = reply.content.config_records[RECORD_KEY_CONFIGS][Key.NODE_ID_LIST]
        assert list(named).count(victim) == 2


def test_only_secagg_messages_are_routed_to_the_handler():
    cotrain_round = Message(
        RecordDict({"round": ConfigRecord({"round": 1})}), dst_node_id=1, message_type="train"
    )
    assert not is_secure_sum_message(cotrain_round)
    setup = Message(
        RecordDict({"secaggplus_configs": ConfigRecord({"stage": "setup"})}),
        dst_node_id=1,
        message_type="train",
    )
    assert is_secure_sum_message(setup)


# ------------------------------------------------ Flower's simulation engine (Ray)
class RecordingGrid:
    """Wraps the ServerApp's Grid and keeps every reply that reaches the ServerApp."""

    def __init__(self, grid):
        self.grid, self.replies = grid, []

    def send_and_receive(self, messages, *, timeout=None):
        replies = list(self.grid.send_and_receive(messages, timeout=timeout))
        self.replies += replies
        return replies

    def __getattr__(self, name):
        return getattr(self.grid, name)


@pytest.mark.slow
def test_flower_simulation_with_five_sites_and_one_dropout(monkeypatch):
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    from cotrain.flower.secure_sum import make_secure_sum_client_app

    monkeypatch.setenv("FLWR_TELEMETRY_ENABLED", "0")
    monkeypatch.setenv("RAY_DEDUP_LOGS", "0")
    n, drop, shape = 5, 3, (40, 3)
    out: dict = {}
    server = ServerApp()

    @server.main()
    def main(grid, context):
        deadline = time.monotonic() + 60
        while len(list(grid.get_node_ids())) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        recording = RecordingGrid(grid)
        out["result"] = secagg_sum(
            recording, sorted(grid.get_node_ids()), shape=shape, query="round-1"
        )
        out["seen"] = [a for reply in recording.replies for a in arrays_in(reply)]

    def vector(config, context):  # nested: Ray pickles it by value
        partition = int(context.node_config["partition-id"])
        if partition == drop:
            raise RuntimeError("this site goes offline")
        v = np.random.default_rng(partition).integers(-(2**20), 2**20 + 1, size=shape)
        v.flat[0] = 2**20
        return v

    run_simulation(
        server,
        make_secure_sum_client_app(vector),
        num_supernodes=n,
        backend_config={
            "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {"num_cpus": 2, "include_dashboard": False},
        },
    )
    vectors = {p: site_vector_like(p, shape) for p in range(n)}
    result = out["result"]
    assert len(result.node_ids) == n - 1 and len(result.dropped) == 1
    expected = np.sum([v for p, v in vectors.items() if p != drop], axis=0)
    assert np.array_equal(result.total, expected)
    assert len([a for a in out["seen"] if a.shape == shape]) == n - 1  # masked vectors
    assert not holds_a_site_vector(out["seen"], vectors.values())


def site_vector_like(partition, shape):
    """The vector of partition ``partition`` in the simulation and deployment apps."""
    v = np.random.default_rng(partition).integers(-(2**20), 2**20 + 1, size=shape)
    v.flat[0] = 2**20
    return v


# ---------------------------------------------- a real deployment, TLS, processes
APP_PYPROJECT = app_pyproject(
    "secure-sum-app",
    "cotrain's secure-sum test app",
    "secure_sum_app.app:server_app",
    "secure_sum_app.app:client_app",
    {"out": "", "n-sites": 4, "drop": -1},
)

APP_MODULE = '''\
"""ServerApp: the secure sum of the sites' vectors; ClientApp: one site's vector."""

import json
import time

import numpy as np
from flwr.clientapp import ClientApp
from flwr.common import bytes_to_ndarray
from flwr.serverapp import ServerApp

from cotrain.flower.secure_sum import secagg_sum, secure_sum_handler

SHAPE = (40, 3)
server_app = ServerApp()
client_app = ClientApp()


def vector(config, context):
    partition = int(context.node_config["partition-id"])
    if partition == int(context.run_config["drop"]):
        raise RuntimeError("this site goes offline")
    v = np.random.default_rng(partition).integers(-(2**20), 2**20 + 1, size=SHAPE)
    v.flat[0] = 2**20
    return v


client_app.train()(secure_sum_handler(vector))


@server_app.main()
def main(grid, context):
    n = int(context.run_config["n-sites"])
    deadline = time.monotonic() + 60
    while len(list(grid.get_node_ids())) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    replies = []

    class Recording:
        def send_and_receive(self, messages, *, timeout=None):
            got = list(grid.send_and_receive(messages, timeout=timeout))
            replies.extend(got)
            return got

    started = time.monotonic()
    result = secagg_sum(Recording(), sorted(grid.get_node_ids()), shape=SHAPE,
                        query="round-1", timeout=120)
    seconds = time.monotonic() - started
    seen = []  # every array that reached the ServerApp: array records and .npy bytes
    for reply in replies:
        if not reply.has_content():
            continue
        for record in reply.content.array_records.values():
            seen += [array.numpy() for array in record.values()]
        for record in reply.content.config_records.values():
            for value in record.values():
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, bytes) and item.startswith(b"\\x93NUMPY"):
                        seen.append(bytes_to_ndarray(item))
    out = context.run_config["out"]
    np.savez(out + ".npz", *seen)
    with open(out, "w") as fh:
        json.dump({"total": result.total.tolist(), "node_ids": list(result.node_ids),
                   "dropped": list(result.dropped), "seconds": seconds,
                   "errors": [str(r.error) for r in replies if r.has_error()]}, fh)
'''


@pytest.mark.slow
def test_localhost_deployment_over_tls_with_one_dropout(tmp_path):
    from cotrain.flower.local.localhost import LocalFederation

    app = tmp_path / "app"
    (app / "secure_sum_app").mkdir(parents=True)
    (app / "pyproject.toml").write_text(APP_PYPROJECT)
    (app / "secure_sum_app" / "__init__.py").write_text("")
    (app / "secure_sum_app" / "app.py").write_text(textwrap.dedent(APP_MODULE))
    out = tmp_path / "sum.json"
    n, drop, shape = 4, 2, (40, 3)
    configs = [{"partition-id": i} for i in range(n)]
    with LocalFederation(tmp_path / "home", n, configs, tls=True) as fed:
        done = fed.run(app, {"out": str(out), "n-sites": n, "drop": drop}, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(out.read_text())
    vectors = {p: site_vector_like(p, shape) for p in range(n)}
    expected = np.sum([v for p, v in vectors.items() if p != drop], axis=0)
    assert np.array_equal(np.array(summary["total"]), expected)
    assert len(summary["node_ids"]) == n - 1 and len(summary["dropped"]) == 1
    with np.load(str(out) + ".npz") as saved:
        seen = [saved[k] for k in saved.files]
    assert len([a for a in seen if a.shape == shape]) == n - 1  # the masked vectors
    assert not holds_a_site_vector(seen, vectors.values())
    print(f"secure sum over TLS: {summary['seconds']:.1f} s", file=sys.stderr)
