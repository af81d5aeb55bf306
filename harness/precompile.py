"""Decisions of COMPILE_WORKERS that the host and the precompile plugin share."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from harness.boundary import PRECOMPILE_FILE

PRECOMPILE_PLUGIN = "harness.plugins.precompile"
# Triton's concurrent compile: under AsyncCompileMode(executor) a JIT function's compile is
# submitted to the executor. Looked up as a file beside Triton (or FlagTree, which installs as
# `triton`), so that preflight need not import Triton.
ASYNC_MODULE = "triton.runtime._async_compile"
DEFAULT_CAP = 16  # more threads than this gained nothing measurable on a 16-core host
MAX_WORKERS = 1024


def default_workers(cores: int | None = None) -> int:
    """The host's usable cores, at most DEFAULT_CAP."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # no affinity call on this platform
            cores = os.cpu_count() or 1
    return max(1, min(DEFAULT_CAP, cores))


def off_reason(workers: int, tunes_with_triton: bool, features: Mapping[str, bool]) -> str | None:
    """Why the precompile plugin is not planned, or None when it is.

    None of the reasons applies to a backend without Triton: nothing is compiled there.
    """
    if workers == 0:
        return "compile_workers_0"
    if not tunes_with_triton:
        return "no_triton"
    if not features.get(ASYNC_MODULE, False):
        return "triton_lacks_async_compile"
    return None


def read_side_file(run_dir: Path) -> dict[str, object] | None:
    """The plugin's facts (workers, keys, candidates, compiled, failed, seconds); the file is
    removed once read. None when the plugin did not run."""
    path = run_dir / PRECOMPILE_FILE
    if not path.is_file():
        return None
    facts = json.loads(path.read_text(encoding="utf-8"))
    path.unlink()
    return facts
