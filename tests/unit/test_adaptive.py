"""ROUNDS=auto: when an operator stops adding rounds, and the variables that bound it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness import stats
from harness.axes import Axis
from harness.campaign import adaptive, plan, refs
from harness.campaign.adaptive import Look, stop_reason
from harness.errors import UsageError
from harness.report.abresult import AbRow
from harness.settings import abspec


@pytest.mark.parametrize(("decided", "rows", "done", "ended_well", "why"), [
    (False, 3, 2, True, None),  # a row undecided, rounds left: one more
    (True, 3, 2, True, "decided after 2 rounds"),
    (False, 3, 6, True, "MAX_ROUNDS (6) reached with rows undecided"),
    (False, 3, 8, True, "8 rounds, past MAX_ROUNDS (6) by a resume, with rows undecided"),
    (True, 3, 6, True, "decided after 6 rounds"),  # decided at the last look: decided
    (False, 0, 2, True, "no paired row after 2 rounds"),
    (False, 3, 2, False, "a unit did not end ok after 2 rounds"),
])
def test_an_operator_goes_on_only_while_a_row_is_undecided_and_rounds_are_left(
        decided, rows, done, ended_well, why):
    look = Look(rows=rows, undecided=0 if decided else 1, done=done, ended_well=ended_well)
    assert stop_reason(look, 6) == why


def test_an_operator_of_unchanged_code_and_source_stops_at_its_first_look_undecided():
    look = Look(rows=5, undecided=2, done=2, ended_well=True, unchanged=True)
    assert stop_reason(look, 6) == ("code and source unchanged after 2 rounds: side B compiled "
                                    "no kernel side A did not, and the Python source its "
                                    "modules import is the same")
    # decided is said first; a unit that did not end ok is said before either
    assert stop_reason(Look(5, 0, 2, True, unchanged=True), 6) == "decided after 2 rounds"
    assert stop_reason(Look(5, 2, 2, False, unchanged=True), 6) == (
        "a unit did not end ok after 2 rounds")


def test_an_operator_stops_once_no_undecided_row_of_it_can_be_decided_by_max_rounds():
    futile = tuple(f"float16 [{n}] (+-2.1% at best, against its 1% floor)" for n in range(5))
    # one undecided row MAX_ROUNDS may still decide: it goes on
    assert stop_reason(Look(6, 2, 3, True, futile=futile[:1]), 6) is None
    assert stop_reason(Look(6, 1, 3, True, futile=futile[:1]), 6) == (
        "stopped after 3 rounds: MAX_ROUNDS (6) cannot decide float16 [0] (+-2.1% at best, "
        "against its 1% floor)")
    assert stop_reason(Look(6, 5, 3, True, futile=futile), 6).endswith(
        "float16 [2] (+-2.1% at best, against its 1% floor); and 2 more rows")
    # at MAX_ROUNDS the bound is what stopped it
    assert stop_reason(Look(6, 1, 6, True, futile=futile[:1]), 6) == (
        "MAX_ROUNDS (6) reached with rows undecided")


def test_rounds_auto_starts_with_min_rounds_and_keeps_both_bounds():
    found = abspec.resolve_ab({"axis": "none", "rounds": "auto"}, {})
    assert (found.rounds, found.auto) == (2, (2, 6))
    found = abspec.resolve_ab({"axis": "none", "rounds": "auto", "min_rounds": "3"},
                              {"ZL_MAX_ROUNDS": "4"})
    assert (found.rounds, found.auto) == (3, (3, 4))
    assert abspec.resolve_ab({"axis": "none", "rounds": "3"}, {}).auto is None


@pytest.mark.parametrize(("given", "message"), [
    # the least a bound can be is said as it is, 2: it read "from 1 to 100" for a 0
    ({"min_rounds": "1"}, "MIN_ROUNDS (--min-rounds)='1' is not accepted; expected a whole "
     "number from 2 to 100"),
    ({"min_rounds": "0"}, "MIN_ROUNDS (--min-rounds)='0' is not accepted; expected a whole "
     "number from 2 to 100"),
    ({"min_rounds": "4", "max_rounds": "3"}, "MIN_ROUNDS=4 and MAX_ROUNDS=3 are not accepted; "
     "expected 2 <= MIN_ROUNDS <= MAX_ROUNDS <= 100"),
    ({"min_rounds": "5", "max_rounds": "4"}, "MIN_ROUNDS=5 and MAX_ROUNDS=4 are not accepted"),
    ({"max_rounds": "x"}, "MAX_ROUNDS (--max-rounds)='x' is not accepted"),
])
def test_bounds_that_cannot_hold_are_refused_naming_both(given, message):
    with pytest.raises(UsageError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        abspec.resolve_ab({"axis": "none", "rounds": "auto", **given}, {})


@pytest.mark.parametrize(("given", "message"), [
    ({"rounds": "Auto"}, "ROUNDS (--rounds)='Auto' is not accepted; expected a whole number "
     "from 1 to 100, or auto"),
    ({"rounds": "0"}, "ROUNDS (--rounds)='0' is not accepted; expected a whole number from 1 "
     "to 100, or auto"),
    ({"rounds": "3", "min_rounds": "4"}, "MIN_ROUNDS (--min-rounds)='4' is only used with "
     "ROUNDS=auto; ROUNDS (--rounds)='3' runs that many rounds"),
    ({"max_rounds": "2"}, "MAX_ROUNDS (--max-rounds)='2' is only used with ROUNDS=auto"),
])
def test_fixed_rounds_name_auto_and_refuse_bounds_that_would_do_nothing(given, message):
    with pytest.raises(UsageError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        abspec.resolve_ab({"axis": "none", **given}, {})


def _flaggems_campaign(tmp_path: Path, axis: str = "flaggems"):
    doc = plan.new_campaign(directory=tmp_path, axis=Axis(axis, None), caliber={}, argv=[],
                            ops={op: {"node": f"benchmark/t.py::test_{op}"}
                                 for op in ("cos", "sin", "mm")}, rounds=2, walls={},
                            walls_from=None)
    for side, sin in (("A", "def sin(A):\n    return A\n"), ("B", "def sin(A):\n    return -A\n")):
        package = refs.side_tree(tmp_path, side) / refs.PACKAGE_DIR / "ops"
        package.mkdir(parents=True)
        (package / "cos.py").write_text("def cos(A):\n    return A\n")
        (package / "sin.py").write_text(sin)
    return doc


def _ids(a: list[str], b: list[str]):
    return {"A": [{"compiled_artifacts": a}], "B": [{"compiled_artifacts": b}]}


def test_an_operator_is_unchanged_where_its_code_and_its_source_are_the_same_on_both_sides(
        tmp_path: Path):
    doc = _flaggems_campaign(tmp_path)
    identities = {"cos": _ids(["k1", "k2"], ["k1"]),  # B replayed A's winner: among A's
                  "sin": _ids(["k3"], ["k3"]),  # the same code from another source
                  "mm": _ids(["k4"], ["k4"])}  # defined in neither tree: source not known
    assert adaptive.unchanged_ops(tmp_path, doc, identities, ["cos", "sin", "mm"]) == {"cos"}
    assert adaptive.unchanged_ops(tmp_path, doc, {"cos": _ids(["k1"], ["k5"])}, ["cos"]) == set()
    assert adaptive.unchanged_ops(tmp_path, doc, {"cos": _ids([], [])}, ["cos"]) == set()
    # each side tuned for itself: the same code may run other winners
    doc.axis = Axis("flaggems", None, given_tune="each")
    assert adaptive.unchanged_ops(tmp_path, doc, identities, ["cos"]) == set()


def _compiled(directory: Path, side: str, *kernels: str, code: str | None = None) -> None:
    """Kernels in a side's campaign Triton cache, each an entry of one artifact."""
    for kernel in kernels:
        entry = directory / plan.CACHE_DIR / side / "triton" / f"key-{kernel}"
        entry.mkdir(parents=True, exist_ok=True)
        (entry / "k.ptx").write_text(code or f"// the code of {kernel}\n")


