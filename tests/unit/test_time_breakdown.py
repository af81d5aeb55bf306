"""Where a run's wall goes: a call's split by phase, a session's line, the run's document and
the sum over a campaign that scripts/time_breakdown.py prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from harness.contract import boundary, breakdown
from harness.errors import EXIT_BROKEN_PIPE, UsageError
from harness.plugins import phases
from harness.report import breakdown as report
from harness.settings.spec import REPO_ROOT


def test_a_split_charges_each_interval_to_the_phase_entered_before_it(monkeypatch):
    clock = iter([10.0, 10.5, 12.5, 13.0, 20.0, 20.25])
    monkeypatch.setattr(phases.time, "perf_counter", lambda: next(clock))
    split = phases.Split()
    for phase in ("warmup", "capture", "replays", None, "warmup", None):
        split.enter(phase)
    assert split.seconds == {"warmup": 0.75, "capture": 2.0, "replays": 0.5}
    assert split.total() == 3.25


def test_a_row_charges_its_first_call_to_the_reference_and_splits_the_last():
    row = phases.row_phases([0.25, 0.01], [{"warmup": 0.1, "replays": 0.4},
                                           {"warmup": 0.2, "capture": 0.3, "replays": 0.5}])
    assert row == {"inputs": 0.26, "reference": 0.5, "warmup": 0.2, "capture": 0.3,
                   "replays": 0.5}
    assert phases.row_phases([0.1], [{"direct": 0.7}]) == {"inputs": 0.1, "direct": 0.7}


def test_a_session_line_accounts_for_its_whole_span(tmp_path):
    session = phases.Session(tmp_path)
    session.collect_start = 100.0
    session.add("collection", 2.0)
    session.add("tests", 10.0)
    session.rows.append({"op": "x", "dtype": "d", "shape": "s",
                         "time": {"inputs": 1.0, "reference": 3.0, "replays": 4.0}})
    session.finish_start = 113.0
    doc = session.document(ended=114.5)
    got = doc["phases"]
    assert got["tests_other"] == 2.0 and got["teardown"] == 1.5 and got["collection"] == 2.0
    assert got["session_other"] == 1.0  # 14.5 s of span less 13.5 s accounted
    assert sum(got.values()) == pytest.approx(doc["ended"] - doc["collect_start"])
    session.write()
    (line,) = (tmp_path / boundary.PHASES_FILE).read_text().splitlines()
    assert json.loads(line)["rows"][0]["op"] == "x"


def session_line(collect_start, ended, **seconds):
    return {"collect_start": collect_start, "ended": ended, "phases": seconds,
            "rows": [{"op": "tanh", "time": seconds}]}


def test_the_run_document_adds_startup_and_what_no_session_saw():
    one = session_line(1003.0, 1010.0, collection=1.0, replays=4.0, teardown=2.0)
    two = session_line(1012.0, 1015.0, direct=3.0)  # a rescue: 2 s from the first's end
    doc = breakdown.compose([one, two], started=1000.0, wall_s=16.0)
    assert doc["phases"]["startup"] == 5.0 and doc["sessions"] == 2
    assert doc["phases"]["unattributed"] == 1.0
    assert sum(doc["phases"].values()) == pytest.approx(doc["wall_s"])
    assert doc["replay_fraction"] == 0.25 and len(doc["rows"]) == 2
    assert list(doc["phases"]) == list(breakdown.PHASES)


def test_a_workers_checks_after_its_sessions_are_their_own_phase_not_unattributed():
    launches = [{"kind": "worker", "worker_s": {"prepare": 0.2, "restore": 0.1,
                                                "compare": 0.25, "device": 0.05}},
                {"kind": "process"}, {"kind": "worker", "worker_s": {"restore": 0.1}},
                {"kind": "worker", "worker_s": "garbled"}]
    checks = breakdown.worker_checks(launches)
    assert checks == pytest.approx(0.5)  # prepare is before the session: startup's
    doc = breakdown.compose([session_line(1003.0, 1010.0, replays=4.0)], started=1000.0,
                            wall_s=11.0, checks_s=checks)
    assert doc["phases"]["worker_checks"] == 0.5 and doc["phases"]["unattributed"] == 3.5
    assert sum(doc["phases"].values()) == pytest.approx(doc["wall_s"])


def test_a_startup_on_a_clock_the_host_does_not_share_is_left_unattributed():
    doc = breakdown.compose([session_line(5.0, 9.0, direct=3.0)], started=1000.0, wall_s=10.0)
    assert doc["phases"]["startup"] == 0.0 and doc["phases"]["unattributed"] == 7.0


def test_a_killed_first_sessions_workers_checks_are_counted_once_in_the_next_startup(tmp_path):
    # A first session that wrote no line (killed before its end): its whole time, the worker's
    # checks after it too, is the next session's startup, and counted there alone.
    started = time.monotonic()
    (tmp_path / boundary.PHASES_FILE).write_text(
        json.dumps(session_line(started + 6, started + 9, direct=3.0)) + "\n")
    launches = [{"kind": "worker", "worker_s": {"restore": 0.5}},
                {"kind": "worker", "worker_s": {"restore": 0.25}}]
    doc = breakdown.read(breakdown.write(tmp_path, started, 10.0, launches))
    assert doc is not None and doc["phases"]["worker_checks"] == 0.25
    assert doc["phases"]["startup"] == pytest.approx(6.0)
    assert doc["phases"]["unattributed"] == pytest.approx(0.75)
    assert min(doc["phases"].values()) >= 0
    (tmp_path / boundary.PHASES_FILE).write_text("")  # no session line: nothing of theirs
    doc = breakdown.read(breakdown.write(tmp_path, started, 10.0, launches))
    assert doc is not None and doc["phases"]["worker_checks"] == 0.0


def test_write_folds_the_session_lines_and_a_cut_line_is_skipped(tmp_path):
    started = time.monotonic()
    (tmp_path / boundary.PHASES_FILE).write_text(
        json.dumps(session_line(started + 1, started + 3, direct=2.0)) + "\n{\"phases\": {")
    path = breakdown.write(tmp_path, started, 4.0)
    doc = breakdown.read(path)
    assert doc is not None and doc["phases"]["direct"] == 2.0 and doc["sessions"] == 1
    assert not (tmp_path / boundary.PHASES_FILE).exists()
    assert breakdown.read(tmp_path / "missing.json") is None


def campaign(tmp_path):
    """A campaign folder of two runs (one in a batch below it) and a stray non-breakdown."""
    for rel, replays, wall in (("A/r0/tanh/1", 3.0, 10.0), ("B/r0/batch/tanh/1", 1.0, 10.0)):
        run = tmp_path / rel
        run.mkdir(parents=True)
        doc = breakdown.compose([session_line(1001.0, 1008.0, replays=replays, warmup=2.0)],
                                started=1000.0, wall_s=wall)
        (run / breakdown.BREAKDOWN_FILE).write_text(json.dumps(doc))
    (tmp_path / "A" / breakdown.BREAKDOWN_FILE).write_text("[]")
    return tmp_path


def test_the_sum_over_a_campaign_and_its_table(tmp_path):
    total = report.total(campaign(tmp_path))
    assert total.runs == 2 and total.wall_s == 20.0
    assert total.phases["replays"] == 4.0 and total.phases["startup"] == 2.0
    assert total.replay_fraction == 0.2
    lines: list[str] = []
    report.render(total, lines.append)
    assert lines[0].split() == ["phase", "seconds", "%", "of", "wall"]
    assert lines[7].split() == ["replays", "4.00", "20.0"]
    assert lines[-2:] == ["runs: 2; fraction of wall in timed replays: 20.0%",
                          "left out: 1 unreadable files"]  # the stray "[]"


def test_a_folder_without_runs_is_refused_by_name(tmp_path):
    with pytest.raises(UsageError, match=repr(str(tmp_path))):
        report.total(tmp_path)
    with pytest.raises(UsageError, match="is not a directory"):
        report.total(tmp_path / "nope")


def test_a_round_a_campaign_did_not_run_adds_nothing_and_is_not_refused(tmp_path):
    # A later round of an operator skipped in round 0 has run directories without a run, and
    # `time_breakdown.py CAMPAIGN/*/*/r[1-9]*` reaches them.
    from harness.campaign import unit as ab_unit
    from harness.campaign.plan import Unit

    ab_unit._not_run(tmp_path, Unit("skips", 1), "no vLLM")
    rounds = [tmp_path / "skips" / side / "r1" for side in "AB"]
    runs = campaign(tmp_path / "c")
    total = report.total(runs, *rounds)
    assert total.runs == 2 and total.wall_s == 20.0
    with pytest.raises(UsageError, match="no time_breakdown.json"):
        report.total(*rounds)  # nothing to sum at all is still an error
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "run_identity.json").write_text('{"state": "ok"}')
    with pytest.raises(UsageError, match="other"):
        report.total(runs, tmp_path / "other")


def test_the_script_prints_the_table_and_fails_on_an_empty_folder(tmp_path):
    script = [sys.executable, str(REPO_ROOT / "scripts" / "time_breakdown.py")]
    done = subprocess.run([*script, str(campaign(tmp_path / "c"))], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "fraction of wall in timed replays: 20.0%" in done.stdout
    (tmp_path / "empty").mkdir()
    failed = subprocess.run([*script, str(tmp_path / "empty")], capture_output=True, text=True,
                            timeout=60)
    assert failed.returncode == 2 and "no time_breakdown.json below" in failed.stderr


def test_the_script_piped_into_head_stops_without_a_traceback(tmp_path):
    # Regression: `time_breakdown.py CAMPAIGN | head -3` ended in a BrokenPipeError traceback.
    script = [sys.executable, str(REPO_ROOT / "scripts" / "time_breakdown.py")]
    proc = subprocess.Popen([*script, str(campaign(tmp_path / "c"))], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before the first line: every write fails
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and proc.returncode in (0, EXIT_BROKEN_PIPE), err


def test_several_folders_sum_each_run_once(tmp_path):
    root = campaign(tmp_path)
    total = report.total(root / "A" / "r0", root / "B", root)  # the root holds both again
    assert total.runs == 2 and total.wall_s == 20.0
    assert report.total(root / "A" / "r0").phases["replays"] == 3.0


def test_a_campaigns_units_say_what_the_host_spent_outside_their_runs(tmp_path):
    # A later-round unit on an H100 took 9.4 s for runs of 3.6 and 3.5 s: the host's own 2.3 s
    # (devices read, outputs, fingerprints, the unit's process) showed nowhere.
    units = []
    for side in ("A", "B"):
        run = tmp_path / "sum" / side / "r1"
        run.mkdir(parents=True)
        doc = breakdown.compose([session_line(1001.0, 1003.0, replays=0.5)], started=1000.0,
                                wall_s=3.5)
        (run / breakdown.BREAKDOWN_FILE).write_text(json.dumps(doc))
        breakdown.add_host(run, before_s=0.25, after_s=0.5)
    units.append({"op": "sum", "round": 1, "wall_s": 9.5, "status": "ok"})
    units.append({"op": "exp", "round": 1, "wall_s": 20.0, "status": "ok"})  # runs not below
    (tmp_path / "campaign.json").write_text(json.dumps({"units": units}))
    total = report.total(tmp_path)
    assert total.wall_s == 7.0
    assert total.host == {"host_before": 0.5, "host_after": 1.0}
    assert total.units == pytest.approx(9.5 - 7.0 - 1.5)
    lines: list[str] = []
    report.render(total, lines.append)
    assert lines[-4:] == ["outside the runs' walls (the host's own work):",
                          "host_before          0.50", "host_after           1.00",
                          "unit_other           1.00"]
    # a run alone: the host's part, no units
    alone = report.total(tmp_path / "sum" / "A" / "r1")
    assert alone.units is None and alone.host["host_after"] == 0.5
    # a round not run (its operator skipped in round 0): its unit's whole wall is the host's
    from harness.campaign import unit as ab_unit
    from harness.campaign.plan import Unit

    ab_unit._not_run(tmp_path, Unit("skips", 1), "no vLLM")
    units.append({"op": "skips", "round": 1, "wall_s": 0.75, "status": "skipped"})
    (tmp_path / "campaign.json").write_text(json.dumps({"units": units}))
    assert report.total(tmp_path).units == pytest.approx(1.0 + 0.75)
    breakdown.add_host(tmp_path / "nothing", 1.0, 1.0)  # a run that wrote no document
    assert not (tmp_path / "nothing").exists()


def test_unit_other_counts_each_finished_unit_once_against_its_own_runs(tmp_path):
    # Regression: every run summed was taken from the counted units' walls, an unfinished
    # unit's run and a folder given twice among them, and the figure went negative.
    def side(op, side, rnd, wall, host=True):
        run = tmp_path / op / side / f"r{rnd}"
        run.mkdir(parents=True)
        doc = breakdown.compose([session_line(1001.0, 1002.0)], started=1000.0, wall_s=wall)
        (run / breakdown.BREAKDOWN_FILE).write_text(json.dumps(doc))
        if host:
            breakdown.add_host(run, 0.25, 0.25)

    side("sum", "A", 1, 3.5)
    side("sum", "B", 1, 3.5)
    side("exp", "A", 1, 10.0)  # its unit was interrupted: no wall
    side("old", "A", 0, 2.0, host=False)  # made before runs carried host seconds
    side("old", "B", 0, 2.0, host=False)
    (tmp_path / "campaign.json").write_text(json.dumps({"units": [
        {"op": "sum", "round": 1, "wall_s": 9.5, "status": "ok"},
        {"op": "exp", "round": 1, "wall_s": None, "status": "interrupted"},
        {"op": "old", "round": 0, "wall_s": 6.0, "status": "ok"}]}))
    assert report.total(tmp_path).units == pytest.approx(9.5 - 7.0 - 1.0)
    assert report.total(tmp_path, tmp_path).units == pytest.approx(1.5)
    assert report.total(tmp_path / "sum" / "A").units is None


def test_interrupted_attempts_and_unreadable_files_are_left_out_and_said(tmp_path):
    # Regression (review): a unit run again keeps its interrupted attempt as r1.attempt1,
    # whose breakdown was summed as one more run; a breakdown with a null phase or a NaN wall
    # raised a TypeError or printed "wall nan".
    root = campaign(tmp_path)
    attempt = root / "A" / "r0.attempt1"
    attempt.mkdir()
    (attempt / breakdown.BREAKDOWN_FILE).write_text(
        (root / "A/r0/tanh/1" / breakdown.BREAKDOWN_FILE).read_text())
    for rel, text in (("n1", '{"wall_s": 1.0, "phases": {"startup": null}}'),
                      ("n2", '{"wall_s": NaN, "phases": {}}'),
                      ("n3", '{"wall_s": 1.0, "phases": {}, "host": [1]}')):
        (root / rel).mkdir()
        (root / rel / breakdown.BREAKDOWN_FILE).write_text(text)
    total = report.total(root)
    assert total.runs == 2 and total.wall_s == 20.0
    assert total.left_out == {"interrupted attempts": 1, "unreadable files": 4}
    lines: list[str] = []
    report.render(total, lines.append)
    assert lines[-1] == "left out: 1 interrupted attempts, 4 unreadable files"
    with pytest.raises(UsageError, match="1 interrupted attempts left out"):
        report.total(attempt)


def test_a_unit_running_again_lends_no_stale_wall_to_unit_other(tmp_path):
    # Regression (review): a resumed unit still carried its interrupted attempt's wall while
    # running again, set against its new runs: -1.08 s in unit_other.
    _side_run(tmp_path / "add" / "A" / "r1", 7.5)
    units = [{"op": "add", "round": 1, "wall_s": 6.46, "status": "running"},
             {"round": 2, "wall_s": 1.0, "status": "ok"}]  # no op: not a unit to read
    (tmp_path / "campaign.json").write_text(json.dumps({"units": units}))
    assert report.total(tmp_path).units is None


def test_direct_timed_rows_are_named_beside_the_replays_fraction(tmp_path):
    # Regression (review): a campaign timed directly read "fraction of wall in timed
    # replays: 0.0%" alone, as if nothing had been timed.
    run = tmp_path / "r"
    run.mkdir()
    doc = breakdown.compose([session_line(1001.0, 1009.0, direct=5.0)], started=1000.0,
                            wall_s=10.0)
    (run / breakdown.BREAKDOWN_FILE).write_text(json.dumps(doc))
    lines: list[str] = []
    report.render(report.total(tmp_path), lines.append)
    assert lines[-1] == ("runs: 1; fraction of wall in timed replays: 0.0% (and 50.0% timed "
                         "directly)")


def test_a_sessions_line_after_one_cut_short_is_a_line_of_its_own(tmp_path):
    # Regression (review): a capture rescue keeps the first session's line; where that
    # session was killed mid-write, the second's line ran on from it and neither was read.
    path = tmp_path / boundary.PHASES_FILE
    path.write_text('{"collect_start": 1.0, "ended')
    started = time.monotonic()
    phases.append_line(path, json.dumps(session_line(started + 1, started + 3, direct=2.0)))
    phases.append_line(path, json.dumps(session_line(started + 3, started + 4, direct=1.0)))
    doc = breakdown.read(breakdown.write(tmp_path, started, 5.0))
    assert doc is not None and doc["sessions"] == 2 and doc["phases"]["direct"] == 3.0


def test_a_runs_workers_checks_are_those_of_the_launches_whose_sessions_wrote_a_line(tmp_path):
    # Regression (review): the last launches were taken, so where the second launch died
    # before its line, the first session's worker checks were lost.
    started = time.monotonic()
    line = {**session_line(started + 1, started + 3, direct=2.0), "pid": 11}
    (tmp_path / boundary.PHASES_FILE).write_text(json.dumps(line) + "\n")
    launches = [{"kind": "worker", "pid": 11, "worker_s": {"restore": 1.0, "compare": 0.5}},
                {"kind": "worker", "pid": 12, "retired": "the worker died"}]
    doc = breakdown.read(breakdown.write(tmp_path, started, 10.0, launches))
    assert doc is not None and doc["phases"]["worker_checks"] == 1.5


def test_a_breakdown_whose_seconds_cannot_be_is_left_out(tmp_path):
    # Regression (review): a wall past float's range raised OverflowError; a negative wall
    # and a phase of 1e308 were summed (wall -968.84, unit_other 1008.76, "inf %").
    for rel, text in (("big", '{"wall_s": 1' + "0" * 400 + ', "phases": {}}'),
                      ("neg", '{"wall_s": -1000, "phases": {}}'),
                      ("huge", '{"wall_s": 10, "phases": {"replays": 1e308}}'),
                      ("host", '{"wall_s": 10, "phases": {}, "host": {"host_before": 1, '
                               '"host_after": 1, "more": 100}}'),
                      ("nohost", '{"wall_s": 10, "phases": {}, "host": {}}')):
        (tmp_path / rel).mkdir()
        (tmp_path / rel / breakdown.BREAKDOWN_FILE).write_text(text)
        assert breakdown.read(tmp_path / rel / breakdown.BREAKDOWN_FILE) is None, rel
    ok = breakdown.compose([session_line(1001.0, 1002.0)], started=1000.0, wall_s=3.0)
    ok["phases"]["unattributed"] = -0.25  # what is left, in rounding: still seconds
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / breakdown.BREAKDOWN_FILE).write_text(json.dumps(ok))
    total = report.total(tmp_path, tmp_path, tmp_path / "ok")  # folders twice: left out once
    assert total.runs == 1 and total.left_out == {"unreadable files": 5}


def test_unit_other_needs_every_side_of_the_unit_summed(tmp_path):
    # Regression (review): a side whose run wrote no breakdown left the other side alone to
    # stand for the unit, and that side's wall landed in unit_other.
    _side_run(tmp_path / "add" / "A" / "r1", 3.0)
    (tmp_path / "add" / "B" / "r1").mkdir(parents=True)  # stopped before its breakdown
    (tmp_path / "campaign.json").write_text(json.dumps({"units": [
        {"op": "add", "round": 1, "wall_s": 8.0, "status": "failed"}]}))
    assert report.total(tmp_path).units is None


def _side_run(run, wall):
    """A side's run of `wall` seconds, with its host seconds."""
    run.mkdir(parents=True)
    doc = breakdown.compose([session_line(1001.0, 1002.0)], started=1000.0, wall_s=wall)
    (run / breakdown.BREAKDOWN_FILE).write_text(json.dumps(doc))
    breakdown.add_host(run, 0.25, 0.25)
