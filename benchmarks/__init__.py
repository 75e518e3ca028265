"""Benchmarks of what xpu-workarounds costs; run ``python benchmarks/run.py``."""
