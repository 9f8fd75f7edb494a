"""Benchmark scripts of cotrain.

A package, so that it wins over a site-packages ``benchmarks`` (opacus installs one).
"""
