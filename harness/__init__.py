"""Benchmark harness that drives FlagGems' pytest benchmark suite on several accelerator vendors."""

__version__ = "0.1.0"