def _one_stack(tmp_path: Path, axis: Axis, backend: str = "cuda"):
    return plan.new_campaign(directory=tmp_path, axis=axis, caliber={"backend": backend},
                             argv=[], ops={op: {"node": f"benchmark/t.py::test_{op}"}
                                           for op in ("cos", "mm")}, rounds=2, walls={},
                             walls_from=None)


def test_every_operator_of_an_aa_stops_at_its_first_look_where_side_b_compiled_nothing_new(
        tmp_path: Path):
    # An operator's own fingerprints would not do: "mm" compiled nothing of its own here
    # (a kernel "cos" compiled first, shared through the side's cache), which says nothing.
    doc = _one_stack(tmp_path, Axis("none", None))
    identities = {"cos": _ids(["k1", "k2"], ["k1"]), "mm": _ids([], [])}
    _compiled(tmp_path, "A", "k1", "k2")
    _compiled(tmp_path, "B", "k1")
    assert adaptive.unchanged_ops(tmp_path, doc, identities, ["cos", "mm"]) == {"cos", "mm"}
    # side B compiled a kernel side A never did: no operator is shown unchanged, not even
    # the one whose own fingerprints are among side A's
    _compiled(tmp_path, "B", "k9")
    assert adaptive.unchanged_ops(tmp_path, doc, identities, ["cos", "mm"]) == set()


