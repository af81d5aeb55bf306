"""The one command that reruns one operator's A/B, from a campaign's caliber."""

from __future__ import annotations

import shlex

from harness import axes, backends
from harness.errors import UsageError
from harness.report.abjson import Caliber
from harness.settings.variables import named

# Settings a rerun repeats where they differ from the default (flag, caliber key, default).
KEPT = (("--level", "level", "core"), ("--mode", "mode", "auto"),
        ("--shape-mode", "shape_mode", "upstream"), ("--shape-file", "shape_file", None),
        ("--dtypes", "dtypes", None), ("--flaggems-dir", "flaggems_dir", None))


def _axis_arg(caliber: Caliber) -> str:
    """AXIS as the command takes it: a kind or a known switch as written, any other variable
    as env:NAME."""
    axis = caliber.axis or "none"
    if axes.kind_of(axis).by_name or axis != caliber.variable:  # a kind: no variable to spell
        return axis
    try:
        known = backends.get(caliber.text("backend") or "cpu").axis_switches()
    except UsageError:  # a backend this harness no longer has: spell the variable out
        known = {}
    return axis if axis in known or axis.startswith("FLAGGEMS_") else f"env:{axis}"


def prefix(caliber: Caliber) -> str:
    """`harness ab ...` less its `--op`: the campaign's backend, axis, sides, rounds and the
    settings it ran under, quoted for a POSIX shell (ab.html appends each operator's)."""
    axis = _axis_arg(caliber)
    argv = ["harness", "ab", "--backend", caliber.text("backend") or "cpu", "--axis", axis]
    kind = axes.kind_of(caliber.axis or "none")
    if not kind.aa:  # the flags of the variables that hold its sides' values
        a_flag, b_flag = (named(v).flag for v in kind.side_variables)
        argv += [str(a_flag), caliber.text("a") or "0", str(b_flag), caliber.text("b") or "1"]
    argv += ["--rounds", str(caliber.rounds or 3)]
    for flag, key, default in KEPT:
        value = caliber.text(key)
        if value is not None and value != default:
            argv += [flag, value]
    return shlex.join(argv)


def command(caliber: Caliber, op: str) -> str:
    """The command that reruns `op`'s A/B alone: `prefix` and `--op OP`."""
    return f"{prefix(caliber)} {shlex.join(['--op', op])}"
