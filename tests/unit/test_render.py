"""Tests for harness.report.render: one A/B table wherever rendered; statistics only in stats."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.contract.boundary import DIRECT_MARKER
from harness.contract.results import Row, write_results
from harness.report.comparison import compare
from harness.report.render import ms, render_markdown
from harness.report.sources import load_source
from harness.report.write import AB_MD
from tests.abdata import ab_data, write_data

HARNESS = Path(__file__).resolve().parents[2] / "harness"
IDENTITY = {"backend": "cpu", "level": "core", "timer": "graph", "shape_mode": "upstream",
            "autotune_mode": "default", "replay_from": None}


def run_dir(path: Path, rows: list[Row]) -> Path:
    path.mkdir(parents=True)
    write_results(path, rows)
    (path / "run_identity.json").write_text(json.dumps(IDENTITY))
    return path


def row(op: str, shape: str, latency: float | None, **extra: Any) -> Row:
    return Row(op=op, dtype="torch.float32", shape=shape,
               status="SUCCESS" if latency else "FAILED", latency_base_ms=1.0,
               latency_ms=latency, speedup=None, **extra)


def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Two operators, a key measured twice, a direct-timed row, a | in a shape, unpaired rows."""
    a = run_dir(tmp_path / "a", [
        row("tanh", "[[64, 64]]", 0.036992), row("tanh", "[[64, 64]]", 0.5),
        row("tanh", "[[1|2]]", 237.5), row("exp", "[[8]]", 2.0), row("exp", "[[9]]", 1.0)])
    b = run_dir(tmp_path / "b", [
        row("tanh", "[[64, 64]]", 0.001395), row("tanh", "[[64, 64]]", 0.25),
        row("tanh", "[[1|2]]", 237.0, markers=(DIRECT_MARKER,)), row("exp", "[[8]]", 1.0),
        row("exp", "[[9]]", None), row("exp", "[[7]]", 1.0)])
    return a, b


def tables(lines: list[str]) -> list[str]:
    """From the first table on: its rows, the geometric means and the unpaired rows."""
    first = next(i for i, line in enumerate(lines) if line.startswith("| operator | dtype |"))
    return lines[first:]


def test_summary_ab_and_harness_report_give_the_same_tables(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_runs(tmp_path)
    assert cli.main(["summary", "--ab", str(a), str(b)]) == 0
    summary_lines = capsys.readouterr().out.splitlines()
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    result = compare([load_source(a)], [load_source(b)])
    write_data(campaign, ab_data(result, {"axis": "X", "a": "0", "b": "1"}))
    assert cli.main(["report", str(campaign)]) == 0
    report_lines = (campaign / AB_MD).read_text(encoding="utf-8").splitlines()
    ours, theirs = tables(summary_lines), tables(report_lines)
    assert len(ours) > 12  # rows, per-operator means and unpaired rows all came out
    for line_summary, line_report in zip(ours, theirs, strict=True):
        assert line_summary == line_report
    assert "| tanh | torch.float32 | [[64, 64]] (#2) | 0.5000 | 0.2500 | +100.0 |" in ours[3]
    assert "[[1\\|2]]" in ours[4] and ours[4].count(" | ") == 10  # the | in a shape is escaped
    assert any(line.startswith("| exp | torch.float32 | [[9]] | FAILED in B |") for line in ours)


def test_ms_of_a_nan_or_infinite_latency_is_shown_not_a_crash() -> None:
    # json.loads takes NaN and Infinity: an ab.json holding them once crashed on log10.
    assert (ms(math.nan), ms(math.inf), ms(0.0014), ms(237.5)) == ("nan", "inf", "0.001400",
                                                                    "237.5")
    rows = [{"op": "tanh", "dtype": "f32", "shape": "[[1]]", "a_ms": math.nan, "b_ms": 1.0,
             "speedup_pct": 0.0, "min_pct": 0.0, "max_pct": 0.0, "rounds": 1,
             "verdict": "inconclusive", "p_value": None}]
    assert "| tanh | f32 | [[1]] | nan | 1.000 | +0.0 |" in render_markdown(rows, {})


# A geometric mean computed by hand: exp of a mean (or sum) of logs, the statistics module's,
# or a product raised to 1/n.
GEOMEAN_BY_HAND = (r"\bexp\([^\n]*\b(f?sum|fmean|mean)\(", r"def geometric_mean",
                   r"statistics\.geometric_mean", r"\bprod\([^\n]*\*\*\s*\(?\s*1(\.0)?\s*/")


def geomean_sites(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()
            if any(re.search(p, line) for p in GEOMEAN_BY_HAND)]


def test_no_module_but_stats_computes_a_geometric_mean() -> None:
    stats_py = HARNESS / "stats" / "__init__.py"
    assert geomean_sites(stats_py.read_text(encoding="utf-8"))  # the probe works
    assert geomean_sites("x = math.prod(v) ** (1 / len(v))")
    assert geomean_sites("g = np.exp(np.mean(np.log(values)))")
    found = {str(path.relative_to(HARNESS)): sites for path in sorted(HARNESS.rglob("*.py"))
             if path != stats_py
             and (sites := geomean_sites(path.read_text(encoding="utf-8")))}
    assert found == {}


@pytest.mark.slow  # a fresh interpreter
def test_the_renderers_import_neither_pytest_nor_matplotlib() -> None:
    # The PNG renderer draws with matplotlib: importing it must wait until a chart is drawn.
    code = ("import sys, harness.cli, harness.report.render, harness.report.comparison, "
            "harness.report.write; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', 'matplotlib')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(HARNESS.parent)}, check=True)
    assert proc.stdout.strip() == "[]"
