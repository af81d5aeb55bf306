"""Autotune configs: a run's tuning before and after, candidates compiled ahead."""
