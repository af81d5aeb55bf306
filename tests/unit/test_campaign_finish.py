"""A campaign's liveness verdict over its operators and its sides' shared caches."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.axes import Axis, liveness
from harness.campaign import compare, evidence, plan, result
from harness.report import comparison
from harness.settings import spec


def empty_report():
    return comparison.AbReport(a_label="A", b_label="B", rows=(), unpaired=(),
                            geomean_speedup_pct=None, noise_floor_pct=1.0,
                            direct_rows=0, notes=())


def doc(side_a=(), side_b=()):
    campaign = plan.new_campaign(directory=Path("c"), axis=Axis("X", "SOME_SWITCH_NOBODY_READS"),
                                 caliber={}, argv=[], ops={}, rounds=1, walls={},
                                 walls_from=None)
    campaign.python = sys.executable
    campaign.side_artifacts = {"A": list(side_a), "B": list(side_b)}
    return campaign


def ids(a, b):
    return {"A": [{"compiled_artifacts": list(a)}], "B": [{"compiled_artifacts": list(b)}]}


def test_one_operator_whose_side_b_compiled_new_code_makes_the_axis_live():
    # across the suite both sides compiled {x, y}: only per operator does B differ from A
    identities = {"mm": ids(["x"], ["y"]), "add": ids(["y"], ["x"])}
    live, _, _ = evidence.decide_liveness(empty_report(), identities, doc())
    assert live["status"] == "live" and "operators: add, mm" in live["detail"]


def test_equal_code_everywhere_and_a_compiler_that_never_names_the_switch_is_not_live():
    identities = {"mm": ids(["x"], ["x"]), "add": ids([], [])}
    live, _, _ = evidence.decide_liveness(empty_report(), identities, doc(["x", "z"], ["x"]))
    assert live["status"] == "not_live" and live["detail"].startswith("AXIS_NOT_LIVE axis=X")


def test_a_side_cache_that_compiled_what_the_other_never_did_is_live_when_runs_cannot_tell():
    # runs of a side share one cache, so a run may find its kernels already compiled
    identities = {"mm": ids([], []), "add": ids([], [])}
    live, _, _ = evidence.decide_liveness(empty_report(), identities, doc(["x"], ["w"]))
    assert live["status"] == "live"


def test_nothing_compiled_anywhere_leaves_liveness_unchecked_with_a_note():
    live, notes, _ = evidence.decide_liveness(empty_report(), {"mm": ids([], [])}, doc())
    assert live is None and notes == ["liveness not checked: this backend compiled no kernels"]


def test_false_discovery_control_spans_every_operator_of_the_campaign_not_each_alone():
    # Alone, mm's row (p 0.04) is faster; one family with add's row (p 0.79) adjusts it to
    # 0.08, which no longer survives q=0.05. Per-operator control would let a suite of many
    # operators report a false win somewhere almost surely.
    from harness import stats

    mm = stats.row_stats([1.0, 1.0, 1.0], [0.9, 0.8, 0.85], noise_floor_pct=1.0)
    add = stats.row_stats([1.0, 1.0, 1.0], [1.2, 0.9, 1.0], noise_floor_pct=1.0)
    assert mm.verdict is stats.Verdict.FASTER and mm.p_value < 0.05
    rows = [comparison.AbRow("mm", "f32", "[8]", 1, mm, ()),
            comparison.AbRow("add", "f32", "[8]", 1, add, ())]
    merged = compare.campaign_wide(rows, [], [], 1.0, [])
    assert [r.stats.verdict for r in merged.rows] == [stats.Verdict.INCONCLUSIVE] * 2
    assert merged.rows[0].stats.p_adjusted == pytest.approx(2 * mm.p_value)
    assert merged.method.fdr_q == stats.FDR_Q and merged.geomean_ci_low_pct is not None


def test_an_operator_whose_rounds_paired_no_row_gives_its_units_reason(tmp_path):
    # Regression: a benchmark that called os._exit(0) read failed in ab.json and ab.md with no
    # reason; only campaign.json said "0 rows: ...".
    campaign = plan.new_campaign(directory=tmp_path, axis=Axis("none", None), caliber={},
                                 argv=[], ops={"quits": {"node": "n"}}, rounds=1, walls={},
                                 walls_from=None)
    unit = campaign.unit("quits/r0")
    unit.status, unit.reason = "failed", "quits/r0: side A failed: 0 rows: os._exit"
    for side in plan.SIDES:
        (tmp_path / "quits" / side / "r0").mkdir(parents=True)
        (tmp_path / "quits" / side / "r0" / "results.jsonl").write_text("")
    _, _, failures = compare.compare_ops(tmp_path, campaign, 1.0)
    assert failures == {"quits": "no paired row (quits/r0: side A failed: 0 rows: os._exit)"}


def test_units_failed_counts_every_unit_that_ended_badly(tmp_path):
    # Regression: an operator whose unit crashed (SIGSEGV), errored or timed out read "units
    # failed 0" in ab.json and ab.md; only a unit that failed counted.
    campaign = plan.new_campaign(directory=tmp_path, axis=Axis("none", None), caliber={},
                                 argv=[], ops={op: {"node": "n"} for op in ("segv", "hang")},
                                 rounds=2, walls={}, walls_from=None)
    campaign.python = sys.executable
    for unit_id, status in (("segv/r0", "crashed"), ("segv/r1", "error"),
                            ("hang/r0", "timeout"), ("hang/r1", "interrupted")):
        campaign.unit(unit_id).status = status
    settings = spec.resolve({"backend": "cpu"}, {}, which=lambda _: None)
    operators = result.build_document(tmp_path, campaign, settings).operators
    assert (operators["segv"].units_failed, operators["hang"].units_failed) == (2, 1)


def stacks_campaign(tmp_path, name):
    campaign = plan.new_campaign(directory=tmp_path, axis=Axis(name, None, "a" * 40, "b" * 40),
                                 caliber={}, argv=[], ops={"mm": {"node": "n"},
                                                           "add": {"node": "n"}},
                                 rounds=1, walls={}, walls_from=None)
    campaign.python = sys.executable
    return campaign


@pytest.mark.parametrize("name", ["python", "flaggems"])
def test_two_stacks_are_no_a_a_and_equal_code_leaves_their_liveness_unknown(tmp_path, name):
    # Regression: a two-stack axis has no variable, and was judged as an A/A (a noise floor)
    identities = {"mm": ids(["x"], ["x"]), "add": ids(["y"], ["y"])}
    live, notes, extra = evidence.decide_liveness(empty_report(), identities,
                                                   stacks_campaign(tmp_path, name))
    assert live["status"] == "unknown" and "same kernels for every operator" in live["detail"]
    assert notes == [] and extra == {}
    live, _, _ = evidence.decide_liveness(empty_report(), {"mm": ids(["x"], ["z"])},
                                           stacks_campaign(tmp_path, name))
    assert live["status"] == "live"


def test_with_two_flaggems_commits_an_operator_compiling_only_as_side_a_did_is_unchanged(
        tmp_path):
    from harness.report import abjson

    campaign = stacks_campaign(tmp_path, "flaggems")
    identities = {"mm": ids(["k1", "k2"], ["k1"]), "add": ids(["k1"], ["k3"])}
    document = abjson.document_of(empty_report(), {})
    found = result._operators(tmp_path, campaign, document, identities, {})
    assert (found["mm"].artifacts, found["add"].artifacts) == ("unchanged", "changed")
    switch = stacks_campaign(tmp_path, "none")
    found = result._operators(tmp_path, switch, document, identities, {})
    assert (found["mm"].artifacts, found["add"].artifacts) == ("equal", "differ")


def test_an_aa_whose_floor_noise_from_would_refuse_says_so_where_it_says_what_it_measured():
    from dataclasses import replace

    from harness import stats
    from harness.report.abresult import AbRow

    def report(swing):
        rows = tuple(AbRow("add", "f32", f"s{i}", 1, stats.row_stats(
            [1.0, 1.0], [1.0 / (1 + swing / 100), 1.0 * (1 + swing / 100)],
            noise_floor_pct=1.0), ()) for i in range(10))
        return replace(empty_report(), rows=rows)

    quiet = liveness.aa_note([r.stats for r in report(3.0).rows], 3.0)
    assert quiet.startswith("A/A campaign: measured noise floor 3.00% over every row; by A "
                            "latency 3.0% at 1 ms (pass this campaign as NOISE_FROM")
    noisy = liveness.aa_note([r.stats for r in report(40.0).rows], 40.0)
    assert noisy.endswith("by A latency 40.0% at 1 ms (NOISE_FROM refuses it: a floor above "
                          "25% cannot mean the same; run it with more rounds or on a quieter "
                          "device)")


def test_how_pytest_ran_counts_each_sides_workers_started_and_retired():
    def worker(session: int, retired: str | None = None) -> dict:
        return {"launch": [{"kind": "worker", "pid": 1, "session": session,
                            "retired": retired}]}

    identities = {
        "add": {"A": [worker(1), worker(1)], "B": [{"launch": [{"kind": "process"}]}] * 2},
        "mm": {"A": [worker(2, "128 MiB of device memory still allocated"), worker(2)],
               "B": [{"launch": [{"kind": "process"}]}, worker(1)]},
    }
    assert result.launch_note(identities) == (
        "how pytest ran: side A: 4 in a worker (2 started, 1 retired); "
        "side B: 3 in a fresh process, 1 in a worker (1 started)")


def test_rows_are_the_campaign_operators_whatever_flaggems_record_calls_them(tmp_path):
    # Regression: FlagGems records scatter_reduce_two_inplace_sum's rows as scatter_reduce_, so
    # an H100 A/A read that operator "failed" with 0 rows beside its five measured rows, and
    # its geometric mean went under the record's name.
    import json

    op = "scatter_reduce_two_inplace_sum"
    campaign = plan.new_campaign(directory=tmp_path, axis=Axis("none", None), caliber={},
                                 argv=[], ops={op: {"node": "n"}}, rounds=2, walls={},
                                 walls_from=None)
    campaign.python = sys.executable
    for r, (a_ms, b_ms) in enumerate(((1.00, 1.01), (1.02, 1.00))):
        campaign.unit(f"{op}/r{r}").status = "ok"
        for side, ms in zip(plan.SIDES, (a_ms, b_ms), strict=True):
            run = tmp_path / op / side / f"r{r}"
            run.mkdir(parents=True)
            rows = [{"op": "scatter_reduce_", "dtype": "torch.float16", "shape": f"[[{n}]]",
                     "status": "SUCCESS", "latency_ms": ms * n, "latency_base_ms": None,
                     "speedup": None, "mode": "kernel",
                     "level": "core"} for n in (64, 256)]
            (run / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    settings = spec.resolve({"backend": "cpu"}, {}, which=lambda _: None)
    doc = result.build_document(tmp_path, campaign, settings)
    assert {r.op for r in doc.rows} == {op} and len(doc.rows) == 2
    assert doc.operators[op].rows == 2 and doc.operators[op].verdict != "failed"
    assert [name for name, _ in doc.geomean_by_op] == [op]
