"""`harness ab` and `harness batch` with EXECUTOR=slurm against the fake Slurm of
tests/fake_slurm (sbatch/squeue/scontrol/scancel on PATH that run each task locally)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.settings.spec import REPO_ROOT
from tests.gate_plugin import GATE_VAR
from tests.procs import wait_for
from tests.slurm import cases as slurm_cases
from tests.slurm.cases import common_args, harness

pytestmark = pytest.mark.integration
FAKE_BIN = REPO_ROOT / "tests" / "fake_slurm" / "bin"
# The cases tests/slurm/test_executor.py runs on a real Slurm: where that session runs beside
# this one (ZL_SLURM_BESIDE=1, as .ci/run sets), the fake's run of them adds nothing.
on_real_slurm = pytest.mark.skipif(os.environ.get("ZL_SLURM_BESIDE") == "1",
                                   reason="ZL_SLURM_BESIDE=1: the real Slurm session runs it")


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}",
            "FAKE_SLURM_STATE": str(tmp_path / "fake-slurm"), "ZL_SLURM_POLL_S": "0.2"}


@on_real_slurm
def test_ab_suite_campaign_runs_every_unit_as_an_array_task(fake_env, tmp_path):
    slurm_cases.ab_suite_campaign(fake_env, tmp_path)


@on_real_slurm
def test_batch_node_mode_shares_operators_and_records_a_failure(fake_env, tmp_path):
    slurm_cases.batch_node_mode(fake_env, tmp_path)


@on_real_slurm
def test_interrupt_cancels_the_array_and_resume_resubmits_only_what_is_left(fake_env,
                                                                           tmp_path):
    slurm_cases.interrupt_then_resume(fake_env, tmp_path)


def test_detached_campaign_keeps_running_and_resume_reattaches(fake_env, tmp_path):
    slurm_cases.detach_then_reattach(fake_env, tmp_path)


def test_a_task_lost_with_its_node_is_reported_from_the_jobcomp_log(fake_env, tmp_path):
    env = {**fake_env, "FAKE_SLURM_NODE_FAIL": "1", "FAKE_SLURM_PURGED": "1",
           "FAKE_SLURM_JOBCOMP": "1"}
    proc = harness(env, "batch", *common_args(tmp_path), "--ops", "tanh,add")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "] add error rc= " in proc.stdout and "    slurm task " in proc.stdout
    assert "NODE_FAIL exit=0:0" in proc.stdout
    assert "[1/2] tanh ok" in proc.stdout


def test_without_sbatch_nothing_is_created_and_the_exit_is_3(tmp_path):
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    proc = harness(env, "batch", *common_args(tmp_path), "--ops", "tanh")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "PREFLIGHT_FAILED check=sbatch" in proc.stdout
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("bad, line", [
    (["--slurm-args", "--wrap=id; rm -rf ~"],
     "error: SLURM_ARGS='--wrap=id; rm -rf ~' is not accepted: --wrap is set by the harness"),
    (["--slurm-time", "1h"], "error: SLURM_TIME='1h' is not accepted"),
    (["--runner", "docker"], "error: RUNNER='docker' is not accepted with EXECUTOR=slurm"),
    (["--runner", "pyxis"], "error: RUNNER='pyxis' needs SLURM_IMAGE")])
def test_a_bad_slurm_value_is_one_line_exit_2_and_nothing_submitted(fake_env, tmp_path, bad,
                                                                    line):
    proc = harness(fake_env, "ab", *common_args(tmp_path), "--op", "tanh", "--axis", "none",
                   *bad)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().startswith(line)
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists() and not (tmp_path / "fake-slurm").exists()


def test_cluster_runner_without_slurm_is_refused(tmp_path):
    proc = harness(dict(os.environ), "batch", "--backend", "cpu", "--ops", "tanh",
                   "--runner", "apptainer", "--out", str(tmp_path / "runs"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: RUNNER='apptainer' runs Slurm tasks; it needs "
                                   "EXECUTOR=slurm")


def test_dry_run_prints_the_script_the_sbatch_line_and_the_makespan(fake_env, tmp_path):
    walls = tmp_path / "earlier"
    walls.mkdir()
    (walls / "ops_status.csv").write_text("op,wall_s\ntanh,30\nadd,50\n")
    proc = harness({**fake_env, "WALLS_FROM": str(walls), "SLURM_PARALLEL": "1"}, "batch",
                   *common_args(tmp_path), "--ops", "tanh,add", "--dry-run",
                   "--slurm-partition", "debug")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "#SBATCH --partition=debug" in proc.stdout
    assert "--- submit: sbatch --parsable --array=0-1%1 " in proc.stdout
    assert "estimated makespan: 80 s on 1 array slot(s)" in proc.stdout
    assert not (tmp_path / "runs").exists() and not (tmp_path / "fake-slurm").exists()


def test_ab_dry_run_on_slurm_needs_no_sbatch_and_shows_both_arrays(tmp_path):
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    proc = harness(env, "ab", *common_args(tmp_path), "--ops", "tanh,add", "--axis", "none",
                   "--rounds", "2", "--dry-run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("--- submit: sbatch") == 2
    assert "--dependency=afterany:JOB_OF_s1-r0" in proc.stdout
    assert "note: not on a Slurm login node here; the real run would stop: PREFLIGHT_FAILED " \
        "check=sbatch" in proc.stdout
    assert not (tmp_path / "runs").exists()


def test_a_task_index_outside_its_plan_is_refused(tmp_path):
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"kind": "batch", "tasks": [["tanh"]]}))
    proc = harness({**os.environ, "SLURM_ARRAY_TASK_ID": "1"}, "slurm-task", str(plan))
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: SLURM_ARRAY_TASK_ID='1' is not accepted; expected "
                                   "a task index below 1")


def test_a_refused_submission_is_exit_3_and_leaves_the_campaign_to_resume(fake_env, tmp_path):
    env = {**fake_env, "FAKE_SLURM_SBATCH_FAIL": "sbatch: error: Batch job submission "
                                                 "failed: Invalid partition name specified"}
    proc = harness(env, "ab", *common_args(tmp_path), "--op", "tanh", "--axis", "none",
                   "--rounds", "2")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "PREFLIGHT_FAILED check=sbatch" in proc.stdout
    assert "Invalid partition name specified" in proc.stdout
    directory = slurm_cases.campaign_dir(tmp_path)
    units = slurm_cases.units(directory)
    assert {u["status"] for u in units.values()} == {"not_run"}
    assert not (directory / "cache").exists()


def test_a_refused_batch_submission_leaves_no_batch_directory(fake_env, tmp_path):
    env = {**fake_env, "FAKE_SLURM_SBATCH_FAIL": "sbatch: error: invalid account"}
    proc = harness(env, "batch", *common_args(tmp_path), "--ops", "tanh")
    assert proc.returncode == 3 and "invalid account" in proc.stdout
    assert list((tmp_path / "runs" / "batch").iterdir()) == []


def test_image_sides_under_slurm_run_each_pytest_as_a_pyxis_step_in_its_image(fake_env,
                                                                              tmp_path):
    import sys

    a_image = "registry.example/flaggems-cuda@sha256:" + "a" * 64
    b_image = "registry.example/flaggems-cuda-next@sha256:" + "b" * 64
    log = tmp_path / "steps.log"
    env = {**fake_env, "FAKE_ENGINE_LOG": str(log), "FAKE_ENGINE_PYTHON": sys.executable}
    args = ["ab", *common_args(tmp_path), "--op", "tanh", "--rounds", "2", "--axis", "image",
            "--runner", "pyxis", "--a-image", a_image, "--b-image", b_image]
    (tmp_path / "suite" / "src").mkdir()  # a FlagGems checkout's own flag_gems: hidden inside
    refused = harness(env, *args, "--slurm-image", a_image)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1].startswith(
        f"error: SLURM_IMAGE='{a_image}' is not used with AXIS=image"), refused.stderr
    planned = harness(env, *args, "--dry-run", "1")
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr
    step = next(line for line in planned.stdout.splitlines() if line.startswith("pytest: srun"))
    assert step.startswith(f"pytest: srun --ntasks=1 --container-image={a_image} ")
    assert not log.exists()
    proc = harness(env, *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert [line.split()[0] for line in log.read_text().splitlines()] == [
        a_image, b_image, b_image, a_image]
    directory = slurm_cases.campaign_dir(tmp_path)
    for side, image in (("A", a_image), ("B", b_image)):
        ident = json.loads((directory / "tanh" / side / "r1" / "run_identity.json").read_text())
        assert ident["image_digest"] == image
        assert ident["command"][:3] == ["srun", "--ntasks=1", f"--container-image={image}"]
        mounts = next(a for a in ident["command"] if a.startswith("--container-mounts="))
        assert f"{tmp_path / 'suite' / 'src'}:ro" in mounts  # the checkout's flag_gems hidden
    receipt = json.loads((directory / "receipt.json").read_text())
    assert receipt["sides"]["B"]["image_digests"] == [b_image]


def _gated_driver(fake_env: dict[str, str], tmp_path: Path, *args: str
                  ) -> tuple[subprocess.Popen, Path]:
    """A campaign's driver that polls once, at its submission, and the gate that holds the
    first unit's pytest (tests/gate_plugin): the test acts while that unit surely runs."""
    gate = tmp_path / "gate"
    gate.mkdir()
    env = {**fake_env, "ZL_SLURM_POLL_S": "3600", GATE_VAR: str(gate),
           "PYTEST_PLUGINS": "tests.gate_plugin", "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "ab", *common_args(tmp_path),
                             "--axis", "none", "--rounds", "1", *args], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: (gate / "ready").exists(), 600, "the first unit's pytest to start", 0.1)
    return proc, gate


