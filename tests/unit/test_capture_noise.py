"""scripts/capture_noise.py: the spreads it prints for its three ways, and an --out refused
before any process runs."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import capture_noise  # noqa: E402


def _runs() -> list[dict[str, dict[str, list[float]]]]:
    """Three processes: `one` steady within a process and 1% apart between them, `split` 0.5%
    noisier within and 5% higher, `replays` as `one`."""
    out = []
    for offset in (0.0, 0.01, -0.01):
        one = [math.exp(offset) * 1e-3] * 4
        split = [math.exp(offset + 0.05 + (0.005 if i % 2 else -0.005)) * 1e-3 for i in range(4)]
        out.append({row: {"one": one, "split": split, "replays": list(one)}
                    for row in capture_noise.ROWS})
    return out


def test_the_report_reads_each_way_within_and_between_processes_with_ones_median():
    lines = capture_noise.report(
        _runs(), capture_noise.ROWS, capture_noise.KINDS)
    assert lines[0].split()[3:5] == ["within", "one"]
    assert len(lines) == 1 + len(capture_noise.ROWS)
    cells = lines[1].split()
    assert cells[:2] == ["rot90", "64x64"] and float(cells[2]) == pytest.approx(1.0)  # us
    within = [float(c.rstrip("%")) for c in cells[3:6]]
    between = [float(c.rstrip("%")) for c in cells[6:9]]
    assert within[0] == within[2] == 0.0 and within[1] == pytest.approx(0.577, abs=0.01)
    assert between == pytest.approx([1.0, 1.0, 1.0], abs=0.01)


@pytest.mark.parametrize("bad", ["folder", "missing/timings.json"])
def test_an_out_that_cannot_be_written_is_refused_before_any_process(tmp_path, capsys, bad):
    (tmp_path / "folder").mkdir()
    with pytest.raises(SystemExit) as stop:
        capture_noise.main(["--out", str(tmp_path / bad), "--processes", "2"])
    assert stop.value.code == 2
    assert "expected a file in an existing folder" in capsys.readouterr().err