def test_a_kernel_of_side_b_is_not_side_as_where_only_its_code_equals_a_tuning_candidates(
        tmp_path: Path):
    # Side A compiled two candidates of one kernel; side B, under a switch that leaves out
    # pipelining, compiled the winner (3 stages) to the code of A's 1-stage candidate. Each of
    # B's artifacts is among A's, but B's kernel is none of A's: it launches otherwise.
    doc = _one_stack(tmp_path, Axis("DISABLE_LLVM_OPT", "DISABLE_LLVM_OPT"))
    for side, entry, code, stages in (("A", "K1", "// unpipelined", 1),
                                      ("A", "K3", "// pipelined", 3),
                                      ("B", "K3", "// unpipelined", 3)):
        _compiled(tmp_path, side, entry, code=code)
        meta = tmp_path / plan.CACHE_DIR / side / "triton" / f"key-{entry}" / "k.json"
        meta.write_text(json.dumps({"name": "k", "num_stages": stages, "num_warps": 4,
                                    "hash": f"{side}-{entry}"}))
    assert adaptive.unchanged_ops(tmp_path, doc, {}, ["cos"]) == set()
    # the same launch settings: the same kernel (the cache key in "hash" is not one)
    meta.write_text(json.dumps({"name": "k", "num_stages": 1, "num_warps": 4, "hash": "x"}))
    assert adaptive.unchanged_ops(tmp_path, doc, {}, ["cos"]) == {"cos"}


def test_caches_dropped_before_the_look_or_unreadable_stop_nothing(tmp_path: Path):
    doc = _one_stack(tmp_path, Axis("none", None))
    for side in plan.SIDES:
        _compiled(tmp_path, side, "k1")
    assert adaptive.unchanged_ops(tmp_path, doc, {}, ["cos"]) == {"cos"}
    doc.side_artifacts = {"A": ["f1"], "B": ["f1"]}  # a resume dropped the caches before
    assert adaptive.unchanged_ops(tmp_path, doc, {}, ["cos"]) == set()
    doc.side_artifacts = {}
    unreadable = tmp_path / plan.CACHE_DIR / "B" / "triton" / "key-k1" / "gone.ptx"
    unreadable.symlink_to("/proc/self/mem")  # a file whose reading fails (EIO)
    assert adaptive.unchanged_ops(tmp_path, doc, {}, ["cos"]) == set()
    unreadable.unlink()
    # nothing compiled on a side (no Triton there, or a switch that interprets instead)
    for side in plan.SIDES:
        shutil.rmtree(tmp_path / plan.CACHE_DIR / side)
        assert adaptive.unchanged_ops(tmp_path, doc, {}, ["cos"]) == set(), side


