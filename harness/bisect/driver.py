"""`harness bisect`: plan a bisection from what the user gave, print it, run it, or resume one.

Everything the user gave is checked before anything is made: the axis kind (flaggems, the
default; python or image with STACKS), the steps it lists, the operator at both ends, every
setting its campaigns would take. A run claims OUT/bisect/<op>/<UTC stamp>/, keeps every A/B's
campaign under it and bisect.json up to date after each; interrupted, RESUME goes on from there.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import axes, executors, stats
from harness.axes.steps import Step, StepsGiven
from harness.bisect import document, render, search
from harness.bisect.campaigns import Campaigns, history_value
from harness.campaign import refs, start
from harness.campaign import resume as campaign_resume
from harness.errors import EXIT_BENCHMARK_FAILED, EXIT_OK, HarnessError, UsageError
from harness.fsutil import atomic_write_text, exclusive_lock
from harness.run.rundir import claim_run_dir, utc_stamp
from harness.settings import abspec, spec, variables

DEFAULT_KIND = "flaggems"
COMMAND = "bisect"
LOCK = ".bisect.lock"  # held by the one process that bisects a folder
# What makes a bisection the one it is: a resume may not give other values of these.
IDENTITY = ("op", "axis", "good", "bad", "stacks", "shape", "dtypes", "flaggems_dir")


@dataclass(frozen=True)
class Plan:
    kind: axes.AxisKind
    op: str
    given: dict[str, str]
    steps: tuple[Step, ...]
    settings: spec.Settings


def given_values(flags: Mapping[str, object], env: Mapping[str, str]) -> dict[str, str]:
    """Every variable of `harness bisect` the user gave (flag or environment), by flag dest."""
    return {var.dest: value for var in variables.TABLE
            if var.flag and COMMAND in var.commands
            and (value := var.given(flags, env)) is not None}


def plan(given: dict[str, str], env: Mapping[str, str]) -> Plan:
    """The bisection `given` describes; UsageError (one line) for anything it cannot run."""
    settings = spec.resolve(given, env)
    if not settings.op:
        raise UsageError("bisect needs OP: the operator whose rows regressed")
    executor = executors.named({}, env)
    if executor.remote:
        raise UsageError(f"ZL_EXECUTOR={executor.name!r} is not accepted by bisect: each "
                         "step's campaign decides what the next one compares, so they run "
                         f"here, one after another (EXECUTOR={executors.DEFAULT})")
    kind = axes.get(given.get("axis") or DEFAULT_KIND)
    if kind.steps is None:
        bisected = [k.name for k in axes.registry().all() if k.steps is not None]
        raise UsageError(f"AXIS={kind.name!r} cannot be bisected; expected one of: "
                         f"{', '.join(bisected)}")
    stacks = Path(given["stacks"]) if given.get("stacks") else None
    steps = kind.steps(StepsGiven(given.get("good"), given.get("bad"), settings.flaggems_dir,
                                  stacks))
    if kind.side_commits and settings.flaggems_dir is not None:
        ends = refs.Refs(steps[0].value, steps[-1].value, steps[0].value)
        for op, why in refs.one_sided(settings.flaggems_dir, ends, [settings.op]).items():
            raise UsageError(f"OP={op!r} cannot be bisected over this range: {why}")
    found = Plan(kind, settings.op, given, steps, settings)
    abspec.resolve_ab(campaigns(found, Path("."), env, print).flags(0, len(steps) - 1), env)
    return found


def campaigns(p: Plan, directory: Path, env: Mapping[str, str],
              out: Callable[[str], None]) -> Campaigns:
    return Campaigns(p.kind, p.op, p.given, p.steps, directory,
                     history_value(p.given, env, p.settings.out), env, out)


def most_tries(steps: int) -> int:
    """Steps tried beyond the ends where none is skipped: ceil(log2(steps - 1))."""
    return math.ceil(math.log2(steps - 1)) if steps > 2 else 0


def describe(p: Plan) -> list[str]:
    """A dry run's plan: the steps, what is tried first and how many at most."""
    last = len(p.steps) - 1
    first = search.next_index(0, last, set())
    lines = [f"bisect: {p.op}, AXIS={p.kind.name}: {len(p.steps)} steps, GOOD "
             f"{p.steps[0].label} .. BAD {p.steps[-1].label}"]
    lines += [f"  {render.step_text(p.steps, i)}" for i in range(len(p.steps))]
    lines.append(f"first: the ends' A/B (step 0 against step {last}): it must call a row "
                 "slower or faster, else the bisection stops there")
    if first is not None:
        lines.append(f"then: step {first} against step 0 and against step {last}")
    lines.append(f"at most {most_tries(len(p.steps))} steps tried beyond the ends where none "
                 "is skipped (two A/Bs each; a step whose code is an end's takes its verdict "
                 "untimed)")
    return lines


