"""Result rows from FlagGems' benchmark output (record log or console table); results.csv/.jsonl."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from harness import fsutil
from harness.contract.shape_text import NOT_AVAILABLE, canonical_shape, canonical_shape_text
from harness.errors import UsageError
from harness.fsutil import atomic_write_text

RESULTS_CSV = "results.csv"
RESULTS_JSONL = "results.jsonl"
SUCCESS = "SUCCESS"
FAILED = "FAILED"
STATUSES = (SUCCESS, FAILED)


@dataclass(frozen=True)
class Row:
    """One measured (op, dtype, shape) of one run; latencies in milliseconds."""

    op: str
    dtype: str  # FlagGems' spelling, e.g. "torch.float16"
    shape: str  # canonical_shape() text, identical whichever source it came from
    status: str  # "SUCCESS" or "FAILED"
    latency_base_ms: float | None
    latency_ms: float | None
    speedup: float | None
    tflops: float | None = None
    gbps_base: float | None = None
    gbps: float | None = None
    mode: str | None = None  # FlagGems' --mode (kernel, cudagraph, ...)
    level: str | None = None
    error: str | None = None
    timer: str | None = None  # the harness's timer for this row ("graph", "direct")
    markers: tuple[str, ...] = ()
    samples: tuple[float, ...] = ()  # every timing of latency_ms (REPEAT > 1: several)
    samples_base: tuple[float, ...] = ()  # likewise of latency_base_ms
    # the device's clocks read before and after the row's timing: ("sm_mhz_before", 1980), ...
    # (results.jsonl only: results.csv keeps its columns)
    clocks: tuple[tuple[str, int | None], ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status={self.status!r}; expected one of: {', '.join(STATUSES)}")
        # Lists from JSON or callers would make a frozen row unhashable: store tuples.
        object.__setattr__(self, "markers", tuple(self.markers))
        object.__setattr__(self, "samples", tuple(float(s) for s in self.samples))
        object.__setattr__(self, "samples_base", tuple(float(s) for s in self.samples_base))
        pairs = self.clocks.items() if isinstance(self.clocks, Mapping) else self.clocks
        object.__setattr__(self, "clocks", tuple((str(k), clock_value(str(k), v))
                                                 for k, v in pairs))

    def clock(self, name: str) -> int | None:
        """One clock reading by its flat name (sm_mhz_before, ...); None where not read."""
        return dict(self.clocks).get(name)

    def key(self) -> tuple[str, str, str]:
        """The pairing key across runs and sources: (op, dtype, shape)."""
        return (self.op, self.dtype, self.shape)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: one results.jsonl line."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["markers"] = list(self.markers)
        data["samples"] = list(self.samples)
        data["samples_base"] = list(self.samples_base)
        data["clocks"] = dict(self.clocks)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Row:
        """Inverse of to_dict; keys this version does not know are ignored (newer writers)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# ---------------------------------------------------------------- parsers


CLOCK_LIMIT = 1 << 64  # a reading above this is no device's: the widest, a 64-bit reason mask


