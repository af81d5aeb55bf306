#!/usr/bin/env python3
"""What a campaign's driver and units spend on campaign.json at a suite's size, measured: a
campaign of N operators and R rounds (every unit of it), saved, loaded, and each of K units
started and ended as the driver records them (UnitEvents), the medians in ms.

    python3 scripts/driver_bookkeeping.py DIR [--ops 918] [--rounds 3] [--repeat 10]

DIR must not exist; it holds the campaign.json written and is left for reading.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.axes import Axis  # noqa: E402
from harness.campaign import plan  # noqa: E402
from harness.campaign.document import load  # noqa: E402
from harness.campaign.driver import UnitEvents  # noqa: E402
from harness.executors.base import Ended, Task  # noqa: E402


def _ms(call, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        times.append(1e3 * (time.perf_counter() - began))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--ops", type=int, default=918)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    if args.dir.exists():
        print(f"error: {str(args.dir)!r} exists; give a new folder", file=sys.stderr)
        return 2
    args.dir.mkdir(parents=True)
    ops = {f"op{i:04d}": {"node": f"benchmark/test_op{i:04d}.py::test_op{i:04d}"}
           for i in range(args.ops)}
    campaign = plan.new_campaign(directory=args.dir, axis=Axis("none", None, "0", "1"),
                                 caliber={"backend": "cuda", "level": "core", "mode": "auto"},
                                 argv=["--backend", "cuda"], ops=ops, rounds=args.rounds,
                                 walls={}, walls_from=None)
    campaign.save(args.dir)
    size = (args.dir / "campaign.json").stat().st_size
    save = _ms(lambda: campaign.save(args.dir), args.repeat)
    read = _ms(lambda: load(args.dir, "campaign"), args.repeat)
    events = UnitEvents(args.dir, campaign, len(campaign.units), 1, lambda line: None)
    units = iter(campaign.units)

    def one_unit() -> None:
        unit = next(units)
        task = Task(unit.id, ("-",), args.dir / "logs" / "unit.log")
        events.started(task, "0")
        events.ended(task, Ended(unit.id, "ok", 0, 1.0, "0"))

    per_unit = _ms(one_unit, min(args.repeat, len(campaign.units)))
    print(f"{len(campaign.units)} units, campaign.json {size / 1024:.0f} KiB: save {save:.1f} ms, "
          f"load {read:.1f} ms, a unit started and ended by the driver {per_unit:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
