"""harness.report.summary: inputs, pairing by occurrence, caliber checks, renderers, CLI."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.contract.boundary import DIRECT_MARKER, REPLAY_FALLBACK_MARKER
from harness.contract.records import Records, Winner, write_records
from harness.contract.results import Row, write_results
from harness.errors import UsageError
from harness.report.comparison import SELF_TUNED, compare
from harness.report.render import (
    AB_CSV_FIELDS,
    REGIME,
    render_ab_csv,
    render_ab_json,
    render_ab_md,
    render_runs_csv,
    render_runs_json,
    render_runs_md,
    run_groups,
)
from harness.report.sources import Source, load_source
from harness.report.summary import summarize, unfinished
from harness.stats import Verdict

DATA = Path(__file__).resolve().parent.parent / "data" / "results"
KERNEL = DATA / "h200" / "tanh_core_kernel.log"
GRAPH = DATA / "h200" / "tanh_core_cudagraph.log"
MM = DATA / "h200" / "mm_core_kernel_coldcache.log"
RECORD = DATA / "tanh_core_kernel.record.log"
MM_4096 = "[[4096, 4096], [4096, 4096]]"
CALIBER = {"backend": "cuda", "level": "core", "timer": "graph", "shape_mode": "upstream",
           "autotune_mode": "default", "replay_from": None}


def lines_of(render: Any, *args: Any) -> list[str]:
    out: list[str] = []
    render(*args, out.append)
    return out


def row(op: str = "tanh", shape: str = "[[64, 64]]", latency: float | None = 1.0,
        status: str = "SUCCESS", **extra: Any) -> Row:
    return Row(op=op, dtype="torch.float16", shape=shape, status=status, latency_base_ms=0.5,
               latency_ms=latency, speedup=None if latency is None else 0.5 / latency, **extra)


def run_dir(path: Path, rows: list[Row], **identity: Any) -> Path:
    path.mkdir(parents=True)
    write_results(path, rows)
    (path / "run_identity.json").write_text(json.dumps({**CALIBER, **identity}))
    return path


def paired(report: Any) -> dict[tuple[str, str, str, int], Any]:
    return {(r.op, r.dtype, r.shape, r.occurrence): r for r in report.rows}


# ---------------------------------------------------------------- A/B of real H200 logs


def test_kernel_log_against_cudagraph_log_is_refused_without_allow_mixed() -> None:
    # The console tables say "mode=kernel" and "mode=cudagraph": FlagGems' timer, so the
    # 50x launch-overhead gap below is a caliber difference, not an effect.
    with pytest.raises(UsageError, match=r"timer: A='kernel' B='cudagraph'.*--allow-mixed") as info:
        compare([load_source(KERNEL)], [load_source(GRAPH)])
    assert "level" not in str(info.value)


def test_tanh_kernel_against_cudagraph_pairs_every_row() -> None:
    report = compare([load_source(KERNEL)], [load_source(GRAPH)], allow_mixed=True)
    assert len(report.rows) == 15 and report.unpaired == ()
    rows = paired(report)
    # Gems latencies by hand from the two logs: float16 64x64 direct 0.036992 ms, graph 0.001395.
    f16 = rows[("tanh", "torch.float16", "[[64, 64]]", 1)].stats
    assert f16.speedup_pct == pytest.approx((0.036992 / 0.001395 - 1) * 100)  # +2551.8%
    assert (f16.a_ms, f16.b_ms) == (0.036992, 0.001395)
    # bfloat16 [64, 512, 512]: 0.154048 against 0.023234 -> +563.0%.
    bf16 = rows[("tanh", "torch.bfloat16", "[[64, 512, 512]]", 1)].stats
    assert bf16.speedup_pct == pytest.approx((0.154048 / 0.023234 - 1) * 100)
    # One round per side: no interval, so no verdict but INCONCLUSIVE however large the effect.
    assert {r.stats.verdict for r in report.rows} == {Verdict.INCONCLUSIVE}
    assert "mixed calibers (--allow-mixed): timer: A='kernel' B='cudagraph'" in report.notes


def test_md_of_the_tanh_ab_shows_the_hand_checked_row() -> None:
    out: list[str] = []
    summarize([], ab=[str(KERNEL), str(GRAPH)], allow_mixed=True, write_line=out.append)
    text = "\n".join(out)
    # ab.md's row table: ms to four significant digits (0.036992 reads 0.03699)
    assert "| tanh | torch.float16 | [[64, 64]] | 0.03699 | 0.001395 | +2551.8 |" in text
    assert "geometric mean speedup:" in text
    # One log a side is one round: the spread over rows cannot see what moved the whole run.
    assert "over 15 paired rows (0 flagged), interval over rows and rounds -\n" in text
    assert "one round per side" in text
    assert "t interval on per-round log ratios, 95%, BH q=0.05" in text


def test_record_log_and_console_of_one_run_pair_at_zero() -> None:
    record, console = load_source(RECORD), load_source(KERNEL)
    assert (record.kind, console.kind) == ("record_log", "console")
    report = compare([record], [console])
    assert len(report.rows) == 15 and report.unpaired == ()
    assert all(r.stats.speedup_pct == 0.0 for r in report.rows)


def test_mm_duplicated_key_pairs_by_occurrence(tmp_path: Path) -> None:
    # mm core measures [4096, 4096] x [4096, 4096] twice per dtype. Halve the second float16
    # measurement (0.234240 ms, the only cell with that value) on B: occurrence 1 stays at 0%
    # (0.234944 / 0.234944), occurrence 2 becomes 0.234240 / 0.117120 - 1 = +100%.
    text = MM.read_text(encoding="utf-8")
    assert text.count("0.234240") == 1
    changed = tmp_path / "mm_b.log"
    changed.write_text(text.replace("0.234240", "0.117120"), encoding="utf-8")
    report = compare([load_source(MM)], [load_source(changed)])
    assert len(report.rows) == 15 and report.unpaired == ()
    rows = paired(report)
    assert rows[("mm", "torch.float16", MM_4096, 1)].stats.speedup_pct == 0.0
    assert rows[("mm", "torch.float16", MM_4096, 2)].stats.speedup_pct == pytest.approx(
        100.0)
    assert rows[("mm", "torch.bfloat16", MM_4096, 2)].stats.a_ms == 0.225152


# ---------------------------------------------------------------- caliber and tuning


def test_caliber_difference_is_refused_naming_it(tmp_path: Path) -> None:
    a = run_dir(tmp_path / "a", [row()])
    b = run_dir(tmp_path / "b", [row(latency=0.5)], timer="direct")
    with pytest.raises(UsageError, match=r"timer: A='graph' B='direct'.*--allow-mixed") as info:
        compare([load_source(a)], [load_source(b)])
    assert "level" not in str(info.value)
    report = compare([load_source(a)], [load_source(b)], allow_mixed=True)
    assert any("mixed calibers" in n and "timer" in n for n in report.notes)
    assert report.rows[0].stats.speedup_pct == pytest.approx(100.0)


def test_two_self_tuned_sides_are_flagged(tmp_path: Path) -> None:
    a = run_dir(tmp_path / "a", [row()])
    b = run_dir(tmp_path / "b", [row()])
    assert SELF_TUNED in compare([load_source(a)], [load_source(b)]).notes
    out: list[str] = []
    render_ab_md(compare([load_source(a)], [load_source(b)]), out.append)
    assert f"- FLAG: {SELF_TUNED}" in out


def _winners(run: Path, blocks: dict[int, int]) -> None:
    """autotune_records/winners.jsonl of `run`: pixel_shuffle's BLOCK_SIZE for each n_elements."""
    records = Records(winners=[
        Winner("triton", "flag_gems.ops.pixel_shuffle:pixel_shuffle_kernel",
               (n, "torch.float16"), {"BLOCK_SIZE": block, "num_warps": 4})
        for n, block in blocks.items()])
    write_records(run, records)