def clock_value(name: str, value: Any) -> int | None:
    """One clock reading as Row.clocks keeps it: a whole number from 0 below CLOCK_LIMIT, or
    None (not read). ValueError for anything else (text, a fraction, true, inf, 10**400): a
    reading that no reader writes, which would be taken as some other number (or overflow)
    where the sides' clocks are compared."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < CLOCK_LIMIT:
        raise ValueError(f"clock {name}={value!r}; expected a whole number from 0 to 2**64 - 1, "
                         "or null")
    return value


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _is_result(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("op_name"), str)
        and isinstance(obj.get("result"), list)
    )


def _record_row(result: Mapping[str, Any], metric: Mapping[str, Any]) -> Row:
    error = metric.get("error_msg")
    return Row(
        op=result["op_name"],
        dtype=str(result.get("dtype")),
        shape=canonical_shape(metric.get("shape_detail")),
        status=SUCCESS if error is None else FAILED,
        latency_base_ms=_number(metric.get("latency_base")),
        latency_ms=_number(metric.get("latency")),
        speedup=_number(metric.get("speedup")),
        tflops=_number(metric.get("tflops")),
        gbps_base=_number(metric.get("gbps_base")),
        gbps=_number(metric.get("gbps")),
        mode=result.get("mode"),
        level=result.get("level"),
        error=None if error is None else str(error),
    )


# `[INFO] {...}`: the record logger's format; the prefix is optional for logs already stripped.
_RECORD_LINE = re.compile(r"^(?:\[[A-Z]+\]\s*)?(?P<json>\{.*\})\s*$")


def parse_record_log(text: str) -> list[Row]:
    """Rows from a FlagGems `--record log` file; every line that is not a result object is skipped.

    Skipped on purpose: "Benchmark record logger enabled", the multi-line attribute dump, Python
    dict reprs (query mode) and a last line cut short by a killed run.
    """
    rows: list[Row] = []
    for line in text.splitlines():
        match = _RECORD_LINE.match(line.strip())
        if not match:
            continue
        try:
            obj = json.loads(match["json"])
        except ValueError:
            continue
        if _is_result(obj):
            rows.extend(_record_row(obj, m) for m in obj["result"] if isinstance(m, dict))
    return rows


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# "Operator: mm  Performance Test (dtype=torch.float16, mode=kernel,level=core)": no space
# before "level=" in FlagGems' format; tolerate one anyway.
_HEADER = re.compile(
    r"Operator:\s*(?P<op>\S+)\s+Performance Test\s*"
    r"\(dtype=(?P<dtype>[^,()]+),\s*mode=(?P<mode>[^,()]+),\s*level=(?P<level>[^,()]+)\)"
)
_CELL = r"(?:N/A|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[-+]?inf|nan)"
_ROW = re.compile(
    rf"(?P<status>{SUCCESS}|{FAILED})\s+(?P<cells>(?:{_CELL}\s+){{3,6}})(?P<detail>\S.*)"
)
# FlagGems writes the TFLOPS cell only where that row's tflops is non-zero and the two GBPS cells
# only where its gbps is set, row by row: the cell count, not the column header, says which.
_CELL_COLUMNS = {
    3: ("latency_base_ms", "latency_ms", "speedup"),
    4: ("latency_base_ms", "latency_ms", "speedup", "tflops"),
    5: ("latency_base_ms", "latency_ms", "speedup", "gbps_base", "gbps"),
    6: ("latency_base_ms", "latency_ms", "speedup", "tflops", "gbps_base", "gbps"),
}


def _console_row(header: re.Match[str], row: re.Match[str]) -> Row:
    cells = row["cells"].split()
    values = {
        name: None if cell == NOT_AVAILABLE else float(cell)
        for name, cell in zip(_CELL_COLUMNS[len(cells)], cells, strict=True)
    }
    return Row(
        op=header["op"],
        dtype=header["dtype"].strip(),
        shape=canonical_shape_text(row["detail"]),
        status=row["status"],
        mode=header["mode"].strip(),
        level=header["level"].strip(),
        latency_base_ms=values["latency_base_ms"],
        latency_ms=values["latency_ms"],
        speedup=values["speedup"],
        tflops=values.get("tflops"),
        gbps_base=values.get("gbps_base"),
        gbps=values.get("gbps"),
    )


def parse_console(text: str) -> list[Row]:
    """Rows from FlagGems' console tables in pytest output.

    A table runs from an "Operator: ... Performance Test" header to the next blank line (FlagGems
    ends every table with one). Lines inside it that are not rows (column names, rulers, interleaved
    stderr, harness markers) are skipped; rows outside any table (a log tail replayed after the
    pytest summary) are ignored, since without a header they cannot be attributed.
    """
    rows: list[Row] = []
    header: re.Match[str] | None = None
    for raw in _ANSI.sub("", text).splitlines():
        line = raw.strip()
        found = _HEADER.search(line)
        if found:
            header = found
        elif not line:
            header = None
        elif header is not None and (row := _ROW.match(line)):
            rows.append(_console_row(header, row))
    return rows


def parse_run_output(record_log: str | None, console: str) -> tuple[list[Row], str]:
    """Rows of one run and their source: "record_log" when it holds any result, else "console".

    The record log is the machine format and wins whenever it has rows, even if the console shows
    more or fewer; an empty or missing log (run killed before the first result) falls back.
    """
    rows = parse_record_log(record_log) if record_log else []
    if rows:
        return rows, "record_log"
    return parse_console(console), "console"


# ---------------------------------------------------------------- files

CSV_FIELDS: tuple[str, ...] = (
    "op",
    "dtype",
    "shape",
    "status",
    "latency_base_ms",
    "latency_ms",
    "speedup",
    "tflops",
    "gbps_base",
    "gbps",
    "timer",
    "mode",
    "level",
    "markers",  # ";"-joined
    "samples",  # ";"-joined
    "samples_base",  # ";"-joined
    "error",
)
_LIST_SEPARATOR = ";"
# Row fields only results.jsonl carries: results.csv keeps the header older files have.
JSONL_ONLY_FIELDS = ("clocks",)


def flat_clocks(doc: Mapping[str, Any] | None) -> tuple[tuple[str, int | None], ...]:
    """The timing plugin's {"before": {...}, "after": {...}} as Row.clocks' flat pairs."""
    if not isinstance(doc, Mapping):
        return ()
    return tuple((f"{name}_{when}", value) for when in ("before", "after")
                 for name, value in (doc.get(when) or {}).items())


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""

    if isinstance(value, tuple):
        return _LIST_SEPARATOR.join(repr(v) if isinstance(v, float) else str(v) for v in value)
    return repr(value) if isinstance(value, float) else str(value)


def _csv_text(rows: Sequence[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for row in rows:
        writer.writerow([_csv_cell(getattr(row, name)) for name in CSV_FIELDS])
    return buffer.getvalue()


def _jsonl_text(rows: Sequence[Row]) -> str:
    return "".join(json.dumps(row.to_dict()) + "\n" for row in rows)


def write_results(run_dir: Path, rows: Sequence[Row]) -> tuple[Path, Path]:
    """Write results.csv (for people) and results.jsonl (for the harness), each atomically."""
    run_dir = Path(run_dir)
    csv_path = atomic_write_text(run_dir / RESULTS_CSV, _csv_text(rows))
    jsonl_path = atomic_write_text(run_dir / RESULTS_JSONL, _jsonl_text(rows))
    return csv_path, jsonl_path


def read_results(run_dir: Path) -> list[Row]:
    """Rows from a run directory's results.jsonl; a missing or malformed file is a UsageError."""
    path = Path(run_dir) / RESULTS_JSONL
    try:
        found = fsutil.read_jsonl(path, UsageError, "a result row")
    except FileNotFoundError:
        raise UsageError(f"no {RESULTS_JSONL} in {str(run_dir)!r}") from None
    rows: list[Row] = []
    for number, value in found:
        try:
            rows.append(Row.from_dict(value))
        except (ValueError, TypeError, AttributeError) as exc:
            raise UsageError(f"{str(path)!r} line {number} is not a result row: {exc}") from None
    return rows


