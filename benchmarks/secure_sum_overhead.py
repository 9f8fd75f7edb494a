"""Seconds per aggregation of the sites' integer vectors: plain Flower sum vs SecAgg+ sum.

Each site holds an int64 vector of shape (1000, 2) or (1000, 10) (teacher-vote
histograms with their noise share, entries in ±2**20); the ServerApp gets the sum over 5
or 10 sites in two ways:

- **plain**: one ``train`` message per site, each site replies with its vector as an
  ``ArrayRecord``, the ServerApp adds them up (it sees every vector);
- **SecAgg+**: :func:`cotrain.flower.secure_sum.secagg_sum` — Flower's
  ``SecAggPlusWorkflow`` and ``secaggplus_mod`` (4 messages per site), exact integers.

Measured two (or three) ways:

1. **Flower's simulation engine** (``flwr.simulation.run_simulation``, Ray, 10
   SuperNodes, one ClientApp with both handlers routed by content): wall seconds per
   aggregation in the ServerApp, median of ``--repeats`` after one warm-up of each kind;
   the SecAgg+ figure split by stage: each ``send_and_receive`` (the exchange, i.e. Ray
   dispatch + the sites' work) and the ServerApp's own work after the last exchange (the
   unmasking: regenerating every site's private mask).

   1b. With ``--localhost R``, **a real deployment**: the same ServerApp and ClientApp
   code as a Flower app on :class:`cotrain.flower.local.localhost.LocalFederation` (a
   SuperLink and 10 SuperNodes as processes, over TLS), ``R`` aggregations per case.
2. **In process** (no transport: every message still goes through Flower's protobuf
   serde; the sites run one after the other in this process): where the CPU goes —
   per stage, the sites' summed work and the ServerApp's, and the bytes on the wire.
   These are Flower's own stages; its DEBUG log names them but gives no timings, so
   they are timed around the Grid calls.

    python benchmarks/secure_sum_overhead.py [--repeats 5] [--localhost 1]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
from typing import Any

import numpy as np
from _common import record

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.serde import message_from_proto, message_to_proto
from flwr.serverapp import ServerApp
from flwr.supercore.task_identity import TaskIdentity

from cotrain.flower.local.flwr_cli import app_pyproject
from cotrain.flower.secure_sum import (
    is_secure_sum_message,
    secagg_sum,
    secure_sum_handler,
)

BOUND = 2**20
SHAPES = [(1000, 2), (1000, 10)]
SITES = [5, 10]
STAGES = ["setup", "share keys", "masked vectors", "unmask"]


def site_vector(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).integers(-BOUND, BOUND + 1, size=shape)


class TimedGrid:
    """Wraps a Grid: the wall time of every ``send_and_receive`` and the gaps between."""

    def __init__(self, grid: Any) -> None:
        self.grid, self.calls = grid, []  # (start, end) per exchange

    def send_and_receive(self, messages: Any, *, timeout: float | None = None) -> Any:
        start = time.perf_counter()
        replies = list(self.grid.send_and_receive(messages, timeout=timeout))
        self.calls.append((start, time.perf_counter()))
        return replies

    def __getattr__(self, name: str) -> Any:
        return getattr(self.grid, name)


def plain_sum(grid: Any, nodes: list[int], shape: tuple[int, ...]) -> np.ndarray:
    """The sum without secure aggregation: every site sends its vector in the clear."""
    messages = [
        Message(
            RecordDict({"plain-sum": ConfigRecord({"shape": ",".join(map(str, shape))})}),
            dst_node_id=n,
            message_type="train",
        )
        for n in nodes
    ]
    replies = list(grid.send_and_receive(messages))
    if any(r.has_error() for r in replies):
        raise RuntimeError([str(r.error) for r in replies if r.has_error()])
    return np.sum([r.content.array_records["vector"]["v"].numpy() for r in replies], axis=0)


# ------------------------------------------------------------- the simulation run
def measure(grid: Any, repeats: int, warm_up: bool = True) -> list[dict[str, Any]]:
    """The ServerApp's side: every shape and site count, plain then SecAgg+."""
    deadline = time.monotonic() + 120
    while len(list(grid.get_node_ids())) < max(SITES) and time.monotonic() < deadline:
        time.sleep(0.05)
    all_nodes = sorted(grid.get_node_ids())
    query = iter(range(10**6))
    rows = []
    for shape in SHAPES:
        for n in SITES:
            nodes = all_nodes[:n]
            if warm_up:  # the actors, the imports
                plain_sum(grid, nodes, shape)
                secagg_sum(grid, nodes, shape=shape, query=f"q{next(query)}")
            plain, secure, stages, server_s = [], [], [], []
            for _ in range(repeats):
                t = time.perf_counter()
                reference = plain_sum(grid, nodes, shape)
                plain.append(time.perf_counter() - t)
                timed = TimedGrid(grid)
                t = time.perf_counter()
                result = secagg_sum(timed, nodes, shape=shape, query=f"q{next(query)}")
                end = time.perf_counter()
                secure.append(end - t)
                if not np.array_equal(result.total, reference):
                    raise AssertionError("the secure sum differs from the plain sum")
                stages.append([b - a for a, b in timed.calls])
                server_s.append(end - timed.calls[-1][1])
            rows.append(
                {
                    "shape": list(shape),
                    "n": n,
                    "plain": statistics.median(plain),
                    "secure": statistics.median(secure),
                    "stages": [statistics.median(s) for s in zip(*stages, strict=True)],
                    "server": statistics.median(server_s),
                }
            )
    return rows


