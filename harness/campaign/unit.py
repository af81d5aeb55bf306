"""`harness ab-unit`: one unit of a campaign, its two sides back to back in their sides' caches."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from harness.axes import Axis
from harness.campaign import ab, refs
from harness.campaign.document import load
from harness.campaign.plan import CACHE_DIR, LOGS_DIR, SIDES, UNMATCHED_DIR, Unit
from harness.contract import identity
from harness.contract.states import OK, SKIPPED
from harness.errors import (
    EXIT_BENCHMARK_FAILED,
    HarnessError,
    NoSpace,
    PreflightError,
    UsageError,
    no_space,
)
from harness.fsutil import take_lock
from harness.run import artifacts, runner
from harness.run.checks import Environment
from harness.run.preflight import Plan, run_preflight
from harness.settings import variables
from harness.settings.spec import Settings

# How long a unit waits for a process that still holds it: a killed driver's orphan gets
# SIGTERM from the parent-death signal and stops within its grace times (7 s).
UNIT_LOCK_WAIT_S = 60.0


def resume_hint(directory: Path) -> str:
    """What completes the campaign once the cause of its stop is gone."""
    return f"harness ab --resume {directory}"


KEPT_UNMATCHED = 6  # of side B's artifacts that side A never had, in UNMATCHED_DIR


def side_cache(directory: Path, side: str) -> Path:
    """The side's FlagGems and Triton caches, shared by all of its units, never by the other
    side's."""
    return directory / CACHE_DIR / side


def cache_kernels(directory: Path, side: str) -> set[str]:
    """A fingerprint per kernel the side's campaign cache holds now (kernel_fingerprints)."""
    found = _triton_cache(directory, side)
    return artifacts.kernel_fingerprints(*found) if found else set()


def cache_files(directory: Path, side: str) -> dict[str, Path]:
    """The artifacts the side's campaign cache holds now, by fingerprint (artifact_files)."""
    found = _triton_cache(directory, side)
    return artifacts.artifact_files(*found) if found else {}


def _triton_cache(directory: Path, side: str) -> tuple[Path, ...] | None:
    """The side's campaign Triton cache and the private roots its artifacts name (the side's
    cache; two FlagGems commits: the side's own tree); None where it holds none."""
    cache = side_cache(directory, side)
    if not (cache / "triton").is_dir():
        return None
    tree = refs.side_tree(directory, side)
    return (cache / "triton", cache, *([tree] if tree.is_dir() else []))


def keep_unmatched(directory: Path, seen_a: set[str], found: Mapping[str, Mapping[str, Path]]
                   ) -> None:
    """Copy, before the caches go, up to KEPT_UNMATCHED of side B's artifacts whose fingerprint
    side A never had (`seen_a` beside `found["A"]`) into UNMATCHED_DIR/B/<entry>/<file>, each
    with side A's file of the same name where its cache has one (UNMATCHED_DIR/A/...): what
    made a switch read live by its code, or an A/A's two sides differ, stays to be looked at.
    Files kept by an earlier drop count toward the bound."""
    unmatched = sorted((path for fp, path in found.get("B", {}).items()
                        if fp not in seen_a and fp not in found.get("A", {})),
                       key=lambda p: (p.stat().st_size, str(p)))
    kept = directory / UNMATCHED_DIR
    room = KEPT_UNMATCHED - sum(1 for p in (kept / "B").glob("*/*") if p.is_file())
    by_name = {(p.parent.name, p.name): p for p in found.get("A", {}).values()}
    names = {p.name: p for p in found.get("A", {}).values()}
    for path in unmatched[:max(0, room)]:
        twin = by_name.get((path.parent.name, path.name)) or names.get(path.name)
        for side, source in (("B", path), ("A", twin)):
            if source is not None:
                target = kept / side / path.parent.name / source.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)


def cache_env(directory: Path, side: str) -> dict[str, str]:
    cache = side_cache(directory, side).resolve()
    return {"FLAGGEMS_CACHE_DIR": str(cache / "flaggems"),
            "TRITON_CACHE_DIR": str(cache / "triton")}


def _entries(triton: Path) -> set[str]:
    return {p.name for p in triton.iterdir()} if triton.is_dir() else set()


def added_artifacts(triton: Path, before: set[str], *roots: Path) -> tuple[int, list[str]]:
    """(kernels, fingerprints) of the Triton cache entries that appeared since `before`.

    Units of one side running at once on two devices share the cache, so an entry may belong
    to the other unit; the campaign's verdict also fingerprints each side's whole cache.
    """
    fresh = sorted(_entries(triton) - before)
    kernels, hashes = 0, set()
    for name in fresh:
        entry = triton / name
        kernels += sum(1 for _ in entry.glob("__grp__*.json"))
        hashes |= {artifacts.fingerprint(p.read_bytes(), artifacts.roots_of(*roots))
                   for p in entry.iterdir()
                   if p.is_file() and p.suffix not in artifacts.SKIPPED_SUFFIXES}
    return kernels, sorted(hashes)


