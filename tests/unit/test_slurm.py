"""EXECUTOR=slurm: settings, batch scripts for each unit mode and RUNNER, Slurm's commands,
the stages of a campaign, the makespan estimate, and the watch's state machine."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness import backends, executors
from harness.axes import Axis
from harness.campaign import driver, dryrun, where
from harness.campaign import plan as campaign
from harness.errors import PreflightError, UsageError
from harness.executors import Build, Chosen, ExecutorDoc, slurm
from harness.executors.slurm import SlurmConfig, Stage, array, kind
from harness.executors.slurm.files import done_path
from harness.executors.slurm.text import TaskState
from harness.settings import spec

DIGEST = "sha256:" + "ab" * 32
IMAGE = f"registry.example/zl-flaggems@{DIGEST}"


def settings(backend: str = "cpu", runner: str = "host") -> spec.Settings:
    return spec.resolve({"backend": backend, "runner": runner}, env={})


def cluster(cfg: SlurmConfig, directory: Path, submissions: list | None = None,
            client: slurm.Slurm | None = None) -> array.SlurmExecutor:
    """The Slurm kind's executor of a plan in `directory`, as a campaign builds it."""
    state = {} if submissions is None else {"submissions": submissions}
    return kind.build(Build(settings(), cfg, directory, where.LAUNCH, state), client=client)


def task_command(given: spec.Settings, cfg: SlurmConfig, plan: Path, cwd: Path,
                 mounts: list) -> list[str]:
    return kind.task_command(given, cfg, plan, cwd, mounts, where.LAUNCH)


def test_every_backend_names_a_slurm_unit_and_the_gpu_stacks_an_apptainer_flag():
    units = {b.name: b.slurm_unit for b in backends.registry().all()}
    assert units == {"ascend": "node", "cpu": "gpu", "cuda": "gpu", "musa": "node",
                     "rocm": "gpu"}
    assert backends.get("cuda").apptainer_flags == ("--nv",)
    assert backends.get("rocm").apptainer_flags == ("--rocm",)


def test_config_takes_the_backends_unit_and_slurm_unit_overrides_it():
    assert slurm.config(settings("musa"), {}, {}).unit == "node"
    assert slurm.config(settings("musa"), {}, {"SLURM_UNIT": "gpu"}).unit == "gpu"
    assert slurm.config(settings("cuda"), {"slurm_unit": "node"}, {"SLURM_UNIT": "gpu"}
                        ).unit == "node"  # a flag beats the environment


def test_config_validates_every_variable():
    cfg = slurm.config(settings(), {}, {"SLURM_PARTITION": "gpu", "SLURM_ACCOUNT": "proj",
                                        "SLURM_TIME": "2:00:00", "SLURM_PARALLEL": "4",
                                        "SLURM_ARGS": "--qos=high"})
    assert cfg == SlurmConfig("gpu", "proj", "2:00:00", 4, ("--qos=high",), "gpu")
    with pytest.raises(UsageError, match="SLURM_PARALLEL='0'"):
        slurm.config(settings(), {}, {"SLURM_PARALLEL": "0"})


def test_a_cluster_runner_needs_an_image_by_digest():
    with pytest.raises(UsageError, match="RUNNER='pyxis' needs SLURM_IMAGE"):
        slurm.config(settings("cuda", "pyxis"), {}, {})
    with pytest.raises(UsageError, match="SLURM_IMAGE='img:latest'"):
        slurm.config(settings("cuda", "pyxis"), {}, {"SLURM_IMAGE": "img:latest"})
    assert slurm.config(settings("cuda", "pyxis"), {}, {"SLURM_IMAGE": IMAGE}).image == IMAGE


def test_image_sides_run_their_tasks_on_the_host_and_refuse_a_task_image(tmp_path):
    given = settings("cuda", "pyxis")
    cfg = slurm.config(given, {}, {}, task_image=False)
    assert cfg.image is None
    argv = task_command(given, cfg, tmp_path / "p.json", tmp_path, [(tmp_path, True)])
    assert argv[:2] == ["env", f"PYTHONPATH={spec.REPO_ROOT}"] and "srun" not in argv
    with pytest.raises(UsageError, match="SLURM_IMAGE=.* is not used with AXIS=image"):
        slurm.config(given, {}, {"SLURM_IMAGE": IMAGE}, task_image=False)


