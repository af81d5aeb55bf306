"""Decisions of COMPILE_WORKERS that the host and the precompile plugin share."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.contract.boundary import PRECOMPILE_FILE
from harness.fsutil import take_json

PRECOMPILE_PLUGIN = "harness.plugins.precompile"
# Triton's concurrent compile: under AsyncCompileMode(executor) a JIT function's compile is
# submitted to the executor. Looked up as a file beside Triton (or FlagTree, which installs as
# `triton`), so that preflight need not import Triton.
ASYNC_MODULE = "triton.runtime._async_compile"


def compile_cost(config: Any) -> float:
    """A guess at how long `config` takes to compile, to start the slowest compiles first.

    A compile runs on one thread, so a sweep's compiling ends no sooner than its slowest
    compile does after it started; started last, it keeps the threads waiting. Compile time
    grows with the code unrolled per warp: the product of the config's integer
    meta-parameters (its block sizes) times its pipeline stages, over its warps. It ranked the
    one-thread compile times of scripts/compile_scaling.py's 48-config matmul sweep (0.1 to
    2.7 s each) with a Kendall tau of 0.73 and 0.84 in two runs. Only the order in which
    compiles start depends on it: what is compiled, and what the tuner times in which order,
    do not.
    """
    size = 1
    for value in config.kwargs.values():
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            size *= value
    stages = getattr(config, "num_stages", None) or 1
    warps = getattr(config, "num_warps", None) or 1
    return size * stages / warps


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
    facts: dict[str, object] | None = take_json(run_dir / PRECOMPILE_FILE)
    return facts