def _set_aside(run_dir: Path) -> None:
    """Keep an interrupted attempt's run directory under another name: the unit reruns whole."""
    if not run_dir.exists():
        return
    n = 1
    while run_dir.with_name(f"{run_dir.name}.attempt{n}").exists():
        n += 1
    run_dir.rename(run_dir.with_name(f"{run_dir.name}.attempt{n}"))


def _note_cache(run_dir: Path, cache: Path, kernels: int, hashes: list[str]) -> None:
    """The run compiled into its side's campaign cache, not a private one: say what it added."""
    identity.update_identity(run_dir, tuner_cache_dir=str(cache), compiled_kernels=kernels,
                             compiled_artifacts=hashes)


def side_ends(directory: Path, unit: Unit) -> dict[str, tuple[str, str | None]]:
    """Each side's (state, reason) as its run_identity.json says (runner: ok, skipped,
    failed, ...), for the sides that left one."""
    found = {}
    for side in unit.sides:
        doc = identity.read_identity(directory / unit.run_rel(side))
        if doc is not None and doc.state is not None:
            found[side] = (doc.state, doc.reason)
    return found


def skip_reason(directory: Path, unit: Unit) -> str | None:
    """pytest's reason where every side of the unit was skipped; None otherwise."""
    ends = side_ends(directory, unit)
    if len(ends) != len(unit.sides) or any(s != SKIPPED for s, _ in ends.values()):
        return None
    return "; ".join(dict.fromkeys(str(why) for _, why in ends.values()))


def skipped_in_round_0(directory: Path, unit: Unit) -> str | None:
    """pytest's reason where `unit` is a later round of an operator whose round 0 every side
    skipped; None otherwise. Such a round is not run: nothing of it could be compared, and
    side B would have no winners of A's round 0 to replay."""
    return skip_reason(directory, Unit(unit.op, 0)) if unit.round else None


def _not_run(directory: Path, unit: Unit, why: str) -> None:
    """Each side's run directory of a round that is not run, saying so in its identity (the
    state and reason that skip_reason and the reports read)."""
    for side in unit.sides:
        run_dir = directory / unit.run_rel(side)
        _set_aside(run_dir)
        run_dir.mkdir(parents=True)
        identity.write_identity(run_dir, {"op": unit.op, "state": SKIPPED, "reason": why,
                                          "rows": 0, identity.NOT_RUN: "round 0 was skipped"})


def unit_end(directory: Path, unit: Unit, codes: list[int]) -> tuple[int, str | None]:
    """The unit's exit code and, where it is not ok, its last line: why. Every side skipped
    is 0 (the driver reads skipped); one side skipped and the other not is a failure, since
    nothing of it can be compared."""
    ends = side_ends(directory, unit)
    rc = next((rc for rc in codes if rc), 0)
    states = {state for state, _ in ends.values()}
    if SKIPPED in states and states != {SKIPPED}:
        side = next(s for s, (state, _) in ends.items() if state == SKIPPED)
        return rc or EXIT_BENCHMARK_FAILED, (f"{unit.id}: side {side} skipped "
                                             f"({ends[side][1]}) and the other did not")
    bad = next(((s, e) for s, e in ends.items() if e[0] not in (OK, SKIPPED)), None)
    if rc and bad is not None:
        return rc, f"{unit.id}: side {bad[0]} {bad[1][0]}: {bad[1][1]}"
    return rc, None