def test_task_flags_default_the_runner_to_host_under_slurm_only():
    assert executors.task_flags({"executor": "slurm"}, {})["runner"] == "host"
    assert "runner" not in executors.task_flags({}, {})
    with pytest.raises(UsageError, match="RUNNER='pyxis' runs Slurm tasks"):
        executors.task_flags({"runner": "pyxis"}, {})
    with pytest.raises(UsageError, match="RUNNER='docker' is not accepted with EXECUTOR"):
        executors.task_flags({}, {"ZL_EXECUTOR": "slurm", "ZL_RUNNER": "docker"})
    with pytest.raises(UsageError, match="EXECUTOR='k8s'.*local, slurm"):
        executors.named({"executor": "k8s"}, {})


def test_gpu_mode_script_asks_for_one_gpu_on_an_accelerator_and_none_on_cpu():
    cfg = SlurmConfig(partition="gpu", time="1:00:00", unit="gpu")
    text = slurm.script_text(settings("cuda"), cfg, "zl-x", ["harness", "x"])
    assert "#SBATCH --gres=gpu:1\n" in text and "#SBATCH --exclusive" not in text
    assert "#SBATCH --partition=gpu\n#SBATCH --time=1:00:00\n" in text
    assert "--gres" not in slurm.script_text(settings("cpu"), cfg, "zl-x", ["harness"])


def test_node_mode_script_takes_a_whole_node():
    text = slurm.script_text(settings("musa"), SlurmConfig(unit="node"), "zl-x", ["h"])
    assert "#SBATCH --nodes=1\n#SBATCH --exclusive\n" in text and "--gres" not in text


def test_host_runner_runs_this_python_on_the_checkout(tmp_path):
    argv = task_command(settings(), SlurmConfig(), tmp_path / "p.json", tmp_path,
                              [(tmp_path, True)])
    assert argv == ["env", f"PYTHONPATH={spec.REPO_ROOT}", sys.executable, "-m",
                    "harness.cli", "slurm-task", str(tmp_path / "p.json")]


def test_pyxis_runner_mounts_the_campaign_and_records_the_image_digest(tmp_path):
    cfg = SlurmConfig(image=IMAGE)
    argv = task_command(settings("cuda", "pyxis"), cfg, tmp_path / "p.json", tmp_path,
                              [(spec.REPO_ROOT, False), (tmp_path, True)])
    # one task, whatever SLURM_EXTRA asked of the job: the same step line as an A/B side's run
    assert argv[:3] == ["srun", "--ntasks=1", f"--container-image={IMAGE}"]
    assert argv[3] == f"--container-mounts={spec.REPO_ROOT}:{spec.REPO_ROOT}:ro," \
                      f"{tmp_path}:{tmp_path}"
    assert f"ZL_IMAGE_DIGEST={IMAGE}" in argv and "ZL_IN_IMAGE=1" in argv


def test_task_mounts_add_the_inputs_and_a_campaign_outside_out(tmp_path):
    fg = tmp_path / "FlagGems"
    given = spec.resolve({"backend": "cuda", "runner": "pyxis", "flaggems_dir": str(fg),
                          "out": str(tmp_path / "runs")}, env={})
    found = where.task_mounts(given, tmp_path / "elsewhere" / "c", tmp_path / "cwd")
    assert (fg, False) in found and (tmp_path / "runs", True) in found
    assert (tmp_path / "elsewhere" / "c", True) in found
    assert found[0] == (spec.REPO_ROOT, False)
    inside = where.task_mounts(given, tmp_path / "runs" / "ab" / "x", tmp_path / "cwd")
    assert (tmp_path / "runs" / "ab" / "x", True) not in inside  # OUT already holds it


@pytest.mark.parametrize("backend, flag", [("cuda", "--nv"), ("rocm", "--rocm")])
def test_apptainer_runner_brings_the_vendors_devices(tmp_path, backend, flag):
    argv = task_command(settings(backend, "apptainer"), SlurmConfig(image=IMAGE),
                              tmp_path / "p.json", tmp_path, [(tmp_path, True)])
    assert argv[:3] == ["apptainer", "exec", flag]
    assert f"docker://{IMAGE}" in argv and ["--bind", f"{tmp_path}:{tmp_path}"] == argv[3:5]


