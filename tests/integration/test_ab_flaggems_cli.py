"""AXIS=flaggems: an A/B campaign of two FlagGems commits, each side importing its own flag_gems
and both running one commit's benchmark files; the user's checkout only read."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.settings.spec import REPO_ROOT

from .test_ab_cli import harness
from .test_ab_suite_cli import SHAPES

pytestmark = pytest.mark.integration
# Each session says which flag_gems it imported, into its run directory.
CONFTEST_TAIL = '''
import os as _os

import flag_gems as _flag_gems

if _os.environ.get("ZL_PLUGIN_RUN_DIR"):
    with open(_os.path.join(_os.environ["ZL_PLUGIN_RUN_DIR"], "flag_gems.txt"), "w") as _fh:
        _fh.write(_flag_gems.VERSION)
'''


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def flaggems_repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A FlagGems-shaped git checkout (src/flag_gems, benchmark/, pytest.ini putting src on
    the path) with two commits: flag_gems VERSION "A", then "B" with a benchmark edit."""
    repo = tmp_path / "FlagGems"
    shutil.copytree(REPO_ROOT / "examples" / "cpu_suite", repo,
                    ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    ini = repo / "pytest.ini"
    ini.write_text(ini.read_text().replace("[pytest]\n", "[pytest]\npythonpath = src\n"))
    with open(repo / "benchmark" / "conftest.py", "a") as fh:
        fh.write(CONFTEST_TAIL)
    (repo / "src" / "flag_gems").mkdir(parents=True)
    (repo / "src" / "flag_gems" / "__init__.py").write_text('VERSION = "A"\n')
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "A")
    a = git(repo, "rev-parse", "HEAD")
    (repo / "src" / "flag_gems" / "__init__.py").write_text('VERSION = "B"\n')
    with open(repo / "benchmark" / "test_tanh.py", "a") as fh:
        fh.write("# changed in B\n")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "B")
    return repo, a, git(repo, "rev-parse", "HEAD")


def campaign(tmp_path: Path, repo: Path, *flags: str):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(SHAPES)
    return harness("ab", "--backend", "cpu", "--op", "tanh", "--axis", "flaggems", "--rounds",
                   "2", "--shape-mode", "file", "--shape-file", str(shapes), "--flaggems-dir",
                   str(repo), "--out", str(tmp_path / "runs"), *flags)


def test_each_side_imports_its_commits_flag_gems_and_both_run_one_benchmark(tmp_path):
    repo, a, b = flaggems_repo(tmp_path)
    before = (git(repo, "status", "--porcelain"), git(repo, "worktree", "list"))
    proc = campaign(tmp_path, repo, "--a-ref", "HEAD~1", "--b-ref", "HEAD")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"side A: FlagGems {a}; side B: FlagGems {b}; benchmark files of {a}" in proc.stdout
    (directory,) = (tmp_path / "runs" / "ab" / "flaggems-tanh").iterdir()
    imported = {rel: (directory / "tanh" / rel / "flag_gems.txt").read_text()
                for rel in ("A/r0", "B/r0", "A/r1", "B/r1")}
    assert imported == {"A/r0": "A", "B/r0": "B", "A/r1": "A", "B/r1": "B"}
    bench = (directory / "stacks" / "B" / "benchmark" / "test_tanh.py").read_text()
    assert "changed in B" not in bench  # both sides run A_REF's benchmark files
    assert (git(repo, "status", "--porcelain"), git(repo, "worktree", "list")) == before
    report = (directory / "ab.md").read_text()
    assert f"- axis: flaggems (two FlagGems commits): A={a}, B={b}" in report
    doc = json.loads((directory / "ab.json").read_text())
    assert (doc["caliber"]["tune"], doc["caliber"]["baseline"]) == ("replay", "once")


