"""The one campaign driver: its units as tasks of an executor, recorded as they end, then the
report."""

from __future__ import annotations

import dataclasses
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from harness.campaign import adaptive, finish, nospace, plan
from harness.campaign.document import Campaign, DriverRecord, utc_now
from harness.campaign.plan import CACHE_DIR, LOGS_DIR, SIDES, Unit
from harness.campaign.unit import cache_files, keep_unmatched, side_cache, skip_reason
from harness.contract.states import (
    FINISHED,
    INTERRUPTED,
    OK,
    PENDING,
    RUNNING,
    SKIPPED,
    SUBMITTED,
    CampaignState,
)
from harness.errors import (
    HarnessError,
    Interrupted,
    NoSpace,
    UsageError,
)
from harness.executors.base import Ended, Executor, Outcome, Task
from harness.executors.procs import HeldSignal, deferred_signals
from harness.fsutil import exclusive_lock
from harness.report.sources import DRIVER_LOCK
from harness.settings import cmdline, variables
from harness.settings.spec import Settings

LOCK_FILE = DRIVER_LOCK  # held by the one driver of a campaign
LOOK_WAIT_S = 2.0  # what a driver waits out of a look at its lock (harness summary)


def unit_argv(directory: Path, argv: list[str], node: str, unit_id: str) -> list[str]:
    """`harness ab-unit` for one unit: the campaign's settings and its node (the executor adds
    the device)."""
    return cmdline.harness_argv("ab-unit", str(directory), unit_id, *argv,
                                *cmdline.flag_args({"TEST_NODE": node}))


def unit_log(directory: Path, unit_id: str) -> Path:
    return directory / LOGS_DIR / f"{unit_id.replace('/', '-')}.log"


def unit_tasks(directory: Path, campaign: Campaign, timeout_s: float | None = None,
               workers: str = "1") -> list[Task]:
    """Every unit still to run as a task, in running order. A later round replays its
    operator's A/r0 records, so it waits for round 0 where round 0 runs too, and its array
    (a cluster's) starts after round 0's. Each may run `timeout_s` (UNIT_TIMEOUT; None: no
    limit), more for an operator whose wall the campaign knows (plan.unit_limit). A task is
    told WORKERS where it names one side (the other's runs are fresh processes)."""
    name = variables.named("WORKERS").env
    env = {name: workers} if name and workers in SIDES else {}
    todo = plan.units_to_run(campaign)
    ids = {u.id for u in todo}
    tasks = []
    for unit in todo:
        first = Unit(unit.op, 0).id
        node = campaign.ops[unit.op].node or ""
        tasks.append(Task(unit.id, tuple(unit_argv(directory, campaign.argv, node, unit.id)),
                          unit_log(directory, unit.id),
                          after=first if unit.round and first in ids else None,
                          stage="r0" if unit.round == 0 else "later",
                          note=f"[{''.join(unit.sides)}]",
                          env=env,
                          timeout_s=plan.unit_limit(timeout_s, campaign.walls.get(unit.op))))
    return tasks


def _run_rounds(directory: Path, campaign: Campaign, executor: Executor, tasks: list[Task],
                current: list[UnitEvents], out: Callable[[str], None],
                more_tasks: Callable[[], list[Task]],
                on_round: Callable[[], None] | None = None,
                held: HeldSignal | None = None) -> Outcome:
    """Run `tasks`; in a ROUNDS=auto campaign, then each round its looks add (adaptive), until
    none does or a signal stops it. `current` gets each batch's events, the last one last.
    `held` holds signals from when a batch of units has ended unstopped (the executor gives
    its own handlers back then): one that came while ROUNDS=auto planned another round stops
    the campaign there; one after the last round waits for the caller to write its files."""
    if not tasks and campaign.auto is None:  # a resume with nothing left: no device to wait for
        current.append(UnitEvents(directory, campaign, 0, executor.slots, out))
        if held is not None:
            held.hold()
        return Outcome()
    with executor.session():  # one worker host for every round (each has its own workers)
        while True:
            current.append(UnitEvents(directory, campaign, len(tasks), executor.slots, out,
                                      began=current[0].began if current else None,
                                      on_round=on_round))
            outcome = executor.run(tasks, current[-1])
            if outcome.signal is not None or outcome.detached:
                return outcome
            if held is not None:
                held.hold()
            if campaign.auto is None or not adaptive.add_round(directory, campaign, out):
                return outcome
            campaign.save(directory)
            if held is not None and held.signum is not None:
                return Outcome(held.take())
            tasks = more_tasks()
            if not tasks:  # a look that owed a round it could not plan: nothing runs it
                return outcome


@contextmanager
def sole_driver(directory: Path) -> Iterator[None]:
    """Hold the campaign's lock: two drivers would run its units twice and overwrite each
    other's campaign.json."""
    with exclusive_lock(directory / LOCK_FILE, lambda: UsageError(
            f"campaign {str(directory)!r} is being run by another harness process; wait for "
            "it, or stop it and resume"), wait_s=LOOK_WAIT_S):
        yield