def test_a_mount_path_with_a_comma_is_refused_not_split(tmp_path):
    odd = tmp_path / "a,b"
    with pytest.raises(UsageError, match="cannot mount"):
        task_command(settings("cuda", "pyxis"), SlurmConfig(image=IMAGE),
                           odd / "p.json", odd, [(odd, True)])


def test_script_quotes_a_path_with_spaces_and_a_semicolon(tmp_path):
    odd = tmp_path / "a b;c"
    command = task_command(settings(), SlurmConfig(), odd / "p.json", odd,
                                 [(odd, True)])
    text = slurm.script_text(settings(), SlurmConfig(), "zl-x", command)
    exec_line = text.splitlines()[-1]
    assert shlex.split(exec_line)[1:] == command


def test_sbatch_argv_sets_array_throttle_dependency_and_extra_args(tmp_path):
    cfg = SlurmConfig(parallel=3, args=("--qos=high",))
    argv = slurm.sbatch_argv(cfg, 10, tmp_path / "s.sbatch", tmp_path, tmp_path, after="77")
    assert argv == ["sbatch", "--parsable", "--array=0-9%3", f"--output={tmp_path}/%A_%a.out",
                    f"--chdir={tmp_path}", "--dependency=afterany:77", "--qos=high",
                    str(tmp_path / "s.sbatch")]


def test_preflight_needs_sbatch_and_warns_about_node_local_out(tmp_path):
    with pytest.raises(PreflightError, match="check=sbatch"):
        slurm.preflight(tmp_path, print, which=lambda _: None)
    warned = []
    slurm.preflight(Path("/tmp") / tmp_path.name, warned.append, which=lambda _: "/x")
    assert warned and "node-local" in warned[0]


# --------------------------------------------------------------------------- stages


def test_gpu_mode_one_item_a_task_node_mode_shares():
    items = ["a/r0", "b/r0", "c/r0"]
    assert array.stage_tasks(items, SlurmConfig(unit="gpu")) == [["a/r0"], ["b/r0"],
                                                                       ["c/r0"]]
    assert array.stage_tasks(items, SlurmConfig(unit="node", parallel=2)) == [
        ["a/r0", "c/r0"], ["b/r0"]]
    assert array.stage_tasks(items, SlurmConfig(unit="node")) == [items]


def _doc(tmp_path, ops=("tanh",), rounds=2):
    return campaign.new_campaign(directory=tmp_path, axis=Axis("none", None),
                                 caliber={}, argv=["--backend", "cpu"],
                                 ops={op: {"node": "n"} for op in ops}, rounds=rounds,
                                 walls={}, walls_from=None)


def test_campaign_stages_put_later_rounds_after_round_zero(tmp_path):
    doc = _doc(tmp_path, ("a", "b"))
    doc.unit("b/r1").status = "ok"
    tasks = driver.unit_tasks(tmp_path, doc)
    stages = array.plan_stages(tasks, SlurmConfig(), 2)
    assert stages == [Stage("s2-r0", [["a/r0"], ["b/r0"]]), Stage("s2-later", [["a/r1"]])]
    assert [t.after for t in tasks] == [None, None, "a/r0"]
    for done in ("a/r0", "b/r0"):  # round 0 done: nothing to wait for
        doc.unit(done).status = "ok"
    (later,) = driver.unit_tasks(tmp_path, doc)
    assert later.after is None
    assert [s.key for s in array.plan_stages([later], SlurmConfig(), 1)] == ["s1-later"]


def test_estimate_adds_the_stages_and_takes_the_median_for_an_unknown_wall():
    stages = [Stage("s1-r0", [["a/r0"], ["b/r0"], ["c/r0"]]), Stage("s1-later", [["a/r1"]])]
    lines = array.estimate(stages, {"a": 100.0, "b": 40.0}, SlurmConfig(parallel=2),
                           lambda item: item.split("/")[0])
    # c takes the median wall (of [40, 100], index 1: 100); round 0 on two slots: 100 and
    # 100 first, then 40 after one of them (140); the later round waits for it: + 100
    assert lines == ["estimated makespan: 240 s on 2 array slot(s), longest first (1 item(s) "
                     "without a wall taken as the median, 100 s)"]
    assert "no walls" in array.estimate(stages, {}, SlurmConfig(), str)[0]


# --------------------------------------------------------------------------- Slurm's commands


