#!/usr/bin/env python3
"""Does the GIL hold back Triton compiling an autotune sweep on threads, on this host?

COMPILE_WORKERS compiles a key's candidates on threads (Triton's AsyncCompileMode hands each
compile to a thread pool). Where a compiler holds the GIL through much of a compile, worker
processes would do better. This compiles one matmul kernel under every config of a sweep
(`triton.compile`, what a compile thread runs) three ways, each in a fresh process with an
empty TRITON_CACHE_DIR: one after another, on N threads, and on N worker processes (started,
Triton imported, before the clock runs). It prints one line per way and a verdict, and from
the serial way how well the precompile plugin's `compile_cost` ranks the compiles by time.
Threads and processes start the costliest compiles first, as the plugin does (`--order given`:
in the sweep's order, small tiles first). It needs Triton and, without --target, a device; with
--target (e.g. cuda:90) it compiles for that target on a host without one.

    python3 scripts/compile_scaling.py [--workers 16] [--modes serial,threads,processes]
                                       [--order cost|given] [--target cuda:90]
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.tuning.precompile import compile_cost  # noqa: E402 the harness beside this script

MODES = ("serial", "threads", "processes")
ORDERS = ("cost", "given")
# Processes beat threads by more than this factor: the threads wait on the GIL.
GIL_BOUND_FACTOR = 1.33
SHAPE = (4096, 4096, 4096)  # M, N, K: every block size divides it, as in a real sweep


def sweep() -> list[dict[str, int]]:
    """48 configs, the size of a matmul autotune sweep: tiles x K step x stages x warps."""
    tiles = ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))
    return [{"BM": m, "BN": n, "BK": k, "num_stages": s, "num_warps": w}
            for (m, n), k, s, w in itertools.product(tiles, (32, 64), (3, 4), (4, 8))]


try:  # `--help` and the tests run without Triton
    import triton
    import triton.language as tl
    from triton.compiler import ASTSource
except ImportError:
    triton = None

if triton is not None:

    @triton.jit
    def matmul(a, b, c, m, n, k, lda, ldb, ldc,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        row = tl.program_id(0) * BM + tl.arange(0, BM)
        col = tl.program_id(1) * BN + tl.arange(0, BN)
        inner = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for start in range(0, k, BK):
            x = tl.load(a + row[:, None] * lda + (start + inner)[None, :])
            y = tl.load(b + (start + inner)[:, None] * ldb + col[None, :])
            acc += tl.dot(x, y)
        mask = (row[:, None] < m) & (col[None, :] < n)
        tl.store(c + row[:, None] * ldc + col[None, :], acc.to(c.dtype.element_ty), mask=mask)


SIGNATURE = {"a": "*fp16", "b": "*fp16", "c": "*fp16", "m": "i32", "n": "i32", "k": "i32",
             "lda": "i32", "ldb": "i32", "ldc": "i32",
             "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}


def cost(config: Mapping[str, int]) -> float:
    """The plugin's compile_cost of a sweep config."""
    meta = {k: v for k, v in config.items() if k not in ("num_stages", "num_warps")}
    return compile_cost(types.SimpleNamespace(kwargs=meta, num_stages=config["num_stages"],
                                              num_warps=config["num_warps"]))


