"""The whole pipeline on the cpu backend: `harness run` and the make targets as subprocesses."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from harness.settings.spec import EMBEDDED_SUITE, REPO_ROOT

pytestmark = pytest.mark.integration
SUITE_OPS = ("add", "tanh", "mm", "softmax", "sum")
# The suite's shape entry of each op (op name first, then the class chain, as FlagGems looks up).
SHAPE_KEYS = {"add": "Benchmark", "tanh": "UnaryPointwiseBenchmark", "mm": "BlasBenchmark",
              "softmax": "softmax", "sum": "UnaryReductionBenchmark"}


def harness(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO_ROOT):
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=600)


def make(*args: str, env: dict[str, str] | None = None):
    """make in the checkout, typed there: PWD is the shell's, where a relative path is read."""
    return subprocess.run(["make", "--no-print-directory", *args, f"PYTHON={sys.executable}"],
                          cwd=REPO_ROOT, env={**os.environ, "PWD": str(REPO_ROOT), **(env or {})},
                          capture_output=True, text=True, timeout=600)


def suite_files() -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in EMBEDDED_SUITE.rglob("*")
            if "__pycache__" not in p.parts}


def only_run_dir(out: Path, op: str) -> Path:
    (run_dir,) = (out / op).iterdir()
    return run_dir


def core_shapes(key: str) -> list:
    doc = yaml.safe_load((EMBEDDED_SUITE / "benchmark" / "core_shapes.yaml").read_text())
    return doc[key]["shapes"]


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory):
    """One run of the whole embedded suite, shared by the assertions below."""
    out = tmp_path_factory.mktemp("runs")
    before = suite_files()
    proc = harness("run", "--backend", "cpu", "--node", "benchmark", "--out", str(out))
    return proc, out, before


def test_whole_suite_has_a_row_for_every_op_dtype_and_shape(suite_run):
    proc, out, _ = suite_run
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run_dir = only_run_dir(out, "suite")
    with open(run_dir / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["op"] for r in rows} == set(SUITE_OPS)
    per_op_dtype = Counter((r["op"], r["dtype"]) for r in rows)
    for (op, dtype), count in per_op_dtype.items():
        assert count == len(core_shapes(SHAPE_KEYS[op])), (op, dtype)
    assert all(r["status"] == "SUCCESS" and float(r["latency_ms"]) > 0 for r in rows)
    assert all(r["timer"] == "direct" for r in rows)


def test_run_directory_holds_every_promised_file(suite_run):
    proc, out, _ = suite_run
    run_dir = only_run_dir(out, "suite")
    names = {p.name for p in run_dir.iterdir()}
    assert {"run.log", "results.csv", "results.jsonl", "run_identity.json",
            "shapes.yaml"} <= names
    assert any(n.startswith("result_") and n.endswith(".log") for n in names)
    assert not any(n.endswith(".tmp") for n in names)
    ident = json.loads((run_dir / "run_identity.json").read_text())
    assert ident["backend"] == "cpu" and ident["timer"] == "direct" and ident["level"] == "core"
    assert ident["tuner_cache"] == "shared" and ident["node"] == "benchmark"
    assert ident["versions"]["torch"] and ident["versions"]["python"]
    assert "harness/run/runner.py" in ident["harness"]["files"]
    assert ident["rows"] == sum(1 for _ in open(run_dir / "results.jsonl"))
    shapes = yaml.safe_load((run_dir / "shapes.yaml").read_text())
    assert set(shapes["measured"]) == set(SUITE_OPS) and shapes["source_sha256"]