class Scripted:
    """A stand-in for subprocess.run that answers each Slurm command from a table."""

    def __init__(self, answers: dict[str, list[tuple[int, str, str]]]) -> None:
        self.answers, self.calls = answers, []

    def __call__(self, argv, **_kw):
        self.calls.append(argv)
        rc, out, err = self.answers[argv[0]].pop(0) if len(self.answers[argv[0]]) > 1 \
            else self.answers[argv[0]][0]
        return subprocess.CompletedProcess(argv, rc, out, err)


def test_submit_raises_a_preflight_error_with_sbatchs_words():
    run = Scripted({"sbatch": [(1, "", "sbatch: error: invalid partition specified: x\n")]})
    with pytest.raises(PreflightError, match="invalid partition"):
        slurm.Slurm(run).submit(["sbatch", "--parsable", "s"])


def test_queued_reads_a_purged_job_as_ended_and_a_failed_squeue_as_no_answer():
    purged = Scripted({"squeue": [(1, "", "slurm_load_jobs error: Invalid job id "
                                           "specified\n")]})
    assert slurm.Slurm(purged).queued(["12"]) == {}
    down = Scripted({"squeue": [(1, "", "slurm_load_jobs error: Unable to contact slurm "
                                        "controller\n")]})
    assert slurm.Slurm(down).queued(["12"]) is None


def test_ended_falls_back_to_jobcomp_when_scontrol_forgot(tmp_path):
    log = tmp_path / "jobcomp.log"
    log.write_text("JobId=31 UserId=u(1) GroupId=g(1) Name=x JobState=TIMEOUT Partition=p "
                   "TimeLimit=1 StartTime=a EndTime=b NodeList=n1 NodeCnt=1 ProcCnt=1 "
                   "WorkDir=/ ReservationName= Tres= Account= QOS= WcKey= Cluster=c "
                   "SubmitTime=a EligibleTime=a DerivedExitCode=0:0 ExitCode=0:15\n")
    run = Scripted({"scontrol": [(1, "", "slurm_load_jobs error: Invalid job id specified\n"),
                                 (0, f"JobCompType = jobcomp/filetxt\nJobCompLoc = {log}\n",
                                  "")]})
    found = slurm.Slurm(run).ended(["30"], {"30_0": "31", "30_1": None})
    assert found == {"30_0": TaskState("30_0", "TIMEOUT", None, "0:15")}


class FakeSlurm:
    """Tasks that finish one per poll, writing their done files; a cancel ends the rest."""

    def __init__(self, directory: Path, items: list[str], fail_silently: str | None = None):
        self.directory, self.items, self.fail = directory, list(items), fail_silently
        self.cancelled, self.polls = False, 0

    def queued(self, jobs):
        self.polls += 1
        if self.cancelled or not self.items:
            return {}
        item = self.items.pop(0)
        if item != self.fail:
            path = self.directory / "slurm" / "done" / f"{item.replace('/', '-')}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"item": item, "status": "ok", "rc": 0}))
        return {f"7_{i}": TaskState(f"7_{i}", "RUNNING") for i in range(len(self.items))}

    def cancel(self, jobs):
        self.cancelled = True

    def ended(self, jobs, tasks):
        return {t: TaskState(t, "CANCELLED" if self.cancelled else "OUT_OF_MEMORY",
                             None, "0:15" if self.cancelled else "0:9") for t in tasks}


def test_watch_reports_each_done_item_and_a_task_that_died_without_one(tmp_path):
    items = ["a/r0", "b/r0", "c/r0"]
    fake, seen, lines = FakeSlurm(tmp_path, items, fail_silently="b/r0"), [], []
    watch = array.Watch(fake, tmp_path, {"7": [[i] for i in items]},
                              lambda item, doc: seen.append(item), lines.append, False, 0)
    signum, missing = watch.run()
    assert signum is None and sorted(seen) == ["a/r0", "c/r0"]
    assert missing == {"b/r0": TaskState("7_1", "OUT_OF_MEMORY", None, "0:9")}
    assert any("done=2" in line for line in lines)


class DropsPending(FakeSlurm):
    """Real Slurm after `scancel J_1` of a pending element: no record of 7_1 anywhere."""

    def ended(self, jobs, tasks):
        return {"7_0": TaskState("7_0", "COMPLETED", None, "0:0")}