def site_vector_for(config: dict[str, Any], context: Any) -> np.ndarray:
    """A site's vector: seeded by its partition id, in the shape the server asked for."""
    shape = tuple(int(d) for d in str(config["secure-sum-shape"]).split(","))
    return site_vector(int(context.node_config["partition-id"]), shape)


_secure_handler = secure_sum_handler(site_vector_for)


def site_train(msg: Message, context: Any) -> Message:
    """The site's one ``train`` handler: SecAgg+ stages by content, else the plain sum."""
    if is_secure_sum_message(msg):
        return _secure_handler(msg, context)
    shape = tuple(int(d) for d in str(msg.content["plain-sum"]["shape"]).split(","))
    v = site_vector(int(context.node_config["partition-id"]), shape)
    return Message(RecordDict({"vector": ArrayRecord({"v": Array(v)})}), reply_to=msg)


def simulation(repeats: int) -> list[dict[str, Any]]:
    from flwr.simulation import run_simulation

    rows: list[dict[str, Any]] = []
    server = ServerApp()

    @server.main()
    def main(grid: Any, context: Any) -> None:
        rows.extend(measure(grid, repeats))

    client = ClientApp()
    client.train()(site_train)
    run_simulation(
        server,
        client,
        num_supernodes=max(SITES),
        backend_config={
            "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {"num_cpus": 2, "include_dashboard": False},
        },
    )
    return rows


# --------------------------------------------------- a real deployment (processes)
APP_PYPROJECT = app_pyproject(
    "secure-sum-bench",
    "cotrain's secure-sum benchmark app",
    "secure_sum_bench.app:server_app",
    "secure_sum_bench.app:client_app",
    {"out": "", "repeats": 1},
)

APP_MODULE = """\
import json
import sys
import time

sys.path.insert(0, {benchmarks!r})
import secure_sum_overhead as bench  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import ServerApp  # noqa: E402

server_app = ServerApp()
client_app = ClientApp()
client_app.train()(bench.site_train)


@server_app.main()
def main(grid, context):
    rows = bench.measure(grid, int(context.run_config["repeats"]), warm_up=False)
    with open(context.run_config["out"], "w") as fh:
        json.dump(rows, fh)
"""


