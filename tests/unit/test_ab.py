"""A/B campaigns of one switch: axis names, same configs on both sides, liveness."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness import axes, backends, stats
from harness.axes import Axis, liveness
from harness.campaign import ab
from harness.errors import UsageError
from harness.report import abjson
from harness.report.abresult import AbRow
from harness.settings import abspec, spec


def settings(**flags):
    return spec.resolve({"backend": "cpu", **flags}, {}, which=lambda _: None)


@pytest.mark.parametrize(("backend", "name", "variable"), [
    ("musa", "RLC_ENHANCE", "FLAGTREE_MUSA_RLC_ENHANCE"),
    ("cuda", "RLC_ENHANCE", "FLAGTREE_RLC_ENHANCE"),
    ("cuda", "FOLDSCALE", "FLAGGEMS_MXFP4_FOLDSCALE"),
    ("cpu", "OMP_NUM_THREADS", "OMP_NUM_THREADS"),
    ("cpu", "none", None),
])
def test_axis_resolves_as_the_backend_spells_it(backend, name, variable):
    assert axes.resolve(name, backends.get(backend)).variable == variable


def test_a_short_name_the_backend_cannot_spell_is_refused_with_the_accepted_names():
    with pytest.raises(UsageError) as info:
        axes.resolve("RLC_ENHANCE", backends.get("rocm"))
    assert "AXIS='RLC_ENHANCE'" in str(info.value) and "FOLDSCALE" in str(info.value)
    with pytest.raises(UsageError):
        axes.resolve("rlc", backends.get("cuda"))


@pytest.mark.parametrize(("backend", "given", "closest"), [
    ("cuda", "DISABLE_PTXAS_OPTS", "DISABLE_PTXAS_OPT"),
    ("cpu", "OMP_NUM_THREAD", "OMP_NUM_THREADS"),
    ("musa", "FLAGTREE_MUSA_RLC_ENHANCED", "FLAGTREE_MUSA_RLC_ENHANCE"),
])
def test_a_misspelled_switch_is_refused_with_the_closest_names_not_taken_as_a_variable(
        backend, given, closest):
    # AXIS=DISABLE_PTXAS_OPTS once set a variable nothing reads: on cpu never caught, on cuda
    # only after the whole campaign (AXIS_NOT_LIVE, exit 6).
    with pytest.raises(UsageError) as info:
        axes.resolve(given, backends.get(backend))
    message = str(info.value)
    assert f"AXIS={given!r}" in message and f"did you mean {closest}" in message
    assert "env:NAME" in message and "\n" not in message


def test_a_switch_of_another_backend_says_whose_it_is():
    with pytest.raises(UsageError) as info:
        axes.resolve("DISABLE_PTXAS_OPT", backends.get("cpu"))
    assert "DISABLE_PTXAS_OPT is a switch of BACKEND=cuda, not of cpu" in str(info.value)


@pytest.mark.parametrize(("backend", "name", "variable"), [
    ("cuda", "DISABLE_PTXAS_OPT", "DISABLE_PTXAS_OPT"),
    ("musa", "FLAGTREE_MUSA_RLC_ENHANCE", "FLAGTREE_MUSA_RLC_ENHANCE"),
    ("rocm", "FLAGGEMS_MXFP4_FOLDSCALE", "FLAGGEMS_MXFP4_FOLDSCALE"),
])
def test_a_switch_is_also_known_by_its_full_variable_name(backend, name, variable):
    assert axes.resolve(name, backends.get(backend)) == Axis(name, variable)


def test_any_other_variable_is_an_axis_only_spelt_env_name():
    assert axes.resolve("env:MY_SWITCH", backends.get("cpu")) == Axis("MY_SWITCH",
                                                                             "MY_SWITCH")
    with pytest.raises(UsageError, match="is not a switch BACKEND=cpu knows"):
        axes.resolve("MY_SWITCH", backends.get("cpu"))
    for bad in ("env:", "env:1X", "env:A-B", "env:ZL_AXIS", "env:CUDA_VISIBLE_DEVICES",
                "env:" + "X" * 101):
        with pytest.raises(UsageError, match="expected env:NAME"):
            axes.resolve(bad, backends.get("cuda"))


def test_a_r0_records_and_every_other_run_replays_it_strictly(tmp_path):
    base = settings()
    first, later = ab.SideRun("A", 0, "0"), ab.SideRun("B", 1, "1")
    s0 = ab.side_settings(base, first, tmp_path, NONE)
    assert s0.isolate_tuner_cache and s0.record and s0.replay_from is None
    s1 = ab.side_settings(base, later, tmp_path, NONE)
    assert s1.replay_from == tmp_path / "A" / "r0" and s1.replay_strict and s1.isolate_tuner_cache


def test_replay_from_pins_every_run_a_r0_included_to_the_earlier_records(tmp_path):
    records = tmp_path / "earlier"
    base = settings(replay_from=str(records))
    for step in (ab.SideRun("A", 0, "0"), ab.SideRun("B", 0, "1"), ab.SideRun("B", 1, "1")):
        pinned = ab.side_settings(base, step, tmp_path / "campaign", NONE)
        assert pinned.replay_from == records and pinned.replay_strict and pinned.record


NONE = Axis("none", None)


@pytest.mark.parametrize("backend,variable,expected", [
    ("cuda", None, "once"),  # an A/A: nothing differs, torch least of all
    ("cuda", "DISABLE_PTXAS_OPT", "once"),  # Triton's ptxas: FlagGems' kernels only
    ("cuda", "FLAGTREE_RLC_ENHANCE", "once"),
    ("musa", "FLAGTREE_MUSA_RLC_ENHANCE", "once"),
    ("cuda", "TRITON_ALWAYS_COMPILE", "once"),
    ("cuda", "FLAGGEMS_MXFP4_FOLDSCALE", "once"),
    ("cuda", "PYTORCH_CUDA_ALLOC_CONF", "every"),  # reaches torch's allocator
    ("cpu", "OMP_NUM_THREADS", "every"),  # torch's cpu kernels read it
    ("musa", "DISABLE_PTXAS_OPT", "every"),  # not a switch of that stack's compiler
])
def test_auto_times_torchs_reference_once_only_where_the_axis_cannot_reach_torch(
        backend, variable, expected):
    base = spec.resolve({"backend": backend, "runner": "host"}, {}, which=lambda _: None)
    axis = Axis("none" if variable is None else "x", variable)
    assert ab.campaign_baseline(base, axis) == expected
    # two stacks may have two torches: their reference is timed in every run
    assert ab.campaign_baseline(base, Axis("python", None, "/a/python", "/b/python")) == "every"


def test_two_stacks_tune_each_side_for_itself_and_a_switch_replays_a_r0_on_b(tmp_path):
    switch, stacks = Axis("X", "SOME_SWITCH"), axes.resolve("python", backends.get("cpu"))
    assert (switch.tune, stacks.tune, stacks.side_env("B"), switch.python("B")) == (
        "replay", "each", {}, None)
    stacks = Axis("python", None, "/a/python", "/b/python")
    assert stacks.python("B") == "/b/python"
    steps = [ab.SideRun(side, r, "") for r, side in ((0, "A"), (0, "B"), (1, "A"), (1, "B"))]
    assert [ab.replay_source(settings(), s, tmp_path, "replay") for s in steps] == [
        None, tmp_path / "A" / "r0", tmp_path / "A" / "r0", tmp_path / "A" / "r0"]
    assert [ab.replay_source(settings(), s, tmp_path, "each") for s in steps] == [
        None, None, tmp_path / "A" / "r0", tmp_path / "B" / "r0"]


def test_baseline_once_times_the_reference_in_round_0_on_both_sides_alone(tmp_path):
    # a kernel timed right after the reference reads apart (13-19% on an H200's microsecond
    # rows): A/r0 alone timing it made round 0 of an A/A read those rows 6-19% apart
    steps = [ab.SideRun("A", 0, "0"), ab.SideRun("B", 0, "1"), ab.SideRun("B", 1, "1"),
             ab.SideRun("A", 1, "0")]
    timed = [ab.side_settings(settings(), s, tmp_path, NONE).times_baseline for s in steps]
    assert timed == [True, True, False, False]
    for given, expected in (("every", True), ("off", False)):
        assert all(ab.side_settings(settings(baseline=given), s, tmp_path, NONE).times_baseline
                   is expected for s in steps)


def doc(*hashes):
    return {"compiled_artifacts": list(hashes)}


def test_liveness_from_artifacts_then_from_the_compilers_own_files(tmp_path):
    axis = Axis("X", "SOME_SWITCH_NOBODY_READS")
    live = liveness.compiler_check({"A": [doc("a", "b")], "B": [doc("a", "c")]}, axis,
                                   sys.executable)
    assert live[0] == "live"
    # no triton in this interpreter: the name cannot be found, so equal artifacts mean dead
    dead = liveness.compiler_check({"A": [doc("a", "b")], "B": [doc("a")]}, axis, sys.executable)
    assert dead[0] == "not_live" and dead[1].startswith("AXIS_NOT_LIVE axis=X")
    found = liveness.compiler_check({"A": [doc()], "B": [doc()]}, axis, sys.executable)
    assert found[0] == "unchecked"


def test_compiler_mentions_scans_the_installed_package(tmp_path, monkeypatch):
    package = tmp_path / "triton"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "knobs.py").write_text('RLC = env("FLAGTREE_RLC_ENHANCE")\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert liveness.compiler_mentions(sys.executable, "FLAGTREE_RLC_ENHANCE") is True
    assert liveness.compiler_mentions(sys.executable, "FLAGTREE_NOT_THERE") is False


def _aa_json(tmp_path, rows):
    rows = [abjson.row_json(AbRow("add", "f32", f"s{i}", 1, stats.row_stats(
        [ms] * len(swing), [ms / (1 + v / 100) for v in swing], noise_floor_pct=1.0), ()))
        for i, (ms, swing) in enumerate(rows)]
    (tmp_path / "ab.json").write_text(json.dumps(
        {"schema": "harness-ab/1", "rows": rows, "caliber": {"measured_noise_floor_pct": 2.5}}))


def test_noise_floor_comes_from_an_aa_campaigns_rows_by_latency(tmp_path):
    _aa_json(tmp_path, [(0.005, (6.0, -6.0))] * 10 + [(5.0, (0.2, -0.2))] * 10)
    model = ab.noise_model_from(tmp_path)
    # -6% is B 1 / 0.94 times as slow: a 6.38% factor, the larger of the two either way
    assert model.at(0.005) == pytest.approx(6.0 / 0.94) and model.at(5.0) == pytest.approx(1.0)


def test_noise_from_that_is_no_aa_campaign_or_has_no_rows_is_one_clear_line(tmp_path):
    with pytest.raises(UsageError, match="NOISE_FROM=.* is not an A/A campaign: no ab.json at"):
        ab.noise_model_from(Path(tmp_path / "nothing"))
    (tmp_path / "ab.json").write_text('{"schema": "harness-ab/1", "rows": [], '
                                      '"caliber": {"measured_noise_floor_pct": 2.5}}')
    with pytest.raises(UsageError, match="NOISE_FROM=.* has no measured row .*expected the "
                       "directory of a finished A/A campaign"):
        ab.noise_model_from(tmp_path)
    (tmp_path / "ab.json").write_text('{"schema": "harness-ab/1", "rows": []}')
    with pytest.raises(UsageError, match="not an A/A campaign \\(no measured_noise_floor_pct"):
        ab.noise_model_from(tmp_path)


@pytest.mark.parametrize(("swing", "floor"), [(6792.0, "6792.0"), (30.0, "30.0"),
                                             (-24.0, "31.6")])
def test_noise_from_whose_floor_cannot_mean_the_same_is_refused_naming_both(tmp_path, swing,
                                                                          floor):
    # Regression: NOISE_FROM an A/A with a 6792% floor read B 77-250x slower than A `same`.
    # -24% is B 1.316 times as slow: a 31.6% factor, beyond 25% though |-24| is not.
    _aa_json(tmp_path, [(0.005, (swing, swing))] * 10 + [(5.0, (0.2, -0.2))] * 10)
    with pytest.raises(UsageError) as info:
        ab.noise_model_from(tmp_path)
    assert str(info.value) == (
        f"NOISE_FROM={str(tmp_path)!r} measured a noise floor of {floor}% (rows near 0.005 ms A "
        "latency): a floor above 25% cannot mean \"the same\"; expected an A/A campaign whose "
        "floors are all at most that (more rounds, a quieter device)")


def test_noise_from_with_floors_of_at_most_25_percent_is_taken(tmp_path):
    _aa_json(tmp_path, [(0.005, (20.0, -16.0))] * 10 + [(5.0, (0.2, -0.2))] * 10)
    model = ab.noise_model_from(tmp_path)  # -16% is a 19.0% factor: 20% is the larger
    assert model.at(0.005) == pytest.approx(20.0) and model.at(5.0) == pytest.approx(1.0)


def test_an_aa_campaign_says_whether_identical_sides_compiled_identical_code():
    same = liveness.aa_artifact_note({"A": [doc("x", "y"), doc("y")], "B": [doc("y", "x")]})
    assert same.startswith("A/A: side B compiled nothing that side A did not (2 artifacts, all "
                           "among side A's 2)")
    differ = liveness.aa_artifact_note({"A": [doc("x", "y")], "B": [doc("x", "z")]})
    assert "unreliable" in differ and "(side B compiled 1 of its 2 that side A never did)" in differ
    assert liveness.aa_artifact_note({"A": [doc()], "B": [doc()]}) is None


def test_an_aa_campaign_whose_side_a_also_compiled_tuning_candidates_reads_reliable():
    # Regression: on an H200 A/A suite, side A's cache held 1037 artifacts (every mm candidate
    # it tuned) and side B's 198 winners, all among A's; the note compared the sets for
    # equality and called the fingerprints unreliable, which liveness (B within A) never is.
    note = liveness.aa_artifact_note({"A": [doc("w", "c1", "c2")], "B": [doc("w")]})
    assert "unreliable" not in note
    assert "(1 artifacts, all among side A's 3; side A's other 2 are its tuning candidates)" in note


def test_ab_done_rounds_the_geomean_and_says_why_there_is_no_plot(tmp_path):
    # Pinned: "AB_DONE geomean=16.406673720917375" and a silent missing ab.png.
    row = {"op": "mm", "dtype": "f32", "shape": "[1]", "a_ms": 1.0, "b_ms": 1.0, "speedup_pct": 0.0,
           "min_pct": 0.0, "max_pct": 0.0, "rounds": 1, "verdict": "inconclusive"}
    doc = {"schema": "harness-ab/1", "rows": [row] * 4, "unpaired": [],
           "geomean_speedup_pct": 16.406673720917375}
    md, png = tmp_path / "ab.md", tmp_path / "ab.png"
    assert ab.done_lines(doc, md, png) == [
        f"AB_DONE rows=4 unpaired=0 faster=0 slower=0 same=0 inconclusive=4 flagged=0 "
        f"geomean=+16.4% report={md} plot={png}"]
    lines = ab.done_lines({**doc, "geomean_speedup_pct": -0.04}, md, None)
    assert lines[0].startswith("ab.png not written: matplotlib is not installed; pip install")
    assert lines[1] == (f"AB_DONE rows=4 unpaired=0 faster=0 slower=0 same=0 inconclusive=4 "
                        f"flagged=0 geomean=+0.0% report={md}")
    assert ab.done_lines({**doc, "geomean_speedup_pct": None}, md, png)[0].count("geomean=- ")


def test_a_given_tune_overrides_the_axis_kinds_default_and_survives_campaign_json(tmp_path):
    from harness.campaign import plan
    from harness.campaign.document import Campaign

    assert Axis("python", None, "/a", "/b", "replay").tune == "replay"
    assert Axis("X", "SOME_SWITCH", given_tune="each").tune == "each"
    for axis in (Axis("python", None, "/a", "/b", "replay"), Axis("python", None)):
        campaign = plan.new_campaign(directory=tmp_path, axis=axis, caliber={}, argv=[],
                                     ops={"add": {"node": "n"}}, rounds=1, walls={},
                                     walls_from=None)
        again = Campaign.from_json(json.loads(json.dumps(campaign.to_json())))
        assert again.axis == axis and again.axis.tune == axis.tune


def test_tune_is_replay_or_each_named_in_one_line():
    given = abspec.resolve_ab({"axis": "X_Y", "tune": "each"}, {})
    assert given.tune == "each" and abspec.resolve_ab({"axis": "X_Y"}, {}).tune is None
    with pytest.raises(UsageError, match=r"^TUNE \(--tune\)='both' is not accepted; expected "
                                         r"replay or each$"):
        abspec.resolve_ab({"axis": "X_Y", "tune": "both"}, {})


def test_noise_from_an_aa_of_another_caliber_is_refused_naming_each_difference(tmp_path):
    # Regression: an A/A timed by another graph timer (or device, level, budget) set the floor
    # of a campaign it never measured; GRAPH_TIMER's default had just changed.
    _aa_json(tmp_path, [(0.005, (1.0, -1.0))] * 10)
    doc = json.loads((tmp_path / "ab.json").read_text())
    doc["caliber"].update({"backend": "cuda", "level": "core", "timer": "graph",
                           "iter_ms": None})  # made before GRAPH_TIMER: upstream's timer
    (tmp_path / "ab.json").write_text(json.dumps(doc))
    ours = {"backend": "cuda", "level": "core", "timer": "graph", "graph_timer": "adaptive",
            "warmup_ms": None, "iter_ms": None}
    with pytest.raises(UsageError) as exc:
        ab.noise_model_from(tmp_path, ours)
    assert str(exc.value) == (
        f"NOISE_FROM={str(tmp_path)!r} was measured at another caliber: graph_timer "
        "'upstream' (this campaign's 'adaptive'); expected an A/A of this campaign's BACKEND, "
        "LEVEL, MODE, GRAPH_TIMER, WARMUP_MS and ITER_MS")
    assert ab.noise_model_from(tmp_path, {**ours, "graph_timer": "upstream"}).bands
    with pytest.raises(UsageError, match="backend 'cuda' \\(this campaign's 'musa'\\); level"):
        ab.noise_model_from(tmp_path, {**ours, "backend": "musa", "level": "comprehensive"})
