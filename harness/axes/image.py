"""AXIS=image: the sides are two images pinned by digest, A_IMAGE and B_IMAGE."""

from __future__ import annotations

import re
from pathlib import Path

from harness.axes import Axis, AxisKind, Label, SideValues, liveness, named
from harness.axes.steps import Step, StepsGiven, stack_list
from harness.backends import Backend
from harness.errors import UsageError

PINNED_IMAGE = re.compile(r"[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}")


def sides(values: SideValues, label: Label, axis: str) -> tuple[str, str]:
    """A_IMAGE and B_IMAGE, each pinned by its digest (name@sha256:<64 hex>); UsageError naming
    the spelling the user wrote for one missing or without a digest, or two of one digest."""
    found = []
    for name in ("A_IMAGE", "B_IMAGE"):
        value, source = values[name]
        spelt = label(name, source)
        if not value:
            raise UsageError(f"AXIS=image needs {spelt}: side {name[0]}'s image, "
                             "name@sha256:<digest>")
        if not PINNED_IMAGE.fullmatch(str(value)):
            raise UsageError(f"{spelt}={str(value)!r} is not accepted; expected an image "
                             "pinned by its digest, name@sha256:<64 hex digits> (a tag alone "
                             "can move)")
        found.append(str(value))
    if found[0].split("@")[1] == found[1].split("@")[1]:
        raise UsageError(f"A_IMAGE and B_IMAGE have the same digest "
                         f"({found[0].split('@')[1][:19]}): the campaign would compare an image "
                         "with itself; AXIS=none is the A/A")
    return found[0], found[1]


def _refused(entry: str) -> str | None:
    """Why a stack list's entry is no image pinned by its digest."""
    if not PINNED_IMAGE.fullmatch(entry):
        return "expected an image pinned by its digest, name@sha256:<64 hex digits>"
    return None


def steps(given: StepsGiven) -> tuple[Step, ...]:
    """STACKS' images from GOOD to BAD; a step's code is its digest (one digest, one stack)."""
    return tuple(Step(s.value, s.label, code=s.value.split("@")[1])
                 for s in stack_list(given, "image", _refused))


def plan_text(axis: Axis, directory: Path) -> str:
    return f"two images (digests: A {axis.a.split('@')[-1]}, B {axis.b.split('@')[-1]})"


def reaches_torch(axis: Axis, backend: Backend) -> bool:
    return True  # each image has its own torch


KIND = AxisKind(
    name="image", variables=("A_IMAGE", "B_IMAGE"), sides=sides,
    match=named("image"), liveness=liveness.of_stacks, plan_text=plan_text,
    reaches_torch=reaches_torch, stacks=True,
    side_images=True, tune="each", report_text="two images", steps=steps)
