"""make VAR=value as a hostile user writes it: each value reaches the harness as one argument."""

from __future__ import annotations

import re
import shutil

import pytest

from harness.settings import makevars, spec
from harness.settings.spec import REPO_ROOT

from .test_run_cli import make

pytestmark = pytest.mark.integration
KERNEL_LOG = REPO_ROOT / "tests" / "data" / "results" / "h200" / "tanh_core_kernel.log"
# Values a shell would split, run or expand, had make pasted them into a recipe line.
HOSTILE = ["a b", "x;touch {p}", "it's", '"q" \\', "$HOME", "`touch {p}`", "$(touch {p})",
           "$(shell touch {p})", "a\nb", "--help"]


@pytest.mark.parametrize("op", ["add;touch {p}", "add && touch {p}", "$(shell touch {p})",
                                "add`touch {p}`", "../../add"])
def test_an_op_that_would_inject_a_command_is_refused_and_runs_nothing(op, tmp_path):
    # Regression: OP=add;echo INJECTED ran the shell's `echo`, dropped DRY_RUN and ran add.
    pwned = tmp_path / "pwned"
    proc = make("run", "BACKEND=cpu", "OP=" + op.format(p=pwned), "DRY_RUN=1",
                f"OUT={tmp_path}/out")
    assert proc.returncode != 0 and "Error 2" in proc.stderr, proc.stdout + proc.stderr
    assert "error: OP (--op)=" in proc.stderr
    assert not pwned.exists() and not (tmp_path / "out").exists()


def test_an_axis_that_would_inject_a_command_is_refused_and_runs_nothing(tmp_path):
    pwned = tmp_path / "pwned"
    proc = make("ab", "BACKEND=cpu", "OP=add", f"AXIS=X;touch {pwned}", "DRY_RUN=1",
                f"OUT={tmp_path}/out")
    assert proc.returncode != 0 and "Error 2" in proc.stderr, proc.stdout + proc.stderr
    assert f"AXIS='X;touch {pwned}'" in proc.stderr
    assert not pwned.exists() and not (tmp_path / "out").exists()


def test_the_hand_over_variable_itself_cannot_replace_the_command_line(tmp_path):
    # Regression: ZL_MAKE_ARGS=... on make's command line replaced every other variable,
    # DRY_RUN included, and ran a real benchmark.
    proc = make("run", "BACKEND=cpu", "OP=add", "DRY_RUN=1", f"OUT={tmp_path}/out",
                "ZL_MAKE_ARGS='OP=tanh'")
    assert proc.returncode != 0 and "Error 2" in proc.stderr, proc.stdout + proc.stderr
    assert "error: ZL_MAKE_ARGS=" in proc.stderr and "RUN_DONE" not in proc.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", HOSTILE)
def test_out_stays_one_value_and_dry_run_is_kept(name, tmp_path):
    # Regression: OUT=/tmp/x y split into --out=/tmp/x and a stray `y`.
    pwned = tmp_path / "pwned"
    out = f"{tmp_path}/{name.format(p=pwned)}"
    proc = make("run", "BACKEND=cpu", "OP=add", f"OUT={out}", "DRY_RUN=1")
    if "\n" in name:  # a newline would split ops_status.csv's rows and the log's lines
        assert proc.returncode != 0 and "Error 2" in proc.stderr, proc.stdout + proc.stderr
        assert f"error: OUT (--out)={out!r} is not accepted" in proc.stderr
        assert not any(tmp_path.iterdir())
        return
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"run directory: {out}/add/" in proc.stdout
    assert "(not created)" in proc.stdout and "RUN_DONE" not in proc.stdout
    assert not any(tmp_path.iterdir())


def test_summary_takes_run_as_one_path_and_splits_summary_args_without_a_shell(tmp_path):
    log = tmp_path / "a b's $x;`y`.log"
    shutil.copy(KERNEL_LOG, log)
    proc = make("summary", f"RUN={log}", "SUMMARY_ARGS=--format csv --noise-floor '7'")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "source,op,dtype,rows" in proc.stdout and f"{log},tanh," in proc.stdout


def test_unbalanced_summary_args_is_a_one_line_error(tmp_path):
    proc = make("summary", f"RUN={KERNEL_LOG}", "SUMMARY_ARGS=--format 'csv")
    assert proc.returncode != 0 and "Error 2" in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert line.startswith("error: SUMMARY_ARGS=\"--format 'csv\" is not accepted")


