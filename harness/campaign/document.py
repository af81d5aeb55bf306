"""campaign.json as types: the campaign, its operators and units; one loader, one writer."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from harness import executors
from harness.axes import Axis
from harness.contract.identity import FORMER_GRAPH_TIMER
from harness.contract.states import CAMPAIGN_STATES, PENDING, UNIT_STATES, CampaignState
from harness.errors import UsageError, shown
from harness.executors import ExecutorDoc
from harness.fsutil import atomic_write_text, json_by_line
from harness.report.sources import CAMPAIGN_JSON
from harness.settings.variables import MAX_ROUNDS
from harness.stats import MAX_NOISE_FLOOR_PCT

SCHEMA = "harness-campaign/2"
# /1: before the executor document, a cluster's settings and submissions under "slurm"
READ_SCHEMAS = ("harness-campaign/1", SCHEMA)
UNITS_LISTED = 8  # of a campaign's units, where a unit id is not one of them
T = TypeVar("T")


@dataclass
class UnitRecord:
    """One unit's state in campaign.json, updated as it runs; `facts`: those its executor's
    kind tells of its end (ExecutorKind.facts), kept beside the unit's own keys."""

    id: str
    op: str
    round: int
    status: str = PENDING
    reason: str | None = None
    rc: int | None = None
    wall_s: float | None = None
    device: str | None = None
    attempts: int = 0
    facts: dict[str, str] = field(default_factory=dict)
    started_utc: str | None = None  # when it last started (harness status: for how long)

    def to_json(self) -> dict[str, Any]:
        """The unit's keys as campaign.json has them: an executor's facts only where known."""
        doc = _shallow(self)  # not asdict, whose deep copies cost a suite's save 0.05 s
        doc.pop("facts")
        started = doc.pop("started_utc")
        doc.update({k: v for k, v in self.facts.items() if v})
        return {**doc, **({"started_utc": started} if started is not None else {})}


@dataclass
class OpRecord:
    """An operator of the campaign: its benchmark node, or why it has none; its rounds; why
    it is left out (EXCLUDE), where it is."""

    node: str | None
    reason: str | None
    rounds: int
    excluded: str | None = None
    # the round counts its verdicts were computed at, one a finish (a look); older: none
    looks: list[int] = field(default_factory=list)
    stopped: str | None = None  # ROUNDS=auto: why it runs no more rounds
    skipped: str | None = None  # why it never runs: it exists on one side only


