"""The campaign plan: units, their order, campaign.json, resume's extension, walls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.axes import Axis
from harness.campaign import plan as campaign
from harness.campaign import projection
from harness.campaign.document import Campaign, load
from harness.campaign.driver import UnitEvents
from harness.campaign.plan import Unit
from harness.errors import UsageError
from harness.executors.base import Ended, Task


def ids(units):
    return [u.id for u in units]


def test_units_run_round_major_so_a_partial_campaign_holds_a_round_of_everything():
    units = campaign.plan_units({"mm": 3, "add": 2})
    assert ids(units) == ["mm/r0", "add/r0", "mm/r1", "add/r1", "mm/r2"]


def test_within_a_round_the_longest_operator_goes_first_and_one_without_a_wall_before_it():
    walls = {"add": 1.0, "mm": 30.0, "tanh": 5.0}
    units = campaign.plan_units({"add": 2, "tanh": 2, "mm": 2, "new": 2}, walls)
    assert ids(units) == ["new/r0", "mm/r0", "tanh/r0", "add/r0",
                          "new/r1", "mm/r1", "tanh/r1", "add/r1"]


def test_sides_alternate_by_round_starting_with_the_recording_side():
    assert [Unit("mm", r).sides for r in range(3)] == [("A", "B"), ("B", "A"), ("A", "B")]
    assert Unit("mm", 1).run_rel("B") == "mm/B/r1"


@pytest.mark.parametrize("text", ["mm", "mm/r", "mm/rx", "/r0", "mm/r-1", ""])
def test_a_malformed_unit_id_is_refused(text):
    with pytest.raises(UsageError, match="expected <op>/r<round>"):
        campaign.parse_unit_id(text)


def test_unit_ids_of_dotted_and_dashed_operators_round_trip():
    assert campaign.parse_unit_id("fused.add-2/r11") == Unit("fused.add-2", 11)


def document(tmp_path, rounds=2, ops=None):
    ops = ops or {"mm": {"node": "benchmark/test_mm.py::test_mm"},
                  "bad": {"reason": "PREFLIGHT_FAILED check=test_node"}}
    return campaign.new_campaign(directory=tmp_path, axis=Axis("X", "X"), caliber={
        "backend": "cpu", "level": "core", "mode": "auto"}, argv=["--graph-timer", "adaptive"],
        ops=ops, rounds=rounds, walls={}, walls_from=None)


def test_an_operator_without_a_node_is_planned_failed_and_never_run(tmp_path):
    # "skipped" is pytest's skip alone: an operator that has no benchmark node failed.
    doc = document(tmp_path)
    assert {u.id: u.status for u in doc.units} == {
        "mm/r0": "not_run", "bad/r0": "failed", "mm/r1": "not_run", "bad/r1": "failed"}
    assert ids(campaign.units_to_run(doc)) == ["mm/r0", "mm/r1"]


def test_resume_runs_the_interrupted_crashed_and_unstarted_units_and_no_finished_one(tmp_path):
    doc = document(tmp_path, rounds=3, ops={op: {"node": op} for op in ("a", "b", "c")})
    states = {"a/r0": "ok", "b/r0": "failed", "c/r0": "interrupted", "a/r1": "error",
              "b/r1": "running"}
    for unit in doc.units:
        unit.status = states.get(unit.id, unit.status)
    doc.save(tmp_path)
    again = load(tmp_path)
    assert ids(campaign.units_to_run(again)) == ["c/r0", "a/r1", "b/r1", "c/r1", "a/r2",
                                                 "b/r2", "c/r2"]


def test_rounds_on_resume_extend_to_that_many_rounds_in_all(tmp_path):
    doc = document(tmp_path, rounds=2)
    for unit in doc.units:
        unit.status = "ok" if unit.status == "not_run" else unit.status
    doc.ops["mm"].stopped = "MAX_ROUNDS (2) reached with rows undecided"
    added = campaign.extend(doc, 4, None, {})
    assert ids(added) == ["mm/r2", "mm/r3"] and doc.ops["mm"].rounds == 4
    assert doc.ops["mm"].stopped is None  # its looks say anew why it stops
    assert campaign.extend(doc, 4, None, {}) == []  # asked again: nothing more to add
    with pytest.raises(UsageError, match="ROUNDS=3 is not accepted on resume: every operator "
                                         "has 4 rounds or more already"):
        campaign.extend(doc, 3, None, {})  # fewer rounds than it has: refused, not ignored
    assert doc.ops["mm"].rounds == 4


def test_only_adds_rounds_to_the_operators_with_that_verdict(tmp_path):
    doc = document(tmp_path, rounds=2, ops={op: {"node": op} for op in ("a", "b")})
    added = campaign.extend(doc, None, "inconclusive", {"a": "same", "b": "inconclusive"})
    assert ids(added) == ["b/r2", "b/r3"] and doc.ops["a"].rounds == 2
    with pytest.raises(UsageError, match="ONLY='slower': no operator .* theirs: "
                                         "inconclusive, same"):
        campaign.extend(doc, None, "slower", {"a": "same", "b": "inconclusive"})
    doc.ops["a"].skipped = "a is not in flag_gems at B_REF"  # one side only: never again
    with pytest.raises(UsageError, match=r"ONLY='skipped': .* theirs: inconclusive \("):
        campaign.extend(doc, None, "skipped", {"a": "skipped", "b": "inconclusive"})


def test_resume_refuses_a_different_caliber_in_one_line(tmp_path):
    doc = document(tmp_path)
    campaign.check_caliber(doc, {"level": "core"}, ("backend", "level", "mode"))
    with pytest.raises(UsageError, match="LEVEL='comprehensive' differs from the campaign's "
                                         "'core'"):
        campaign.check_caliber(doc, {"level": "comprehensive"}, ("backend", "level", "mode"))


@pytest.mark.parametrize("content", [None, "not json", '{"schema": "other"}', "[1]"])
def test_load_refuses_what_is_not_a_campaign(tmp_path, content):
    if content is not None:
        (tmp_path / "campaign.json").write_text(content)
    with pytest.raises(UsageError, match="RESUME="):
        load(tmp_path)


@pytest.mark.parametrize(("recorded", "field"), [
    ({"A": "9f86d081", "B": "6030"}, "side_artifacts.A is '9f86d081'; expected a list"),
    ({"A": 5}, "side_artifacts.A is 5; expected a list"),
    ({"A": ["9f86"], "B": [1]}, "side_artifacts.B[0] is 1; expected a str"),
])
def test_recorded_fingerprints_that_are_not_lists_of_strings_are_refused(tmp_path, recorded,
                                                                         field):
    # Regression (review): a string was taken as a list of its characters, so two hex
    # fingerprints read as sets of hex digits, one inside the other: "the same code".
    doc = document(tmp_path, rounds=1, ops={"mm": {"node": "mm"}})
    doc.save(tmp_path)
    data = json.loads((tmp_path / "campaign.json").read_text())
    data["side_artifacts"] = recorded
    (tmp_path / "campaign.json").write_text(json.dumps(data))
    with pytest.raises(UsageError, match=field.replace("[", r"\[").replace("]", r"\]")):
        load(tmp_path)


def test_walls_come_from_a_batch_or_an_earlier_campaign(tmp_path):
    batch = tmp_path / "batch"
    batch.mkdir()
    (batch / "ops_status.csv").write_text("op,status,wall_s\nmm,ok,12.5\nadd,error,\n")
    assert campaign.walls_from(batch) == {"mm": 12.5}
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    doc = document(earlier, rounds=3, ops={"mm": {"node": "mm"}})
    for unit, wall in zip(doc.units, (30.0, 4.0, 5.0), strict=True):
        unit.status, unit.wall_s = "ok", wall
    doc.save(earlier)
    assert campaign.walls_from(earlier) == {"mm": 5.0}  # the median: round 0 tunes
    with pytest.raises(UsageError, match="WALLS_FROM="):
        campaign.walls_from(tmp_path)


@pytest.mark.parametrize("wall", ["abc", "nan", "-3", "inf"])
def test_walls_from_a_batch_with_a_bad_wall_is_one_line_naming_it(tmp_path, wall):
    # WALLS_FROM with wall_s=abc was a ValueError traceback.
    (tmp_path / "ops_status.csv").write_text(f"op,status,wall_s\nmm,ok,{wall}\n")
    with pytest.raises(UsageError, match="WALLS_FROM=") as exc:
        campaign.walls_from(tmp_path)
    assert f"wall_s={wall!r}" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("wall", [float("nan"), -50.0, float("inf")])
def test_walls_from_a_campaign_with_a_bad_wall_is_one_line_naming_it(tmp_path, wall):
    # Regression: a campaign.json whose unit wall_s was NaN was a traceback later, and -50
    # projected "-150 s" on one device in the dry run.
    doc = document(tmp_path, rounds=3, ops={"mm": {"node": "mm"}})
    for unit, seconds in zip(doc.units, (30.0, wall, 5.0), strict=True):
        unit.status, unit.wall_s = "ok", seconds
    doc.save(tmp_path)
    with pytest.raises(UsageError) as exc:
        campaign.walls_from(tmp_path)
    assert str(exc.value) == (f"WALLS_FROM={str(tmp_path)!r}: campaign.json gives unit 'mm/r1' "
                              f"wall_s={wall!r}; expected seconds, a number not below 0")


def test_walls_from_a_batch_that_is_not_utf8_is_one_line(tmp_path):
    (tmp_path / "ops_status.csv").write_bytes(b"op,status,wall_s\n\xff,ok,1\n")
    with pytest.raises(UsageError, match="WALLS_FROM="):
        campaign.walls_from(tmp_path)


def test_round_walls_set_round_zero_against_the_later_rounds(tmp_path):
    doc = document(tmp_path, rounds=3, ops={"a": {"node": "a"}, "b": {"node": "b"}})
    walls = {"a/r0": 20.0, "b/r0": 10.0, "a/r1": 4.0, "b/r1": 4.0, "a/r2": 3.0, "b/r2": 3.0}
    for unit in doc.units:
        unit.status, unit.wall_s = "ok", walls[unit.id]
    assert campaign.round_walls(doc) == {"round0_s": 30.0, "round0_unit_mean_s": 15.0,
                                         "later_unit_mean_s": 3.5, "later_units": 4}


def test_round_walls_of_an_interrupted_campaign_count_only_units_that_ran(tmp_path):
    # Pinned: a last round holding one operator of two read as a round half as long.
    doc = document(tmp_path, rounds=2, ops={"a": {"node": "a"}, "b": {"node": "b"}})
    walls = {"a/r0": 20.0, "b/r0": 10.0, "a/r1": 4.0, "b/r1": 1.0}
    for unit in doc.units:
        unit.status = "ok" if unit.id != "b/r1" else "interrupted"
        unit.wall_s = walls[unit.id]
    assert campaign.round_walls(doc)["later_unit_mean_s"] == 4.0


def test_the_eta_counts_the_devices_and_what_running_units_have_done():
    # Regression: the first progress line of a 30-unit campaign on two H200s said eta=1409s:
    # 29 units at the one finished unit's 48.6 s, as if they ran one at a time; the campaign
    # needed about 650 s.
    assert campaign.eta_from_walls([48.6], [49.0], 28, 2) == pytest.approx(28 * 48.6 / 2)
    # a running unit 10 s into a 40 s mean has 30 s left; three wait for two devices
    assert campaign.eta_from_walls([30.0, 50.0], [10.0], 3, 2) == pytest.approx((30 + 120) / 2)
    assert campaign.eta_from_walls([], [5.0], 3, 2) is None
    assert campaign.eta_from_walls([10.0], [], 0, 4) == 0


def test_a_cluster_eta_follows_the_rate_units_finish_at():
    assert campaign.eta_from_rate(100.0, 4, 8) == pytest.approx(200.0)
    assert campaign.eta_from_rate(100.0, 0, 8) is None


# --------------------------------------------------------------------------- campaign.json


@pytest.mark.parametrize("given, kept", [
    ([], ["--graph-timer", "upstream"]),
    (["--graph-timer", "steady"], []),
    (["--graph-timer=adaptive"], []),
])
def test_a_campaign_resumes_with_the_graph_timer_its_rounds_ran_with(tmp_path, given, kept):
    # Regression: a campaign made before GRAPH_TIMER existed lacks the flag; its units would
    # have resolved today's default (adaptive) and mixed two timers in one campaign.
    doc = document(tmp_path)
    doc.argv = ["--backend", "cuda", *given]
    doc.save(tmp_path)
    assert load(tmp_path).argv == ["--backend", "cuda", *given, *kept]


def test_campaign_json_round_trips_with_the_keys_it_always_had(tmp_path):
    doc = document(tmp_path)
    doc.unit("mm/r0").facts = {"slurm_task": "7_0"}
    doc.save(tmp_path)
    text = json.loads((tmp_path / "campaign.json").read_text())
    assert set(text) == {"schema", "dir", "created_utc", "axis", "caliber", "argv", "rounds",
                         "walls", "walls_from", "ops", "units", "state", "noise_floor_pct",
                         "python", "noise_from", "side_artifacts", "executor"}
    assert text["executor"] == {"name": "local", "settings": {}, "state": {}}
    assert text["axis"] == {"name": "X", "variable": "X", "a": "0", "b": "1"}
    assert text["units"][0] == {"id": "mm/r0", "op": "mm", "round": 0, "status": "not_run",
                                "reason": None, "rc": None, "wall_s": None, "device": None,
                                "attempts": 0, "slurm_task": "7_0"}
    assert "slurm_task" not in text["units"][1]  # an executor's facts only where it has them
    assert load(tmp_path) == doc


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d.update(units=None), "units is missing"),
    (lambda d: d["units"][1].pop("op"), "units[1].op is missing"),
    (lambda d: d["units"][0].update(round="0"), "units[0].round is '0'; expected a int"),
    (lambda d: d["units"][0].update(wall_s="abc"), "units[0].wall_s is 'abc'"),
    (lambda d: d.update(argv=["--level", 3]), "argv[1] is 3; expected a str"),
    (lambda d: d["axis"].pop("a"), "axis.a is missing"),
    (lambda d: d["ops"]["mm"].update(rounds=None), "ops.mm.rounds is missing"),
    (lambda d: d.update(walls={"mm": "x"}), "walls.mm is 'x'; expected a number"),
    (lambda d: d["units"].__setitem__(0, "mm/r0"), "units[0] is not a JSON object"),
    # Regression: a unit status `bogus` was accepted, and a resume reran a finished unit.
    (lambda d: d["units"][1].update(status="bogus"),
     "units[1].status (unit 'bad/r0') is 'bogus'; expected one of: ok, failed, error, "
     "not_run, interrupted, timeout, crashed, skipped, submitted, running, excluded"),
    (lambda d: d.update(state="finished"), "state is 'finished'; expected one of: planned, "),
    # Regression: a unit of an operator not in ops was a KeyError traceback on resume, and a
    # second unit of one id was rerun on every resume, which never finished.
    (lambda d: d["units"].append({**d["units"][0], "id": "zz/r0", "op": "zz"}),
     "units[4] (unit 'zz/r0') is of operator 'zz', which ops lacks"),
    (lambda d: d["units"].append(dict(d["units"][0])), "units[4] (unit 'mm/r0') is there twice"),
    (lambda d: d["units"][0].update(round=1), "units[0] (unit 'mm/r0') is not its op and round"),
])
def test_a_bad_campaign_json_is_one_line_naming_the_field(tmp_path, edit, field):
    # Regression: `units: null` or a unit without its op was a traceback on resume.
    document(tmp_path).save(tmp_path)
    doc = json.loads((tmp_path / "campaign.json").read_text())
    edit(doc)
    (tmp_path / "campaign.json").write_text(json.dumps(doc))
    with pytest.raises(UsageError) as info:
        load(tmp_path)
    message = str(info.value)
    assert message.startswith(f"RESUME={str(tmp_path)!r}: campaign.json: ") and field in message
    assert "\n" not in message


def test_an_operators_looks_round_trip_and_an_older_campaign_json_has_none(tmp_path):
    doc = document(tmp_path)
    doc.ops["mm"].looks = [3, 5]
    doc.save(tmp_path)
    assert json.loads((tmp_path / "campaign.json").read_text())["ops"]["mm"]["looks"] == [3, 5]
    assert load(tmp_path).ops["mm"].looks == [3, 5]
    older = json.loads((tmp_path / "campaign.json").read_text())
    del older["ops"]["mm"]["looks"]  # written before looks were recorded: judged once so far
    (tmp_path / "campaign.json").write_text(json.dumps(older))
    assert load(tmp_path).ops["mm"].looks == []


def test_a_suites_campaign_json_holds_each_unit_and_operator_on_a_line_of_its_own(tmp_path):
    # A suite's 2,754 units: indented JSON went through json's Python encoder, 0.12 s a save
    # and two saves a unit. Each unit's line is what grep finds, and the document is the same.
    names = [f"op{i:04d}" for i in range(300)]
    doc = document(tmp_path, rounds=3, ops={op: {"node": f"benchmark/test_{op}.py"}
                                            for op in names})
    doc.unit("op0123/r2").facts = {"slurm_task": "9_1"}
    doc.save(tmp_path)
    lines = (tmp_path / "campaign.json").read_text().splitlines()
    found = [line for line in lines if '"op0123/r2"' in line]
    assert len(found) == 1 and json.loads(found[0].strip().rstrip(",")) == {
        **doc.unit("op0123/r2").to_json(), "slurm_task": "9_1"}
    assert sum('"node": "benchmark/test_op0042.py"' in line for line in lines) == 1
    assert len(lines) < 2 * (len(doc.units) + len(names))
    assert load(tmp_path) == doc


def test_a_bad_value_and_a_unit_not_there_are_one_short_line_in_a_suites_campaign(tmp_path):
    # Regression: a hand-edited ops list, or a unit id of a suite's campaign that is not in
    # it, printed the whole list of a thousand operators or units in the error.
    doc = document(tmp_path, ops={f"op{i:04d}": {"node": "n"} for i in range(900)})
    doc.save(tmp_path)
    with pytest.raises(UsageError) as info:
        doc.unit("zz/r0")
    assert str(info.value).endswith("op0007/r0 and 1792 more") and len(str(info.value)) < 300
    edited = json.loads((tmp_path / "campaign.json").read_text())
    edited["ops"] = sorted(edited["ops"])
    (tmp_path / "campaign.json").write_text(json.dumps(edited))
    with pytest.raises(UsageError, match=r"ops is \['op0000', .*\.\.\.; expected a dict$"
                       ) as info:
        load(tmp_path)
    assert len(str(info.value)) < 300


def test_the_loader_returns_types_not_dicts(tmp_path):
    document(tmp_path).save(tmp_path)
    again = load(tmp_path)
    assert isinstance(again, Campaign) and again.axis == Axis("X", "X", "0", "1")
    assert again.unit("bad/r0").reason == "PREFLIGHT_FAILED check=test_node"
    with pytest.raises(UsageError, match="unit 'zz/r0' is not in this campaign"):
        again.unit("zz/r0")


def test_the_progress_count_moves_on_for_every_unit_that_ends_whatever_its_state(tmp_path):
    # Regression: "[5/11] exit0/r0 failed" then "[5/11] exit3/r0 error": a unit that ended in
    # error, crashed or timed out did not count, so the count stood still or went back.
    doc = campaign.new_campaign(directory=tmp_path, axis=Axis("none", None), caliber={},
                                argv=[], ops={op: {"node": "n"} for op in ("a", "b", "c")},
                                rounds=1, walls={}, walls_from=None)
    doc.unit("a/r0").status = "failed"  # finished before this session
    lines: list[str] = []
    events = UnitEvents(tmp_path, doc, 2, 1, lines.append)
    for unit_id, state in (("b/r0", "error"), ("c/r0", "crashed")):
        task = Task(unit_id, ("true",), tmp_path / f"{unit_id.replace('/', '-')}.log")
        events.started(task, "-")
        events.ended(task, Ended(unit_id, state, 1, 1.0))
    assert [line.split()[0] for line in lines if not line.startswith("[start]")] == [
        "[2/3]", "[3/3]"]


def _units(*ids: str) -> list[Unit]:
    return [campaign.parse_unit_id(i) for i in ids]


def _later(walls):
    return projection.RoundWalls(later=dict(walls))


def _starts(first, later):
    """Worker starts of `first` s in round 0 and `later` s after, half of each a side."""
    return {(zero, side): (first if zero else later) / 2
            for zero in (True, False) for side in ("A", "B")}


def test_the_projection_gives_the_wall_on_1_8_and_64_devices_with_the_mean_for_unknowns():
    units = _units("a/r0", "b/r0", "c/r0", "a/r1", "c/r1", "c/r2")
    line = projection.projection(units, _later({"a": 10.0, "b": 30.0, "d": 5.0}))
    # c has no wall: the mean of a's and b's (20 s); on 8 devices c's later rounds wait for its
    # round 0 (20 s) and then take 20 s more: 40 s, not the 30 s of b's one unit.
    # its spread: a and b drawn again give c 10, 20 or 30 s a unit (80-140 s in all)
    assert line == ("projected wall of 6 units (walls of 2 operators, the mean 20 s for the 1 "
                    "other): 1 device 1.8 min (90%: 1.3 min to 2.3 min, drawing the 2 "
                    "operators again), 8 devices 40 s, 64 devices 40 s")
    suite = [Unit(f"x{n}", r) for r in range(3) for n in range(1112)]
    spans = projection.projection(suite, _later({f"x{n}": 120.0 for n in range(1112)}))
    assert spans is not None and "1 device 111.2 h, 8 devices 13.9 h, 64 devices 1.8 h" in spans
    assert projection.projection(_units("a/r0"), _later({})) is None


def test_later_rounds_wait_for_their_round_0_on_many_devices():
    # Regression (review): units went to devices longest first whatever their round, so an
    # operator's later rounds ran beside its round 0, which they replay: a 100 s round 0 and
    # 60 s later rounds read "8 devices 1.7 min" where they take at least 100 + 60 s.
    units = _units("add/r0", "tanh/r0", "add/r1", "tanh/r1", "add/r2", "tanh/r2")
    walls = projection.RoundWalls({"add": 100.0, "tanh": 5.0}, {"add": 60.0, "tanh": 3.0})
    line = projection.projection(units, walls, devices=(1, 8))
    assert line is not None and line.endswith("1 device 3.9 min, 8 devices 2.7 min")
    # a later round whose round 0 is not in the plan (a resume) waits for nothing
    assert projection.projection(_units("add/r1", "add/r2"), walls, devices=(8,)).endswith(
        "8 devices 1.0 min")


def test_the_projection_of_a_skewed_draw_takes_its_mean_not_its_median():
    # Regression: unknown operators took the known ones' median. Walls are skewed (one
    # attention operator took ten times the others), so a draw's median understated the
    # suite's sum: two of three operators at 2-3 s said 3 s for each of the 97 others.
    draw = {"a": 2.0, "b": 3.0, "c": 100.0}
    units = [Unit(op, 0) for op in [*draw, *(f"x{i}" for i in range(97))]]
    line = projection.projection(units, _later(draw), devices=(1,))
    assert line == ("projected wall of 100 units (walls of 3 operators, the mean 35 s for the "
                    "97 others): 1 device 58.3 min (90%: 5.5 min to 1.9 h, drawing the 3 "
                    "operators again)")


def test_a_projection_from_a_draw_states_how_far_another_draw_would_move_it():
    # Drawn again with replacement, a draw of three where one operator takes 50 times the
    # others' wall gives 97 unknown operators a mean of 2-3 s (all drawn from the quick two,
    # 30% of draws) up to 67 s (the slow one twice): the projection states that spread.
    draw = {"a": 2.0, "b": 3.0, "c": 100.0}
    units = [Unit(op, 0) for op in [*draw, *(f"x{i}" for i in range(97))]]
    line = projection.projection(units, _later(draw), devices=(1, 8))
    assert line is not None and "(90%: 5.5 min to 1.9 h, drawing the 3 operators again)" in line
    assert projection.projection(units, _later(draw), devices=(1, 8)) == line  # seeded
    assert "devices 7.5 min," not in line and line.count("90%") == 1  # one device's alone
    # alike walls: another draw moves nothing
    even = projection.projection(units, _later(dict.fromkeys(draw, 6.0)), devices=(1,))
    assert even is not None and even.endswith("1 device 10.0 min (90%: 10.0 min to 10.0 min, "
                                              "drawing the 3 operators again)")
    # an operator with a round-0 wall and no later one (a campaign cut short) counts in the
    # round-0 mean of the projection and of every draw: the spread holds the projection
    units = [Unit(op, r) for op in ("a", "b", "d", "x") for r in (0, 1)]
    walls = projection.RoundWalls({"a": 1.0, "b": 1.0, "d": 1000.0}, {"a": 1.0, "b": 1.0})
    line = projection.projection(units, walls, devices=(1,))
    assert line is not None and line.endswith(
        "1 device 22.3 min (90%: 16.8 min to 27.9 min, drawing the 3 operators again)")
    # a mean that rests on one operator's wall has no spread to state
    units = _units("a/r0", "a/r1", "b/r0", "b/r1", "c/r0")
    walls = projection.RoundWalls({"a": 10.0}, {"a": 1.0, "b": 1.0})
    assert "90%" not in (projection.projection(units, walls) or "x")
    # no operator unknown, or only one known: nothing to draw again
    assert "90%" not in (projection.projection(units[:3], _later(draw)) or "")
    assert "90%" not in (projection.projection(units, _later({"a": 2.0})) or "")


def test_the_projection_takes_round_0_from_the_walls_of_round_0():
    # Regression: each operator's median unit stood for its round 0 too, which pays side A's
    # tuning and torch's reference: a campaign's projection left round 0's cost out.
    units = _units("a/r0", "b/r0", "a/r1", "b/r1", "a/r2", "b/r2")
    walls = projection.RoundWalls({"a": 40.0}, {"a": 10.0})
    line = projection.projection(units, walls)
    # b: round 0 the mean of round 0's walls (40 s), later rounds the mean wall (10 s); on
    # many devices each operator's later rounds run side by side once its round 0 ended
    assert line == ("projected wall of 6 units (round 0 from the walls of 1 operator, the "
                    "mean 40 s for the 1 other; later rounds from the walls of 1 operator, "
                    "the mean 10 s for the 1 other): 1 device 2.0 min, 8 devices 50 s, "
                    "64 devices 50 s")
    # the mean of round 0 is the campaign's operators', where any has one
    walls = projection.RoundWalls({"a": 40.0, "z": 1000.0}, {"a": 10.0})
    assert projection.projection(units, walls) == line


def test_round_0_and_later_walls_come_from_the_units_that_ran_to_their_end(tmp_path):
    doc = document(tmp_path, rounds=3, ops={"mm": {"node": "mm"}, "add": {"node": "add"}})
    for unit in doc.units:
        unit.status, unit.wall_s = "ok", (30.0 if unit.op == "mm" else 8.0) / (unit.round + 1)
    doc.unit("add/r0").wall_s = None  # not finished
    # Regression (review): an interrupted unit's wall (3 s into a 9 s unit) stood for its
    # operator's, and a timed-out one's is what the plan would pay again
    doc.unit("add/r1").status = "interrupted"
    doc.unit("mm/r2").status = "timeout"
    doc.save(tmp_path)
    # Regression (review): the upper median of two later rounds was the larger one
    assert projection.walls_by_round(tmp_path) == projection.RoundWalls(
        {"mm": 30.0}, {"mm": 12.5, "add": 8.0 / 3})


def test_a_campaign_of_round_0_alone_projects_later_rounds_as_round_0_and_says_so(tmp_path):
    # Regression (review): with no later round, later rounds took round 0's walls, worker
    # starts inside, and the line said "0 s later" for their starts.
    doc = document(tmp_path, rounds=1, ops={"mm": {"node": "mm"}})
    unit = doc.unit("mm/r0")
    unit.status, unit.wall_s, unit.device = "ok", 30.0, "0"
    unit.started_utc = "2026-12-06T10:00:00+00:00"
    doc.save(tmp_path)
    _run_files(tmp_path / "mm/A/r0", 6.0, "the first of its environment")
    _run_files(tmp_path / "mm/B/r0", 4.0, "the first of its environment")
    walls = projection.walls_by_round(tmp_path).filled()
    assert walls.first == walls.later == {"mm": 20.0}
    assert walls.start(1, "AB") == walls.start(0, "AB") == 10.0
    line = projection.projection(_units("mm/r0", "mm/r1"), walls, devices=(1,))
    assert line == ("projected wall of 2 units (round 0 from the walls of 1 operator; later "
                    "rounds from the walls of 1 operator; worker starts once a round and "
                    "device, 10 s in round 0 and 10 s later; later rounds as round 0 (no later "
                    "round ran): an overstatement): 1 device 1.0 min")


def test_a_resumed_campaign_is_projected_from_its_own_units_first(tmp_path):
    # Regression (review): a resume's dry run took each operator's upper median over all its
    # units, round 0's among them, for every round it added (45 s where 24 s were paid).
    source, here, resumed = _resumed(tmp_path, ("mm", "add"), {0: 50.0, 1: 20.0})
    for unit in resumed.units:
        unit.status, unit.wall_s = "ok", {0: 30.0, 1: 10.0}[unit.round]
    resumed.unit("add/r1").status, resumed.unit("add/r1").wall_s = "interrupted", 2.0
    resumed.save(here)
    walls = projection.for_plan(load(here), here)
    # its own round 0 and round 1 where it has them (add/r1 was interrupted); WALLS_FROM's
    # for the rest
    assert (walls.first, walls.later) == ({"mm": 30.0, "add": 30.0}, {"mm": 10.0, "add": 20.0})
    assert walls.notes == ("the campaign's own units first",)
    line = projection.projection(_units("add/r1", "mm/r2", "add/r2"), walls, devices=(1,))
    assert line is not None and line.endswith("1 device 50 s")
    # a source of another backend is named: its walls are another machine's
    elsewhere = load(source)
    elsewhere.caliber["backend"] = "cuda"
    elsewhere.save(source)
    assert projection.for_plan(load(here), here).notes == (
        "WALLS_FROM ran on backend cuda, this plan on cpu", "the campaign's own units first")
    # Regression (review): a WALLS_FROM changed or gone since is named, not read as given
    (source / "campaign.json").write_text("{}")
    walls = projection.for_plan(load(here), here)
    assert walls.later == {"mm": 10.0} and "WALLS_FROM unreadable now" in walls.notes[0]
    again = load(here)
    again.walls_from = str(tmp_path / "gone")
    assert "WALLS_FROM unreadable now" in projection.for_plan(again, here).notes[0]


def test_a_resume_after_round_0_takes_walls_from_for_its_later_rounds(tmp_path):
    # Regression (review): a campaign that had run round 0 alone gave its later rounds its
    # round-0 walls, over WALLS_FROM's own later rounds: 32 s where 21 s were paid.
    _, here, resumed = _resumed(tmp_path, ("mm",), {0: 50.0, 1: 21.0})
    resumed.unit("mm/r0").status, resumed.unit("mm/r0").wall_s = "ok", 32.0
    resumed.save(here)
    line = projection.projection(_units("mm/r1"), projection.for_plan(load(here), here),
                                 devices=(1,))
    assert line == ("projected wall of 1 units (later rounds from the walls of 1 operator; "
                    "the campaign's own units first): 1 device 21 s")


def test_a_dry_run_says_why_it_projects_nothing(tmp_path):
    # Regression (review): a campaign with no finished unit and a WALLS_FROM unreadable now
    # printed no projection and no word of why, while its units line named WALLS_FROM.
    from harness.campaign import dryrun
    from harness.executors.local import LocalExecutor
    here = tmp_path / "campaign"
    here.mkdir()
    planned = campaign.new_campaign(
        directory=here, axis=Axis("X", "X"), caliber={"backend": "cpu"}, argv=[],
        ops={"mm": {"node": "mm"}}, rounds=2, walls={"mm": 9.0}, walls_from=tmp_path / "gone")
    lines = dryrun.describe(planned, LocalExecutor([None]), here)
    assert lines[-1].startswith("no projected wall: WALLS_FROM unreadable now (WALLS_FROM=")
    assert "is not accepted; expected a campaign directory" in lines[-1]


def test_a_source_in_workers_and_a_plan_in_fresh_processes_are_named_apart(tmp_path):
    # Regression (review): fresh processes pay more than a worker's start (on the cpu backend
    # a WORKERS=0 campaign took 137.5 s where its projection from a WORKERS=1 one said 84 s):
    # the line says which way its walls differ from the plan's.
    _one_unit(tmp_path, 30.0)
    _run_files(tmp_path / "mm/B/r0", 4.0, "the first of its environment")
    walls = projection.walls_by_round(tmp_path)
    assert walls.resident == ("A", "B")
    fresh = projection.projection(_units("mm/r0"), walls, devices=(1,), workers="0")
    assert fresh is not None and ("its walls ran both sides in workers, this plan neither "
                                  "side: a run moved to a fresh process costs more than the "
                                  "start counted here, one moved to a worker less") in fresh
    same = projection.projection(_units("mm/r0"), walls, devices=(1,))
    assert same is not None and "its walls ran" not in same
    for side in "AB":  # fresh processes on both sides
        (tmp_path / f"mm/{side}/r0/run_identity.json").write_text(
            json.dumps({"launch": [{"kind": "process"}]}))
    walls = projection.walls_by_round(tmp_path)
    assert walls.resident == ()
    line = projection.projection(_units("mm/r0"), walls, devices=(1,), workers="A")
    assert line is not None and "its walls ran neither side in workers, this plan side A" in line


def test_a_rounds_start_paid_by_an_interrupted_unit_still_counts(tmp_path):
    # Regression (review): the round's worker start was read from counted units alone, so a
    # round whose first unit was interrupted (Ctrl-C on several devices) lost its start.
    doc = document(tmp_path, rounds=2, ops={"a": {"node": "a"}, "b": {"node": "b"}})
    for unit, at in ((doc.unit("a/r0"), "00"), (doc.unit("b/r0"), "01"),
                     (doc.unit("a/r1"), "02"), (doc.unit("b/r1"), "03")):
        unit.status, unit.wall_s, unit.device = "ok", 10.0, "0"
        unit.started_utc = f"2026-12-06T10:00:{at}+00:00"
    doc.unit("a/r1").status = "interrupted"
    doc.save(tmp_path)
    _run_files(tmp_path / "a/B/r1", 3.0, "its generation 'r1' is new")
    _run_files(tmp_path / "a/A/r1", 2.0, "its generation 'r1' is new")
    walls = projection.walls_by_round(tmp_path)
    assert walls.start(1, "AB") == 5.0 and walls.later == {"b": 10.0}


def test_a_batchs_interrupted_or_crashed_operator_lends_no_wall(tmp_path):
    # Regression (review): ops_status.csv's partial walls stood for whole operators.
    (tmp_path / "ops_status.csv").write_text(
        "op,status,wall_s\nadd,ok,9.5\nsum,interrupted,0.5\nsoftmax,crashed,1\n"
        "tanh,timeout,60\nexp,skipped,0.2\n")
    assert campaign.walls_from(tmp_path) == {"add": 9.5, "tanh": 60.0, "exp": 0.2}


def test_walls_from_is_kept_absolute_for_a_resume_run_elsewhere(tmp_path, monkeypatch):
    # Regression (review): WALLS_FROM=src was kept as given, so a resume's dry run read
    # another folder, or none, from another working directory.
    monkeypatch.chdir(tmp_path)
    planned = campaign.new_campaign(
        directory=tmp_path / "c", axis=Axis("X", "X"), caliber={"backend": "cpu"}, argv=[],
        ops={"mm": {"node": "mm"}}, rounds=1, walls={}, walls_from=Path("src"))
    assert planned.walls_from == str(tmp_path / "src")


def test_a_batch_as_walls_from_gives_a_unit_two_of_its_runs(tmp_path):
    # Regression (review): a batch's wall is one run; a campaign's unit runs two sides, so a
    # batch's walls read "1 device 25 s" for units that took 35 s.
    (tmp_path / "batch").mkdir()
    (tmp_path / "batch" / "ops_status.csv").write_text("op,status,wall_s\nmm,ok,12.5\n")
    planned = campaign.new_campaign(
        directory=tmp_path / "c", axis=Axis("X", "X"), caliber={"backend": "cpu"}, argv=[],
        ops={"mm": {"node": "mm"}}, rounds=2, walls={"mm": 12.5},
        walls_from=tmp_path / "batch")
    walls = projection.for_plan(planned, tmp_path / "c")
    assert (walls.first, walls.later) == ({}, {"mm": 25.0})
    line = projection.projection(_units("mm/r0", "mm/r1"), walls, devices=(1,))
    assert line == ("projected wall of 2 units (walls of 1 operator; a batch's walls, one run "
                    "each: a unit takes two): 1 device 50 s")


def _run_files(run_dir, startup, new_because=None):
    run_dir.mkdir(parents=True)
    launch = {"kind": "worker", "pid": 1, "session": 1}
    if new_because:
        launch["new_because"] = new_because
    (run_dir / "run_identity.json").write_text(json.dumps({"launch": [launch]}))
    (run_dir / "time_breakdown.json").write_text(
        json.dumps({"wall_s": 30.0, "phases": {"startup": startup}}))


def _per_unit(path):
    found = load(path)
    return projection.unit_starts(projection.worker_starts(path, found), found)


def test_a_rounds_worker_starts_are_paid_once_a_round_not_by_every_operator(tmp_path):
    # Regression: the first unit of each round paid its sides' worker starts (10-16 s on an
    # H100 for a worker that imports FlagGems) inside its wall, so a draw of twelve charged
    # every one of a suite's 918 operators a twelfth of them.
    doc = document(tmp_path, rounds=2, ops={"mm": {"node": "mm"}, "add": {"node": "add"}})
    walls = {"mm/r0": 40.0, "add/r0": 8.0, "mm/r1": 20.0, "add/r1": 4.0}
    started = {"mm/r0": "10:00:00", "add/r0": "10:00:40", "mm/r1": "10:00:50",
               "add/r1": "10:01:10"}
    for unit in doc.units:
        unit.status, unit.wall_s, unit.device = "ok", walls[unit.id], "0"
        unit.started_utc = f"2026-12-06T{started[unit.id]}+00:00"
    doc.save(tmp_path)
    _run_files(tmp_path / "mm/A/r0", 12.0, "the first of its environment")
    _run_files(tmp_path / "mm/B/r0", 4.0, "the first of its environment")
    _run_files(tmp_path / "add/A/r0", 0.2)  # a worker reused: not a start
    _run_files(tmp_path / "add/B/r0", 3.0, "the last one of its environment retired")
    _run_files(tmp_path / "mm/A/r1", 3.0, "its generation 'r1' is new")
    _run_files(tmp_path / "mm/B/r1", 5.0, "its generation 'r1' is new")
    # mm/r0 and mm/r1 started their rounds; add's restart is its own (mm retired the worker)
    assert projection.worker_starts(tmp_path, load(tmp_path)) == {
        (0, "0", "A"): ("mm/r0", 12.0), (0, "0", "B"): ("mm/r0", 4.0),
        (1, "0", "A"): ("mm/r1", 3.0), (1, "0", "B"): ("mm/r1", 5.0)}
    assert _per_unit(tmp_path) == {"mm/r0": 16.0, "mm/r1": 8.0}
    earlier = projection.walls_by_round(tmp_path)
    assert earlier == projection.RoundWalls(
        {"mm": 24.0, "add": 8.0}, {"mm": 12.0, "add": 4.0},
        {(True, "A"): 12.0, (True, "B"): 4.0, (False, "A"): 3.0, (False, "B"): 5.0},
        resident=("A", "B"))
    units = [Unit(op, r) for r in range(3) for op in ("mm", "add", "x", "y")]
    line = projection.projection(units, earlier, devices=(1, 2))
    # 24 + 8 + 2 x 16 (the mean) in round 0, 2 x (12 + 4 + 2 x 8) later: 128 s, plus the
    # starts once: 16 + 2 x 8 = 32 s on each device; drawn again, x and y take add's walls
    # (128 s in all) or mm's (192 s) or between. Two devices, in the plan's order, each
    # paying a round's starts before its first unit of it: 96 s
    assert line == ("projected wall of 12 units (round 0 from the walls of 2 operators, the "
                    "mean 16 s for the 2 others; later rounds from the walls of 2 operators, "
                    "the mean 8 s for the 2 others; worker starts once a round and device, 16 s "
                    "in round 0 and 8 s later): "
                    "1 device 2.7 min (90%: 2.1 min to 3.2 min, drawing the 2 operators "
                    "again), 2 devices 1.6 min")
    # Regression (review): WORKERS=0 runs every side in a fresh process, each run paying a
    # start that the line set apart once a round: 40% under what such a campaign took
    fresh = projection.projection(units, earlier, devices=(1,), workers="0")
    # 128 s + each run's start: 4 units x 16 s in round 0, 8 x 8 s later = 256 s
    assert fresh is not None and "every run in fresh processes (WORKERS=0), their starts " \
        "in every unit, 16 s in round 0 and 8 s later" in fresh and "once a round" not in fresh
    assert fresh.endswith("1 device 4.3 min (90%: 3.7 min to 4.8 min, drawing the 2 "
                          "operators again)")
    one_side = projection.projection(units, earlier, devices=(1,), workers="B")
    # side B once a round (4 + 2 x 5 = 14 s), side A in every run (4 x 12 + 8 x 3 = 72 s)
    assert one_side is not None and "worker starts once a round and device, 4 s in round 0 " \
        "and 5 s later; side A's runs in fresh processes (WORKERS=B), their starts in every " \
        "unit, 12 s in round 0 and 3 s later" in one_side
    assert one_side.endswith("1 device 3.6 min (90%: 3.0 min to "
                                                      "4.1 min, drawing the 2 operators again)")


def test_starts_of_two_sides_paid_by_two_units_are_one_rounds_start(tmp_path):
    # Regression (review): the starts were averaged over the units that paid any, so side A's
    # start in one unit and side B's in the next read as two rounds of half the start.
    doc = document(tmp_path, rounds=1, ops={"a": {"node": "a"}, "b": {"node": "b"}})
    for unit, at in ((doc.unit("a/r0"), "00"), (doc.unit("b/r0"), "01")):
        unit.status, unit.wall_s, unit.device = "ok", 20.0, "0"
        unit.started_utc = f"2026-12-06T10:00:{at}+00:00"
    doc.save(tmp_path)
    _run_files(tmp_path / "a/A/r0", 6.0, "the first of its environment")
    _run_files(tmp_path / "a/B/r0", 0.1)
    _run_files(tmp_path / "b/A/r0", 0.1)
    _run_files(tmp_path / "b/B/r0", 4.0, "the first of its environment")
    walls = projection.walls_by_round(tmp_path)
    assert walls.start(0, "AB") == 10.0 and walls.first == {"a": 14.0, "b": 16.0}


def test_a_rounds_start_is_found_past_a_first_unit_that_started_no_worker(tmp_path):
    # Regression (review): the round's first unit alone was read, so a skipped first unit
    # left the next one's worker start inside that operator's wall.
    doc = document(tmp_path, rounds=1, ops={"a": {"node": "a"}, "b": {"node": "b"}})
    for unit, wall, at in ((doc.unit("a/r0"), 0.4, "00"), (doc.unit("b/r0"), 20.0, "01")):
        unit.status, unit.wall_s = "ok", wall
        unit.started_utc = f"2026-12-06T10:00:{at}+00:00"
    doc.save(tmp_path)
    _run_files(tmp_path / "b/A/r0", 7.0, "the first of its environment")
    _run_files(tmp_path / "b/B/r0", 3.0, "the first of its environment")
    assert _per_unit(tmp_path) == {"b/r0": 10.0}


def test_each_device_pays_the_starts_of_the_rounds_it_ran():
    # Regression (review): every round's starts went to the busiest device, even where 64
    # devices each ran one unit of one round.
    units = [Unit(op, r) for r in range(3) for op in "abcd"]
    walls = projection.RoundWalls(later=dict.fromkeys("abcd", 10.0), starts=_starts(16.0, 8.0))
    line = projection.projection(units, walls, devices=(1, 64))
    # one device: 120 s + 16 + 2 x 8; 64 devices: a round-0 unit (16 s of starts) then a
    # later one of its operator (8 s) on the device it freed: 20 + 24 s
    assert line is not None and line.endswith("1 device 2.5 min, 64 devices 44 s")


def test_unreadable_run_files_count_no_start(tmp_path):
    doc = document(tmp_path, rounds=1, ops={"mm": {"node": "mm"}})
    unit = doc.unit("mm/r0")
    unit.status, unit.wall_s, unit.started_utc = "ok", 9.0, "2026-12-06T10:00:00+00:00"
    doc.save(tmp_path)
    _run_files(tmp_path / "mm/A/r0", "soon", "the first of its environment")
    (tmp_path / "mm/B/r0").mkdir(parents=True)
    (tmp_path / "mm/B/r0/run_identity.json").write_bytes(b"\x00\xff binary")
    assert _per_unit(tmp_path) == {}
    assert projection.walls_by_round(tmp_path).first == {"mm": 9.0}
    for startup in ("12", True, float("nan"), -3.0):  # a number of seconds, or nothing
        (tmp_path / "mm/A/r0/time_breakdown.json").write_text(
            json.dumps({"wall_s": 30.0, "phases": {"startup": startup}}))
        assert _per_unit(tmp_path) == {}
    # two sessions (a capture rescued): their startup holds the gap between them, not a start
    (tmp_path / "mm/A/r0/time_breakdown.json").write_text(
        json.dumps({"sessions": 2, "wall_s": 30.0, "phases": {"startup": 6.0}}))
    assert _per_unit(tmp_path) == {}
    (tmp_path / "mm/A/r0/time_breakdown.json").write_text(
        json.dumps({"sessions": 1, "wall_s": 30.0, "phases": {"startup": 6.0}}))
    assert _per_unit(tmp_path) == {"mm/r0": 6.0}
    assert projection.walls_by_round(tmp_path).first == {"mm": 3.0}


def test_resume_of_a_folder_of_campaigns_lists_them_newest_first(tmp_path):
    # Regression: RESUME=runs/ab/none-tanh (no timestamp) said only "not a campaign directory".
    older = tmp_path / "ab" / "none-tanh" / "20261201-100000"
    newer = tmp_path / "ab" / "none-tanh" / "20261202-090000"
    for directory, state in ((older, "done"), (newer, "interrupted")):
        directory.mkdir(parents=True)
        doc = document(directory)
        doc.state = state
        doc.save(directory)
    (tmp_path / "ab" / "none-add" / "20261130-080000").mkdir(parents=True)  # no campaign.json
    for folder in (tmp_path, tmp_path / "ab", tmp_path / "ab" / "none-tanh"):
        with pytest.raises(UsageError) as info:
            load(folder)
        assert str(info.value) == (
            f"RESUME={str(folder)!r} is not a campaign directory (no campaign.json); it holds 2 "
            f"campaign(s), newest first: {newer} (interrupted), {older} (done); give one, e.g. "
            f"RESUME={str(newer)!r}")
    with pytest.raises(UsageError) as info:
        load(tmp_path / "ab" / "none-add")
    assert str(info.value).endswith("is not a campaign directory (no campaign.json)")


def test_a_campaign_json_nested_too_deep_is_refused_in_one_line(tmp_path):
    # Regression (review): WALLS_FROM or RESUME at such a file raised RecursionError.
    (tmp_path / "campaign.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UsageError, match="campaign.json nests too deep to be a campaign"):
        load(tmp_path, "WALLS_FROM")


def test_a_run_of_two_launches_counts_no_start(tmp_path):
    # Regression (review): a capture rescue whose first session wrote no line reads one
    # session, whose startup holds the whole first attempt: not a worker's start.
    _one_unit(tmp_path, 9.0)
    assert _per_unit(tmp_path) == {"mm/r0": 6.0}
    (tmp_path / "mm/A/r0/run_identity.json").write_text(json.dumps({"launch": [
        {"kind": "worker", "new_because": "the first of its environment"},
        {"kind": "worker", "new_because": "the last one of its environment retired"}]}))
    assert _per_unit(tmp_path) == {}


def _one_unit(tmp_path, wall):
    """A campaign of mm's round 0, finished in `wall` s, its side A starting a worker (6 s)."""
    doc = document(tmp_path, rounds=1, ops={"mm": {"node": "mm"}})
    unit = doc.unit("mm/r0")
    unit.status, unit.wall_s, unit.started_utc = "ok", wall, "2026-12-06T10:00:00+00:00"
    doc.save(tmp_path)
    _run_files(tmp_path / "mm/A/r0", 6.0, "the first of its environment")


