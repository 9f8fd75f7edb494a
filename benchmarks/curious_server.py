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
2. **other classes**: round 2 of run A naming label spaces other than the site's declared
   ``[0, 1]`` (``[0, 1, 7]``, ``[0.0, 1.0, 2.5]``, ``[1, 0]``, ``[0]``, ``["0", "1"]``):
   every one must get the same fixed refusal and cost nothing;
3. **other pool**: round 2 with another pool's hash;
4. **out of order**: rounds 5, 3 and 2 of run A, in that order;
5. **sigkill**: round 4 of run A pushed, then every SuperNode and site worker SIGKILLed
   while it is answered (the driver does it, :func:`kill_on_request`) and started again;
   round 4 asked again of the restarted site;
6. **dropped**: rounds 6 and 7 of run A, pushed and not waited for (the curious server
   collects them at the end, since the SuperLink it runs holds them);
7. **two servers**: runs C and D, rounds 1–3 each, all six pushed at once (a site cannot
   tell two servers from one server with two run tokens: it knows requests by run token
   and round only); with step 6 they race for what the budget has left;
8. **replay**: late replays of rounds 2 and 1 of run A;
9. **new run**: a new run token B, rounds 1, 2, ... one at a time until the site refuses
   (at most 20);
10. **collect**: the replies of step 6.

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

It prints a table of the attacks (requests, replies with labels, new distinct releases,
refusals, requests left without a reply, the transcript ε so far); the last line printed
is one JSON object::

    {"transcript_epsilon": ..., "site_epsilon": ..., "refused_after_budget": true|false,
     "requests": ..., "releases": ..., "other_classes_identical": ..., "phases": {...}}

    python benchmarks/curious_server.py [--repeats 200] [--releases 8] [--nodes 4] [--save]
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
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cotrain.flower.local.flwr_cli import app_pyproject

HERE = Path(__file__).resolve().parent
N_PUBLIC, N_PRIVATE, SIGMA, N_TEACHERS = 60, 300, 20.0, 5
CLASSES = [0, 1]
#: label spaces the curious server names instead of the site's declared ``CLASSES``
OTHER_LABEL_SPACES = ([0, 1, 7], [0.0, 1.0, 2.5], [1, 0], [0], ["0", "1"])
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
    """Sends ``train`` messages of its choosing to the site's nodes (in turn) and keeps
    every reply. ``config`` and ``arrays`` go into every message (a secure-vote round's
    sizes and queries)."""

    def __init__(
        self,
        grid: Any,
        nodes: list[int],
        pool_hash: str,
        n_public: int,
        config: dict[str, Any] | None = None,
        arrays: dict[str, bytes] | None = None,
    ) -> None:
        from cotrain.wire.format import WireFormat

        self.grid, self.nodes, self.pool_hash = grid, nodes, pool_hash
        self.wire = WireFormat(len(CLASSES), n_public).to_config()
        self.config, self.arrays = dict(config or {}), dict(arrays or {})
        self.sent: dict[str, tuple[str, str, int]] = {}  # message id -> (phase, token, round)
        self.received: list[dict[str, Any]] = []
        self.seconds: dict[str, float] = {}  # phase -> seconds spent waiting for replies

    def message(self, token: str, t: int, node: int, **claims: Any) -> Any:
        from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict

        from cotrain.flower import protocol

        config = {
            "round": t, "client-index": 0, "seed": 1, "ref-round": 0, **self.wire,
            "pool-hash": self.pool_hash, "classes": CLASSES, "run-token": token,
            "broadcast-ref": 0, "eval-proba": False, **self.config, **claims,
        }  # fmt: skip
        content = RecordDict({protocol.ROUND: ConfigRecord(config)})
        for key, data in self.arrays.items():
            content[key] = ArrayRecord({protocol.PAYLOAD: protocol.to_array(data)})
        return Message(content=content, dst_node_id=node, message_type="train",
                       group_id=str(t))  # fmt: skip

    def push(self, phase: str, requests: list[tuple[str, int]], **claims: Any) -> list[str]:
        nodes = self.nodes  # the site's SuperNodes, in turn
        messages = [
            self.message(k, t, nodes[j % len(nodes)], **claims) for j, (k, t) in enumerate(requests)
        ]
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
        for asked in pending:  # no reply: the node died with the request, or it was lost
            phase, token, t = self.sent[asked]
            self.received.append({"phase": phase, "token": token, "round": t, "lost": True})

    def ask(
        self, phase: str, requests: list[tuple[str, int]], timeout: float = 600, **claims: Any
    ) -> None:
        start = time.monotonic()
        self.pull(self.push(phase, requests, **claims), timeout)
        self.seconds[phase] = self.seconds.get(phase, 0.0) + time.monotonic() - start


