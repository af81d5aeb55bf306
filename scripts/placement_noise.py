"""Where a microsecond row's round-to-round spread comes from: its process, where its inputs
and outputs lie, or its kernels' loaded code.

Each of --processes fresh processes imports flag_gems and, for each row, times it with the
harness's default graph timer (GRAPH_TIMER=adaptive) --repeats times on one set of inputs
(`same`); then once on each of --placements copies of those inputs, each copy allocated after
spacers of random sizes so that it lies elsewhere in device memory (`moved`); then as many times
on such copies, each timed while every graph captured before it lives on, so that its outputs
too are allocated in memory not used before (`apart`); then --placements times more, each after
every Triton kernel of the process was dropped from its in-memory cache, so that the row's
kernels are loaded again from the compile cache into another module (`reloaded`); and, once
every row is done, --repeats times more on its first inputs (`later`), so that a process's own
offset can be told from the GPU's state at the time: where the drift from `same` to `later`
within a process is small against the spread of `same` between processes, the offset stays
with the process while time passes; where it is as large, it comes and goes with time. Every
autotuned kernel keeps its first config only (pin_configs), as a campaign's rounds replay one
set of winners. A campaign's rounds are fresh processes, so the spread of a row's `same` medians
between processes is the spread its rounds see. Where `moved`, `apart` or `reloaded` spreads
within a process as much as `same` does between processes, that is the cause; where it spreads
no more than `same` within a process, it is not. Needs a CUDA device, torch, triton and
flag_gems (FlagGems' src on PYTHONPATH):

    python3 scripts/placement_noise.py --processes 6 --out placement.json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.plugins.held import every_object  # noqa: E402

# rows that moved 1-5% between an A/A's rounds on an H100 (docs/figures.md), and a long one
ROWS = ("rot90 64x64", "rot90 400x800", "rot90 1024x1024", "max_dim 64x64", "reciprocal 64x64",
        "asinh 64x64", "sum 2^20", "pixel_shuffle 8x36x64x64", "exp 4096x4096")


def inputs(name: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The row's call and its inputs (tensors on the device, float16)."""
    import torch

    def rand(*shape: int) -> Any:
        return torch.randn(*shape, device="cuda", dtype=torch.float16)

    table: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
        "rot90 64x64": (lambda x: torch.rot90(x, 1, [0, 1]), (rand(64, 64),)),
        "rot90 400x800": (lambda x: torch.rot90(x, 1, [0, 1]), (rand(400, 800),)),
        "rot90 1024x1024": (lambda x: torch.rot90(x, 1, [0, 1]), (rand(1024, 1024),)),
        "max_dim 64x64": (lambda x: torch.max(x, 1), (rand(64, 64),)),
        "reciprocal 64x64": (torch.reciprocal, (rand(64, 64),)),
        "asinh 64x64": (torch.asinh, (rand(64, 64),)),
        "sum 2^20": (torch.sum, (rand(1 << 20),)),
        "pixel_shuffle 8x36x64x64": (lambda x: torch.pixel_shuffle(x, 3), (rand(8, 36, 64, 64),)),
        "exp 4096x4096": (torch.exp, (rand(4096, 4096),)),
    }
    if name not in table:
        raise SystemExit(f"unknown row {name!r}; known: {', '.join(table)}")
    return table[name]


# torch's caching allocator keeps requests of at most 1 MiB in a pool of its own (2 MiB
# segments); a spacer there moves a small tensor, which a large spacer would not.
SMALL_REQUEST = 1 << 20


def moved(args: tuple[Any, ...], rng: random.Random) -> tuple[tuple[Any, ...], Any]:
    """Copies of `args` (tensors) with the same sizes and strides, allocated after spacers on
    their device, returned too so that they stay allocated while the copies are timed: 0-64
    MiB in steps of 4 KiB, and 0-63 small requests of 1 MiB each, so that small and large
    tensors alike land elsewhere (each pool gets a spacer)."""
    import torch

    device = args[0].device
    spacer = [torch.empty(rng.randrange(0, 1 << 14) * 4096, dtype=torch.uint8, device=device)]
    spacer += [torch.empty(SMALL_REQUEST, dtype=torch.uint8, device=device)
               for _ in range(rng.randrange(0, 64))]
    copies = tuple(torch.empty_strided(a.size(), a.stride(), dtype=a.dtype,
                                       device=a.device).copy_(a) for a in args)
    return copies, spacer


