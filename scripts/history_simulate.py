#!/usr/bin/env python3
"""False alarms and detection of `harness history changes`, by a seeded simulation of nightly
series whose noise is that of real rows (an A/A campaign's rounds).
Logic: harness/history/simulate.py.

    python scripts/history_simulate.py CAMPAIGN_DIR [--trials 400] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.history import simulate  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", type=Path, help="a campaign folder (an A/A: AXIS=none)")
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nights", type=int, default=30)
    args = parser.parse_args()
    sds = simulate.row_noise(args.campaign)
    print(f"{len(sds)} real rows; round-to-round sd of log latency: median "
          f"{sds[len(sds) // 2] * 100:.2f}%, range {sds[0] * 100:.2f}%..{sds[-1] * 100:.1f}%")
    for label, step in (("A/A", 0.0), ("5% step", 5.0), ("2% step", 2.0)):
        trials = simulate.run_trials(sds, args.trials, step, seed=args.seed, nights=args.nights)
        what = "alarmed" if step == 0 else "found"
        cells = []
        for low, high in ((0.0, float("inf")), *simulate.BANDS):
            share, n = simulate.rate(trials, what, low, high)
            if n:
                cells.append(f"sd {low * 100:g}-{high * 100:g}%: {share * 100:.1f}% of {n}")
        noun = "series with a false alarm" if step == 0 else "found within 2 nights of night 20"
        print(f"{label} over {args.nights} nights, {noun}: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
