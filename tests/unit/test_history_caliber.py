"""The history's comparisons never mix what was measured differently: records of another timer
or device, a row whose capture fell back to the direct timer, rounds timed while the device
throttled."""

from __future__ import annotations

import json
import math
import random

import pytest

pytest.importorskip("sqlalchemy")
pytest.importorskip("ruptures")

from harness import cli  # noqa: E402
from harness.errors import UsageError  # noqa: E402
from harness.history import changes, importer, queries, store  # noqa: E402
from harness.history.changes import Point  # noqa: E402
from tests.historydata import make_campaign, make_run  # noqa: E402

THROTTLED = "GPU_CLOCKS_THROTTLED"


@pytest.fixture
def engine(tmp_path):
    eng = store.open_store(store.resolve(str(tmp_path / "h.sqlite"), tmp_path))
    yield eng
    eng.dispose()


def _graph_run(root, night, latencies, *, graph_timer="adaptive", device="H100", **kw):
    return make_run(root / "mm" / f"202611{night:02d}-010000", "mm", latencies, timer="graph",
                    graph_timer=graph_timer, devices=[{"name": device}], **kw)


def _ids(engine, *folders):
    return [str(importer.import_folder(engine, f).record_id) for f in folders]


def test_compare_refuses_records_of_another_timer_unless_allowed(engine, tmp_path):
    first, second = _ids(engine, _graph_run(tmp_path, 1, [1.0, 2.0]),
                         _graph_run(tmp_path, 2, [1.2, 2.0], graph_timer="upstream"))
    with pytest.raises(UsageError, match=r"differ in caliber \(timer: 1='graph:adaptive' "
                                         r"2='graph:upstream'\); pass --allow-mixed"):
        queries.compare(engine, first, second)
    found = queries.compare(engine, first, second, allow_mixed=True)
    assert found.notes == ["mixed calibers (--allow-mixed): timer: 1='graph:adaptive' "
                           "2='graph:upstream'"]
    assert {r.shape: round(r.change_pct, 6) for r in found.rows} == {"[[64, 64]]": 20.0,
                                                                     "[[1024, 1024]]": 0.0}
    assert all(r.flags == () for r in found.rows)  # the difference is the note's, once


