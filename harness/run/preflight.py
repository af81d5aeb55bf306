"""Named preflight checks, run in DESIGN.md's order before anything is created or started."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TypedDict

import yaml

from harness.backends import Device
from harness.contract import records
from harness.errors import EXIT_OK, HarnessError, PreflightError, UsageError
from harness.executors.devices import visible_devices
from harness.providers import benchmark_classes, flaggems
from harness.run.probe import probe_python
from harness.settings.spec import VARS_BY_MAKE, Settings

ACCELERATOR_CHECKS = frozenset({"backend", "device"})
REMOTE_CHECKS = ACCELERATOR_CHECKS | {"python_modules"}  # a cluster task checks them on its node
# A check that needs another's result: when that one failed, it is skipped, not failed again.
NEEDS = {"benchmark_file": "flaggems_dir", "test_node": "benchmark_file", "dtypes": "test_node",
         "device": "backend"}


@dataclass(frozen=True, kw_only=True)
class PartialPlan:
    """What the checks of a dry run established: the node is None where it was not resolved."""

    node: flaggems.Node | None = None
    op: str | None = None
    devices: tuple[Device, ...] = ()
    python: str = sys.executable
    python_version: str | None = None
    versions: Mapping[str, str] = field(default_factory=dict)
    features: Mapping[str, bool] = field(default_factory=dict)  # probe.FEATURE_MODULES found or not
    passed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    def with_node(self, node: flaggems.Node, op: str) -> Plan:
        """This plan for `node`, whose run directory is named `op`."""
        return Plan(**{**vars(self), "node": node, "op": op})


@dataclass(frozen=True, kw_only=True)
class Plan(PartialPlan):
    """What preflight established: the node to run and facts the run header records."""

    node: flaggems.Node
    op: str


class Facts(TypedDict, total=False):
    """What the checks established so far; each key is set by the check named beside it."""

    flaggems_dir: Path  # flaggems_dir
    node: flaggems.Node  # test_node
    op: str  # test_node
    devices: tuple[Device, ...]  # device
    python_version: str  # python_modules
    versions: dict[str, str]  # python_modules
    features: dict[str, bool]  # python_modules


@dataclass(frozen=True)
class Skip:
    """A check that does not apply to these settings, and why."""

    reason: str


@dataclass(frozen=True)
class Environment:
    """What the checks may touch outside the settings; tests replace it."""

    python: str = sys.executable
    which: Callable[[str], str | None] = shutil.which
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run


# A check raises HarnessError when it fails; else it returns the facts it established (None:
# none) or why it does not apply. It reads only the facts of the checks NEEDS puts before it.
Check = Callable[[Settings, Facts, Environment], "Facts | Skip | None"]


# --------------------------------------------------------------------------- the checks


def _out(settings: Settings, facts: Facts, env: Environment) -> None:
    """OUT, or the directory it will be created in, must let this user create directories."""
    out = settings.out
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


def _flaggems_dir(settings: Settings, facts: Facts, env: Environment) -> Facts:
    """FLAGGEMS_DIR must be set (or the backend embed a suite) and hold benchmark/."""
    if settings.flaggems_dir is None:
        raise PreflightError("flaggems_dir", f"FLAGGEMS_DIR is not set (BACKEND="
                             f"{settings.backend.name} has no embedded suite)")
    flaggems.check_flaggems_dir(settings.flaggems_dir)
    return {"flaggems_dir": settings.flaggems_dir}


def _benchmark_file(settings: Settings, facts: Facts, env: Environment) -> None:
    """The checkout must have the benchmark layout the harness drives."""
    flaggems.check_layout(facts["flaggems_dir"])


def _test_node(settings: Settings, facts: Facts, env: Environment) -> Facts:
    """OP or TEST_NODE must name exactly one node of the checkout."""
    if not (settings.op or settings.test_node):
        raise PreflightError("test_node", "nothing to run: set OP or TEST_NODE")
    fg_dir = facts["flaggems_dir"]
    node = flaggems.resolve_node(flaggems.scan_tree(fg_dir), op=settings.op,
                                 op_file=settings.op_file, test_node=settings.test_node,
                                 flaggems_dir=fg_dir)
    return {"node": node, "op": settings.op or flaggems.op_name_for(node)}


def _dtypes(settings: Settings, facts: Facts, env: Environment) -> Skip | None:
    """DTYPES must be among those the benchmark declares (FlagGems fails the node otherwise);
    where they are not known statically, among those FlagGems' --dtypes accepts."""
    if not settings.dtypes:
        return Skip("DTYPES unset: the benchmark's own")
    node = facts["node"]
    selectable = benchmark_classes.SELECTABLE_DTYPES
    declared = benchmark_classes.benchmark_dtypes(facts["flaggems_dir"], node)
    accepted = [d for d in declared if d in selectable] if declared else sorted(selectable)
    outside = [d for d in settings.dtypes if d not in accepted]
    if outside:
        whose = (f"{node.nodeid} declares (of those FlagGems' --dtypes accepts)" if declared
                 else "FlagGems' --dtypes accepts")
        label = VARS_BY_MAKE["DTYPES"].label(settings.sources.get("DTYPES", "default"))
        raise UsageError(f"{label}={','.join(settings.dtypes)!r} is not accepted: "
                         f"{', '.join(outside)} is not measured; {whose}: "
                         f"{', '.join(accepted) or 'none'}")
    return None