def test_the_time_breakdown_accounts_for_the_runs_wall(suite_run):
    proc, out, _ = suite_run
    run_dir = only_run_dir(out, "suite")
    doc = json.loads((run_dir / "time_breakdown.json").read_text())
    ident = json.loads((run_dir / "run_identity.json").read_text())
    phases = doc["phases"]
    assert doc["wall_s"] == pytest.approx(ident["wall_s"], abs=1e-3) and doc["sessions"] == 1
    assert all(seconds >= 0 for seconds in phases.values()), phases
    assert sum(phases.values()) == pytest.approx(doc["wall_s"], abs=1e-3)
    assert phases["startup"] > 0 and phases["collection"] > 0 and phases["direct"] > 0
    assert phases["replays"] == 0 and doc["replay_fraction"] == 0  # cpu: no graph timer
    assert len(doc["rows"]) == ident["rows"]
    assert not (run_dir / "time_phases.jsonl").exists()
    table = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "time_breakdown.py"),
                            str(out)], capture_output=True, text=True, timeout=120)
    lines = table.stdout.splitlines()
    assert table.returncode == 0 and any(line.startswith(
        "runs: 1; fraction of wall in timed replays: 0.0% (and ") and line.endswith(
        "% timed directly)") for line in lines), lines
    # the host's own seconds around pytest, which the run's identity was written after
    host = json.loads((run_dir / "time_breakdown.json").read_text())["host"]
    assert set(host) == {"host_before", "host_after"} and all(v >= 0 for v in host.values())
    assert lines[-3:] == ["outside the runs' walls (the host's own work):",
                          f"host_before    {host['host_before']:>10.2f}",
                          f"host_after     {host['host_after']:>10.2f}"]


def test_run_log_has_header_then_live_output(suite_run):
    proc, out, _ = suite_run
    log = (only_run_dir(out, "suite") / "run.log").read_text()
    assert log.startswith("# harness run header\n")
    assert "# level: core" in log and "# timer: direct" in log
    assert "Operator: tanh  Performance Test" in log
    assert "Operator: tanh  Performance Test" in proc.stdout  # shown live too
    assert "RUN_DONE op=suite rc=0" in log


def test_nothing_is_left_behind_in_the_benchmark_checkout(suite_run):
    _, _, before = suite_run
    assert suite_files() == before


def test_isolated_tuner_cache_is_private_and_removed(tmp_path):
    proc = harness("run", "--backend", "cpu", "--op", "add", "--out", str(tmp_path),
                   env={"ZL_ISOLATE_TUNER_CACHE": "1"})
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(tmp_path, "add")
    assert not (run_dir / "tuner_cache").exists()
    ident = json.loads((run_dir / "run_identity.json").read_text())
    assert ident["tuner_cache"] == "isolated"
    assert "# tuner_cache: isolated" in (run_dir / "run.log").read_text()


def test_shape_file_mode_archives_the_file_and_measures_only_its_shapes(tmp_path):
    # deep enough that the record log name FlagGems spells from --shape_file passes 255 bytes
    # (regression: its configure failed with rc 3 under a deep OUT)
    shapes = tmp_path / ("d" * 200) / "shapes.yaml"
    shapes.parent.mkdir()
    shapes.write_text("tanh:\n  shapes:\n    - [8, 8]\n    - [16, 16]\n  shape_desc: M, N\n")
    proc = harness("run", "--backend", "cpu", "--op", "tanh", "--out", str(tmp_path / "r"),
                   "--shape-mode", "file", "--shape-file", str(shapes))
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(tmp_path / "r", "tanh")
    rows = [json.loads(line) for line in open(run_dir / "results.jsonl")]
    assert {r["shape"] for r in rows} == {"[[8, 8]]", "[[16, 16]]"}
    doc = yaml.safe_load((run_dir / "shapes.yaml").read_text())
    assert doc["shape_mode"] == "file" and doc["source"] == str(shapes)
    assert json.loads((run_dir / "run_identity.json").read_text())["results_source"] == \
        "record_log"
    (log,) = run_dir.glob("result_*.log")
    assert len(log.name.encode()) <= 255


def test_smoke_mode_measures_one_input_of_one_dtype_of_every_benchmark(tmp_path):
    proc = harness("run", "--backend", "cpu", "--node", "benchmark", "--out", str(tmp_path),
                   "--shape-mode", "smoke")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run_dir = only_run_dir(tmp_path, "suite")
    rows = [json.loads(line) for line in open(run_dir / "results.jsonl")]
    # One row per benchmark: its first dtype and its first shape, whichever class gives them.
    assert Counter(r["op"] for r in rows) == Counter(SUITE_OPS), rows
    first = {r["op"]: r for r in rows}
    assert first["sum"]["shape"] == f"[[{', '.join(map(str, core_shapes(SHAPE_KEYS['sum'])[0]))}]]"
    assert len({r["dtype"] for r in rows}) == 1
    assert yaml.safe_load((run_dir / "shapes.yaml").read_text())["shape_mode"] == "smoke"


