"""Named preflight checks, run in DESIGN.md's order before anything is created or started."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import yaml

from harness import records
from harness.backends import Device
from harness.errors import EXIT_OK, HarnessError, PreflightError, UsageError
from harness.executors.devices import visible_devices
from harness.precompile import ASYNC_MODULE
from harness.providers import benchmark_classes, flaggems
from harness.spec import VARS_BY_MAKE, Settings

CHECKS = ("out", "flaggems_dir", "benchmark_file", "test_node", "dtypes", "shape_file",
          "replay_from", "backend", "device", "python_modules")
ACCELERATOR_CHECKS = frozenset({"backend", "device"})
# A check that needs another's result: when that one failed, it is skipped, not failed again.
NEEDS = {"benchmark_file": "flaggems_dir", "test_node": "benchmark_file", "dtypes": "test_node",
         "device": "backend"}

# Runs in the interpreter that will run pytest: finds each module without importing it (an
# import of torch or flag_gems costs seconds) and reads the installed distribution versions.
_PROBE = r"""
import importlib.metadata as md, importlib.util as iu, json, os, platform, sys
mods = sys.argv[1].split(",")
dists = sys.argv[2].split(",")
sys.path[:0] = [p for p in sys.argv[3].split("\n") if p]
out = {"python": platform.python_version(), "missing": [], "versions": {}, "features": {}}
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
for f in filter(None, sys.argv[4].split(",")):
    top, _, rest = f.partition(".")
    try:
        spec = iu.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    roots = (spec.submodule_search_locations if spec else None) or []
    bases = [os.path.join(r, *rest.split(".")) for r in roots]
    out["features"][f] = any(os.path.isfile(b + ".py") or
                             os.path.isfile(os.path.join(b, "__init__.py")) for b in bases)
print(json.dumps(out))
"""
# Submodules whose presence decides a plugin (feature detection, not version checks).
FEATURE_MODULES = (ASYNC_MODULE,)
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
    features: dict[str, bool] = field(default_factory=dict)  # FEATURE_MODULES found or not
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
    """Ask `python` which of `modules` it cannot find, which versions it has installed and
    which FEATURE_MODULES exist (looked up as files beside their package, never imported).

    `extra_paths` go first on its sys.path, as pytest's `pythonpath` setting puts them there.
    """
    try:
        dists = dict.fromkeys((*VERSION_DISTS, *modules))
        paths = "\n".join(str(p) for p in extra_paths)
        proc = run([python, "-c", _PROBE, ",".join(modules), ",".join(dists), paths,
                    ",".join(FEATURE_MODULES)],
                   capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise PreflightError("python_modules", f"cannot start {python}: {exc}") from None
    if proc.returncode != 0:
        raise PreflightError("python_modules", f"{python} failed: {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout)


def _check_devices_exist(settings: Settings, found: list[Device]) -> None:
    """DEVICES may name only devices the vendor tool lists, by index or UUID."""
    known = {str(d.index) for d in found} | {d.uuid for d in found if d.uuid}
    missing = [item for item in settings.devices if item not in known]
    if missing:
        listed = ", ".join(str(d.index) + (f" ({d.uuid})" if d.uuid else "") for d in found)
        raise PreflightError("device", f"DEVICES={','.join(settings.devices)!r} names "
                             f"{', '.join(missing)}, which {settings.backend.name} does not "
                             f"have; its devices: {listed or 'none found'}")


def _check_out(out: Path) -> None:
    """OUT, or the directory it will be created in, must let this user create directories."""
    existing = next((p for p in (out, *out.parents) if p.is_dir()), Path("."))
    why = None if os.access(existing, os.W_OK | os.X_OK) else "not writable by this user"
    if why is None:  # access() says yes to root even where mkdir fails (/proc, /sys)
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".harness-probe-", dir=existing))
        except OSError as exc:
            why = f"no directory can be created there ({exc.strerror})"
    if why:
        where = "" if existing == out else f" (its nearest directory {str(existing)!r})"
        raise PreflightError("out", f"OUT={str(out)!r}{where}: {why}; expected a directory "
                             "this user can create run directories in")


def _check_dtypes(settings: Settings, node: flaggems.Node) -> None:
    """DTYPES must be among those the benchmark declares (FlagGems fails the node otherwise);
    where they are not known statically, among those FlagGems' --dtypes accepts."""
    selectable = benchmark_classes.SELECTABLE_DTYPES
    declared = benchmark_classes.benchmark_dtypes(settings.flaggems_dir, node)
    accepted = [d for d in declared if d in selectable] if declared else sorted(selectable)
    outside = [d for d in settings.dtypes if d not in accepted]
    if outside:
        whose = (f"{node.nodeid} declares (of those FlagGems' --dtypes accepts)" if declared
                 else "FlagGems' --dtypes accepts")
        label = VARS_BY_MAKE["DTYPES"].label(settings.sources.get("DTYPES", "default"))
        raise UsageError(f"{label}={','.join(settings.dtypes)!r} is not accepted: "
                         f"{', '.join(outside)} is not measured; {whose}: "
                         f"{', '.join(accepted) or 'none'}")

