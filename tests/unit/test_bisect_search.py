"""The bisection's search, given a judge whose A/Bs read the steps' true latencies exactly."""

from __future__ import annotations

import math

import pytest

from harness.axes.steps import Step
from harness.bisect import search
from harness.bisect.search import Comparison, Row, State, Verdict

KEY = ("torch.float16", "[[64, 64]]")


def steps(n: int, codes: dict[int, str] | None = None) -> list[Step]:
    codes = codes or {}
    return [Step(f"{i:040x}", f"s{i}", code=codes.get(i, f"tree{i}")) for i in range(n)]


class Judge:
    """A/Bs of steps whose latencies are `ms`: a row reads slower or faster beyond `floor`
    percent, same inside it; `failing` steps read no row, `unsure` steps inconclusive."""

    def __init__(self, ms: list[float], floor: float = 5.0, failing: set[int] = frozenset(),
                 unsure: set[int] = frozenset(), same_code: set[tuple[int, int]] = frozenset()):
        self.ms, self.floor, self.failing, self.unsure = ms, floor, failing, unsure
        self.same_code = same_code
        self.calls: list[tuple[int, int]] = []

    def __call__(self, a: int, b: int) -> Comparison:
        self.calls.append((a, b))
        if self.failing & {a, b}:
            return Comparison(a, b, failed="import failed")
        speedup = (self.ms[a] / self.ms[b] - 1) * 100
        if self.unsure & {a, b}:
            verdict = "inconclusive"
        elif abs(speedup) <= self.floor:
            verdict = "same"
        else:
            verdict = "faster" if speedup > 0 else "slower"
        row = Row(*KEY, verdict, speedup, speedup - 1, speedup + 1, 2)
        return Comparison(a, b, (row,), same_code=(a, b) in self.same_code, gpu_s=10.0,
                          rounds=2)


def regression(n: int, at: int, ratio: float = 1.3) -> list[float]:
    return [1.0 if i < at else ratio for i in range(n)]


def test_the_first_bad_step_of_sixteen_is_found_in_at_most_four_tries():
    judge = Judge(regression(16, 9))
    out = search.search(steps(16), judge)
    assert (out.state, out.hi, out.lo, out.candidates) == (State.FOUND, 9, 8, (9,))
    assert out.direction == "slower" and out.targets == (KEY,)
    assert len(out.tried) <= 4 and all(t.verdict in (Verdict.GOOD, Verdict.BAD)
                                       for t in out.tried)
    assert out.evidence is not None and (out.evidence.a, out.evidence.b) == (8, 9)
    assert out.evidence.rows[0].verdict == "slower"
    assert out.gpu_s == 10.0 * len(judge.calls)


@pytest.mark.parametrize("at", range(1, 16))
def test_every_position_of_the_step_is_found(at):
    out = search.search(steps(16), Judge(regression(16, at)))
    assert (out.state, out.hi) == (State.FOUND, at)


def test_a_step_with_an_ends_code_takes_its_verdict_without_an_ab():
    # step 8's source tree is step 7's: once 7 is good, 8 is good untimed
    judge = Judge(regression(16, 9))
    out = search.search(steps(16, {8: "tree7"}), judge)
    eight = next(t for t in out.tried if t.index == 8)
    assert eight.verdict is Verdict.GOOD and "same code as step 7" in eight.how
    assert eight.comparisons == () and all(8 not in c for c in judge.calls)
    assert out.hi == 9


def test_an_ab_whose_sides_compiled_the_same_code_reads_good_with_one_campaign():
    judge = Judge(regression(16, 9), same_code={(0, 7)})
    out = search.search(steps(16), judge)
    seven = next(t for t in out.tried if t.index == 7)
    assert seven.verdict is Verdict.GOOD and len(seven.comparisons) == 1
    assert seven.how == "ran the same code as step 0"
    assert (7, 15) not in judge.calls and out.hi == 9


