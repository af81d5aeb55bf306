"""What bisect is given: the steps a kind lists from git or a stack list, bisect.json, and every
refused input, each one line and exit 2 with nothing made."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness import axes, cli
from harness.axes.steps import StepsGiven, commit_range, stack_list
from harness.bisect import document, driver
from harness.bisect.search import Comparison, Row
from harness.errors import UsageError
from harness.fsutil import take_lock
from harness.history import changes, command, queries
from harness.settings.spec import REPO_ROOT
from tests import bisect_repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str]]:
    return bisect_repo.build(tmp_path_factory.mktemp("bisect"))


def given(repo: Path, good: str | None, bad: str | None, stacks: Path | None = None
          ) -> StepsGiven:
    return StepsGiven(good, bad, repo, stacks)


def test_a_commit_range_is_good_then_bads_first_parents_with_subjects_and_trees(repo):
    path, commits = repo
    found = commit_range(given(path, commits[0][:10], "HEAD"), "src")
    assert [s.value for s in found] == commits
    assert found[bisect_repo.SLOW_AT].subject == "tanh: more passes"
    assert found[0].label == commits[0][:12] and found[0].date.startswith("20")
    # a docs-only commit runs the source tree of the one before it
    assert found[8].code == found[7].code and found[7].code != found[6].code


def test_a_range_inside_the_history_starts_and_ends_where_asked(repo):
    path, commits = repo
    found = commit_range(given(path, commits[3], commits[6]), "src")
    assert [s.value for s in found] == commits[3:7]


@pytest.mark.parametrize("good, bad, words", [
    ("HEAD", "HEAD~3", "is not an ancestor of"),
    ("HEAD", "HEAD", "are the same commit"),
    ("no-such-ref", "HEAD", "GOOD='no-such-ref' is not accepted"),
    ("-x", "HEAD", "GOOD='-x' is not accepted"),
    (None, "HEAD", "bisect needs GOOD"),
])
def test_bad_ends_are_refused_in_one_line(repo, good, bad, words):
    path, _ = repo
    with pytest.raises(UsageError, match=re.escape(words)) as exc:
        commit_range(given(path, good, bad), "src")
    assert "\n" not in str(exc.value)


def test_a_checkout_with_uncommitted_changes_or_no_git_is_refused(repo, tmp_path):
    path, commits = repo
    readme = path / "CHANGES.md"
    before = readme.read_text()
    readme.write_text(before + "uncommitted\n")
    try:
        with pytest.raises(UsageError, match="has uncommitted changes"):
            commit_range(given(path, commits[0], "HEAD"), "src")
    finally:
        readme.write_text(before)
    with pytest.raises(UsageError, match="is not a git checkout"):
        commit_range(given(tmp_path, "a", "b"), "src")


def test_a_stack_list_is_read_in_order_between_its_ends(tmp_path):
    listed = tmp_path / "stacks.txt"
    pythons = []
    for name in ("n1", "n2", "n3"):
        exe = tmp_path / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
        pythons.append(str(exe))
    listed.write_text(f"# nightly builds\n{pythons[0]}\n\n{pythons[1]}  # a note\n{pythons[2]}\n")
    kind = axes.get("python")
    assert kind.steps is not None
    assert [s.value for s in kind.steps(StepsGiven(None, None, None, listed))] == pythons
    assert [s.value for s in kind.steps(StepsGiven(pythons[1], None, None, listed))] == \
        pythons[1:]


@pytest.mark.parametrize("text, words", [
    ("/bin/sh\n", "lists 1 stack(s); expected at least two"),
    ("/bin/sh\n/bin/sh\n", "lists '/bin/sh' twice"),
    ("sh\n/bin/sh\n", "expected the absolute path of an interpreter"),
    ("/no/such/python\n/bin/sh\n", "no executable file there"),
])
def test_a_bad_stack_list_is_refused_naming_its_entry(tmp_path, text, words):
    listed = tmp_path / "stacks.txt"
    listed.write_text(text)
    with pytest.raises(UsageError, match=re.escape(words)):
        stack_list(StepsGiven(None, None, None, listed), "python", axes.python._refused)


def test_a_stack_list_that_is_binary_or_a_directory_is_refused(tmp_path):
    binary = tmp_path / "stacks.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    for path in (binary, tmp_path):
        with pytest.raises(UsageError, match="expected a text file of stacks"):
            stack_list(StepsGiven(None, None, None, path), "python", axes.python._refused)


def test_an_image_list_takes_pinned_images_and_their_digest_is_their_code(tmp_path):
    digests = [f"reg/img@sha256:{c * 64}" for c in "ab"]
    listed = tmp_path / "images.txt"
    listed.write_text("\n".join(digests) + "\n")
    kind = axes.get("image")
    assert kind.steps is not None
    found = kind.steps(StepsGiven(None, None, None, listed))
    assert [s.code for s in found] == ["sha256:" + "a" * 64, "sha256:" + "b" * 64]
    listed.write_text("reg/img:latest\n" + digests[0] + "\n")
    with pytest.raises(UsageError, match="pinned by its digest"):
        kind.steps(StepsGiven(None, None, None, listed))


def bisect(tmp_path: Path, *args: str, capsys) -> tuple[int, str]:
    rc = cli.main(["bisect", "--backend", "cpu", "--out", str(tmp_path / "out"), *args])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("args, words", [
    (("--op", "tanh", "--good", "HEAD", "--bad", "HEAD~2"), "is not an ancestor of"),
    (("--op", "tanh", "--good", "HEAD~1", "--bad", "HEAD~1"), "are the same commit"),
    (("--op", "softmax", "--good", "HEAD~15", "--bad", "HEAD"),
     "OP='softmax' cannot be bisected over this range: softmax is not in flag_gems at A_REF"),
    (("--op", "tanh", "--good", "HEAD~3", "--bad", "HEAD", "--axis", "none"),
     "AXIS='none' cannot be bisected; expected one of: python, flaggems, image"),
    (("--op", "tanh", "--good", "HEAD~3", "--bad", "HEAD", "--rounds", "1"),
     "is not accepted"),
    (("--op", "tanh", "--good", "HEAD~3", "--bad", "HEAD", "--noise-floor", "40"),
     "NOISE_FLOOR (--noise-floor)='40' is not accepted; expected a percentage from 1 to 25"),
    (("--good", "HEAD~3", "--bad", "HEAD"), "bisect needs OP"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_is_made(repo, tmp_path, capsys, args, words):
    path, _ = repo
    rc, err = bisect(tmp_path, "--flaggems-dir", str(path), *args, capsys=capsys)
    assert rc == 2 and words in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_a_stack_list_of_one_entry_is_exit_2(tmp_path, capsys):
    listed = tmp_path / "one.txt"
    listed.write_text("/bin/sh\n")
    rc, err = bisect(tmp_path, "--op", "tanh", "--axis", "python", "--stacks", str(listed),
                     capsys=capsys)
    assert rc == 2 and "lists 1 stack(s)" in err and not (tmp_path / "out").exists()


def test_a_dry_run_lists_the_steps_and_what_it_tries_first_and_makes_nothing(
        repo, tmp_path, capsys):
    path, commits = repo
    rc = cli.main(["bisect", "--backend", "cpu", "--op", "tanh", "--flaggems-dir", str(path),
                   "--good", commits[0], "--bad", "HEAD", "--out", str(tmp_path / "out"),
                   "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 0 and not (tmp_path / "out").exists()
    assert f"16 steps, GOOD {commits[0][:12]} .. BAD {commits[-1][:12]}" in out
    assert "then: step 7 against step 0 and against step 15" in out
    assert "at most 4 steps tried beyond the ends" in out
    assert f"side A: FlagGems {commits[0]}; side B: FlagGems {commits[-1]}" in out


def test_slurm_is_refused_since_each_step_decides_the_next(repo, tmp_path, capsys, monkeypatch):
    path, _ = repo
    monkeypatch.setenv("ZL_EXECUTOR", "slurm")
    with pytest.raises(UsageError, match="ZL_EXECUTOR='slurm' is not accepted by bisect"):
        driver.plan({"op": "tanh", "good": "HEAD~2", "bad": "HEAD", "backend": "cpu",
                     "flaggems_dir": str(path)}, {"ZL_EXECUTOR": "slurm"})


def test_bisect_json_is_written_and_read_back_with_its_abs(tmp_path, repo):
    path, _ = repo
    found = commit_range(given(path, "HEAD~3", "HEAD"), "src")
    doc = document.Bisection("tanh", "flaggems", {"op": "tanh"}, found)
    row = Row("torch.float32", "[[64, 64]]", "slower", -23.0, -25.0, -21.0, 2)
    doc.comparisons.append(Comparison(0, 3, (row,), directory="x", gpu_s=1.5, rounds=2,
                                      floor_pct=14.0))
    doc.save(tmp_path)
    back = document.read(tmp_path)
    assert back.steps == doc.steps and back.comparisons == doc.comparisons
    assert back.known(0, 3) == doc.comparisons[0] and back.known(3, 0) is None


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(schema="other/1"), "is not a bisection's document"),
    (lambda d: d["comparisons"][0].update(b=9), "an A/B of steps 0 and 9, but it has steps 0 to 3"),
    (lambda d: d["comparisons"][0].update(rows="x"), "rows"),
])
def test_a_bad_bisect_json_is_refused_naming_the_file(tmp_path, repo, change, words):
    path, _ = repo
    found = commit_range(given(path, "HEAD~3", "HEAD"), "src")
    doc = document.Bisection("tanh", "flaggems", {}, found)
    doc.comparisons.append(Comparison(0, 3))
    doc.save(tmp_path)
    data = json.loads((tmp_path / document.BISECT_JSON).read_text())
    change(data)
    (tmp_path / document.BISECT_JSON).write_text(json.dumps(data))
    with pytest.raises(UsageError, match=re.escape(words)) as exc:
        document.read(tmp_path)
    assert document.BISECT_JSON in str(exc.value)


def test_resume_of_a_folder_that_is_no_bisection_is_one_line(tmp_path, capsys):
    rc = cli.main(["bisect", "--resume", str(tmp_path)])
    assert rc == 2 and "not a bisection's folder" in capsys.readouterr().err


def test_the_bisect_command_history_changes_prints_runs_as_a_dry_run(repo, tmp_path, capsys):
    path, commits = repo
    key = queries.SeriesKey("tanh", "torch.float32", "[[64, 64]]", "A", "cpu", "cpu", "direct")
    before = changes.Point("2026-11-01", 1.0, 1, {"flaggems_commit": commits[3]})
    after = changes.Point("2026-11-02", 1.3, 2, {"flaggems_commit": commits[12]})
    line = command.bisect_line(key, before, after)
    words = shlex.split(line)
    assert words[:2] == ["harness", "bisect"] and f"--good={commits[3]}" in words
    rc = cli.main([*words[1:], "--flaggems-dir", str(path), "--out", str(tmp_path / "o"),
                   "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"10 steps, GOOD {commits[3][:12]} .. BAD {commits[12][:12]}" in out


def test_the_cli_starts_without_the_history_extra():
    # make help and every subcommand run on an interpreter without SQLAlchemy (the extra)
    code = ("import sys; sys.modules['sqlalchemy'] = None; from harness import cli; "
            "sys.exit(cli.main(['vars']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "GOOD" in proc.stdout


def test_a_folder_another_process_bisects_is_not_resumed_beside_it(repo, tmp_path, capsys):
    path, commits = repo
    found = commit_range(given(path, commits[0], "HEAD"), "src")
    doc = document.Bisection("tanh", "flaggems", {
        "op": "tanh", "backend": "cpu", "good": commits[0], "bad": "HEAD",
        "flaggems_dir": str(path), "out": str(tmp_path)}, found)
    doc.save(tmp_path)
    before = (tmp_path / document.BISECT_JSON).read_bytes()
    fd = take_lock(tmp_path / driver.LOCK, lambda: AssertionError("lock taken"))
    try:
        rc = cli.main(["bisect", "--resume", str(tmp_path)])
    finally:
        os.close(fd)
    err = capsys.readouterr().err
    assert rc == 2 and "is being bisected by another process now" in err
    assert (tmp_path / document.BISECT_JSON).read_bytes() == before
