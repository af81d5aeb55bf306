"""A/B across two stacks: the sides' values resolved, and checked before anything runs.

AXIS=python: each side's interpreter preflighted and its backend modules imported, two that
report one stack refused. AXIS=flaggems: the two commits resolved in FLAGGEMS_DIR's git (read
only), each side's tree composed under the new campaign (refs.compose) and preflighted there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.axes import Axis
from harness.campaign import refs
from harness.campaign.plan import SIDES
from harness.campaign.unit import side_plans
from harness.errors import HarnessError, PreflightError, UsageError
from harness.run.preflight import Failure, Plan, PreflightResult
from harness.run.probe import build_digests
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
    failed = f"side {side} ({side}_PYTHON={python}): cannot import {', '.join(modules)}"
    try:
        proc = run([python, "-c", f"import {', '.join(modules)}"], capture_output=True,
                   text=True, timeout=IMPORT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PreflightError("python_modules", f"{failed}: {exc}") from None
    if proc.returncode != 0:
        last = next((line for line in reversed(proc.stderr.splitlines()) if line.strip()),
                    f"exit {proc.returncode}")
        raise PreflightError("python_modules", f"{failed}: {last.strip()}")


def check_stacks(settings: Settings, axis: Axis, directory: Path,
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
        _same_versions(plans, found, out, run)
    for side in SIDES:
        out(f"stack {side}: " + " ".join(f"{k}={v}" for k, v in found[side].items()))
    return found


def commits(settings: Settings, axis: Axis, given: AbSpec, out: Callable[[str], None]
            ) -> refs.Refs | None:
    """Two FlagGems commits resolved to full hashes (read from FLAGGEMS_DIR's git, never
    written); None for any other axis."""
    if not axis.kind.side_commits:
        return None
    if settings.flaggems_dir is None:
        raise UsageError(f"AXIS={axis.name} needs FLAGGEMS_DIR: the git checkout whose commits "
                         "A_REF and B_REF name")
    found = refs.resolve(settings.flaggems_dir, given.a, given.b, given.bench_ref)
    out(f"side A: FlagGems {found.a}; side B: FlagGems {found.b}; benchmark files of "
        f"{found.bench}")
    return found


def skip_one_sided(settings: Settings, found: refs.Refs | None,
                   info: dict[str, dict[str, Any]], out: Callable[[str], None]) -> None:
    """Two FlagGems commits: mark `skipped` in `info` ({op: {"node"} or {"reason"}}) each
    operator that exists at one commit only (refs.one_sided), and say so."""
    if found is None or settings.flaggems_dir is None:
        return
    for op, why in refs.one_sided(settings.flaggems_dir, found,
                                  [op for op, v in info.items() if "node" in v]).items():
        info[op]["skipped"] = why
        out(f"{op}: skipped: {why}")


def scan_settings(settings: Settings, found: refs.Refs | None, scratch: Path) -> Settings:
    """The settings that find the campaign's operators and make its first preflight: with two
    FlagGems commits, in side A's tree (BENCH_REF's benchmark files and A_REF's src/, written
    into `scratch`), so that the import check finds side A's own flag_gems where none is
    installed; side B's is checked in its tree (prepare)."""
    if found is None or settings.flaggems_dir is None:
        return settings
    return dataclasses.replace(settings, flaggems_dir=refs.bench_tree(
        settings.flaggems_dir, found.bench, scratch, source=found.a))


def sides(settings: Settings, axis: Axis, given: AbSpec, found: refs.Refs | None,
          out: Callable[[str], None], checked: PreflightResult | None, local: bool
          ) -> tuple[Axis, PreflightResult | None]:
    """The campaign's axis with its sides' values, and a dry run's checks (`checked`) with
    the two interpreters' among them. Two interpreters are checked here where this host runs
    the units (`local`): a real run stops on the first failure, a dry run lists it."""
    axis = dataclasses.replace(axis, a=given.a, b=given.b, given_tune=given.tune)
    if found is not None:
        return dataclasses.replace(axis, a=found.a, b=found.b), checked
    if local and axis.python("A"):
        try:
            check_stacks(settings, axis, settings.out, out)
        except HarnessError as exc:
            if checked is None:
                raise
            checked = dataclasses.replace(
                checked, failures=(*checked.failures, Failure("python_modules", exc)))
    return axis, checked


def prepare(settings: Settings, axis: Axis, commits: refs.Refs | None, directory: Path,
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
        with contextlib.suppress(OSError):  # its parent, where this was its only campaign
            directory.parent.rmdir()
        raise


def _same_versions(plans: Mapping[str, Plan], found: dict[str, dict[str, str]],
                   out: Callable[[str], None],
                   run: Callable[..., subprocess.CompletedProcess]) -> None:
    """Two interpreters reporting one set of versions: two builds of them where a
    distribution's installed files differ (each side's stack then names its build), else
    UsageError: the same stack twice."""
    dists = tuple(k for k in _versions(found["A"]) if k != "python_version")
    builds = {side: build_digests(plans[side].python, dists, run) for side in SIDES}
    differ = sorted(d for d in {*builds["A"], *builds["B"]}
                    if builds["A"].get(d) != builds["B"].get(d))
    if not differ:
        same = ", ".join(f"{k} {v}" for k, v in _versions(found["A"]).items())
        raise UsageError(f"A_PYTHON and B_PYTHON have the same stack ({same}, the same "
                         "installed files): the campaign would compare a stack with itself; "
                         "AXIS=none is the A/A")
    out(f"A_PYTHON and B_PYTHON report the same versions, but {', '.join(differ)} differ in "
        "their installed files: compared as two builds")
    for side in SIDES:
        found[side].update({f"{d}_build": builds[side].get(d, "none") for d in differ})


def _versions(found: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in found.items() if k != "python"}