def _shallow(record: Any) -> dict[str, Any]:
    """A dataclass's fields by name, their values as they are (the caller only reads them)."""
    names = _FIELD_NAMES.get(type(record))
    if names is None:
        names = _FIELD_NAMES[type(record)] = tuple(f.name for f in fields(record))
    return {name: getattr(record, name) for name in names}


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def utc_now() -> str:
    """This instant in UTC as campaign.json writes times: 2026-12-03T08:41:56+00:00."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class DriverRecord:
    """The process that drives the campaign now or did last: harness status asks whether it
    still runs."""

    pid: int
    host: str
    since: str

    @classmethod
    def this_process(cls) -> DriverRecord:
        return cls(os.getpid(), socket.gethostname(), utc_now())


@dataclass
class Campaign:
    """A campaign's plan and its state; campaign.json on disk."""

    dir: str
    created_utc: str
    axis: Axis
    caliber: dict[str, Any]
    argv: list[str]
    rounds: int
    walls: dict[str, float]
    walls_from: str | None
    ops: dict[str, OpRecord]
    units: list[UnitRecord] = field(default_factory=list)
    state: str = CampaignState.PLANNED
    noise_floor_pct: float = 1.0
    python: str = "python3"
    noise_from: str | None = None
    # the noise floor by A latency from NOISE_FROM's A/A (noisefloor.NoiseModel.to_json);
    # empty: every row gets noise_floor_pct
    noise_floor_bands: list[dict[str, Any]] = field(default_factory=list)
    executor: ExecutorDoc = field(default_factory=ExecutorDoc)
    side_artifacts: dict[str, list[str]] = field(default_factory=dict)
    interrupted: dict[str, Any] | None = None
    auto: dict[str, int] | None = None  # ROUNDS=auto: {"min": MIN_ROUNDS, "max": MAX_ROUNDS}
    driver: DriverRecord | None = None  # None: never driven, or by an older harness

    def unit(self, unit_id: str) -> UnitRecord:
        """The unit of that id; UsageError listing the campaign's units otherwise."""
        for entry in self.units:
            if entry.id == unit_id:
                return entry
        listed = [u.id for u in self.units[:UNITS_LISTED]]
        more = len(self.units) - len(listed)
        raise UsageError(f"unit {shown(unit_id)} is not in this campaign; it has: "
                         f"{', '.join(listed)}" + (f" and {more} more" if more > 0 else ""))

    def status_map(self) -> dict[str, str]:
        return {u.id: u.status for u in self.units}

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"schema": SCHEMA}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("interrupted", "auto", "driver") and value is None:
                continue
            if f.name == "noise_floor_bands" and not value:  # one floor: as before
                continue
            if f.name == "axis":
                value = {"name": value.name, "variable": value.variable, "a": value.a,
                         "b": value.b, **({"tune": value.given_tune} if value.given_tune else {})}
            elif f.name == "ops":
                value = {op: {k: v for k, v in _shallow(info).items()
                              if (v is not None or k not in ("excluded", "stopped", "skipped"))
                              and (v or k != "looks")}
                         for op, info in value.items()}
            elif f.name == "units":
                value = [u.to_json() for u in value]
            elif f.name == "executor":
                value = value.to_json()
            elif f.name == "driver":
                value = asdict(value)
            doc[f.name] = value
        return doc

    def save(self, directory: Path) -> Path:
        """Write campaign.json atomically: a killed writer leaves the previous one whole."""
        return atomic_write_text(Path(directory) / CAMPAIGN_JSON, json_by_line(self.to_json()))

    @classmethod
    def from_json(cls, doc: Any) -> Campaign:
        """The campaign of a campaign.json document; BadDocument naming the first bad field."""
        read = _Reader(doc, "")
        if read.value("schema", str) not in READ_SCHEMAS:
            raise BadDocument(f"schema is {shown(doc.get('schema'))}; expected {SCHEMA!r}")
        axis = read.child("axis")
        kept = read.optional("executor", dict)
        try:
            executor = executors.doc_before(doc) if kept is None else executors.doc_from_json(
                kept)
        except UsageError as exc:
            raise BadDocument(str(exc)) from None
        driver = None if read.optional("driver", dict) is None else read.child("driver")
        facts = executors.fact_names()
        ops = {op: _op(read.child("ops").child(op)) for op in read.value("ops", dict)}
        units = _units(read.items("units"), facts, ops)
        return cls(
            dir=read.value("dir", str), created_utc=read.value("created_utc", str),
            axis=Axis(axis.value("name", str), axis.optional("variable", str),
                      axis.value("a", str), axis.value("b", str), axis.optional("tune", str)),
            caliber=read.value("caliber", dict), argv=with_former_defaults(read.strings("argv")),
            rounds=read.within("rounds", 1, MAX_ROUNDS), walls=read.numbers("walls"),
            walls_from=read.optional("walls_from", str),
            ops=ops, units=units,
            state=read.choice("state", CAMPAIGN_STATES),
            noise_floor_pct=float(read.within("noise_floor_pct", 0, MAX_NOISE_FLOOR_PCT, 1.0)
                                  or 1.0),
            python=read.optional("python", str) or "python3",
            noise_from=read.optional("noise_from", str),
            noise_floor_bands=list(read.optional("noise_floor_bands", list) or []),
            executor=executor,
            side_artifacts={side: read.child("side_artifacts").strings(side)
                            for side in (read.optional("side_artifacts", dict) or {})},
            interrupted=read.optional("interrupted", dict),
            auto=read.optional("auto", dict),
            driver=None if driver is None else DriverRecord(
                driver.value("pid", int), driver.value("host", str), driver.value("since", str)))


class BadDocument(UsageError):
    """A campaign.json that this harness cannot read: the message names the field."""


