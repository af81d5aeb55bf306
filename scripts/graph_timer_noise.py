"""How far the graph timers move a row from one process to the next: upstream against steady.

Each of --processes fresh processes imports flag_gems, builds each operator's input once and
times it --repeats times with Triton's do_bench_cudagraph (what FlagGems' cudagraph mode uses)
and with the harness's steady timer (GRAPH_TIMER=steady). A row's value in a process is the
median of its repeats; the spread between processes is what an A/A's rounds see. Needs a CUDA
device, torch, triton and flag_gems (FlagGems' src on PYTHONPATH):

    python3 scripts/graph_timer_noise.py --processes 4 --out noise.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from typing import Any

OPS = ("tanh 64x64", "sum 2^20", "cumsum 64x64", "index_select 64x64", "softmax 64x64",
       "tanh 4096x4096")


def operator(name: str) -> Callable[[], Any]:
    import torch

    def rand(*shape: int) -> Any:
        return torch.randn(*shape, device="cuda", dtype=torch.float16)

    if name == "tanh 64x64":
        x = rand(64, 64)
        return lambda: torch.tanh(x)
    if name == "sum 2^20":
        x = rand(1 << 20)
        return lambda: torch.sum(x)
    if name == "cumsum 64x64":
        x = rand(64, 64)
        return lambda: torch.cumsum(x, 1)
    if name == "index_select 64x64":
        x, i = rand(64, 64), torch.randint(0, 64, (6,), device="cuda")
        return lambda: torch.index_select(x, 0, i)
    if name == "softmax 64x64":
        x = rand(64, 64)
        return lambda: torch.softmax(x, 1)
    if name == "tanh 4096x4096":
        x = rand(4096, 4096)
        return lambda: torch.tanh(x)
    raise SystemExit(f"unknown operator {name!r}")


def one_process(repeats: int) -> dict[str, dict[str, float]]:
    """{op: {timer: median ms}} of this process."""
    import flag_gems
    import torch
    from triton.testing import do_bench_cudagraph

    from harness.plugins.capture import steady_graph_bench

    steady = steady_graph_bench(torch.cuda, torch.cuda.CUDAGraph)
    flag_gems.enable()
    medians: dict[str, dict[str, float]] = {}
    for name in OPS:
        fn = operator(name)
        fn()
        torch.cuda.synchronize()
        medians[name] = {
            "upstream": statistics.median(do_bench_cudagraph(fn, rep=100) for _ in range(repeats)),
            "steady": statistics.median(steady(fn, rep=100) for _ in range(repeats)),
        }
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="write every process's medians here as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_process(args.repeats)))
        return
    runs = []
    for _ in range(args.processes):
        done = subprocess.run([sys.executable, __file__, "--child", "--repeats", str(args.repeats)],
                              capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{'row':22} {'timer':9} {'median us':>10} {'min..max us':>17} {'spread':>7}")
    for name in OPS:
        for timer in ("upstream", "steady"):
            values = [run[name][timer] * 1000 for run in runs]
            spread = 100 * (max(values) / min(values) - 1)
            print(f"{name:22} {timer:9} {statistics.median(values):10.3f} "
                  f"{min(values):8.3f}..{max(values):<8.3f} {spread:6.1f}%")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(runs, handle, indent=1)


if __name__ == "__main__":
    main()
