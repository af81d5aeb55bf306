"""AXIS=none: an A/A campaign, both sides identical; its spread is the noise floor."""

from __future__ import annotations

from pathlib import Path

from harness.axes import Axis, AxisKind, Label, SideValues, liveness, named
from harness.backends import Backend


def sides(values: SideValues, label: Label, axis: str) -> tuple[str, str]:
    """0 and 1: an A/A reads no side variable (one given is refused), its sides set nothing."""
    return "0", "1"


def plan_text(axis: Axis, directory: Path) -> str:
    return "no variable (A/A)"


def reaches_torch(axis: Axis, backend: Backend) -> bool:
    return False  # nothing differs: timing torch's reference again would only double the work


def code_only(axis: Axis, backend: Backend) -> bool:
    return True  # nothing differs, code included


KIND = AxisKind(
    name="none", variables=(), sides=sides,
    match=named("none"), liveness=liveness.noise_floor, plan_text=plan_text,
    reaches_torch=reaches_torch, code_only=code_only, aa=True,
    # One round gives no interval, but one round of an A/A still measures a floor.
    least_rounds=1)