def dry_run(p: Plan, env: Mapping[str, str], out: Callable[[str], None]) -> int:
    for line in describe(p):
        out(line)
    out("the ends' campaign, as it would run:")
    where = p.settings.out / COMMAND / p.op / "<ts>"
    c = campaigns(p, where, env, out)
    flags = {**c.flags(0, len(p.steps) - 1), "dry_run": "1"}
    settings = spec.resolve(flags, env)
    return start.start(settings, flags, env, axes.resolve(p.kind.name, settings.backend),
                       abspec.resolve_ab(flags, env), out=out)


def new(p: Plan, env: Mapping[str, str], out: Callable[[str], None]) -> int:
    """Run the bisection `p` in a new folder."""
    directory = claim_run_dir(p.settings.out / COMMAND, p.op, utc_stamp())
    doc = document.Bisection(p.op, p.kind.name, p.given, p.steps)
    doc.save(directory)
    out(f"bisect: {directory}: {len(p.steps)} steps, at most {most_tries(len(p.steps))} "
        "tried beyond the ends")
    return drive(doc, directory, campaigns(p, directory, env, out), out)


def resume(directory: Path, flags: Mapping[str, object], env: Mapping[str, str],
           out: Callable[[str], None]) -> int:
    """Go on with the bisection in `directory`: its A/Bs that ended are taken as they are."""
    doc = document.read(directory)
    now = given_values(flags, env)
    for key in IDENTITY:
        if key in now and now[key] != doc.given.get(key):
            make = next(v.make for v in variables.TABLE if v.flag and v.dest == key)
            raise UsageError(f"{make}={now[key]!r} is not this "
                             f"bisection's ({doc.given.get(key)!r}); RESUME goes on with the "
                             "one it was, or start a new one")
    given = {**doc.given, **{k: v for k, v in now.items() if k != "resume"}}
    p = plan(given, env)
    if [s.value for s in p.steps] != [s.value for s in doc.steps]:
        raise UsageError(f"{directory}: its steps are no longer what GOOD..BAD lists; start "
                         "a new bisection")
    out(f"bisect: resuming {directory}: {len(doc.comparisons)} A/Bs already run")
    return drive(doc, directory, campaigns(p, directory, env, out), out)


def drive(doc: document.Bisection, directory: Path, runs: Campaigns,
          out: Callable[[str], None]) -> int:
    """Search, holding the folder's lock: two processes never bisect one folder at once."""
    def busy() -> UsageError:
        return UsageError(f"{directory} is being bisected by another process now; RESUME it "
                          "once that one ends")

    with exclusive_lock(directory / LOCK, busy):
        return _search(doc, directory, runs, out)


def _search(doc: document.Bisection, directory: Path, runs: Campaigns,
            out: Callable[[str], None]) -> int:
    """Search, taking each A/B already in `doc` and saving `doc` after each new one."""
    doc.state, doc.tried = document.RUNNING, []

    last = len(doc.steps) - 1

    def judge(a: int, b: int) -> search.Comparison:
        if (known := doc.known(a, b)) is not None:
            out(f"bisect: A/B of step {a} against step {b}: taken from {known.directory}")
            return known
        floor = None
        if (a, b) != (0, last) and not runs.user_floor():
            ends = doc.known(0, last)
            assert ends is not None  # the search judges the ends first
            floor = search.half_step_floor(ends, search.moved(ends.rows)[1],
                                           stats.MIN_NOISE_FLOOR_PCT, stats.MAX_NOISE_FLOOR_PCT)
        found = runs.run(a, b, floor)
        doc.comparisons.append(found)
        doc.save(directory)
        return found

    def tried(t: search.Tried) -> None:
        doc.tried.append(t)
        doc.save(directory)
        out(render.tried_line(t, doc.steps))

    try:
        outcome = search.search(doc.steps, judge, tried)
    except KeyboardInterrupt:  # Interrupted (a signal) among them
        doc.state = document.INTERRUPTED
        doc.save(directory)
        out(f"bisect: interrupted; RESUME={directory} (harness bisect --resume {directory}) "
            "goes on from the A/Bs that ended")
        raise
    except HarnessError:
        if not doc.comparisons:  # the ends' campaign could not start: nothing was made
            shutil.rmtree(directory, ignore_errors=True)
        raise
    doc.outcome, doc.state = outcome, document.DONE
    doc.save(directory)
    atomic_write_text(directory / document.BISECT_MD,
                      render.markdown(doc.op, doc.kind, doc.steps, outcome))
    for line in render.headline(outcome, doc.steps):
        out(f"bisect: {line}")
    out(f"bisect: {directory / document.BISECT_MD}")
    return EXIT_BENCHMARK_FAILED if outcome.state is search.State.ENDS_FAILED else EXIT_OK


def run(flags: Mapping[str, Any], env: Mapping[str, str], out: Callable[[str], None]) -> int:
    """`harness bisect`: a new bisection, its dry run, or (RESUME) one that goes on."""
    if campaign_resume.asked(flags):
        return resume(Path(str(flags["resume"])), flags, env, out)
    p = plan(given_values(flags, env), env)
    if p.settings.dry_run:
        return dry_run(p, env, out)
    return new(p, env, out)
