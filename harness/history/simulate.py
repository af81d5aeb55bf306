"""A seeded simulation of nightly series with real rows' noise: false alarms and detection."""

from __future__ import annotations

import csv
import json
import math
import random
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError
from harness.history.changes import Options, Point, find_changes, night_value
from harness.history.folders import read_folder
from harness.stats.tdist import student_t_quantile

BANDS = ((0.0, 0.01), (0.01, 0.03), (0.03, 0.10), (0.10, math.inf))  # a row's round-to-round sd
CLASS_COLUMNS = ("class", "sd_lo_pct", "sd_hi_pct", "alt_pct", "alt_p", "share")


@dataclass(frozen=True)
class Noise:
    """A row's round-to-round noise: a normal sd of log latency, and optionally a second mode
    (the tuner's other config) that a round lands in with probability `alt_p`."""

    sd: float
    label: str = ""
    alt_log: float = 0.0
    alt_p: float = 0.0

    def draw(self, rng: random.Random) -> float:
        shift = self.alt_log if self.alt_p and rng.random() < self.alt_p else 0.0
        return shift + rng.gauss(0.0, self.sd)


def row_noise(directory: Path) -> list[float]:
    """Each row's (and side's) round-to-round sd of log latency in a campaign folder."""
    rounds: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for row in read_folder(directory).rows:
        if row.latency_ms and row.latency_ms > 0:
            rounds[(row.op, row.dtype, row.shape, row.side)].append(math.log(row.latency_ms))
    return sorted(statistics.stdev(v) for v in rounds.values() if len(v) >= 2)


def class_noise(path: Path, count: int, seed: int = 0) -> list[Noise]:
    """`count` rows' noise drawn from a file of latency classes (CLASS_COLUMNS, # comments),
    each class in its share of the mix, each row's sd uniform within its class's range."""
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    table = list(csv.DictReader(lines))
    if not table or tuple(table[0]) != CLASS_COLUMNS:
        raise UsageError(f"noise classes {str(path)!r}: expected the columns "
                         f"{','.join(CLASS_COLUMNS)}")
    rng = random.Random(seed)
    total = sum(float(c["share"]) for c in table)
    quota = [count * float(c["share"]) / total for c in table]
    counts = [int(q) for q in quota]  # then the largest remainders, to make `count` in all
    for i in sorted(range(len(table)), key=lambda i: counts[i] - quota[i])[:count - sum(counts)]:
        counts[i] += 1
    out = []
    for c, k in zip(table, counts, strict=True):
        for _ in range(k):
            sd = rng.uniform(float(c["sd_lo_pct"]), float(c["sd_hi_pct"])) / 100.0
            out.append(Noise(sd, c["class"], math.log1p(float(c["alt_pct"]) / 100.0),
                             float(c["alt_p"])))
    return out


@dataclass(frozen=True)
class Trial:
    """One simulated series: its noise, whether it raised a change, and whether one was found
    within `tolerance` nights of the injected step."""

    sd: float
    alarmed: bool
    found: bool
    label: str = ""
    changes: int = 0


def _series(rng: random.Random, noise: Noise, nights: int, rounds: int, step_at: int,
            step_pct: float) -> list[Point]:
    points = []
    for night in range(nights):
        shift = math.log1p(step_pct / 100.0) if night >= step_at else 0.0
        latencies = [math.exp(shift + noise.draw(rng)) for _ in range(rounds)]
        points.append(Point(f"night{night:03d}", night_value(latencies), night))
    return points


def run_trials(noises: Sequence[float | Noise], trials: int, step_pct: float, seed: int = 0,
               nights: int = 30, step_at: int = 20, rounds: int = 3, tolerance: int = 2,
               opts: Options | None = None) -> list[Trial]:
    """`trials` series, each with the noise of a real row (an sd, or a Noise) drawn in turn; a
    step of `step_pct` from night `step_at` (0: an A/A series, where any change is a false
    alarm)."""
    rng = random.Random(seed)
    opts = opts or Options()
    out = []
    for i in range(trials):
        item = noises[i % len(noises)]
        noise = item if isinstance(item, Noise) else Noise(item)
        found = find_changes(_series(rng, noise, nights, rounds, step_at, step_pct), opts)
        hit = any(abs(c.index - step_at) <= tolerance and c.step_pct * step_pct > 0
                  for c in found)
        out.append(Trial(noise.sd, bool(found), hit, noise.label, len(found)))
    return out


def rate(trials: Sequence[Trial], what: str, low: float = 0.0, high: float = math.inf,
         label: str | None = None) -> tuple[float, int]:
    """(share of trials with `what` true, count) among those whose sd lies in [low, high), and
    of class `label` where given."""
    chosen = [t for t in trials if low <= t.sd < high and label in (None, t.label)]
    if not chosen:
        return math.nan, 0
    return sum(getattr(t, what) for t in chosen) / len(chosen), len(chosen)


def _latency_class(a_ms: float) -> str:
    return "ms" if a_ms >= 0.1 else "10-100us" if a_ms >= 0.01 else "us"


def ab_noise(path: Path) -> list[Noise]:
    """Each row's round-to-round sd of one side's log latency, from an A/A campaign's ab.json:
    its t interval of the mean log ratio over `rounds` gives the ratio's sd, and a ratio of
    two sides holds two sides' noise (sd / sqrt 2 each). Labelled by A's latency class."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        rows, confidence = doc["rows"], (doc.get("method") or {}).get("confidence", 0.95)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{str(path)!r} is not an ab.json with rows: {exc}") from None
    out = []
    for row in rows:
        n, lo, hi, a_ms = (row.get(k) for k in ("rounds", "ci_low_pct", "ci_high_pct", "a_ms"))
        if not (isinstance(n, int) and n >= 2 and lo is not None and hi is not None and a_ms):
            continue
        half = (math.log1p(hi / 100.0) - math.log1p(lo / 100.0)) / 2.0
        t = student_t_quantile(1.0 - (1.0 - confidence) / 2.0, n - 1)
        out.append(Noise(half * math.sqrt(n) / t / math.sqrt(2.0), _latency_class(a_ms)))
    return out


def write_classes(noises: Sequence[Noise], path: Path, source: str) -> Path:
    """A classes file (CLASS_COLUMNS) of one line per row, each its own sd: the few numbers of
    a real A/A that a simulation needs, with `source` in its comment."""
    lines = [f"# Round-to-round sd of one side's log latency per row, {source}.",
             "# Written by scripts/history_simulate.py --ab AB_JSON --write-classes FILE.",
             ",".join(CLASS_COLUMNS)]
    lines += [f"{n.label},{n.sd * 100:.4f},{n.sd * 100:.4f},0,0,1" for n in noises]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