def test_compare_flags_a_row_throttled_or_timed_otherwise_and_never_calls_it(engine, tmp_path):
    root = tmp_path / "runs"
    base = make_campaign(root, "20261101-010000", {"mm": [1.0, 2.0]}, timer="graph")
    hot = make_campaign(root, "20261102-010000", {"mm": [1.1, 2.0]}, timer="graph",
                        markers={1: [THROTTLED]})
    fine = make_campaign(root, "20261103-010000", {"mm": [1.1, 2.0]}, timer="graph")
    a, b, c = _ids(engine, base, hot, fine)
    throttled = {r.shape: r for r in queries.compare(engine, a, b).rows}["[[64, 64]]"]
    assert throttled.change_pct == pytest.approx(10.0, rel=1e-3)
    assert throttled.flags == (f"{b}:{THROTTLED}",) and not throttled.beyond_noise
    clean = {r.shape: r for r in queries.compare(engine, a, c).rows}["[[64, 64]]"]
    assert clean.flags == () and clean.beyond_noise  # the same change, measured steadily
    # one record's row fell back to the direct timer in every round
    fell = make_campaign(root, "20261104-010000", {"mm": [1.1, 2.0]}, timer="graph")
    for side_run in fell.glob("mm/A/r*"):
        rows = [json.loads(x) for x in (side_run / "results.jsonl").read_text().splitlines()]
        for row in rows:
            row["timer"] = "direct"
        (side_run / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    (d,) = _ids(engine, fell)
    direct = {r.shape: r for r in queries.compare(engine, a, d).rows}["[[64, 64]]"]
    assert direct.flags == ("TIMER_DIFFERS:graph->direct",)
    assert not direct.beyond_noise


def test_the_cli_compare_says_which_rows_are_flagged_and_refuses_mixed_devices(tmp_path, capsys):
    hist = ["--history", str(tmp_path / "h.sqlite")]
    root = tmp_path / "runs"
    base = make_campaign(root, "20261101-010000", {"mm": [1.0, 2.0]}, timer="graph")
    hot = make_campaign(root, "20261102-010000", {"mm": [1.1, 2.0]}, timer="graph",
                        markers={0: [THROTTLED], 1: [THROTTLED], 2: [THROTTLED]})
    other = _graph_run(root, 3, [1.0, 2.0], device="H200")
    assert cli.main(["history", "import", str(base), str(hot), str(other), *hist]) == 0
    capsys.readouterr()
    assert cli.main(["history", "compare", "1", "2", *hist]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("0 of 2 shared rows changed beyond their noise")
    assert "2 flagged, never called (see flags)" in out.splitlines()[0]
    assert f"| flagged | 2:{THROTTLED} |" in out
    assert cli.main(["history", "compare", "1", "3", "--side", "A", *hist]) == 2
    err = capsys.readouterr().err
    assert "differ in caliber (" in err and "device: 1=" in err and "'H200'" in err


def _night(i, value, flags=""):
    return Point(f"2026-01-{i + 1:02d}", value, i, {"flags": flags})


def test_a_throttled_night_is_never_read_as_a_step():
    rng = random.Random(5)
    values = [math.exp(rng.gauss(0.0, 0.01)) for _ in range(30)]
    # the last four nights ran throttled, 20% slower
    hot = [_night(i, v * (1.2 if i >= 26 else 1.0), THROTTLED if i >= 26 else "")
           for i, v in enumerate(values)]
    assert changes.find_changes(hot) == []
    unmarked = [Point(p.when, p.latency_ms, p.record_id, {}) for p in hot]
    assert [c.index for c in changes.find_changes(unmarked)] == [26]


def test_a_changes_index_is_its_nights_in_the_series_given_and_before_skips_flagged_ones():
    rng = random.Random(9)
    values = [math.exp(rng.gauss(0.0, 0.005)) * (1.1 if i >= 20 else 1.0) for i in range(40)]
    series = [_night(i, v, THROTTLED if i == 19 else "") for i, v in enumerate(values)]
    (found,) = changes.find_changes(series)
    assert found.index == 20 and found.first is series[20]
    assert found.before is series[18]  # night 19 is flagged: not the night before the step


def test_a_nights_value_leaves_its_throttled_rounds_out_and_a_fallback_is_its_own_series(
        engine, tmp_path):
    root = tmp_path / "runs"
    # round 0 throttled and fastest: the night reads its two other rounds
    part = make_campaign(root, "20261101-010000", {"mm": [1.0, 2.0]}, timer="graph",
                         markers={0: [THROTTLED]})
    whole = make_campaign(root, "20261102-010000", {"mm": [1.0, 2.0]}, timer="graph",
                          markers={r: [THROTTLED] for r in range(3)})
    importer.import_folder(engine, part)
    importer.import_folder(engine, whole)
    found = queries.series(engine, "mm", shape="[[64, 64]]")
    (key,) = [k for k in found if k.side == "A"]
    assert key.timer == "graph:adaptive"
    first, second = found[key]
    assert first.latency_ms == pytest.approx(1.001) and first.attrs["rounds"] == "2 of 3"
    assert first.attrs["flags"] == ""
    assert second.latency_ms == pytest.approx(1.0) and second.attrs["flags"] == THROTTLED
    # a night whose capture fell back to the direct timer is another series, not a step
    fell = make_campaign(root, "20261103-010000", {"mm": [1.3, 2.0]}, timer="graph")
    for side_run in fell.glob("mm/*/r*"):
        rows = [json.loads(x) for x in (side_run / "results.jsonl").read_text().splitlines()]
        (side_run / "results.jsonl").write_text("".join(
            json.dumps({**x, "timer": "direct"}) + "\n" for x in rows))
    importer.import_folder(engine, fell)
    timers = {k.timer: len(v) for k, v in queries.series(engine, "mm", shape="[[64, 64]]").items()
              if k.side == "A"}
    assert timers == {"graph:adaptive": 2, "direct": 1}
    # one line of a trend's plot each, not the fallback drawn over the graph-timed nights
    labels = queries.series_labels([k for k in queries.series(engine, "mm") if k.side == "A"])
    assert len(set(labels.values())) == 4
    assert {v for v in labels.values() if "[[64, 64]]" in v} == {
        "torch.float32 [[64, 64]] A graph:adaptive", "torch.float32 [[64, 64]] A direct"}


def test_markers_of_a_run_that_wrote_results_csv_alone_are_read(engine, tmp_path):
    # Regression: results.csv joins a row's markers with `;` and the store kept the cell as one
    # marker, so a throttled row of such a run was never flagged
    from harness.contract import results

    folders = []
    for night, marks in ((1, []), (2, [THROTTLED, "AUTOTUNE_REPLAY_EVICTED"])):
        run = _graph_run(tmp_path, night, [1.0, 2.0], markers=marks)
        results.write_results(run, results.read_results(run))
        (run / "results.jsonl").unlink()
        folders.append(run)
    assert f"{THROTTLED};AUTOTUNE_REPLAY_EVICTED" in (folders[1] / "results.csv").read_text()
    first, second = _ids(engine, *folders)
    assert {r.flags for r in queries.compare(engine, first, second).rows} == {
        (f"{second}:{THROTTLED}",)}
    points = next(p for k, p in queries.series(engine, "mm").items() if k.shape == "[[64, 64]]")
    assert [p.attrs["flags"] for p in points] == ["", THROTTLED]


def test_a_run_that_saw_eight_gpus_of_one_model_compares_with_one_pinned_to_one(engine,
                                                                                tmp_path):
    # Regression: the record named every visible device, so compare refused the two as
    # different devices and their rows fell into two series
    one = _graph_run(tmp_path, 1, [1.0, 2.0])
    eight = make_run(tmp_path / "mm" / "20261102-010000", "mm", [1.0, 2.0], timer="graph",
                     graph_timer="adaptive", devices=[{"name": "H100"}] * 8)
    first, second = _ids(engine, one, eight)
    assert queries.compare(engine, first, second).notes == []
    assert {k.device for k in queries.series(engine, "mm")} == {"H100"}


def test_a_night_whose_rounds_self_tuned_or_were_rescued_is_no_step_as_an_ab_never_calls_it():
    # Regression: `changes` read a night timed with a config its replay did not pin as a 20%
    # step ("flags: -") while `compare` flagged the same row and never called it.
    from harness.contract.boundary import REPLAY_FALLBACK_MARKER, RESCUED_MARKER

    for marker in (REPLAY_FALLBACK_MARKER, RESCUED_MARKER):
        plain, odd = (queries.Sample(1.0, "graph", ()),
                      queries.Sample(1.2, "graph", (marker,)))
        mixed = queries._point("2026-11-25", 7, [odd, plain], None, None)
        assert (mixed.latency_ms, mixed.attrs["flags"]) == (1.0, "")
        assert mixed.attrs["rounds"] == "1 of 2"
        every = queries._point("2026-11-25", 7, [odd, odd], None, None)
        assert every.attrs["flags"] == marker  # flagged: find_changes reads no step from it
