"""Decisions of TUNE_SCREEN that the host and the screen plugin share.

A tuner times every candidate of a sweep at its own budget (FlagGems' libtuner: a graph of
calls replayed ten times at 10 ms each by default; Triton's autotuner: 25 ms of warmup and
100 ms of timed calls), whatever the kernel takes, and keeps the fastest. Most candidates of a
sweep lose by far more than any timer's noise, so the screen first times each candidate
briefly and hands the tuner only those within KEEP_RATIO of the fastest brief time: the tuner
then times those at its budget and keeps the fastest, as it would have among all of them,
unless a brief time misread a candidate by more than the ratio.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.contract.boundary import SCREEN_FILE
from harness.fsutil import take_json

SCREEN_PLUGIN = "harness.plugins.screen"
# The brief time: Triton's do_bench at this budget (its own default is 25 ms and 100 ms).
PROBE_WARMUP_MS = 2
PROBE_REP_MS = 10
# Where the tuner replays a device graph (FlagGems' libtuner by default), each of Triton's ten
# replays of the brief graph lasts this long.
PROBE_REPLAY_MS = 1
# A candidate goes on to the tuner when its brief time is within this factor of the fastest.
KEEP_RATIO = 1.3
# A sweep whose first candidate takes this long a call is left to the tuner: at a few calls a
# candidate, a brief time of such a kernel costs about what the tuner's own does.
LONG_MS = 1.0
# How a tuner times a candidate, by the first field of libtuner's `_benchmark_protocol`.
_LEGACY = {"triton_do_bench": "event", "triton_do_bench_cudagraph_legacy": "replay"}


def brief_kind(tuner: Any) -> str | None:
    """How `tuner` times a candidate, so that its brief time is taken the same way: "replay"
    (a device graph of calls replayed with the L2 cache warm: FlagGems' libtuner by default),
    "event" (Triton's do_bench, the L2 cache cleared before each call), or None where it times
    with a benchmark of its own, which a brief time could not stand in for."""
    protocol = getattr(tuner, "benchmark_protocol", None)
    if protocol is not None:
        mode = getattr(getattr(protocol, "resolved_mode", None), "value", None)
        return mode if mode in ("replay", "event") else None
    legacy = vars(tuner).get("_benchmark_protocol")
    if isinstance(legacy, tuple) and legacy:
        return _LEGACY.get(str(legacy[0]))
    return "event" if vars(tuner).get("_do_bench") is None else None


def survivors(times: Sequence[float], ratio: float = KEEP_RATIO) -> list[int]:
    """The indices, in order, of the candidates whose brief time is within `ratio` of the
    fastest finite one; every index where none is finite (the tuner then meets each failure
    as it always did)."""
    finite = [t for t in times if math.isfinite(t) and t > 0]
    if not finite:
        return list(range(len(times)))
    fastest = min(finite)
    return [i for i, t in enumerate(times) if math.isfinite(t) and t <= ratio * fastest]


def median_of(timing: Any) -> float:
    """A tuner's time for one candidate as a float: Triton's (p50, p20, p80) or one number;
    inf where it is neither."""
    value = timing[0] if isinstance(timing, (list, tuple)) and timing else timing
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.inf


def read_side_file(run_dir: Path) -> dict[str, object] | None:
    """The plugin's facts (sweeps, candidates, kept, seconds, skipped); the file is removed
    once read. None when the plugin did not run."""
    facts: dict[str, object] | None = take_json(run_dir / SCREEN_FILE)
    return facts
