"""A deviating ServerApp against secure-sum sites on real Flower processes.

Four private sites run :class:`cotrain.privacy.SecureTeacherVotes` (2 teachers, ε = 2 for
its one planned release, ``n_sites=4``, ``dropouts=1``, a ``budget`` that allows two runs),
each a real SuperNode with its warm worker on a real SuperLink
(:class:`cotrain.flower.local.localhost.LocalFederation`, every process on this machine).
The ServerApp is not cotrain's: it sends the sites' ``train`` messages itself and runs
Flower's SecAgg+ (:func:`cotrain.flower.secure_sum.secagg_sum`) over the sites it chooses,
under query names it chooses. In order:

1. **vote**: run A, round 1, to every site (each fits, computes its shares, records its
   first share in its ledger);
2. **sum**: SecAgg+ over the four sites (what an honest server does);
3. **subset sum, renamed**: SecAgg+ over sites 1–3 under another query name (subtracted
   from step 2, it would give site 0's share alone);
4. **the same sum, renamed**: over the four sites again, under a third name;
5. **claims**: run C with ``secure-n-sites`` 400 (each share 1/400 of the noise); run A's
   round 0 and round 2 (the plan has one release);
6. **new runs**: new run tokens, vote and sum, until every site refuses.

The transcript ε of each site is computed from what the server actually received: for every
(run, round, step), a revealed sum the site contributed to costs the plan's event
(:meth:`~cotrain.privacy.mechanisms.secure_votes.SecurePlan.step_event`), unless another
revealed sum of the same step leaves the site out: then the two isolate its share, whose
own noise is only its Skellam share (``plan.share_answer``), and that event is charged. The
events are composed with :func:`~cotrain.privacy.mechanisms.secure_votes.shifts_epsilon`,
the ledgers' accountant, and compared with the site's own ledger ε (``state/privacy/``).
ε is record-level (one private record of a site, added or removed), against the server, at
δ = 1e-5, under the plan's assumptions.

Before issue 39 (the site's "contribute once" keyed by the query name the server chose),
step 3 was answered: site 0's share came back alone, ε 7.62 against 4.00 printed (a plan
of ε = 4 over 4 sites with one dropout).

    python benchmarks/curious_secure_server.py [--save]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.curious_server import Curious, reporter, save_lines, write_app
from cotrain.flower.local.flwr_cli import app_pyproject

N_SITES, N_PUBLIC, N_PRIVATE, EPSILON = 4, 40, 120, 2.0
MAX_NEW_RUNS = 4
#: the attacks, in the order the ServerApp makes them
PHASES = ("vote", "sum", "subset sum, renamed", "the same sum, renamed", "400 sites claimed",
          "round 0", "a round past the plan", "new run")  # fmt: skip

PYPROJECT = app_pyproject(
    "curious-secure-app",
    "A ServerApp that deviates against secure-sum sites: renamed and subset sums.",
    "curious_app.server_app:app",
    "curious_app.client_app:app",
    {"out": "", "public-pool": "", "nodes": N_SITES},
)


def mechanism(budget: float | None = None) -> Any:
    from cotrain.privacy import SecureTeacherVotes

    return SecureTeacherVotes(
        n_teachers=2, epsilon=EPSILON, n_sites=N_SITES, rounds=1, dropouts=1, budget=budget
    )


def plan() -> Any:
    """The plan every site computes (the trainer's 2 rounds: one release)."""
    return mechanism().plan(N_SITES, N_PUBLIC, 2, 2)


# ---------------------------------------------------------------------------- the ServerApp
def make_server_app() -> Any:
    """The deviating ServerApp (its module in the app folder imports this)."""
    from flwr.serverapp import ServerApp

    app = ServerApp()
    app.main()(curious_secure_main)
    return app


def curious_secure_main(grid: Any, context: Any) -> None:
    from cotrain.flower.secure_site import N_SITES as SITES_KEY
    from cotrain.flower.secure_site import QUERIES, ROUNDS, STEP
    from cotrain.flower.secure_sum import SecureSumError, secagg_sum
    from cotrain.flower.site import load_array, pool_fingerprint

    cfg = context.run_config
    pool = load_array(str(cfg["public-pool"]))
    deadline = time.monotonic() + 60
    while len(list(grid.get_node_ids())) < int(cfg["nodes"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    nodes = sorted(grid.get_node_ids())
    sizes = {SITES_KEY: N_SITES, ROUNDS: 2}
    queries = np.arange(len(pool), dtype="<i4").tobytes()
    server = Curious(grid, nodes, pool_fingerprint(pool), len(pool), sizes, {QUERIES: queries})
    sums: list[dict[str, Any]] = []
    started = time.monotonic()

    def vote(phase: str, token: str, t: int = 1, **claims: Any) -> int:
        """Every site's train message; how many acknowledged it."""
        before = len(server.received)
        server.ask(phase, [(token, t)] * len(nodes), timeout=300, **claims)
        return sum(not r.get("error") and not r.get("lost") for r in server.received[before:])

    def secure_sum(phase: str, token: str, asked: list[int], query: str) -> None:
        config = {"run-token": token, "round": 1, STEP: "first", "n-classes": 2, **sizes}
        begun = time.monotonic()
        try:
            got = secagg_sum(
                grid, [nodes[i] for i in asked], shape=(len(pool), 2), query=query,
                reconstruction_threshold=3, timeout=120, config=config,
            )  # fmt: skip
            contributors = [int(n) for n in got.node_ids]
        except SecureSumError:
            contributors = []
        sums.append({
            "phase": phase, "token": token, "round": 1, "step": "first", "query": query,
            "asked": [nodes[i] for i in asked], "contributors": contributors,
            "seconds": time.monotonic() - begun,
        })  # fmt: skip

    vote("vote", "runa")
    secure_sum("sum", "runa", [0, 1, 2, 3], "runa/1/first")
    secure_sum("subset sum, renamed", "runa", [1, 2, 3], "runa/1/first-again")
    secure_sum("the same sum, renamed", "runa", [0, 1, 2, 3], "third-name")
    vote("400 sites claimed", "runc", **{SITES_KEY: 400})
    vote("round 0", "runa", 0)
    vote("a round past the plan", "runa", 2)
    for k in range(MAX_NEW_RUNS):
        token = f"new{k}"
        if vote("new run", token) == 0:
            break
        secure_sum("new run", token, [0, 1, 2, 3], f"{token}/1/first")
    out = {"nodes": nodes, "sums": sums, "received": server.received,
           "seconds": time.monotonic() - started}  # fmt: skip
    Path(str(cfg["out"])).write_text(json.dumps(out))


# ---------------------------------------------------------------------------- the benchmark
def transcript_epsilon(node: int, sums: list[dict[str, Any]]) -> float:
    """ε of what the server received about ``node``'s records (see the module docstring)."""
    from cotrain.privacy.mechanisms.secure_votes import SkellamShifts, shifts_epsilon

    p = plan()
    events = []
    steps = {(s["token"], s["round"], s["step"]) for s in sums if s["contributors"]}
    for key in sorted(steps):
        revealed = [
            s["contributors"] for s in sums
            if (s["token"], s["round"], s["step"]) == key and s["contributors"]
        ]  # fmt: skip
        if not any(node in c for c in revealed):
            continue
        event = p.step_event(key[2])
        if any(node not in c for c in revealed):  # two sums isolate this site's share
            event = SkellamShifts(p.share_answer, event.shifts)
        events.append(event)
    return shifts_epsilon(events, p.delta) if events else 0.0


def write_sites(folder: Path, budget: float) -> list[Path]:
    from sklearn.tree import DecisionTreeClassifier

    from cotrain.flower.site import write_site

    rng = np.random.default_rng(0)
    U = rng.normal(size=(N_PUBLIC, 2)) + 1.5 * rng.integers(0, 2, N_PUBLIC)[:, None]
    paths = []
    for i in range(N_SITES):
        y = rng.integers(0, 2, N_PRIVATE)
        X = rng.normal(size=(N_PRIVATE, 2)) + 1.5 * y[:, None]
        tree = DecisionTreeClassifier(max_depth=3, random_state=i)
        paths.append(write_site(folder / f"site-{i}", X, y, U, tree, client_id=i,
                                privacy=mechanism(budget), classes=[0, 1]))  # fmt: skip
    np.save(folder / "public.npy", U)
    return paths


def site_ledger_epsilon(site: Path, budget: float) -> float:
    from cotrain.privacy.ledgers.site_ledger import SiteLedger

    folder = site.parent / "state" / "privacy"
    if not (folder / "ledger.json").exists():
        return 0.0
    return SiteLedger(mechanism(budget), 2, N_PUBLIC, folder).epsilon()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, default=None, help="keep the files here")
    parser.add_argument("--save", action="store_true", help="write benchmarks/results/")
    args = parser.parse_args(argv)

    from cotrain.flower.local.localhost import LocalFederation
    from cotrain.privacy.mechanisms.secure_votes import shifts_epsilon

    p = plan()
    one, two, three = (shifts_epsilon([p.step_event("first")] * k, p.delta) for k in (1, 2, 3))
    budget = (two + three) / 2  # two runs' releases, not a third
    folder = args.keep or Path(tempfile.mkdtemp(prefix="curious-secure-"))
    paths = write_sites(folder / "sites", budget)
    app = write_app(folder / "app", "curious_secure_server", PYPROJECT)
    out = folder / "transcript.json"
    started = time.monotonic()
    configs = [{"site": str(path)} for path in paths]
    with LocalFederation(folder / "home", N_SITES, configs) as federation:
        done = federation.run(
            app, {"out": str(out), "public-pool": str(folder / "sites" / "public.npy"),
                  "nodes": N_SITES}, timeout=1800,
        )  # fmt: skip
        site_of = {int(federation.node_ids[i]): i for i in range(N_SITES)}
    if done.returncode != 0 or not out.exists():
        sys.exit(f"the ServerApp failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    transcript = json.loads(out.read_text())
    sums = transcript["sums"]

    lines, say = reporter()
    say(f"4 secure sites: SecureTeacherVotes(n_teachers=2, epsilon={EPSILON}, n_sites=4, "
        f"rounds=1, dropouts=1), |U| = {N_PUBLIC}, {N_PRIVATE} private rows each; one run's "
        f"ε {one:.4f}, budget ε {budget:.4f} (two runs), δ = {p.delta}")  # fmt: skip
    say("ε is record-level (one private record of a site added or removed), against the "
        "server, under the plan's assumptions")  # fmt: skip
    say("| attack | train messages | acknowledged | refused | SecAgg+ sums asked: sites in "
        "each revealed sum (0: not revealed) |")  # fmt: skip
    say("| --- | --- | --- | --- | --- |")
    phases: dict[str, dict[str, Any]] = {
        phase: {"requests": 0, "ok": 0, "refused": 0, "sums": []} for phase in PHASES
    }
    for r in transcript["received"]:
        c = phases.setdefault(r["phase"], {"requests": 0, "ok": 0, "refused": 0, "sums": []})
        c["requests"] += 1
        c["ok" if not r.get("error") and not r.get("lost") else "refused"] += 1
    for s in sums:
        c = phases.setdefault(s["phase"], {"requests": 0, "ok": 0, "refused": 0, "sums": []})
        c["sums"].append(len(s["contributors"]))
    for phase, c in phases.items():
        say(f"| {phase} | {c['requests']} | {c['ok']} | {c['refused']} | {c['sums'] or '-'} |")
    per_site = []
    for node, i in sorted(site_of.items(), key=lambda item: item[1]):
        ledger, seen = site_ledger_epsilon(paths[i], budget), transcript_epsilon(node, sums)
        per_site.append({"site": i, "transcript_epsilon": round(seen, 6),
                         "ledger_epsilon": round(ledger, 6)})  # fmt: skip
        say(f"site {i}: transcript ε {seen:.4f}, site ledger ε {ledger:.4f}")
    isolated = [{**sums[0], "phase": "isolated"}, {**sums[0], "contributors": sums[0]["asked"][1:]}]
    say(f"had the subset sum been revealed (the code before issue 39), site 0's transcript ε "
        f"for run A alone: {transcript_epsilon(sums[0]['asked'][0], isolated):.4f} against the "
        f"plan's {one:.4f}")  # fmt: skip
    seconds = [round(s["seconds"], 1) for s in sums]
    say(f"SecAgg+ sums took {seconds} s; the ServerApp {transcript['seconds']:.1f} s; the "
        f"whole benchmark {time.monotonic() - started:.1f} s")  # fmt: skip
    result = {
        "sites": per_site,
        "isolated": any(s["phase"] == "subset sum, renamed" and s["contributors"] for s in sums),
        "within_budget": all(site["ledger_epsilon"] <= budget for site in per_site),
    }
    say(json.dumps(result))
    if args.save:
        save_lines(lines, "curious_secure_server.txt")
    return result


if __name__ == "__main__":
    main()
