"""`harness history`: the subcommand's parser and its verbs (the CLI only registers it)."""

from __future__ import annotations

import argparse
import math
import re
import shlex
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import EXIT_OK, UsageError
from harness.history import changes
from harness.settings import options, usage, variables

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from harness.history import importer, queries, render, schema, site, store

VERBS = ("list", "show", "trend", "compare", "changes", "import", "upgrade")
KINDS = ("run", "batch", "campaign")
NO_EXTRA = ("the history store needs SQLAlchemy and ruptures: pip install 'harness[history]' "
            "(PostgreSQL also 'harness[postgres]') or pip install -r requirements/cpu.txt")
WriteLine = Callable[[str], None]


def _store_modules() -> None:
    """Import the store's modules (SQLAlchemy's among them) where a verb first needs them:
    they are a third of the harness's import, and every process of a campaign's units parses
    this command's arguments; UsageError naming the extra where it is not installed."""
    global importer, queries, render, schema, site, store  # noqa: PLW0603 - bound once
    try:
        from harness.history import importer, queries, render, schema, site, store
    except ImportError as exc:  # pragma: no cover - exercised where the extra is absent
        raise UsageError(f"{NO_EXTRA} ({exc})") from exc


MAX_LIMIT = 1_000_000  # records a list shows at most: past SQLite's integer, a traceback


def _limit(text: str) -> int:
    """--limit: a whole number from 1 to MAX_LIMIT (-1 listed everything, a huge one was an
    OverflowError)."""
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_LIMIT):
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted; expected a whole number "
                                         f"from 1 to {MAX_LIMIT}")
    return int(text)


def add_parser(sub: argparse._SubParsersAction, parser_class: type) -> None:
    """Register `history` and its verbs on the CLI's subparsers."""
    p = sub.add_parser("history", help="the store of every run and campaign: "
                       "list|show|trend|compare|changes|import|upgrade",
                       epilog=usage.epilog("history"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="history_command", required=True, parser_class=parser_class)
    v = verbs.add_parser("list", help="runs, batches and campaigns, newest first")
    v.add_argument("--kind", choices=KINDS, default=None, dest="kind")
    v.add_argument("--limit", type=_limit, default=50, dest="limit",
                   help=f"at most this many records, 1 to {MAX_LIMIT} (default 50)")
    v = verbs.add_parser("show", help="one record: identity, stacks, units")
    v.add_argument("ident", metavar="ID", help="an id of `history list`, or an imported folder")
    v = verbs.add_parser("trend", help="a row's latency night by night (and --png)")
    v.add_argument("op", metavar="OP")
    v.add_argument("dtype", metavar="DTYPE", nargs="?", default=None)
    v.add_argument("shape", metavar="SHAPE", nargs="?", default=None)
    v.add_argument("--png", default=None, dest="png", metavar="PATH")
    _by(v)
    v = verbs.add_parser("compare", help="two records' shared rows: change and noise")
    v.add_argument("first", metavar="ID")
    v.add_argument("second", metavar="ID")
    v.add_argument("--side", choices=("A", "B"), default=None, dest="side",
                   help="a campaign's side to compare (default A)")
    v.add_argument("--allow-mixed", action="store_true", dest="allow_mixed",
                   help="compare records of different backends, devices or timers anyway")
    v = verbs.add_parser("changes", help="steps in each row's series, with the stack that "
                         "brought them")
    v.add_argument("--since", type=since, default=None, dest="since", metavar="UTC",
                   help="only nights from then on, e.g. 2026-11-01")
    v.add_argument("--op", default=None, dest="op", metavar="OP")
    v.add_argument("--floor", type=floor_pct, default=None, dest="floor", metavar="PCT",
                   help=f"smallest step reported, in %% (default {changes.FLOOR_PCT})")
    _by(v)
    v = verbs.add_parser("import", help="index run, batch or campaign folders (idempotent)")
    v.add_argument("dirs", metavar="DIR", nargs="+")
    verbs.add_parser("upgrade", help="bring a store of an older schema up to this harness's, "
                     "in place, in one transaction")
    for verb in verbs.choices.values():
        verb.add_argument("--format", choices=("md", "csv", "json"), default="md",
                          dest="format")
        for name in ("HISTORY", "OUT"):
            options.add_flag(verb, variables.named(name))
    p.set_defaults(func=run)


def floor_pct(text: str) -> float:
    """--floor: a finite size in % of at least 0; ArgumentTypeError naming the value otherwise
    (a negative or NaN floor let every candidate step through)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted; expected a step size in "
                                         "%, a number of at least 0")
    return value


def since(text: str) -> str:
    """--since as the store's times compare: a UTC date (2026-11-01) or time (2026-11-01T06:00,
    an offset taken to UTC), written as they are written, so that text order is time order;
    ArgumentTypeError naming the value otherwise (a month 13, "2026-11-1", which sorted after
    every night of November the 10th to the 19th)."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        when = None
    if when is None or not re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ].*)?", text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not accepted; expected a UTC date or "
                                         "time such as 2026-11-01 or 2026-11-01T06:00")
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc).replace(tzinfo=None)
    return when.strftime("%Y-%m-%d" if len(text.strip()) == 10 else "%Y-%m-%dT%H:%M:%S")