def test_ends_that_do_not_differ_stop_after_their_ab():
    judge = Judge([1.0] * 16)
    out = search.search(steps(16), judge)
    assert out.state is State.NO_DIFFERENCE and judge.calls == [(0, 15)]
    assert out.tried == () and out.evidence is None


def test_ends_that_read_no_row_stop_there():
    out = search.search(steps(4), Judge(regression(4, 2), failing={3}))
    assert out.state is State.ENDS_FAILED and out.ends.failed == "import failed"


def test_an_improvement_is_bisected_the_same_way():
    out = search.search(steps(10), Judge(regression(10, 4, ratio=0.7)))
    assert (out.state, out.direction, out.hi) == (State.FOUND, "faster", 4)


def test_an_unbuildable_step_is_skipped_and_named_and_a_neighbour_decides():
    out = search.search(steps(16), Judge(regression(16, 9), failing={7}))
    skipped = [t for t in out.tried if t.verdict is Verdict.UNBUILDABLE]
    assert [t.index for t in skipped] == [7] and skipped[0].how == "import failed"
    assert (out.state, out.hi) == (State.FOUND, 9)


def test_a_skipped_step_next_to_the_first_bad_one_leaves_both_as_candidates():
    out = search.search(steps(16), Judge(regression(16, 9), unsure={8}))
    assert out.state is State.AMBIGUOUS and out.candidates == (8, 9)
    eight = next(t for t in out.tried if t.index == 8)
    assert eight.verdict is Verdict.UNDECIDED and "inconclusive" in eight.how
    assert len(eight.comparisons) == 1  # the second A/B is not run once the first cannot tell


def test_a_step_between_two_partial_changes_reads_undecided_not_bad():
    # two steps of 15% each: step 5 is slower than GOOD and faster than BAD
    ms = [1.0] * 5 + [1.15] * 5 + [1.32] * 6
    out = search.search(steps(16), Judge(ms))
    seven = next(t for t in out.tried if t.index == 7)
    assert seven.verdict is Verdict.UNDECIDED
    assert "against step 0: slower; against step 15: slower" in seven.how


def test_next_index_is_the_untried_step_nearest_the_middle():
    assert search.next_index(0, 15, set()) == 7
    assert search.next_index(0, 15, {7}) == 8
    assert search.next_index(7, 9, {8}) is None
    assert search.next_index(3, 4, set()) is None


def test_aggregate_reads_one_verdict_mixed_or_failed():
    rows = [Row("f16", "a", "slower", -20, -21, -19, 2), Row("f16", "b", "same", 0, -1, 1, 2)]
    assert search.aggregate(rows) == "mixed"
    assert search.aggregate(rows, [("f16", "a")]) == "slower"
    assert search.aggregate(rows, [("f16", "c")]) == "failed"
    assert search.aggregate([]) == "failed"


def test_moved_takes_the_direction_more_rows_were_called():
    rows = [Row("f16", s, v, -20 if v == "slower" else 20, 0, 0, 2)
            for s, v in (("a", "slower"), ("b", "faster"), ("c", "faster"), ("d", "same"))]
    assert search.moved(rows) == ("faster", (("f16", "b"), ("f16", "c")))
    assert search.moved([Row("f16", "a", "same", 0, -1, 1, 2)]) == (None, ())


def test_half_step_floor_is_half_the_smallest_targets_log_step_within_bounds():
    slow = Comparison(0, 1, (Row(*KEY, "slower", (1 / 1.3 - 1) * 100, -25, -21, 2),))
    floor = search.half_step_floor(slow, [KEY], 1.0, 25.0)
    assert floor == pytest.approx((math.sqrt(1.3) - 1) * 100, abs=0.01)  # 14.02
    tiny = Comparison(0, 1, (Row(*KEY, "slower", -1.2, -1.5, -1.0, 2),))
    assert search.half_step_floor(tiny, [KEY], 1.0, 25.0) == 1.0
    huge = Comparison(0, 1, (Row(*KEY, "slower", -90.0, -91, -89, 2),))
    assert search.half_step_floor(huge, [KEY], 1.0, 25.0) == 25.0
