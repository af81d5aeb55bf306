"""A/B pairing: two sides' rows (each a list of rounds) into an AbReport, calibers checked."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness import stats
from harness.contract.boundary import (
    CLOCK_CHANGE,
    CLOCKS_DIFFER,
    CLOCKS_THROTTLED_MARKER,
    CLOCKS_UNREAD_MARKER,
    DEVICE_WORK_MS,
    DIRECT_MARKER,
    FLAG_MARKERS,
    NO_DEVICE_WORK,
)
from harness.contract.records import Winner, read_records
from harness.contract.results import SUCCESS, Row
from harness.errors import UsageError
from harness.report.abresult import AbReport, AbRow, Key, Unpaired, in_geomean
from harness.report.sources import CALIBER_FIELDS, Source, caliber_of

SELF_TUNED = "not a same-config comparison: both sides tuned for themselves"
WINNERS_NAMED = 3  # keys the note of differing winners names; the rest are counted


def keyed(rows: Sequence[Row]) -> dict[Key, Row]:
    """Rows by (op, dtype, shape, occurrence): the n-th measurement of a key is occurrence n."""
    seen: Counter[tuple[str, str, str]] = Counter()
    out: dict[Key, Row] = {}
    for row in rows:
        seen[row.key()] += 1
        key = (*row.key(), seen[row.key()])
        out[key] = row
    return out


def _measured(row: Row) -> bool:
    latency = row.latency_ms
    return row.status == SUCCESS and latency is not None and math.isfinite(latency) and latency > 0


def _latencies(rows: dict[Key, Row]) -> dict[Key, float]:
    """The latency of each measured row."""
    return {k: r.latency_ms for k, r in rows.items() if r.latency_ms is not None and _measured(r)}


def _why_unpaired(key: Key, a: Sequence[dict[Key, Row]], b: Sequence[dict[Key, Row]]) -> str:
    for name, side in (("A", a), ("B", b)):
        present = [r[key] for r in side if key in r]
        if not present:
            return f"only in {'B' if name == 'A' else 'A'}"
        if not any(_measured(row) for row in present):
            row = present[0]
            return f"{row.status} in {name}" if row.status != SUCCESS else f"no latency in {name}"
    return "never measured on both sides in the same round"


def sides_caliber(sources: Sequence[Source]) -> dict[str, tuple[str, ...]]:
    return {f: tuple(sorted({caliber_of(ident)[f] for s in sources for _, ident in s.identities}))
            for f in CALIBER_FIELDS}


def _logs_caliber(sources: Sequence[Source], field: str) -> tuple[str, ...]:
    return tuple(sorted({dict(s.log_caliber).get(field, "?") for s in sources}))


def _mixed(ca: Mapping[str, tuple[str, ...]], cb: Mapping[str, tuple[str, ...]],
           allow_mixed: bool) -> list[str]:
    diffs = [f"{f}: A={'/'.join(ca[f])!r} B={'/'.join(cb[f])!r}" for f in ca if ca[f] != cb[f]]
    if diffs and not allow_mixed:
        raise UsageError(f"the two sides differ in caliber ({'; '.join(diffs)}); "
                         "pass --allow-mixed to compare them anyway")
    return [f"mixed calibers (--allow-mixed): {'; '.join(diffs)}"] if diffs else []


def caliber_notes(a: Sequence[Source], b: Sequence[Source], *, allow_mixed: bool) -> list[str]:
    """Compare the calibers of two sides: UsageError naming each difference unless allowed.

    Runs compare by their identities; logs by what they say (a harness run.log its header, a
    FlagGems log its --mode as the timer, and its level); a run against a log is not checked.
    A FlagGems --mode and a harness timer are different settings: they read as different.
    """
    sources = (*a, *b)
    if all(s.identities for s in sources):
        ca, cb = sides_caliber(a), sides_caliber(b)
        return _mixed({f: ca[f] for f in CALIBER_FIELDS}, {f: cb[f] for f in CALIBER_FIELDS},
                      allow_mixed)
    raw = [s.label for s in sources if not s.identities]
    known = [f for f in CALIBER_FIELDS if all(dict(s.log_caliber).get(f) for s in sources)]
    if len(raw) < len(sources) or not known:
        return [f"caliber not checked: no run identity for {', '.join(map(repr, raw))}"]
    notes = _mixed({f: _logs_caliber(a, f) for f in known},
                   {f: _logs_caliber(b, f) for f in known}, allow_mixed)
    unknown = [f for f in CALIBER_FIELDS if f not in known]
    return notes + [f"caliber of the logs: {', '.join(known)} checked (a FlagGems log's timer is "
                    f"its --mode){'; not recorded: ' + ', '.join(unknown) if unknown else ''}"]


def _replays_from(side: Sequence[Source], targets: set[Path]) -> bool:
    """Every run of `side` pinned autotune winners recorded under one of `targets`."""
    froms = [ident.get("replay_from") for s in side for _, ident in s.identities]
    return bool(froms) and all(
        f and any(t == Path(f).resolve() or t in Path(f).resolve().parents for t in targets)
        for f in froms)


def tuning_notes(a: Sequence[Source], b: Sequence[Source]) -> list[str]:
    """The self-tuned flag: neither side replays the other's winners (nor both one source)."""
    ids = [ident for s in (*a, *b) for _, ident in s.identities]
    if not ids or any(not s.identities for s in (*a, *b)):
        return []
    if any(ident.get("autotune_mode", "default") != "default" for ident in ids):
        return []
    dirs_a = {d.resolve() for s in a for d, _ in s.identities}
    dirs_b = {d.resolve() for s in b for d, _ in s.identities}
    shared = {Path(i["replay_from"]).resolve() for i in ids if i.get("replay_from")}
    if _replays_from(b, dirs_a) or _replays_from(a, dirs_b) or (
            len(shared) == 1 and all(i.get("replay_from") for i in ids)):
        return []
    return [SELF_TUNED, *_winners_note(a, b)]


