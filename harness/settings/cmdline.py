"""Settings back into the flags of a harness subcommand: the one spelling every child uses."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

from harness.settings import variables
from harness.settings.spec import VARS, Settings


def flag_args(values: Mapping[str, object]) -> list[str]:
    """`--flag value` for each variable (a Make name of the variables table) that has a value.

    Flags come in the order of `values`; None and "" are left out, as spec.resolve reads
    them as unset. A value that starts with "-" is joined to its flag (`--out=-x`), where
    argparse would otherwise take it for a flag of its own. A switch (DETACH) is its flag
    alone where its value is "1" or True.
    """
    argv: list[str] = []
    for make, value in values.items():
        if value is None or value == "":
            continue
        var = variables.named(make)
        if var.flag is None:
            raise ValueError(f"{make} has no flag; it is make's own")
        text = "1" if value is True else str(value)
        if var.switch:
            argv += [var.flag] if text == "1" else []
        else:
            argv += [f"{var.flag}={text}"] if text.startswith("-") else [var.flag, text]
    return argv


def setting_values(settings: Settings) -> dict[str, str | None]:
    """Each run setting of `settings` (a variable with a field), spelt as its flag takes it by
    its kind (None: unset), in the table's order."""
    return {var.make: var.kind.spell(getattr(settings, var.field))
            for var in VARS if var.field is not None}


def to_argv(settings: Settings, **overrides: Any) -> list[str]:
    """The flags from which spec.resolve gives back `settings`, with `overrides` (Settings
    field names, e.g. devices=("1",)) applied.

    `overrides` are Any because each field has its own type; dataclasses.replace refuses a
    name that is not a field.

    The settings come in spec.VARS order, then the overridden ones in the order given, so
    that a printed command line ends with what the caller changed. A setting left empty (no
    DTYPES, no DEVICES) has no flag: a child that must not take it from its environment
    needs that variable dropped there (see executors.procs.child_env).
    """
    values = setting_values(dataclasses.replace(settings, **overrides))
    changed = [name.upper() for name in overrides if name.upper() in values]
    ordered = {make: value for make, value in values.items() if make not in changed}
    return flag_args({**ordered, **{make: values[make] for make in changed}})


def harness_argv(subcommand: str, *args: str) -> list[str]:
    """`python -m harness.cli <subcommand> <args>` with this interpreter."""
    return [sys.executable, "-m", "harness.cli", subcommand, *args]