def test_a_bad_pair_of_commits_is_refused_in_one_line_before_anything(tmp_path):
    repo, a, _ = flaggems_repo(tmp_path)
    cases = [
        (("--a-ref", "HEAD", "--b-ref", "HEAD"), "are the same commit"),
        (("--a-ref", "HEAD", "--b-ref", "no-such-branch"),
         "B_REF='no-such-branch' is not accepted; expected a commit, branch or tag of"),
        (("--b-ref", "HEAD"), "AXIS=flaggems needs A_REF: a commit of FLAGGEMS_DIR's git"),
    ]
    for flags, message in cases:
        proc = campaign(tmp_path, repo, *flags)
        assert proc.returncode == 2 and message in proc.stderr.strip().splitlines()[-1], (
            flags, proc.stderr)
    # operators are found in BENCH_REF's benchmark files, not the checkout's work tree
    git(repo, "rm", "-q", "benchmark/test_tanh.py")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "no tanh")
    git(repo, "tag", "notanh")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    proc = campaign(tmp_path, repo, "--a-ref", a, "--b-ref", "HEAD", "--bench-ref", "notanh")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr
    assert "PREFLIGHT_FAILED check=test_node" in proc.stdout
    planned = campaign(tmp_path, repo, "--a-ref", a, "--b-ref", "HEAD", "--dry-run", "1")
    assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr
    assert "axis: flaggems -> two FlagGems commits, each side's tree in " in planned.stdout
    assert "/stacks/A\n" in planned.stdout  # the first run's working directory: A's tree
    (repo / "src" / "flag_gems" / "__init__.py").write_text('VERSION = "edited"\n')
    proc = campaign(tmp_path, repo, "--a-ref", a, "--b-ref", "HEAD")
    assert proc.returncode == 2 and "B_REF names the checked-out commit of" in proc.stderr
    assert "uncommitted changes" in proc.stderr
    not_git = tmp_path / "plain"
    shutil.copytree(REPO_ROOT / "examples" / "cpu_suite", not_git)
    proc = campaign(tmp_path, not_git, "--a-ref", "x", "--b-ref", "y")
    assert proc.returncode == 2 and "needs FLAGGEMS_DIR to be a git checkout" in proc.stderr
    assert not (tmp_path / "runs" / "ab").exists()


def test_an_operator_only_one_commit_has_is_skipped_with_that_reason(tmp_path):
    repo, a, _ = flaggems_repo(tmp_path)
    init = repo / "src" / "flag_gems" / "__init__.py"
    # a comment or docstring naming an operator implements nothing: tanh still runs
    init.write_text('VERSION = "B"  # a faster tanh some day\n\n\ndef add(x, y):\n'
                    '    """Unlike sum, ..."""\n    return x + y\n')
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "B adds add")
    b = git(repo, "rev-parse", "HEAD")
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(SHAPES)
    args = ["ab", "--backend", "cpu", "--ops", "tanh,add", "--axis", "flaggems", "--rounds",
            "2", "--shape-mode", "file", "--shape-file", str(shapes), "--flaggems-dir",
            str(repo), "--out", str(tmp_path / "runs"), "--a-ref", a, "--b-ref", b]
    why = (f"add is not in flag_gems at A_REF ({a[:12]}), only at B_REF: side A has no "
           "implementation to time")
    planned = harness(*args, "--dry-run", "1")
    assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr
    assert f"(skipped: {why})" in planned.stdout
    proc = harness(*args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert f"add: skipped: {why}" in proc.stdout
    (directory,) = (tmp_path / "runs" / "ab" / "flaggems-suite").iterdir()
    assert not (directory / "add").exists()  # never run, on either side
    doc = json.loads((directory / "ab.json").read_text())
    assert doc["operators"]["add"]["verdict"] == "skipped"
    assert doc["operators"]["add"]["reason"] == why
    assert doc["operators"]["tanh"]["verdict"] != "skipped"
    assert {u["status"] for u in doc["units"] if u["id"].startswith("add")} == {"skipped"}
    resumed = harness("ab", "--resume", str(directory), "--rounds", "3")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr
    assert not (directory / "add").exists()  # more rounds never run it either