_FLOAT_FIELDS = ("latency_base_ms", "latency_ms", "speedup", "tflops", "gbps_base", "gbps")
_LIST_FIELDS = ("markers", "samples", "samples_base")


def csv_list(cell: str | None) -> tuple[str, ...]:
    """A list cell of results.csv (markers, samples) as its items; () for an empty cell."""
    return tuple(cell.split(_LIST_SEPARATOR)) if cell else ()


def is_results_csv(text: str) -> bool:
    """Whether `text` begins with the header write_results gives results.csv."""
    return text.split("\n", 1)[0].strip() == ",".join(CSV_FIELDS)


def parse_results_csv(text: str, label: str) -> list[Row]:
    """Rows of a results.csv (the inverse of its writer); a malformed line is a UsageError."""
    rows: list[Row] = []
    for number, record in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        try:
            # Row's keyword arguments, named by the header: Row checks them, not the type
            cells: dict[str, Any] = {k: (v if v != "" else None) for k, v in record.items()
                                     if k in CSV_FIELDS}
            for name in _FLOAT_FIELDS:
                cells[name] = _number(cells[name])
            for name in _LIST_FIELDS:
                cells[name] = csv_list(cells[name])
            rows.append(Row(**cells))
        except (ValueError, TypeError, KeyError) as exc:
            raise UsageError(f"{label!r} line {number} is not a result row: {exc}") from None
    return rows


def merge_timing(rows: Sequence[Row], timing: Sequence[Mapping[str, Any]],
                 default_timer: str) -> list[Row]:
    """Annotate parsed rows with the timing plugin's records (timer, markers, samples).

    Records pair with rows by (op, dtype, shape) and occurrence, since one run may measure the
    same key twice (mm's core shapes do). Partial records -- rows measured before a poisoned
    capture stopped the operator, which FlagGems never printed -- become rows of their own.
    Rows with no record keep `default_timer`.
    """
    queues: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    extra: list[Row] = []
    for record in timing:
        if record.get("partial"):
            latency_base, latency = record.get("latency_base_ms"), record.get("latency_ms")
            extra.append(Row(
                op=record["op"], dtype=record["dtype"], shape=record["shape"],
                status=record["status"], latency_base_ms=latency_base, latency_ms=latency,
                speedup=latency_base / latency if latency_base and latency else None,
                error=record.get("reason"), timer=record["timer"],
                markers=record["markers"], samples=record["samples"],
                samples_base=record["samples_base"], clocks=flat_clocks(record.get("clocks"))))
        else:
            queues.setdefault((record["op"], record["dtype"], record["shape"]), []).append(record)
    merged = []
    for row in rows:
        queue = queues.get(row.key())
        if not queue:
            merged.append(replace(row, timer=row.timer or default_timer))
            continue
        record = queue.pop(0)
        merged.append(replace(row, timer=record["timer"],
                              markers=tuple(dict.fromkeys((*row.markers, *record["markers"]))),
                              samples=record["samples"], samples_base=record["samples_base"],
                              clocks=flat_clocks(record.get("clocks"))))
    return merged + extra