def _resumed(tmp_path, ops, walls):
    """A finished source campaign of `ops` at 2 rounds of `walls` (by round), and a campaign
    of the same operators planned from it (its folder and document): WALLS_FROM's and a
    resume's own units."""
    source = tmp_path / "source"
    source.mkdir()
    doc = document(source, rounds=2, ops={op: {"node": op} for op in ops})
    for unit in doc.units:
        unit.status, unit.wall_s = "ok", walls[unit.round]
    doc.save(source)
    here = tmp_path / "campaign"
    here.mkdir()
    planned = campaign.new_campaign(
        directory=here, axis=Axis("X", "X"), caliber={"backend": "cpu"}, argv=[],
        ops={op: {"node": op} for op in ops}, rounds=2, walls={}, walls_from=source)
    return source, here, planned


def test_operators_known_only_in_round_0_are_still_projected_and_named_by_round():
    # Regression (review): a plan whose operators had round-0 walls but no later ones
    # projected nothing, or said "no projected wall" for a reason that was not why; a plan of
    # round 0 alone named the later rounds' walls ("the mean 5 s for the 1 other") it never
    # used.
    walls = projection.RoundWalls({"add": 5.0, "tanh": 6.0, "sum": 7.0}, {"add": 3.0})
    units = _units("tanh/r0", "sum/r0", "tanh/r1", "sum/r1")
    line = projection.projection(units, walls, devices=(1,))
    # later rounds take the later walls known (add's 3 s), for want of the plan's own
    assert line == ("projected wall of 4 units (round 0 from the walls of 2 operators; later "
                    "rounds from the walls of 0 operators, the mean 3 s for the 2 others): "
                    "1 device 19 s")
    only = projection.projection(_units("add/r0", "tanh/r0", "sum/r0"), walls, devices=(1,))
    assert only == ("projected wall of 3 units (round 0 from the walls of 3 operators): "
                    "1 device 18 s")