def check_no_driver(directory: Path) -> None:
    """UsageError, as sole_driver gives it, when another driver runs the campaign now: checked
    before a resume prints its plan, so that a refused resume says only why."""
    with sole_driver(directory):
        pass


def make_side_caches(directory: Path) -> None:
    for side in SIDES:
        for kind in ("flaggems", "triton"):
            (side_cache(directory, side) / kind).mkdir(parents=True, exist_ok=True)


def drop_side_caches(directory: Path, campaign: Campaign) -> None:
    """Fingerprint what each side's cache compiled (kept in campaign.json for liveness), then
    remove the caches: a resume starts them afresh."""
    seen = campaign.side_artifacts
    found = {side: cache_files(directory, side) for side in SIDES}
    try:
        keep_unmatched(directory, set(seen.get("A", ())), found)
    except OSError:  # a full disk: the fingerprints below are what liveness needs
        pass
    for side in SIDES:
        if found[side]:
            seen[side] = sorted({*seen.get(side, ()), *found[side]})
    try:
        campaign.save(directory)
    finally:  # on a full device too: the caches are what frees it
        shutil.rmtree(directory / CACHE_DIR, ignore_errors=True)


class UnitEvents:
    """The driver's side of the executor: each unit's state in campaign.json as it changes,
    and a progress line with an estimate of what is left."""

    def __init__(self, directory: Path, campaign: Campaign, total_todo: int, slots: int,
                 out: Callable[[str], None], began: float | None = None,
                 on_round: Callable[[], None] | None = None) -> None:
        self.directory, self.campaign, self.out = directory, campaign, out
        self.on_round = on_round  # called once campaign.json holds a round all finished
        self.total_todo, self.slots = total_todo, slots
        self.began = time.monotonic() if began is None else began  # elapsed= counts from it
        # the count of the progress line: units finished before, and each one that ends here
        # (failed, error, crashed or timeout too: it ended, if a resume may run it again)
        self.done = sum(u.status in FINISHED for u in campaign.units)
        self.walls: list[float] = []  # of the units that ran to their end in this session
        self.running: dict[str, float] = {}  # unit -> when it started
        self.stopped: list[str] = []  # the units a signal stopped
        self.queued_ids: list[str] = []  # handed to a queue in this session
        self.full: NoSpace | None = None  # the device filled: campaign.json is left alone

    def _save(self) -> None:
        """Write campaign.json. The first write a full device refuses raises (the executor then
        stops the units); after it the states stay in memory for the driver's last write."""
        if self.full is not None:
            return
        try:
            self.campaign.save(self.directory)
        except NoSpace as exc:
            self.full = exc
            raise

    def withdraw(self) -> None:
        """The queue refused the plan (its arrays were cancelled): the units it had taken are
        not run, as before, so that a resume hands them over again."""
        for task_id in self.queued_ids:
            entry = self.campaign.unit(task_id)
            if entry.status == SUBMITTED:
                entry.status = PENDING
        self._save()

    def _begin(self, task: Task, status: str, where: str) -> None:
        entry = self.campaign.unit(task.id)
        entry.status, entry.device, entry.attempts = status, where, entry.attempts + 1
        entry.started_utc = utc_now()
        self._save()  # a killed driver leaves the unit to rerun

    def queued(self, task: Task, where: str) -> None:
        self._begin(task, SUBMITTED, where)
        self.queued_ids.append(task.id)

    def started(self, task: Task, where: str, pid: int | None = None) -> None:
        self._begin(task, RUNNING, where)
        self.running[task.id] = time.monotonic()
        unit = plan.parse_unit_id(task.id)
        self.out(f"[start] {task.id} sides={' '.join(unit.sides)} device={where} "
                 f"log={task.log}")

    def ended(self, task: Task, end: Ended) -> None:
        if end.state == OK:  # exit 0 is also every side skipped: their run directories say
            why = skip_reason(self.directory, plan.parse_unit_id(task.id))
            end = end if why is None else dataclasses.replace(end, state=SKIPPED, reason=why)
        entry = self.campaign.unit(task.id)
        entry.status, entry.rc, entry.wall_s = end.state, end.rc, end.wall_s
        entry.reason, entry.device = end.reason, end.where
        entry.facts = {**entry.facts, **{k: v for k, v in end.facts.items() if v}}
        full = nospace.child_full(end)
        if full is not None:  # the unit did not finish: a resume runs it again
            entry.status = INTERRUPTED
        self.running.pop(task.id, None)
        self._save()
        if end.state == INTERRUPTED or full is not None:
            self.stopped.append(task.id)
        else:
            self.done += 1
            if end.wall_s is not None:
                self.walls.append(end.wall_s)
        self.out(self._progress(end))
        if full is not None and self.full is None:
            self.full = full
            raise full
        if self.on_round is not None and self.full is None and self._round_done(entry.round):
            self.on_round()

    def _round_done(self, number: int) -> bool:
        # ended, however: a failed or timed-out unit's round is as far as the campaign gets
        return all(u.status not in (PENDING, "submitted", "running")
                   for u in self.campaign.units if u.round == number)

    def _progress(self, end: Ended) -> str:
        units = self.campaign.units
        done = self.done
        elapsed = time.monotonic() - self.began
        if self.slots:
            eta = plan.eta_from_walls(
                self.walls, [time.monotonic() - t for t in self.running.values()],
                self.total_todo - len(self.walls) - len(self.running), self.slots)
        else:  # a cluster's queue decides how many run at once: only the rate is known
            eta = plan.eta_from_rate(elapsed, len(self.walls), self.total_todo - len(self.walls))
        facts = "".join(f" {k}={v}" for k, v in end.facts.items() if v)
        return (f"[{done}/{len(units)}] {end.task} {end.state} "
                f"rc={'' if end.rc is None else end.rc} wall={end.wall_s}s device={end.where}"
                f"{facts} elapsed={elapsed:.0f}s eta={'-' if eta is None else f'{eta:.0f}s'}"
                + (f"\n    {end.reason}" if end.reason else ""))


