"""A/B across two stacks: the sides' values resolved, and checked before anything runs.

AXIS=python: each side's interpreter preflighted and its backend modules imported, two that
report one stack refused. AXIS=flaggems: the two commits resolved in FLAGGEMS_DIR's git (read
only), each side's tree composed under the new campaign (refs.compose) and preflighted there.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from harness.campaign import ab, refs
from harness.campaign.plan import SIDES
from harness.campaign.unit import side_plans
from harness.errors import PreflightError, UsageError
from harness.run.preflight import Plan
from harness.settings.abspec import AbSpec
from harness.settings.spec import Settings

IMPORT_TIMEOUT_S = 600.0  # a first import of torch from a cold file system can take minutes


def stack(plan: Plan) -> dict[str, str]:
    """What a side's interpreter has, as its runs' identities record it."""
    return {"python": plan.python, "python_version": str(plan.python_version),
            **{k: str(v) for k, v in sorted(plan.versions.items())}}


def check_imports(side: str, python: str, modules: tuple[str, ...],
                  run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> None:
    """Import the backend's modules in `python`, as the side's pytest will: a module that is
    found but does not import fails here, naming the side, not in every unit."""
    if not modules:
        return
    try:
        proc = run([python, "-c", f"import {', '.join(modules)}"], capture_output=True,
                   text=True, timeout=IMPORT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PreflightError("python_modules", f"side {side} ({side}_PYTHON={python}): "
                             f"cannot import {', '.join(modules)}: {exc}") from None
    if proc.returncode != 0:
        last = next((line for line in reversed(proc.stderr.splitlines()) if line.strip()),
                    f"exit {proc.returncode}")
        raise PreflightError("python_modules", f"side {side} ({side}_PYTHON={python}): "
                             f"cannot import {', '.join(modules)}: {last.strip()}")


def check_stacks(settings: Settings, axis: ab.Axis, directory: Path,
                 out: Callable[[str], None] = print,
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run
                 ) -> dict[str, dict[str, str]]:
    """Each side's stack where the sides are two interpreters ({} otherwise): preflight and
    an import of the backend's modules in each (PreflightError naming the side), then
    UsageError where both report the same versions."""
    if axis.python("A") is None:
        return {}
    plans = side_plans(settings, axis, directory, out)
    for side in SIDES:
        check_imports(side, plans[side].python, settings.backend.python_modules, run)
    found = {side: stack(plans[side]) for side in SIDES}
    if _versions(found["A"]) == _versions(found["B"]):
        same = ", ".join(f"{k} {v}" for k, v in _versions(found["A"]).items())
        raise UsageError(f"A_PYTHON and B_PYTHON have the same stack ({same}): the campaign "
                         "would compare a stack with itself; AXIS=none is the A/A")
    for side in SIDES:
        out(f"side {side}: " + " ".join(f"{k}={v}" for k, v in found[side].items()))
    return found


def sides(settings: Settings, axis: ab.Axis, given: AbSpec, out: Callable[[str], None],
          check: bool) -> tuple[ab.Axis, refs.Refs | None]:
    """The campaign's axis with its sides' values: a switch's two values, two interpreters
    (checked where `check`: this host runs the units, and this is no dry run), or two FlagGems
    commits resolved to full hashes (read from FLAGGEMS_DIR's git, never written)."""
    axis = dataclasses.replace(axis, a=given.a, b=given.b, given_tune=given.tune)
    if axis.name == ab.AXIS_FLAGGEMS:
        if settings.flaggems_dir is None:
            raise UsageError("AXIS=flaggems needs FLAGGEMS_DIR: the git checkout whose "
                             "commits A_REF and B_REF name")
        commits = refs.resolve(settings.flaggems_dir, given.a, given.b, given.bench_ref)
        out(f"side A: FlagGems {commits.a}; side B: FlagGems {commits.b}; benchmark files of "
            f"{commits.bench}")
        return dataclasses.replace(axis, a=commits.a, b=commits.b), commits
    if check:
        check_stacks(settings, axis, settings.out, out)
    return axis, None


def prepare(settings: Settings, axis: ab.Axis, commits: refs.Refs | None, directory: Path,
            out: Callable[[str], None]) -> None:
    """Two FlagGems commits: each side's tree under the new campaign `directory`, and each
    side's preflight in it; on a failure the directory is removed, as nothing ran."""
    if commits is None or settings.flaggems_dir is None:
        return
    try:
        refs.compose(settings.flaggems_dir, commits, directory)
        side_plans(settings, axis, directory, out)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def _versions(found: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in found.items() if k != "python"}
