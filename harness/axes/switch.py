"""A switch: one environment variable a backend's stack reads, set to A on side A, B on side B."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness import backends
from harness.axes import Axis, AxisKind, Label, SideValues, liveness
from harness.backends import Backend
from harness.errors import UsageError

# Switches every backend spells alike; a backend adds its compiler's own (Backend.switches).
COMMON_AXES = {"FOLDSCALE": "FLAGGEMS_MXFP4_FOLDSCALE"}


def known(backend: Backend) -> dict[str, str]:
    """Every switch `backend` knows, by short name or in full, and the variable it sets."""
    return {**COMMON_AXES, **{v: v for v in COMMON_AXES.values()}, **backend.axis_switches()}


def sides(values: SideValues, label: Label, axis: str) -> tuple[str, str]:
    """A and B (0 and 1 by default); UsageError naming both where they are equal."""
    a, b = values["A"][0] or "0", values["B"][0] or "1"
    if a == b:
        labels = [label(name, values[name][1]) for name in ("A", "B")]
        raise UsageError(f"{labels[0]}={a!r} and {labels[1]}={b!r} are equal: the campaign "
                         f"would compare AXIS={axis} with itself; expected two different "
                         "values (AXIS=none is the A/A campaign)")
    return a, b


def match(name: str, backend: Backend) -> Axis | None:
    found = known(backend)
    return Axis(name, found[name]) if name in found else None


def choices(backend: Backend) -> Sequence[str]:
    return sorted(known(backend))


def hint(name: str, backend: Backend) -> str:
    """Where `name` is another backend's switch, say so."""
    others = [b.name for b in backends.registry().all() if name in b.axis_switches()]
    return (f"{name} is a switch of BACKEND={', '.join(others)}, not of {backend.name}; "
            if others else "")


def plan_text(axis: Axis, directory: Path) -> str:
    return axis.variable or ""


def reaches_torch(axis: Axis, backend: Backend) -> bool:
    """A compiler switch (Backend.is_compiler_switch) cannot change torch's own kernels; any
    other variable may (an allocator or library variable)."""
    return not (axis.variable is not None and backend.is_compiler_switch(axis.variable))


def code_only(axis: Axis, backend: Backend) -> bool:
    """A switch of the compiler's code generation (Backend.is_codegen_switch) changes nothing
    else; FlagGems' own variables and any other may change what its Python does."""
    return axis.variable is not None and backend.is_codegen_switch(axis.variable)


KIND = AxisKind(
    name="switch", variables=("A", "B"), sides=sides,
    match=match, liveness=liveness.of_switch, plan_text=plan_text, reaches_torch=reaches_torch,
    code_only=code_only, by_name=False, choices=choices, hint=hint)
