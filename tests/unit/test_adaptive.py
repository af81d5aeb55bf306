"""ROUNDS=auto: when an operator stops adding rounds, and the variables that bound it."""

from __future__ import annotations

import pytest

from harness.campaign.adaptive import stop_reason
from harness.errors import UsageError
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
    assert stop_reason(decided, rows, done, 6, ended_well) == why


def test_rounds_auto_starts_with_min_rounds_and_keeps_both_bounds():
    found = abspec.resolve_ab({"axis": "none", "rounds": "auto"}, {})
    assert (found.rounds, found.auto) == (2, (2, 6))
    found = abspec.resolve_ab({"axis": "none", "rounds": "auto", "min_rounds": "3"},
                              {"ZL_MAX_ROUNDS": "4"})
    assert (found.rounds, found.auto) == (3, (3, 4))
    assert abspec.resolve_ab({"axis": "none", "rounds": "3"}, {}).auto is None


@pytest.mark.parametrize(("given", "message"), [
    ({"min_rounds": "1"}, "MIN_ROUNDS=1 and MAX_ROUNDS=6 are not accepted; expected 2 <= "
     "MIN_ROUNDS <= MAX_ROUNDS <= 100"),
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