def test_self_tuned_sides_name_the_keys_whose_winners_differ(tmp_path: Path) -> None:
    # Each fresh process that tuned pixel_shuffle on an H100 picked its own BLOCK_SIZE where two
    # were close, and read 3.7 or 4.1 us by that choice: where the sides tune for themselves, a
    # row of such a key differs by its configs, and the report says which keys those are.
    a = run_dir(tmp_path / "a", [row()])
    b = run_dir(tmp_path / "b", [row()])
    _winners(a, {24: 256, 1048576: 2048, 1179648: 512, 16384: 256, 262144: 1024, 9: 256})
    _winners(b, {24: 256, 1048576: 512, 1179648: 1024, 16384: 512, 262144: 256, 7: 128})
    notes = compare([load_source(a)], [load_source(b)]).notes
    (note,) = [n for n in notes if n.startswith("tuning settled differently")]
    assert note.startswith("tuning settled differently on 4 of the 5 keys both sides tuned")
    # the first three named (sorted by key text), the fourth counted
    assert ("flag_gems.ops.pixel_shuffle:pixel_shuffle_kernel [1048576, \"torch.float16\"]: "
            "A BLOCK_SIZE=2048 num_warps=4, B BLOCK_SIZE=512 num_warps=4") in note
    assert note.endswith("; and 1 more") and "[24," not in note
    out: list[str] = []
    render_ab_md(compare([load_source(a)], [load_source(b)]), out.append)
    assert any(line.startswith("- note: tuning settled differently") for line in out)
    # one config on every shared key: nothing to name; replayed winners: no comparison made
    _winners(b, {24: 256, 1048576: 2048, 1179648: 512, 16384: 256, 262144: 1024})
    assert not [n for n in compare([load_source(a)], [load_source(b)]).notes
                if n.startswith("tuning settled")]
    # records that cannot be read (nested past the parser's depth, binary) name nothing
    (b / "autotune_records" / "winners.jsonl").write_text("[" * 100_000 + "\n")
    assert not [n for n in compare([load_source(a)], [load_source(b)]).notes
                if n.startswith("tuning settled")]
    (b / "autotune_records" / "winners.jsonl").write_bytes(b"\x00\xff\xfe")
    assert SELF_TUNED in compare([load_source(a)], [load_source(b)]).notes
    replaying = run_dir(tmp_path / "c", [row()], replay_from=str(a))
    _winners(replaying, {24: 128})
    assert compare([load_source(a)], [load_source(replaying)]).notes == ()


