"""AXIS=python: an A/B campaign whose sides are two interpreters (two stacks), on the cpu suite."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .test_ab_cli import harness
from .test_ab_suite_cli import SHAPES

pytestmark = pytest.mark.integration


def interpreter(tmp_path: Path, name: str, extra: dict[str, str]) -> Path:
    """This interpreter with `extra` files ahead on its path: another environment, as a second
    venv is, which differs by what `extra` installs."""
    site = tmp_path / f"{name}-site"
    for rel, text in extra.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    wrapper = tmp_path / name
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" '
                       f'exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


NEWER_FLAG_GEMS = {"flag_gems-9.9.dist-info/METADATA":
                   "Metadata-Version: 2.1\nName: flag_gems\nVersion: 9.9\n"}
BROKEN_TORCH = {"torch/__init__.py": "raise ImportError('libtorch_cpu.so: cannot open')\n"}


def campaign(tmp_path: Path, *flags: str):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(SHAPES)
    return harness("ab", "--backend", "cpu", "--op", "tanh", "--axis", "python", "--rounds", "2",
                   "--shape-mode", "file", "--shape-file", str(shapes),
                   "--out", str(tmp_path / "runs"), *flags)


def test_two_interpreters_are_judged_as_two_sides_and_the_report_shows_both_stacks(tmp_path):
    b = interpreter(tmp_path, "python-b", NEWER_FLAG_GEMS)
    proc = campaign(tmp_path, "--a-python", sys.executable, "--b-python", str(b))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "stack B: python=" in proc.stdout and "flag_gems=9.9" in proc.stdout
    (directory,) = (tmp_path / "runs" / "ab" / "python-tanh").iterdir()
    ident = {rel: json.loads((directory / "tanh" / rel / "run_identity.json").read_text())
             for rel in ("A/r0", "B/r0", "A/r1", "B/r1")}
    assert ident["B/r0"]["versions"]["flag_gems"] == "9.9"
    assert "flag_gems" not in ident["A/r0"]["versions"]
    assert ident["B/r0"]["command"][0] == str(b) and ident["A/r0"]["command"][0] == sys.executable
    # each side tunes for itself in round 0 and replays its own winners after
    assert "--replay-from" not in " ".join(ident["B/r0"]["command"])
    headers = {rel: (directory / "tanh" / rel / "run.log").read_text() for rel in ident}
    assert f"replay_from: {directory / 'tanh' / 'B' / 'r0'}" in headers["B/r1"]
    assert "replay_from: None" in headers["B/r0"]
    report = (directory / "ab.md").read_text()
    assert f"- axis: python (two stacks): A={sys.executable}, B={b}" in report
    assert "- stack B: " in report and "flag_gems=9.9" in report
    assert "replays its own winners after (TUNE each)" in report
    assert "walls: round 0 (each side tunes)" in report
    doc = json.loads((directory / "ab.json").read_text())
    assert doc["caliber"]["tune"] == "each" and doc["caliber"]["baseline"] == "every"
    assert len(doc["rows"]) == 2


@pytest.mark.parametrize(("flags", "rc", "message"), [
    (("--b-python", "{a}"), 2, "AXIS=python needs A_PYTHON: side A's interpreter"),
    (("--a-python", "{a}", "--b-python", "/nonexistent/python"), 2,
     "B_PYTHON (--b-python)='/nonexistent/python' is not accepted; expected an executable "
     "interpreter (a path, or a name on PATH)"),
    (("--a-python", "{a}", "--b-python", "{a}"), 2, "are the same interpreter"),
    (("--a-python", "{a}", "--b-python", "{same}"), 2,
     "A_PYTHON and B_PYTHON have the same stack (python_version "),
    (("--a-python", "{a}", "--b-python", "{broken}"), 3,
     "PREFLIGHT_FAILED check=python_modules detail=side B (B_PYTHON={broken}): cannot import "
     "torch: ImportError: libtorch_cpu.so: cannot open"),
], ids=["missing", "not_a_file", "same_path", "same_stack", "torch_does_not_import"])
def test_a_side_that_cannot_be_a_stack_is_refused_in_one_line_before_anything(tmp_path, flags,
                                                                              rc, message):
    names = {"a": sys.executable, "same": str(interpreter(tmp_path, "same", {})),
             "broken": str(interpreter(tmp_path, "broken", BROKEN_TORCH))}
    proc = campaign(tmp_path, *(f.format(**names) for f in flags))
    assert proc.returncode == rc, proc.stdout[-2000:] + proc.stderr
    # a usage error is stderr's one line; a preflight failure its marker, stdout's last line
    said = proc.stderr if rc == 2 else proc.stdout
    assert message.format(**names) in said.strip().splitlines()[-1]
    assert not (tmp_path / "runs" / "ab").exists()


def test_the_plan_of_two_stacks_shows_each_sides_interpreter_and_how_it_tunes(tmp_path):
    b = interpreter(tmp_path, "python-b", NEWER_FLAG_GEMS)
    proc = campaign(tmp_path, "--a-python", sys.executable, "--b-python", str(b), "--dry-run",
                    "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    lines = proc.stdout.splitlines()
    assert f"axis: python -> two interpreters; A={sys.executable} B={b}" in lines
    side_b = next(line for line in lines if line.startswith("side B: "))
    assert f"(runs {b}; B/r0 tunes and records;" in side_b
    assert any(line.startswith(f"pytest: {sys.executable} -m pytest ") for line in lines)
    assert not (tmp_path / "runs").exists()


def test_a_dry_run_checks_both_interpreters_and_lists_a_failing_one_after_the_plan(tmp_path):
    # Regression: DRY_RUN=1 exited 0 with a side that could not import torch
    broken = interpreter(tmp_path, "broken", BROKEN_TORCH)
    proc = campaign(tmp_path, "--a-python", sys.executable, "--b-python", str(broken),
                    "--dry-run", "1")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr
    assert "axis: python -> two interpreters" in proc.stdout
    assert f"side B (B_PYTHON={broken}): cannot import torch" in proc.stdout + proc.stderr
    assert not (tmp_path / "runs").exists()


def test_two_builds_of_the_same_versions_are_two_stacks_and_one_build_twice_is_refused(
        tmp_path):
    from importlib.metadata import version

    numpy = version("numpy")
    rebuilt = {f"numpy-{numpy}.dist-info/METADATA":
               f"Metadata-Version: 2.1\nName: numpy\nVersion: {numpy}\n",
               f"numpy-{numpy}.dist-info/RECORD": "numpy/__init__.py,sha256=rebuilt,1\n"}
    b = interpreter(tmp_path, "python-b", rebuilt)
    proc = campaign(tmp_path, "--a-python", sys.executable, "--b-python", str(b),
                    "--dry-run", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert ("A_PYTHON and B_PYTHON report the same versions, but numpy differ in their "
            "installed files: compared as two builds") in proc.stdout
    built = next(line for line in proc.stdout.splitlines() if line.startswith("stack B: "))
    assert f"numpy={numpy}" in built and "numpy_build=" in built
    same = campaign(tmp_path, "--a-python", sys.executable, "--b-python",
                    str(interpreter(tmp_path, "same", {})), "--dry-run", "1")
    assert same.returncode == 2 and "the same installed files" in same.stderr
