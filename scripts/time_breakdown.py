#!/usr/bin/env python3
"""Where the wall of every run below DIR went, summed: phase, seconds, % of wall, and the
fraction of wall spent in timed replays.

    python3 scripts/time_breakdown.py DIR [DIR ...]

Each DIR is a run directory, a batch or a campaign directory (anything holding runs): every
time_breakdown.json below them is summed, once each (docs/formats.md describes the file). A
campaign's later rounds alone: `python3 scripts/time_breakdown.py CAMPAIGN/*/*/r[1-9]*`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.errors import HarnessError, reader_gone  # noqa: E402
from harness.report import breakdown  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", type=Path, nargs="+", metavar="DIR",
                        help="a run, batch or campaign directory")
    args = parser.parse_args(argv)
    try:
        result = breakdown.total(*args.dirs)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        breakdown.render(result, print)
        sys.stdout.flush()
    except BrokenPipeError:
        return reader_gone()
    return 0


if __name__ == "__main__":
    sys.exit(main())