@pytest.mark.parametrize(("axis", "backend", "stops"), [
    (Axis("DISABLE_PTXAS_OPT", "DISABLE_PTXAS_OPT"), "cuda", True),  # the code generator's
    (Axis("RLC_ENHANCE", "FLAGTREE_RLC_ENHANCE"), "cuda", True),
    (Axis("TRITON_DEFAULT_FP_FUSION", "TRITON_DEFAULT_FP_FUSION"), "cuda", True),
    # FlagGems' own variable is read by its Python too: the same kernels may be called
    # otherwise
    (Axis("FOLDSCALE", "FLAGGEMS_MXFP4_FOLDSCALE"), "cuda", False),
    (Axis("OMP_NUM_THREADS", "OMP_NUM_THREADS"), "cpu", False),  # read by torch
    (Axis("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"), "cuda", False),  # env:NAME
    (Axis("none", None, given_tune="each"), "cuda", False),  # each side its own winners
])
def test_a_switch_stops_its_operators_only_where_it_reaches_nothing_but_generated_code(
        tmp_path: Path, axis: Axis, backend: str, stops: bool):
    doc = _one_stack(tmp_path, axis, backend)
    for side in plan.SIDES:
        _compiled(tmp_path, side, "k1")
    found = adaptive.unchanged_ops(tmp_path, doc, {}, ["cos", "mm"])
    assert found == ({"cos", "mm"} if stops else set())


def test_a_campaign_without_a_backend_it_knows_stops_nothing_by_its_code(tmp_path: Path):
    doc = _one_stack(tmp_path, Axis("none", None))
    for side in plan.SIDES:
        _compiled(tmp_path, side, "k1")
    for caliber in ({}, {"backend": None}, {"backend": "nosuch"}, {"backend": ["cuda"]}):
        doc.caliber = caliber  # an older harness's, or one edited by hand
        assert adaptive.unchanged_ops(tmp_path, doc, {}, ["cos"]) == set(), caliber


def test_futile_rows_are_named_with_the_width_they_would_reach_and_their_floor():
    noisy = stats.row_stats([1.04, 0.97, 1.01], [1.0] * 3, noise_floor_pct=1.0)
    quiet = stats.row_stats([1.003, 0.998, 1.001], [1.0] * 3, noise_floor_pct=1.0)
    rows = [AbRow("relu", "float16", "[64, 64]", 1, noisy, ()),
            AbRow("relu", "float16", "[64, 64]", 2, noisy, ()),  # its second occurrence
            AbRow("relu", "float32", "[4096, 4096]", 1, quiet, ())]
    found = adaptive.futile_rows(rows, [2, 3], 6, 5, stats.CONFIDENCE, noise_known=False)
    assert found == ("float16 [64, 64] (+-2.6% at best, against its 1% floor)",
                     "float16 [64, 64] #2 (+-2.6% at best, against its 1% floor)")
    # an A/A (NOISE_FROM) that measured 1% there says the row is quieter than its rounds: on
    assert adaptive.futile_rows(rows, [2, 3], 6, 5, stats.CONFIDENCE, noise_known=True) == ()


def test_a_stop_names_the_units_that_ended_badly_and_the_rows_left_flagged():
    broken = Look(rows=3, undecided=1, done=2, ended_well=False,
                  badly=("tanh/r1 failed", "tanh/r2 crashed"))
    assert stop_reason(broken, 6) == ("a unit did not end ok after 2 rounds (tanh/r1 failed, "
                                      "tanh/r2 crashed)")
    # a flagged row is never judged: "decided" says so rather than counting it decided
    assert stop_reason(Look(rows=3, undecided=0, done=2, ended_well=True, flagged=1), 6) == \
        "decided after 2 rounds, 1 flagged row not judged"
    assert stop_reason(Look(rows=3, undecided=0, done=2, ended_well=True, flagged=3), 6) == \
        "decided after 2 rounds, 3 flagged rows not judged"


def test_a_look_waits_for_a_unit_that_runs_again_and_not_past_its_second_run():
    from harness.campaign.document import UnitRecord

    def unit(status: str, attempts: int, rnd: int = 0) -> UnitRecord:
        return UnitRecord(id=f"tanh/r{rnd}", op="tanh", round=rnd, status=status,
                          attempts=attempts)

    assert not adaptive.runs_again([unit("ok", 1), unit("ok", 1, 1)])
    assert not adaptive.runs_again([unit("ok", 1), unit("failed", 1, 1)])  # failed: final
    for status in ("crashed", "timeout", "error", "interrupted"):  # the driver runs it again
        assert adaptive.runs_again([unit("ok", 1), unit(status, 1, 1)]), status
    assert adaptive.runs_again([unit("crashed", 1), unit("not_run", 0, 1)])
    # run twice without finishing: its operator is looked at, and stops naming it
    assert not adaptive.runs_again([unit("crashed", 2), unit("not_run", 0, 1)])


