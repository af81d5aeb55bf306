"""How a setting's text becomes its value and back: each row of the variables table names one.

A kind parses the text a variable was given (or its default) into the typed value a Settings
field holds, refusing a bad one with a UsageError that names the variable as the user spelt
it; `spell` gives back the text its flag takes, so that a child run resolves the same value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness import backends
from harness.contract.warmup_share import parse_share, share_text
from harness.errors import UsageError
from harness.settings.paths import NAME_MAX

# An operator names directories (runs/<op>, ab/<axis>-<op>), so no separators and a length well
# within a file name's 255 bytes; FlagGems' longest operator names are under 40 characters.
OP_NAME_MAX = 100
OP_NAME = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9_.-]{{0,{OP_NAME_MAX - 1}}}")
OP_NAME_TEXT = (f"letters, digits, '_', '.', '-', not starting with '.' or '-', at most "
                f"{OP_NAME_MAX} characters")
MAX_BUDGET_MS = 60_000  # a minute's warmup or timed calls per measurement is a typo
MAX_REPEAT = 1000  # timing repeats per shape: REPEAT=99999999999999999999 ran until it was killed
DEFAULT_CAP = 16  # more compile threads than this gained nothing measurable on a 16-core host
MAX_WORKERS = 1024
# torch's dtype names (torch.<name> is a torch.dtype), read without importing torch; whether
# the benchmark measures one is checked in preflight, against what it declares.
TORCH_DTYPES = ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32",
                "int64", "float16", "bfloat16", "float32", "float64", "complex32", "complex64",
                "complex128", "half", "float", "double", "short", "int", "long", "cfloat",
                "cdouble", "chalf", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2")
# A device index, or a UUID as vendor tools print them: GPU-<hex>-..., 0x<hex>, bare hex.
DEVICE_ID = re.compile(r"[0-9]+|[A-Za-z]+(?:-[0-9A-Fa-f]+)+"
                       r"|(?:0x)?[0-9A-Fa-f]{8,}(?:-[0-9A-Fa-f]+)*")


@dataclass(frozen=True)
class Kind:
    """How one variable's text is read into its value (`parse`) and written back (`spell`).

    `parse(label, text)` gets the text given, or the variable's default (None where it has
    none), and `label`, the variable as the user spelt it (Var.label), for the error.
    `spell(value)` is the flag's text; None leaves the flag out (the value is unset).
    """

    parse: Callable[[str, str | None], object]
    spell: Callable[[object], str | None]


def default_workers(cores: int | None = None) -> int:
    """The host's usable cores, at most DEFAULT_CAP: COMPILE_WORKERS where none is given."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # no affinity call on this platform
            cores = os.cpu_count() or 1
    return max(1, min(DEFAULT_CAP, cores))


def positive_int(label: str, value: str, most: int | None = None, least: int = 1) -> int:
    """`value` as a whole number from `least` to `most` (no bound where None)."""
    if not re.fullmatch(r"[0-9]+", value.strip()) or not least <= int(value) <= (
            most or int(value)):
        expected = f"from {least} to {most}" if most else f"of at least {least}"
        raise UsageError(f"{label}={value!r} is not accepted; "
                         f"expected a whole number {expected}")
    return int(value)


def one_line(label: str, value: str) -> str:
    """`value`, refused where it holds a control character: values reach log lines, and a
    newline there would forge a marker line or split a CSV row."""
    bad = next((c for c in value if c < " " or c == "\x7f"), None)
    if bad is not None:
        raise UsageError(f"{label}={value!r} is not accepted: it holds the control character "
                         f"{bad!r}; expected a value without newlines, tabs or other control "
                         "characters")
    return value


def comma_items(label: str, value: str) -> list[str]:
    """The items of a comma-separated list, blanks around the commas and one trailing comma
    ignored; an empty item between two (`add,,tanh`: a name deleted, not meant) is refused."""
    items = [item.strip() for item in value.split(",")]
    if len(items) > 1 and not items[-1]:
        items.pop()
    empty = [n for n, item in enumerate(items, 1) if not item]
    if empty and len(empty) < len(items):
        raise UsageError(f"{label}={value!r}: item {empty[0]} is empty; expected names "
                         "separated by single commas")
    return [item for item in items if item]


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def _keep(label: str, value: str | None) -> str | None:
    return value