@pytest.mark.parametrize("case", ["b_replays_a", "b_replays_a_records", "both_replay_x",
                                  "flagtune"])
def test_same_config_sides_are_not_flagged(tmp_path: Path, case: str) -> None:
    a_dir = tmp_path / "a"
    a_id: dict[str, Any] = {}
    b_id: dict[str, Any] = {
        "b_replays_a": {"replay_from": str(a_dir)},
        "b_replays_a_records": {"replay_from": str(a_dir / "autotune_records")},
        "both_replay_x": {"replay_from": str(tmp_path / "x")},
        "flagtune": {"autotune_mode": "flagtune"},
    }[case]
    if case in ("both_replay_x", "flagtune"):
        a_id = dict(b_id)
    a = run_dir(a_dir, [row()], **a_id)
    b = run_dir(tmp_path / "b", [row()], **b_id)
    assert SELF_TUNED not in compare([load_source(a)], [load_source(b)]).notes


def test_b_replaying_an_unrelated_run_is_still_flagged(tmp_path: Path) -> None:
    a = run_dir(tmp_path / "a", [row()])
    b = run_dir(tmp_path / "b", [row()], replay_from=str(tmp_path / "elsewhere"))
    assert SELF_TUNED in compare([load_source(a)], [load_source(b)]).notes


# ---------------------------------------------------------------- unpaired and flagged rows


def test_unpaired_rows_are_listed_with_their_reason(tmp_path: Path) -> None:
    a = run_dir(tmp_path / "a", [row(), row(shape="[[8]]"), row(shape="[[9]]")])
    b = run_dir(tmp_path / "b", [row(), row(shape="[[9]]", latency=None, status="FAILED"),
                                 row(shape="[[7]]")])
    report = compare([load_source(a)], [load_source(b)])
    assert len(report.rows) == 1
    assert [(u.shape, u.reason) for u in report.unpaired] == [
        ("[[8]]", "only in A"), ("[[9]]", "FAILED in B"), ("[[7]]", "only in B")]
    text = "\n".join(lines_of(render_ab_md, report))
    assert "## Unpaired rows (3)" in text
    assert "| tanh | torch.float16 | [[9]] | FAILED in B |" in text