def _kill_9(proc: subprocess.Popen) -> None:
    proc.kill()  # the driver alone: the array runs on, as on a cluster
    proc.wait(timeout=30)


def _left_the_queue(fake_env: dict[str, str], job: str) -> bool:
    return subprocess.run(["squeue", "--array", "--noheader", "--format=%i|%T|%r",
                           f"--jobs={job}"], env=fake_env, capture_output=True).returncode != 0


def _hashes(directory: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_unit_that_finished_while_no_driver_followed_is_kept_by_the_resume(fake_env,
                                                                            tmp_path):
    # Regression: after scancel of one task and kill -9 of the driver, the resume resubmitted
    # the unit that had finished ok (submit deleted its done file) and ran it again.
    proc, gate = _gated_driver(fake_env, tmp_path, "--ops", "tanh,add", "--slurm-parallel", "1")
    try:
        directory = slurm_cases.campaign_dir(tmp_path)
        (first,), (second,) = slurm_cases.plan_ids(
            json.loads((directory / "slurm" / "s1-r0.plan.json").read_text()))
        placed = slurm_cases.units(directory)
        task = placed[second]["device"].removeprefix("slurm:")
        subprocess.run(["scancel", task], env=fake_env, check=True)  # the one still pending
        (gate / "go").touch()
        done = directory / "slurm" / "done" / f"{first.replace('/', '-')}.json"
        wait_for(done.is_file, 600, f"{first} to finish", 0.1)
        _kill_9(proc)
        job = task.split("_")[0]
        wait_for(lambda: _left_the_queue(fake_env, job), 600, "the array to end", 0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
    op = first.split("/")[0]
    kept = _hashes(directory / op)
    resumed = harness(fake_env, "ab", "--resume", str(directory))
    assert resumed.returncode == 0, slurm_cases.says(resumed)
    assert (f"1 unit(s) finished while no driver followed them, taken as they ended: {first}"
            in resumed.stdout)
    after = slurm_cases.units(directory)
    assert (after[first]["status"], after[first]["attempts"]) == ("ok", 1)
    assert after[first]["slurm_task"] == placed[first]["device"].removeprefix("slurm:")
    assert (after[second]["status"], after[second]["attempts"]) == ("ok", 2)
    plan = json.loads((directory / "slurm" / "s2-r0.plan.json").read_text())
    assert slurm_cases.plan_ids(plan) == [[second]]  # only the cancelled one ran again
    assert {k: v for k, v in _hashes(directory / op).items() if k in kept} == kept
    assert harness(fake_env, "receipt", "verify", str(directory)).returncode == 0


def test_a_local_resume_while_an_array_task_runs_is_refused_naming_the_job(fake_env,
                                                                          tmp_path):
    # Regression: RESUME with EXECUTOR=local while the campaign's array task still ran waited
    # 60 s for the unit, recorded it error and wrote AB_DONE; the task then wrote its results
    # into the finished campaign and its receipt still verified.
    proc, gate = _gated_driver(fake_env, tmp_path, "--op", "tanh")
    try:
        _kill_9(proc)
        directory = slurm_cases.campaign_dir(tmp_path)
        job = slurm_cases.units(directory)["tanh/r0"]["device"].removeprefix("slurm:")
        job = job.split("_")[0]
        before = (directory / "campaign.json").read_bytes()
        local = harness(fake_env, "ab", "--resume", str(directory), "--executor", "local")
        assert local.returncode == 2, slurm_cases.says(local)
        assert local.stderr.strip() == (
            f"error: RESUME={str(directory)!r}: Slurm job(s) {job} of this campaign still have "
            "tasks queued or running, which write into it; resume with EXECUTOR=slurm to "
            f"follow them, or scancel {job} and resume")
        assert (directory / "campaign.json").read_bytes() == before
        assert not (directory / "ab.json").exists()
        (gate / "go").touch()
        wait_for(lambda: _left_the_queue(fake_env, job), 600, "the array to end", 0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
    resumed = harness(fake_env, "ab", "--resume", str(directory), "--executor", "local")
    assert resumed.returncode == 0, slurm_cases.says(resumed)
    unit = slurm_cases.units(directory)["tanh/r0"]
    assert (unit["status"], unit["attempts"]) == ("ok", 1)  # its array task's end, kept
    assert "[start]" not in resumed.stdout
    assert harness(fake_env, "receipt", "verify", str(directory)).returncode == 0


def _as_written_before(directory: Path) -> None:
    """Rewrite campaign.json as the harness wrote it before campaigns kept an executor
    document: schema /1, the Slurm settings and submissions under "slurm"."""
    path = directory / "campaign.json"
    doc = json.loads(path.read_text())
    kept = doc.pop("executor")
    doc.update(schema="harness-campaign/1", slurm={"flags": kept["settings"],
                                                   "submissions": kept["state"]["submissions"]})
    path.write_text(json.dumps(doc))


def test_a_campaign_written_before_executor_documents_resumes_on_slurm_as_it_ran(fake_env,
                                                                               tmp_path):
    first = harness(fake_env, "ab", *common_args(tmp_path), "--op", "tanh", "--axis", "none",
                    "--rounds", "1", "--slurm-parallel", "1")
    assert first.returncode == 0, slurm_cases.says(first)
    directory = slurm_cases.campaign_dir(tmp_path)
    _as_written_before(directory)
    # no EXECUTOR given: the campaign's own, with the SLURM_PARALLEL it kept
    resumed = harness(fake_env, "ab", "--resume", str(directory), "--rounds", "2")
    assert resumed.returncode == 0, slurm_cases.says(resumed)
    assert "--array=0%1 " in resumed.stdout
    doc = json.loads((directory / "campaign.json").read_text())
    assert doc["schema"] == "harness-campaign/2" and "slurm" not in doc
    assert doc["executor"]["name"] == "slurm"
    assert doc["executor"]["settings"] == {"slurm_parallel": "1"}
    # the earlier submission is kept: the resume's is the second
    assert [s["key"] for s in doc["executor"]["state"]["submissions"]] == ["s1-r0", "s2-later"]
    assert all(u["status"] == "ok" and u["slurm_task"] for u in doc["units"])
