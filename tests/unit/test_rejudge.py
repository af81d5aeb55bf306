"""scripts/rejudge.py: a finished campaign's rows judged again, beside the verdicts it recorded."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

from harness.axes import Axis
from harness.campaign import plan

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import rejudge  # noqa: E402


def _campaign(folder: Path, shapes: int) -> None:
    """An A/A of one operator, `shapes` rows of 3 rounds at 0.3% noise, every unit ok, and an
    ab.json that recorded every row inconclusive."""
    campaign = plan.new_campaign(directory=folder, axis=Axis("none", None), caliber={},
                                 argv=[], ops={"exp": {"node": "n"}}, rounds=3, walls={},
                                 walls_from=None)
    campaign.python = sys.executable
    rng = random.Random(4)
    for unit in campaign.units:
        unit.status = "ok"
        for side in plan.SIDES:
            run = folder / "exp" / side / f"r{unit.round}"
            run.mkdir(parents=True)
            lines = [json.dumps({"op": "exp", "dtype": "torch.float16", "shape": f"[[{i}]]",
                                 "status": "SUCCESS", "mode": "kernel", "timer": "graph",
                                 "latency_base_ms": None, "speedup": None,
                                 "latency_ms": 0.001 * 10 ** (3 * i / shapes)
                                 * math.exp(rng.gauss(0.0, 0.003))})
                     for i in range(1, shapes + 1)]
            (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    campaign.save(folder)
    (folder / "ab.json").write_text(json.dumps({
        "rows": [{"verdict": "inconclusive"}] * shapes,
        "method": {"text": "t interval on per-round log ratios, 95%, BH q=0.05"}}))


def test_a_campaign_judged_again_reads_its_quiet_rows_same_beside_what_it_recorded(
        tmp_path, capsys):
    _campaign(tmp_path / "c", 20)
    assert rejudge.main([str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "  recorded: inconclusive 20  (t interval on per-round log ratios, 95%, " \
                     "BH q=0.05)"
    now = out[2]
    assert now.startswith("  now:      ") and "variance moderated over 20 rows" in now
    counts = dict(part.rsplit(" ", 1) for part in now.split("(")[0][12:].strip().split(", "))
    assert sum(map(int, counts.values())) == 20 and int(counts.get("same", 0)) > 10
    assert "faster" not in counts and "slower" not in counts


def test_no_campaign_named_is_a_usage_error(capsys):
    assert rejudge.main([]) == 2
    assert "rejudge.py <campaign>" in capsys.readouterr().err
