"""AXIS=python: the sides are two interpreters (two stacks), A_PYTHON and B_PYTHON."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.axes import Axis, AxisKind, Label, SideValues, liveness, named
from harness.axes.steps import Step, StepsGiven, stack_list
from harness.backends import Backend
from harness.errors import UsageError


def sides(values: SideValues, label: Label, axis: str) -> tuple[str, str]:
    """A_PYTHON and B_PYTHON as absolute paths of executable files; UsageError naming the
    spelling the user wrote for one that is missing, not a file or not executable, or for two
    that are the same path."""
    found = []
    for name in ("A_PYTHON", "B_PYTHON"):
        value, source = values[name]
        spelt = label(name, source)
        if not value:
            raise UsageError(f"AXIS=python needs {spelt}: side {name[0]}'s interpreter")
        path = shutil.which(str(value)) if os.sep not in str(value) else str(value)
        if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
            raise UsageError(f"{spelt}={str(value)!r} is not accepted; expected an "
                             "executable interpreter (a path, or a name on PATH)")
        found.append(os.path.abspath(path))
    if found[0] == found[1]:
        raise UsageError(f"A_PYTHON and B_PYTHON are the same interpreter ({found[0]!r}): the "
                         "campaign would compare a stack with itself; AXIS=none is the A/A")
    return found[0], found[1]


def _refused(entry: str) -> str | None:
    """Why a stack list's entry is no interpreter (an absolute path of an executable file)."""
    if not os.path.isabs(entry):
        return "expected the absolute path of an interpreter"
    if not os.path.isfile(entry) or not os.access(entry, os.X_OK):
        return "no executable file there"
    return None


def steps(given: StepsGiven) -> tuple[Step, ...]:
    """STACKS' interpreters from GOOD to BAD, e.g. nightly builds installed side by side."""
    return stack_list(given, "python", _refused)


def plan_text(axis: Axis, directory: Path) -> str:
    return "two interpreters"


def reaches_torch(axis: Axis, backend: Backend) -> bool:
    return True  # each side has its own torch


def side_label(axis: Axis, side: str) -> str:
    return f"{side}_PYTHON={axis.value(side)}"


KIND = AxisKind(
    name="python", variables=("A_PYTHON", "B_PYTHON"), sides=sides,
    match=named("python"), liveness=liveness.of_stacks, plan_text=plan_text,
    reaches_torch=reaches_torch, stacks=True,
    side_pythons=True, side_label=side_label,
    # Two interpreters' compilers may not share a config space, and which configs a stack's
    # tuner picks is part of what is compared: B/r0 tunes for itself.
    tune="each", report_text="two stacks", shows_stacks=True, steps=steps)
