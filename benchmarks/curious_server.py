"""A curious server that deviates, against a private site on real Flower processes.

One private site (a depth-4 tree on 300 private rows, |U| = 60, two classes) runs
:class:`cotrain.privacy.SubsampleAndAggregate` with a ``budget`` that allows exactly
``--releases`` rounds. The site runs ``--nodes`` real SuperNodes, each with its warm
worker, all on the same site folder (Flower's SuperNode handles one message at a time;
several processes answering at once is what the site ledger's lock is for), on a real
SuperLink (:class:`cotrain.flower.local.localhost.LocalFederation`, every process on this
machine). The ServerApp is not cotrain's: it deviates from the protocol to get more noisy
releases of the same private data than the printed ε allows. In order, on the site's
``train`` messages (each message's run token and round are the server's to choose):

1. **repeat**: round 1 of run A, ``--repeats`` times (all pushed at once);
2. **rounds**: rounds 2 and 3 of run A (honest ones);
3. **dropped**: rounds 4 and 5 of run A, pushed and not waited for (the protocol ignores
   them; the curious server collects them at the end, since the SuperLink it runs holds
   them);
4. **replay**: late replays of rounds 2 and 1 of run A;
5. **new run**: a new run token B, rounds 1, 2, ... one at a time until the site refuses
   (at most 20);
6. **collect**: the replies of step 3.

The ε of the whole transcript is computed from what was actually received: every
distinct (run token, round, payload) among the replies that carry labels is one release
(an identical re-send is post-processing and costs nothing), and that many round events of
the site's public mechanism (``dp_event(2, |U|)``) are composed with
:class:`cotrain.privacy.accounting.composition.RunningComposition`, the accountant the ledgers use.
It is compared with the site's own ledger ε, read from its state folder
(``state/privacy/``) and from the ``site-epsilon`` its last reply carried. ε is record-level
(one private record of the site, added or removed), against the server and anyone it
shows the replies to, at the mechanism's δ.

Without the site's ledger (the code before it, commit 31ec678: a fresh noisy release for
every message) the same server gets a distinct release for every request: with
``--repeats 40`` on 4 nodes, 40 distinct round-1 payloads and 66 releases in all, a
transcript ε of 28.18 against a budget of 6.47, no ``site-epsilon`` and no refusal.

The last line printed is one JSON object::

    {"transcript_epsilon": ..., "site_epsilon": ..., "refused_after_budget": true|false,
     "requests": ...}

    python benchmarks/curious_server.py [--repeats 200] [--releases 6] [--nodes 4] [--save]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import inspect
import json
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.flower.local.flwr_cli import app_pyproject

HERE = Path(__file__).resolve().parent
N_PUBLIC, N_PRIVATE, SIGMA, N_TEACHERS = 60, 300, 20.0, 5
CLASSES = [0, 1]
MAX_NEW_RUN_ROUNDS = 20

PYPROJECT = app_pyproject(
    "curious-app",
    "A ServerApp that deviates: it re-asks a private site, replays and drops.",
    "curious_app.server_app:app",
    "curious_app.client_app:app",
    {"out": "", "public-pool": "", "repeats": 200, "nodes": 1},
)


# ---------------------------------------------------------------------------- the ServerApp
def make_server_app() -> Any:
    """The deviating ServerApp (its module in the app folder imports this)."""
    from flwr.serverapp import ServerApp

    app = ServerApp()
    app.main()(curious_main)
    return app


class Curious:
    """Sends ``train`` messages of its choosing to one site and keeps every reply."""

    def __init__(self, grid: Any, nodes: list[int], pool_hash: str, n_public: int) -> None:
        from cotrain.wire.format import WireFormat

        self.grid, self.nodes, self.pool_hash = grid, nodes, pool_hash
        self.wire = WireFormat(len(CLASSES), n_public).to_config()
        self.sent: dict[str, tuple[str, str, int]] = {}  # message id -> (phase, token, round)
        self.received: list[dict[str, Any]] = []
        self.seconds: dict[str, float] = {}  # phase -> seconds spent waiting for replies

    def message(self, token: str, t: int, node: int) -> Any:
        from flwr.app import ConfigRecord, Message, RecordDict

        from cotrain.flower import protocol

        config = {
            "round": t, "client-index": 0, "seed": 1, "ref-round": 0, **self.wire,
            "pool-hash": self.pool_hash, "classes": CLASSES, "run-token": token,
            "broadcast-ref": 0, "eval-proba": False,
        }  # fmt: skip
        content = RecordDict({protocol.ROUND: ConfigRecord(config)})
        return Message(content=content, dst_node_id=node, message_type="train",
                       group_id=str(t))  # fmt: skip

    def push(self, phase: str, requests: list[tuple[str, int]]) -> list[str]:
        nodes = self.nodes  # the site's SuperNodes, in turn
        messages = [self.message(k, t, nodes[j % len(nodes)]) for j, (k, t) in enumerate(requests)]
        ids = list(self.grid.push_messages(messages))
        for i, (token, t) in zip(ids, requests, strict=True):
            self.sent[i] = (phase, token, t)
        return ids

    def pull(self, ids: list[str], timeout: float) -> None:
        from cotrain.flower import protocol
        from cotrain.wire import envelope

        pending, deadline = set(ids), time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for reply in self.grid.pull_messages(list(pending)):
                asked = reply.metadata.reply_to_message_id
                pending.discard(asked)
                phase, token, t = self.sent[asked]
                entry: dict[str, Any] = {"phase": phase, "token": token, "round": t}
                if reply.has_error():
                    entry["flower_error"] = str(reply.error.reason)[:200]
                else:
                    plain = protocol.to_plain(reply.content)
                    payload = plain["arrays"].get(envelope.LABELS)
                    if payload is not None:
                        entry["payload"] = base64.b64encode(payload).decode("ascii")
                    entry["error"] = plain["config"].get(envelope.ERROR)
                    entry["site_epsilon"] = (
                        plain["metrics"].get(envelope.STATS, {}).get("site-epsilon")
                    )
                self.received.append(entry)
            time.sleep(0.05)

    def ask(self, phase: str, requests: list[tuple[str, int]], timeout: float = 600) -> None:
        start = time.monotonic()
        self.pull(self.push(phase, requests), timeout)
        self.seconds[phase] = self.seconds.get(phase, 0.0) + time.monotonic() - start


def curious_main(grid: Any, context: Any) -> None:
    from cotrain.flower.site import load_array, pool_fingerprint

    cfg = context.run_config
    pool = load_array(str(cfg["public-pool"]))
    deadline = time.monotonic() + 60
    while len(list(grid.get_node_ids())) < int(cfg["nodes"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    nodes = sorted(grid.get_node_ids())
    server = Curious(grid, nodes, pool_fingerprint(pool), len(pool))
    started = time.monotonic()
    server.ask("repeat", [("runa", 1)] * int(cfg["repeats"]))
    server.ask("rounds", [("runa", 2), ("runa", 3)])
    dropped = server.push("dropped", [("runa", 4), ("runa", 5)])  # not waited for
    server.ask("replay", [("runa", 2), ("runa", 1)])
    for t in range(1, MAX_NEW_RUN_ROUNDS + 1):
        server.ask("new run", [("runb", t)])
        last = server.received[-1]
        if (last.get("error") or {}).get("type") == "PrivacyBudgetSpent":
            break
    server.pull(dropped, timeout=120)  # what the SuperLink kept for the curious server
    out = {"requests": len(server.sent), "received": server.received,
           "seconds": time.monotonic() - started, "phase_seconds": server.seconds}  # fmt: skip
    Path(str(cfg["out"])).write_text(json.dumps(out))


# ---------------------------------------------------------------------------- the benchmark
def write_app(folder: Path) -> Path:
    """The Flower app folder: this ServerApp and cotrain's relay ClientApp."""
    package = folder / "curious_app"
    package.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text('"""A deviating ServerApp (benchmark)."""\n')
    (package / "client_app.py").write_text(
        "from cotrain.flower.relay import make_relay_app\n\napp = make_relay_app()\n"
    )
    (package / "server_app.py").write_text(
        textwrap.dedent(
            f"""\
            import sys

            sys.path.insert(0, {str(HERE.parent)!r})
            from benchmarks.curious_server import make_server_app

            app = make_server_app()
            """
        )
    )
    return folder


