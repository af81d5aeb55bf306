"""Tests for harness.contract.results: FlagGems console and record-log parsing, results files."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import fields
from pathlib import Path

import pytest

from harness import fsutil
from harness.contract.results import (
    CSV_FIELDS,
    JSONL_ONLY_FIELDS,
    Row,
    merge_timing,
    parse_console,
    parse_record_log,
    parse_run_output,
    read_results,
    write_results,
)
from harness.contract.shape_text import canonical_shape, canonical_shape_text
from harness.errors import NoSpace, UsageError

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
H200 = DATA / "h200"
H200_LOGS = ("tanh_core_kernel.log", "tanh_core_cudagraph.log", "mm_core_kernel_coldcache.log")
DTYPES = ("torch.float16", "torch.float32", "torch.bfloat16")


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def by_key(rows: list[Row]) -> dict[tuple[str, str, str], Row]:
    return {row.key(): row for row in rows}


def a_row(**overrides: object) -> Row:
    values: dict[str, object] = dict(
        op="mm",
        dtype="torch.float16",
        shape="[[64, 64], [64, 64]]",
        status="SUCCESS",
        latency_base_ms=0.011008,
        latency_ms=0.148528,
        speedup=0.074,
    )
    values.update(overrides)
    return Row(**values)  # type: ignore[arg-type]


# ---------------------------------------------------------------- real H200 console output


@pytest.mark.parametrize("name", H200_LOGS)
def test_h200_console_gives_five_rows_per_dtype(name: str) -> None:
    rows = parse_console(read(H200 / name))
    assert len(rows) == 15
    assert [row.dtype for row in rows] == [d for d in DTYPES for _ in range(5)]
    assert {row.status for row in rows} == {"SUCCESS"}
    assert {row.level for row in rows} == {"core"}
    assert all(row.latency_ms is not None and row.latency_ms > 0 for row in rows)


def test_tanh_kernel_float16_64x64_values() -> None:
    rows = by_key(parse_console(read(H200 / "tanh_core_kernel.log")))
    row = rows[("tanh", "torch.float16", "[[64, 64]]")]
    assert (row.latency_base_ms, row.latency_ms, row.speedup) == (0.004864, 0.036992, 0.131)
    # The TFLOPS cell is printed ("0.000"): the column is there, so it must not shift the others.
    assert row.tflops == 0.0 and row.gbps is None
    assert row.mode == "kernel"


def test_cudagraph_mode_comes_from_the_header() -> None:
    rows = parse_console(read(H200 / "tanh_core_cudagraph.log"))
    assert {row.mode for row in rows} == {"cudagraph"}
    row = by_key(rows)[("tanh", "torch.float32", "[[1024, 1024, 1024]]")]
    assert row.latency_ms == 2.115892


def test_mm_bfloat16_4096_keeps_both_repeated_shapes_in_order() -> None:
    # mm core lists [4096, 4096] twice per dtype: deduplicating by key would drop a measurement.
    rows = parse_console(read(H200 / "mm_core_kernel_coldcache.log"))
    key = ("mm", "torch.bfloat16", "[[4096, 4096], [4096, 4096]]")
    assert [row.latency_ms for row in rows if row.key() == key] == [0.250368, 0.225152]
    assert rows[11].tflops == 548.948


def test_rows_replayed_after_the_pytest_summary_are_not_a_second_table() -> None:
    # Regression: a log tail that repeats rows after "1 passed" has no header; attributing those
    # rows to the last table gave 17 rows instead of 15.
    text = read(H200 / "mm_core_kernel_coldcache.log")
    tail = [line for line in text.splitlines() if line.startswith("SUCCESS")][-2:]
    rows = parse_console(text + "\n".join(tail) + "\n")
    assert len(rows) == 15
    assert rows[-1].latency_ms == 0.225152


# ---------------------------------------------------------------- record log


def test_record_log_and_console_of_the_same_run_pair_up() -> None:
    console = parse_console(read(H200 / "tanh_core_kernel.log"))
    record = parse_record_log(read(DATA / "tanh_core_kernel.record.log"))
    assert [row.key() for row in record] == [row.key() for row in console]
    for a, b in zip(record, console, strict=True):
        assert (a.latency_base_ms, a.latency_ms) == (b.latency_base_ms, b.latency_ms)
        assert a.speedup == pytest.approx(b.speedup, abs=5e-4)  # console rounds to 3 places
        assert (a.mode, a.level, a.status) == (b.mode, b.level, b.status)


def test_record_log_skips_everything_that_is_not_a_result() -> None:
    text = read(DATA / "tanh_core_kernel.record.log")
    assert "Benchmark record logger enabled" in text and '"recommended_core_shapes"' in text
    extra = (
        "[INFO] {'op_name': 'tanh', 'recommended_core_shapes': [(64, 64)], 'shape_desc': 'M, N'}\n"
        '[INFO] {"op_name": "tanh", "recommended_core_shapes": [[64, 64]]}\n'
        '[INFO] {"op_name": "tanh", "dtype": "torch.float16", "mode": "kernel", "res\n'
    )
    rows = parse_record_log(text + extra)
    assert len(rows) == 15
    assert rows[1].key() == ("tanh", "torch.float16", "[[64, 64]]")
    assert rows[1].tflops == pytest.approx(0.0001107, rel=1e-3)


def test_record_log_error_msg_makes_a_failed_row() -> None:
    rows = parse_record_log(read(DATA / "variants.record.log"))
    failed = [row for row in rows if row.status == "FAILED"]
    assert len(failed) == 1
    assert failed[0].error == "CUDA error: an illegal memory access was encountered"
    assert failed[0].latency_ms is None and failed[0].latency_base_ms == 0.00512


# ---------------------------------------------------------------- column and detail variants


def test_variant_tables_pair_up_between_console_and_record_log() -> None:
    console = parse_console(read(DATA / "variants.console.log"))
    record = parse_record_log(read(DATA / "variants.record.log"))
    assert len(console) == 8
    assert [row.key() for row in console] == [row.key() for row in record]
    assert [row.status for row in console] == [row.status for row in record]
    for a, b in zip(console, record, strict=True):
        assert (a.latency_base_ms, a.latency_ms) == (b.latency_base_ms, b.latency_ms)


def test_gbps_table_without_tflops_and_na_cells() -> None:
    rows = by_key(parse_console(read(DATA / "variants.console.log")))
    add = rows[("add", "torch.float16", '[[[1024, 1024], [1024, 1024]], {"alpha": 2.5}]')]
    assert (add.speedup, add.tflops, add.gbps_base, add.gbps) == (0.909, None, 614.4, 558.545)
    na = rows[("add", "torch.float16", "[[4096], [4096]]")]
    assert (na.latency_base_ms, na.latency_ms, na.speedup) == (None, 0.003072, None)
    assert (na.gbps_base, na.gbps) == (None, 8.0)


def test_tflops_cell_is_read_row_by_row() -> None:
    # FlagGems drops the TFLOPS cell of a row whose tflops is 0 even when the header has the
    # column: reading by header position would take Torch GBPS for TFLOPS.
    mm = [row for row in parse_console(read(DATA / "variants.console.log")) if row.op == "mm"]
    assert (mm[0].tflops, mm[0].gbps_base, mm[0].gbps) == (99.026, 864.211, 145.058)
    assert (mm[1].tflops, mm[1].gbps_base, mm[1].gbps) == (None, 4096.0, 3276.8)
    assert mm[1].shape == '[[0, 2048], [2048, 2048], "torch.bfloat16", "torch.float16"]'


def test_failed_row_and_missing_detail_in_console() -> None:
    rows = [r for r in parse_console(read(DATA / "variants.console.log")) if r.op == "softmax"]
    assert [row.status for row in rows] == ["SUCCESS", "FAILED", "SUCCESS"]
    assert rows[0].shape == '{"input": [4096, 4096], "dim": -1, "dtype": "torch.float32"}'
    assert (rows[1].latency_ms, rows[1].speedup) == (None, None)
    assert rows[1].shape == '[[1, 32000], 1, "mean", true, null]'
    assert rows[2].shape == "N/A"


def test_ansi_colour_codes_do_not_hide_rows() -> None:
    plain = read(H200 / "tanh_core_kernel.log")
    coloured = "\n".join(
        f"\x1b[1m{line[:7]}\x1b[0m\x1b[32m{line[7:]}\x1b[0m" for line in plain.splitlines()
    )
    assert "\x1b[" in coloured
    assert parse_console(coloured) == parse_console(plain)


def test_marker_line_inside_a_table_does_not_end_it() -> None:
    lines = read(H200 / "tanh_core_kernel.log").splitlines()
    lines.insert(5, "BENCHMARK_DIRECT_NO_CUDAGRAPH op=tanh dtype=torch.float16 reason=x")
    assert len(parse_console("\n".join(lines))) == 15


@pytest.mark.parametrize("separator", [",level=", ", level="])
def test_header_with_or_without_space_before_level(separator: str) -> None:
    text = read(H200 / "tanh_core_kernel.log").replace(",level=", separator)
    rows = parse_console(text)
    assert len(rows) == 15 and rows[0].level == "core"


# ---------------------------------------------------------------- canonical shapes


@pytest.mark.parametrize(
    ("detail", "text"),
    [
        ([[64, 64]], "[torch.Size([64, 64])]"),
        ([[384, 384], [384, 384]], "[torch.Size([384, 384]), torch.Size([384, 384])]"),
        ([[[2, 3]], {"dim": -1}], "([torch.Size([2, 3])], {'dim': -1})"),
        ([[8], 1e-05, "torch.float16", None], "[torch.Size([8]), 1e-05, torch.float16, None]"),
        ([[]], "[torch.Size([])]"),
        (None, "N/A"),
    ],
)
def test_console_and_json_details_have_one_canonical_text(detail: object, text: str) -> None:
    assert canonical_shape_text(f"  {text} ") == canonical_shape(detail)


def test_canonical_shape_format() -> None:
    assert canonical_shape([[64, 64]]) == "[[64, 64]]"
    assert canonical_shape(((64, 64),)) == "[[64, 64]]"  # tuples (torch.Size) read as lists
    assert canonical_shape({"dim": 1}) == '{"dim": 1}'


def test_unknown_repr_is_kept_as_stripped_raw_text() -> None:
    raw = "[<Foo object at 0x7f00>, device(type='cuda')]"
    assert canonical_shape_text(f"  {raw}  ") == raw
    assert canonical_shape_text("[__import__('os')]") == "[__import__('os')]"


# ---------------------------------------------------------------- choosing the source


def test_record_log_wins_even_when_counts_disagree() -> None:
    record = read(DATA / "tanh_core_kernel.record.log").splitlines()[:2]  # one dtype only
    rows, source = parse_run_output("\n".join(record), read(H200 / "tanh_core_kernel.log"))
    assert (source, len(rows)) == ("record_log", 5)


@pytest.mark.parametrize("record", [None, "", "[INFO] Benchmark record logger enabled\n"])
def test_console_is_the_fallback_without_record_results(record: str | None) -> None:
    rows, source = parse_run_output(record, read(H200 / "tanh_core_kernel.log"))
    assert (source, len(rows)) == ("console", 15)


# ---------------------------------------------------------------- rows and files


def test_row_rejects_unknown_status_and_stores_tuples() -> None:
    with pytest.raises(ValueError, match="'PASSED'"):
        a_row(status="PASSED")
    row = a_row(markers=["BENCHMARK_DIRECT_NO_CUDAGRAPH"], samples=[1, 2])
    assert row.markers == ("BENCHMARK_DIRECT_NO_CUDAGRAPH",) and row.samples == (1.0, 2.0)
    assert hash(row) == hash(a_row(markers=("BENCHMARK_DIRECT_NO_CUDAGRAPH",), samples=(1.0, 2.0)))


def test_from_dict_ignores_keys_of_a_newer_writer() -> None:
    data = a_row().to_dict() | {"added_later": 1}
    assert Row.from_dict(data) == a_row()


def test_csv_fields_cover_every_row_field() -> None:
    assert sorted(CSV_FIELDS) == sorted(f.name for f in fields(Row)
                                        if f.name not in JSONL_ONLY_FIELDS)
    assert JSONL_ONLY_FIELDS == ("clocks",)
    assert CSV_FIELDS[:4] == ("op", "dtype", "shape", "status")


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    rows = [
        a_row(timer="direct", markers=("BENCHMARK_DIRECT_NO_CUDAGRAPH",), samples=(0.1, 0.125)),
        a_row(shape="N/A", status="FAILED", latency_ms=None, speedup=None, error='boom, "x"'),
    ]
    csv_path, jsonl_path = write_results(tmp_path, rows)
    assert (csv_path.name, jsonl_path.name) == ("results.csv", "results.jsonl")
    assert read_results(tmp_path) == rows
    with csv_path.open(newline="", encoding="utf-8") as fh:
        table = list(csv.reader(fh))
    assert tuple(table[0]) == CSV_FIELDS
    first = dict(zip(CSV_FIELDS, table[1], strict=True))
    assert first["shape"] == "[[64, 64], [64, 64]]" and first["samples"] == "0.1;0.125"
    assert first["markers"] == "BENCHMARK_DIRECT_NO_CUDAGRAPH" and first["tflops"] == ""
    assert dict(zip(CSV_FIELDS, table[2], strict=True))["error"] == 'boom, "x"'
    assert json.loads(jsonl_path.read_text().splitlines()[0])["samples"] == [0.1, 0.125]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv", "results.jsonl"]


def test_failed_write_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_results(tmp_path, [a_row()])
    before = (tmp_path / "results.csv").read_bytes()
    real_fdopen = os.fdopen

    class DiskFull:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, text: str) -> None:
            self.fh.write(text[: len(text) // 2])
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsutil.os, "fdopen", lambda *a, **k: DiskFull(real_fdopen(*a, **k)))
    with pytest.raises(NoSpace, match="no space left on device writing .*results.csv"):
        write_results(tmp_path, [a_row(), a_row(op="tanh")])
    monkeypatch.undo()
    assert (tmp_path / "results.csv").read_bytes() == before
    assert read_results(tmp_path) == [a_row()]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv", "results.jsonl"]


def test_read_results_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no results.jsonl"):
        read_results(tmp_path)
    (tmp_path / "results.jsonl").write_text(json.dumps(a_row().to_dict()) + '\n\n{"op": 1}\n')
    with pytest.raises(UsageError, match="line 3"):
        read_results(tmp_path)


def _row(shape, latency=1.0):
    return Row(op="mm", dtype="torch.float16", shape=shape, status="SUCCESS",
               latency_base_ms=2.0, latency_ms=latency, speedup=2.0 / latency)


def _record(shape, timer="graph", markers=(), samples=(1.0,), **extra):
    return {"op": "mm", "dtype": "torch.float16", "shape": shape, "timer": timer,
            "markers": list(markers), "samples": list(samples), "samples_base": [2.0], **extra}


def test_merge_timing_pairs_repeated_keys_by_occurrence():
    # mm's core shapes measure [4096, 4096] twice per dtype: each row gets its own record.
    rows = [_row("[[4096, 4096]]", 0.25), _row("[[1024, 1024]]"), _row("[[4096, 4096]]", 0.22)]
    timing = [_record("[[4096, 4096]]", samples=(0.25,)), _record("[[1024, 1024]]"),
              _record("[[4096, 4096]]", "direct", ["BENCHMARK_DIRECT_NO_CUDAGRAPH"], (0.22,))]
    merged = merge_timing(rows, timing, "graph")
    assert [(r.timer, r.markers, r.samples) for r in merged] == [
        ("graph", (), (0.25,)), ("graph", (), (1.0,)),
        ("direct", ("BENCHMARK_DIRECT_NO_CUDAGRAPH",), (0.22,))]


def test_merge_timing_defaults_and_partial_rows():
    partial = _record("[[64, 64]]", markers=["BENCHMARK_CAPTURE_POISONED"], partial=True,
                      status="FAILED", latency_base_ms=None, latency_ms=None, reason="dead")
    merged = merge_timing([_row("[[8, 8]]")], [partial], "direct")
    assert merged[0].timer == "direct" and merged[0].markers == ()
    assert (merged[1].status, merged[1].markers, merged[1].error) == (
        "FAILED", ("BENCHMARK_CAPTURE_POISONED",), "dead")
