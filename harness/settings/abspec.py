"""The campaign variables of `harness ab`: the axis and its two sides, rounds, tuning."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.settings import variables
from harness.settings.spec import VARS_BY_MAKE, positive_int
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


PYTHON_AXIS = "python"  # AXIS=python: the sides are two interpreters, A_PYTHON and B_PYTHON
FLAGGEMS_AXIS = "flaggems"  # AXIS=flaggems: the sides are two FlagGems commits, A_REF and B_REF
IMAGE_AXIS = "image"  # AXIS=image: the sides are two images pinned by digest, A_IMAGE and B_IMAGE
PINNED_IMAGE = re.compile(r"[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}")


def _images(values: Mapping[str, tuple[Any, str]]) -> tuple[str, str]:
    """A_IMAGE and B_IMAGE, each pinned by its digest (name@sha256:<64 hex>); UsageError naming
    the spelling the user wrote for one missing or without a digest, or two of one digest."""
    found = []
    for name in ("A_IMAGE", "B_IMAGE"):
        value, source = values[name]
        label = VARS_BY_MAKE[name].label(source)
        if not value:
            raise UsageError(f"AXIS=image needs {label}: side {name[0]}'s image, "
                             "name@sha256:<digest>")
        if not PINNED_IMAGE.fullmatch(str(value)):
            raise UsageError(f"{label}={str(value)!r} is not accepted; expected an image "
                             "pinned by its digest, name@sha256:<64 hex digits> (a tag alone "
                             "can move)")
        found.append(str(value))
    if found[0].split("@")[1] == found[1].split("@")[1]:
        raise UsageError(f"A_IMAGE and B_IMAGE have the same digest "
                         f"({found[0].split('@')[1][:19]}): the campaign would compare an image "
                         "with itself; AXIS=none is the A/A")
    return found[0], found[1]


def _interpreters(values: Mapping[str, tuple[Any, str]]) -> tuple[str, str]:
    """A_PYTHON and B_PYTHON as absolute paths of executable files; UsageError naming the
    spelling the user wrote for one that is missing, not a file or not executable, or for two
    that are the same path."""
    found = []
    for name in ("A_PYTHON", "B_PYTHON"):
        value, source = values[name]
        label = VARS_BY_MAKE[name].label(source)
        if not value:
            raise UsageError(f"AXIS=python needs {label}: side {name[0]}'s interpreter")
        path = shutil.which(str(value)) if os.sep not in str(value) else str(value)
        if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
            raise UsageError(f"{label}={str(value)!r} is not accepted; expected an "
                             "executable interpreter (a path, or a name on PATH)")
        found.append(os.path.abspath(path))
    if found[0] == found[1]:
        raise UsageError(f"A_PYTHON and B_PYTHON are the same interpreter ({found[0]!r}): the "
                         "campaign would compare a stack with itself; AXIS=none is the A/A")
    return found[0], found[1]


# The side variables each kind of axis reads; a switch (or env:NAME) reads A and B.
SIDE_VARS = ("A", "B", "A_PYTHON", "B_PYTHON", "A_REF", "B_REF", "BENCH_REF", "A_IMAGE", "B_IMAGE")
AXIS_READS = {"none": (), PYTHON_AXIS: ("A_PYTHON", "B_PYTHON"),
              FLAGGEMS_AXIS: ("A_REF", "B_REF", "BENCH_REF"), IMAGE_AXIS: ("A_IMAGE", "B_IMAGE")}


def _unread_sides(axis: str, values: Mapping[str, tuple[Any, str]]) -> None:
    """UsageError for a side variable given that AXIS does not read (A_PYTHON with a switch,
    A_IMAGE with AXIS=flaggems, A with an A/A): it was silently ignored."""
    reads = AXIS_READS.get(axis, ("A", "B"))
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
        found.append(positive_int(VARS_BY_MAKE[name], str(text or default), source,
                                  most=MAX_ROUNDS))
    if found[0] < 2 or found[0] > found[1]:
        raise UsageError(f"MIN_ROUNDS={found[0]} and MAX_ROUNDS={found[1]} are not accepted; "
                         f"expected 2 <= MIN_ROUNDS <= MAX_ROUNDS <= {MAX_ROUNDS}")
    return found[0], found[1]


def check_rounds(text: str, label: str, axis: str) -> int:
    """A fixed ROUNDS for AXIS=axis, `label` how the user spelled it; UsageError naming it
    for one that is not a whole number from 1 (2 where the axis is not none) to MAX_ROUNDS.

    One round gives no interval, so a campaign of one can call no row faster, slower or same:
    refused before it runs. An A/A (AXIS=none) calls nothing anyway; one round of it still
    measures a noise floor (its rows' spread), so it is accepted there."""
    least = 1 if axis == "none" else 2
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
    values = {name: VARS_BY_MAKE[name].lookup(flags, env)
              for name in ("AXIS", "A", "B", "ROUNDS", "NOISE_FROM", "A_PYTHON", "B_PYTHON",
                           "A_REF", "B_REF", "BENCH_REF", "TUNE", "A_IMAGE", "B_IMAGE")}
    axis, _ = values["AXIS"]
    if not axis:
        raise UsageError("AXIS is required: a switch of the backend (e.g. RLC_ENHANCE; "
                         "`harness backends --json` lists its axis_switches), env:NAME for "
                         "any other variable, none for an A/A campaign, python, flaggems or "
                         "image for two stacks")
    _unread_sides(str(axis), values)
    rounds_text, rounds_source = values["ROUNDS"]
    auto = _auto(flags, env) if rounds_text == AUTO else None
    rounds = auto[0] if auto else _fixed_rounds(str(rounds_text or "3"), rounds_source, flags,
                                                env, str(axis))
    a, b = values["A"][0] or "0", values["B"][0] or "1"
    if axis == PYTHON_AXIS:
        a, b = _interpreters(values)
    if axis == IMAGE_AXIS:
        a, b = _images(values)
    if axis == FLAGGEMS_AXIS:  # commits, resolved against FLAGGEMS_DIR when the campaign starts
        a, b = str(values["A_REF"][0] or ""), str(values["B_REF"][0] or "")
    if a == b and axis not in ("none", FLAGGEMS_AXIS):
        labels = [VARS_BY_MAKE[name].label(values[name][1]) for name in ("A", "B")]
        raise UsageError(f"{labels[0]}={a!r} and {labels[1]}={b!r} are equal: the campaign "
                         "would compare AXIS="
                         f"{axis} with itself; expected two different values (AXIS=none is "
                         "the A/A campaign)")
    noise = values["NOISE_FROM"][0]
    tune, tune_source = values["TUNE"]
    if tune and tune not in ("replay", "each"):
        raise UsageError(f"{VARS_BY_MAKE['TUNE'].label(tune_source)}={tune!r} is not accepted; "
                         "expected replay or each")
    return AbSpec(axis, a, b, rounds, Path(noise) if noise else None,
                  str(values["BENCH_REF"][0] or "") or None, str(tune or "") or None, auto)
