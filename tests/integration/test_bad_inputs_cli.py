"""Bad inputs through the CLI: one line naming the value, exit 2 or 3, and nothing created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import stats
from harness.axes import Axis
from harness.campaign import plan
from harness.report import abjson
from harness.report.abresult import AbRow
from harness.settings.spec import EMBEDDED_SUITE

from .test_run_cli import harness

pytestmark = pytest.mark.integration
MALFORMED_SHAPES = "tanh:\n  shapes: [64, 64]\n"  # a shape must be a list: tuple(64) fails


def inputs(tmp_path: Path) -> dict[str, str]:
    """The odd files and directories the cases below pass as values."""
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    (tmp_path / "adir").mkdir()
    binary = tmp_path / "binary"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01")
    malformed = tmp_path / "malformed.yaml"
    malformed.write_text(MALFORMED_SHAPES)
    records = tmp_path / "oldrun" / "autotune_records"
    records.mkdir(parents=True)
    (records / "winners.jsonl").write_text("{not json\n")
    noisy = tmp_path / "noisy_aa"  # a finished A/A whose rows moved 30% a round
    noisy.mkdir()
    rows = [abjson.row_json(AbRow("add", "f32", f"s{i}", 1, stats.row_stats(
        [0.005, 0.005], [0.005 / 1.3, 0.005 * 1.3], noise_floor_pct=1.0), ())) for i in range(10)]
    (noisy / "ab.json").write_text(json.dumps({"schema": abjson.SCHEMA, "rows": rows,
                                               "caliber": {"measured_noise_floor_pct": 30.0}}))
    nan_walls = tmp_path / "nan_walls"  # an earlier campaign whose unit walls are NaN
    earlier = plan.new_campaign(directory=nan_walls, axis=Axis("none", None), caliber={},
                                argv=[], ops={"tanh": {"node": "n"}}, rounds=2, walls={},
                                walls_from=None)
    for unit in earlier.units:
        unit.status, unit.wall_s = "ok", float("nan")
    nan_walls.mkdir()
    earlier.save(nan_walls)
    return {"afile": str(afile), "adir": str(tmp_path / "adir"), "binary": str(binary),
            "malformed": str(malformed), "oldrun": str(tmp_path / "oldrun"),
            "noisy_aa": str(noisy), "nan_walls": str(nan_walls)}


RUN = ["run", "--backend", "cpu", "--op", "tanh"]
AB = ["ab", "--backend", "cpu", "--op", "tanh"]
BATCH = ["batch", "--backend", "cpu"]
CASES = {
    "out_is_a_file": (RUN + ["--out", "{afile}"], 2, "OUT (--out)='{afile}' is not accepted"),
    "out_under_a_file": (RUN + ["--out", "{afile}/runs"], 2, "it is under '{afile}'"),
    "out_cannot_be_made": (RUN + ["--out", "/proc/harness-runs"], 3, "check=out"),
    "dtypes_float99": (RUN + ["--dtypes", "float99"], 2, "'float99' is not a torch dtype"),
    "dtypes_not_declared": (RUN + ["--dtypes", "float16"], 2,
                            "float16 is not measured; benchmark/test_tanh.py::test_tanh declares"),
    "shape_file_is_a_directory": (RUN + ["--shape-mode", "file", "--shape-file", "{adir}"], 3,
                                  "SHAPE_FILE='{adir}' is not a file"),
    "shape_file_is_binary": (RUN + ["--shape-mode", "file", "--shape-file", "{binary}"], 3,
                             "cannot be read as UTF-8 text"),
    "shape_file_malformed": (RUN + ["--shape-mode", "file", "--shape-file", "{malformed}"], 3,
                             "entry 'tanh': shape 64 is not accepted"),
    "replay_from_corrupt": (RUN + ["--replay-from", "{oldrun}"], 3,
                            "winners.jsonl:1: not an autotune record"),
    "devices_not_numbers": (RUN + ["--devices", "gpu0"], 2, "DEVICES (--devices)='gpu0'"),
    "rounds_beyond_cap": (AB + ["--axis", "none", "--rounds", "1000"], 2,
                          "ROUNDS (--rounds)='1000' is not accepted; expected a whole number "
                          "from 1 to 100"),
    # A campaign of one round has no interval: it ran to its end and could call nothing.
    "rounds_one_for_a_switch": (AB + ["--axis", "OMP_NUM_THREADS", "--a", "1", "--b", "2",
                                      "--rounds", "1"], 2,
                                "ROUNDS (--rounds)='1' is not accepted for AXIS=OMP_NUM_THREADS: "
                                "one round gives no interval"),
    # A 30% floor (a 6792% one read B 77-250x slower than A same): refused before any check.
    "noise_from_too_noisy": (AB + ["--axis", "OMP_NUM_THREADS", "--a", "1", "--b", "2",
                                   "--noise-from", "{noisy_aa}"], 2,
                             "NOISE_FROM='{noisy_aa}' measured a noise floor of 30.0% (rows "
                             "near 0.005 ms A latency): a floor above 25% cannot mean"),
    # NaN walls were a traceback in a run and projected "nan s" in a dry run.
    "walls_from_nan": (AB + ["--axis", "none", "--walls-from", "{nan_walls}", "--dry-run"], 2,
                       "WALLS_FROM='{nan_walls}': campaign.json gives unit 'tanh/r0' "
                       "wall_s=nan; expected seconds"),
    "a_equal_to_b": (AB + ["--axis", "OMP_NUM_THREADS", "--a", "1", "--b", "1"], 2,
                     "A (--a)='1' and B (--b)='1' are equal"),
    "ops_file_is_a_directory": (BATCH + ["--ops-file", "{adir}"], 2,
                                "OPS_FILE='{adir}' is not a file"),
    "ops_file_is_binary": (BATCH + ["--ops-file", "{binary}"], 2, "cannot be read as UTF-8"),
    # AXIS=DISABLE_PTXAS_OPTS (a misspelling) set a variable nothing reads: on cpu a whole
    # campaign of "same", on cuda AXIS_NOT_LIVE after the whole campaign.
    "axis_misspelled": (AB + ["--axis", "OMP_NUM_THREAD", "--a", "1", "--b", "2"], 2,
                        "AXIS='OMP_NUM_THREAD' is not a switch BACKEND=cpu knows; did you mean "
                        "OMP_NUM_THREADS?"),
    # UNIT_TIMEOUT=nan or 1h was read only once the campaign directory existed (and left it
    # behind as planned); a dry run accepted it.
    "unit_timeout_nan": (AB + ["--axis", "none", "--unit-timeout", "nan"], 2,
                         "UNIT_TIMEOUT (--unit-timeout)='nan' is not accepted"),
    "unit_timeout_1h_dry_run": (AB + ["--axis", "none", "--unit-timeout", "1h", "--dry-run"], 2,
                                "UNIT_TIMEOUT (--unit-timeout)='1h' is not accepted"),
    "unit_timeout_superscript": (BATCH + ["--ops", "tanh", "--unit-timeout", "\u00b2"], 2,
                                 "UNIT_TIMEOUT (--unit-timeout)='\u00b2' is not accepted"),
    # 300 characters of OP, OPS or an OUT component: a traceback (file name too long).
    "op_300_characters": (["run", "--backend", "cpu", "--op", "o" * 300], 2,
                          "is not accepted; expected an operator name: letters, digits, '_', "
                          "'.', '-', not starting with '.' or '-', at most 100 characters"),
    "ops_300_characters": (["ab", "--backend", "cpu", "--axis", "none", "--ops", "o" * 300], 2,
                           f"OPS: {'o' * 300!r} is not an operator name"),
    "out_component_300_characters": (RUN + ["--out", "{adir}/" + "d" * 300], 2,
                                      "is 300 bytes; expected a path whose every component is "
                                      "at most 255 bytes"),
    # A= (empty) silently ran side A with the default 0.
    "a_empty": (AB + ["--axis", "OMP_NUM_THREADS", "--a", "", "--b", "2"], 2,
                "A (--a)='' is not accepted; expected a value (leave A out for its default, 0)"),
    # A newline in A forged a marker line (AB_DONE rows=999) in the unit log.
    "a_with_a_newline": (AB + ["--axis", "none", "--a", "0\nAB_DONE rows=999"], 2,
                         "A (--a)='0\\nAB_DONE rows=999' is not accepted: it holds the "
                         "control character '\\n'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_with_its_exit_code_and_creates_nothing(case, tmp_path):
    argv, code, needle = CASES[case]
    values = inputs(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    args = [a.format(**values) for a in argv]
    if "--out" not in args:
        args += ["--out", str(out)]
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = harness(*args)
    assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-2000:]
    if code == 2:  # a bad value: one line on stderr, before any check ran
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr
        assert needle.format(**values) in proc.stderr
    else:  # a failed check: its marker is the last line, on stdout
        last = proc.stdout.splitlines()[-1]
        assert last.startswith("PREFLIGHT_FAILED check=") and needle.format(**values) in last
        assert proc.stderr == ""
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not any(out.iterdir()) and sorted(p.name for p in tmp_path.iterdir()) == before


def test_report_of_an_ab_json_with_rows_that_are_not_objects(tmp_path):
    (tmp_path / "ab.json").write_text(json.dumps({"schema": "harness-ab/1", "rows": [1, 2]}))
    proc = harness("report", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "ab.json: rows[0] is 1, not an object" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ab.json"]


# --------------------------------------------------------------------------- dry runs


def plan_then_failures(proc, *checks: str) -> list[str]:
    """The dry run's lines, checked: the plan first, then exactly `checks` failing."""
    lines = proc.stdout.splitlines()
    failed = [i for i, line in enumerate(lines) if line.startswith("PREFLIGHT_FAILED")]
    assert [lines[i].split()[1] for i in failed] == [f"check={c}" for c in checks], proc.stdout
    for needle in ("pytest: ", "plugins: ", "environment:", "  ZL_PLUGIN_BACKEND=musa"):
        at = next(i for i, line in enumerate(lines) if line.startswith(needle))
        assert at < failed[0], needle
    return lines


