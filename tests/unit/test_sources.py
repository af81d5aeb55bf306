"""Tests for harness.report.sources: what `harness summary` reads (results.csv, campaigns, logs)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.contract.results import Row, write_results
from harness.errors import UsageError
from harness.fsutil import atomic_write_json
from harness.report.comparison import compare
from harness.report.sources import AB_JSON, ACCEPTED, load_source, log_caliber
from harness.report.summary import summarize
from tests.abdata import ab_data

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
RECORD = DATA / "tanh_core_kernel.record.log"
KERNEL = DATA / "h200" / "tanh_core_kernel.log"
CALIBER = {"backend": "cpu", "level": "core", "timer": "direct", "shape_mode": "upstream"}
# FlagGems' record-log name for `pytest benchmark/test_tanh.py::test_tanh --level core --mode X
# --record log` (conftest.py: args joined by "_", "=" and "/" as "_", then "_-" as "-").
RECORD_NAME = "result_benchmark_test_tanh::test_tanh--level_core--mode_{}--record_log.log"


def row(shape: str = "[[64, 64]]", latency: float = 1.0, **extra: Any) -> Row:
    return Row(op="tanh", dtype="torch.float32", shape=shape, status="SUCCESS",
               latency_base_ms=0.5, latency_ms=latency, speedup=0.5 / latency, **extra)


def run_dir(path: Path, rows: list[Row]) -> Path:
    path.mkdir(parents=True)
    write_results(path, rows)
    (path / "run_identity.json").write_text(json.dumps(CALIBER))
    return path


def campaign(root: Path, a_ms: tuple[float, ...], b_ms: tuple[float, ...]) -> Path:
    for side, values in (("A", a_ms), ("B", b_ms)):
        for r, ms in enumerate(values):
            run_dir(root / side / f"r{r}", [row(latency=ms), row(shape="[[8]]", latency=ms)])
    return root


def lines(*args: Any, **kwargs: Any) -> list[str]:
    out: list[str] = []
    summarize(*args, write_line=out.append, **kwargs)
    return out


# ---------------------------------------------------------------- results.csv


def test_results_csv_of_a_run_is_read_as_its_run_with_its_identity(tmp_path: Path) -> None:
    run = run_dir(tmp_path / "r", [row(markers=("M1", "M2"), samples=(1.0, 1.5))])
    source = load_source(run / "results.csv")
    assert (source.kind, source.label) == ("run", str(run))
    assert source.identities and source.rows[0].markers == ("M1", "M2")


def test_a_results_csv_without_its_run_is_parsed_as_csv(tmp_path: Path) -> None:
    rows = [row(markers=("M1",), samples=(1.0, 1.5), timer="graph"),
            Row(op="exp", dtype="torch.float16", shape="[[8]]", status="FAILED",
                latency_base_ms=None, latency_ms=None, speedup=None, error="boom, it said")]
    run = run_dir(tmp_path / "r", rows)
    copy = tmp_path / "copied.csv"
    copy.write_bytes((run / "results.csv").read_bytes())
    source = load_source(copy)
    assert source.kind == "results_csv" and source.rows == tuple(rows)
    assert any("caliber not known" in n for n in source.notes)


def test_a_malformed_results_csv_names_its_line(tmp_path: Path) -> None:
    run = run_dir(tmp_path / "r", [row()])
    bad = tmp_path / "bad.csv"
    text = (run / "results.csv").read_text()
    bad.write_text(text + text.splitlines()[1].replace("SUCCESS", "MAYBE") + "\n")
    with pytest.raises(UsageError, match=r"bad.csv' line 3 .*MAYBE"):
        load_source(bad)


# ---------------------------------------------------------------- campaigns


def test_campaign_directory_gives_its_ab_json_with_the_liveness_note(tmp_path: Path) -> None:
    root = campaign(tmp_path / "c", (2.0, 2.02, 1.98), (1.0, 1.01, 0.99))
    sides = {s: [load_source(root / s / f"r{r}") for r in range(3)] for s in "AB"}
    result = compare(sides["A"], sides["B"])
    atomic_write_json(root / AB_JSON, ab_data(
        result, {"axis": "OMP_NUM_THREADS", "a": "1", "b": "2"},
        liveness={"status": "live", "detail": "rows differ beyond the noise floor"}))
    text = "\n".join(lines([str(root)]))
    assert lines([str(root / AB_JSON)]) == text.splitlines()
    assert text.startswith("## A/B: A=OMP_NUM_THREADS=1 B=OMP_NUM_THREADS=2\n")
    assert "- note: rows differ beyond the noise floor" in text
    assert "| tanh | torch.float32 | [[64, 64]] | 2.000 | 1.000 | +100.0 |" in text
    assert "faster" in text


def test_campaign_without_ab_json_is_the_ab_of_its_rounds(tmp_path: Path) -> None:
    root = campaign(tmp_path / "c", (2.0, 2.0), (1.0,))  # cut short: B/r1 never ran
    got = lines([str(root)], fmt="csv")
    expected = lines([], ab=[str(root / "A" / "r0"), str(root / "B" / "r0")], fmt="csv")
    assert got == expected and len(got) == 3
    md = "\n".join(lines([str(root)]))
    assert "no ab.json: compared from rounds 0; rounds 1 finished on one side only" in md


def test_campaign_is_summarized_alone_and_is_not_a_side(tmp_path: Path) -> None:
    root = campaign(tmp_path / "c", (2.0,), (1.0,))
    with pytest.raises(UsageError, match="summarized alone"):
        summarize([str(root), str(KERNEL)])
    with pytest.raises(UsageError, match="is an A/B campaign"):
        summarize([], ab=[str(root), str(KERNEL)])
    atomic_write_json(root / AB_JSON, ab_data(compare(
        [load_source(root / "A" / "r0")], [load_source(root / "B" / "r0")]), {}))
    with pytest.raises(UsageError, match="ab.json' is an A/B campaign"):
        summarize([], ab=[str(root / AB_JSON), str(KERNEL)])


# ---------------------------------------------------------------- anything else


@pytest.mark.parametrize("make", ["empty_dir", "binary", "empty_file", "side_dir"])
def test_anything_else_is_refused_with_the_list_of_accepted_inputs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], make: str) -> None:
    path = tmp_path / "x"
    if make == "empty_dir":
        path.mkdir()
    elif make == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif make == "empty_file":
        path.write_bytes(b"")
    else:  # a campaign's side: a directory of rounds, none of them given
        path = campaign(tmp_path / "c", (2.0,), (1.0,)) / "A"
    assert cli.main(["summary", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and repr(str(path)) in err
    assert err.rstrip().endswith(ACCEPTED)


# ---------------------------------------------------------------- raw logs' caliber


def _named_record_log(directory: Path, mode: str, *, strip_mode: bool) -> Path:
    path = directory / RECORD_NAME.format(mode)
    text = RECORD.read_text(encoding="utf-8")
    if strip_mode:
        text = text.replace('"mode": "kernel", ', "")
    path.write_text(text, encoding="utf-8")
    return path


def test_record_log_timer_comes_from_its_name_when_its_lines_lack_it(tmp_path: Path) -> None:
    kernel = _named_record_log(tmp_path, "kernel", strip_mode=True)
    graph = _named_record_log(tmp_path, "cudagraph", strip_mode=True)
    assert dict(load_source(graph).log_caliber) == {"timer": "cudagraph", "level": "core"}
    with pytest.raises(UsageError, match=r"timer: A='kernel' B='cudagraph'.*--allow-mixed"):
        compare([load_source(kernel)], [load_source(graph)])
    mixed = compare([load_source(kernel)], [load_source(graph)], allow_mixed=True)
    assert len(mixed.rows) == 15


def test_two_record_logs_of_one_timer_pair_and_say_what_was_checked(tmp_path: Path) -> None:
    one = _named_record_log(tmp_path, "kernel", strip_mode=False)
    result = compare([load_source(one)], [load_source(KERNEL)])
    assert any(n.startswith("caliber of the logs: level, timer checked")
               for n in result.notes)


def test_the_log_tables_win_over_the_name_and_unknown_stays_unchecked() -> None:
    rows = [row(mode="kernel", level="core")]
    assert log_caliber(RECORD_NAME.format("cudagraph"), rows) == (
        ("level", "core"), ("timer", "kernel"))
    assert log_caliber("console.log", [row()]) == ()
    result = compare([load_source(KERNEL)], [load_source(KERNEL)])
    assert not any("mixed" in n for n in result.notes)


def test_a_fifo_is_refused_without_reading_it(tmp_path: Path) -> None:
    # Pinned: a FIFO was called "no such run" although it exists; reading it would block.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match=r"pipe' is not a file or a directory; expected a run"):
        load_source(fifo)


def harness_log(path: Path, timer: str, graph_timer: str | None = None) -> Path:
    # A harness run.log: its header, then FlagGems' table, which says mode=kernel whatever the
    # harness timed with (it runs FlagGems so and switches the timer in its plugin).
    header = ["# harness run header", "# op: tanh", "# backend: cuda", "# level: core",
              "# shape_mode: upstream", "# shape_file: None", f"# timer: {timer}",
              *([f"# graph_timer: {graph_timer}"] if graph_timer else []),
              "# mode: auto", "# started_utc: 2026-01-01T00:00:00+00:00"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(header) + "\n" + KERNEL.read_text(encoding="utf-8"))
    return path


def test_a_harness_run_log_is_timed_by_its_header_not_its_mode_kernel_tables(
        tmp_path: Path) -> None:
    # Pinned: two copied run.logs, graph- and direct-timed, both say mode=kernel in their tables
    # and were paired as one caliber.
    graph = harness_log(tmp_path / "g" / "run.log", "graph")
    direct = harness_log(tmp_path / "d" / "run.log", "direct")
    assert dict(load_source(graph).log_caliber) == {
        "backend": "cuda", "level": "core", "shape_mode": "upstream", "timer": "graph",
        "graph_timer": "upstream"}  # a run.log from before GRAPH_TIMER: upstream's timer
    with pytest.raises(UsageError, match=r"timer: A='graph' B='direct'"):
        compare([load_source(graph)], [load_source(direct)])
    same = compare([load_source(graph)], [load_source(graph)])
    assert ("caliber of the logs: backend, level, timer, shape_mode, graph_timer checked (a "
            "FlagGems log's timer is its --mode)") in same.notes
    with pytest.raises(UsageError, match=r"timer: A='graph' B='kernel'"):
        compare([load_source(graph)], [load_source(KERNEL)])


def test_a_run_log_beside_its_results_is_its_run(tmp_path: Path) -> None:
    run = run_dir(tmp_path / "r", [row()])
    harness_log(run / "run.log", "direct")
    source = load_source(run / "run.log")
    assert (source.kind, source.label, len(source.identities)) == ("run", str(run), 1)


def test_runs_of_two_graph_timers_are_two_calibers_and_a_direct_runs_is_moot(tmp_path: Path
                                                                            ) -> None:
    # Regression: GRAPH_TIMER's default moved from upstream to adaptive, and a run made before
    # (its header or identity without the field) paired with one made after as one caliber.
    before = harness_log(tmp_path / "b" / "run.log", "graph")
    after = harness_log(tmp_path / "a" / "run.log", "graph", "adaptive")
    with pytest.raises(UsageError, match=r"graph_timer: A='upstream' B='adaptive'"):
        compare([load_source(before)], [load_source(after)])
    direct = [harness_log(tmp_path / d / "run.log", "direct", g)
              for d, g in (("d1", None), ("d2", "adaptive"))]
    assert dict(load_source(direct[0]).log_caliber)["graph_timer"] == "-"
    compare([load_source(direct[0])], [load_source(direct[1])])  # no error: moot for both
