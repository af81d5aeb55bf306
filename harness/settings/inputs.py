"""What the user gave, read once from flags and the environment, and exports it never reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from harness.settings.variables import TABLE, named

# Read from the environment by make itself (`PYTHON ?=` in the Makefile), not by the harness.
MAKE_READS = frozenset({"PYTHON"})


@dataclass(frozen=True)
class Inputs:
    """What the user gave, read once: each variable's value and where it came from.

    A flag beats the environment; an empty value counts as not given. `environ` is the
    environment it was read from, copied, for a function that still takes one. Orchestration
    reads WALLS_FROM, OPS, EXECUTOR and the rest from here rather than from os.environ.
    """

    values: Mapping[str, tuple[str, str]]  # Make name -> (value, "flag" or "env")
    environ: Mapping[str, str]

    @classmethod
    def read(cls, flags: Mapping[str, object], environ: Mapping[str, str]) -> Inputs:
        """The variables of TABLE given in `flags` (by dest) or in `environ`."""
        found: dict[str, tuple[str, str]] = {}
        for var in TABLE:
            value, source = var.lookup(flags, environ)
            if source != "default" and value is not None:
                found[var.make] = (value, source)
        return cls(MappingProxyType(found), MappingProxyType(dict(environ)))

    def get(self, make: str) -> str | None:
        """The value given for variable `make`, or None."""
        given = self.values.get(named(make).make)
        return given[0] if given else None

    def source(self, make: str) -> str:
        """Where variable `make` was given: "flag" or "env"; "default" where it was not."""
        given = self.values.get(named(make).make)
        return given[1] if given else "default"


def unread_exports(environ: Mapping[str, str]) -> list[str]:
    """A warning line for each Make name set in `environ` that the harness never reads there:
    an exported BACKEND is read as ZL_BACKEND only, and was silently ignored while an
    exported OP (whose environment name is OP) was read."""
    lines = []
    for var in TABLE:
        if var.make == var.env or var.make in MAKE_READS or not environ.get(var.make):
            continue
        if var.env:
            reads = (f"its environment name is {var.env} (or give {var.make}=... on make's "
                     "command line)")
        elif var.flag:
            reads = f"it has no environment name: give {var.make}=... to make, or {var.flag}"
        else:
            reads = f"make takes it from its command line only ({var.make}=...)"
        lines.append(f"warning: {var.make}={environ[var.make]!r} is exported but not read: "
                     f"{reads}")
    return lines
