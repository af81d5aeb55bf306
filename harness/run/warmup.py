"""Parallel warmup: shard the autotune sweep over N devices, merge the winners, measure serially.

With PARALLEL_WARMUP_GPUS=N a run first resolves its benchmark's shapes and dtypes statically
(the shape file's entry FlagGems' set_shapes would use, the dtypes its constructor gets), deals
the sweep into N shards (see `deal`), and runs the shards' `harness run` children at once, one
per device of the caller's selection, each with an isolated tuner cache so that it records its
winners and their times. The shards' records are merged into
`<run_dir>/warmup/autotune_records/` (for a key several shards swept, the fastest winner, the
others as its candidates), and the measured run then replays them (not strictly) serially on
one device, timing a key's candidates itself, so that its timings and choices stay comparable
with a serial run: N processes loading one box couple through its power budget.

It refuses, and the serial sweep runs instead, with one `PARALLEL_WARMUP_SERIAL` line saying
why: at --level comprehensive (set_more_shapes() is arbitrary Python), when the shapes cannot
be resolved, when REPLAY_FROM already pins the winners, when the selection holds fewer devices
than N, and after any shard exits non-zero (the whole sweep is discarded; its logs stay under
warmup/). On a backend without an accelerator (cpu) devices mean nothing: the shards run
unpinned, side by side on the host.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.contract import boundary
from harness.contract.records import Records, merge, read_records, write_records
from harness.contract.states import INTERRUPTED
from harness.contract.warmup_share import share_text
from harness.errors import UsageError
from harness.executors import procs as supervise
from harness.executors.base import Ended, Task
from harness.executors.devices import select_devices
from harness.executors.local import LocalExecutor
from harness.providers import flaggems
from harness.providers.benchmark_classes import (
    SELECTABLE_DTYPES,
    ShapeResolution,
    resolve_shape_keys,
)
from harness.run import outputs
from harness.run.preflight import PartialPlan, Plan
from harness.run.rundir import claim_run_dir, run_dir_from_log, utc_stamp
from harness.settings import cmdline
from harness.settings.spec import VARS_BY_MAKE, Settings

WARMUP_DIR = "warmup"
SERIAL_MARKER = "PARALLEL_WARMUP_SERIAL"
DIFFER_MARKER = "PARALLEL_WARMUP_WINNERS_DIFFER"
# A shard runs exactly its node, shapes, dtypes, share and device: none of these may reach it
# from the caller's environment (PARALLEL_WARMUP_GPUS would make every shard shard again).
SHARD_ENV_DROP = (*supervise.RUN_CHILD_ENV_DROP,
                  "PARALLEL_WARMUP_GPUS", "REPLAY_FROM", "REPLAY_STRICT", "ZL_DEVICES",
                  VARS_BY_MAKE["WARMUP_SHARE"].env_name, boundary.WARMUP_CLAIMS_VAR,
                  "SHAPE_MODE", "SHAPE_FILE")


@dataclass(frozen=True)
class Shard:
    """One child of the sweep: the dtypes it runs (every shape of each), its share of every
    tuner's configs, and the device it is pinned to (None: unpinned)."""

    index: int
    device: str | None
    dtypes: tuple[str, ...] = ()  # (): every dtype the benchmark measures
    share: tuple[int, int] = (0, 1)  # (I, K): configs I, I+K, ... of every tuner

    @property
    def name(self) -> str:
        return f"shard-{self.index}"

    def describe(self, settings_dtypes: tuple[str, ...]) -> str:
        configs = "all" if self.share[1] == 1 else share_text(self.share)
        return (f"{self.name}: device={self.device or '-'} "
                f"dtypes={','.join(self.dtypes or settings_dtypes) or 'all'} configs={configs}")


@dataclass(frozen=True)
class WarmupPlan:
    """The shards to run, or why the serial sweep runs instead (`refused`, a slug and a
    sentence); `measure_device` is where the measured run goes (None: unpinned)."""

    requested: int
    resolution: ShapeResolution | None = None
    shards: tuple[Shard, ...] = ()
    refused: tuple[str, str] | None = None
    measure_device: str | None = None

    def serial_line(self) -> str:
        assert self.refused is not None
        reason, detail = self.refused
        return f"{SERIAL_MARKER} reason={reason} detail={detail}"


# --------------------------------------------------------------------------- the plan


