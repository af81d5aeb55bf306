"""`harness ab` and `make demo` end to end on the cpu backend."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness import stats
from harness.campaign import ab
from harness.errors import UsageError
from harness.report import abjson
from harness.report.abresult import AbRow
from harness.settings.spec import REPO_ROOT

pytestmark = pytest.mark.integration
SHAPES = "add:\n  shapes:\n    - [64, 64]\n    - [256, 256]\n"


def harness(*args, env=None):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO_ROOT,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
                          capture_output=True, text=True, timeout=900)


def test_aa_campaign_measures_a_noise_floor_and_writes_report_and_receipt(tmp_path):
    shapes = tmp_path / "s.yaml"
    shapes.write_text(SHAPES)
    proc = harness("ab", "--backend", "cpu", "--op", "add", "--axis", "none", "--rounds", "2",
                   "--shape-mode", "file", "--shape-file", str(shapes), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (campaign,) = (tmp_path / "ab" / "none-add").iterdir()
    assert sorted(p.name for p in (campaign / "add" / "A").iterdir()) == ["r0", "r1"]
    doc = json.loads((campaign / "ab.json").read_text())
    assert doc["schema"] == "harness-ab/1" and len(doc["rows"]) == 4  # 2 shapes x 2 dtypes
    assert doc["caliber"]["measured_noise_floor_pct"] >= 1.0
    assert {r["verdict"] for r in doc["rows"]} <= {"same", "inconclusive", "faster", "slower"}
    assert doc["method"]["text"] == "t interval on per-round log ratios, 95%, BH q=0.05"
    md = (campaign / "ab.md").read_text()
    assert "- axis: none (an A/A campaign" in md and "| add | torch.float32 |" in md
    identity = json.loads((campaign / "add" / "B" / "r1" / "run_identity.json").read_text())
    assert identity["replay_from"] == str(campaign / "add" / "A" / "r0")
    assert identity["replay_strict"]
    # BASELINE auto in an A/A is once: torch's reference is timed in round 0, on both sides.
    timed = {rel: [r["latency_base_ms"] is not None
                   for r in map(json.loads, (campaign / "add" / rel / "results.jsonl").open())]
             for rel in ("A/r0", "B/r0", "B/r1", "A/r1")}
    assert timed == {"A/r0": [True] * 4, "B/r0": [True] * 4, "B/r1": [False] * 4,
                     "A/r1": [False] * 4}
    assert doc["caliber"]["baseline"] == "once" and "- torch reference (BASELINE): once" in md
    verify = harness("receipt", "verify", str(campaign))
    assert verify.returncode == 0 and "RECEIPT_OK" in verify.stdout
    (done,) = [line for line in proc.stdout.splitlines() if line.startswith("AB_DONE")]
    counts = dict(f.split("=", 1) for f in done.split()[1:] if "=" in f)
    assert sum(int(counts[v]) for v in ("faster", "slower", "same", "inconclusive")) == 4
    assert counts["flagged"] == "0"
    logs = [(campaign / "logs" / f"add-r{r}.log").read_text() for r in (0, 1)]
    steps = [line for log in logs for line in log.splitlines() if line.startswith("AB_STEP")]
    assert [s.split()[1] for s in steps] == ["add/A/r0", "add/B/r0", "add/B/r1", "add/A/r1"]
    assert not (campaign / "cache").exists()  # each side's campaign cache is removed at the end
    try:  # NOISE_FROM reads it: it is taken, or its floor is refused (a loaded host's)
        ab.noise_model_from(campaign)
    except UsageError as exc:
        assert "cannot mean \"the same\"" in str(exc)


def test_ab_dry_run_shows_both_sides_and_runs_nothing(tmp_path):
    proc = harness("ab", "--backend", "cpu", "--op", "mm", "--axis", "OMP_NUM_THREADS",
                   "--a", "1", "--b", "2", "--rounds", "2", "--out", str(tmp_path), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "device -: mm/r0[AB], mm/r1[BA]" in proc.stdout
    assert "side A: OMP_NUM_THREADS=1 FLAGGEMS_CACHE_DIR=" in proc.stdout
    assert "side B: OMP_NUM_THREADS=2 FLAGGEMS_CACHE_DIR=" in proc.stdout
    assert not any(tmp_path.iterdir())


def test_ab_requires_an_axis(tmp_path):
    proc = harness("ab", "--backend", "cpu", "--op", "mm", "--out", str(tmp_path))
    assert proc.returncode == 2 and "AXIS is required" in proc.stderr


def test_make_demo_runs_an_ab_and_prints_where_the_report_is():
    # The README's first command, as a new user runs it (it builds .venv on first use).
    proc = subprocess.run(["make", "--no-print-directory", "demo", "OUT=runs/demo-test"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    done = [line for line in proc.stdout.splitlines() if line.startswith("AB_DONE")]
    assert done and "report=" in done[0]
    report = done[0].split("report=")[1].split()[0]
    text = open(report).read()
    assert "OMP_NUM_THREADS: A=1 (off), B=2 (on)" in text and "| mm | torch.float32 |" in text
    # The demo's venv installs matplotlib: the plot is written, and the geomean is a rounded %.
    plot = done[0].split("plot=")[1].split()[0]
    assert open(plot, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert re.search(r" geomean=[-+]\d+\.\d%( |$)", done[0]), done[0]


def finished_aa(directory: Path) -> Path:
    """The ab.json of a finished A/A whose rows moved 5% a round near 0.003 ms, 0.2% at 5 ms:
    what a quiet host measures. A measured one is refused on a loaded host (a 54.9% floor at
    0.003 ms), rightly, and test_aa_campaign_measures_... checks a measured one is read."""
    rows = [abjson.row_json(AbRow("add", "f32", f"s{i}", 1, stats.row_stats(
        [ms, ms], [ms / (1 + swing), ms * (1 + swing)], noise_floor_pct=1.0), ()))
        for i, (ms, swing) in enumerate([(0.003, 0.05)] * 10 + [(5.0, 0.002)] * 10)]
    directory.mkdir()
    (directory / "ab.json").write_text(json.dumps(
        {"schema": abjson.SCHEMA, "rows": rows, "caliber": {"measured_noise_floor_pct": 5.0}}))
    return directory


def test_noise_from_an_aa_gives_each_row_the_floor_of_its_latency(tmp_path):
    shapes = tmp_path / "s.yaml"
    shapes.write_text("add:\n  shapes:\n    - [64, 64]\n")
    common = ("--backend", "cpu", "--op", "add", "--rounds", "2", "--shape-mode", "file",
              "--shape-file", str(shapes), "--out", str(tmp_path))
    aa = finished_aa(tmp_path / "aa")
    proc = harness("ab", *common, "--axis", "OMP_NUM_THREADS", "--a", "1", "--b", "2",
                   "--noise-from", str(aa))
    assert proc.returncode in (0, 6), proc.stdout[-3000:] + proc.stderr[-2000:]
    (campaign,) = (tmp_path / "ab" / "OMP_NUM_THREADS-add").iterdir()
    doc = json.loads((campaign / "ab.json").read_text())
    assert doc["caliber"]["noise_floor_bands"] and doc["caliber"]["noise_floor_source"] == str(aa)
    assert all(r["noise_floor_pct"] >= 1.0 for r in doc["rows"]) and doc["rows"]
    md = (campaign / "ab.md").read_text()
    assert "- noise floor: per row, by A latency (column floor %): " in md
    assert f"(from the A/A campaign {aa})" in md and "| floor % |" in md
    bad = harness("ab", *common, "--axis", "OMP_NUM_THREADS", "--a", "1", "--b", "2",
                  "--noise-from", str(campaign))
    assert bad.returncode != 0 and f"NOISE_FROM={str(campaign)!r} is not an A/A" in bad.stderr