def test_a_task_cancelled_while_pending_reads_cancelled_not_unknown(tmp_path):
    # Regression: the real cluster keeps no record of it, and the unit read "UNKNOWN".
    fake = DropsPending(tmp_path, ["a/r0", "b/r0"], fail_silently="b/r0")
    watch = array.Watch(fake, tmp_path, {"7": [["a/r0"], ["b/r0"]]}, lambda *_: None,
                              print, False, 0)
    _, missing = watch.run()
    assert missing == {"b/r0": TaskState("7_1", "CANCELLED", "cancelled_while_pending")}
    started = tmp_path / "slurm" / "started" / "7_1.json"
    started.parent.mkdir(parents=True, exist_ok=True)
    started.write_text(json.dumps({"job_id": "9"}))  # it ran: losing it is no cancel
    fake = DropsPending(tmp_path, ["a/r0", "b/r0"], fail_silently="b/r0")
    _, missing = array.Watch(fake, tmp_path, {"7": [["a/r0"], ["b/r0"]]},
                                   lambda *_: None, print, False, 0).run()
    assert missing["b/r0"].state == "UNKNOWN"


def test_watch_cancels_on_a_signal_unless_detached(tmp_path):
    items = ["a/r0", "b/r0"]
    for detach in (False, True):
        fake = FakeSlurm(tmp_path / str(detach), items)
        watch = array.Watch(fake, tmp_path / str(detach), {"7": [[i] for i in items]},
                                  lambda *_: None, print, detach, 0)
        watch.request_stop(2)
        signum, missing = watch.run()
        assert signum == 2 and fake.cancelled is not detach
        assert (missing == {}) is detach


def test_preflight_out_that_is_a_file_is_bad_input(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="OUT=.* is a file, not a directory"):
        slurm.preflight(tmp_path / "f", print, which=lambda _: "/x")


def test_a_squeue_of_another_format_stops_the_driver_loudly():
    run = Scripted({"squeue": [(0, "JOBID PARTITION NAME\n12_0 debug x\n", "")]})
    with pytest.raises(PreflightError, match="check=squeue"):
        slurm.Slurm(run).queued(["12"])


class RefusesSecond:
    """sbatch accepts the first array and refuses the second."""

    def __init__(self):
        self.submitted, self.cancelled = 0, []

    def submit(self, argv):
        self.submitted += 1
        if self.submitted > 1:
            raise PreflightError("sbatch", "sbatch exited 1: QOSMaxSubmitJobPerUserLimit")
        return "41"

    def cancel(self, jobs):
        self.cancelled += jobs


def test_a_refused_second_array_cancels_the_first_and_leaves_every_unit_to_run(tmp_path):
    doc = _doc(tmp_path)
    doc.save(tmp_path)
    fake = RefusesSecond()
    executor = cluster(SlurmConfig(), tmp_path, submissions=[], client=fake)
    executor.queued_jobs = lambda: {}  # nothing of an earlier run to re-attach to
    with pytest.raises(PreflightError, match="QOSMaxSubmitJobPerUserLimit"):
        driver.drive(tmp_path, doc, settings(), executor, out=print)
    assert fake.cancelled == ["41"]
    assert [u.status for u in doc.units] == ["not_run", "not_run"]
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("value", ["fast", "0", "-1", "nan", "1e9"])
def test_poll_interval_refused(value):
    with pytest.raises(UsageError, match=f"ZL_SLURM_POLL_S={value!r}"):
        kind.poll_s({"ZL_SLURM_POLL_S": value})


def test_watch_warns_once_while_squeue_does_not_answer(tmp_path):
    class Silent(FakeSlurm):
        def queued(self, jobs):
            self.polls += 1
            return None if self.polls < 4 else {}

    lines = []
    array.Watch(Silent(tmp_path, []), tmp_path, {"7": []}, lambda *_: None,
                      lines.append, False, 0).run()
    assert lines.count("warning: squeue did not answer; asking again") == 1


def test_a_resumes_dry_run_names_the_next_submission_and_estimates_from_its_own_walls(
        tmp_path):

    doc = _doc(tmp_path)
    doc.unit("tanh/r0").status, doc.unit("tanh/r0").wall_s = "ok", 30.0
    executor = cluster(SlurmConfig(), tmp_path,
                       submissions=[{"key": "s1-r0"}, {"key": "s1-later"}])
    lines = dryrun.describe(doc, executor, tmp_path)
    assert any("s2-later.sbatch (1 task(s): tanh/r1)" in line for line in lines)
    assert lines[-2:] == [
        "estimated makespan: 30 s with every task at once (no SLURM_PARALLEL), longest first",
        "projected wall of 1 units (later rounds from the walls of 1 operator; later rounds "
        "as round 0 (no later round ran): an overstatement): 1 device 30 s, 8 devices 30 s, "
        "64 devices 30 s"]