def deal(dtypes: Sequence[str], n: int) -> list[tuple[tuple[str, ...], tuple[int, int]]]:
    """(dtypes, config share) of each of n shards, every shard running all the shapes.

    Compiling dominates a sweep, and Triton compiles each config once per dtype, not per shape:
    on an H200 two shards of mm that split its shapes each compiled all 488 kernels the serial
    sweep did. So what is dealt is (dtype, config) work: the dtypes go in g = gcd(n, D) equal
    groups, and each group's n/g shards split every tuner's configs between them. Each shard
    gets 1/n of the work; a dtype whose configs are not split is tuned exactly as in a serial
    sweep, on one device. With no dtype known, all n shards split the configs.
    """
    groups = math.gcd(n, len(dtypes)) if dtypes else 1
    per_group = n // groups
    dealt = []
    for g in range(groups):
        mine = tuple(dtypes[g::groups])
        dealt += [(mine, (k, per_group)) for k in range(per_group)]
    return dealt


def plan_warmup(settings: Settings, node: flaggems.Node,
                environ: Mapping[str, str] | None = None,
                enumerate_devices: Callable[[], list] | None = None) -> WarmupPlan:
    """Decide the sweep: refuse (and say why) or deal the resolved shapes into shards."""
    n = settings.parallel_warmup_gpus or 0
    if n < 2:
        return WarmupPlan(n, refused=("one_shard", f"PARALLEL_WARMUP_GPUS={n}: one shard "
                                      "is the serial sweep"))
    if settings.level == "comprehensive":
        return WarmupPlan(n, refused=("comprehensive", "--level comprehensive adds "
                                      "set_more_shapes(), arbitrary Python the static shape "
                                      "resolution cannot see"))
    if settings.replay_from is not None:
        return WarmupPlan(n, refused=("replay_from", "REPLAY_FROM pins the winners: there "
                                      "is no sweep to shard"))
    resolution = resolve_shape_keys(outputs.checked_flaggems_dir(settings), node,
                                    outputs.shape_source(settings))
    if resolution.key is None:
        return WarmupPlan(n, resolution, refused=("unresolved_shapes",
                                                  resolution.describe()))
    devices = select_devices(settings, environ, enumerate_devices)
    if devices is not None and len(devices) < n:
        return WarmupPlan(n, resolution, refused=(
            "too_few_devices", f"PARALLEL_WARMUP_GPUS={n} needs {n} devices; the selection "
            f"holds {len(devices)} ({','.join(devices) or 'none found'})"))
    dtypes = settings.dtypes or resolution.dtypes
    if not set(dtypes) <= SELECTABLE_DTYPES:
        dtypes = ()  # a shard could not be restricted to them: the configs are split instead
    pinned = devices[:n] if devices is not None else [None] * n
    shards = tuple(Shard(i, device, mine, share) for i, (device, (mine, share))
                   in enumerate(zip(pinned, deal(dtypes, n), strict=True)))
    return WarmupPlan(n, resolution, shards, measure_device=pinned[0])


def shard_argv(settings: Settings, node: flaggems.Node, shard: Shard, out_dir: Path
               ) -> list[str]:
    """`harness run` of the same node and shapes on the shard's dtypes and share of the
    configs, recording its winners and timing nothing (WARMUP_SHARE, 0/1 for all the
    configs)."""
    def resolved(path: Path | None) -> Path | None:
        return None if path is None else path.resolve()

    return cmdline.harness_argv("run", *cmdline.to_argv(
        settings, op=None, op_file=None, test_node=node.nodeid, parallel_warmup_gpus=None,
        replay_from=None, replay_strict=False, isolate_tuner_cache=True, record=True,
        shape_file=resolved(settings.shape_file), flaggems_dir=resolved(settings.flaggems_dir),
        runner="host", dry_run=False, out=out_dir.resolve(), warmup_share=shard.share,
        dtypes=shard.dtypes or settings.dtypes,
        devices=(shard.device,) if shard.device is not None else ()))


def claims_dir(warm_dir: Path, shard: Shard) -> Path | None:
    """Where the shards of one dtype group claim the configs they tune (None: the shard
    tunes all of them)."""
    if shard.share[1] == 1:
        return None
    return warm_dir / boundary.CLAIMS_DIR / (",".join(shard.dtypes) or "all")


