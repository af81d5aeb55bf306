"""What the user gave, read once from flags and the environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from harness.settings.variables import TABLE, named


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

