"""The state words: one str-valued Enum per vocabulary, written and compared as plain words."""

from __future__ import annotations

import csv
import io
import json

import pytest

from harness import stats
from harness.contract import states
from harness.contract.states import CampaignState, RunStatus, UnitState

VOCABULARIES = (UnitState, CampaignState, RunStatus, stats.OpVerdict)


@pytest.mark.parametrize("vocabulary", VOCABULARIES, ids=lambda v: v.__name__)
def test_a_word_is_written_and_read_back_as_its_value(vocabulary):
    for word in vocabulary:
        plain = word.value
        assert json.dumps({"state": word}) == json.dumps({"state": plain})
        assert (str(word), f"{word}", f"{word:>12}", "-".join([word, word])) == (
            plain, plain, f"{plain:>12}", f"{plain}-{plain}")
        out = io.StringIO()
        csv.writer(out).writerow([word])
        assert out.getvalue() == f"{plain}\r\n"
        # a document read back holds plain strings: they compare and look up alike
        assert word == plain and {plain: 1}[word] == 1 and vocabulary(plain) is word


def test_the_task_ends_keep_their_order_for_the_lines_that_count_them():
    assert [s.value for s in states.TASK_ENDS] == [
        "ok", "failed", "error", "not_run", "interrupted", "timeout", "crashed", "skipped"]
    assert set(states.TASK_ENDS) | {"submitted", "running", "excluded"} == set(UnitState)


def test_operator_verdicts_keep_the_suite_report_order_and_stay_apart_from_states():
    assert [v.value for v in stats.OP_VERDICTS] == [
        "slower", "failed", "pending", "inconclusive", "flagged", "same", "faster", "skipped",
        "excluded"]
    assert stats.operator_verdict([], failed=False, pending=True) is stats.OpVerdict.PENDING
    assert stats.operator_verdict(["same", "faster"], failed=False) is stats.OpVerdict.FASTER
    assert not issubclass(stats.OpVerdict, states.Word)


def test_pending_and_finished_units_and_an_unended_campaign():
    assert states.PENDING == "not_run" and states.PENDING not in states.FINISHED
    assert not set(states.UNFINISHED) & set(states.FINISHED)
    assert CampaignState.DONE not in states.NOT_ENDED
    assert CampaignState.INTERRUPTED not in states.NOT_ENDED