def test_batch_dry_run_is_kept_with_a_hostile_out(tmp_path):
    out = f"{tmp_path}/o u;t"
    proc = make("batch", "BACKEND=cpu", "OPS=add,tanh", "DRY_RUN=1", f"OUT={out}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("--op ") == 2 and "'" + out + "'" in proc.stdout
    assert not any(tmp_path.iterdir())


def test_a_variable_the_harness_reads_from_its_environment_still_gets_there(tmp_path):
    # ZL_ENABLE_CUDAGRAPH=0 is read as MODE=direct: make used to export it; now the harness does.
    proc = make("run", "BACKEND=cpu", "OP=add", "DRY_RUN=1", "ZL_ENABLE_CUDAGRAPH=0",
                f"OUT={tmp_path}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  mode: direct" in proc.stdout


@pytest.mark.parametrize("given, closest", [("DTYPE=float32", "DTYPES"), ("ROUND=5", "ROUNDS")])
def test_a_misspelled_variable_is_refused_naming_the_closest(given, closest, tmp_path):
    # Regression: `make run BACKEND=cpu OP=add DTYPE=float32` measured every dtype and
    # `ROUND=5` ran 3 rounds: a name the harness does not know went into the environment.
    proc = make("ab", "BACKEND=cpu", "OP=add", "AXIS=none", "DRY_RUN=1", given,
                f"OUT={tmp_path}/out")
    assert proc.returncode != 0 and "Error 2" in proc.stderr, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert line.startswith(f"error: {given.split('=')[0]}=") and f"did you mean {closest}" in line
    assert not (tmp_path / "out").exists()


def makefile_variables() -> set[str]:
    """The variables the Makefile reads that it does not set itself (PYTHON's ?= aside)."""
    text = (REPO_ROOT / "Makefile").read_text()
    read = set(re.findall(r"\$\((?:value )?([A-Z][A-Z0-9_]*)\)", text))
    assigned = set(re.findall(r"^(?:export )?([A-Z][A-Z0-9_]*)\s*:?=", text, re.MULTILINE))
    # make's own, and the invoking shell's PWD (where make was typed, which make -C keeps)
    builtin = {name for name in read if name in ("CURDIR", "PWD") or name.startswith("MAKE")}
    return ((read - assigned - builtin)
            | set(re.findall(r"^([A-Z][A-Z0-9_]*)\s*\?=", text, re.MULTILINE)))


def test_make_help_lists_every_variable():
    # Regression: help omitted RECORD, AXIS, ROUNDS, OPS, SUMMARY_ARGS and others.
    proc = make("help")
    assert proc.returncode == 0, proc.stderr
    listed = set(re.findall(r"^  ([A-Z][A-Z0-9_]*) ", proc.stdout, re.MULTILINE))
    wanted = ({v.make for v in spec.VARS} | {name for name, _, _ in makevars.MAKE_ONLY}
              | makefile_variables())
    assert "PYTHON" in wanted and wanted <= listed, wanted - listed


def test_an_exported_make_name_the_harness_does_not_read_is_warned_of(tmp_path):
    # Regression: `export BACKEND=cuda` or `export ROUNDS=5` was silently ignored (their
    # environment names are ZL_BACKEND, ZL_ROUNDS) while an exported OP was read.
    proc = make("run", "BACKEND=cpu", "DRY_RUN=1", f"OUT={tmp_path}",
                env={"LEVEL": "comprehensive", "ROUNDS": "5", "OP": "tanh"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("warning: LEVEL='comprehensive' is exported but not read: its environment name is "
            "BENCH_LEVEL (or give LEVEL=... on make's command line)") in proc.stderr
    assert "warning: ROUNDS='5' is exported but not read" in proc.stderr
    assert "  level: core" in proc.stdout and "test_tanh.py::test_tanh" in proc.stdout


def test_a_relative_path_given_to_make_is_the_one_of_the_directory_it_was_typed_in(tmp_path):
    # Regression: `make -C <checkout> run FLAGGEMS_DIR=suite OUT=out`, typed in ~/work, read
    # <checkout>/suite: make ran the harness in the checkout and said nothing of ~/work.
    import os
    import subprocess
    import sys

    shutil.copytree(spec.EMBEDDED_SUITE, tmp_path / "suite",
                    ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    proc = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO_ROOT), "run", "BACKEND=cpu", "OP=add",
         "FLAGGEMS_DIR=suite", "OUT=out", "DRY_RUN=1", f"PYTHON={sys.executable}"],
        cwd=tmp_path, env={**os.environ, "PWD": str(tmp_path)}, capture_output=True,
        text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"cwd: {tmp_path / 'suite'}\n" in proc.stdout
    assert f"run directory: {tmp_path / 'out' / 'add'}/" in proc.stdout
    assert not (REPO_ROOT / "out").exists() and not (tmp_path / "out").exists()


def test_make_history_passes_its_verb_and_a_shape_with_spaces_as_one_argument(tmp_path):
    pytest.importorskip("sqlalchemy")
    from tests.historydata import make_batch

    out = tmp_path / "my runs"
    batch = make_batch(out, "20261101-010000", {"mm": [1.0, 2.0]})
    imported = make("history", f"OUT={out}", f"HISTORY_ARGS=import '{batch}'")
    assert imported.returncode == 0, imported.stdout + imported.stderr
    proc = make("history", f"OUT={out}",
                "HISTORY_ARGS=trend mm torch.float32 '[[1024, 1024]]' --format csv")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("mm,")]
    assert len(lines) == 1 and "[[1024, 1024]]" in lines[0] and "[[64, 64]]" not in proc.stdout
    listed = make("history", f"OUT={out}")
    assert listed.returncode == 0 and "batch" in listed.stdout


def test_unbalanced_history_args_is_a_one_line_error(tmp_path):
    proc = make("history", f"OUT={tmp_path}", "HISTORY_ARGS=trend 'mm")
    assert proc.returncode != 0 and "Error 2" in proc.stderr
    assert "error: HISTORY_ARGS=\"trend 'mm\" is not accepted" in proc.stderr
