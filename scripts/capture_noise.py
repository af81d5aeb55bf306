"""Whether a microsecond row's spread comes from its graph's capture or from its replays.

The graph timer captures one graph of FlagGems' budget (`--iter`, 100 ms of calls at the eager
estimate) and reads the median of ten replays. Each of --processes fresh processes imports
flag_gems and times each row --repeats times in each of three ways, the kinds in turn:

- `one`: as the harness's timer does (one capture, ten replays);
- `split`: --captures graphs of a --captures-th of the calls each, their replays interleaved,
  ten each: the same calls captured and the same replay time, spread over several captures;
- `replays`: one capture, --captures times ten replays: more replay time, one capture.

Where `split` spreads less than `one` within a process and `replays` does not, the capture is
what varies, and splitting it costs nothing; where `replays` spreads less too, the replays'
window is. Every autotuned kernel keeps its first config (pin_configs). Needs a CUDA device,
torch, triton and flag_gems (FlagGems' src on PYTHONPATH):

    python3 scripts/capture_noise.py --processes 4 --out capture.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placement_noise import _at_least, inputs, pin_configs, refuse_bad_out, report  # noqa: E402

# rows under LONG_CALL_MS that moved 1-5% between an A/A's rounds on an H100 (docs/figures.md)
ROWS = ("rot90 64x64", "max_dim 64x64", "reciprocal 64x64", "asinh 64x64", "sum 2^20",
        "rot90 400x800")
KINDS = ("one", "split", "replays")
REP_MS = 100  # FlagGems' default --iter


def timed(fn: Callable[[], Any], captures: int, replays: int) -> float:
    """The median ms a call over `replays` interleaved replays of each of `captures` graphs
    that share one budget's calls."""
    import torch

    from harness.plugins.capture import (
        _captured,
        _eager_estimate,
        _prepared,
        _queued,
        _repeat_count,
    )

    interface = torch.cuda
    with interface.stream(interface.Stream()):
        _prepared(fn, None)
        calls = max(1, _repeat_count(REP_MS, _eager_estimate(interface, fn)) // captures)
        graphs = [_captured(interface, interface.CUDAGraph, fn, calls, None)
                  for _ in range(captures)]
        times = []
        for _ in range(replays):
            for graph in graphs:
                start, end = _queued(interface, graph.replay, 1)
                interface.synchronize()
                times.append(start.elapsed_time(end) / calls)
    return float(statistics.median(times))


def one_process(repeats: int, captures: int) -> dict[str, dict[str, list[float]]]:
    """{row: {kind: [ms, ...]}} of this process."""
    import flag_gems
    import torch
    from triton.runtime.autotuner import Autotuner

    ways = {"one": (1, 10), "split": (captures, 10), "replays": (1, 10 * captures)}
    flag_gems.enable()
    out: dict[str, dict[str, list[float]]] = {}
    for name in ROWS:
        fn, args = inputs(name)
        pin_configs(Autotuner)
        fn(*args)
        torch.cuda.synchronize()
        out[name] = {kind: [] for kind in KINDS}
        for repeat in range(repeats):
            order = KINDS[repeat % 3:] + KINDS[:repeat % 3]  # no kind always first
            for kind in order:
                out[name][kind].append(timed(lambda f=fn, a=args: f(*a), *ways[kind]))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=_at_least(2), default=4)
    parser.add_argument("--repeats", type=_at_least(2), default=6)
    parser.add_argument("--captures", type=_at_least(2), default=4)
    parser.add_argument("--out", help="write every process's timings here as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    refuse_bad_out(parser, args.out)
    if args.child:
        print(json.dumps(one_process(args.repeats, args.captures)))
        return
    runs = []
    for index in range(args.processes):
        done = subprocess.run([sys.executable, __file__, "--child", "--repeats",
                               str(args.repeats), "--captures", str(args.captures)],
                              capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"process {index + 1}/{args.processes} done", file=sys.stderr, flush=True)
        if args.out:  # each process's timings kept as it ends: a cut-short call keeps them
            Path(args.out).write_text(json.dumps(runs, indent=1), encoding="utf-8")
    print("\n".join(report(runs, ROWS, KINDS)))


if __name__ == "__main__":
    main()