def _shape_file(settings: Settings, facts: Facts, env: Environment) -> Skip | None:
    """In SHAPE_MODE=file, SHAPE_FILE must be a shape file FlagGems reads."""
    if settings.shape_mode != "file":
        return Skip("SHAPE_MODE=upstream")
    _check_shape_file(settings.shape_file)
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


def _replay_from(settings: Settings, facts: Facts, env: Environment) -> Skip | None:
    """REPLAY_FROM, where set, must be a directory whose autotune records read cleanly."""
    if settings.replay_from is None:
        return Skip("REPLAY_FROM unset")
    if not settings.replay_from.is_dir():
        raise PreflightError("replay_from", f"REPLAY_FROM={str(settings.replay_from)!r} "
                             "is not a run or records directory")
    try:  # the records are read again when the run starts: corrupt ones fail here
        records.read_records(settings.replay_from)
    except UsageError as exc:
        raise PreflightError("replay_from", str(exc)) from None
    return None


def _backend(settings: Settings, facts: Facts, env: Environment) -> None:
    """The backend's device tool must be on PATH: a sign that this is one of its hosts."""
    backend = settings.backend
    tool = backend.smi_command[0] if backend.smi_command else None
    if tool and env.which(tool) is None:
        raise PreflightError("backend", f"{tool} not found on PATH: is this a "
                             f"{backend.name} host? (BACKEND={backend.name})")


def _device(settings: Settings, facts: Facts, env: Environment) -> Facts | Skip:
    """At least one device must be visible, and DEVICES name only devices the tool lists."""
    backend = settings.backend
    if not backend.is_accelerator:  # its one device is the host: DEVICES is moot
        return Skip("no accelerator on this backend" + (
            f"; DEVICES={','.join(settings.devices)} is ignored" if settings.devices else ""))
    try:
        found = backend.enumerate_devices(run=env.run)
    except ValueError as exc:  # the tool answered in a format its parser does not know
        raise PreflightError("device", str(exc)) from None
    if found:  # a tool that lists nothing leaves the check below to say so
        _check_devices_exist(settings, found)
    devices = tuple(visible_devices(found, settings))
    if not devices:
        wanted = ",".join(settings.devices) or "any"
        raise PreflightError("device", f"no visible {backend.name} device "
                             f"(DEVICES={wanted}; found {len(found)})")
    return {"devices": devices}


def _check_devices_exist(settings: Settings, found: list[Device]) -> None:
    """DEVICES may name only devices the vendor tool lists, by index or UUID."""
    known = {str(d.index) for d in found} | {d.uuid for d in found if d.uuid}
    missing = [item for item in settings.devices if item not in known]
    if missing:
        listed = ", ".join(str(d.index) + (f" ({d.uuid})" if d.uuid else "") for d in found)
        raise PreflightError("device", f"DEVICES={','.join(settings.devices)!r} names "
                             f"{', '.join(missing)}, which {settings.backend.name} does not "
                             f"have; its devices: {listed or 'none found'}")


def _python_modules(settings: Settings, facts: Facts, env: Environment) -> Facts:
    """The interpreter that runs pytest must find the backend's modules; it tells versions."""
    probe = probe_python(env.python, settings.backend.python_modules, env.run,
                         flaggems.pytest_pythonpath(settings.flaggems_dir))
    if probe["missing"]:
        raise PreflightError("python_modules", f"{env.python} cannot import "
                             f"{', '.join(probe['missing'])}")
    return {"python_version": probe["python"], "versions": probe["versions"],
            "features": probe.get("features", {})}


_BY_NAME: dict[str, Check] = {
    "out": _out, "flaggems_dir": _flaggems_dir, "benchmark_file": _benchmark_file,
    "test_node": _test_node, "dtypes": _dtypes, "shape_file": _shape_file,
    "replay_from": _replay_from, "backend": _backend, "device": _device,
    "python_modules": _python_modules,
}
CHECKS = tuple(_BY_NAME)  # in DESIGN.md's order


