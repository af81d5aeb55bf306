"""A/B across two stacks (AXIS=python): each side's interpreter checked, and two stacks that are
one refused, before anything runs."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping

from harness.campaign import ab
from harness.campaign.plan import SIDES
from harness.campaign.unit import side_plans
from harness.errors import PreflightError, UsageError
from harness.run.preflight import Plan
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


def check_stacks(settings: Settings, axis: ab.Axis, out: Callable[[str], None] = print,
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run
                 ) -> dict[str, dict[str, str]]:
    """Each side's stack where the sides are two interpreters ({} otherwise): preflight and
    an import of the backend's modules in each (PreflightError naming the side), then
    UsageError where both report the same versions."""
    if axis.python("A") is None:
        return {}
    plans = side_plans(settings, axis, out)
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


def _versions(found: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in found.items() if k != "python"}
