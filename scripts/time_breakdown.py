#!/usr/bin/env python3
"""Where the wall of every run below DIR went, summed: phase, seconds, % of wall, and the
fraction of wall spent in timed replays.

    python3 scripts/time_breakdown.py DIR

DIR is a run directory, a batch or a campaign directory (anything holding runs): every
time_breakdown.json below it is summed (docs/formats.md describes the file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.errors import HarnessError  # noqa: E402
from harness.report import breakdown  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="a run, batch or campaign directory")
    args = parser.parse_args(argv)
    try:
        result = breakdown.total(args.dir)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    breakdown.render(result, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