def test_direct_timer_rows_are_flagged_and_annotated(tmp_path: Path) -> None:
    a = run_dir(tmp_path / "a", [row(latency=2.0), row(shape="[[8]]", latency=2.0)])
    b = run_dir(tmp_path / "b", [row(latency=1.0, markers=(DIRECT_MARKER,)),
                                 row(shape="[[8]]", latency=1.0)])
    report = compare([load_source(a)], [load_source(b)])
    flagged = paired(report)[("tanh", "torch.float16", "[[64, 64]]", 1)]
    assert flagged.flags == (f"B:{DIRECT_MARKER}",)
    assert flagged.stats.verdict is Verdict.FLAGGED
    assert report.direct_rows == 1
    text = "\n".join(lines_of(render_ab_md, report))
    assert "+100.0..+100.0 *" in text and "| flagged |" in text
    assert REGIME in text and "1 of them" in text


def test_replay_fallback_rows_are_flagged_without_the_direct_annotation(tmp_path: Path) -> None:
    a = run_dir(tmp_path / "a", [row(markers=(REPLAY_FALLBACK_MARKER,))])
    b = run_dir(tmp_path / "b", [row()], replay_from=str(tmp_path / "a"))
    report = compare([load_source(a)], [load_source(b)])
    assert report.rows[0].stats.verdict is Verdict.FLAGGED
    assert report.direct_rows == 0


def test_rounds_give_an_interval_and_a_verdict(tmp_path: Path) -> None:
    # Three rounds per side: A 2.00/2.03/1.97 ms, B 1.00/1.01/0.99 ms: ratios 2, 2.0099, 1.9899,
    # a geometric mean of 2 (+100%) and a t interval about +-1.2% wide around it.
    sides = {name: [run_dir(tmp_path / f"{name}{i}", [row(latency=ms), row(op="exp", latency=ms)])
                    for i, ms in enumerate(values)]
             for name, values in (("a", (2.0, 2.03, 1.97)), ("b", (1.0, 1.01, 0.99)))}
    report = compare([load_source(p) for p in sides["a"]], [load_source(p) for p in sides["b"]])
    stats = report.rows[0].stats
    assert stats.rounds == 3 and stats.speedup_pct == pytest.approx(100.0, abs=0.01)
    assert 97.0 < stats.ci_low_pct < 100.0 < stats.ci_high_pct < 103.0
    assert stats.verdict is Verdict.FASTER
    assert [op for op, _ in report.op_geomeans] == ["tanh", "exp"]
    text = "\n".join(lines_of(render_ab_md, report))
    assert "| **faster** |" in text
    # two operators: a table of their geometric means
    assert "| operator | rows | geometric mean speedup % | interval % |" in text


# ---------------------------------------------------------------- one run


def test_one_run_table_of_the_tanh_log() -> None:
    groups = run_groups(load_source(KERNEL).rows)
    assert [(g.op, g.dtype, g.rows, g.failed, g.fallback) for g in groups] == [
        ("tanh", "torch.float16", 5, 0, 0), ("tanh", "torch.float32", 5, 0, 0),
        ("tanh", "torch.bfloat16", 5, 0, 0)]
    # float16's five "Gems Speedup" cells of the log.
    assert groups[0].geomean_speedup == pytest.approx(
        (0.824 * 0.131 * 0.193 * 0.406 * 0.868) ** (1 / 5))
    text = "\n".join(lines_of(render_runs_md, [load_source(KERNEL)]))
    assert "| tanh | torch.float16 | 5 | 0 | 0 | 0.374 |" in text