def test_the_dry_run_of_a_resumed_adaptive_campaign_counts_what_ran_and_what_it_may_reach(
        tmp_path):
    from harness.campaign import dryrun

    doc = plan.new_campaign(directory=tmp_path, axis=Axis("none", None), caliber={}, argv=[],
                            ops={"tanh": {"node": "n"}, "add": {"node": "m"}}, rounds=2,
                            walls={}, walls_from=None)
    doc.auto = {"min": 2, "max": 6}
    assert dryrun.auto_line(doc) == (
        "ROUNDS=auto: these are MIN_ROUNDS (2) an operator; after each round, one more for each "
        "operator with a row undecided that MAX_ROUNDS (6) may still decide: 12 units at most "
        "in all")
    for unit in doc.units:
        unit.status = "ok"
    plan.add_units(doc, {"tanh": 8})  # a resume's ROUNDS=8 takes tanh past MAX_ROUNDS
    # it read "these are MIN_ROUNDS (2) an operator ... 12 units at most" for 14 at most
    assert dryrun.auto_line(doc) == (
        "ROUNDS=auto: 4 units of its operators ran; after each round, one more for each "
        "operator with a row undecided that MAX_ROUNDS (6) may still decide: 14 units at most "
        "in all")


def test_an_operator_stopped_decided_whose_row_reads_undecided_again_is_looked_at_again(
        tmp_path, monkeypatch):
    # Verdicts are judged over the campaign's rows: a row of x decided at one look can read
    # inconclusive at the next, once other rows change the false-discovery control; x kept
    # "decided after 2 rounds" beside an inconclusive row, and got no more rounds.
    from types import SimpleNamespace

    from harness.campaign import compare

    doc = plan.new_campaign(directory=tmp_path, axis=Axis("none", None), caliber={}, argv=[],
                            ops={"x": {"node": "n"}, "y": {"node": "m"}}, rounds=2,
                            walls={}, walls_from=None)
    doc.auto = {"min": 2, "max": 6}
    for unit in doc.units:
        unit.status, unit.attempts = "ok", 1
    doc.ops["x"].stopped = "decided after 2 rounds"
    doc.ops["y"].stopped = "decided after 2 rounds"

    def verdict_row(op: str, verdict: stats.Verdict) -> AbRow:
        found = stats.row_stats([1.0, 1.0], [1.0, 1.0], noise_floor_pct=1.0)
        from dataclasses import replace
        return AbRow(op, "float16", "[64]", 1, replace(found, verdict=verdict), ())

    rows = [verdict_row("x", stats.Verdict.INCONCLUSIVE), verdict_row("y", stats.Verdict.SAME)]
    result = SimpleNamespace(rows=rows, method=stats.Method())
    monkeypatch.setattr(compare, "op_looks", lambda *a: {})
    monkeypatch.setattr(compare, "compare_ops", lambda *a: (result, {}, None))
    monkeypatch.setattr(compare, "done_rounds", lambda *a: [0, 1])
    monkeypatch.setattr(adaptive, "unchanged_ops", lambda *a: set())
    said: list[str] = []
    assert adaptive.add_round(tmp_path, doc, said.append)
    assert doc.ops["x"].stopped is None and doc.ops["x"].rounds == 3
    assert doc.ops["y"].stopped == "decided after 2 rounds" and doc.ops["y"].rounds == 2
    assert said == ["ROUNDS=auto: 1 operators with rows undecided get round 3: x"]


