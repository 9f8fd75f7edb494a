"""Shared by the benchmark scripts: write a result file with the command and the machine."""

from __future__ import annotations

import datetime
import os
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def record(name: str, text: str) -> Path:
    """Print ``text`` and save it to ``benchmarks/results/<name>.txt`` with provenance."""
    RESULTS.mkdir(exist_ok=True)
    header = (
        f"command: python {' '.join(sys.argv)}\n"
        f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}\n"
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}\n\n"
    )
    path = RESULTS / f"{name}.txt"
    path.write_text(header + text + "\n")
    print(text)
    print(f"\n(saved to {path})")
    return path