def localhost(repeats: int) -> list[dict[str, Any]]:
    """The same measurement on a SuperLink and 10 SuperNodes as processes, over TLS."""
    import json
    import tempfile
    from pathlib import Path

    from cotrain.flower.local.localhost import LocalFederation

    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "app"
        (app / "secure_sum_bench").mkdir(parents=True)
        (app / "pyproject.toml").write_text(APP_PYPROJECT)
        (app / "secure_sum_bench" / "__init__.py").write_text("")
        module = APP_MODULE.format(benchmarks=str(Path(__file__).resolve().parent))
        (app / "secure_sum_bench" / "app.py").write_text(module)
        out = Path(tmp) / "rows.json"
        configs = [{"partition-id": i} for i in range(max(SITES))]
        with LocalFederation(Path(tmp) / "home", max(SITES), configs, tls=True) as fed:
            done = fed.run(app, {"out": str(out), "repeats": repeats}, timeout=3000)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(done.stdout[-3000:] + done.stderr[-3000:])
        rows: list[dict[str, Any]] = json.loads(out.read_text())
        return rows


# ------------------------------------------------------------------ in process
class WireGrid:
    """SuperNodes answering in this process, every message through Flower's serde;
    times the sites' handlers and counts the bytes of every message."""

    def __init__(self, shape: tuple[int, ...], n: int) -> None:
        self.vectors = {100 + i: site_vector(i, shape) for i in range(n)}
        self.states = {node: RecordDict() for node in self.vectors}
        self.handler = secure_sum_handler(lambda config, ctx: self.vectors[ctx.node_id])
        self.site_s: list[float] = []  # summed site seconds per exchange
        self.bytes: list[tuple[int, int]] = []  # (down, up) per exchange

    def send_and_receive(self, messages: Any, *, timeout: float | None = None) -> Any:
        replies, site, down, up = [], 0.0, 0, 0
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = msg.object_id
            proto = message_to_proto(msg)
            down += proto.ByteSize()
            msg = message_from_proto(proto)
            node = msg.metadata.dst_node_id
            start = time.perf_counter()
            try:
                reply = self.handler(msg, Context(1, node, {}, self.states[node], {}))
            except Exception as err:
                reply = Message(Error(2, str(err)), reply_to=msg)
            site += time.perf_counter() - start
            reply.metadata.__dict__["_message_id"] = reply.object_id
            proto = message_to_proto(reply)
            up += proto.ByteSize()
            replies.append(message_from_proto(proto))
        self.site_s.append(site)
        self.bytes.append((down, up))
        return replies


def in_process(repeats: int) -> list[dict[str, Any]]:
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    rows = []
    for shape in SHAPES:
        for n in SITES:
            totals, sites, servers, nbytes = [], [], [], []
            for r in range(repeats + 1):  # the first is a warm-up
                grid = WireGrid(shape, n)
                timed = TimedGrid(grid)
                t = time.perf_counter()
                result = secagg_sum(timed, list(grid.vectors), shape=shape, query=f"q{r}")
                end = time.perf_counter()
                assert np.array_equal(result.total, np.sum(list(grid.vectors.values()), axis=0))
                if r == 0:
                    continue
                totals.append(end - t)
                sites.append(grid.site_s)
                exchange = [b - a for a, b in timed.calls]
                starts = [a for a, _ in timed.calls] + [end]
                # the ServerApp's own work in stage k: from the end of exchange k - 1
                # (the start of the sum for k = 0) to the start of exchange k, and the
                # unmasking after the last exchange
                before = [starts[0] - t] + [
                    starts[k] - timed.calls[k - 1][1] for k in range(1, len(timed.calls))
                ]
                servers.append([*before, end - timed.calls[-1][1]])
                assert len(exchange) == 4
                nbytes = grid.bytes
            rows.append(
                {
                    "shape": shape,
                    "n": n,
                    "total": statistics.median(totals),
                    "sites": [statistics.median(s) for s in zip(*sites, strict=True)],
                    "server": [statistics.median(s) for s in zip(*servers, strict=True)],
                    "bytes": nbytes,
                }
            )
    return rows