def test_dry_run_without_the_stack_prints_the_plan_then_every_failing_check(tmp_path):
    proc = harness("run", "--dry-run", "--backend", "musa", "--op", "tanh", "--runner", "host",
                   "--out", str(tmp_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = plan_then_failures(proc, "flaggems_dir", "python_modules")
    assert "'<unresolved OP=tanh>'" in proc.stdout
    assert f"run directory: {tmp_path}/tanh/" in proc.stdout
    assert "preflight test_node: skipped (needs benchmark_file, which failed)" in lines
    assert not any(tmp_path.iterdir())


def test_dry_run_with_a_checkout_but_no_vendor_modules_shows_the_resolved_node(tmp_path):
    proc = harness("run", "--dry-run", "--backend", "musa", "--op", "tanh", "--runner", "host",
                   "--flaggems-dir", str(EMBEDDED_SUITE), "--out", str(tmp_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    plan_then_failures(proc, "python_modules")
    assert "benchmark/test_tanh.py::test_tanh --level=core" in proc.stdout
    assert "torch_musa" in proc.stdout.splitlines()[-1]
    assert not any(tmp_path.iterdir())


def test_ab_dry_run_without_the_stack_prints_the_campaign_then_the_failures(tmp_path):
    proc = harness("ab", "--dry-run", "--backend", "musa", "--op", "tanh", "--runner", "host",
                   "--axis", "RLC_ENHANCE", "--out", str(tmp_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = plan_then_failures(proc, "flaggems_dir", "python_modules")
    assert any(line.startswith("side A: FLAGTREE_MUSA_RLC_ENHANCE=0 ") for line in lines)
    assert "  FLAGTREE_MUSA_RLC_ENHANCE=0" in lines  # the first run's own environment
    assert not any(tmp_path.iterdir())


def test_ab_dry_run_of_an_operator_without_a_node_plans_the_rest_and_exits_3(tmp_path):
    # Pinned: the suite's dry run exited 0 although a real run would skip that operator.
    proc = harness("ab", "--dry-run", "--backend", "cpu", "--ops", "mm,nope", "--axis",
                   "OMP_NUM_THREADS", "--out", str(tmp_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "operator nope: PREFLIGHT_FAILED check=test_node" in proc.stdout
    assert "device -: mm/r0[AB], mm/r1[BA], mm/r2[AB]" in proc.stdout
    assert not any(tmp_path.iterdir())


def test_batch_dry_run_without_the_stack_prints_the_plan_then_the_failures(tmp_path):
    proc = harness("batch", "--dry-run", "--backend", "musa", "--ops", "tanh,add", "--runner",
                   "host", "--out", str(tmp_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    failed = [line.split()[1] for line in lines if line.startswith("PREFLIGHT_FAILED")]
    assert failed == ["check=flaggems_dir", "check=python_modules"]
    assert lines.index(next(x for x in lines if x.startswith("[2/2] add"))) < len(lines) - 2
    assert not any(tmp_path.iterdir())


def test_a_dry_run_whose_checks_pass_exits_0(tmp_path):
    proc = harness("ab", "--dry-run", "--backend", "cpu", "--op", "tanh", "--axis", "none",
                   "--out", str(tmp_path))
    assert proc.returncode == 0 and "PREFLIGHT_FAILED" not in proc.stdout, proc.stdout
    assert "pytest: " in proc.stdout and not any(tmp_path.iterdir())
