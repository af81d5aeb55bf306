#!/usr/bin/env python3
"""What a worker's session spends on two pieces of its host's work, measured in this process:
comparing the process with its fingerprint when nothing changed (leftovers.differences, after
every session) and, with --shapes, parsing a shapes file (PyYAML's own parser, then the parse
yaml_cache keeps); the min and median of REPEAT calls in ms.

    python3 scripts/session_costs.py [--shapes FILE] [--import torch] [--repeat 5]

--import names modules to import first (comma-separated), so that the fingerprint has a
worker's size: a worker of FlagGems holds torch, Triton and flag_gems.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.errors import reader_gone  # noqa: E402
from harness.plugins import leftovers  # noqa: E402


def _times(call: Callable[[], object], repeat: int) -> str:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        times.append(1e3 * (time.perf_counter() - began))
    return f"min {min(times):.2f} median {statistics.median(times):.2f} ms"


def shapes(path: Path, repeat: int) -> str:
    """The shapes file's parse, PyYAML's own and the kept one."""
    import yaml

    from harness.plugins import memo, yaml_cache

    def own() -> object:
        with open(path, encoding="utf-8") as file:
            return yaml.safe_load(file)

    def kept() -> object:
        with open(path, encoding="utf-8") as file:
            return load(file)

    load = yaml_cache.caching(yaml)
    memo.PARSED = memo.Store()
    kept()  # the first parse, kept
    return (f"shapes file {path.name} ({path.stat().st_size / 1024:.1f} KiB): parse "
            f"{_times(own, repeat)}; kept {_times(kept, repeat)}")


def comparison(repeat: int) -> str:
    """The comparison of this process with its own fingerprint, nothing changed."""
    torch = sys.modules.get("torch")
    device = "cpu" if torch is not None else None
    began = time.perf_counter()
    before = leftovers.take(lambda name: True, torch, device)
    took = 1e3 * (time.perf_counter() - began)

    def compare() -> None:
        now = leftovers.switches(torch, device) if torch is not None else {}
        found = leftovers.differences(before, now, lambda name: False, lambda name: False)
        if found:
            raise SystemExit(f"error: the process changed while measured: {found[:3]}")

    return (f"fingerprint of {len(before.modules)} modules, {len(before.classes)} classes, "
            f"{len(before.codes)} functions: take {took:.1f} ms; compare "
            f"{_times(compare, repeat)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=Path)
    parser.add_argument("--import", dest="modules", default="")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: give 1 or more")
    if args.shapes is not None and not args.shapes.is_file():
        print(f"error: --shapes {str(args.shapes)!r} is not a file", file=sys.stderr)
        return 2
    for name in filter(None, (m.strip() for m in args.modules.split(","))):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            print(f"error: --import {name!r}: {exc}", file=sys.stderr)
            return 2
    try:
        if args.shapes is not None:
            print(shapes(args.shapes, args.repeat), flush=True)
        print(comparison(args.repeat), flush=True)
    except BrokenPipeError:
        return reader_gone()
    return 0


if __name__ == "__main__":
    sys.exit(main())