def run_unit(settings: Settings, plans: Mapping[str, Plan], directory: Path, unit: Unit,
             axis: Axis, out: Callable[[str], None] = print) -> int:
    """Run the unit's sides in its round's order, each with its side's plan (`plans`: its
    interpreter, where the sides are two stacks); exit 0 (every side ok, or every side
    skipped), or the first side's failing code, saying why on the last line."""
    codes = []
    only = variables.named("WORKERS").lookup({}, variables.environ())[0]
    for side in unit.sides:
        step = ab.SideRun(side, unit.round, axis.value(side))
        op_dir = directory / unit.op
        run_dir = op_dir / side / f"r{unit.round}"
        _set_aside(run_dir)
        env = axis.side_env(side)
        out(f"AB_STEP {unit.op}/{step.rel} "
            f"{' '.join(f'{k}={v}' for k, v in env.items()) or '(A/A)'}")
        cache = side_cache(directory, side).resolve()
        before = _entries(cache / "triton")
        # Each round has workers of its own: what a worker process keeps of itself (an offset
        # of a few % on a microsecond row, seen on an H200) then varies between rounds, as a
        # fresh process's does, and is never a constant difference between the sides.
        generation = f"r{unit.round}" if only not in SIDES or only == side else None
        try:
            base = side_base(settings, axis, directory, side)
            rc, run_dir = runner.execute(ab.side_settings(base, step, op_dir, axis),
                                         plans[side],
                                         run_dir=run_dir,
                                         extra_env={**env, **cache_env(directory, side)},
                                         step=f"{unit.op}/{step.rel}",
                                         worker=generation,
                                         image=axis.image(side))
        except NoSpace:
            raise  # the other side would only fill the device further: the unit stops here
        except HarnessError as exc:  # e.g. round 0 left no records to replay
            out(f"error: {exc}")
            codes.append(exc.exit_code)
            continue
        _note_cache(run_dir, cache, *added_artifacts(cache / "triton", before, cache,
                                                     *filter(None, [base.flaggems_dir])))
        codes.append(rc)
    rc, why = unit_end(directory, unit, codes)
    if why:
        out(why)  # the last line of the unit's log: its reason in campaign.json
    return rc


def side_base(settings: Settings, axis: Axis, directory: Path, side: str) -> Settings:
    """The settings `side`'s runs start from: the campaign's, with the side's own FlagGems
    tree where the sides are two FlagGems commits (refs.compose)."""
    if not axis.kind.side_commits:
        return settings
    return dataclasses.replace(settings, flaggems_dir=refs.side_tree(directory, side).resolve())


def side_plans(settings: Settings, axis: Axis, directory: Path,
               out: Callable[[str], None] = print) -> dict[str, Plan]:
    """Each side's preflight plan: one for both, or, where the sides are two stacks, each
    side's own, in its interpreter or its FlagGems tree (PreflightError naming the side that
    fails a check)."""
    if not axis.kind.side_preflight:  # an image's own stack is checked in it, by its run
        plan = run_preflight(settings, report=out, remote=axis.image("A") is not None)
        return {side: plan for side in SIDES}
    plans = {}
    for side in SIDES:
        python = axis.python(side)
        env = Environment(python=python) if python else Environment()
        named = axis.kind.side_label(axis, side)
        try:
            plans[side] = run_preflight(side_base(settings, axis, directory, side), env,
                                        report=out)
        except PreflightError as exc:
            raise PreflightError(exc.check, f"side {side} ({named}): {exc.detail}") from None
    return plans


def hold_unit_lock(directory: Path, unit_id: str, wait_s: float = UNIT_LOCK_WAIT_S) -> int:
    """Take the unit's lock for the rest of this process (the descriptor that holds it): the
    system lets go when the process has ended, after it stopped its own children, so a resume
    never starts the unit beside the interpreter's shutdown (a release before exit did). A
    pytest in a worker belongs to the driver's worker host and ends with it (or, where only
    this process died, when the host stops the worker it leased). A unit that a live process
    still holds (the orphan of a killed driver, stopping) is waited for, never run, renamed or
    read beside it; UsageError after `wait_s`."""
    path = directory / LOGS_DIR / f"{unit_id.replace('/', '-')}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    return take_lock(path, lambda: UsageError(
        f"unit {unit_id!r} of {str(directory)!r} is still run by another process after "
        f"{wait_s:.0f} s; stop it, then resume"), wait_s)


def run_unit_command(directory: Path, unit_id: str, settings: Settings,
                     out: Callable[[str], None] = print) -> int:
    """`harness ab-unit DIR UNIT`: a unit's two sides, as an executor's task runs them, under
    the unit's lock."""
    campaign = load(directory, "campaign")
    entry = campaign.unit(unit_id)
    unit = Unit(entry.op, entry.round)
    hold_unit_lock(directory, unit_id)  # `harness ab-unit` runs one unit: held until it exits
    try:
        if (why := skipped_in_round_0(directory, unit)) is not None:  # nothing to run or check
            _not_run(directory, unit, why)
            out(f"AB_STEP {unit.id} not run: round 0 was skipped on every side ({why})")
            return 0
        plans = side_plans(settings, campaign.axis, directory, out)
        return run_unit(settings, plans, directory, unit, campaign.axis, out)
    except (NoSpace, OSError) as exc:
        if (full := no_space(exc)) is None:
            raise
        raise NoSpace(full.path, resume_hint(directory), full.limit) from exc