def mechanism(budget: float | None) -> Any:
    from cotrain.privacy import SubsampleAndAggregate

    return SubsampleAndAggregate(n_teachers=N_TEACHERS, sigma=SIGMA, budget=budget)


def compose(releases: int, delta: float) -> float:
    """ε of ``releases`` round events of the public mechanism, composed one at a time."""
    from cotrain.privacy.accounting.composition import RunningComposition

    event = mechanism(None).dp_event(len(CLASSES), N_PUBLIC)
    running = RunningComposition(delta)
    for _ in range(releases):
        running.compose(event, 1)
    return float(running.epsilon()) if releases else 0.0


def write_private_site(folder: Path, budget: float) -> Path:
    from sklearn.tree import DecisionTreeClassifier

    from cotrain.flower.site import write_site

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, N_PRIVATE)
    X = rng.normal(size=(N_PRIVATE, 4)) + 1.5 * y[:, None]
    U = rng.normal(size=(N_PUBLIC, 4)) + 1.5 * rng.integers(0, 2, N_PUBLIC)[:, None]
    kwargs: dict[str, Any] = {"privacy": mechanism(budget)}
    if "classes" in inspect.signature(write_site).parameters:  # a private site declares it
        kwargs["classes"] = CLASSES
    return write_site(folder, X, y, U, DecisionTreeClassifier(max_depth=4, random_state=0),
                      client_id=0, **kwargs)  # fmt: skip