def kendall_tau(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Kendall's tau-a of two equally long sequences: +1 when they rank alike, -1 reversed."""
    def sign(d: float) -> int:
        return (d > 0) - (d < 0)

    pairs = [(i, j) for i in range(len(xs)) for j in range(i + 1, len(xs))]
    if not pairs:
        return 0.0
    return sum(sign(xs[i] - xs[j]) * sign(ys[i] - ys[j]) for i, j in pairs) / len(pairs)


def parse_target(text: str | None) -> Any:
    """`backend:arch` (cuda:90, hip:gfx942) as a Triton GPUTarget; None: the device's own."""
    if text is None:
        from triton.runtime import driver

        return driver.active.get_current_target()
    from triton.backends.compiler import GPUTarget

    backend, _, arch = text.partition(":")
    if not backend or not arch:
        raise ValueError(f"--target {text!r}: expected backend:arch, e.g. cuda:90 or hip:gfx942")
    return GPUTarget(backend, int(arch) if arch.isdigit() else arch,
                     32 if backend == "cuda" else 64)


def compile_one(config: Mapping[str, int], target: Any) -> None:
    """Compile the kernel for one config (for `target`) without launching it."""
    constexprs = {name: config[name] for name in ("BM", "BN", "BK")}
    options = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    triton.compile(ASTSource(matmul, SIGNATURE, constexprs=constexprs), target=target,
                   options=options)


def _ready(_: int) -> int:
    """A worker process's first task (Triton is imported with this module); it lingers so
    that the next task goes to another worker."""
    time.sleep(0.5)
    return os.getpid()


def timed(mode: str, workers: int, configs: list[dict[str, int]], target: Any
          ) -> tuple[float, list[float]]:
    """Seconds to compile every config in `mode` (in this process, whose cache is empty), and
    in the serial mode each config's seconds, in the order of `configs`."""
    from functools import partial

    one = partial(compile_one, target=target)
    if mode == "serial":
        each = []
        for config in configs:
            started = time.perf_counter()
            one(config)
            each.append(time.perf_counter() - started)
        return sum(each), each
    if mode == "threads":
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            started = time.perf_counter()
            list(pool.map(one, configs))
            return time.perf_counter() - started, []
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        # every worker started and warm before the clock: a pool lives as long as a run
        for _ in range(10):
            if len(set(pool.map(_ready, range(workers * 2)))) == workers:
                break
        started = time.perf_counter()
        list(pool.map(one, configs))
        return time.perf_counter() - started, []


def ordered(configs: list[dict[str, int]], order: str) -> list[dict[str, int]]:
    """The sweep in the order its compiles start: costliest first, or as given."""
    return sorted(configs, key=cost, reverse=True) if order == "cost" else list(configs)


def ranking(configs: Sequence[Mapping[str, int]], seconds: Sequence[float]) -> str:
    """How well compile_cost ranks the measured one-at-a-time compile times."""
    tau = kendall_tau([cost(c) for c in configs], seconds)
    return (f"compile_cost ranks the {len(seconds)} serial compiles with Kendall tau {tau:.2f} "
            f"(slowest {max(seconds):.2f} s, fastest {min(seconds):.2f} s)")


def verdict(seconds: Mapping[str, float]) -> str:
    """What the measured seconds say about threads against processes."""
    serial, threads, procs = (seconds.get(m) for m in MODES)
    speedups = ", ".join(f"{m} {serial / s:.1f}x" for m, s in seconds.items()
                         if serial and m != "serial" and s > 0)
    if threads is None or procs is None:
        return f"speedup over serial: {speedups or '-'}"
    if threads > procs * GIL_BOUND_FACTOR:
        return (f"GIL-bound: processes compile {threads / procs:.2f}x faster than threads "
                f"({speedups})")
    return f"threads suffice: processes are {threads / procs:.2f}x as fast ({speedups})"


def _child(mode: str, workers: int, target: str | None, order: str) -> None:
    configs = sweep() if mode == "serial" else ordered(sweep(), order)
    total, each = timed(mode, workers, configs, parse_target(target))
    for index, seconds in enumerate(each):
        print(f"CONFIG {index} {seconds:.4f}", flush=True)
    print(f"SECONDS {total:.3f}", flush=True)


def measure(modes: Iterable[str], workers: int, target: str | None = None,
            order: str = "cost") -> dict[str, float]:
    """Each mode in a fresh process with an empty cache; {mode: seconds}."""
    out = {}
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix="compile-scaling-") as cache:
            proc = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--child", mode,
                 "--workers", str(workers), "--order", order,
                 *(["--target", target] if target else [])],
                env={**os.environ, "TRITON_CACHE_DIR": cache}, capture_output=True, text=True,
                check=False)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("SECONDS ")]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SystemExit(f"error: mode {mode} failed (rc {proc.returncode}): {tail[0]}")
        out[mode] = float(lines[-1].split()[1])
        print(f"{mode}: {len(sweep())} configs in {out[mode]:.2f} s"
              + ("" if mode == "serial" else f" on {workers} {mode}, {order} order"), flush=True)
        each = [float(ln.split()[2]) for ln in proc.stdout.splitlines()
                if ln.startswith("CONFIG ")]
        if each:
            print(ranking(sweep(), each), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=16, help="threads or processes (16)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated, of {', '.join(MODES)} (all)")
    parser.add_argument("--target", default=None, metavar="BACKEND:ARCH",
                        help="compile for this target, e.g. cuda:90 (default: the device's)")
    parser.add_argument("--order", choices=ORDERS, default="cost",
                        help="start the costliest compiles first (cost) or in sweep order")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers {args.workers}: give 1 or more")
    if args.child:
        _child(args.child, args.workers, args.target, args.order)
        return 0
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        parser.error(f"--modes {args.modes!r}: choose from {', '.join(MODES)}")
    if triton is None:
        parser.error("Triton cannot be imported by this Python: nothing to compile with")
    if args.target is not None:
        try:
            parse_target(args.target)
        except ValueError as exc:
            parser.error(str(exc))
    try:
        print(verdict(measure(modes, args.workers, args.target, args.order)))
    except KeyboardInterrupt:  # subprocess.run has killed the mode's process
        print("interrupted: nothing measured past the last line", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
