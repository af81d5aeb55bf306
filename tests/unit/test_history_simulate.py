"""The seeded simulation calibrated on the H200 noise classes: the gate and the detection."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ruptures")

from harness.errors import UsageError  # noqa: E402
from harness.history import simulate  # noqa: E402

CLASSES = Path(__file__).resolve().parents[1] / "data" / "history" / "h200_noise.csv"


def _of(label, count=40):
    return [n for n in simulate.class_noise(CLASSES, 400) if n.label == label][:count]


def test_the_classes_file_gives_each_class_its_share_and_range():
    noises = simulate.class_noise(CLASSES, 1000)
    shares = {lab: sum(n.label == lab for n in noises) for lab in
              ("ms", "10-100us", "us_steady", "us_tuner")}
    assert shares == {"ms": 400, "10-100us": 300, "us_steady": 200, "us_tuner": 100}
    assert all(0.001 <= n.sd <= 0.004 for n in noises if n.label == "ms")
    assert all(n.alt_p == 0.3 for n in noises if n.label == "us_tuner")


def test_a_tuner_bimodal_microsecond_row_raises_no_change_on_the_same_stack():
    trials = simulate.run_trials(_of("us_tuner"), 40, 0.0, seed=1)
    assert not any(t.alarmed for t in trials)


def test_a_five_percent_step_is_found_on_a_row_whose_rounds_the_tuner_splits():
    # a round lands in the 21%-slower config with p 0.3: two of three do on 22% of nights, which
    # threw a night's median (0 of 40 found); its fastest round is thrown on 3% of them
    trials = simulate.run_trials(_of("us_tuner"), 40, 5.0, seed=1)
    assert sum(t.found for t in trials) >= 20


def test_a_five_percent_step_on_a_millisecond_row_is_found_within_two_nights():
    trials = simulate.run_trials(_of("ms"), 40, 5.0, seed=1)
    assert sum(t.found for t in trials) >= 38


def test_a_file_without_the_class_columns_is_refused_naming_it(tmp_path):
    bad = tmp_path / "noise.csv"
    bad.write_text("# a comment\nclass,sd\nms,0.1\n")
    with pytest.raises(UsageError, match=r"noise\.csv.*class,sd_lo_pct"):
        simulate.class_noise(bad, 10)


def test_an_aa_ab_json_gives_each_rows_one_side_sd_from_its_interval(tmp_path):
    import json
    import math
    import statistics

    from harness.stats import pct_of_log
    from harness.stats.tdist import t_interval

    rows = []
    for a_ms, logs in ((0.5, [0.01, -0.02, 0.015]), (0.002, [0.06, -0.04, 0.01, -0.03])):
        ci = t_interval(logs)
        rows.append({"op": "mm", "a_ms": a_ms, "rounds": len(logs),
                     "ci_low_pct": pct_of_log(ci.low), "ci_high_pct": pct_of_log(ci.high)})
    rows.append({"op": "one", "a_ms": 1.0, "rounds": 1, "ci_low_pct": None,
                 "ci_high_pct": None})  # one round: no interval, no noise to read
    ab = tmp_path / "ab.json"
    ab.write_text(json.dumps({"schema": "harness-ab/1", "rows": rows}))
    found = simulate.ab_noise(ab)
    assert [n.label for n in found] == ["ms", "us"]
    assert found[0].sd == pytest.approx(statistics.stdev([0.01, -0.02, 0.015]) / math.sqrt(2))
    assert found[1].sd == pytest.approx(statistics.stdev([0.06, -0.04, 0.01, -0.03])
                                        / math.sqrt(2))
    kept = simulate.write_classes(found, tmp_path / "rows.csv", "an A/A of two rows")
    again = simulate.class_noise(kept, 4)
    assert sorted(n.sd for n in again) == pytest.approx(sorted(
        n.sd for n in found for _ in range(2)), abs=1e-6)
