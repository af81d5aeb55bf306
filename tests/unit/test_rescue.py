"""The capture rescue: a graph-timed operator that died after a capture failure is run again,
direct, in a fresh process; its rows say so."""

from __future__ import annotations

import dataclasses
import json
import stat
import sys
from pathlib import Path

from harness.contract.boundary import DIRECT_MARKER, FLAG_MARKERS, POISONED_MARKER, RESCUED_MARKER
from harness.providers.flaggems import Node
from harness.run import rescue, runner
from harness.run.preflight import Plan
from harness.settings import spec

RECORD = {"op_name": "allclose", "dtype": "torch.float16", "mode": "kernel", "level": "core",
          "result": [{"legacy_shape": None, "shape_detail": [[64, 64]], "latency_base": 0.01,
                      "latency": 0.02, "gbps_base": None, "gbps": None, "speedup": 0.5,
                      "accuracy": None, "tflops": None, "utilization": None,
                      "compared_speedup": None, "error_msg": None}]}

# Stands in for `python -m pytest ...`: graph-timed, one shape falls back and the operator then
# dies of what the capture left (as FlagGems' allclose does on an H200), after writing a record
# log of its own; direct-timed, it passes. Each call appends its timer to calls.txt.
FAKE_PYTEST = """#!{python}
import json, os, pathlib, sys, time
run_dir = pathlib.Path(os.environ["ZL_PLUGIN_RUN_DIR"])
timer = os.environ["ZL_PLUGIN_TIMER"]
with open(pathlib.Path(__file__).with_name("calls.txt"), "a") as fh:
    fh.write(timer + "\\n")
record = {record!r}
begun = time.monotonic()  # a session's line, as the phases plugin writes it
time.sleep(0.4 if timer == "graph" else 0.0)
with open(run_dir / "time_phases.jsonl", "a") as fh:
    fh.write(json.dumps({{"collect_start": begun, "ended": time.monotonic(),
                         "phases": {{"replays" if timer == "graph" else "direct":
                                     time.monotonic() - begun}}}}) + "\\n")
if timer == "graph" and {die}:
    (run_dir / "result_first.log").write_text("[INFO] " + json.dumps(record) + "\\n")
    print('{direct} op=allclose dtype=torch.float16 shape="[64, 64]" reason="operation not '
          'permitted when stream is capturing"')
    print("RuntimeError: Offset increment outside graph capture encountered unexpectedly")
    sys.exit(1)
(run_dir / "result_second.log").write_text("[INFO] " + json.dumps(record) + "\\n")
# what the outcomes plugin writes of a session that finished
(run_dir / "outcomes.json").write_text(json.dumps({{"collected": 1, "passed": 1, "failed": 0,
                                                  "skipped": 0, "finished": True}}))
print("1 passed")
"""


def _run(tmp_path: Path, *, die: bool = True, timer: str = "graph") -> tuple[int, Path, str]:
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(FAKE_PYTEST.format(python=sys.executable, record=RECORD, die=die,
                                       direct=DIRECT_MARKER))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "fg").mkdir()
    settings = spec.resolve({"backend": "cpu", "flaggems_dir": str(tmp_path / "fg"),
                             "out": str(tmp_path / "runs")}, {}, which=lambda _: None)
    settings = dataclasses.replace(settings, timer=timer)  # cpu cannot capture: as on a GPU
    plan = Plan(node=Node("benchmark/test_allclose.py", "test_allclose", ("allclose",)),
                op="allclose", python=str(fake), python_version="3.12.0")
    lines: list[str] = []
    rc, run_dir = runner.execute(settings, plan, out=lines.append, echo=lambda _: None)
    return rc, run_dir, "\n".join(lines)


def test_an_operator_dead_after_a_capture_failure_is_rerun_direct_and_its_rows_flagged(tmp_path):
    rc, run_dir, out = _run(tmp_path)
    assert rc == 0, out
    assert (tmp_path / "bin" / "calls.txt").read_text().split() == ["graph", "direct"]
    assert f"{rescue.RESCUE_MARKER} op=allclose timer=direct first_rc=1" in out
    # The dead attempt's record log is kept aside, not read twice.
    assert (run_dir / rescue.CAPTURE_ATTEMPT_DIR / "result_first.log").is_file()
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 1
    assert rows[0]["timer"] == "direct" and RESCUED_MARKER in rows[0]["markers"]
    facts = json.loads((run_dir / "run_identity.json").read_text())["capture_rescue"]
    assert facts["first_rc"] == 1 and facts["set_aside"] == ["result_first.log"]
    assert "Offset increment" not in facts["reason"] and "stream is capturing" in facts["reason"]
    log = (run_dir / "run.log").read_text()
    assert log.index("Offset increment") < log.index(rescue.RESCUE_MARKER)  # history kept
    assert RESCUED_MARKER in FLAG_MARKERS  # a campaign never calls such a row
    # Regression (review): the dead attempt's session line went aside with its files, so the
    # breakdown read one session and put the first one's 0.4 s of replays in `startup`
    spent = json.loads((run_dir / "time_breakdown.json").read_text())
    assert spent["sessions"] == 2 and spent["phases"]["replays"] >= 0.4
    assert spent["phases"]["startup"] < spent["wall_s"] - spent["phases"]["replays"]


def test_a_failure_without_a_capture_failure_is_the_operators_own(tmp_path):
    assert rescue.rescue_reason("graph", 1, "AssertionError: wrong\n") is None
    assert rescue.rescue_reason("direct", 1, f"{POISONED_MARKER} op=x reason=\"y\"\n") is None
    assert rescue.rescue_reason("graph", 0, f"{DIRECT_MARKER} op=x reason=\"y\"\n") is None
    reason = rescue.rescue_reason(
        "graph", -11, f"{DIRECT_MARKER} op=x reason=\"a\"\n{POISONED_MARKER} op=x "
        "reason=\"invalidated\"\n")
    assert reason == f"{POISONED_MARKER}: invalidated; then pytest exit code -11"


def test_a_direct_timed_run_is_never_rescued(tmp_path):
    rc, run_dir, out = _run(tmp_path, timer="direct")
    assert rc == 0 and rescue.RESCUE_MARKER not in out
    assert (tmp_path / "bin" / "calls.txt").read_text().split() == ["direct"]
    assert json.loads((run_dir / "run_identity.json").read_text())["capture_rescue"] is None
    assert not (run_dir / rescue.CAPTURE_ATTEMPT_DIR).exists()