def _winners(side: Sequence[Source]) -> dict[tuple[str, str, str], Winner]:
    """The winners a side's runs recorded (autotune_records), by kernel and key; a run with no
    records, or unreadable ones, adds none."""
    found: dict[tuple[str, str, str], Winner] = {}
    for directory, _ in (item for s in side for item in s.identities):
        try:
            found.update(read_records(directory).index())
        except UsageError:
            continue
    return found


def _winners_note(a: Sequence[Source], b: Sequence[Source]) -> list[str]:
    """Where two self-tuned sides settled on different configs for one key of one kernel:
    a row that runs that key may differ by the configs each side picked (on an H100, one
    process in four or five tuned pixel_shuffle to a config 11% slower than the others did),
    not by what the sides are. [] where no key both tuned differs."""
    wa, wb = _winners(a), _winners(b)
    both = sorted(set(wa) & set(wb))
    differ = [k for k in both if wa[k].config != wb[k].config]
    if not differ:
        return []

    def config(winner: Winner) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(winner.config.items())) or "{}"

    named = "; ".join(f"{k[1]} {k[2]}: A {config(wa[k])}, B {config(wb[k])}"
                      for k in differ[:WINNERS_NAMED])
    more = len(differ) - WINNERS_NAMED
    return [f"tuning settled differently on {len(differ)} of the {len(both)} keys both sides "
            f"tuned, so a row of such a key may differ by its configs: {named}"
            + (f"; and {more} more" if more > 0 else "")]


def _flags(key: Key, rounds: Sequence[dict[Key, Row]], side: str) -> list[str]:
    return [f"{side}:{m}" for m in FLAG_MARKERS if any(m in r[key].markers for r in rounds
                                                         if key in r)]


def round_clock(row: Row) -> float | None:
    """A row's SM clock in one round: the mean of the readings before and after its timing;
    None where neither was read."""
    read = [v for v in (row.clock("sm_mhz_before"), row.clock("sm_mhz_after")) if v]
    return sum(read) / len(read) if read else None


def clock_flags(key: Key, a: Sequence[dict[Key, Row]], b: Sequence[dict[Key, Row]]
                ) -> list[str]:
    """CLOCKS_DIFFER where, in any round that timed the row on both sides, both read its SM
    clock and the two differ by more than CLOCK_CHANGE of the higher: that round's ratio, which
    the row's interval takes, compares two speeds of the device. Compared round by round, as
    the ratios are paired: a side at another clock in a minority of rounds moves the interval
    as much as one at another clock throughout."""
    for ra, rb in zip(a, b, strict=False):  # unequal rounds: summarize_ab says so
        ca = round_clock(ra[key]) if key in ra else None
        cb = round_clock(rb[key]) if key in rb else None
        if ca and cb and max(ca, cb) - min(ca, cb) > CLOCK_CHANGE * max(ca, cb):
            return [CLOCKS_DIFFER]
    return []


