"""Named preflight checks, run in DESIGN.md's order before anything is created or started."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness.backends import Backend, Device
from harness.errors import PreflightError
from harness.providers import flaggems
from harness.spec import Settings

CHECKS = ("flaggems_dir", "benchmark_file", "test_node", "shape_file", "replay_from",
          "backend", "device", "python_modules")
ACCELERATOR_CHECKS = frozenset({"backend", "device"})

# Runs in the interpreter that will run pytest: finds each module without importing it (an
# import of torch or flag_gems costs seconds) and reads the installed distribution versions.
_PROBE = r"""
import importlib.metadata as md, importlib.util as iu, json, platform, sys
mods = sys.argv[1].split(",")
dists = sys.argv[2].split(",")
sys.path[:0] = [p for p in sys.argv[3].split("\n") if p]
out = {"python": platform.python_version(), "missing": [], "versions": {}}
for m in mods:
    try:
        found = iu.find_spec(m) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        out["missing"].append(m)
for d in dists:
    try:
        out["versions"][d] = md.version(d)
    except md.PackageNotFoundError:
        pass
print(json.dumps(out))
"""
# Distributions whose versions every run records, beside the backend's own python_modules.
VERSION_DISTS = ("torch", "triton", "flagtree", "flag_gems", "pytest", "numpy", "pyyaml")


@dataclass
class Plan:
    """What preflight established: the node to run and facts the run header records."""

    node: flaggems.Node | None = None
    op: str | None = None
    devices: list[Device] = field(default_factory=list)
    python: str = sys.executable
    python_version: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    passed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Environment:
    """What the checks may touch outside the settings; tests replace it."""

    python: str = sys.executable
    which: Callable[[str], str | None] = shutil.which
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run


def probe_python(python: str, modules: tuple[str, ...],
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
                 extra_paths: tuple[Path, ...] = ()) -> dict:
    """Ask `python` which of `modules` it cannot find and which versions it has installed.

    `extra_paths` go first on its sys.path, as pytest's `pythonpath` setting puts them there.
    """
    try:
        dists = dict.fromkeys((*VERSION_DISTS, *modules))
        paths = "\n".join(str(p) for p in extra_paths)
        proc = run([python, "-c", _PROBE, ",".join(modules), ",".join(dists), paths],
                   capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise PreflightError("python_modules", f"cannot start {python}: {exc}") from None
    if proc.returncode != 0:
        raise PreflightError("python_modules", f"{python} failed: {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout)


def _caller_selection(backend: Backend) -> list[str]:
    value = os.environ.get(backend.visibility_vars[0], "") if backend.visibility_vars else ""
    return [item.strip() for item in value.split(",") if item.strip()]


def visible_devices(devices: list[Device], settings: Settings) -> list[Device]:
    """The devices DEVICES selects (by index or UUID); unset, those the caller's visibility
    variable already selects; neither set, all of them."""
    wanted = set(settings.devices or _caller_selection(settings.backend))
    if not wanted:
        return devices
    return [d for d in devices if str(d.index) in wanted or (d.uuid or "") in wanted]


def _check(name: str, settings: Settings, plan: Plan, env: Environment) -> str | None:
    """Run one check; return a skip reason, None when it ran and passed, or raise."""
    fg_dir = settings.flaggems_dir
    if name == "flaggems_dir":
        if fg_dir is None:
            raise PreflightError("flaggems_dir", f"FLAGGEMS_DIR is not set (BACKEND="
                                 f"{settings.backend.name} has no embedded suite)")
        flaggems.check_flaggems_dir(fg_dir)
    elif name == "benchmark_file":
        flaggems.check_layout(fg_dir)
    elif name == "test_node":
        if not (settings.op or settings.test_node):
            raise PreflightError("test_node", "nothing to run: set OP or TEST_NODE")
        nodes = flaggems.scan_tree(fg_dir)
        plan.node = flaggems.resolve_node(nodes, op=settings.op, op_file=settings.op_file,
                                          test_node=settings.test_node, flaggems_dir=fg_dir)
        plan.op = settings.op or flaggems.op_name_for(plan.node)
    elif name == "shape_file":
        if settings.shape_mode != "file":
            return "SHAPE_MODE=upstream"
        _check_shape_file(settings.shape_file)
    elif name == "replay_from":
        if settings.replay_from is None:
            return "REPLAY_FROM unset"
        if not settings.replay_from.is_dir():
            raise PreflightError("replay_from", f"REPLAY_FROM={str(settings.replay_from)!r} "
                                 "is not a run or records directory")
    elif name == "backend":
        tool = settings.backend.smi_command[0] if settings.backend.smi_command else None
        if tool and env.which(tool) is None:
            raise PreflightError("backend", f"{tool} not found on PATH: is this a "
                                 f"{settings.backend.name} host? (BACKEND={settings.backend.name})")
    elif name == "device":
        if not settings.backend.is_accelerator:
            return "no accelerator on this backend"
        try:
            found = settings.backend.enumerate_devices(run=env.run)
        except ValueError as exc:  # the tool answered in a format its parser does not know
            raise PreflightError("device", str(exc)) from None
        plan.devices = visible_devices(found, settings)
        if not plan.devices:
            wanted = ",".join(settings.devices) or "any"
            raise PreflightError("device", f"no visible {settings.backend.name} device "
                                 f"(DEVICES={wanted}; found {len(found)})")
    elif name == "python_modules":
        facts = probe_python(env.python, settings.backend.python_modules, env.run,
                             flaggems.pytest_pythonpath(fg_dir))
        if facts["missing"]:
            raise PreflightError("python_modules", f"{env.python} cannot import "
                                 f"{', '.join(facts['missing'])}")
        plan.python_version = facts["python"]
        plan.versions = facts["versions"]
    return None


def _check_shape_file(path: Path | None) -> None:
    if path is None or not path.is_file():
        raise PreflightError("shape_file", f"SHAPE_FILE={str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise PreflightError("shape_file", f"{path} is not valid YAML: "
                             f"{str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or not any(
            isinstance(v, dict) and "shapes" in v for v in data.values()):
        raise PreflightError("shape_file", f"{path} has no '<op>: {{shapes: [...]}}' entry")


def iter_checks(settings: Settings, env: Environment | None = None,
                with_accelerator: bool = True, remote: bool = False
                ) -> Iterator[tuple[str, str | None, Plan]]:
    """Run the checks in order, yielding (name, skip reason or None, plan) after each.

    The first failure raises PreflightError; nothing is created on disk either way. `remote`:
    the units run on a cluster's nodes, which check the accelerator and the Python stack.
    """
    env = env or Environment()
    plan = Plan(python=env.python)
    for name in CHECKS:
        if remote and name in (*ACCELERATOR_CHECKS, "python_modules"):
            plan.skipped.append(name)
            yield name, "checked by each cluster task on its node", plan
            continue
        if not with_accelerator and name in ACCELERATOR_CHECKS:
            plan.skipped.append(name)
            yield name, "dry run: needs the accelerator host", plan
            continue
        reason = _check(name, settings, plan, env)
        (plan.skipped if reason else plan.passed).append(name)
        yield name, reason, plan


def run_preflight(settings: Settings, env: Environment | None = None,
                  with_accelerator: bool = True,
                  report: Callable[[str], None] | None = None, remote: bool = False) -> Plan:
    """Run every check; report one line per check; return the plan or raise PreflightError."""
    plan = Plan()
    for name, reason, plan in iter_checks(settings, env, with_accelerator,  # noqa: B007
                                          remote):
        if report:
            report(f"preflight {name}: " + (f"skipped ({reason})" if reason else "ok"))
    return plan