def shard_env(settings: Settings, device: str | None,
              environ: Mapping[str, str] | None = None,
              claims: Path | None = None) -> dict[str, str]:
    """A shard's whole environment: the caller's less SHARD_ENV_DROP, and its own."""
    return {**supervise.child_env(environ, SHARD_ENV_DROP), **shard_own_env(settings, device,
                                                                            claims)}


def shard_own_env(settings: Settings, device: str | None, claims: Path | None = None
                  ) -> dict[str, str]:
    """What a shard alone gets: its device's visibility, where its share's claims go."""
    env: dict[str, str] = {}
    if device is not None:
        env.update(settings.backend.visibility_env([device]))
    if claims is not None:
        env[boundary.WARMUP_CLAIMS_VAR] = str(claims.resolve())
    return env


def measured_settings(settings: Settings, records: Path, device: str | None) -> Settings:
    """The measured run: the merged winners replayed (not strictly: a key no shard tuned
    self-tunes and is reported) into a private cache, on one device."""
    return dataclasses.replace(
        settings, replay_from=records, replay_strict=False, isolate_tuner_cache=True,
        record=True, devices=(device,) if device is not None else settings.devices)


def plan_lines(plan: WarmupPlan, settings: Settings, warm_dir: Path,
               node: flaggems.Node) -> list[str]:
    """The resolved key and the shard plan, as logged and as --dry-run shows them."""
    pinning = ("shards run unpinned: the backend has no devices"
               if not settings.backend.is_accelerator else "one device per shard")
    lines = [f"parallel warmup: PARALLEL_WARMUP_GPUS={plan.requested} on "
             f"{settings.backend.name} ({pinning}); shapes from {outputs.shape_source(settings)}"]
    if plan.resolution is not None:
        lines.append(plan.resolution.describe())
        if plan.resolution.key is not None:
            lines.append(f"shapes={len(plan.resolution.shapes)}: every shard runs each: "
                         + " ".join(str(list(s) if isinstance(s, tuple) else s)
                                    for s in plan.resolution.shapes))
    if plan.refused is not None:
        return [*lines, plan.serial_line()]
    for shard in plan.shards:
        claims = claims_dir(warm_dir, shard)
        lines += [shard.describe(settings.dtypes)
                  + (f" (claimed first come, first served in {claims})" if claims else ""),
                  "    " + shlex.join(shard_argv(settings, node, shard, warm_dir / shard.name))]
    lines.append(f"measured run: serial on device {plan.measure_device or '-'}, replaying the "
                 f"merged winners of {warm_dir} (REPLAY_STRICT=0)")
    return lines


def describe_dry_run(settings: Settings, plan: PartialPlan,
                     environ: Mapping[str, str] | None = None) -> list[str]:
    """What PARALLEL_WARMUP_GPUS would do, for --dry-run; [] when it is unset."""
    if settings.parallel_warmup_gpus is None:
        return []
    if not isinstance(plan, Plan):
        return [f"parallel warmup: PARALLEL_WARMUP_GPUS={settings.parallel_warmup_gpus} not "
                "planned: the benchmark node is unresolved"]
    decision = plan_warmup(settings, plan.node, environ)
    warm_dir = settings.out / plan.op / utc_stamp() / WARMUP_DIR
    return plan_lines(decision, settings, warm_dir, plan.node)


# --------------------------------------------------------------------------- the sweep

ShardCommand = Callable[[Shard, Path], list[str]]  # (shard, its out root) -> argv


class _ShardEvents:
    """Each shard's start and end, as lines of the run's log; each shard's exit code."""

    def __init__(self, by_name: Mapping[str, Shard], out: Callable[[str], None]) -> None:
        self.by_name, self.out = by_name, out
        self.rcs: dict[int, int | None] = {}

    def queued(self, task: Task, where: str) -> None:
        """A local executor starts what it takes."""

    def started(self, task: Task, where: str, pid: int | None = None) -> None:
        self.out(f"[start] {task.id} device={where} pid={pid} log={task.log}")

    def ended(self, task: Task, end: Ended) -> None:
        self.rcs[self.by_name[task.id].index] = end.rc
        self.out(f"[done] {task.id} rc={end.rc}"
                 f"{' interrupted' if end.state == INTERRUPTED else ''} wall={end.wall_s:.1f}s")