class SplitsPending(FakeSlurm):
    """Real Slurm after `scancel J_1` of a pending element it had split off the array: a
    record of 7_1, CANCELLED with its pending reason and exit 0:0."""

    def ended(self, jobs, tasks):
        return {"7_0": TaskState("7_0", "COMPLETED", None, "0:0"),
                "7_1": TaskState("7_1", "CANCELLED", "JobArrayTaskLimit", "0:0")}


def test_a_task_cancelled_while_pending_reads_the_same_with_or_without_a_record(tmp_path):
    # Regression: on the single-node cluster the same scancel of a pending element read
    # "CANCELLED exit=0:0 reason=JobArrayTaskLimit" when Slurm had kept a record of it.
    fake = SplitsPending(tmp_path, ["a/r0", "b/r0"], fail_silently="b/r0")
    _, missing = array.Watch(fake, tmp_path, {"7": [["a/r0"], ["b/r0"]]},
                                   lambda *_: None, print, False, 0).run()
    assert missing == {"b/r0": TaskState("7_1", "CANCELLED", "cancelled_while_pending")}
    started = tmp_path / "slurm" / "started" / "7_1.json"
    started.parent.mkdir(parents=True, exist_ok=True)
    started.write_text(json.dumps({"job_id": "9"}))  # it ran, then was cancelled: as recorded
    fake = SplitsPending(tmp_path, ["a/r0", "b/r0"], fail_silently="b/r0")
    _, missing = array.Watch(fake, tmp_path, {"7": [["a/r0"], ["b/r0"]]},
                                   lambda *_: None, print, False, 0).run()
    assert missing["b/r0"] == TaskState("7_1", "CANCELLED", "JobArrayTaskLimit", "0:0")


@pytest.mark.parametrize(("state", "signum", "expected"), [
    ("TIMEOUT", None, "timeout"), ("TIMEOUT", 2, "timeout"), ("OUT_OF_MEMORY", None, "error"),
    ("CANCELLED", 15, "interrupted")])
def test_slurms_time_limit_reads_timeout_not_interrupted(state, signum, expected):
    assert array.end_state(TaskState("7_0", state), signum) == expected


class TimesOut(FakeSlurm):
    """SLURM_TIME ran out in node mode: the array task's SIGTERM stopped a/r0 (its done file
    says interrupted) before b/r0 of its share started; Slurm ended the task TIMEOUT."""

    def queued(self, jobs):
        self.polls += 1
        if self.polls > 1:
            return {}
        path = self.directory / "slurm" / "done" / "a-r0.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"item": "a/r0", "status": "interrupted", "rc": 143,
                                    "task": "7_0", "host": "n1"}))
        return {"7_0": TaskState("7_0", "RUNNING")}

    def ended(self, jobs, tasks):
        return {t: TaskState(t, "TIMEOUT", None, "0:15") for t in tasks}


def test_a_task_slurm_stopped_at_slurm_time_reads_timeout_with_the_limit(tmp_path):
    # Regression: such a unit read "interrupted rc=143" with no reason.
    from harness.executors.base import Task

    fake, ends = TimesOut(tmp_path, []), []

    class Events:
        def queued(self, task, where):
            raise AssertionError("re-attached: nothing submitted")

        def started(self, task, where, pid=None):
            pass

        def ended(self, task, end):
            ends.append(end)

    executor = cluster(SlurmConfig(time="30", unit="node"), tmp_path, submissions=[],
                       client=fake)
    executor.poll_s = 0
    executor.queued_jobs = lambda: {"7": [["a/r0", "b/r0"]]}
    tasks = [Task(i, ("x",), tmp_path / f"{i}.log") for i in ("a/r0", "b/r0")]
    outcome = executor.run(tasks, Events())
    assert outcome.signal is None
    found = {e.task: e for e in ends}
    assert found["a/r0"].state == found["b/r0"].state == "timeout"
    assert found["a/r0"].rc == 143
    assert found["a/r0"].reason == "timeout after SLURM_TIME=30 (slurm task 7_0 TIMEOUT exit=0:15)"