def _check(name: str, settings: Settings, plan: Plan, env: Environment) -> str | None:
    """Run one check; return a skip reason, None when it ran and passed, or raise."""
    fg_dir = settings.flaggems_dir
    if name == "out":
        _check_out(settings.out)
    elif name == "flaggems_dir":
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
    elif name == "dtypes":
        if not settings.dtypes:
            return "DTYPES unset: the benchmark's own"
        _check_dtypes(settings, plan.node)
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
        try:  # the records are read again when the run starts: corrupt ones fail here
            records.read_records(settings.replay_from)
        except UsageError as exc:
            raise PreflightError("replay_from", str(exc)) from None
    elif name == "backend":
        tool = settings.backend.smi_command[0] if settings.backend.smi_command else None
        if tool and env.which(tool) is None:
            raise PreflightError("backend", f"{tool} not found on PATH: is this a "
                                 f"{settings.backend.name} host? (BACKEND={settings.backend.name})")
    elif name == "device":
        if not settings.backend.is_accelerator:  # its one device is the host: DEVICES is moot
            return "no accelerator on this backend" + (
                f"; DEVICES={','.join(settings.devices)} is ignored" if settings.devices else "")
        try:
            found = settings.backend.enumerate_devices(run=env.run)
        except ValueError as exc:  # the tool answered in a format its parser does not know
            raise PreflightError("device", str(exc)) from None
        if found:  # a tool that lists nothing leaves the check below to say so
            _check_devices_exist(settings, found)
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
        plan.features = facts.get("features", {})
    return None


def _check_shape_file(path: Path | None) -> None:
    """SHAPE_FILE must be a YAML file that FlagGems' set_shapes reads without failing."""
    label = f"SHAPE_FILE={str(path)!r}"
    if path is None or not path.exists():
        raise PreflightError("shape_file", f"{label} does not exist")
    if not path.is_file():
        raise PreflightError("shape_file", f"{label} is not a file; expected a shape YAML file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PreflightError("shape_file", f"{label} cannot be read as UTF-8 text "
                             f"({exc.__class__.__name__}); expected a shape YAML file") from None
    except yaml.YAMLError as exc:
        raise PreflightError("shape_file", f"{label} is not valid YAML: "
                             f"{str(exc).splitlines()[0]}") from None
    problem = flaggems.shape_config_problem(data)
    if problem:
        raise PreflightError("shape_file", f"{label}: {problem}")


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


class Failure(NamedTuple):
    """A check that failed, with the error a run would stop on."""

    check: str
    error: HarnessError


@dataclass(frozen=True)
class PreflightResult:
    """Every check's outcome: the plan as far as it got, and each failure in check order."""

    plan: Plan
    failures: tuple[Failure, ...]

    @property
    def exit_code(self) -> int:
        """0 when every check passed; else the gravest failure's code (3 over 2)."""
        return max((f.error.exit_code for f in self.failures), default=EXIT_OK)

    def write_failures(self, marker: Callable[[str], None], error: Callable[[str], None]
                       ) -> int:
        """Write each failure as a run would: a PREFLIGHT_FAILED marker line to `marker`, a
        bad value as `error: ...` to `error`; return exit_code."""
        for failure in self.failures:
            if isinstance(failure.error, PreflightError):
                marker(str(failure.error))
            else:
                error(f"error: {failure.error}")
        return self.exit_code


def collect_preflight(settings: Settings, env: Environment | None = None,
                      with_accelerator: bool = True, checks: tuple[str, ...] = CHECKS,
                      report: Callable[[str], None] | None = None, remote: bool = False
                      ) -> PreflightResult:
    """Run `checks` in order without stopping at a failure, as a dry run shows them.

    A check whose prerequisite (NEEDS) failed is skipped rather than failed a second time;
    `remote` skips what each cluster task checks on its node (as iter_checks does).
    """
    env = env or Environment()
    plan = Plan(python=env.python)
    failures: list[Failure] = []
    broken: set[str] = set()
    for name in checks:
        reason = None
        if remote and name in (*ACCELERATOR_CHECKS, "python_modules"):
            reason = "checked by each cluster task on its node"
        elif not with_accelerator and name in ACCELERATOR_CHECKS:
            reason = "dry run: needs the accelerator host"
        elif NEEDS.get(name) in broken:
            reason = f"needs {NEEDS[name]}, which failed"
            broken.add(name)
        else:
            try:
                reason = _check(name, settings, plan, env)
            except HarnessError as exc:
                failures.append(Failure(name, exc))
                broken.add(name)
        if name not in broken or reason:
            (plan.skipped if reason else plan.passed).append(name)
        if report:
            status = "FAILED" if name in broken and not reason else (
                f"skipped ({reason})" if reason else "ok")
            report(f"preflight {name}: {status}")
    return PreflightResult(plan, tuple(failures))