def transport_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| shape | sites | plain s | SecAgg+ s | ratio | SecAgg+ exchanges: setup / share keys / "
        "masked vectors / unmask s | ServerApp unmasking s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        stages = " / ".join(f"{s:.3f}" for s in row["stages"])
        lines.append(
            f"| {row['shape'][0]}×{row['shape'][1]} | {row['n']} | {row['plain']:.3f} | "
            f"{row['secure']:.3f} | {row['secure'] / row['plain']:.1f}× | {stages} | "
            f"{row['server']:.3f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--localhost",
        type=int,
        default=0,
        metavar="REPEATS",
        help="also measure on a real deployment (SuperLink + 10 SuperNodes over TLS), "
        "this many aggregations per case (slow: ~5 s per message round trip)",
    )
    args = parser.parse_args()
    logging.getLogger("flwr").setLevel(logging.WARNING)
    local = in_process(args.repeats)
    sim = simulation(args.repeats)
    real = localhost(args.localhost) if args.localhost else []

    lines = [
        "flwr 1.41; int64 entries in ±2**20; SecAgg+ with num_shares = n sites, "
        "reconstruction_threshold = n // 2 + 1, modulus 2**32 (cotrain.flower.secure_sum); "
        "every secure sum checked equal to the plain sum",
        "",
        f"1. Flower simulation engine (run_simulation, Ray, 10 SuperNodes, 2 CPUs): seconds "
        f"per aggregation in the ServerApp, median of {args.repeats} after a warm-up. The "
        f"simulation's Grid polls for replies every 0.1 s, so each exchange takes a "
        f"multiple of 0.1 s: plain = 1 exchange, SecAgg+ = 4.",
        "",
        *transport_table(sim),
    ]
    if real:
        lines += [
            "",
            f"1b. A real deployment (LocalFederation: flower-superlink + 10 flower-supernode "
            f"processes on this machine, TLS, FLWR_SUPEREXEC_TASK_POLL_INTERVAL=0.1; every "
            f"message starts a fresh flwr-clientapp process): seconds per aggregation, "
            f"median of {args.localhost}, no warm-up",
            "",
            *transport_table(real),
        ]
    lines += [
        "",
        f"2. In process (no transport; every message through Flower's protobuf serde; the "
        f"sites run one after the other in this process): seconds per aggregation and "
        f"where they go, median of {args.repeats} after a warm-up. Stage columns: setup / "
        f"share keys / masked vectors / unmask.",
        "",
        "| shape | sites | total s | sites' work per stage s (summed over sites) | "
        "ServerApp's work per stage s (+ unmasking) | bytes down / up per stage (all sites) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in local:
        sites = " / ".join(f"{s:.3f}" for s in row["sites"])
        server = " / ".join(f"{s:.3f}" for s in row["server"][:4])
        wire = " / ".join(f"{d / 1e3:.0f}k↓ {u / 1e3:.0f}k↑" for d, u in row["bytes"])
        lines.append(
            f"| {row['shape'][0]}×{row['shape'][1]} | {row['n']} | {row['total']:.3f} | "
            f"{sites} | {server} (+ {row['server'][4]:.3f}) | {wire} |"
        )
    plain_bytes = {s: int(np.prod(s)) * 8 for s in SHAPES}
    lines += [
        "",
        "A plain upload is the vector itself: "
        + ", ".join(f"{s[0]}×{s[1]}: {b / 1e3:.0f} kB per site" for s, b in plain_bytes.items())
        + " (int64); a masked vector is the same size (int64 entries below 2**32).",
    ]
    record("secure_sum_overhead", "\n".join(lines))


if __name__ == "__main__":
    main()
