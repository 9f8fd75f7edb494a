"""Benchmark scripts of cotrain (a package, so that it wins over a site-packages `benchmarks`, e.g. the one opacus installs)."""
