"""The campaign variables of `harness ab`: the axis and its two sides, rounds, tuning."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import axes, stats
from harness.errors import UsageError
from harness.settings import variables
from harness.settings.kinds import positive_int
from harness.settings.spec import VARS_BY_MAKE
from harness.settings.variables import AUTO_MAX_ROUNDS, AUTO_MIN_ROUNDS, MAX_ROUNDS


@dataclass(frozen=True)
class AbSpec:
    """The campaign variables of `harness ab`, validated."""

    axis: str
    a: str
    b: str
    rounds: int
    noise_from: Path | None
    bench_ref: str | None = None  # AXIS=flaggems: the commit of both sides' benchmark files
    tune: str | None = None  # TUNE as given (None: the axis kind's default)
    auto: tuple[int, int] | None = None  # ROUNDS=auto: (MIN_ROUNDS, MAX_ROUNDS)
    floor_pct: float | None = None  # NOISE_FLOOR: every row's floor (None: the least, 1%)


# Every side variable: a kind reads its own (AxisKind.variables); another one given is refused.
SIDE_VARS = ("A", "B", "A_PYTHON", "B_PYTHON", "A_REF", "B_REF", "BENCH_REF", "A_IMAGE", "B_IMAGE")


def _unread_sides(axis: str, reads: tuple[str, ...], values: Mapping[str, tuple[Any, str]]
                  ) -> None:
    """UsageError for a side variable given that AXIS does not read (A_PYTHON with a switch,
    A_IMAGE with AXIS=flaggems, A with an A/A): it was silently ignored."""
    for name in SIDE_VARS:
        value, source = values[name]
        if source != "default" and name not in reads:
            what = f"reads {', '.join(reads)}" if reads else "runs one setting on both sides"
            raise UsageError(f"{VARS_BY_MAKE[name].label(source)}={str(value)!r} is not read "
                             f"with AXIS={axis}, which {what}; unset it")


AUTO = "auto"  # ROUNDS=auto: rounds where they decide something (campaign.adaptive)


def _auto(flags: Mapping[str, object], env: Mapping[str, str]) -> tuple[int, int]:
    """MIN_ROUNDS and MAX_ROUNDS of ROUNDS=auto: 2 <= MIN_ROUNDS <= MAX_ROUNDS <= the cap."""
    found = []
    for name, default in (("MIN_ROUNDS", AUTO_MIN_ROUNDS), ("MAX_ROUNDS", AUTO_MAX_ROUNDS)):
        text, source = VARS_BY_MAKE[name].lookup(flags, env)
        # two rounds at least: one round gives no interval to judge
        found.append(positive_int(VARS_BY_MAKE[name].label(source), str(text or default),
                                  most=MAX_ROUNDS, least=2))
    if found[0] > found[1]:
        raise UsageError(f"MIN_ROUNDS={found[0]} and MAX_ROUNDS={found[1]} are not accepted; "
                         f"expected 2 <= MIN_ROUNDS <= MAX_ROUNDS <= {MAX_ROUNDS}")
    return found[0], found[1]


def check_rounds(text: str, label: str, axis: str) -> int:
    """A fixed ROUNDS for AXIS=axis, `label` how the user spelled it; UsageError naming it
    for one that is not a whole number from 1 (2 where the axis is not none) to MAX_ROUNDS.

    One round gives no interval, so a campaign of one can call no row faster, slower or same:
    refused before it runs. An A/A (AXIS=none) calls nothing anyway; one round of it still
    measures a noise floor (its rows' spread), so it is accepted there."""
    least = axes.kind_of(axis).least_rounds
    whole = re.fullmatch(r"[0-9]+", text.strip()) is not None  # not str.isdigit: "²" is one
    if least == 2 and whole and int(text) == 1:
        raise UsageError(f"{label}={text!r} is not accepted for AXIS={axis}: one round gives no "
                         "interval, so no row could be called faster, slower or same; expected "
                         f"a whole number from 2 to {MAX_ROUNDS}, or {AUTO} (AXIS=none takes 1: "
                         "one round of an A/A still measures a noise floor)")
    if not (whole and least <= int(text) <= MAX_ROUNDS):
        raise UsageError(f"{label}={text!r} is not accepted; expected a whole number from "
                         f"{least} to {MAX_ROUNDS}, or {AUTO}")
    return int(text)


def _fixed_rounds(text: str, source: str, flags: Mapping[str, object],
                  env: Mapping[str, str], axis: str) -> int:
    """check_rounds, and UsageError for MIN_ROUNDS or MAX_ROUNDS given without ROUNDS=auto
    (they would do nothing)."""
    label = VARS_BY_MAKE["ROUNDS"].label(source)
    rounds = check_rounds(text, label, axis)
    for name in ("MIN_ROUNDS", "MAX_ROUNDS"):
        value, given = VARS_BY_MAKE[name].lookup(flags, env)
        if given != "default":
            raise UsageError(f"{VARS_BY_MAKE[name].label(given)}={value!r} is only used with "
                             f"ROUNDS={AUTO}; {label}={text!r} runs that many rounds")
    return rounds


def resolve_ab(flags: Mapping[str, object], env: Mapping[str, str] | None = None) -> AbSpec:
    """AXIS (required), A, B, ROUNDS and NOISE_FROM from flags and the environment."""
    env = variables.environ() if env is None else env
    axis, _ = VARS_BY_MAKE["AXIS"].lookup(flags, env)
    if not axis:
        raise UsageError("AXIS is required: a switch of the backend (e.g. RLC_ENHANCE; "
                         "`harness backends --json` lists its axis_switches), env:NAME for "
                         "any other variable, none for an A/A campaign, python, flaggems or "
                         "image for two stacks")
    kind = axes.kind_of(str(axis))
    values = {name: VARS_BY_MAKE[name].lookup(flags, env)
              for name in ("ROUNDS", "NOISE_FROM", "NOISE_FLOOR", "TUNE", *SIDE_VARS)}
    _unread_sides(str(axis), kind.variables, values)
    rounds_text, rounds_source = values["ROUNDS"]
    auto = _auto(flags, env) if rounds_text == AUTO else None
    rounds = auto[0] if auto else _fixed_rounds(str(rounds_text or "3"), rounds_source, flags,
                                                env, str(axis))
    a, b = kind.sides(values, lambda name, source: VARS_BY_MAKE[name].label(source), str(axis))
    noise = values["NOISE_FROM"][0]
    tune, tune_source = values["TUNE"]
    if tune and tune not in ("replay", "each"):
        raise UsageError(f"{VARS_BY_MAKE['TUNE'].label(tune_source)}={tune!r} is not accepted; "
                         "expected replay or each")
    return AbSpec(axis, a, b, rounds, Path(noise) if noise else None,
                  str(values["BENCH_REF"][0] or "") or None, str(tune or "") or None, auto,
                  _floor(values))


def _floor(values: Mapping[str, tuple[Any, str]]) -> float | None:
    """NOISE_FLOOR as a number from the least floor to the greatest; None where not given."""
    text, source = values["NOISE_FLOOR"]
    if source == "default" or text is None:
        return None
    label = VARS_BY_MAKE["NOISE_FLOOR"].label(source)
    least, most = stats.MIN_NOISE_FLOOR_PCT, stats.MAX_NOISE_FLOOR_PCT
    try:
        floor = float(str(text))
    except ValueError:
        floor = math.nan
    if not least <= floor <= most:  # NaN fails both
        raise UsageError(f"{label}={text!r} is not accepted; expected a percentage from "
                         f"{least:g} to {most:g}")
    if values["NOISE_FROM"][1] != "default":
        raise UsageError(f"{label}={text!r} and NOISE_FROM are both given: a row's floor "
                         "comes from one; give NOISE_FLOOR or NOISE_FROM")
    return floor