def curious_main(grid: Any, context: Any) -> None:
    from cotrain.flower.site import load_array, pool_fingerprint

    cfg = context.run_config
    pool = load_array(str(cfg["public-pool"]))
    control = Path(str(cfg["out"])).parent
    deadline = time.monotonic() + 60
    while len(list(grid.get_node_ids())) < int(cfg["nodes"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    nodes = sorted(grid.get_node_ids())
    server = Curious(grid, nodes, pool_fingerprint(pool), len(pool))
    started = time.monotonic()
    server.ask("repeat", [("runa", 1)] * int(cfg["repeats"]))
    for classes in OTHER_LABEL_SPACES:  # the label-set oracle: every one refused alike
        server.ask("other classes", [("runa", 2)], classes=classes)
    server.ask("other pool", [("runa", 2)], **{"pool-hash": "0" * 64})
    server.ask("out of order", [("runa", 5), ("runa", 3), ("runa", 2)])
    # SIGKILL every SuperNode and site worker while round 4 is being answered, restart them
    killed = server.push("sigkill", [("runa", 4)])
    (control / "kill").write_text("now")
    while not (control / "restarted").exists():
        time.sleep(0.1)
    server.nodes = json.loads((control / "restarted").read_text())
    server.pull(killed, timeout=5)
    server.ask("sigkill", [("runa", 4)])  # the same request again, to the restarted site
    dropped = server.push("dropped", [("runa", 6), ("runa", 7)])  # not waited for
    # two servers at once: two run tokens, every round pushed at the same time
    server.ask("two servers", [(k, t) for t in (1, 2, 3) for k in ("runc", "rund")])
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
def write_app(folder: Path, module: str = "curious_server", pyproject: str = PYPROJECT) -> Path:
    """The Flower app folder: ``benchmarks.<module>``'s ServerApp and cotrain's relay
    ClientApp."""
    package = folder / "curious_app"
    package.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(pyproject)
    (package / "__init__.py").write_text('"""A deviating ServerApp (benchmark)."""\n')
    (package / "client_app.py").write_text(
        "from cotrain.flower.relay import make_relay_app\n\napp = make_relay_app()\n"
    )
    (package / "server_app.py").write_text(
        textwrap.dedent(
            f"""\
            import sys

            sys.path.insert(0, {str(HERE.parent)!r})
            from benchmarks.{module} import make_server_app

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


def kill_on_request(federation: Any, control: Path, delay: float = 0.5) -> None:
    """When the ServerApp asks (``control/kill``): SIGKILL every SuperNode and every site
    worker ``delay`` seconds later (while they answer its request), start them again, and
    tell it the new node ids (``control/restarted``)."""
    while not (control / "kill").exists():
        time.sleep(0.1)
    time.sleep(delay)
    killed = []
    for i in range(federation.n_nodes):
        killed += federation.kill_worker(i) + federation.kill_node(i)
    for i in range(federation.n_nodes):
        federation.start_node(i)
    ids = [federation.wait_for_node(i) for i in range(federation.n_nodes)]
    (control / "killed.json").write_text(json.dumps(killed))
    (control / "restarted").write_text(json.dumps(ids))


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
    parser.add_argument("--releases", type=int, default=8, help="releases the budget allows")
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
        killer = threading.Thread(target=kill_on_request, args=(federation, folder), daemon=True)
        killer.start()
        done = federation.run(
            app, {"out": str(out), "public-pool": str(folder / "public.npy"),
                  "repeats": args.repeats, "nodes": args.nodes}, timeout=1800,
        )  # fmt: skip
    if done.returncode != 0 or not out.exists():
        sys.exit(f"the curious ServerApp failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    transcript = json.loads(out.read_text())
    received = transcript["received"]

    releases = {(r["token"], r["round"], r["payload"]) for r in received if "payload" in r}
    per_phase = phase_counts(received, delta)
    round1 = {hashlib.sha256(r["payload"].encode()).hexdigest() for r in received
              if r["phase"] == "repeat" and "payload" in r}  # fmt: skip
    other_classes = {json.dumps(r.get("error"), sort_keys=True) for r in received
                     if r["phase"] == "other classes"}  # fmt: skip
    said = [r["site_epsilon"] for r in received if r.get("site_epsilon") is not None]
    ledger_eps = site_ledger_epsilon(site, budget)
    transcript_eps = compose(len(releases), delta)
    refused = any(c["budget"] for c in per_phase.values())
    site_eps = ledger_eps if ledger_eps is not None else (max(said) if said else None)
    refused_after_budget = bool(
        refused and site_eps is not None and site_eps <= budget
        and len(releases) == args.releases
    )  # fmt: skip
    killed = json.loads((folder / "killed.json").read_text())

    lines, say = reporter()
    say(f"private site: SubsampleAndAggregate(n_teachers={N_TEACHERS}, sigma={SIGMA}), "
        f"budget ε {budget:.4f} (allows {args.releases} releases), "
        f"|U| = {N_PUBLIC}, {N_PRIVATE} private rows, δ = {delta}")  # fmt: skip
    say("ε is record-level (one private record of the site added or removed), against the "
        "server and whoever sees the replies")  # fmt: skip
    say("| attack | requests | replies with labels | new distinct releases | refused (budget) "
        "| refused (other) | no reply | transcript ε so far |")  # fmt: skip
    say("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for phase, c in per_phase.items():
        say(f"| {phase} | {c['requests']} | {c['labels']} | {c['new_releases']} | "
            f"{c['budget']} | {c['other']} | {c['lost']} | {c['epsilon']:.4f} |")  # fmt: skip
    say(f"other label spaces {OTHER_LABEL_SPACES}: {len(other_classes)} distinct reply "
        f"(all refused alike: {len(other_classes) == 1})")  # fmt: skip
    say(f"SIGKILL while round 4 was answered: {len(killed)} processes killed, every SuperNode "
        "and site worker restarted")  # fmt: skip
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
        "releases": len(releases),
        "other_classes_identical": len(other_classes) == 1,
        "phases": per_phase,
    }
    say(json.dumps(result))
    if args.save:
        save_lines(lines)
    return result


def phase_counts(received: list[dict[str, Any]], delta: float) -> dict[str, dict[str, Any]]:
    """Per attack, in the order the replies came: requests, replies with labels, releases
    not seen in an earlier attack, refusals (budget; anything else), requests with no reply,
    and the transcript ε of every release received up to then."""
    seen: set[tuple[str, int, str]] = set()
    phases: dict[str, dict[str, Any]] = {}
    for r in received:
        c = phases.setdefault(r["phase"], dict.fromkeys(
            ("requests", "labels", "new_releases", "budget", "other", "lost"), 0))  # fmt: skip
        c["requests"] += 1
        if r.get("lost"):
            c["lost"] += 1
        elif "payload" in r:
            c["labels"] += 1
            release = (r["token"], r["round"], r["payload"])
            c["new_releases"] += release not in seen
            seen.add(release)
        elif (r.get("error") or {}).get("type") == "PrivacyBudgetSpent":
            c["budget"] += 1
        else:
            c["other"] += 1
        c["epsilon"] = round(compose(len(seen), delta), 6)
    return phases


def reporter() -> tuple[list[str], Callable[[str], None]]:
    """The lines printed so far, and ``say`` that prints one and keeps it (for
    :func:`save_lines`)."""
    lines: list[str] = []

    def say(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    return lines, say


def save_lines(lines: list[str], name: str = "curious_server.txt") -> Path:
    """``benchmarks/results/<name>`` with the command and the machine."""
    import datetime
    import os
    import platform

    header = (
        f"command: python {' '.join(sys.argv)}\n"
        f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}\n"
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}\n\n"
    )
    path = HERE / "results" / name
    path.write_text(header + "\n".join(lines) + "\n")
    return path


if __name__ == "__main__":
    main()