def test_one_run_counts_failed_and_fallback_rows(tmp_path: Path) -> None:
    rows = [row(latency=1.0), row(shape="[[8]]", latency=0.25, markers=(DIRECT_MARKER,)),
            row(shape="[[9]]", latency=None, status="FAILED"), row(op="exp")]
    source = load_source(run_dir(tmp_path / "r", rows))
    tanh, exp = run_groups(source.rows)
    assert (tanh.rows, tanh.failed, tanh.fallback) == (3, 1, 1)
    # Speedups 0.5 / 1.0 and 0.5 / 0.25; the FAILED row does not count: sqrt(0.5 * 2) = 1.
    assert tanh.geomean_speedup == pytest.approx(1.0)
    assert (exp.op, exp.rows, exp.geomean_speedup) == ("exp", 1, pytest.approx(0.5))


def test_batch_directory_reads_every_listed_run(tmp_path: Path) -> None:
    one = run_dir(tmp_path / "runs" / "tanh" / "t1", [row()])
    two = run_dir(tmp_path / "runs" / "exp" / "t1", [row(op="exp")])
    batch = tmp_path / "batch"
    batch.mkdir()
    (batch / "ops_status.csv").write_text(
        "op,node,status,rc,rows,backend,device,timer,wall_s,run\n"
        f"tanh,n,ok,0,1,cuda,H200,graph,1.0,{one}\n"
        f"exp,n,ok,0,1,cuda,H200,graph,1.0,{two}\n"
        "mm,n,preflight_failed,3,0,cuda,H200,graph,0.1,\n")
    source = load_source(batch)
    assert source.kind == "batch"
    assert [r.op for r in source.rows] == ["tanh", "exp"]
    assert len(source.identities) == 2
    assert any("'mm'" in note for note in source.notes)


@pytest.mark.parametrize("make", ["missing", "empty_dir", "no_results_log"])
def test_bad_inputs_are_usage_errors(tmp_path: Path, make: str) -> None:
    path = tmp_path / "x"
    if make == "empty_dir":
        path.mkdir()
    elif make == "no_results_log":
        path.write_text("collected 0 items\n\n1 passed\n")
    with pytest.raises(UsageError, match=repr(str(path))):
        load_source(path)


# ---------------------------------------------------------------- renderers


def tanh_report() -> Any:
    return compare([load_source(KERNEL)], [load_source(GRAPH)], allow_mixed=True)


def test_csv_renderer_gives_one_parseable_line_per_row(tmp_path: Path) -> None:
    a = run_dir(tmp_path / "a", [row(latency=2.0), row(shape="[[8]]")])
    b = run_dir(tmp_path / "b", [row(latency=1.0)])
    records = list(csv.DictReader(lines_of(render_ab_csv, compare([load_source(a)],
                                                                  [load_source(b)]))))
    assert tuple(records[0]) == AB_CSV_FIELDS
    assert float(records[0]["speedup_pct"]) == pytest.approx(100.0)
    assert records[0]["verdict"] == "inconclusive" and records[0]["ci_low_pct"] == ""
    assert (records[1]["shape"], records[1]["verdict"], records[1]["unpaired"]) == (
        "[[8]]", "unpaired", "only in A")


def test_json_renderer_round_trips_the_numbers() -> None:
    document = json.loads("\n".join(lines_of(render_ab_json, tanh_report())))
    assert document["speedup"] == "(A_ms / B_ms - 1) * 100"
    assert len(document["rows"]) == 15 and document["unpaired"] == []
    first = document["rows"][1]
    assert (first["shape"], first["stats"]["verdict"]) == ("[[64, 64]]", "inconclusive")
    assert document["method"] == {"name": "t interval on per-round log ratios",
                                  "confidence": 0.95, "fdr_q": 0.05}
    assert first["stats"]["speedup_pct"] == pytest.approx((0.036992 / 0.001395 - 1) * 100)
    assert document["self_tuned"] is False


def test_run_renderers_csv_and_json() -> None:
    source = load_source(KERNEL)
    records = list(csv.DictReader(lines_of(render_runs_csv, [source])))
    assert [r["dtype"] for r in records] == ["torch.float16", "torch.float32", "torch.bfloat16"]
    assert float(records[1]["geomean_speedup"]) == pytest.approx(
        (0.957 * 0.114 * 0.584 * 0.581 * 0.956) ** (1 / 5))  # float32's speedup cells
    document = json.loads("\n".join(lines_of(render_runs_json, [source])))
    assert document[0]["kind"] == "console" and document[0]["caliber"] is None
    assert document[0]["groups"][2]["rows"] == 5


