"""A bisection's A/Bs: one campaign of two steps, run as `harness ab` runs one, and read back.

Each A/B is a campaign of the axis kind being bisected (AXIS=flaggems: A_REF and B_REF; python:
A_PYTHON and B_PYTHON; image: A_IMAGE and B_IMAGE), with the user's settings, ROUNDS=auto unless
ROUNDS was given, in the bisection's folder (OUT) and recorded in the user's history store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import axes, history
from harness.axes.steps import Step
from harness.bisect.search import Comparison, Row
from harness.campaign import adaptive, compare, document, start
from harness.errors import HarnessError
from harness.report import abjson
from harness.report.sources import AB_JSON
from harness.settings import abspec, spec, variables

# What a bisection sets in each of its campaigns, or refuses to pass on: the user's own values
# of these are the bisection's, not a campaign's.
OWN = ("good", "bad", "stacks", "shape", "resume", "dry_run", "axis", "ops", "ops_file",
       "fail_on", "out", "history")
FAILED_VERDICTS = ("failed", "skipped", "excluded", "pending")


def norm_shape(text: str) -> str:
    return "".join(text.split())


@dataclass(frozen=True)
class Campaigns:
    """Runs the A/Bs of one bisection: `given` the user's variables by flag dest."""

    kind: axes.AxisKind
    op: str
    given: Mapping[str, str]
    steps: tuple[Step, ...]
    directory: Path  # the bisection's folder: each campaign goes under it
    history: str  # the user's store, resolved
    env: Mapping[str, str]
    out: Callable[[str], None]

    def flags(self, a: int, b: int, floor: float | None = None) -> dict[str, Any]:
        """The flags of the campaign of step `a` (side A) against step `b` (side B), its rows
        judged at `floor` (None: the user's NOISE_FLOOR or NOISE_FROM, else 1%)."""
        flags: dict[str, Any] = {k: v for k, v in self.given.items() if k not in OWN}
        side_a, side_b = (variables.named(v).dest for v in self.kind.side_variables)
        flags.update({"axis": self.kind.name, side_a: self.steps[a].value,
                      side_b: self.steps[b].value, "op": self.op,
                      "rounds": self.given.get("rounds") or abspec.AUTO,
                      "out": str(self.directory), "history": self.history})
        if floor is not None:
            flags["noise_floor"] = f"{floor:g}"
        if self.kind.side_commits and not self.given.get("bench_ref"):
            flags["bench_ref"] = self.steps[0].value  # one benchmark for every step: GOOD's
        return flags

    def run(self, a: int, b: int, floor: float | None = None) -> Comparison:
        """Run the A/B of steps `a` and `b` and read it; a campaign that cannot start or
        reads no row is a Comparison that `failed` (the error's line)."""
        flags = self.flags(a, b, floor)
        where: list[Path] = []
        self.out(f"bisect: A/B of step {a} ({self.steps[a].label}) against step {b} "
                 f"({self.steps[b].label})")
        try:
            settings = spec.resolve(flags, self.env)
            ab_spec = abspec.resolve_ab(flags, self.env)
            axis = axes.resolve(self.kind.name, settings.backend)
            rc = start.start(settings, flags, self.env, axis, ab_spec, out=self.out,
                             claimed=where.append)
        except HarnessError as exc:
            if a == 0 and b == len(self.steps) - 1:
                raise  # the ends' campaign: the bisection itself cannot start
            return Comparison(a, b, failed=f"its campaign did not start: {exc}",
                              directory=str(where[0]) if where else None, floor_pct=floor)
        found = read(where[0], self.op, self.given, a, b, rc,
                     same_code_counts=self.kind.side_commits,
                     unchanged=self.kind.artifact_words[0])
        return dataclasses.replace(found, floor_pct=floor)

    def user_floor(self) -> bool:
        """Whether the user gave the floor (NOISE_FLOOR or NOISE_FROM)."""
        return bool(self.given.get("noise_floor") or self.given.get("noise_from"))


def history_value(flags: Mapping[str, object], env: Mapping[str, str], out: Path) -> str:
    """HISTORY as the user gave it, else the default store under the user's OUT (absolute:
    the campaigns run with OUT the bisection's folder)."""
    value, source = variables.named("HISTORY").lookup(flags, env)
    if source == "default" or not value:
        return str((out / history.DEFAULT_NAME).resolve())
    return str(value)


def read(directory: Path, op: str, given: Mapping[str, str], a: int, b: int, rc: int,
         same_code_counts: bool, unchanged: str) -> Comparison:
    """The Comparison a finished campaign in `directory` holds: its rows of `op` (those of
    SHAPE and DTYPES, where given), whether `op` ran the same code on both sides (its kernels
    and its Python source; only where the sides are two commits: `same_code_counts`), and its
    units' walls."""
    if not (directory / AB_JSON).is_file():
        return Comparison(a, b, failed=f"its campaign left no {AB_JSON} (exit {rc})",
                          directory=str(directory))
    doc = abjson.read_ab(directory)
    shape = norm_shape(given.get("shape") or "")
    dtypes = {d.strip().removeprefix("torch.") for d in (given.get("dtypes") or "").split(",")
              if d.strip()}
    rows = tuple(
        Row(r.dtype, r.shape, r.stats.verdict.value, r.stats.speedup_pct, r.stats.ci_low_pct,
            r.stats.ci_high_pct, r.stats.rounds)
        for r in doc.rows
        if r.op == op and (not shape or norm_shape(r.shape) == shape)
        and (not dtypes or r.dtype.removeprefix("torch.") in dtypes))
    summary = (doc.operators or {}).get(op)
    gpu_s = sum(u.wall_s or 0.0 for u in doc.units or ())
    rounds = max((r.rounds for r in rows), default=0)
    if not rows:
        why = (summary.reason if summary is not None and summary.reason
               else f"no row of {op}" + (f" at SHAPE {given.get('shape')}" if shape else ""))
        return Comparison(a, b, failed=f"its campaign read no row: {why}",
                          directory=str(directory), gpu_s=gpu_s)
    same = bool(same_code_counts and summary is not None and summary.artifacts == unchanged
                and same_source(directory, op))
    return Comparison(a, b, rows, same_code=same, directory=str(directory), gpu_s=gpu_s,
                      rounds=rounds)


def same_source(directory: Path, op: str) -> bool:
    """Whether `op` ran the same code on both sides of the campaign in `directory`: its
    compiled kernels and its Python source. Kernels alone are not enough: a wrapper that
    launches the same kernel twice compiles nothing new and is twice as slow."""
    campaign = document.load(directory, label="bisect")
    _, identities, _ = compare.compare_ops(directory, campaign, campaign.noise_floor_pct)
    return op in adaptive.unchanged_ops(directory, campaign, identities, [op])