def clock_notes(a: Sequence[dict[Key, Row]], b: Sequence[dict[Key, Row]]) -> list[str]:
    """What the clock check could not compare, said rather than passed over: a side whose
    rows carry CLOCKS_UNREAD_MARKER (its backend reads clocks, and its reader read none for
    them), and rounds of a row that both sides timed where one side alone read its SM clock.
    [] where nothing was left unchecked, or the backend reads no clocks at all."""
    unread = [side for side, rounds in (("A", a), ("B", b))
              if any(CLOCKS_UNREAD_MARKER in row.markers for r in rounds for row in r.values())]
    alone = set()
    for ra, rb in zip(a, b, strict=False):
        for key in ra.keys() & rb.keys():
            ca, cb = round_clock(ra[key]), round_clock(rb[key])
            if bool(ca) != bool(cb):
                alone.add("A" if ca else "B")
    notes = [f"side {side}'s clock reader read no SM clock for some rows "
             f"({CLOCKS_UNREAD_MARKER}; where it did not open, its runs' logs say why), so "
             f"they were not checked for {CLOCKS_THROTTLED_MARKER}" for side in unread]
    if alone:
        notes.append(f"SM clocks were read on side {' or '.join(sorted(alone))} alone in some "
                     "rounds of some rows, so those rounds' sides were not compared by clock "
                     f"({CLOCKS_DIFFER})")
    return notes


def work_flags(key: Key, a: Sequence[dict[Key, Row]], b: Sequence[dict[Key, Row]]
                ) -> list[str]:
    """NO_DEVICE_WORK where every latency of the row, on both sides, is under DEVICE_WORK_MS:
    its calls ran no kernel (a view operator), so its ratio is the timer's own jitter. A row
    with work on one side only is a difference and keeps its verdict."""
    times = [r[key].latency_ms for side in (a, b) for r in side if key in r]
    if not times or any(t is None or t >= DEVICE_WORK_MS for t in times):
        return []
    return [NO_DEVICE_WORK]


def compare(a: Sequence[Source], b: Sequence[Source], *, allow_mixed: bool = False,
            noise_floor_pct: float = stats.MIN_NOISE_FLOOR_PCT,
            floor_at: Callable[[float], float] | None = None,
            round_ids: Sequence[int] | None = None, op: str | None = None) -> AbReport:
    """An A/B of two sides, each a list of rounds (one Source per round; `--ab` gives one).

    Each row is judged against `floor_at(its A ms)` where given, else `noise_floor_pct`.
    `round_ids` numbers the rounds as the campaign did (default 0, 1, ...), so that rows of
    several comparisons share a round's offset in one geometric mean. `op` names every row,
    unpaired row and operator mean where given: a campaign's operator, whatever FlagGems' record
    calls its rows (it names scatter_reduce_two_inplace_sum's scatter_reduce_), so that the
    operator's verdict, its stopping rule, a gate and a bisection find them by that name.
    """
    notes = caliber_notes(a, b, allow_mixed=allow_mixed) + tuning_notes(a, b)
    notes += [n for s in (*a, *b) for n in s.notes]
    ka, kb = [keyed(s.rows) for s in a], [keyed(s.rows) for s in b]
    notes += clock_notes(ka, kb)
    flags = {k: tuple(_flags(k, ka, "A") + _flags(k, kb, "B") + clock_flags(k, ka, kb)
                     + work_flags(k, ka, kb))
             for side in (ka, kb) for r in side for k in r}
    result = stats.summarize_ab(
        [_latencies(rows) for rows in ka], [_latencies(rows) for rows in kb],
        noise_floor_pct=noise_floor_pct, flagged={k for k, f in flags.items() if f},
        group=lambda key: op or key[0], floor_at=floor_at,
        unmeasured={k for k, f in flags.items() if not in_geomean(f)}, round_ids=round_ids)
    paired = [AbRow(op or k[0], *k[1:], stats=s, flags=flags[k]) for k, s in result.rows]
    done = {key for key, _ in result.rows}
    unpaired = [Unpaired(op or key[0], *key[1:], reason=_why_unpaired(key, ka, kb))
                for key in flags if key not in done]
    gm = result.geomean
    low, high = (None, None) if gm is None else (gm.ci_low_pct, gm.ci_high_pct)
    return AbReport(
        a_label=" + ".join(s.label for s in a), b_label=" + ".join(s.label for s in b),
        rows=tuple(paired), unpaired=tuple(unpaired),
        geomean_speedup_pct=None if gm is None else gm.speedup_pct,
        noise_floor_pct=result.noise_floor_pct,
        direct_rows=sum(1 for r in paired if any(DIRECT_MARKER in f for f in r.flags)),
        notes=tuple(notes), method=result.method, geomean_ci_low_pct=low,
        geomean_ci_high_pct=high, op_geomeans=tuple((str(g), m) for g, m in result.groups))
