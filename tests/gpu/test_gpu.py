"""The harness on a real accelerator with a real FlagGems: timers, tuning replay, campaigns,
the capture rescue and the unit time limit."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

from harness.contract import results
from harness.contract.boundary import RESCUED_MARKER
from harness.report.abjson import read_ab
from harness.run import rescue

from .conftest import rows_of

FLOAT16 = ("--dtypes", "float16")


def flaggems_cudagraph_rows(flaggems_dir, node: str) -> dict[tuple, float]:
    """FlagGems' own `--mode cudagraph` run of `node`: latency by (op, dtype, shape)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", node, "--level", "core", "--mode",
                           "cudagraph", "--dtypes", "float16", "-s", "-q", "-p",
                           "no:cacheprovider"], cwd=flaggems_dir, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    rows, _ = results.parse_run_output(None, proc.stdout)
    return {r.key(): r.latency_ms for r in rows if r.latency_ms}


def test_graph_timer_agrees_with_flaggems_cudagraph_mode(harness, flaggems_dir):
    for op in ("softmax", "argmax"):
        proc = harness("run", "--op", op, "--mode", "graph", *FLOAT16)
        assert proc.returncode == 0
        (run_dir,) = harness.runs(op)
        ours = {(r["op"], r["dtype"], r["shape"]): r["latency_ms"] for r in rows_of(run_dir)}
        node = json.loads((run_dir / "run_identity.json").read_text())["node"]
        theirs = flaggems_cudagraph_rows(flaggems_dir, node)
        common = sorted(set(ours) & set(theirs))
        assert len(common) == len(ours) >= 3, (sorted(ours), sorted(theirs))
        # A geometric mean over the operator's shapes: single microsecond rows swing by more.
        ratio = math.exp(sum(math.log(ours[k] / theirs[k]) for k in common) / len(common))
        assert 0.9 < ratio < 1.1, (op, ratio, {k: (ours[k], theirs[k]) for k in common})


def test_recorded_winners_replay_strictly(harness, tmp_path):
    shapes = tmp_path / "mm.yaml"
    shapes.write_text("BlasBenchmark:\n  shapes:\n    - [1, 1024, 1024, 1024]\n"
                      "    - [1, 2048, 512, 1024]\n  shape_desc: \"B, M, N, K\"\n")
    common = ("--op", "mm", *FLOAT16, "--shape-mode", "file", "--shape-file", str(shapes),
              "--isolate-tuner-cache", "1")
    assert harness("run", *common, "--record", "1").returncode == 0
    (recorded,) = harness.runs("mm")
    assert json.loads((recorded / "run_identity.json").read_text())["autotune_records"] > 0
    proc = harness("run", *common, "--replay-from", str(recorded), "--replay-strict", "1")
    assert proc.returncode == 0
    (replayed,) = [p for p in harness.runs("mm") if p != recorded]
    doc = json.loads((replayed / "run_identity.json").read_text())
    assert doc["autotune_replay_fallbacks"] == 0
    assert len(rows_of(replayed)) == len(rows_of(recorded)) == 2


def test_a_and_a_calls_nothing_and_disable_ptxas_opt_reads_slower(harness):
    # One input a benchmark (smoke): what is judged is the campaign's logic on real timings.
    ops = ("--ops", "exp,log_softmax", *FLOAT16, "--rounds", "2", "--shape-mode", "smoke")
    assert harness("ab", *ops, "--axis", "none").returncode == 0
    same = read_ab(harness.campaign("none"))
    assert len(same.rows) == 2 and not [r for r in same.rows
                                        if r.stats.verdict.value in ("faster", "slower")]
    assert harness("ab", *ops, "--axis", "DISABLE_PTXAS_OPT").returncode == 0
    doc = read_ab(harness.campaign("DISABLE_PTXAS_OPT"))
    assert doc.liveness is not None and doc.liveness.status == "live"
    assert len(doc.rows) == 2 and not [r for r in doc.rows if r.stats.verdict.value == "faster"]
    assert doc.geomean_speedup_pct is not None and doc.geomean_speedup_pct < 0


def test_allclose_dies_under_capture_and_is_rescued_direct(harness):
    proc = harness("run", "--op", "allclose", "--mode", "graph", *FLOAT16)
    assert proc.returncode == 0
    assert rescue.RESCUE_MARKER in proc.stdout
    (run_dir,) = harness.runs("allclose")
    rows = rows_of(run_dir)
    assert rows and all(RESCUED_MARKER in r["markers"] and r["timer"] == "direct" for r in rows)
    assert json.loads((run_dir / "run_identity.json").read_text())["capture_rescue"]


def test_an_operator_past_its_time_limit_is_stopped_and_recorded_timeout(harness, tmp_path):
    shapes = tmp_path / "big.yaml"  # minutes of tuning: far past the limit
    rows = "".join(f"    - [16, {n}, {n}, {n}]\n" for n in (8192, 8448, 8704))
    shapes.write_text(f'BlasBenchmark:\n  shapes:\n{rows}  shape_desc: "B, M, N, K"\n')
    began = time.monotonic()
    proc = harness("batch", "--ops", "mm", *FLOAT16, "--shape-mode", "file", "--shape-file",
                   str(shapes), "--unit-timeout", "25")
    (status,) = harness.batch_status()
    assert status["status"] == "timeout" and "25 s" in status["reason"], status
    assert proc.returncode == 1
    assert time.monotonic() - began < 25 + 60  # stopped at its limit, not at its end


def test_in_workers_a_failed_capture_retires_the_worker_and_the_next_operator_gets_a_fresh_one(
        harness):
    # Regression: allclose's one smoke shape fell back from capture and passed, leaving the
    # worker's generator in capture state; exp, next in that worker, failed drawing its inputs
    # ("Offset increment outside graph capture encountered unexpectedly").
    proc = harness("batch", "--ops", "allclose,exp", "--mode", "graph", *FLOAT16,
                   "--shape-mode", "smoke", "--workers", "1")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [(s["op"], s["status"]) for s in harness.batch_status()] == [
        ("allclose", "ok"), ("exp", "ok")]
    (allclose,) = harness.runs("allclose")
    (exp,) = harness.runs("exp")
    first = json.loads((allclose / "run_identity.json").read_text())["launch"][-1]
    (after,) = json.loads((exp / "run_identity.json").read_text())["launch"]
    assert first["kind"] == after["kind"] == "worker"
    assert first["retired"] and after["pid"] != first["pid"] and after["session"] == 1
    assert rows_of(exp) and all(r["timer"] == "graph" for r in rows_of(exp))
