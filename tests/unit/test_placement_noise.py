"""scripts/placement_noise.py: inputs moved elsewhere keep their layout; the spreads it prints."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import placement_noise  # noqa: E402


def test_moved_inputs_keep_values_sizes_and_strides_at_other_addresses():
    torch = pytest.importorskip("torch")
    wide = torch.arange(48.0).reshape(6, 8)
    args = (wide.t(), wide[:, ::2])  # a transposed view and a strided one
    copies, spacer = placement_noise.moved(args, random.Random(1))
    for a, c in zip(args, copies, strict=True):
        assert torch.equal(a, c) and c.stride() == a.stride() and c.size() == a.size()
        assert c.data_ptr() != a.data_ptr()
    assert spacer.dtype == torch.uint8 and spacer.numel() % 4096 == 0


def _runs(between: float, within: float) -> list[dict[str, dict[str, list[float]]]]:
    """Four processes whose rows sit `between` apart in log time (0, +-between, +2 between)
    and whose timings in a process alternate by +-`within`."""
    out = []
    for offset in (0.0, between, -between, 2 * between):
        times = [math.exp(offset + (within if i % 2 else -within)) * 1e-3 for i in range(5)]
        out.append({row: {"same": times, "moved": [math.exp(offset) * 1e-3] * 5}
                    for row in placement_noise.ROWS})
    return out


def test_the_report_tells_a_process_offset_from_a_spread_within_a_process():
    lines = placement_noise.report(_runs(between=0.02, within=0.005))
    assert lines[0].split()[:3] == ["row", "median", "us"]
    cells = lines[1].split()
    assert cells[0:2] == ["rot90", "64x64"]
    within_same, within_moved, between_same, between_moved = (
        float(c.rstrip("%")) for c in cells[3:7])
    # alternating +-0.5%: sd 0.548%; processes at 0, +2, -2, +4%: sd 2.58% (each median of `same`
    # lies 0.5% below its process's offset, so the medians spread as the offsets do)
    assert within_same == pytest.approx(0.55, abs=0.01) and within_moved == 0.0
    assert between_same == pytest.approx(2.58, abs=0.01) == between_moved
    assert len(lines) == 1 + len(placement_noise.ROWS)
