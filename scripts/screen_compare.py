#!/usr/bin/env python3
"""What TUNE_SCREEN saved and what it cost: two A/A campaigns' side A of round 0 compared
(harness/report/screening.py says what is read and what a named row means).

    python3 scripts/screen_compare.py SCREENED FULL

SCREENED ran with `--tune-screen 1`, FULL with `--tune-screen 0`, both `--axis none`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.errors import HarnessError  # noqa: E402
from harness.report import screening  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("screened", type=Path, help="the campaign run with --tune-screen 1")
    parser.add_argument("full", type=Path, help="the campaign run with --tune-screen 0")
    args = parser.parse_args(argv)
    try:
        screening.compare_campaigns(args.screened, args.full, print)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