def run_shards(settings: Settings, shards: Sequence[Shard], warm_dir: Path,
               command: ShardCommand, *, out: Callable[[str], None],
               environ: Mapping[str, str] | None = None, grace_s: float = supervise.GRACE_S,
               poll_s: float = 0.1) -> dict[int, int | None]:
    """Run every shard at once, each on its own device (its argv names it) through the local
    executor, with its log under `warm_dir`; return each shard's exit code. SIGINT or SIGTERM
    stops and reaps every shard (and its pytest), then raises KeyboardInterrupt."""
    tasks = []
    for shard in shards:
        claims = claims_dir(warm_dir, shard)
        if claims is not None:
            claims.mkdir(parents=True, exist_ok=True)
        tasks.append(Task(shard.name, tuple(command(shard, warm_dir / shard.name)),
                          warm_dir / f"{shard.name}.log",
                          env=shard_own_env(settings, shard.device, claims)))
    events = _ShardEvents({s.name: s for s in shards}, out)
    executor = LocalExecutor([s.device for s in shards],
                             env=supervise.child_env(environ, SHARD_ENV_DROP),
                             grace_s=grace_s, poll_s=poll_s, pin=False, backend=settings.backend)
    outcome = executor.run(tasks, events)
    if outcome.signal is not None:
        out(f"PARALLEL_WARMUP_INTERRUPTED signal={signal.Signals(outcome.signal).name} every "
            f"shard stopped; logs under {warm_dir}")
        raise KeyboardInterrupt
    return events.rcs


def merge_shards(warm_dir: Path, shards: Sequence[Shard]) -> tuple[Records, int]:
    """The union of the shards' recorded winners and how many keys' winners differ; a shard
    without a run or records raises UsageError."""
    parts = []
    for shard in shards:
        run_dir = run_dir_from_log(warm_dir / f"{shard.name}.log")
        if run_dir is None:
            raise UsageError(f"{shard.name} claimed no run directory")
        parts.append(read_records(run_dir))
    return merge(parts)


class _Log:
    """Lines printed and kept at the head of the run's run.log (the run appends to it)."""

    def __init__(self, run_dir: Path, out: Callable[[str], None]) -> None:
        self.path, self.out = run_dir / "run.log", out

    def __call__(self, line: str) -> None:
        self.out(line)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def prepare(settings: Settings, plan: Plan, *, out: Callable[[str], None] = supervise.say,
            command: ShardCommand | None = None, environ: Mapping[str, str] | None = None,
            grace_s: float = supervise.GRACE_S, poll_s: float = 0.1
            ) -> tuple[Settings, Path | None]:
    """Run the parallel warmup when PARALLEL_WARMUP_GPUS is set; return the settings of the
    measured run and its claimed run directory (None: PARALLEL_WARMUP_GPUS unset, the run
    claims its own). After a refusal or a failed shard the settings are unchanged: the
    measured run is the serial sweep."""
    if settings.parallel_warmup_gpus is None:
        return settings, None
    decision = plan_warmup(settings, plan.node, environ)
    run_dir = claim_run_dir(settings.out, plan.op, utc_stamp())
    warm_dir = run_dir / WARMUP_DIR
    log = _Log(run_dir, out)
    for line in plan_lines(decision, settings, warm_dir, plan.node):
        log(line)
    if decision.refused is not None:
        return settings, run_dir
    warm_dir.mkdir()
    build = command or (lambda shard, shard_out: shard_argv(settings, plan.node, shard,
                                                            shard_out))
    started = time.monotonic()
    rcs = run_shards(settings, decision.shards, warm_dir, build, out=log, environ=environ,
                     grace_s=grace_s, poll_s=poll_s)
    failed = [f"shard-{i} rc={rc}" for i, rc in sorted(rcs.items()) if rc != 0]
    try:
        if failed:
            raise UsageError(f"{', '.join(failed)}")
        merged, differ = merge_shards(warm_dir, decision.shards)
    except UsageError as exc:
        log(f"{SERIAL_MARKER} reason=shard_failed detail={exc}: the sweep is discarded "
            f"(logs under {warm_dir}); the serial sweep runs")
        return settings, run_dir
    if differ:
        log(f"{DIFFER_MARKER} count={differ}")
    records = write_records(warm_dir, merged)
    log(f"PARALLEL_WARMUP_DONE shards={len(decision.shards)} winners={len(merged.winners)} "
        f"run_off_keys={len(merged.candidates_of())} "
        f"wall_s={time.monotonic() - started:.2f} records={records}")
    return measured_settings(settings, warm_dir, decision.measure_device), run_dir
