"""Speed of privacy accounting: exact mixed RR + GNMax, RDP with counts, forced PLD.

The audit's case: a client releases |U| = 300 labels a round through K = 10 randomized
response at a per-label ε' = 0.5 with s* = 300 labels (``RandomizedResponse(epsilon=150,
sensitivity=300)``), and the server's GNMax (``NoisyArgmax(sigma=1)``, noise multiplier
1/sqrt(600)) is composed with it; δ = 1e-5, ε per record, for an adversary who sees both.

(a) ten rounds, ε asked after every round as the ledger does: through one
    ``RunningComposition`` (each round folds in only its own events), and through
    ``epsilon_spent`` recomputed from round 1 each round. Target: <= 2 s for all ten.
    Both must agree to 1e-10; round 1 is compared with the old path (dp-accounting's PLD at
    1e-4, recomputed from round 1: run once, round 1 only, with ``--old``).
(b) ``XORMechanism(epsilon=1, sensitivity=500)`` through ``accountant="rdp"`` (the old path
    expanded 500 single events; the new one composes the count once).
(c) ``accountant="pld"`` forced on one round of (a) (the PLD at ``pld_interval(ε)``;
    target <= 0.3 s), and ten rounds of it through ``RunningComposition(accountant="pld")``.

Every timing is the best of ``--repeats`` runs, with the lattice-law cache cleared before
each. Results: a table on stdout, ``benchmarks/results/accounting_speed.txt`` and
``benchmarks/results/accounting_speed.json``.

    python benchmarks/accounting_speed.py          # new paths only (seconds)
    python benchmarks/accounting_speed.py --old    # also the old paths once (~2 min)
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import RESULTS, record

try:
    import consensus  # noqa: F401
except ModuleNotFoundError:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from consensus import NoisyArgmax
from cotrain.privacy import RandomizedResponse, XORMechanism, epsilon_spent
from cotrain.privacy.accounting._privacy_loss import clear_cache
from cotrain.privacy.accounting.composition import RunningComposition, pld_interval

DELTA = 1e-5
ROUNDS = 10
#: the last commit with the old accounting (dp-accounting's PLD for mixed lists)
OLD_COMMIT = "9ac82db"


def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Best wall time of ``repeats`` calls of ``fn`` (cache cleared first) and that call's
    result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        clear_cache()
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        if elapsed < best:
            best, out = elapsed, result
    return best, out


def per_round(fn: Callable[[int], float]) -> tuple[list[float], list[float]]:
    """Times and ε of fn(t) for t = 1..ROUNDS, called in order (one pass)."""
    times, eps = [], []
    for t in range(1, ROUNDS + 1):
        start = time.perf_counter()
        eps.append(fn(t))
        times.append(time.perf_counter() - start)
    return times, eps


def old_module() -> Any:
    """cotrain/privacy/accounting.py as of OLD_COMMIT, imported on its own."""
    root = Path(__file__).resolve().parents[1]
    text = subprocess.run(
        ["git", "show", f"{OLD_COMMIT}:cotrain/privacy/accounting.py"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_accounting.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("old_accounting", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_accounting"] = module  # dataclasses look their module up
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def timed(fn: Callable[[], float]) -> tuple[float, float]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timings per case; best kept")
    parser.add_argument("--old", action="store_true", help="also time the old paths once")
    args = parser.parse_args()

    rr = RandomizedResponse(epsilon=150.0, sensitivity=300).dp_event(10, 300)
    gnmax = NoisyArgmax(sigma=1.0).dp_event(10, 300)
    xor = XORMechanism(epsilon=1.0, sensitivity=500).dp_event(10, 5000)
    results: dict[str, Any] = {"delta": DELTA, "rounds": ROUNDS}
    lines = [
        f"events: {rr}, {gnmax}; δ = {DELTA}; best of {args.repeats}; "
        f"load average {os.getloadavg()[0]:.2f}",
        "",
        "(a) RR (K=10, ε'=0.5, s*=300) + GNMax (σ=1, |U|=300), ε after each of 10 rounds",
    ]

    def running() -> tuple[list[float], list[float]]:
        acc = RunningComposition(DELTA)
        return per_round(lambda t: acc.compose(rr).compose(gnmax).epsilon())

    def recomputed() -> tuple[list[float], list[float]]:
        return per_round(lambda t: epsilon_spent([rr, gnmax] * t, DELTA))

    total_run, (times_run, eps_run) = best_of(args.repeats, running)
    total_re, (times_re, eps_re) = best_of(args.repeats, recomputed)
    agree = max(abs(a - b) / b for a, b in zip(eps_run, eps_re, strict=True))
    lines.append(f"{'round':>5} {'ε':>12} {'Running s':>10} {'recomputed s':>13}")
    for t in range(ROUNDS):
        lines.append(f"{t + 1:>5} {eps_run[t]:>12.6f} {times_run[t]:>10.4f} {times_re[t]:>13.4f}")
    verdict = "ok" if total_run <= 2.0 else "MISSED"
    lines.append(
        f"total: RunningComposition {total_run:.3f} s (target <= 2 s: {verdict}), "
        f"epsilon_spent recomputed {total_re:.3f} s; max relative difference {agree:.1e}"
    )
    results["mixed"] = {
        "epsilon": eps_run,
        "running_s": times_run,
        "running_total_s": total_run,
        "recomputed_s": times_re,
        "recomputed_total_s": total_re,
        "max_rel_diff": agree,
    }
    old = old_module() if args.old else None
    if old is not None:
        old_s, old_eps = timed(lambda: old.epsilon_spent([rr, gnmax], DELTA))
        lines.append(
            f"old path (PLD at 1e-4), round 1 only: {old_s:.2f} s, ε = {old_eps:.6f} "
            f"(exact {eps_run[0]:.6f}; {old_s / times_run[0]:.0f}x the new round 1)"
        )
        results["mixed"]["old_round1"] = {"s": old_s, "epsilon": old_eps}

    lines += ["", "(b) XORMechanism(epsilon=1, sensitivity=500), accountant='rdp'"]
    xor_s, xor_eps = best_of(args.repeats, lambda: epsilon_spent([xor], DELTA, accountant="rdp"))
    lines.append(f"new: {xor_s:.4f} s, ε = {xor_eps:.10f}")
    results["xor_rdp"] = {"s": xor_s, "epsilon": xor_eps}
    if old is not None:
        old_s, old_eps = timed(lambda: old.epsilon_spent([xor], DELTA, accountant="rdp"))
        lines.append(f"old (500 single events): {old_s:.2f} s, ε = {old_eps:.10f}")
        results["xor_rdp"]["old"] = {"s": old_s, "epsilon": old_eps}

    lines += ["", "(c) accountant='pld' forced on (a)"]
    pld_s, pld_eps = best_of(
        args.repeats, lambda: epsilon_spent([rr, gnmax], DELTA, accountant="pld")
    )
    interval = pld_interval(eps_run[0])
    verdict = "ok" if pld_s <= 0.3 else "MISSED"
    lines.append(
        f"one round: {pld_s:.4f} s (target <= 0.3 s: {verdict}), ε = {pld_eps:.6f} "
        f"(exact {eps_run[0]:.6f}, interval {interval:.4g})"
    )

    def running_pld() -> tuple[list[float], list[float]]:
        acc = RunningComposition(DELTA, accountant="pld")
        return per_round(lambda t: acc.compose(rr).compose(gnmax).epsilon())

    total_pld, (_, eps_pld) = best_of(args.repeats, running_pld)
    worst = max((p - e) / e for p, e in zip(eps_pld, eps_run, strict=True))
    lines.append(
        f"ten rounds through RunningComposition(accountant='pld'): {total_pld:.3f} s; "
        f"PLD above exact by at most {worst:.1e} relative"
    )
    results["pld_forced"] = {
        "round1_s": pld_s,
        "round1_epsilon": pld_eps,
        "interval": interval,
        "ten_rounds_s": total_pld,
        "epsilon": eps_pld,
    }
    if old is not None:
        old_s, old_eps = timed(lambda: old.epsilon_spent([rr, gnmax], DELTA, accountant="pld"))
        lines.append(
            f"old forced PLD (one REPLACE_ONE accountant, 300 single RR events): "
            f"{old_s:.2f} s, ε = {old_eps:.6f} (Gaussian sensitivity doubled)"
        )
        results["pld_forced"]["old_round1"] = {"s": old_s, "epsilon": old_eps}

    record("accounting_speed", "\n".join(lines))
    results["provenance"] = {
        "command": f"python {' '.join(sys.argv)}",
        "date": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
    }
    path = RESULTS / "accounting_speed.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"(saved to {path})")


if __name__ == "__main__":
    main()