def add_publish(sub: argparse._SubParsersAction) -> None:
    """Register `publish`: the static site over the store."""
    p = sub.add_parser("publish", help="a static site over the history store: records over "
                       "time, each operator's trend per row, the change points found",
                       epilog=usage.epilog("publish"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, dest="site_out", metavar="DIR",
                   help="the site's folder (default: OUT/site)")
    p.add_argument("--since", type=since, default=None, dest="since", metavar="UTC",
                   help="trends and change points of nights from then on only")
    options.add_flag(p, variables.named("HISTORY"))
    p.set_defaults(func=publish)


def publish(args: argparse.Namespace, write_line: WriteLine = print) -> int:
    """Write the site and say where its index is."""
    _store_modules()
    where = _where(args, create=False)
    out, _ = variables.named("OUT").lookup(vars(args), variables.environ())
    engine = store.open_store(where)
    try:
        index = site.publish(engine, Path(args.site_out or Path(out or "runs") / "site"),
                             args.since)
    finally:
        engine.dispose()
    write_line(str(index))
    return EXIT_OK


def _by(verb: argparse.ArgumentParser) -> None:
    verb.add_argument("--by", choices=("time", "commit"), default="time", dest="by",
                      help="order each row's nights by time (default) or by FlagGems commit, "
                      "each commit's nights together in the order commits were first measured")


def _where(args: argparse.Namespace, create: bool) -> store.Where:
    environ = variables.environ()
    value, _ = variables.named("HISTORY").lookup(vars(args), environ)
    out, _ = variables.named("OUT").lookup(vars(args), environ)
    where = store.resolve(value, Path(out or "runs"))
    if where is None:
        raise UsageError("HISTORY='off': there is no store to read or write; give HISTORY=PATH "
                         "or postgresql://...")
    if not create and where.sqlite and not Path(where.url[len(store.SQLITE_PREFIX):]).exists():
        raise UsageError(f"HISTORY={where.label!r} does not exist yet: `harness history import "
                         "DIR...` or a run with HISTORY set creates it")
    return where


def run(args: argparse.Namespace, write_line: WriteLine = print) -> int:
    """Run one verb of `harness history`."""
    _store_modules()
    where = _where(args, create=args.history_command == "import")
    if args.history_command == "upgrade":
        return _upgrade(where, write_line)
    if args.history_command == "import":  # read first: a corrupt folder creates no store
        args.folders = importer.read_paths(Path(d) for d in args.dirs)
    engine = store.open_store(where)
    try:
        return VERB_FUNCS[args.history_command](engine, args, write_line)
    finally:
        engine.dispose()


def _upgrade(where: store.Where, write_line: WriteLine) -> int:
    engine, found = store.upgrade_store(where)
    engine.dispose()
    now = schema.SCHEMA_VERSION
    write_line(f"history: {where.label} upgraded from schema version {found} to {now}"
               if found is not None and found < now
               else f"history: {where.label} is at schema version {now}: nothing to upgrade")
    return EXIT_OK


def _list(engine: Engine, args: argparse.Namespace, write_line: WriteLine) -> int:
    rows = [{"id": r.id, "when": r.started_utc, "kind": r.kind, "state": r.state,
             "backend": r.backend, "device": r.device, "axis": _axis(r), "ops": r.ops,
             "verdicts": queries.verdict_counts(r), "stack": r.stack_a, "path": r.path}
            for r in queries.list_records(engine, args.kind, args.limit)]
    render.table(rows, args.format, write_line, "history")
    return EXIT_OK


def _axis(r: queries.Record) -> str | None:
    return f"{r.axis} {r.axis_a}->{r.axis_b}" if r.axis else None


def _show(engine: Engine, args: argparse.Namespace, write_line: WriteLine) -> int:
    detail = queries.show(engine, args.ident)
    if args.format == "json":
        render.table([{**asdict(detail.record), "rows": detail.rows,
                       "units": [asdict(u) for u in detail.units]}], "json", write_line)
        return EXIT_OK
    facts = [{"field": k, "value": v} for k, v in asdict(detail.record).items()]
    facts.append({"field": "rows", "value": detail.rows})
    render.table(facts, args.format, write_line, f"record {detail.record.id}")
    if args.format == "md" and detail.units:
        write_line("")
        render.table([asdict(u) for u in detail.units], "md", write_line, "units")
    return EXIT_OK


def _trend(engine: Engine, args: argparse.Namespace, write_line: WriteLine) -> int:
    found = queries.ordered(queries.series(engine, args.op, args.dtype, args.shape), args.by)
    if not found:
        raise UsageError(f"OP={args.op!r} has no rows in the store"
                         + (f" of dtype {args.dtype!r}" if args.dtype else "")
                         + (f" and shape {args.shape!r}" if args.shape else ""))
    rows = [{"op": k.op, "dtype": k.dtype, "shape": k.shape, "side": k.side or "-",
             "backend": k.backend, "when": p.when, "record": p.record_id,
             "timer": k.timer, "latency_ms": p.latency_ms, "rounds": p.attrs["rounds"],
             "flags": p.attrs["flags"] or "-",
             "flaggems_commit": p.attrs["flaggems_commit"] or "-",
             "stack": p.attrs["stack"]} for k, p in queries.points_of(found)]
    render.table(rows, args.format, write_line, f"trend of {args.op}")
    if args.png:
        labels = queries.series_labels(list(found))
        lines = {labels[k]: [(p.when, p.latency_ms) for p in pts] for k, pts in found.items()}
        written = render.trend_png(lines, Path(args.png), f"{args.op}: latency by {args.by}",
                                   "night, oldest first" if args.by == "time"
                                   else "night, by FlagGems commit first measured")
        write_line(f"trend png: {written}" if written else "trend png not written: "
                   "matplotlib is not installed")
    return EXIT_OK


def _compare(engine: Engine, args: argparse.Namespace, write_line: WriteLine) -> int:
    found = queries.compare(engine, args.first, args.second, args.side, args.allow_mixed)
    a, b = found.first, found.second
    rows = [{"op": c.op, "dtype": c.dtype, "shape": c.shape, "first_ms": c.first_ms,
             "second_ms": c.second_ms, "change_pct": c.change_pct, "p_value": c.p_value,
             "rounds": f"{c.rounds[0]}/{c.rounds[1]}",
             "beyond_noise": "flagged" if c.flags else "yes" if c.beyond_noise else "no",
             "flags": ",".join(c.flags) or "-"} for c in found.rows]
    if args.format == "md":
        moved = sum(1 for c in found.rows if c.beyond_noise)
        flagged = sum(1 for c in found.rows if c.flags)
        write_line(f"{moved} of {len(found.rows)} shared rows changed beyond their noise "
                   f"(Welch's t over rounds, p < {queries.ALPHA}, at least "
                   f"{queries.NOISE_FLOOR_PCT}%): record {b.id} against {a.id}"
                   + (f"; {flagged} flagged, never called (see flags)" if flagged else ""))
        for note in found.notes:
            write_line(note)
        write_line("")
    render.table(rows, args.format, write_line, "compare")
    return EXIT_OK


def _changes(engine: Engine, args: argparse.Namespace, write_line: WriteLine) -> int:
    opts = changes.Options() if args.floor is None else changes.Options(floor_pct=args.floor)
    rows = []
    found = queries.ordered(queries.series(engine, args.op, since=args.since), args.by)
    for key, points in found.items():
        for c in changes.find_changes(points, opts):
            before = c.before
            rows.append({"op": key.op, "dtype": key.dtype, "shape": key.shape,
                         "side": key.side or "-", "backend": key.backend,
                         "step_pct": c.step_pct, "low_pct": c.low_pct, "high_pct": c.high_pct,
                         "p_value": c.p_value, "first_after": c.first.when,
                         "record": c.first.record_id, "stack": c.first.attrs["stack"],
                         "stack_before": before.attrs["stack"],
                         "bisect": bisect_line(key, before, c.first)})
    if not rows and args.format == "md" and (found or args.since):  # nights, none a step
        write_line(f"changes: no step in {len(found)} series" + (
            f" since {args.since}" if args.since else ""))
        return EXIT_OK
    render.table(rows, args.format, write_line, "changes")
    return EXIT_OK


def bisect_line(key: queries.SeriesKey, before: changes.Point, after: changes.Point) -> str:
    """The `harness bisect` command that would pin a step whose two sides ran different
    FlagGems commits (GOOD the one before it, BAD the first after it); "-" otherwise."""
    good, bad = before.attrs.get("flaggems_commit"), after.attrs.get("flaggems_commit")
    if not good or not bad or good == bad:
        return "-"
    words = ["harness", "bisect", f"--good={good}", f"--bad={bad}", f"--op={key.op}",
             f"--backend={key.backend}", f"--dtypes={key.dtype.removeprefix('torch.')}",
             f"--shape={key.shape}"]
    return " ".join(shlex.quote(w) for w in words)


def _import(engine: Engine, args: argparse.Namespace, write_line: WriteLine) -> int:
    done = [importer.write_read(engine, folder) for folder in args.folders]
    if args.format == "md":
        for item in done:
            write_line(item.line())
    else:
        render.table([asdict(d) for d in done], args.format, write_line)
    return EXIT_OK


VERB_FUNCS = {"list": _list, "show": _show, "trend": _trend, "compare": _compare,
              "changes": _changes, "import": _import}
