"""The one command that reruns one operator's A/B, from a campaign's caliber."""

from __future__ import annotations

import shlex

from harness import backends
from harness.errors import UsageError
from harness.report.abjson import Caliber

KINDS = ("none", "python", "flaggems", "image")  # axis kinds: no variable to spell
# How each axis kind names its sides' values; a switch's are --a and --b.
SIDE_FLAGS = {"none": None, "python": ("--a-python", "--b-python"),
              "flaggems": ("--a-ref", "--b-ref"), "image": ("--a-image", "--b-image")}
# Settings a rerun repeats where they differ from the default (flag, caliber key, default).
KEPT = (("--level", "level", "core"), ("--mode", "mode", "auto"),
        ("--shape-mode", "shape_mode", "upstream"), ("--dtypes", "dtypes", None))


def _axis_arg(caliber: Caliber) -> str:
    """AXIS as the command takes it: a kind or a known switch as written, any other variable
    as env:NAME."""
    axis = caliber.axis or "none"
    if axis in KINDS or axis != caliber.variable:
        return axis
    try:
        known = backends.get(caliber.text("backend") or "cpu").axis_switches()
    except UsageError:  # a backend this harness no longer has: spell the variable out
        known = {}
    return axis if axis in known or axis.startswith("FLAGGEMS_") else f"env:{axis}"


def command(caliber: Caliber, op: str) -> str:
    """`harness ab ...` for `op` alone, with the campaign's backend, axis, sides, rounds and
    the settings it ran under, quoted for a POSIX shell."""
    axis = _axis_arg(caliber)
    argv = ["harness", "ab", "--backend", caliber.text("backend") or "cpu", "--axis", axis]
    flags = SIDE_FLAGS.get(caliber.axis or "none", ("--a", "--b"))
    if flags is not None:
        argv += [flags[0], caliber.text("a") or "0", flags[1], caliber.text("b") or "1"]
    argv += ["--rounds", str(caliber.rounds or 3)]
    for flag, key, default in KEPT:
        value = caliber.text(key)
        if value is not None and value != default:
            argv += [flag, value]
    return shlex.join([*argv, "--op", op])
