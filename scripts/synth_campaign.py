#!/usr/bin/env python3
"""A synthetic suite campaign (1,112 operators of the real FlagGems tree, 8 rows each): its
ab.json, then `harness report` on it, timed, with the sizes of what it wrote. Logic:
harness/report/synth.py.

    python scripts/synth_campaign.py DIR [--ops N] [--rows 8] [--rounds 5] [--no-report]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.providers import resolve  # noqa: E402
from harness.report import abjson, synth  # noqa: E402
from tests.fixture_nodes import load_nodes_tsv  # noqa: E402

NODES = ROOT / "tests" / "data" / "provider" / "benchmark_nodes.tsv"


def _png_size(path: Path) -> str:
    data = path.read_bytes()[16:24]  # IHDR: width, height
    return f"{int.from_bytes(data[:4], 'big')} x {int.from_bytes(data[4:], 'big')} px"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--ops", type=int, default=None, help="the first N operators only")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", default="cuda", help="the backend the caliber claims")
    parser.add_argument("--no-report", action="store_true", dest="no_report")
    args = parser.parse_args()
    ops = tuple(resolve.op_names(load_nodes_tsv(NODES)))[:args.ops]
    args.dir.mkdir(parents=True, exist_ok=True)
    plan = synth.Plan(ops, args.rows, args.rounds, directory=str(args.dir.resolve()),
                      caliber={"backend": args.backend})
    path = abjson.write_ab(args.dir, synth.suite_document(plan))
    print(f"{path}: {len(ops)} operators, {path.stat().st_size} bytes")
    if args.no_report:
        return 0
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness.cli", "report", str(args.dir)], check=True,
                   cwd=ROOT)
    print(f"harness report: {time.perf_counter() - t0:.2f} s")
    for written in sorted(args.dir.iterdir()):
        if written.name != abjson.AB_JSON:
            size = f", {_png_size(written)}" if written.suffix == ".png" else ""
            print(f"  {written.name}: {written.stat().st_size} bytes{size}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