class _Reader:
    """Typed reads of one JSON object, each failure naming the field by its path."""

    def __init__(self, doc: Any, path: str) -> None:
        if not isinstance(doc, dict):
            raise BadDocument(f"{path or 'the document'} is not a JSON object")
        self.doc, self.path = doc, path

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def value(self, key: str, kind: type[T] | tuple[type, ...]) -> T:
        if key not in self.doc or self.doc[key] is None:
            raise BadDocument(f"{self._name(key)} is missing")
        value = self.doc[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(
                k.__name__ for k in kind)
            raise BadDocument(f"{self._name(key)} is {shown(value)}; expected a {names}")
        return value  # type: ignore[return-value]  # checked just above

    def choice(self, key: str, accepted: tuple[str, ...], of: str = "") -> str:
        """A string that must be one of `accepted` (`of`: whose it is, for the message): a
        state a resume acts on, never guessed."""
        value = self.value(key, str)
        if value not in accepted:
            raise BadDocument(f"{self._name(key)}{of} is {shown(value)}; expected one of: "
                              f"{', '.join(accepted)}")
        return value

    def within(self, key: str, least: float, most: float, default: float | None = None
               ) -> Any:
        """A number from `least` to `most` (an int where both are): a hand-edited rounds=-3
        or a noise floor of 500% (which reads every slowdown same) is refused, not used; a
        missing one is `default` where there is one."""
        if default is not None and self.doc.get(key) is None:
            return default
        whole = isinstance(least, int) and isinstance(most, int)
        value = self.value(key, int if whole else (int, float))
        if not least <= value <= most:  # NaN is never within
            raise BadDocument(f"{self._name(key)} is {shown(value)}; expected a number from "
                              f"{least} to {most}")
        return value

    def optional(self, key: str, kind: type[T] | tuple[type, ...]) -> T | None:
        return None if self.doc.get(key) is None else self.value(key, kind)

    def child(self, key: str) -> _Reader:
        return _Reader(self.value(key, dict), self._name(key))

    def items(self, key: str) -> list[_Reader]:
        return [_Reader(item, f"{self._name(key)}[{i}]")
                for i, item in enumerate(self.value(key, list))]

    def strings(self, key: str) -> list[str]:
        found = self.value(key, list)
        for i, item in enumerate(found):
            if not isinstance(item, str):
                raise BadDocument(f"{self._name(key)}[{i}] is {shown(item)}; expected a str")
        return list(found)

    def numbers(self, key: str) -> dict[str, float]:
        found = self.value(key, dict)
        for name, item in found.items():
            if not isinstance(item, (int, float)) or isinstance(item, bool):
                raise BadDocument(f"{self._name(key)}.{name} is {shown(item)}; expected a number")
        return {name: float(item) for name, item in found.items()}


def _op(read: _Reader) -> OpRecord:
    return OpRecord(read.optional("node", str), read.optional("reason", str),
                    int(read.within("rounds", 0, MAX_ROUNDS)), read.optional("excluded", str),
                    [int(n) for n in read.optional("looks", list) or []],
                    read.optional("stopped", str), read.optional("skipped", str))


def _units(items: list[_Reader], fact_names: tuple[str, ...], ops: dict[str, OpRecord]
           ) -> list[UnitRecord]:
    """The units, each its operator's (one of `ops`) and round's, once: a unit of an operator
    the campaign lacks was a traceback on resume, a second one of an id rerun on every one."""
    units: dict[str, UnitRecord] = {}
    for i, read in enumerate(items):
        unit = _unit(read, fact_names)
        why = ("is not its op and round" if unit.id != f"{unit.op}/r{unit.round}" else
               f"is of operator {shown(unit.op)}, which ops lacks" if unit.op not in ops else
               "is there twice" if unit.id in units else None)
        if why:
            raise BadDocument(f"units[{i}] (unit {shown(unit.id)}) {why}")
        units[unit.id] = unit
    return list(units.values())


def _unit(read: _Reader, fact_names: tuple[str, ...]) -> UnitRecord:
    wall = read.optional("wall_s", (int, float))
    unit_id = read.value("id", str)
    return UnitRecord(
        id=unit_id, op=read.value("op", str), round=read.value("round", int),
        status=read.choice("status", UNIT_STATES, f" (unit {unit_id!r})"),
        reason=read.optional("reason", str),
        rc=read.optional("rc", int), wall_s=None if wall is None else float(wall),
        device=read.optional("device", str), attempts=read.value("attempts", int),
        facts={key: value for key in fact_names
               if (value := read.optional(key, str)) is not None},
        started_utc=read.optional("started_utc", str))


def load(directory: Path, label: str = "RESUME") -> Campaign:
    """The campaign of `directory`; UsageError, naming `label`'s value and what is wrong, when
    it holds none this harness reads."""
    directory = Path(directory)
    where = f"{label}={str(directory)!r}"
    if not directory.is_dir():
        raise UsageError(f"{where} is not a campaign directory")
    try:
        doc = json.loads((directory / CAMPAIGN_JSON).read_text(encoding="utf-8"))
        return Campaign.from_json(doc)
    except FileNotFoundError:
        raise UsageError(f"{where} is not a campaign directory (no {CAMPAIGN_JSON})"
                         + held_campaigns(directory, label)) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{where}: {CAMPAIGN_JSON} is not JSON ({exc})") from None
    except BadDocument as exc:
        raise UsageError(f"{where}: {CAMPAIGN_JSON}: {exc}") from None
    except RecursionError:  # json's decoder, and the reading of its values, recurse a level
        raise UsageError(f"{where}: {CAMPAIGN_JSON} nests too deep to be a campaign") from None


def held_campaigns(folder: Path, label: str = "RESUME", shown: int = 8) -> str:
    """What a folder of campaigns (OUT, runs/ab, or one command's runs/ab/<axis>-<op>) holds,
    newest first with each one's state, for the message that refuses the folder; "" when
    none."""
    found = sorted({p.parent for depth in (1, 2, 3)
                    for p in folder.glob("*/" * depth + CAMPAIGN_JSON)},
                   key=lambda p: (p.name, str(p)), reverse=True)
    if not found:
        return ""
    listed = [f"{p} ({_state_of(p)})" for p in found[:shown]]
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    return (f"; it holds {len(found)} campaign(s), newest first: {', '.join(listed)}{more}; "
            f"give one, e.g. {label}={str(found[0])!r}")


def newest_alike(parent: Path, campaign: Campaign) -> tuple[Path, Campaign] | None:
    """The newest campaign under `parent` of the same command as `campaign` (its axis, its
    settings and its operators); None where there is none."""
    for found in sorted((p.parent for p in parent.glob(f"*/{CAMPAIGN_JSON}")),
                        key=lambda p: p.name, reverse=True):
        try:
            earlier = load(found)
        except UsageError:  # not a campaign this harness reads: not the one to resume
            continue
        if (earlier.axis, earlier.argv, set(earlier.ops)) == (
                campaign.axis, campaign.argv, set(campaign.ops)):
            return found, earlier
    return None


def _state_of(directory: Path) -> str:
    try:
        state = json.loads((directory / CAMPAIGN_JSON).read_text(encoding="utf-8")).get("state")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return "unreadable"
    return state if state in CAMPAIGN_STATES else "unreadable"


# A flag a campaign's argv lacks resolves to today's default; where that default changed, the
# campaign's earlier rounds ran with the former one, which its later units must keep.
# A campaign made before GRAPH_TIMER existed was timed by upstream's algorithm, adaptive's
# forerunner as the default.
FORMER_DEFAULTS = (("--graph-timer", FORMER_GRAPH_TIMER),)


def with_former_defaults(argv: list[str]) -> list[str]:
    """`argv` with the flags of FORMER_DEFAULTS it lacks added at their former defaults."""
    given = {a.split("=", 1)[0] for a in argv}
    return [*argv, *(a for flag, value in FORMER_DEFAULTS if flag not in given
                     for a in (flag, value))]


def walls_by_op(campaign: Campaign) -> dict[str, float]:
    """Seconds per operator from the campaign's own finished units: their median wall."""
    per_op: dict[str, list[float]] = {}
    for unit in campaign.units:
        if unit.wall_s is not None:
            per_op.setdefault(unit.op, []).append(unit.wall_s)
    return {op: sorted(w)[len(w) // 2] for op, w in per_op.items()}