def test_a_dry_run_notes_what_the_clusters_preflight_would_refuse_and_creates_nothing(
        tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch
    said = []
    out = tmp_path / "runs"
    chosen = Chosen(executors.get("slurm"), SlurmConfig())
    where.preflight(chosen, out, said.append, dry_run=True)  # a plan made anywhere
    assert said == ["note: not on a Slurm login node here; the real run would stop: "
                    "PREFLIGHT_FAILED check=sbatch detail=EXECUTOR=slurm needs sbatch on PATH "
                    "(a Slurm login node); none was found"]
    assert not out.exists()
    with pytest.raises(PreflightError, match="check=sbatch"):
        where.preflight(chosen, out, said.append)


# --------------------------------------------------------------------------- a resume's arrays


def _handed(tmp_path, done_by: str | None, status: str = "ok"):
    """A campaign whose tanh/r0 was handed to array task 7_0; its done file, written by the
    array task `done_by` (None: none), says `status`."""
    doc = _doc(tmp_path, rounds=1)
    doc.executor = ExecutorDoc("slurm")
    doc.unit("tanh/r0").status, doc.unit("tanh/r0").device = "submitted", "slurm:7_0"
    if done_by is not None:
        path = done_path(tmp_path, "tanh/r0")
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"item": "tanh/r0", "status": status, "rc": 0,
                                    "wall_s": 1.5, "device": None, "host": "n1",
                                    "task": done_by, "reason": None}))
    return doc


def test_a_done_file_of_the_units_own_array_task_is_taken_and_an_earlier_attempts_is_not(
        tmp_path):
    doc = _handed(tmp_path, "7_0")
    (end,) = array.taken_over(tmp_path, {u.id: u.device for u in doc.units}).values()
    assert (end.task, end.state, end.wall_s) == ("tanh/r0", "ok", 1.5)
    stale = _handed(tmp_path / "b", "5_3")  # an earlier submission's: its run was set aside
    assert array.taken_over(tmp_path / "b", {u.id: u.device for u in stale.units}) == {}
    stopped = _handed(tmp_path / "c", "7_0", "interrupted")  # did not run to its end
    assert array.taken_over(tmp_path / "c", {u.id: u.device for u in stopped.units}) == {}


def test_a_local_resume_that_cannot_ask_slurm_about_its_handed_units_is_refused(
        tmp_path, monkeypatch):
    # A task of job 7 may still write into the campaign: with no squeue to ask, a local
    # resume would run its unit beside it.
    doc = _handed(tmp_path, None)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    here, there = Chosen(executors.get("local")), Chosen(executors.get("slurm"))
    with pytest.raises(UsageError) as info:
        where.earlier_runs(tmp_path, doc, here)
    assert str(info.value).startswith(
        f"RESUME={str(tmp_path)!r}: units of this campaign were handed to Slurm job(s) 7 and "
        "Slurm cannot say whether they still run (PREFLIGHT_FAILED check=slurm")
    assert where.earlier_runs(tmp_path, doc, there) == []  # its executor asks again
    local = _doc(tmp_path / "local", rounds=1)  # never handed to Slurm: nothing to ask
    assert where.earlier_runs(tmp_path / "local", local, here) == []


def test_a_local_resume_is_refused_while_any_array_of_the_campaign_is_queued(tmp_path):
    # A signal's scancel that Slurm had not carried out when the driver stopped waiting leaves
    # units interrupted in campaign.json, while their task may still write.
    doc = _handed(tmp_path, None)
    doc.unit("tanh/r0").status = "interrupted"
    doc.executor.state["submissions"] = [{"job": "7", "key": "s1-r0", "tasks": [["tanh/r0"]]}]

    def settled(client: slurm.Slurm) -> list:
        return kind.settled(tmp_path, {}, doc.executor, False, client=client)

    client = slurm.Slurm(Scripted({"squeue": [(0, "7_0|COMPLETING|None\n", "")]}))
    with pytest.raises(UsageError, match=r"Slurm job\(s\) 7 of this campaign still have tasks"):
        settled(client)
    gone = slurm.Slurm(Scripted({"squeue": [(1, "", "Invalid job id specified")]}))
    assert settled(gone) == []
    silent = slurm.Slurm(Scripted({"squeue": [(1, "", "Socket timed out")]}))
    # nothing handed to it now: a local resume need not wait for Slurm to answer
    assert settled(silent) == []
