"""AXIS=env:NAME: a variable no backend lists, spelt out as one on purpose; then a switch."""

from __future__ import annotations

import re

from harness import backends
from harness.axes import Axis, AxisKind, liveness, switch
from harness.backends import Backend
from harness.errors import UsageError

RAW_AXIS = "env:"
RAW_NAME_MAX = 100  # it names the campaign's directory, with the operator: within NAME_MAX
RAW_NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{0,{RAW_NAME_MAX - 1}}}")


def raw_variable(axis: str) -> str:
    """The variable of AXIS=env:NAME; UsageError for a NAME that is no environment variable
    name, or one the harness sets itself (its ZL_ hand-over, a device visibility variable)."""
    variable = axis[len(RAW_AXIS):]
    own = {v for b in backends.registry().all() for v in b.visibility_vars}
    if not RAW_NAME.fullmatch(variable) or variable.startswith("ZL_") or variable in own:
        raise UsageError(f"AXIS={axis!r} is not accepted; expected {RAW_AXIS}NAME with NAME an "
                         f"environment variable name (letters, digits, '_', at most "
                         f"{RAW_NAME_MAX} characters) that the harness does not set itself "
                         f"(not ZL_*, nor {', '.join(sorted(own))})")
    return variable


def match(name: str, backend: Backend) -> Axis | None:
    """The axis of env:NAME: named by its variable, so that it is a switch from here on."""
    if not name.startswith(RAW_AXIS):
        return None
    variable = raw_variable(name)
    return Axis(variable, variable)


KIND = AxisKind(
    name="env", variables=switch.KIND.variables,
    sides=switch.sides, match=match, liveness=liveness.of_switch, plan_text=switch.plan_text,
    reaches_torch=switch.reaches_torch, by_name=False,
    pattern=f"{RAW_AXIS}NAME for any other environment variable")