def test_summarize_refuses_bad_arguments() -> None:
    with pytest.raises(UsageError, match="--format"):
        summarize([str(KERNEL)], fmt="html")
    with pytest.raises(UsageError, match="not both"):
        summarize([str(KERNEL)], ab=[str(KERNEL), str(GRAPH)])
    with pytest.raises(UsageError, match="not both and not neither"):
        summarize([])
    with pytest.raises(UsageError, match="noise-floor"):
        summarize([str(KERNEL)], noise_floor_pct=-1.0)
    # a floor that cannot mean "the same" (100% or more held every slowdown) is refused too
    with pytest.raises(UsageError, match=r"^--noise-floor=30\.0 is not accepted; expected a "
                       "percentage from 0 to 25"):
        summarize([], ab=[str(KERNEL), str(GRAPH)], noise_floor_pct=30.0)


def test_source_is_a_plain_record() -> None:
    source = Source("x", "console", (row(),))
    assert source.identities == () and source.notes == ()


# ---------------------------------------------------------------- CLI


def test_cli_exit_codes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli.main(["summary", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no such run, batch, campaign or log") and "a results.csv" in err
    assert cli.main(["summary"]) == 2
    assert cli.main(["summary", "--ab", str(KERNEL), str(GRAPH)]) == 2
    assert "timer: A='kernel' B='cudagraph'" in capsys.readouterr().err
    assert cli.main(["summary", "--ab", str(KERNEL), str(GRAPH), "--allow-mixed",
                     "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 15
    with pytest.raises(SystemExit) as info:
        cli.main(["summary", str(KERNEL), "--format", "html"])
    assert info.value.code == 2


def test_cli_caliber_refusal_and_allow_mixed(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    a = run_dir(tmp_path / "a", [row()])
    b = run_dir(tmp_path / "b", [row()], level="comprehensive")
    assert cli.main(["summary", "--ab", str(a), str(b)]) == 2
    assert "level: A='core' B='comprehensive'" in capsys.readouterr().err
    assert cli.main(["summary", "--ab", str(a), str(b), "--allow-mixed", "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith(",".join(AB_CSV_FIELDS))


def test_a_campaign_without_ab_json_is_running_or_stopped_before_its_report(tmp_path):
    # Regression: a campaign directory without ab.json (its driver running, or killed) was
    # "none of the inputs of harness summary".
    from harness.fsutil import exclusive_lock

    (tmp_path / "campaign.json").write_text(json.dumps({"units": [
        {"status": "ok"}, {"status": "running"}, {"status": "not_run"}, {"status": "x\ny"}]}))
    with exclusive_lock(tmp_path / ".driver.lock", RuntimeError):
        with pytest.raises(UsageError) as info:
            summarize([str(tmp_path)])
    assert str(info.value) == (f"campaign {str(tmp_path)!r} is still running (1 not_run, 1 ok, "
                               "1 running): its ab.json is written when it ends; summarize it "
                               "then")
    with pytest.raises(UsageError) as info:  # no driver holds it now: a kill -9, say
        summarize([str(tmp_path)])
    assert str(info.value) == (f"campaign {str(tmp_path)!r} stopped before its report: no "
                               "ab.json (1 not_run, 1 ok, 1 running); harness ab --resume "
                               f"{tmp_path} completes it")
    assert (tmp_path / ".driver.lock").read_bytes() == b""  # only looked at
    # An earlier stop's ab.json, while a resume's driver runs: `harness report --fail-on`
    # gated it, exit 0, and rewrote ab.md, junit.xml and ci-summary.md under the live driver.
    (tmp_path / "ab.json").write_text("{}")
    with exclusive_lock(tmp_path / ".driver.lock", RuntimeError):
        with pytest.raises(UsageError, match="is still running .*: its ab.json is written"):
            summarize([str(tmp_path)])
        assert unfinished(tmp_path) is not None
    assert unfinished(tmp_path) is None  # ended: its ab.json is the campaign's