# --------------------------------------------------------------------------- running them


@dataclass(frozen=True)
class Step:
    """One check's outcome: passed, skipped (`reason`) or failed (`error`), and its facts."""

    name: str
    reason: str | None = None
    error: HarnessError | None = None
    facts: Facts = field(default_factory=Facts)

    @property
    def status(self) -> str:
        """What its preflight line shows: ok, skipped (why) or FAILED."""
        if self.error is not None:
            return "FAILED"
        return f"skipped ({self.reason})" if self.reason else "ok"


def _skip_reason(name: str, with_accelerator: bool, remote: bool) -> str | None:
    if remote and name in REMOTE_CHECKS:
        return "checked by each cluster task on its node"
    if not with_accelerator and name in ACCELERATOR_CHECKS:
        return "dry run: needs the accelerator host"
    return None


def _run(name: str, settings: Settings, facts: Facts, env: Environment) -> Step:
    try:
        outcome = _BY_NAME[name](settings, facts, env)
    except HarnessError as exc:
        return Step(name, error=exc)
    if isinstance(outcome, Skip):
        return Step(name, outcome.reason)
    return Step(name, facts=outcome or {})


def _steps(settings: Settings, env: Environment, with_accelerator: bool, remote: bool,
           checks: Sequence[str]) -> Iterator[Step]:
    """Run `checks` in order, each one only when the caller asks for the next step; a check
    whose prerequisite (NEEDS) failed, or was itself skipped for that reason, is skipped."""
    facts: Facts = {}
    unmet: set[str] = set()
    for name in checks:
        if (reason := _skip_reason(name, with_accelerator, remote)) is not None:
            yield Step(name, reason)
        elif (need := NEEDS.get(name)) in unmet:
            unmet.add(name)
            yield Step(name, f"needs {need}, which failed")
        else:
            step = _run(name, settings, facts, env)
            if step.error is not None:
                unmet.add(name)
            facts.update(step.facts)
            yield step


def _plan(python: str, steps: Sequence[Step]) -> PartialPlan:
    """The plan of `steps`, built once they ran: a Plan where the node was resolved."""
    facts: Facts = {}
    for step in steps:
        facts.update(step.facts)
    partial = PartialPlan(
        devices=facts.get("devices", ()), python=python,
        python_version=facts.get("python_version"), versions=facts.get("versions", {}),
        features=facts.get("features", {}),
        passed=tuple(s.name for s in steps if s.reason is None and s.error is None),
        skipped=tuple(s.name for s in steps if s.reason is not None))
    if "node" in facts and "op" in facts:
        return partial.with_node(facts["node"], facts["op"])
    return partial


def iter_checks(settings: Settings, env: Environment | None = None,
                with_accelerator: bool = True, remote: bool = False) -> Iterator[Step]:
    """Run the checks in order, yielding each one's step after it passed or was skipped.

    The first failure raises its error (PreflightError, or UsageError for a bad value) and no
    later check runs; nothing is created on disk either way. `remote`: the units run on a
    cluster's nodes, which check the accelerator and the Python stack.
    """
    for step in _steps(settings, env or Environment(), with_accelerator, remote, CHECKS):
        if step.error is not None:
            raise step.error
        yield step


def run_preflight(settings: Settings, env: Environment | None = None,
                  with_accelerator: bool = True,
                  report: Callable[[str], None] | None = None, remote: bool = False) -> Plan:
    """Run every check; report one line per check; return the plan or raise PreflightError."""
    env = env or Environment()
    steps = []
    for step in iter_checks(settings, env, with_accelerator, remote):
        if report:
            report(f"preflight {step.name}: {step.status}")
        steps.append(step)
    plan = _plan(env.python, steps)
    if not isinstance(plan, Plan):  # test_node resolves the node or fails: it never skips
        raise RuntimeError("preflight passed without resolving a node")
    return plan


class Failure(NamedTuple):
    """A check that failed, with the error a run would stop on."""

    check: str
    error: HarnessError


@dataclass(frozen=True)
class PreflightResult:
    """Every check's outcome: the plan as far as it got, and each failure in check order."""

    plan: PartialPlan
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
    steps = []
    for step in _steps(settings, env, with_accelerator, remote, checks):
        if report:
            report(f"preflight {step.name}: {step.status}")
        steps.append(step)
    failures = tuple(Failure(s.name, s.error) for s in steps if s.error is not None)
    return PreflightResult(_plan(env.python, steps), failures)
