"""AXIS=flaggems: the sides are two FlagGems commits, A_REF and B_REF, each run in its own tree
(composed under the campaign from FLAGGEMS_DIR's git) with BENCH_REF's benchmark files."""

from __future__ import annotations

from pathlib import Path

from harness.axes import Axis, AxisKind, Label, SideValues, liveness, named
from harness.axes.steps import Step, StepsGiven, commit_range
from harness.backends import Backend

STACKS_DIR = "stacks"  # under a campaign: one FlagGems tree a side
SOURCE_DIR = "src"  # FlagGems' package root in its repository


def sides(values: SideValues, label: Label, axis: str) -> tuple[str, str]:
    """A_REF and B_REF as given: resolved against FLAGGEMS_DIR when the campaign starts (two
    names of one commit are refused there)."""
    return str(values["A_REF"][0] or ""), str(values["B_REF"][0] or "")


def plan_text(axis: Axis, directory: Path) -> str:
    return f"two FlagGems commits, each side's tree in {directory / STACKS_DIR}"


def reaches_torch(axis: Axis, backend: Backend) -> bool:
    return False  # FlagGems' kernels differ; torch's own do not


def side_label(axis: Axis, side: str) -> str:
    return f"{side}_REF={axis.value(side)[:12]}"


def steps(given: StepsGiven) -> tuple[Step, ...]:
    """GOOD..BAD of FLAGGEMS_DIR's first-parent history; a step's code is its src/ tree."""
    return commit_range(given, SOURCE_DIR)


KIND = AxisKind(
    name="flaggems", variables=("A_REF", "B_REF", "BENCH_REF"),
    sides=sides, match=named("flaggems"), liveness=liveness.of_stacks, plan_text=plan_text,
    reaches_torch=reaches_torch, stacks=True,
    side_commits=True, side_label=side_label,
    # A key side B's commit does not have is counted and flagged, not failed.
    strict_replay=False,
    # An operator whose side B compiled nothing side A did not runs the same kernels (B
    # replays A's winners): "unchanged", and its rows are expected to be same.
    artifact_words=("unchanged", "changed"), report_text="two FlagGems commits", steps=steps)
