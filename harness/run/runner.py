"""Run one benchmark node in a claimed run directory: header, live log, results, identity."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.contract import boundary, breakdown, states
from harness.contract.identity import write_identity
from harness.contract.records import RECORDS_DIR
from harness.contract.tuner_db import default_flaggems_cache
from harness.contract.warmup_share import share_text
from harness.errors import Interrupted, NoSpace, no_space
from harness.executors import lease
from harness.executors import procs as supervise
from harness.providers.flaggems import Node
from harness.run import (
    artifacts,
    container,
    ending,
    images,
    keeper,
    launch,
    outputs,
    rescue,
    rundoc,
)
from harness.run.plugin_plan import (
    PLUGINS_VAR,
    boundary_env,
    plan_plugins,
    pytest_plugin_args,
    pytest_plugin_env,
)
from harness.run.preflight import PartialPlan, Plan
from harness.run.rundir import claim_run_dir, utc_stamp
from harness.settings import variables
from harness.settings.spec import REPO_ROOT, Settings
from harness.tuning import autotune, precompile

# FlagGems always runs with --mode kernel; the timing plugin switches it per measurement.
FLAGGEMS_MODE = "kernel"
INTERRUPTED_MARKER = "RUN_INTERRUPTED"
# BASELINE=off: FlagGems' --metrics with its kernel's latency alone (no latency_base, and so no
# speedup, gbps or tflops, which rest on one or the other)
NO_BASELINE_METRIC = "latency"
TUNER_CACHE_DIR = "tuner_cache"  # a run's private FlagGems and Triton caches, dropped after it
FLAGGEMS_DIR_UNSET = "<FLAGGEMS_DIR unset>"  # what a dry run shows for the missing directory


@dataclass(frozen=True)
class Invocation:
    """The exact pytest command of a run: argv, working directory and added environment."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    plugins: tuple[str, ...]
    image: str | None = None  # an A/B side that is an image: pytest runs in it
    launch: list[str] | None = None  # then the engine's line that runs `argv` in the image
    container: tuple[str, str] | None = None  # and (engine, name) of its container: the run's

    @property
    def command(self) -> list[str]:
        """What starts pytest."""
        return self.launch or self.argv


