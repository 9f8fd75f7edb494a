"""Speed of the hard-vote consensus (majority and qualified majority).

1. Large: 100 clients x 1,000,000 public examples x 10 classes, one call of `majority_vote`
   and `qualified_majority` per vote dtype (int64 is what the trainer passes by default;
   int32/int16/int8 are read as they are, without upcasting the matrix). ~10% of the votes
   are -1 (absent). Best of ``--repeats`` timings of the consensus call alone (validation
   included, data generation excluded). Target: <= 0.5 s each.
2. Versus the reference code's approach on 5 clients x 50,000 examples: a Python loop over
   examples doing ``np.bincount(votes[:, j], minlength=C).argmax()``. Both results must be
   identical. Target: >= 10x faster.

    python benchmarks/consensus_speed.py
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

try:
    import consensus
except ModuleNotFoundError:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import consensus

from _common import record

TARGET_S = 0.5
TARGET_SPEEDUP = 10.0


def best_of(repeats: int, fn: Callable[[], object]) -> tuple[float, object]:
    """Best wall time of ``repeats`` calls of ``fn`` and the last result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def reference_majority(votes: np.ndarray, n_classes: int) -> np.ndarray:
    """The reference implementation's consensus: one bincount per example."""
    return np.array(
        [np.bincount(votes[:, j], minlength=n_classes).argmax() for j in range(votes.shape[1])]
    )


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--examples", type=int, default=1_000_000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3, help="timings per call; best is kept")
    parser.add_argument("--small-clients", type=int, default=5)
    parser.add_argument("--small-examples", type=int, default=50_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    lines = [f"CPU: {cpu_name()}; numpy {np.__version__}; best of {args.repeats} timings", ""]
    lines += large(args, rng)
    lines += versus_reference(args, rng)
    record("consensus_speed", "\n".join(lines))


def large(args: argparse.Namespace, rng: np.random.Generator) -> list[str]:
    """Part 1: the large federation, per vote dtype."""
    m, n, n_classes = args.clients, args.examples, args.classes
    lines = [
        f"1. {m} clients x {n:,} examples x {n_classes} classes (~10% of votes -1), "
        f"target <= {TARGET_S} s",
        f"{'call':34s} {'votes dtype':>11s} {'votes MB':>9s} {'best s':>8s} {'target':>7s}",
    ]
    votes8 = rng.integers(0, n_classes, size=(m, n), dtype=np.int8)
    votes8[rng.random((m, n), dtype=np.float32) < 0.1] = -1
    expected = None
    for dtype in (np.int64, np.int32, np.int16, np.int8):
        votes = votes8.astype(dtype)
        calls = [
            ("majority_vote", lambda v=votes: consensus.majority_vote(v, n_classes)),
            (
                "qualified_majority(quorum=0.9)",
                lambda v=votes: consensus.qualified_majority(v, n_classes, quorum=0.9),
            ),
        ]
        for name, call in calls:
            seconds, out = best_of(args.repeats, call)
            if name == "majority_vote":  # every dtype must give the same labels
                if expected is None:
                    expected = out
                assert np.array_equal(out, expected), f"{dtype.__name__} result differs"
            ok = "ok" if seconds <= TARGET_S else "MISSED"
            lines.append(
                f"{name:34s} {np.dtype(dtype).name:>11s} {votes.nbytes / 1e6:9.0f} "
                f"{seconds:8.3f} {ok:>7s}"
            )
    client_w = rng.random(m)
    seconds, _ = best_of(
        args.repeats, lambda: consensus.majority_vote(votes8, n_classes, weights=client_w)
    )
    lines.append(
        f"{'majority_vote, weights (m,)':34s} {'int8':>11s} {votes8.nbytes / 1e6:9.0f} "
        f"{seconds:8.3f} {'(info)':>7s}"
    )
    example_w = rng.random((m, n), dtype=np.float32).astype(np.float64)
    seconds, _ = best_of(
        args.repeats, lambda: consensus.majority_vote(votes8, n_classes, weights=example_w)
    )
    lines.append(
        f"{'majority_vote, weights (m, n)':34s} {'int8':>11s} {votes8.nbytes / 1e6:9.0f} "
        f"{seconds:8.3f} {'(info)':>7s}"
    )
    return lines


def versus_reference(args: argparse.Namespace, rng: np.random.Generator) -> list[str]:
    """Part 2: against the reference code's loop over examples."""
    n_classes = args.classes
    ms, ns = args.small_clients, args.small_examples
    small = rng.integers(0, n_classes, size=(ms, ns))
    t_ref, ref = best_of(args.repeats, lambda: reference_majority(small, n_classes))
    t_ours, ours = best_of(args.repeats, lambda: consensus.majority_vote(small, n_classes))
    assert np.array_equal(ref, ours), "reference and vectorised majority disagree"
    speedup = t_ref / t_ours
    return [
        "",
        f"2. {ms} clients x {ns:,} examples x {n_classes} classes (int64, no abstentions), "
        f"target >= {TARGET_SPEEDUP:.0f}x",
        f"{'implementation':54s} {'best s':>8s}",
        f"{'reference: loop over examples, bincount(...).argmax()':54s} {t_ref:8.4f}",
        f"{'consensus.majority_vote (vectorised)':54s} {t_ours:8.4f}",
        f"speed-up: {speedup:.0f}x ({'ok' if speedup >= TARGET_SPEEDUP else 'MISSED'}); "
        "identical labels: yes",
    ]


if __name__ == "__main__":
    main()