def _looked_at(tmp_path, monkeypatch, verdicts: dict[str, stats.Verdict], done: list[int],
               statuses: dict[str, tuple[str, int]], rounds: int = 2):
    """A campaign of x and y at `rounds` rounds, every unit ok but those of `statuses` ({id:
    (status, attempts)}), whose look reads each operator's one row `verdicts[op]`, with `done`
    rounds finished; the stubs stand for compare's reading of the campaign's files."""
    from dataclasses import replace
    from types import SimpleNamespace

    from harness.campaign import compare

    doc = plan.new_campaign(directory=tmp_path, axis=Axis("none", None), caliber={}, argv=[],
                            ops={"x": {"node": "n"}, "y": {"node": "m"}}, rounds=rounds,
                            walls={}, walls_from=None)
    doc.auto = {"min": 2, "max": 6}
    for unit in doc.units:
        unit.status, unit.attempts = statuses.get(unit.id, ("ok", 1))
    base = stats.row_stats([1.0, 1.0], [1.0, 1.0], noise_floor_pct=1.0)
    rows = [AbRow(op, "float16", "[64]", 1, replace(base, verdict=v), ())
            for op, v in verdicts.items()]
    monkeypatch.setattr(compare, "compare_ops",
                        lambda *a: (SimpleNamespace(rows=rows, method=stats.Method()), {}, None))
    monkeypatch.setattr(compare, "done_rounds", lambda *a: done)
    monkeypatch.setattr(adaptive, "unchanged_ops", lambda *a: set())
    return doc


def test_a_round_that_gave_no_row_is_not_owed_again_and_the_look_adds_one_of_its_own(
        tmp_path, monkeypatch):
    # x/r1 skipped (pytest skipped every side), its row undecided: the look asked for round
    # "done + 1" = 2, which exists, added nothing, and said a round was added: the driver then
    # looked again at once, and again, without end.
    undecided = stats.Verdict.INCONCLUSIVE
    doc = _looked_at(tmp_path, monkeypatch, {"x": undecided}, [0], {"x/r1": ("skipped", 1)})
    doc.ops["y"].stopped = "decided after 2 rounds"
    assert adaptive.add_round(tmp_path, doc, lambda line: None)
    assert [u.id for u in doc.units if u.op == "x"] == ["x/r0", "x/r1", "x/r2"]
    # planned rounds, those without rows too, are bounded by MAX_ROUNDS
    doc = _looked_at(tmp_path, monkeypatch, {"x": undecided}, [0], {"x/r5": ("skipped", 1)},
                     rounds=6)
    doc.ops["y"].stopped = "decided after 6 rounds"
    assert not adaptive.add_round(tmp_path, doc, lambda line: None)
    assert doc.ops["x"].stopped == "MAX_ROUNDS (6) reached with rows undecided"


def test_an_operator_waiting_for_a_unit_gets_no_look_and_a_stop_for_a_unit_since_ok_reopens(
        tmp_path, monkeypatch):
    same, undecided = stats.Verdict.SAME, stats.Verdict.INCONCLUSIVE
    doc = _looked_at(tmp_path, monkeypatch, {"x": undecided, "y": same}, [0],
                     {"x/r1": ("crashed", 1)})
    doc.ops["x"].looks = []
    assert adaptive.add_round(tmp_path, doc, lambda line: None)
    # a look recorded while it waited would have spent alpha on one round, and cost it the
    # first look's stop where its code is unchanged
    assert doc.ops["x"].looks == [] and doc.ops["x"].stopped is None
    assert doc.ops["y"].looks == [1]
    # x stopped naming x/r1, which a later batch (or a resume) ran ok: x is looked at again
    doc = _looked_at(tmp_path, monkeypatch, {"x": undecided, "y": same}, [0, 1], {})
    doc.ops["x"].stopped = "a unit did not end ok after 1 rounds (x/r1 crashed)"
    doc.ops["y"].stopped = "decided after 2 rounds"
    assert adaptive.add_round(tmp_path, doc, lambda line: None)
    assert doc.ops["x"].stopped is None and doc.ops["x"].rounds == 3


def test_a_look_runs_nothing_more_of_an_operator_it_stopped():
    from harness.executors.base import Task

    doc = plan.new_campaign(directory=Path("."), axis=Axis("none", None), caliber={}, argv=[],
                            ops={"x": {"node": "n"}, "y": {"node": "m"}}, rounds=2,
                            walls={}, walls_from=None)
    doc.ops["x"].stopped = "a unit did not end ok after 1 rounds (x/r1 timeout)"
    tasks = [Task("x/r1", ("true",), Path("x.log")), Task("y/r2", ("true",), Path("y.log"))]
    # x/r1 timed out twice: it ran again in every batch while y grew (9 times to MAX_ROUNDS 10)
    assert [t.id for t in adaptive.owed(doc, tasks)] == ["y/r2"]