def build_invocation(settings: Settings, plan: Plan, run_dir: Path,
                     extra_env: dict[str, str] | None = None, image: str | None = None
                     ) -> Invocation:
    """The pytest argv and the environment the harness adds for this run (`extra_env` last:
    an A/B side's switch; `image`: the side's image, which runs pytest)."""
    plugins = plan_plugins(settings.backend, settings.timer,
                           tuning=settings.record or settings.replay_from is not None
                           or settings.warmup_share is not None,
                           precompile=precompile_off(settings, plan) is None,
                           share=settings.warmup_share is not None,
                           smoke=settings.shape_mode == "smoke",
                           screen=settings.tune_screen and settings.replay_from is None)
    # Every value rides in its option (`--shape_file=PATH`): pytest takes a bare argument that
    # names an existing path as a test path when it chooses its rootdir and ini file, and a
    # shape file outside FLAGGEMS_DIR would move both off FlagGems' pytest.ini.
    argv = [plan.python, "-m", "pytest", plan.node.nodeid,
            f"--level={settings.level}", f"--mode={FLAGGEMS_MODE}",
            "--record=log", "-s", *pytest_plugin_args()]
    if settings.shape_mode == "file" and settings.shape_file is not None:
        argv.append(f"--shape_file={settings.shape_file.resolve()}")
    argv += [f"--dtypes={dtype}" for dtype in settings.dtypes]  # FlagGems' option appends
    # FlagGems' measurement budget, where one is given (else the benchmark's own defaults)
    argv += [f"--{option}={ms}" for option, ms in (("warmup", settings.warmup_ms),
                                                   ("iter", settings.iter_ms)) if ms]
    if not settings.times_baseline:  # FlagGems times only what --metrics names
        argv.append(f"--metrics={NO_BASELINE_METRIC}")
    env = {
        **boundary_env(settings, run_dir, precompile.PRECOMPILE_PLUGIN in plugins),
        "PYTHONUNBUFFERED": "1",
        # the -p plugins must import in the child whether or not the harness is installed
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(
            p for p in (str(REPO_ROOT),
                        *variables.environ().get("PYTHONPATH", "").split(os.pathsep)) if p)),
        # bytecode goes beside the run outputs or to the caller's prefix, never into the
        # FlagGems checkout; without it every fresh process compiled flag_gems again (8.6 s
        # of a 30 s session on an H200)
        **supervise.bytecode_env(settings.out, image is not None),
        **settings.backend.visibility_env(settings.devices),
        **pytest_plugin_env(plugins, variables.environ().get(PLUGINS_VAR, "")),
    }
    if settings.isolate_tuner_cache:
        cache = run_dir / TUNER_CACHE_DIR
        env["FLAGGEMS_CACHE_DIR"] = str((cache / "flaggems").resolve())
        env["TRITON_CACHE_DIR"] = str((cache / "triton").resolve())
    if settings.use_flagtune:
        env["USE_FLAGTUNE"] = "1"  # FlagGems' own switch for its exhaustive search
    env.update(extra_env or {})
    cwd = settings.flaggems_dir.resolve() if settings.flaggems_dir else Path(FLAGGEMS_DIR_UNSET)
    launch = name = None
    if image is not None:  # the run's variables and the host's harness, FlagGems, Triton ones
        passed = {k: v for k, v in variables.environ().items()
                  if k.startswith(container.PASS_PREFIXES)}
        name = keeper.container_name() if settings.runner in images.ENGINES else None
        launch = container.pytest_in_image(settings.runner, image, settings, argv, cwd,
                                           {**passed, **env}, name)
    return Invocation(argv=argv, cwd=cwd, env=env, plugins=plugins, image=image, launch=launch,
                      container=(settings.runner, name) if name else None)


def precompile_off(settings: Settings, plan: Plan) -> str | None:
    """Why COMPILE_WORKERS does nothing in this run (see `precompile.off_reason`), or None."""
    return precompile.off_reason(settings.compile_workers,
                                 "triton" in settings.backend.python_modules, plan.features)


