#!/usr/bin/env python3
"""A breadth check of the real suite: which of FlagGems' operators the harness runs, and
whether each one that does not end ok fails the same way in FlagGems' own pytest.

It takes a seeded sample of the names `OPS=all` gives, plus every operator whose first mark
another benchmark shares (the names most likely to resolve wrongly), runs them through
`harness batch` with SHAPE_MODE=smoke in several batches at once on one device (timings are not
the point), then runs every operator that did not end ok through FlagGems' own pytest, in its
kernel and cudagraph modes. It writes breadth.csv and prints counts by state and one line per
operator not ok:

    python3 scripts/breadth.py --flaggems-dir DIR --out DIR [--sample 300] [--seed 21]
                               [--batches 12] [--backend cuda] [--device 0] [--limit 180]
                               [--ops-file F]

An operator not ok whose FlagGems runs pass is a harness fault.
"""

from __future__ import annotations

import argparse
import csv
import random
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.providers.flaggems import op_name_for, scan_benchmark  # noqa: E402
from harness.providers.resolve import op_names  # noqa: E402


def sample(flaggems_dir: Path, size: int, seed: int) -> dict[str, str]:
    """name -> node id: `size` names drawn with `seed`, plus every shared-mark operator."""
    names = op_names(scan_benchmark(flaggems_dir).nodes, flaggems_dir)
    firsts = Counter(op_name_for(n) for n in names.values())
    shared = {name for name, node in names.items() if firsts[op_name_for(node)] > 1}
    rest = sorted(set(names) - shared)
    chosen = set(random.Random(seed).sample(rest, min(size, len(rest)))) | shared
    return {name: names[name].nodeid for name in sorted(chosen)}


def run_batches(ops: list[str], args: argparse.Namespace) -> list[dict[str, str]]:
    shards = [ops[i::args.batches] for i in range(args.batches)]
    procs = []
    for i, shard in enumerate(s for s in shards if s):
        out = args.out / f"batch{i}"
        out.mkdir(parents=True, exist_ok=True)
        (out / "ops.txt").write_text("\n".join(shard) + "\n")
        argv = [sys.executable, "-m", "harness.cli", "batch", "--backend", args.backend,
                "--runner", "host", "--flaggems-dir", str(args.flaggems_dir),
                "--ops-file", str(out / "ops.txt"), "--shape-mode", "smoke",
                "--unit-timeout", str(args.limit), "--devices", args.device, "--out", str(out)]
        procs.append(subprocess.Popen(argv, cwd=REPO, stdout=open(out / "batch.log", "w"),
                                      stderr=subprocess.STDOUT))
    for proc in procs:
        proc.wait()
    rows = []
    for path in sorted(args.out.glob("batch*/batch/*/ops_status.csv")):
        rows += list(csv.DictReader(path.open()))
    return rows


def reason_of(row: dict[str, str]) -> str:
    if row.get("reason"):
        return row["reason"]
    log = Path(row["run"]) / "run.log" if row.get("run") else None
    if log is None or not log.is_file():
        return "(no run log)"
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines()
             if line.strip() and not line.startswith(("RUN_DONE", "# pytest exit code"))]
    errors = [line for line in lines if line.startswith(("E ", "FAILED", "SKIPPED", "ERROR"))]
    return (errors or lines or ["(empty log)"])[-1][:200]


def flaggems_own(node: str, mode: str, args: argparse.Namespace) -> str:
    """FlagGems' own verdict on `node` in `mode`: passed, failed, skipped or timeout, with
    pytest's last line."""
    argv = [sys.executable, "-m", "pytest", node, "--level", "core", "--mode", mode, "-q",
            "-p", "no:cacheprovider", "-rs"]
    try:
        proc = subprocess.run(argv, cwd=args.flaggems_dir, capture_output=True, text=True,
                              timeout=args.limit, env=None)
    except subprocess.TimeoutExpired:
        return f"timeout after {args.limit} s"
    last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    verdict = {0: "passed", 1: "failed"}.get(proc.returncode, f"rc {proc.returncode}")
    if proc.returncode == 0 and " skipped" in last and " passed" not in last:
        verdict = "skipped"
    return f"{verdict}: {last[:160]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flaggems-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--ops-file", type=Path, help="these operators instead of a sample")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--device", default="0")
    parser.add_argument("--limit", type=int, default=180, help="seconds a run may take")
    args = parser.parse_args()
    if args.out.exists() and any(args.out.iterdir()):  # its tables would mix with the last's
        parser.error(f"--out {str(args.out)!r} is not empty; give a new directory")
    chosen = sample(args.flaggems_dir, args.sample, args.seed)
    if args.ops_file:  # e.g. what an earlier pass did not reach or did not end ok
        wanted = args.ops_file.read_text().split()
        chosen = {op: chosen[op] for op in wanted if op in chosen}
    print(f"{len(chosen)} operators", flush=True)
    began = time.monotonic()
    rows = run_batches(list(chosen), args)
    print(f"harness: {len(rows)} operators in {time.monotonic() - began:.0f} s", flush=True)
    bad = [r for r in rows if r["status"] != "ok"]
    with ThreadPoolExecutor(args.batches) as pool:
        own = {(r["op"], mode): pool.submit(flaggems_own, chosen[r["op"]], mode, args)
               for r in bad for mode in ("kernel", "cudagraph")}
    with open(args.out / "breadth.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["op", "node", "state", "rows", "reason", "flaggems_kernel",
                         "flaggems_cudagraph"])
        for r in sorted(rows, key=lambda r: (r["status"], r["op"])):
            kernel = own[(r["op"], "kernel")].result() if (r["op"], "kernel") in own else ""
            graph = own[(r["op"], "cudagraph")].result() if (r["op"], "cudagraph") in own else ""
            writer.writerow([r["op"], r["node"], r["status"], r["rows"],
                             "" if r["status"] == "ok" else reason_of(r), kernel, graph])
    states = Counter(r["status"] for r in rows)
    print(f"tried {len(rows)}: " + ", ".join(f"{k} {v}" for k, v in sorted(states.items())))
    missing = sorted(set(chosen) - {r["op"] for r in rows})
    if missing:
        print(f"no status for {len(missing)}: {', '.join(missing)}")
    print(f"done in {time.monotonic() - began:.0f} s; table: {args.out / 'breadth.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