KINDS = ("same", "moved", "apart", "reloaded", "later")


def keeping(graph_cls: type, kept: list[Any]) -> type:
    """`graph_cls` whose every instance is also appended to `kept`: while a graph lives, so
    does the memory pool its capture allocated outputs from, so the next capture's outputs
    land in memory of their own rather than in the last one's, freed."""

    class Kept(graph_cls):  # type: ignore[misc,valid-type]
        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            graph = super().__new__(cls, *args, **kwargs)
            kept.append(graph)
            return graph

    return Kept


def reload_kernels(*classes: type) -> int:
    """Drop every compiled kernel that instances of `classes` hold in memory, so that each is
    loaded again at its next call; how many objects held any. Triton's JITFunction holds them
    in `device_caches` (Triton 3) or `cache` (before); a launcher in front of it (FlagGems'
    LibEntry) may keep its own, a dict or a dict per device in `kernel_cache`, and launch from
    there without asking the JITFunction again."""
    dropped = 0
    with warnings.catch_warnings():  # a deprecated module's proxy warns when asked its class
        warnings.simplefilter("ignore")
        found = [obj for obj in every_object() if isinstance(obj, classes)]
    for obj in found:
        caches: list[Any] = [getattr(obj, name, None)
                             for name in ("device_caches", "cache", "kernel_cache")]
        caches = [c for held in caches
                  for c in (held if isinstance(held, (tuple, list)) else (held,))]
        full = [held for held in caches if isinstance(held, dict) and held]
        for held in full:
            held.clear()
        dropped += bool(full)
    return dropped


def pin_configs(tuner_class: type) -> int:
    """Leave every instance of `tuner_class` (Triton's Autotuner, FlagGems' LibTuner) its first
    config alone, so that it runs that config without tuning; how many had more. A process
    that tunes picks its own winner where configs are close (pixel_shuffle's BLOCK_SIZE on an
    H100: 3.71 or 4.12 us, process by process), while a campaign's rounds all replay side A's
    round 0: a spread between processes must not count a choice that campaigns make once."""
    pinned = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = [obj for obj in every_object() if isinstance(obj, tuner_class)]
    for obj in found:
        configs = getattr(obj, "configs", None)
        if isinstance(configs, list) and len(configs) > 1:
            obj.configs = configs[:1]
            pinned += 1
    return pinned


def one_process(repeats: int, placements: int, seed: int) -> dict[str, dict[str, list[float]]]:
    """{row: {kind: [ms, ...]}} of this process, for each of KINDS."""
    import flag_gems
    import torch
    from flag_gems.utils.libentry import LibEntry
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    from harness.plugins.capture import adaptive_graph_bench

    bench = adaptive_graph_bench(torch.cuda, torch.cuda.CUDAGraph)
    kept: list[Any] = []
    bench_apart = adaptive_graph_bench(torch.cuda, keeping(torch.cuda.CUDAGraph, kept))
    rng = random.Random(seed)
    flag_gems.enable()
    out: dict[str, dict[str, list[float]]] = {}
    held_rows: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {}
    for name in ROWS:
        fn, args = held_rows[name] = inputs(name)
        pin_configs(Autotuner)  # before the row's first call, which would tune
        fn(*args)
        torch.cuda.synchronize()
        same = [float(bench(lambda f=fn, a=args: f(*a), rep=100)) for _ in range(repeats)]
        moves = []
        for _ in range(placements):
            copies, spacer = moved(args, rng)
            moves.append(float(bench(lambda f=fn, c=copies: f(*c), rep=100)))
            del copies, spacer
        aparts, held = [], []
        for _ in range(placements):
            copies, spacer = moved(args, rng)
            aparts.append(float(bench_apart(lambda f=fn, c=copies: f(*c), rep=100)))
            held.append((copies, spacer))  # inputs stay where they were put, too
        kept.clear()
        del held
        reloads = []
        for _ in range(placements):
            if not reload_kernels(JITFunction, LibEntry):
                break  # no Triton kernel held: the row is torch's own
            fn(*args)  # loads the kernels again, outside the timed graph
            torch.cuda.synchronize()
            reloads.append(float(bench(lambda f=fn, a=args: f(*a), rep=100)))
        out[name] = {"same": same, "moved": moves, "apart": aparts, "reloaded": reloads}
    for name, (fn, args) in held_rows.items():  # some seconds after each row's `same`
        out[name]["later"] = [float(bench(lambda f=fn, a=args: f(*a), rep=100))
                              for _ in range(repeats)]
    return out


