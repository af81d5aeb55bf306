"""A campaign's liveness verdict over its operators and its sides' shared caches."""

from __future__ import annotations

import sys

from harness import ab_finish, summary


def empty_report():
    return summary.AbReport(a_label="A", b_label="B", rows=(), unpaired=(),
                            geomean_speedup_pct=None, noise_floor_pct=1.0, seed=0,
                            direct_rows=0, notes=())


def doc(side_a=(), side_b=()):
    return {"axis": {"name": "X", "variable": "SOME_SWITCH_NOBODY_READS"},
            "python": sys.executable, "side_artifacts": {"A": list(side_a), "B": list(side_b)}}


def ids(a, b):
    return {"A": [{"compiled_artifacts": list(a)}], "B": [{"compiled_artifacts": list(b)}]}


def test_one_operator_whose_side_b_compiled_new_code_makes_the_axis_live():
    # across the suite both sides compiled {x, y}: only per operator does B differ from A
    identities = {"mm": ids(["x"], ["y"]), "add": ids(["y"], ["x"])}
    live, _, _ = ab_finish.decide_liveness(empty_report(), identities, doc())
    assert live["status"] == "live" and "operators: add, mm" in live["detail"]


def test_equal_code_everywhere_and_a_compiler_that_never_names_the_switch_is_not_live():
    identities = {"mm": ids(["x"], ["x"]), "add": ids([], [])}
    live, _, _ = ab_finish.decide_liveness(empty_report(), identities, doc(["x", "z"], ["x"]))
    assert live["status"] == "not_live" and live["detail"].startswith("AXIS_NOT_LIVE axis=X")


def test_a_side_cache_that_compiled_what_the_other_never_did_is_live_when_runs_cannot_tell():
    # runs of a side share one cache, so a run may find its kernels already compiled
    identities = {"mm": ids([], []), "add": ids([], [])}
    live, _, _ = ab_finish.decide_liveness(empty_report(), identities, doc(["x"], ["w"]))
    assert live["status"] == "live"


def test_nothing_compiled_anywhere_leaves_liveness_unchecked_with_a_note():
    live, notes, _ = ab_finish.decide_liveness(empty_report(), {"mm": ids([], [])}, doc())
    assert live is None and notes == ["liveness not checked: this backend compiled no kernels"]