def _path(label: str, value: str | None) -> Path | None:
    return Path(value) if value else None


def _switch(label: str, value: str | None) -> bool:
    return value == "1"


def _spell_switch(value: object) -> str:
    return "1" if value else "0"


def _op(label: str, value: str | None) -> str | None:
    if value is not None and not OP_NAME.fullmatch(value):
        raise UsageError(f"{label}={value!r} is not accepted; expected an operator "
                         f"name: {OP_NAME_TEXT}")
    return value


def _repeat(label: str, value: str | None) -> int:
    return positive_int(label, value or "1", most=MAX_REPEAT)


def _count(label: str, value: str | None) -> int | None:
    return positive_int(label, value) if value else None


def _millis(label: str, value: str | None) -> int | None:
    return positive_int(label, value, most=MAX_BUDGET_MS) if value else None


def _workers(label: str, value: str | None) -> int:
    if value is None:
        return default_workers()
    if not re.fullmatch(r"[0-9]+", value.strip()) or int(value) > MAX_WORKERS:
        raise UsageError(f"{label}={value!r} is not accepted; expected a whole "
                         f"number from 0 (off) to {MAX_WORKERS}")
    return int(value)


def _dtypes(label: str, value: str | None) -> tuple[str, ...]:
    items = tuple(item.strip() for item in (value or "").split(",") if item.strip())
    unknown = [item for item in items if item not in TORCH_DTYPES]
    if unknown:
        raise UsageError(f"{label}={value!r} is not accepted: "
                         f"{', '.join(map(repr, unknown))} is not a torch dtype name; expected "
                         "comma-separated torch dtype names, e.g. float16,bfloat16,float32")
    return tuple(dict.fromkeys(items))


def _devices(label: str, value: str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    items = tuple(item.strip() for item in value.split(","))
    if not all(DEVICE_ID.fullmatch(item) for item in items):
        raise UsageError(f"{label}={value!r} is not accepted; expected "
                         "comma-separated device indices (whole numbers, e.g. 0,1) or the "
                         "UUIDs the vendor tool prints")
    return items


def _spell_list(value: object) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


def _out(label: str, value: str | None) -> Path:
    """OUT must be a directory or a path one can become: not a file, nor under one, and no
    component longer than a file name may be."""
    text = value or "runs"
    path = Path(text)
    long = next((part for part in path.parts if len(os.fsencode(part)) > NAME_MAX), None)
    if long is not None:
        raise UsageError(f"{label}={text!r} is not accepted: its component "
                         f"{long[:40]!r}... is {len(os.fsencode(long))} bytes; expected a path "
                         f"whose every component is at most {NAME_MAX} bytes")
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            if not candidate.is_dir():
                where = "is" if candidate == path else f"is under {str(candidate)!r}, which is"
                raise UsageError(f"{label}={text!r} is not accepted: it {where} "
                                 "not a directory; expected a directory for run outputs")
            break
    return path


def _share(label: str, value: str | None) -> tuple[int, int] | None:
    return parse_share(value or "")


def _spell_share(value: object) -> str | None:
    return share_text(value) if isinstance(value, tuple) else None


def _backend(label: str, value: str | None) -> backends.Backend | None:
    """The backend named (an alias too); None where none is given, to be detected."""
    return backends.get(value) if value else None


def _spell_backend(value: object) -> str | None:
    return value.name if isinstance(value, backends.Backend) else None


TEXT = Kind(_keep, _text_or_none)  # the text as given (closed sets checked by the table)
PATH = Kind(_path, _text_or_none)
SWITCH = Kind(_switch, _spell_switch)  # 0 or 1, read as a bool
OPERATOR = Kind(_op, _text_or_none)
REPEAT = Kind(_repeat, _text_or_none)
COUNT = Kind(_count, _text_or_none)  # a whole number of at least 1, or unset
MILLIS = Kind(_millis, _text_or_none)  # whole milliseconds, 1 to MAX_BUDGET_MS, or unset
WORKERS = Kind(_workers, _text_or_none)
DTYPES = Kind(_dtypes, _spell_list)
DEVICES = Kind(_devices, _spell_list)
OUT = Kind(_out, _text_or_none)
SHARE = Kind(_share, _spell_share)
BACKEND = Kind(_backend, _spell_backend)
