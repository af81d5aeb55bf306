#!/usr/bin/env python3
"""Speed of the history store: importing a full-suite campaign (1,112 operators, about 9,000
rows, 3 rounds) into SQLite, and `history trend` / `history changes` for one operator over a
year of nightly full-suite results. Logic: harness/history/synth.py.

    python scripts/history_bench.py WORKDIR [--nights 365] [--backend cuda --device "NVIDIA H200"]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.history import changes, importer, queries, store, synth  # noqa: E402


def _timed(what: str, fn):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    result = fn()
    print(f"{what}: {time.perf_counter() - t0:.2f} s")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--backend", default="cuda", help="the backend the history claims")
    parser.add_argument("--device", default="NVIDIA H200", help="the device model it claims")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = synth.suite()
    machine = synth.Machine(args.backend, args.device)
    campaign = args.workdir / "campaign"
    if not campaign.exists():
        _timed("write the campaign's folders",
               lambda: synth.write_campaign(campaign, rows, machine))
    one = args.workdir / "import.sqlite"
    one.unlink(missing_ok=True)
    engine = store.open_store(store.resolve(str(one), args.workdir))
    done = _timed(f"import a campaign of {len(rows)} rows x 2 sides x 3 rounds into SQLite",
                  lambda: importer.import_folder(engine, campaign))
    print(f"  {done.rows} rows; again: " + _timed(
        "  import it again", lambda: importer.import_folder(engine, campaign)).outcome)
    year = args.workdir / "year.sqlite"
    if not year.exists():
        eng = store.open_store(store.resolve(str(year), args.workdir))
        _timed(f"build a store of {args.nights} nightly full-suite batches",
               lambda: synth.build_year(eng, rows, machine, args.nights,
                                        step=("op0100", 300, 5.0)))
    eng = store.open_store(store.resolve(str(year), args.workdir))
    found = _timed("trend of one operator (query)", lambda: queries.series(eng, "op0100"))
    _timed("changes of one operator (query + search + tests)", lambda: [
        changes.find_changes(p) for p in queries.series(eng, "op0100").values()])
    print(f"  {len(found)} series of {len(next(iter(found.values())))} nights")
    for verb in (["trend", "op0100"], ["changes", "--op", "op0100"]):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "harness.cli", "history", *verb, "--history",
                        str(year)], check=True, capture_output=True)
        print(f"harness history {' '.join(verb)} (a whole process): "
              f"{time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
