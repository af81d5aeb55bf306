"""Preflight: the checks run in DESIGN.md's order before anything is created or started."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from harness.backends import Device
from harness.errors import EXIT_OK, HarnessError, PreflightError
from harness.providers import flaggems
from harness.run.checks import BY_NAME, CHECKS, NEEDS, Environment, Facts, Skip
from harness.settings.spec import Settings

ACCELERATOR_CHECKS = frozenset({"backend", "device"})
REMOTE_CHECKS = ACCELERATOR_CHECKS | {"python_modules"}  # a cluster task checks them on its node
# What the image decides: its own FlagGems (FLAGGEMS_DIR is never passed in) and its stack.
IMAGE_CHECKS = REMOTE_CHECKS | {"flaggems_dir", "benchmark_file", "test_node", "dtypes"}


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


def _skip_reason(name: str, with_accelerator: bool, remote: bool, image: bool) -> str | None:
    if image and name in IMAGE_CHECKS:
        return "made in the image, against its FlagGems and stack"
    if remote and name in REMOTE_CHECKS:
        return "checked by each cluster task on its node"
    if not with_accelerator and name in ACCELERATOR_CHECKS:
        return "dry run: needs the accelerator host"
    return None


def _run(name: str, settings: Settings, facts: Facts, env: Environment) -> Step:
    try:
        outcome = BY_NAME[name](settings, facts, env)
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
        if (reason := _skip_reason(name, with_accelerator, remote,
                                   settings.planned_for_image)) is not None:
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
