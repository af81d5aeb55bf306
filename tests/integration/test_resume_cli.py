"""What a resume refuses or says about the campaign it finds: a checkout moved to another
commit, an earlier campaign of the same command cut short, a folder of campaigns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.settings.spec import REPO_ROOT
from tests.gate_plugin import GATE_VAR
from tests.procs import wait_for

from .test_ab_cli import harness
from .test_ab_flaggems_cli import git
from .test_ab_suite_cli import interrupt_after_first_unit, suite_args

pytestmark = pytest.mark.integration


def commit_all(repo: Path, message: str) -> str:
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def test_a_resume_after_flaggems_dir_moved_to_another_commit_is_refused_naming_both(tmp_path):
    # Regression: RESUME ROUNDS=2 after `git checkout` of another FlagGems commit ran round 1
    # there: the run identities of one comparison showed two commits and nothing said so.
    args = suite_args(tmp_path, "tanh", 1)
    suite = tmp_path / "suite"
    git(suite, "init", "-q")
    first = commit_all(suite, "first")
    proc = harness(*args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (directory,) = (tmp_path / "runs" / "ab").glob("*/*")
    with open(suite / "benchmark" / "test_tanh.py", "a") as fh:
        fh.write("# another commit\n")
    second = commit_all(suite, "second")
    before = (directory / "campaign.json").read_bytes()
    resumed = harness("ab", "--resume", str(directory), "--rounds", "2")
    assert resumed.returncode == 2, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    message = resumed.stderr.strip()
    assert message == (
        f"error: FLAGGEMS_DIR={str(suite)!r} is at commit {second} now, but side A's finished "
        f"rounds ran at {first}: a resume would mix rounds of two FlagGems commits; check out "
        f"{first} again to resume, or start a new campaign")
    assert (directory / "campaign.json").read_bytes() == before
    assert not (directory / "tanh" / "A" / "r1").exists()
    git(suite, "checkout", "-q", first)  # back at the campaign's commit: it resumes
    again = harness("ab", "--resume", str(directory), "--rounds", "2")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    ident = json.loads((directory / "tanh" / "B" / "r1" / "run_identity.json").read_text())
    assert ident["versions"]["flaggems_commit"] == first


def test_the_same_command_after_ctrl_c_says_which_campaign_it_leaves_unfinished(tmp_path):
    # Regression: `make ab ...` typed again after Ctrl-C started a new campaign and said nothing
    # of the interrupted one, whose finished units a RESUME would have kept.
    args = suite_args(tmp_path, "tanh,add", 1)
    rc, output = interrupt_after_first_unit(args, signal.SIGINT)
    assert rc == 130, output[-3000:]
    (interrupted,) = (tmp_path / "runs" / "ab").glob("*/*")
    note = (f"note: the last campaign of this command, {interrupted}, is interrupted with 1 of "
            f"2 units left; this starts a new one; RESUME={interrupted} (harness ab --resume "
            f"{interrupted}) completes that one")
    planned = harness(*args, "--dry-run")
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr[-2000:]
    assert note in planned.stdout.splitlines()
    other = harness(*[a if a != "tanh,add" else "tanh" for a in args], "--dry-run")
    assert "note: the last campaign" not in other.stdout  # another command: not its campaign
    resumed = harness("ab", "--resume", str(interrupted))
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    again = harness(*args, "--dry-run")  # the campaign is done: nothing to say
    assert again.returncode == 0 and "note: the last campaign" not in again.stdout


def test_summary_of_a_campaign_still_running_says_so(tmp_path):
    # Regression: `make summary RUN=<campaign>` while it ran said the directory was "none of
    # the inputs of harness summary".
    gate = tmp_path / "gate"
    gate.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), GATE_VAR: str(gate),
           "PYTEST_PLUGINS": "tests.gate_plugin"}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli",
                             *suite_args(tmp_path, "tanh", 1)], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (gate / "ready").exists(), 120, "the unit's pytest to start", 0.1)
        (directory,) = (tmp_path / "runs" / "ab").glob("*/*")
        running = harness("summary", str(directory))
        (gate / "go").touch()
        assert proc.wait(timeout=300) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert running.returncode == 2, running.stdout + running.stderr
    assert running.stderr.strip() == (
        f"error: campaign {str(directory)!r} is still running (1 running): its ab.json is "
        "written when it ends; summarize it then")
    assert harness("summary", str(directory)).returncode == 0  # done: its table


def test_a_campaign_started_with_relative_paths_resumes_from_another_directory(tmp_path):
    # Regression: the campaign kept FLAGGEMS_DIR=suite and SHAPE_FILE=shapes.yaml as typed, so
    # a resume typed elsewhere read them against its own directory and refused or ran another
    # tree.
    args = suite_args(tmp_path, "tanh", 1)
    relative = [str(Path(a).relative_to(tmp_path)) if a.startswith(str(tmp_path)) else a
                for a in args]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    first = subprocess.run([sys.executable, "-m", "harness.cli", *relative], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    (directory,) = (tmp_path / "runs" / "ab").glob("*/*")
    argv = json.loads((directory / "campaign.json").read_text())["argv"]
    for flag, path in (("--flaggems-dir", "suite"), ("--shape-file", "shapes.yaml"),
                       ("--out", "runs")):
        assert argv[argv.index(flag) + 1] == str(tmp_path / path)
    resumed = harness("ab", "--resume", str(directory), "--rounds", "2")  # typed in the checkout
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    ident = json.loads((directory / "tanh" / "A" / "r1" / "run_identity.json").read_text())
    assert ident["shape_file"] == str(tmp_path / "shapes.yaml")
    assert not (REPO_ROOT / "suite").exists() and not (REPO_ROOT / "shapes.yaml").exists()