def test_a_shape_file_outside_the_checkout_keeps_the_checkouts_pytest_ini(tmp_path):
    """FlagGems finds its own package through its pytest.ini (`pythonpath = src`); a shape file
    elsewhere must not move pytest's rootdir and ini file off the checkout (seen on an H200:
    every parallel-warmup shard failed to import flag_gems: its shape file lay under the
    harness's runs/, and pytest took the harness's own pyproject.toml)."""
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")  # the harness's
    checkout = tmp_path / "checkout"
    shutil.copytree(EMBEDDED_SUITE, checkout, ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "helpers").mkdir()
    (checkout / "helpers" / "suite_needs.py").write_text("READY = True\n")
    with open(checkout / "pytest.ini", "a") as ini:
        ini.write("pythonpath = helpers\n")
    conftest = checkout / "benchmark" / "conftest.py"
    conftest.write_text(conftest.read_text() + "\nimport suite_needs  # through pytest.ini only\n")
    shapes = tmp_path / "elsewhere" / "shapes.yaml"
    shapes.parent.mkdir()
    shapes.write_text("UnaryPointwiseBenchmark:\n  shapes:\n    - [8, 8]\n")
    proc = harness("run", "--backend", "cpu", "--op", "tanh", "--out", str(tmp_path / "r"),
                   "--flaggems-dir", str(checkout), "--shape-mode", "file",
                   "--shape-file", str(shapes))
    assert proc.returncode == 0, proc.stdout[-2000:]
    rows = [json.loads(line) for line in open(only_run_dir(tmp_path / "r", "tanh")
                                              / "results.jsonl")]
    assert {r["shape"] for r in rows} == {"[[8, 8]]"}


def test_dry_run_prints_argv_plugins_environment_and_creates_nothing(tmp_path):
    proc = harness("run", "--backend", "cpu", "--op", "mm", "--out", str(tmp_path), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "pytest: " in proc.stdout and "benchmark/test_mm.py::test_mm" in proc.stdout
    assert "--record=log" in proc.stdout and "plugins: " in proc.stdout
    assert "ZL_PLUGIN_RUN_DIR=" in proc.stdout and "run directory: " in proc.stdout
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("args", "env", "code", "needles"),
    [
        (["preflight"], {"FLAGGEMS_DIR": "/nope", "OP": "tanh"}, 3,
         ["PREFLIGHT_FAILED check=flaggems_dir"]),
        (["run", "OP=tanh"], {"BENCH_LEVEL": "full"}, 2, ["BENCH_LEVEL='full'", "core",
                                                          "comprehensive"]),
        (["run", "OP=tanh", "BACKEND=foo"], {}, 2, ["BACKEND='foo'", "cpu", "cuda", "musa"]),
        (["run", "OP=doesnotexist", "BACKEND=cpu"], {}, 3,
         ["PREFLIGHT_FAILED check=test_node", "closest:"]),
        (["preflight", "OP=tanh", "BACKEND=cpu"], {}, 0, ["PREFLIGHT_OK", "preflight device"]),
    ],
)
def test_make_targets_exit_codes_and_messages(args, env, code, needles, tmp_path):
    proc = make(*args, f"OUT={tmp_path}", env=env)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 if code else proc.returncode == 0, output
    for needle in needles:
        assert needle in output
    if code:
        assert f"exit {code}" in output or f"Error {code}" in output
        assert not any(tmp_path.iterdir())


def test_make_help_is_the_default_target():
    # PYTHON given: the default, .venv's interpreter where it exists, may be one that `make
    # demo` is installing beside this test at the moment.
    proc = subprocess.run(["make", "--no-print-directory", f"PYTHON={sys.executable}"],
                          cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0
    for target in ("demo", "test", "preflight", "run"):
        assert f"  {target} " in proc.stdout


def test_make_ignores_environment_variables_that_are_not_harness_names(tmp_path):
    # Regression: make imported OUT from the environment and passed it as --out.
    proc = make("run", "BACKEND=cpu", "OP=tanh", "DRY_RUN=1",
                env={"OUT": str(tmp_path / "elsewhere"), "MODE": "graph", "ZL_OUT": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert f"run directory: {tmp_path}/tanh/" in proc.stdout
    command = proc.stdout.splitlines()[0]  # the line make echoes
    assert "--out" not in command and "--mode" not in command
    assert "  mode: auto" in proc.stdout
