"""Run directories, the pytest invocation, record-log collection and the header."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import boundary
from harness.contract.boundary import RECORD_LOGS_FILE
from harness.errors import PreflightError, UsageError
from harness.executors import procs as supervise
from harness.providers.flaggems import Node
from harness.run import outputs, rundir, runner
from harness.run.preflight import PartialPlan, Plan
from harness.settings import spec


def _claim(args):
    root, barrier = args
    barrier.wait()
    return str(rundir.claim_run_dir(Path(root), "tanh", "20261129-120000"))


def test_concurrent_claims_get_distinct_directories(tmp_path):
    n = 8
    with multiprocessing.Manager() as manager:
        barrier = manager.Barrier(n)
        with multiprocessing.Pool(n) as pool:
            claimed = pool.map(_claim, [(str(tmp_path), barrier)] * n)
    names = sorted(Path(p).name for p in claimed)
    assert len(set(claimed)) == n
    assert names == sorted(["20261129-120000"] + [f"20261129-120000-{i}" for i in range(2, n + 1)])


def test_claim_retreats_past_an_existing_directory(tmp_path):
    (tmp_path / "mm" / "20261129-120000").mkdir(parents=True)
    assert rundir.claim_run_dir(tmp_path, "mm", "20261129-120000").name == "20261129-120000-2"


def test_utc_stamp_format():
    when = dt.datetime(2026, 11, 29, 7, 5, 3, tzinfo=dt.timezone.utc)
    assert rundir.utc_stamp(when) == "20261129-070503"


def _settings(tmp_path, **flags):
    base = {"backend": "cpu", "flaggems_dir": str(tmp_path / "fg"), "out": str(tmp_path / "runs")}
    return spec.resolve({**base, **flags}, {}, which=lambda _: None)


def _plan():
    return Plan(node=Node("benchmark/test_tanh.py", "test_tanh", ("tanh",)), op="tanh",
                python="/usr/bin/python3", python_version="3.11.7")


def test_invocation_runs_pytest_from_the_flaggems_dir_with_level_mode_record(tmp_path):
    (tmp_path / "fg").mkdir()
    inv = runner.build_invocation(_settings(tmp_path, level="comprehensive"), _plan(),
                                  tmp_path / "runs" / "tanh" / "x")
    argv = inv.argv
    assert argv[:4] == ["/usr/bin/python3", "-m", "pytest", "benchmark/test_tanh.py::test_tanh"]
    assert {"--level=comprehensive", "--mode=kernel", "--record=log"} <= set(argv)
    assert "no:cacheprovider" in argv  # nothing written into the checkout
    assert inv.cwd == (tmp_path / "fg").resolve()
    assert str(runner.REPO_ROOT) in inv.env["PYTHONPATH"].split(os.pathsep)
    assert inv.env["ZL_PLUGIN_BACKEND"] == "cpu"
    assert "FLAGGEMS_CACHE_DIR" not in inv.env


@pytest.mark.parametrize("baseline,metrics", [
    ("auto", []), ("every", []), ("once", []), ("off", ["--metrics=latency"])])
def test_baseline_off_asks_flaggems_for_its_kernels_latency_alone(tmp_path, baseline, metrics):
    inv = runner.build_invocation(_settings(tmp_path, baseline=baseline), _plan(),
                                  tmp_path / "runs" / "tanh" / "x")
    assert [a for a in inv.argv if a.startswith("--metrics")] == metrics


def test_the_harness_is_on_the_childs_path_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(runner.REPO_ROOT), "/site"]))
    inv = runner.build_invocation(_settings(tmp_path), _plan(), tmp_path / "runs" / "tanh" / "x")
    assert inv.env["PYTHONPATH"].split(os.pathsep) == [str(runner.REPO_ROOT), "/site"]


def test_the_childs_bytecode_is_written_under_the_outputs_whatever_the_callers_setting(
        tmp_path, monkeypatch):
    # Regression: a caller's PYTHONDONTWRITEBYTECODE=1 (a container image sets it) reached
    # pytest beside PYTHONPYCACHEPREFIX, so no bytecode was read or written and every fresh
    # process compiled flag_gems from source.
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    inv = runner.build_invocation(_settings(tmp_path), _plan(), tmp_path / "runs" / "tanh" / "x")
    env = {**boundary.inherited({**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}), **inv.env}
    (tmp_path / "mod_for_bytecode.py").write_text("X = 1\n")
    subprocess.run([sys.executable, "-c", "import mod_for_bytecode"], cwd=tmp_path, env=env,
                   check=True)
    prefix = Path(inv.env["PYTHONPYCACHEPREFIX"])
    assert prefix.is_relative_to((tmp_path / "runs").resolve())
    assert list(prefix.rglob("mod_for_bytecode*.pyc"))
    assert not (tmp_path / "__pycache__").exists()


def test_a_callers_bytecode_prefix_is_shared_by_runs_on_the_host_but_not_by_an_image(
        tmp_path, monkeypatch):
    # Each OUT's own prefix made the first session of every new OUT compile torch's Python
    # again (4.5 s of a cpu run's 7 s start); a caller's prefix is one compile for all.
    shared = tmp_path / "shared pycache"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(shared))
    runs = [runner.build_invocation(_settings(tmp_path, out=str(tmp_path / out)), _plan(),
                                    tmp_path / out / "tanh" / "x") for out in ("a", "b")]
    assert {inv.env["PYTHONPYCACHEPREFIX"] for inv in runs} == {str(shared.resolve())}
    (tmp_path / "mod_for_prefix.py").write_text("X = 1\n")
    env = {**boundary.inherited(dict(os.environ)), **runs[0].env}
    subprocess.run([sys.executable, "-c", "import mod_for_prefix"], cwd=tmp_path, env=env,
                   check=True)
    assert list(shared.rglob("mod_for_prefix*.pyc"))
    # an image writes only under OUT on the host: the caller's folder is not there
    settings = _settings(tmp_path, out=str(tmp_path / "c"))
    own = str((tmp_path / "c" / ".pycache").resolve())
    assert supervise.bytecode_env(settings.out, in_image=True)["PYTHONPYCACHEPREFIX"] == own
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "")  # empty is unset
    assert supervise.bytecode_env(settings.out)["PYTHONPYCACHEPREFIX"] == own


def test_dtypes_reach_flaggems_as_its_appending_option_and_the_caliber(tmp_path):
    s = _settings(tmp_path, dtypes="bfloat16, float16,bfloat16")
    inv = runner.build_invocation(s, _plan(), tmp_path / "runs" / "tanh" / "x")
    assert [a for a in inv.argv if a.startswith("--dtypes")] == [
        "--dtypes=bfloat16", "--dtypes=float16"]
    assert s.caliber()["dtypes"] == "bfloat16,float16"
    assert not [a for a in runner.build_invocation(_settings(tmp_path), _plan(), tmp_path).argv
                if a.startswith("--dtypes")]


def test_a_measurement_budget_reaches_flaggems_as_its_warmup_and_iter_and_the_caliber(
        tmp_path):
    s = _settings(tmp_path, warmup_ms="5", iter_ms="20")
    inv = runner.build_invocation(s, _plan(), tmp_path / "runs" / "tanh" / "x")
    assert [a for a in inv.argv if a.startswith(("--warmup", "--iter"))] == [
        "--warmup=5", "--iter=20"]
    assert (s.caliber()["warmup_ms"], s.caliber()["iter_ms"]) == (5, 20)
    # unset: the benchmark's own defaults, and no option that could override them
    bare = _settings(tmp_path)
    assert not [a for a in runner.build_invocation(bare, _plan(), tmp_path).argv
                if a.startswith(("--warmup", "--iter"))]
    assert (bare.caliber()["warmup_ms"], bare.caliber()["iter_ms"]) == (None, None)


@pytest.mark.parametrize("bad", ["0", "60001", "5ms", "-1", "1.5"])
def test_a_budget_outside_one_ms_to_a_minute_is_one_line_naming_it(tmp_path, bad):
    with pytest.raises(UsageError, match=rf"^ITER_MS \(--iter-ms\)={bad!r} is not accepted; "
                                         "expected a whole number from 1 to 60000$"):
        _settings(tmp_path, iter_ms=bad)


def test_shape_file_and_isolated_caches(tmp_path):
    shapes = tmp_path / "s.yaml"
    shapes.write_text("tanh: {shapes: [[4, 4]]}\n")
    run_dir = tmp_path / "runs" / "tanh" / "x"
    s = _settings(tmp_path, shape_mode="file", shape_file=str(shapes), isolate_tuner_cache="1")
    inv = runner.build_invocation(s, _plan(), run_dir)
    assert f"--shape_file={shapes.resolve()}" in inv.argv
    # no bare path after the node: pytest would take it as a test path when choosing its rootdir
    assert [arg for arg in inv.argv[4:] if not arg.startswith("-")] == ["no:cacheprovider"]
    assert inv.env["FLAGGEMS_CACHE_DIR"].startswith(str(run_dir.resolve()))
    assert inv.env["TRITON_CACHE_DIR"].startswith(str(run_dir.resolve()))


def test_devices_map_to_the_backend_visibility_variable(tmp_path):
    s = spec.resolve({"backend": "cuda", "runner": "host", "devices": "6,7",
                      "flaggems_dir": str(tmp_path)}, {}, which=lambda _: None)
    inv = runner.build_invocation(s, _plan(), tmp_path / "r")
    assert inv.env["CUDA_VISIBLE_DEVICES"] == "6,7"


def test_a_warmup_share_reaches_the_plugins_and_loads_autotune_even_unrecorded(tmp_path):
    s = spec.resolve({"backend": "cuda", "runner": "host", "warmup_share": "1/3",
                      "flaggems_dir": str(tmp_path)}, {}, which=lambda _: None)
    inv = runner.build_invocation(s, _plan(), tmp_path / "r")
    assert inv.env["ZL_PLUGIN_WARMUP_SHARE"] == "1/3" and "harness.plugins.autotune" in inv.plugins
    header = runner.header_lines(s, _plan(), tmp_path / "r", inv)
    assert "# warmup_share: 1/3 (tunes its share of the configs, times nothing)" in header
    plain = spec.resolve({"backend": "cuda", "runner": "host", "flaggems_dir": str(tmp_path)},
                         {}, which=lambda _: None)
    inv = runner.build_invocation(plain, _plan(), tmp_path / "r")
    assert "ZL_PLUGIN_WARMUP_SHARE" not in inv.env and "harness.plugins.autotune" not in inv.plugins


def test_header_carries_every_caliber_setting(tmp_path):
    s = _settings(tmp_path)
    run_dir = tmp_path / "runs" / "tanh" / "x"
    inv = runner.build_invocation(s, _plan(), run_dir)
    text = "\n".join(runner.header_lines(s, _plan(), run_dir, inv))
    for key in s.caliber():
        assert f"# {key}: " in text
    assert "# node: benchmark/test_tanh.py::test_tanh" in text
    assert f"# command: {shlex.join(inv.argv)}" in text


def test_dry_run_description_creates_nothing(tmp_path):
    s = _settings(tmp_path)
    run_dir = tmp_path / "runs" / "tanh" / "x"
    lines = runner.describe_dry_run(s, _plan(), run_dir)
    assert any(line.startswith("pytest: /usr/bin/python3 -m pytest") for line in lines)
    assert any("ZL_PLUGIN_RUN_DIR=" in line for line in lines)
    assert not (tmp_path / "runs").exists()


def test_a_run_reads_only_the_record_logs_its_pytest_listed_and_moves_nothing(tmp_path):
    # Regression: every new or changed result_*.log in the checkout was moved into the run,
    # a user's concurrent pytest's log included.
    fg, run_dir = tmp_path / "fg", tmp_path / "run"
    fg.mkdir()
    run_dir.mkdir()
    foreign = fg / "result_benchmark_test_tanh.log"
    foreign.write_text("[INFO] someone else\n")
    ours = run_dir / "result_benchmark_test_add.log"
    ours.write_text("[INFO] ours\n")
    elsewhere = fg / "result_benchmark_test_mm::test_mm.log"  # a FlagGems the redirect missed
    elsewhere.write_text("[INFO] ours too\n")
    (run_dir / RECORD_LOGS_FILE).write_text(json.dumps([str(ours), str(elsewhere)]))
    logs = outputs._record_logs(run_dir)
    assert logs == [ours, run_dir / "result_benchmark_test_mm__test_mm.log"]
    assert logs[1].read_text() == "[INFO] ours too\n"
    assert elsewhere.read_text() == "[INFO] ours too\n"  # copied, never moved
    assert foreign.read_text() == "[INFO] someone else\n"


def test_without_the_plugins_list_a_run_reads_its_own_directory_only(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "result_x.log").write_text("[INFO] x\n")
    assert outputs._record_logs(run_dir) == [run_dir / "result_x.log"]


def flaggems_record_log_name(pytest_args):
    """The file name FlagGems' benchmark conftest builds from pytest's arguments (ed2508bc)."""
    parts = [a.replace(".py", "").replace("=", "_").replace("/", "_") for a in pytest_args]
    return "result_{}.log".format("_".join(parts)).replace("_-", "-")


def test_flaggems_record_log_name_stays_within_the_file_name_limit(tmp_path):
    # Regression: a cuda mm run with every plugin as -p and an absolute shape file made a
    # 276-byte name, and FlagGems' configure failed with rc 3. The shape file's path is 140
    # characters whatever tmp_path's length (a parallel run's is longer by its worker's name).
    pad = max(1, 140 - len(str(tmp_path / "d" / "warmup" / "shard-0.yaml")) + 1)
    deep = tmp_path / ("d" * pad) / "warmup" / "shard-0.yaml"
    deep.parent.mkdir(parents=True)
    deep.write_text("mm: {shapes: [[1, 2, 3, 4]]}\n")
    s = spec.resolve({"backend": "cuda", "runner": "host", "flaggems_dir": str(tmp_path),
                      "shape_mode": "file", "shape_file": str(deep), "replay_from": str(tmp_path)},
                     {}, which=lambda _: None)
    plan = Plan(node=Node("benchmark/test_mm.py", "test_mm", ("mm",)), op="mm", python="py")
    inv = runner.build_invocation(s, plan, tmp_path / "run")
    assert len(flaggems_record_log_name(inv.argv[3:]).encode()) < 255
    assert inv.env["PYTEST_PLUGINS"].split(",") == list(inv.plugins)


def test_claim_under_an_op_path_that_is_a_file_fails_check_out(tmp_path):
    (tmp_path / "tanh").write_text("not a directory")
    with pytest.raises(PreflightError) as info:
        rundir.claim_run_dir(tmp_path, "tanh", "20261129-120000")
    assert info.value.check == "out" and "a file is in the way" in info.value.detail


def test_a_dry_run_plan_without_a_node_or_flaggems_dir_still_renders(tmp_path):
    s = spec.resolve({"backend": "musa", "runner": "host", "op": "fft",
                      "out": str(tmp_path / "runs")}, {}, which=lambda _: None)
    plan = runner.placeholder_plan(s, PartialPlan(python="/usr/bin/python3"))
    assert plan.node.nodeid == "<unresolved OP=fft>" and plan.op == "fft"
    lines = runner.describe_dry_run(s, plan, tmp_path / "runs" / "fft" / "x")
    assert f"cwd: {runner.FLAGGEMS_DIR_UNSET}" in lines
    assert any(line.startswith("pytest: /usr/bin/python3 -m pytest '<unresolved OP=fft>'")
               for line in lines)
    assert "plugins: harness.plugins.compat_musa" in "\n".join(lines)
    resolved = _plan()
    assert runner.placeholder_plan(s, resolved) is resolved


def test_a_dry_run_prints_the_compile_workers_marker_whole(tmp_path):
    # Regression: the dry run cut two characters off every header line to drop "# ", and the
    # marker line, which has none, read "MPILE_WORKERS_OFF".
    s = spec.resolve({"backend": "cuda", "runner": "host", "flaggems_dir": str(tmp_path),
                      "compile_workers": "4"}, {}, which=lambda _: None)
    lines = runner.describe_dry_run(s, _plan(), tmp_path / "run")
    assert ("  COMPILE_WORKERS_OFF reason=triton_lacks_async_compile compile_workers=4"
            in lines)
    assert "  op: tanh" in lines