def header_lines(settings: Settings, plan: Plan, run_dir: Path, inv: Invocation) -> list[str]:
    """The run header: every setting that decides whether two runs are comparable, then the
    COMPILE_WORKERS_OFF marker where the installed Triton cannot compile concurrently."""
    fields: dict[str, object] = {
        "op": plan.op, "node": plan.node.nodeid,
        **settings.caliber(),
        "devices": ",".join(settings.devices) or "all visible",
        "device_names": "; ".join(f"{d.index}:{d.name}" for d in plan.devices) or "-",
        "flaggems_dir": settings.flaggems_dir, "python": f"{plan.python} ({plan.python_version})",
        "versions": " ".join(f"{k}={v}" for k, v in sorted(plan.versions.items())) or "-",
        "plugins": " ".join(inv.plugins) or "-",
        **({"warmup_share": f"{share_text(settings.warmup_share)} (tunes its share "
            "of the configs, times nothing)"} if settings.warmup_share else {}),
        "command": shlex.join(inv.command),
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    # run_dir first: a batch or warmup finds its child's run directory by this line
    lines = [boundary.RUN_HEADER, f"{boundary.RUN_DIR_LINE}{run_dir}",
             *(f"# {k}: {v}" for k, v in fields.items())]
    reason = precompile_off(settings, plan)
    if reason == "triton_lacks_async_compile":  # asked for, and not possible: say so once
        lines.append(f"{boundary.COMPILE_WORKERS_OFF_MARKER} reason={reason} "
                     f"compile_workers={settings.compile_workers}")
    return lines


def placeholder_plan(settings: Settings, plan: PartialPlan) -> Plan:
    """The plan a dry run prints: where preflight could not resolve the node, a placeholder
    names what was asked for, so that the rest of the plan still shows."""
    if isinstance(plan, Plan):
        return plan
    asked = f"TEST_NODE={settings.test_node}" if settings.test_node else f"OP={settings.op}"
    return plan.with_node(Node(f"<unresolved {asked}>", ""),
                          plan.op or settings.op or "unresolved")


def describe_dry_run(settings: Settings, plan: Plan, run_dir: Path,
                     extra_env: dict[str, str] | None = None, image: str | None = None
                     ) -> list[str]:
    """What a run would do, for --dry-run (`extra_env`: an A/B side's switch and caches)."""
    inv = build_invocation(settings, plan, run_dir, extra_env, image)
    return [
        f"run directory: {run_dir} (not created)", f"cwd: {inv.cwd}",
        f"pytest: {shlex.join(inv.command)}", "plugins: " + (" ".join(inv.plugins) or "-"),
        "environment:",
        *(f"  {k}={v}" for k, v in sorted(inv.env.items())),
        *(f"  {line.removeprefix('# ')}"
          for line in header_lines(settings, plan, run_dir, inv)[1:]),
    ]


def _stream(inv: Invocation, log, echo: Callable[[bytes], None],
            stopper: supervise.GroupStopper, launches: list[dict[str, object]],
            worker: str | None = "") -> int:
    """Run pytest (in a worker where the task's host offers one, else in a process of its own
    session), copying its output to the log and `echo` until it ends; a signal stops its whole
    group (`stopper`), and what it wrote before is kept; what it left running when it ended
    is stopped (launch.stop_left, in `launches` as `left_running`). How it ran goes to
    `launches`; `worker`: the generation of workers it may run in (see `execute`), None: a
    process of its own even where a host offers workers."""
    environ = variables.environ()
    env = {k: v for k, v in {**boundary.inherited(environ), **inv.env}.items()
           if k != lease.HOST_VAR}
    host = environ.get(lease.HOST_VAR) if worker is not None else None
    with keeper.owned(*(inv.container or (None, None))):  # it ends with its run, however
        before = launch.adopt_orphans()  # what pytest leaves is then found, and stopped with it
        proc, facts = lease.start_pytest(inv.command, inv.cwd, env, host, worker or "")
        launches.append(facts)
        if facts.get("worker_unavailable"):
            log.write(f"# no worker ({facts['worker_unavailable']}): pytest runs in a process "
                      "of its own\n".encode())
        stopper.watch(proc)
        try:
            rc, left = launch.copy_output(proc, log, echo, before)
        except BaseException:
            supervise.stop_children([proc], supervise.CHILD_GRACE_S)
            raise
        stopper.join()
        if left:
            facts["left_running"] = left
            log.write(f"# pytest left child processes running, stopped with it: "
                      f"{', '.join(map(str, left))}\n".encode())
    return rc


def _stream_rescued(settings: Settings, plan: Plan, run_dir: Path, inv: Invocation,
                    extra_env: dict[str, str] | None, log, echo: Callable[[bytes], None],
                    out: Callable[[str], None], stopper: supervise.GroupStopper,
                    launches: list[dict[str, object]], worker: str | None
                    ) -> tuple[int, dict[str, object] | None]:
    """Run pytest; where a capture failure left it dead (rescue.rescue_reason), run the
    operator again with the direct timer. (rc of the last attempt, the rescue's facts or None)."""
    before = {p.name for p in run_dir.iterdir()}
    start = log.tell()
    rc = _stream(inv, log, echo, stopper, launches, worker)
    if stopper.signal is not None:
        return rc, None
    with open(run_dir / "run.log", "rb") as fh:
        fh.seek(start)
        reason = rescue.rescue_reason(settings.timer, rc, fh.read().decode(errors="replace"))
    if reason is None:
        return rc, None
    # the first session's phases stay: time_breakdown.json counts both sessions
    first, moved = rc, rescue.set_aside(run_dir, before, keep=("run.log", TUNER_CACHE_DIR,
                                                                boundary.PHASES_FILE))
    line = (f"{rescue.RESCUE_MARKER} op={plan.op} timer=direct first_rc={first} "
            f"reason={json.dumps(reason)}")
    log.write(f"# pytest exit code: {rc}\n{line}\n".encode())
    log.flush()
    out(line)
    direct = dataclasses.replace(settings, timer="direct")
    rc = _stream(build_invocation(direct, plan, run_dir, extra_env, inv.image), log, echo, stopper,
                 launches, worker)
    return rc, {"first_rc": first, "reason": reason, "set_aside": moved,
                "attempt_dir": rescue.CAPTURE_ATTEMPT_DIR}


def _flaggems_cache(inv: Invocation) -> Path:
    return default_flaggems_cache({**variables.environ(), **inv.env})


def _finish_tuning(settings: Settings, inv: Invocation, run_dir: Path
                   ) -> autotune.TuningOutcome:
    """Record winners, count replay fallbacks; keep a private cache's raw tuner database under
    autotune_records/ and drop the private caches."""
    outcome = autotune.finish_run(run_dir, _flaggems_cache(inv), settings.record)
    if settings.isolate_tuner_cache:
        cache = run_dir / TUNER_CACHE_DIR
        outcome = dataclasses.replace(
            outcome, compiled_kernels=artifacts.count_compiled_kernels(cache / "triton"),
            artifacts=artifacts.artifact_hashes(cache / "triton", cache,
                                                *filter(None, [settings.flaggems_dir])))
        for db in sorted((cache / "flaggems").glob("**/*.db")):
            (run_dir / RECORDS_DIR).mkdir(exist_ok=True)
            shutil.copy2(db, run_dir / RECORDS_DIR / db.name)
        shutil.rmtree(cache, ignore_errors=True)
    return outcome


def execute(settings: Settings, plan: Plan, *, out: Callable[[str], None] = print,
            echo: Callable[[bytes], None] | None = None,
            now: Callable[[], dt.datetime] | None = None, run_dir: Path | None = None,
            extra_env: dict[str, str] | None = None, claimed: bool = False,
            step: str | None = None, worker: str | None = "", image: str | None = None
            ) -> tuple[int, Path]:
    """Claim the run directory (or create the given one, which must not exist, unless
    `claimed`: a parallel warmup's, whose run.log lines stay at the head), run pytest,
    and write results and identity; return (rc, dir).

    SIGINT, SIGTERM or SIGHUP stop pytest's process group; the run then writes what pytest
    finished, marks itself interrupted (RUN_INTERRUPTED in run.log, "status" in its
    identity) naming `step` (default: the node), and raises errors.Interrupted.
    `worker`: the generation of the task host's workers (executors.workers) pytest may run in:
    a worker serves runs of one generation ("": a run outside a campaign's rounds, a batch's),
    so a campaign that names each round its own has what a worker process keeps of itself
    vary between rounds, as a fresh process's does; None: a process of its own. `image`:
    pytest runs in that image (an A/B side that is one)."""
    stopper = supervise.GroupStopper(supervise.CHILD_GRACE_S)
    with supervise.deferred_signals(stopper.request_stop):
        rc, run_dir = _execute(settings, plan, out=out, echo=echo, now=now, run_dir=run_dir,
                               extra_env=extra_env, claimed=claimed, stopper=stopper,
                               worker=worker, image=image)
    if stopper.signal is not None:
        marker = (f"{INTERRUPTED_MARKER} signal={signal.Signals(stopper.signal).name} "
                  f"step={step or plan.node.nodeid} rc={rc} dir={run_dir}")
        _log_line(run_dir, marker)
        out(marker)
        raise Interrupted(stopper.signal, step or plan.node.nodeid, run_dir)
    return rc, run_dir


def _echo_stdout(chunk: bytes) -> None:
    sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()


def _log_line(run_dir: Path, line: str) -> None:
    with open(run_dir / "run.log", "a", encoding="utf-8") as log:
        log.write(line + "\n")


def _write_header(fd: int, text: str, path: Path) -> None:
    """Write run.log's header past the buffer: a run killed outright still says what it was,
    and a full device leaves nothing buffered for close to retry; its error names `path`."""
    data = text.encode()
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError as exc:  # a file descriptor's error names no file
        if (full := no_space(exc)) is None:
            raise
        raise NoSpace(path, limit=full.limit) from None


def _execute(settings: Settings, plan: Plan, *, out: Callable[[str], None],
             echo: Callable[[bytes], None] | None, now: Callable[[], dt.datetime] | None,
             run_dir: Path | None, extra_env: dict[str, str] | None, claimed: bool,
             stopper: supervise.GroupStopper, worker: str | None, image: str | None
             ) -> tuple[int, Path]:
    echo = echo or _echo_stdout
    entered = time.monotonic()
    if run_dir is None:
        run_dir = claim_run_dir(settings.out, plan.op, utc_stamp(now() if now else None))
    else:
        run_dir.mkdir(parents=True, exist_ok=claimed)
    inv = build_invocation(settings, plan, run_dir, extra_env, image)
    header = header_lines(settings, plan, run_dir, inv)
    if settings.replay_from:
        autotune.prepare_replay(run_dir, _flaggems_cache(inv), settings.replay_from)
    devices_before = rundoc.visible(settings)
    started = time.monotonic()
    with open(run_dir / "run.log", "ab") as log:  # "a": keep a parallel warmup's lines
        text = "\n".join(header) + "\n"
        _write_header(log.fileno(), text, run_dir / "run.log")
        out(text.rstrip("\n"))
        launches: list[dict[str, object]] = []
        rc, rescued = _stream_rescued(settings, plan, run_dir, inv, extra_env, log, echo, out,
                                      stopper, launches, worker)
        wall = time.monotonic() - started
        log.write(f"# pytest exit code: {rc}; wall {wall:.2f} s\n".encode())
    breakdown.write(run_dir, started, wall, launches)
    rows, source = outputs.write_outputs(settings, run_dir, rescued=rescued is not None)
    tests = ending.read_outcomes(run_dir)
    end = ending.decide(rc, len(rows), tests, times_nothing=settings.warmup_share is not None,
                        dtypes=[row.dtype for row in rows])
    tuning = _finish_tuning(settings, inv, run_dir)
    doc = rundoc.identity_doc(settings, plan, inv.command, inv.image, run_dir, devices_before,
                              extra_env, precompile_off(settings, plan))
    doc.update({"pytest_exit_code": rc, "wall_s": round(wall, 3), "rows": len(rows),
                "results_source": source, "state": end.state, "reason": end.reason,
                "partial": end.partial, "tests": tests,
                "status": states.RunStatus.COMPLETE if stopper.signal is None
                else states.RunStatus.INTERRUPTED,
                "signal": None if stopper.signal is None else signal.Signals(stopper.signal).name,
                "capture_rescue": rescued, "launch": launches, "autotune_records": tuning.recorded,
                "autotune_replay_fallbacks": len(tuning.fallbacks),
                "autotune_replay_fallback_keys": list(tuning.fallbacks),
                "compiled_kernels": tuning.compiled_kernels,
                "compiled_artifacts": list(tuning.artifacts)})
    write_identity(run_dir, doc)
    breakdown.add_host(run_dir, started - entered, time.monotonic() - started - wall)
    if stopper.signal is None:
        # the reason last: a batch or campaign reads why a run failed from its last line
        summary = (f"RUN_DONE op={plan.op} rc={end.exit_code} rows={len(rows)} "
                   f"state={end.state} pytest_rc={rc} source={source} wall_s={wall:.2f} "
                   f"autotune_replay_fallbacks={len(tuning.fallbacks)} dir={run_dir}"
                   + (f" reason={end.reason}" if end.reason else ""))
        _log_line(run_dir, summary)  # first: a closed stdout must not cost run.log its line
        out(summary)
    return end.exit_code, run_dir
