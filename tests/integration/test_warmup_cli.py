"""`harness run --parallel-warmup-gpus N` on the cpu suite: dry-run plan, a real two-shard
sweep followed by the serial measured run, a refusal, and Ctrl-C during the sweep."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from harness.settings.spec import REPO_ROOT
from tests.procs import children

from .test_batch_cli import group_members, private_suite, wait_for
from .test_run_cli import harness

pytestmark = pytest.mark.integration
TINY = "tanh:\n  shapes:\n    - [8, 8]\n    - [16, 16]\n    - [32, 32]\n"


@pytest.fixture
def short_out():
    """A run root with a short absolute path. FlagGems names its record log after the pytest
    arguments, --shape_file's absolute path included, and a name over 255 bytes fails its
    pytest_configure: a shard's file under pytest's deep tmp_path would do that."""
    path = Path(tempfile.mkdtemp(prefix="zlw-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_dry_run_prints_the_shape_keys_and_the_shard_plan(tmp_path):
    out = tmp_path / "runs"
    proc = harness("run", "--backend", "cpu", "--op", "tanh", "--parallel-warmup-gpus", "2",
                   "--dry-run", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert ("shape key: UnaryPointwiseBenchmark (op_name='tanh' classes=UnaryPointwiseBenchmark"
            ">Benchmark tried=tanh,UnaryPointwiseBenchmark; 4 shapes; dtypes float32,bfloat16)"
            ) in lines
    assert "shapes=4: every shard runs each: [1048576] [64, 64] [1024, 1024] " \
           "[32, 256, 256]" in lines
    assert "shard-0: device=- dtypes=float32 configs=all" in lines
    assert "shard-1: device=- dtypes=bfloat16 configs=all" in lines
    assert any("shards run unpinned" in line for line in lines)
    assert any(line.startswith("pytest: ") for line in lines)  # the measured run's command
    assert not out.exists()


def test_comprehensive_refuses_and_says_the_serial_sweep_runs(tmp_path):
    proc = harness("run", "--backend", "cpu", "--op", "mm", "--parallel-warmup-gpus", "2",
                   "--level", "comprehensive", "--dry-run", "--out", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    assert "PARALLEL_WARMUP_SERIAL reason=comprehensive" in proc.stdout
    assert "shape key: BlasBenchmark" not in proc.stdout and "shard-0" not in proc.stdout


def test_two_shards_sweep_then_one_serial_run_measures_every_shape_replaying(tmp_path,
                                                                            short_out):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(TINY)
    suite, out = private_suite(tmp_path), short_out
    proc = harness("run", "--backend", "cpu", "--op", "tanh", "--parallel-warmup-gpus", "2",
                   "--level", "core", "--shape-mode", "file", "--shape-file", str(shapes),
                   "--flaggems-dir", str(suite), "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (run_dir,) = (out / "tanh").iterdir()  # the shards' runs live inside it, not beside it
    warm = run_dir / "warmup"
    # the plan: one dtype per shard (the suite's tanh has two), each with every shape of the
    # caller's file; the shard runs its dtype alone (FlagGems' --dtypes reached it) and,
    # a warmup share, reports no row
    for i, dtype, other in ((0, "float32", "bfloat16"), (1, "bfloat16", "float32")):
        (shard_run,) = (warm / f"shard-{i}" / "tanh").iterdir()
        ident = json.loads((shard_run / "run_identity.json").read_text())
        assert ident["pytest_exit_code"] == 0 and ident["autotune_records"] == 0  # no tuner
        assert (ident["warmup_share"], ident["rows"], ident["results_source"]) == (
            [0, 1], 0, "warmup_share")
        printed = (shard_run / "run.log").read_text()
        assert f"(dtype=torch.{dtype}," in printed and f"(dtype=torch.{other}," not in printed
        assert "# warmup_share: 0/1 (tunes its share of the configs, times nothing)" in printed
        assert (shard_run / "autotune_records" / "winners.jsonl").is_file()
        assert "[start] " not in (warm / f"shard-{i}.log").read_text()  # a plain run, no sweep
    assert (warm / "autotune_records" / "winners.jsonl").read_text() == ""  # merged, empty
    # the measured run: serial, every shape, the merged records replayed (not strictly)
    log = (run_dir / "run.log").read_text()
    assert log.index("PARALLEL_WARMUP_DONE shards=2") < log.index("# harness run header")
    assert f"# replay_from: {warm}" in log and "# replay_strict: False" in log
    assert "# tuner_cache: isolated" in log and "PARALLEL_WARMUP_WINNERS_DIFFER" not in log
    assert (run_dir / "replayed_winners.jsonl").is_file()
    measured = yaml.safe_load((run_dir / "shapes.yaml").read_text())["measured"]["tanh"]
    assert {dtype: set(s) for dtype, s in measured.items()} == {
        d: {"[[8, 8]]", "[[16, 16]]", "[[32, 32]]"} for d in ("torch.float32", "torch.bfloat16")}
    ident = json.loads((run_dir / "run_identity.json").read_text())
    assert ident["rows"] == 6 and ident["autotune_replay_fallbacks"] == 0
    assert proc.stdout.count("[start] shard-") == 2
    assert "RUN_DONE op=tanh rc=0 rows=6" in proc.stdout


def test_ctrl_c_during_the_sweep_reaps_every_shard_and_measures_nothing(tmp_path, short_out):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text(TINY)
    out = short_out
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    run = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--backend", "cpu", "--op", "tanh",
         "--parallel-warmup-gpus", "2", "--level", "core", "--shape-mode", "file",
         "--shape-file", str(shapes), "--flaggems-dir", str(private_suite(tmp_path)),
         "--out", str(out)],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        shards = []
        while len(shards) < 2:
            line = run.stdout.readline()
            assert line, run.stderr.read()
            if line.startswith("[start] shard-"):
                shards.append(int(line.split("pid=")[1].split()[0]))
        # each shard's `harness run` has started its pytest (in a group of its own)
        wait_for(lambda: all(children(p, "-m pytest") for p in shards), 300, "shard pytests")
        shards += [q for p in shards for q in children(p, "-m pytest")]
        run.send_signal(signal.SIGINT)
        rest, err = run.communicate(timeout=300)  # seconds, or never
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, rest + err
    assert all(group_members(p) == [] for p in shards)
    assert "PARALLEL_WARMUP_INTERRUPTED signal=SIGINT" in rest and "interrupted" in err
    assert "# harness run header" not in rest  # the measured run never started
    (run_dir,) = (out / "tanh").iterdir()
    assert sorted(p.name for p in (run_dir / "warmup").glob("shard-*.log")) == [
        "shard-0.log", "shard-1.log"]
