"""ops_status.csv, a batch's line per operator: its one typed row, writer and reader."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from harness.contract.states import NOT_RUN
from harness.errors import UsageError

OPS_STATUS_CSV = "ops_status.csv"
# An executor's facts of a task's end (a cluster's task and its state) come between run and
# reason, one column each.
COLUMNS = ("op", "node", "status", "rc", "rows", "backend", "device", "timer", "wall_s", "run",
           "reason")  # why an operator is not ok: pytest's skip reason, its log's last line


@dataclass(frozen=True)
class OpStatus:
    """One line of ops_status.csv; `facts`: its executor's, by column."""

    op: str
    status: str = NOT_RUN
    node: str = ""
    rc: int | None = None
    rows: int | None = None
    backend: str = ""
    device: str = ""
    timer: str = ""
    wall_s: float | None = None
    run: str = ""
    reason: str = ""
    facts: Mapping[str, str] = field(default_factory=dict)

    def row(self) -> dict[str, str]:
        return {**{c: "" if getattr(self, c) is None else str(getattr(self, c))
                   for c in COLUMNS}, **self.facts}


def columns(facts: Sequence[str] = ()) -> tuple[str, ...]:
    """The header of ops_status.csv with the executors' `facts` columns."""
    return (*COLUMNS[:-1], *facts, COLUMNS[-1])


def render_csv(statuses: Iterable[OpStatus], facts: Sequence[str] = ()) -> str:
    """The text of ops_status.csv: the header (columns), then one line per operator; a fact
    of a column not in `facts` is left out."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns(facts), lineterminator="\n",
                            extrasaction="ignore")
    writer.writeheader()
    writer.writerows(s.row() for s in statuses)
    return buf.getvalue()


def read_ops_status(path: Path, required: Sequence[str] = ("op",)) -> list[OpStatus]:
    """The lines of an ops_status.csv. A column it lacks reads as empty (an older batch wrote
    fewer), except those `required`; a file that is not CSV text, or a number that is none, is
    a UsageError naming the file."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            lines = list(reader)
            names = reader.fieldnames or ()
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"{str(path)!r} cannot be read as CSV text "
                         f"({exc.__class__.__name__})") from None
    for column in required:
        if column not in names:
            raise UsageError(f"{str(path)!r} has no {column!r} column")
    return [_status(path, {k: (v or "").strip() for k, v in line.items()
                           if isinstance(k, str)}) for line in lines]


def _status(path: Path, cells: dict[str, str]) -> OpStatus:
    """One line's status; a column outside COLUMNS is an executor's fact (where it has one)."""
    op = cells.get("op", "")
    texts = {f.name: cells.get(f.name, "") for f in fields(OpStatus)
             if f.name not in ("rc", "rows", "wall_s", "facts")}
    facts = {k: v for k, v in cells.items() if k not in COLUMNS and v}
    return OpStatus(**texts, facts=facts, rc=_integer(path, op, "rc", cells.get("rc", "")),
                    rows=_integer(path, op, "rows", cells.get("rows", "")),
                    wall_s=_seconds(path, op, cells.get("wall_s", "")))


def _integer(path: Path, op: str, key: str, text: str) -> int | None:
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{str(path)!r} gives {op!r} {key}={text!r}; expected an "
                         "integer") from None


def _seconds(path: Path, op: str, text: str) -> float | None:
    if not text:
        return None
    try:
        wall = float(text)
    except ValueError:
        wall = math.nan
    if not (math.isfinite(wall) and wall >= 0):
        raise UsageError(f"{str(path)!r} gives {op!r} wall_s={text!r}; expected seconds, a "
                         "number not below 0")
    return wall