def take_ended(directory: Path, campaign: Campaign, settled: Sequence[Ended],
               out: Callable[[str], None]) -> None:
    """Record the units that ended while no driver followed them (a cluster's task finished
    them after the driver was killed), as if they had been seen ending."""
    if not settled:
        return
    out(f"{len(settled)} unit(s) finished while no driver followed them, taken as they ended: "
        + ", ".join(end.task for end in settled))
    events = UnitEvents(directory, campaign, len(settled), 0, out)
    for end in settled:
        events.ended(Task(end.task, (), unit_log(directory, end.task)), end)


def drive(directory: Path, campaign: Campaign, settings: Settings, executor: Executor,
          out: Callable[[str], None] = print, *, timeout_s: float | None = None,
          workers: str = "1", settled: Sequence[Ended] = (),
          on_round: Callable[[], None] | None = None, held: HeldSignal | None = None) -> int:
    """Run every unit not finished through `executor`, each for at most `timeout_s`
    (UNIT_TIMEOUT, see unit_tasks), calling `on_round` as each round ends; write the report.
    A signal stops the units (the executor stops them, or leaves a detached cluster array
    running); the campaign is written as interrupted from the units that finished, and
    errors.Interrupted raised; `held` (see _run_rounds) keeps one that came after the last
    unit. A full device stops them too (full_device_stops: NoSpace). A unit stopped at its
    limit is recorded timeout. `settled`: ends a resume found (take_ended)."""
    with sole_driver(directory), nospace.full_device_stops(directory, campaign, out):
        (directory / LOGS_DIR).mkdir(exist_ok=True)
        make_side_caches(directory)
        take_ended(directory, campaign, settled, out)
        tasks = unit_tasks(directory, campaign, timeout_s, workers)
        out(f"campaign directory: {directory} ({len(tasks)} units to run of "
            f"{len(campaign.units)}; executor {executor.name})")
        campaign.state = CampaignState.RUNNING
        campaign.interrupted, campaign.driver = None, DriverRecord.this_process()
        campaign.save(directory)
        current: list[UnitEvents] = []
        try:
            outcome = _run_rounds(directory, campaign, executor, tasks, current, out, lambda:
                                  adaptive.owed(campaign, unit_tasks(
                                      directory, campaign, timeout_s, workers)), on_round, held)
            events = current[-1]
        except HarnessError:
            if current:
                current[-1].withdraw()
            drop_side_caches(directory, campaign)
            raise
        except KeyboardInterrupt as exc:  # before the executor took the signals (or a device's
            drop_side_caches(directory, campaign)  # wait did: device_lock.WaitStopped)
            signum = getattr(exc, "signum", signal.SIGINT)
            with deferred_signals(lambda _signum: None):
                raise finish.interrupted(directory, campaign, settings, signum, [], out) from None
        except BaseException:
            drop_side_caches(directory, campaign)
            raise
        if outcome.detached:
            campaign.state = CampaignState.SUBMITTED
            campaign.save(directory)
            out(f"harness ab --resume {directory} re-attaches")
            raise Interrupted(outcome.signal or 0, "detach", directory)
        drop_side_caches(directory, campaign)
        blocked = sorted({u.op for u in campaign.units if u.status == PENDING})
        if outcome.signal is None and blocked:
            out(f"round 0 of {', '.join(blocked)} did not finish, so their later rounds did not "
                f"run: harness ab --resume {directory} reruns them")
        if outcome.signal is not None:
            with deferred_signals(lambda _signum: None):  # a second signal: finish writing
                raise finish.interrupted(directory, campaign, settings, outcome.signal,
                                         events.stopped, out)
        campaign.state = CampaignState.MEASURED
        campaign.save(directory)
        rc = finish.finish(directory, campaign, settings, out)
        campaign.state = CampaignState.DONE
        campaign.save(directory)
        return rc