def test_a_later_start_measured_stays_where_later_walls_are_filled_from_round_0():
    walls = projection.RoundWalls({"mm": 10.0}, {}, {(True, "A"): 4.0, (False, "A"): 1.0})
    filled = walls.filled()
    assert filled.later == {"mm": 10.0} and filled.start(1, "A") == 1.0


def test_a_round_whose_worker_start_could_not_be_read_says_so(tmp_path):
    # Regression (review): a side whose round's first run had two launches counted no start
    # for that round at all, and the line read "1 s in round 0" as if measured.
    _one_unit(tmp_path, 30.0)
    (tmp_path / "mm/A/r0/run_identity.json").write_text(json.dumps({"launch": [
        {"kind": "worker", "pid": 1, "new_because": "the first of its environment"},
        {"kind": "worker", "pid": 2, "new_because": "the last one of its environment retired"}
    ]}))
    _run_files(tmp_path / "mm/B/r0", 4.0, "the first of its environment")
    walls = projection.walls_by_round(tmp_path)
    assert walls.notes == ("no worker start read of side A in round 0: 0 s taken",)


def test_a_resume_names_a_walls_from_run_otherwise_than_its_own_units(tmp_path):
    # Regression (review): the campaign's own units in workers hid that WALLS_FROM's, which
    # gave its later rounds, ran in fresh processes: 43 s projected where 16.8 s were paid.
    _, here, resumed = _resumed(tmp_path, ("mm",), {0: 50.0, 1: 21.0})
    for side in "AB":
        (tmp_path / "source" / "mm" / side / "r0").mkdir(parents=True)
        (tmp_path / "source" / "mm" / side / "r0" / "run_identity.json").write_text(
            json.dumps({"launch": [{"kind": "process"}]}))
    resumed.unit("mm/r0").status, resumed.unit("mm/r0").wall_s = "ok", 32.0
    resumed.unit("mm/r0").started_utc = "2026-12-06T10:00:00+00:00"
    resumed.save(here)
    _run_files(here / "mm/A/r0", 6.0, "the first of its environment")
    _run_files(here / "mm/B/r0", 4.0, "the first of its environment")
    walls = projection.for_plan(load(here), here)
    assert "WALLS_FROM ran neither side in workers, the campaign's own units both sides" \
        in walls.notes


def test_a_mixed_plans_one_device_figure_lies_inside_its_own_spread():
    # Regression (review): a draw again took every known operator of the plan for both
    # rounds, where each round's mean is taken over that round's known ones alone: a resume
    # left with round 0 of some operators and later rounds of others read "1 device 1.2 min
    # (90%: 6.7 min to 17.7 min ...)".
    first = {"b": 10.0, "c": 10.0, "d": 1000.0, "e": 1000.0, "f": 1000.0, "g": 1000.0}
    units = [Unit("a", 0), Unit("b", 0), Unit("c", 0), *(Unit(op, 1) for op in "defg")]
    line = projection.projection(units, projection.RoundWalls(first, dict.fromkeys(first, 10.0)),
                                 devices=(1,))
    # a/r0 takes the mean of b's and c's round 0 (10 s): 30 s of round 0, 40 s later
    assert line is not None and line.endswith(
        "1 device 1.2 min (90%: 1.2 min to 1.2 min, drawing the 2 operators again)")
