"""Finished campaigns' rows judged again by this harness's statistics, against their ab.json.

    python3 scripts/rejudge.py <campaign> [<campaign> ...]

For each campaign folder: the verdict counts its ab.json recorded, the counts this checkout's
statistics give its runs' files (harness.campaign.compare.compare_ops, as a report or a
resume judges them), and the method line of each. Reads only; writes nothing.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.campaign import compare  # noqa: E402
from harness.campaign.document import load  # noqa: E402


def counts(verdicts: list[str]) -> str:
    tally = collections.Counter(verdicts)
    return ", ".join(f"{v} {n}" for v, n in sorted(tally.items()))


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for name in argv:
        folder = Path(name)
        recorded = json.loads((folder / "ab.json").read_text(encoding="utf-8"))
        campaign = load(folder)
        result, _, _ = compare.compare_ops(folder, campaign, campaign.noise_floor_pct)
        print(f"{folder}:")
        print(f"  recorded: {counts([r['verdict'] for r in recorded['rows']])}  "
              f"({recorded['method']['text']})")
        print(f"  now:      {counts([r.stats.verdict.value for r in result.rows])}  "
              f"({result.method.text})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