def _sd_pct(values: list[float]) -> float:
    logs = [math.log(v) for v in values]
    return 100 * statistics.stdev(logs) if len(logs) > 1 else float("nan")


def _median_sd(groups: list[list[float]]) -> float:
    spreads = [_sd_pct(g) for g in groups if len(g) > 1]
    return statistics.median(spreads) if spreads else float("nan")


def _drift_pct(same: list[list[float]], later: list[list[float]]) -> float:
    """The root mean square, over processes that timed both, of the log ratio of a process's
    `later` median to its `same` median, in %; nan where none timed both."""
    logs = [math.log(statistics.median(b) / statistics.median(a))
            for a, b in zip(same, later, strict=True) if a and b]
    return 100 * math.sqrt(statistics.fmean(x * x for x in logs)) if logs else float("nan")


def report(runs: list[dict[str, dict[str, list[float]]]], rows: tuple[str, ...] = ROWS,
           names: tuple[str, ...] = KINDS) -> list[str]:
    """A line per row of `rows`: its median (over the first of `names`), the sd in % of log
    time within a process for each kind of `names` (the median over processes) and between the
    processes' medians of each kind, then the drift of a process's `later` median from its
    `same` one (_drift_pct); nan where a kind has fewer than two timings (a run made before
    `reloaded` or `later` existed has none)."""
    lines = [f"{'row':26} {'median us':>9} " + " ".join(f"{'within ' + k:>15}" for k in names)
             + " " + " ".join(f"{'between ' + k:>16}" for k in names)
             + f" {'drift to later':>15}"]
    for name in rows:
        kinds = {k: [run[name].get(k, []) for run in runs] for k in names}
        within = [_median_sd(kinds[k]) for k in names]
        between = [_sd_pct([statistics.median(g) for g in kinds[k] if g]) for k in names]
        middle = 1000 * statistics.median(v for g in kinds[names[0]] for v in g)
        drift = _drift_pct(kinds[names[0]], [run[name].get("later", []) for run in runs])
        lines.append(f"{name:26} {middle:9.3f} " + " ".join(f"{w:14.2f}%" for w in within) + " "
                     + " ".join(f"{b:15.2f}%" for b in between) + f" {drift:14.2f}%")
    return lines


def _at_least(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of at least "
                                             f"{least}")
        return value
    return parse


def refuse_bad_out(parser: argparse.ArgumentParser, out: str | None) -> None:
    """Exit 2 naming --out where it is a folder or its folder does not exist: said before the
    processes run, not after, when their timings would be lost."""
    if out and (Path(out).is_dir() or not Path(out).parent.resolve().is_dir()):
        parser.error(f"--out {out!r}: expected a file in an existing folder")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # two of each at least: a spread needs two timings
    parser.add_argument("--processes", type=_at_least(2), default=6)
    parser.add_argument("--repeats", type=_at_least(2), default=5)
    parser.add_argument("--placements", type=_at_least(2), default=5)
    parser.add_argument("--out", help="write every process's timings here as JSON")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    refuse_bad_out(parser, args.out)
    if args.child is not None:
        print(json.dumps(one_process(args.repeats, args.placements, args.child)))
        return
    runs = []
    for index in range(args.processes):
        done = subprocess.run([sys.executable, __file__, "--child", str(index), "--repeats",
                               str(args.repeats), "--placements", str(args.placements)],
                              capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"process {index + 1}/{args.processes} done", file=sys.stderr, flush=True)
    print("\n".join(report(runs)))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(runs, handle, indent=1)


if __name__ == "__main__":
    main()
