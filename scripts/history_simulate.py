#!/usr/bin/env python3
"""False alarms and detection of `harness history changes`, by a seeded simulation of nightly
series whose noise is that of real rows: an A/A campaign's rounds, or a file of latency classes
read off real A/A figures (tests/data/history/h200_noise.csv).
Logic: harness/history/simulate.py.

    python scripts/history_simulate.py CAMPAIGN_DIR [--trials 400] [--seed 0]
    python scripts/history_simulate.py --classes tests/data/history/h200_noise.csv --trials 2000
    python scripts/history_simulate.py --ab AA/ab.json [--write-classes tests/data/history/X.csv]

--ab reads each row's noise from an A/A campaign's ab.json (its rows' t intervals); with
--write-classes those few numbers are kept as a classes file, and the simulation reads it.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.history import simulate  # noqa: E402


def _groups(noises: list, by_class: bool) -> list[tuple[str, dict]]:  # type: ignore[type-arg]
    if by_class:
        labels = dict.fromkeys(n.label for n in noises)
        return [("all", {}), *((lab, {"label": lab}) for lab in labels)]
    return [("all", {}), *((f"sd {lo * 100:g}-{hi * 100:g}%", {"low": lo, "high": hi})
                           for lo, hi in simulate.BANDS)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", type=Path, nargs="?",
                        help="a campaign folder (an A/A: AXIS=none)")
    parser.add_argument("--classes", type=Path, help="a file of noise classes instead")
    parser.add_argument("--ab", type=Path, help="an A/A campaign's ab.json instead")
    parser.add_argument("--write-classes", type=Path, help="with --ab: keep its rows' noise "
                        "as a classes file")
    parser.add_argument("--source", default="an A/A campaign", help="with --write-classes: "
                        "where the ab.json came from, for the file's comment")
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nights", type=int, default=30)
    args = parser.parse_args()
    if sum(x is not None for x in (args.campaign, args.classes, args.ab)) != 1:
        parser.error("give one of CAMPAIGN_DIR, --classes FILE, --ab AB_JSON")
    if args.ab and args.write_classes:
        args.classes = simulate.write_classes(simulate.ab_noise(args.ab), args.write_classes,
                                              args.source)
        print(f"wrote {args.classes}")
    if args.classes:
        noises: list = simulate.class_noise(args.classes, args.trials, args.seed)
    elif args.ab:
        noises = simulate.ab_noise(args.ab)
    else:
        noises = [simulate.Noise(sd) for sd in simulate.row_noise(args.campaign)]
    sds = sorted(n.sd for n in noises)
    print(f"{len(sds)} rows; round-to-round sd of log latency: median "
          f"{sds[len(sds) // 2] * 100:.2f}%, range {sds[0] * 100:.2f}%..{sds[-1] * 100:.1f}%")
    for label, step in (("A/A", 0.0), ("5% step", 5.0), ("2% step", 2.0)):
        trials = simulate.run_trials(noises, args.trials, step, seed=args.seed,
                                     nights=args.nights)
        what = "alarmed" if step == 0 else "found"
        cells = []
        for name, where in _groups(noises, bool(args.classes or args.ab)):
            share, n = simulate.rate(trials, what, **where)
            if n and not math.isnan(share):
                cells.append(f"{name}: {share * 100:.1f}% of {n}")
        noun = "series with a false alarm" if step == 0 else "found within 2 nights of night 20"
        print(f"{label} over {args.nights} nights, {noun}: " + "; ".join(cells))
        if step == 0:
            alarms = sum(t.changes for t in trials)
            print(f"  false alarms per series and night: {alarms} in "
                  f"{len(trials) * args.nights} = {alarms / (len(trials) * args.nights):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