def site_ledger_epsilon(site: Path, budget: float) -> float | None:
    """The site's ledger ε as its state folder holds it (None: the site keeps none)."""
    folder = site.parent / "state" / "privacy"
    if not (folder / "ledger.json").exists():
        return None
    from cotrain.privacy.ledgers.site_ledger import SiteLedger

    return SiteLedger(mechanism(budget), len(CLASSES), N_PUBLIC, folder).epsilon()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=200, help="requests for round 1")
    parser.add_argument("--releases", type=int, default=6, help="releases the budget allows")
    parser.add_argument("--nodes", type=int, default=4, help="SuperNodes serving the site")
    parser.add_argument("--keep", type=Path, default=None, help="keep the files here")
    parser.add_argument("--save", action="store_true", help="write benchmarks/results/")
    args = parser.parse_args(argv)

    from cotrain.flower.local.localhost import LocalFederation

    delta = mechanism(None).delta
    budget = (compose(args.releases, delta) + compose(args.releases + 1, delta)) / 2
    folder = args.keep or Path(tempfile.mkdtemp(prefix="curious-"))
    site = write_private_site(folder / "site", budget)
    np.save(folder / "public.npy", np.load(site.parent / "public.npy"))
    app = write_app(folder / "app")
    out = folder / "transcript.json"
    started = time.monotonic()
    # the site runs several SuperNodes (each with its warm worker), all on the same site
    # folder: Flower's SuperNode handles one message at a time, and several processes
    # answering at once is what the ledger's lock is for
    nodes = [{"site": str(site), "worker": str(site.parent / f"worker-{i}.sock")}
             for i in range(args.nodes)]  # fmt: skip
    with LocalFederation(folder / "home", args.nodes, nodes) as federation:
        done = federation.run(
            app, {"out": str(out), "public-pool": str(folder / "public.npy"),
                  "repeats": args.repeats, "nodes": args.nodes}, timeout=1800,
        )  # fmt: skip
    if done.returncode != 0 or not out.exists():
        sys.exit(f"the curious ServerApp failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    transcript = json.loads(out.read_text())
    received = transcript["received"]

    releases = {(r["token"], r["round"], r["payload"]) for r in received if "payload" in r}
    per_phase: dict[str, dict[str, int]] = {}
    for r in received:
        counts = per_phase.setdefault(r["phase"], {"replies": 0, "labels": 0, "refused": 0})
        counts["replies"] += 1
        counts["labels"] += "payload" in r
        counts["refused"] += (r.get("error") or {}).get("type") == "PrivacyBudgetSpent"
    round1 = {hashlib.sha256(r["payload"].encode()).hexdigest() for r in received
              if r["phase"] == "repeat" and "payload" in r}  # fmt: skip
    said = [r["site_epsilon"] for r in received if r.get("site_epsilon") is not None]
    ledger_eps = site_ledger_epsilon(site, budget)
    transcript_eps = compose(len(releases), delta)
    refused = any(c["refused"] for c in per_phase.values())
    site_eps = ledger_eps if ledger_eps is not None else (max(said) if said else None)
    refused_after_budget = bool(
        refused and site_eps is not None and site_eps <= budget
        and len(releases) == args.releases
    )  # fmt: skip

    lines: list[str] = []

    def say(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    say(f"private site: SubsampleAndAggregate(n_teachers={N_TEACHERS}, sigma={SIGMA}), "
        f"budget ε {budget:.4f} (allows {args.releases} releases), "
        f"|U| = {N_PUBLIC}, {N_PRIVATE} private rows, δ = {delta}")  # fmt: skip
    say("ε is record-level (one private record of the site added or removed), against the "
        "server and whoever sees the replies")  # fmt: skip
    for phase, counts in per_phase.items():
        say(f"  {phase:>8}: {counts['replies']} replies, {counts['labels']} with labels, "
            f"{counts['refused']} refusals")  # fmt: skip
    say(f"round 1 asked {args.repeats} times: {len(round1)} distinct payload(s) received")
    say(f"distinct releases received: {len(releases)} -> transcript ε {transcript_eps:.4f}")
    say(
        f"site's ledger (state/privacy/): ε {ledger_eps}; last 'site-epsilon' received: "
        f"{said[-1] if said else None}; max received: {max(said) if said else None}"
    )
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in transcript["phase_seconds"].items())
    say(f"the curious ServerApp took {transcript['seconds']:.1f} s ({phases}); "
        f"the whole benchmark {time.monotonic() - started:.1f} s")  # fmt: skip
    result = {
        "transcript_epsilon": round(transcript_eps, 6),
        "site_epsilon": None if site_eps is None else round(site_eps, 6),
        "refused_after_budget": refused_after_budget,
        "requests": int(transcript["requests"]),
    }
    say(json.dumps(result))
    if args.save:
        save(lines)
    return result


def save(lines: list[str]) -> Path:
    """``benchmarks/results/curious_server.txt`` with the command and the machine."""
    import datetime
    import os
    import platform

    from benchmarks._common import RESULTS

    header = (
        f"command: python {' '.join(sys.argv)}\n"
        f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}\n"
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}\n\n"
    )
    path = RESULTS / "curious_server.txt"
    path.write_text(header + "\n".join(lines) + "\n")
    return path


if __name__ == "__main__":
    main()
