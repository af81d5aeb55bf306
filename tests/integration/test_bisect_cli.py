"""harness bisect on the cpu suite: a FlagGems-shaped repository of 16 commits (tests/bisect_repo),
one of which makes tanh 30% slower and one of which breaks an unrelated operator's import."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests import bisect_repo

from .test_ab_cli import harness

pytestmark = [pytest.mark.integration, pytest.mark.slow]
# Noise of a known size on the suite's work clock: 0.3% between rounds, 0.5% between calls.
NOISE = {"BISECT_NOISE_ROUND": "0.003", "BISECT_NOISE_CALL": "0.005", "BISECT_NOISE_SEED": "1"}


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str], Path]:
    root = tmp_path_factory.mktemp("bisect")
    path, commits = bisect_repo.build(root)
    shapes = root / "shapes.yaml"
    shapes.write_text(bisect_repo.SHAPES)
    return path, commits, shapes


def bisect(repo, out: Path, *args: str):
    path, _, shapes = repo
    return harness("bisect", "--backend", "cpu", "--op", "tanh", "--flaggems-dir", str(path),
                   "--dtypes", "float32", "--shape-mode", "file", "--shape-file", str(shapes),
                   "--baseline", "off", "--out", str(out), *args, env=NOISE)


@pytest.fixture(scope="module")
def found(repo, tmp_path_factory) -> tuple[Path, dict, str]:
    out = tmp_path_factory.mktemp("runs")
    _, commits, _ = repo
    # Two rounds at most: the bisection is under test here. ROUNDS=auto calls a row same at
    # its first look only with little of alpha (harness.stats.looks.same_share), so each A/B
    # of equal code took a third round (25 s); test_ab_auto_cli tests those rounds.
    proc = bisect(repo, out, "--good", commits[0], "--bad", "HEAD", "--max-rounds", "2")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (folder,) = (out / "bisect" / "tanh").iterdir()
    return folder, json.loads((folder / "bisect.json").read_text()), proc.stdout


def test_the_slow_commit_is_named_within_six_steps_and_nothing_is_skipped(repo, found):
    _, commits, _ = repo
    folder, doc, stdout = found
    assert doc["state"] == "done" and doc["outcome"]["state"] == "found"
    assert doc["outcome"]["hi"] == bisect_repo.SLOW_AT
    assert doc["outcome"]["candidates"] == [bisect_repo.SLOW_AT]
    assert doc["outcome"]["direction"] == "slower"
    assert len(doc["tried"]) <= 6
    assert {t["verdict"] for t in doc["tried"]} <= {"good", "bad"}  # the broken add: no skip
    slow = commits[bisect_repo.SLOW_AT]
    assert f"bisect: first bad: step {bisect_repo.SLOW_AT} {slow[:12]} 'tanh: more passes'" \
        in stdout
    md = (folder / "bisect.md").read_text()
    assert f"first bad: step {bisect_repo.SLOW_AT} {slow[:12]}" in md and "## Every step" in md


def test_its_step_is_sized_and_each_ab_is_kept_recorded_and_judged_at_half_the_step(found):
    folder, doc, _ = found
    evidence = doc["outcome"]["evidence"]
    assert evidence[1] == bisect_repo.SLOW_AT and evidence[0] < bisect_repo.SLOW_AT
    sized = next(c for c in doc["comparisons"] if [c["a"], c["b"]] == evidence)
    # 13 units of work against 10: B is 30% slower, a speedup of -23%
    assert -27 < sized["rows"][0]["speedup_pct"] < -19
    ends, *steps = doc["comparisons"]
    (floor,) = {c["floor_pct"] for c in steps}  # half the ends' 30%: about 14%
    assert ends["floor_pct"] is None and 12 < floor < 16
    for c in doc["comparisons"]:
        assert (Path(c["directory"]) / "ab.json").is_file()
    store = folder.parent.parent.parent / "history.sqlite"
    proc = harness("history", "list", "--history", str(store), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    recorded = {r["path"] for r in json.loads(proc.stdout)}
    assert {c["directory"] for c in doc["comparisons"]} <= recorded


def test_a_step_of_the_same_source_takes_its_neighbours_verdict_untimed(found):
    _, doc, _ = found
    untimed = [t for t in doc["tried"] if not t["comparisons"]]
    assert untimed and all("same code as step" in t["how"] for t in untimed)


def test_resume_takes_the_abs_that_ended_and_runs_only_the_rest(repo, found, tmp_path):
    folder, doc, _ = found
    again = tmp_path / "bisect" / "tanh" / folder.name
    shutil.copytree(folder, again, ignore=shutil.ignore_patterns("ab"))
    cut = {**doc, "state": "interrupted", "comparisons": doc["comparisons"][:-1]}
    cut.pop("outcome")
    (again / "bisect.json").write_text(json.dumps(cut))
    proc = harness("bisect", "--resume", str(again), env=NOISE)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.stdout.count("taken from") == len(doc["comparisons"]) - 1
    resumed = json.loads((again / "bisect.json").read_text())
    assert resumed["outcome"]["hi"] == bisect_repo.SLOW_AT
    assert len(resumed["comparisons"]) == len(doc["comparisons"])


def test_ends_that_do_not_differ_stop_after_the_ends_check(repo, tmp_path):
    _, commits, _ = repo
    # two fixed rounds: ROUNDS=auto added rounds to rows already within the floor (39 s);
    # the ends differ only where a row is called slower or faster, so same and inconclusive
    # both stop here
    proc = bisect(repo, tmp_path, "--good", commits[0], "--bad",
                  commits[bisect_repo.SLOW_AT - 1], "--rounds", "2")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "bisect: the ends do not differ" in proc.stdout
    (folder,) = (tmp_path / "bisect" / "tanh").iterdir()
    doc = json.loads((folder / "bisect.json").read_text())
    assert doc["outcome"]["state"] == "no-difference" and len(doc["comparisons"]) == 1
    assert doc["tried"] == []
