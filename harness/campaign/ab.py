"""A/B campaigns of one switch: interleaved rounds, same configs on both sides, liveness.

Side A runs with the switch off and records its autotune winners (round 0); every later run, A
or B, replays those winners strictly from a private cache, so both sides run the same kernel
configurations. With REPLAY_FROM every run, A/r0 included, replays that earlier run's records
instead: the campaign skips the tuning sweep and its table is pinned to known configs. Rounds
are interleaved A B, B A, A B ... so that drift cancels. AXIS=none runs an A/A campaign whose
spread is the noise floor of later campaigns.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import backends, stats
from harness.backends import Backend
from harness.errors import UsageError
from harness.report import abjson
from harness.report.plot import AB_PNG, NO_PLOT
from harness.settings.abspec import FLAGGEMS_AXIS, IMAGE_AXIS, PYTHON_AXIS
from harness.settings.spec import Settings
from harness.stats import noisefloor

# Switches every backend spells alike; a backend adds its compiler's own (Backend.switches).
COMMON_AXES = {"FOLDSCALE": "FLAGGEMS_MXFP4_FOLDSCALE"}
AXIS_NONE = "none"
AXIS_PYTHON = PYTHON_AXIS  # the sides are two interpreters (two stacks), a and b their paths
AXIS_FLAGGEMS = FLAGGEMS_AXIS  # the sides are two FlagGems commits, a and b their hashes
AXIS_IMAGE = IMAGE_AXIS  # the sides are two images, a and b their pinned names
RAW_AXIS = "env:"  # AXIS=env:NAME: a variable no backend lists, spelt out as one on purpose
RAW_NAME_MAX = 100  # it names the campaign's directory, with the operator: within NAME_MAX
RAW_NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{0,{RAW_NAME_MAX - 1}}}")
NOT_LIVE_MARKER = "AXIS_NOT_LIVE"
INTERRUPTED_MARKER = "AB_INTERRUPTED"


@dataclass(frozen=True)
class Axis:
    """The switch under test: the name the user gave, the variable it sets (None: A/A), and
    its value on side A (off) and side B (on)."""

    name: str
    variable: str | None
    a: str = "0"
    b: str = "1"
    given_tune: str | None = None  # TUNE as given; None: the axis kind's default (tune)

    def env(self, value: str) -> dict[str, str]:
        return {self.variable: value} if self.variable else {}

    def value(self, side: str) -> str:
        """The switch's value on `side` (A or B)."""
        return self.a if side == "A" else self.b

    def side_env(self, side: str) -> dict[str, str]:
        """What `side`'s runs get in their environment."""
        return {} if self.stacks else self.env(self.value(side))

    @property
    def stacks(self) -> bool:
        """The sides are two stacks (interpreters or FlagGems commits), not a switch's values."""
        return self.name in (AXIS_PYTHON, AXIS_FLAGGEMS, AXIS_IMAGE)

    def image(self, side: str) -> str | None:
        """The image `side`'s pytest runs in where the sides are two images, else None."""
        return self.value(side) if self.name == AXIS_IMAGE else None

    def python(self, side: str) -> str | None:
        """The interpreter that runs `side` where the sides are two stacks, else None (both
        run the harness's own)."""
        return self.value(side) if self.name == AXIS_PYTHON else None

    @property
    def tune(self) -> str:
        """TUNE where given, else the axis kind's default. How side B gets its configs:
        replay (A/r0's winners, pinned: both sides run the same kernel configurations, so
        only the switch differs; with two FlagGems
        commits, a key B does not have is counted and flagged, not failed) or each (B/r0
        tunes for itself, later B rounds replay B/r0's: two interpreters' compilers may not
        share a config space, and which configs a stack's tuner picks is part of what is
        compared)."""
        if self.given_tune:
            return self.given_tune
        return "each" if self.name in (AXIS_PYTHON, AXIS_IMAGE) else "replay"


def resolve_axis(name: str, backend: Backend) -> Axis:
    """An axis kind (none, python, flaggems, image), a switch `backend` knows (short or full:
    Backend.axis_switches, COMMON_AXES), or env:NAME for any other environment variable.
    Anything else is refused with the closest names: a misspelled switch would otherwise set
    a variable nothing reads, and every row would read the same."""
    kinds = (AXIS_NONE, AXIS_PYTHON, AXIS_FLAGGEMS, AXIS_IMAGE)
    if name in kinds:
        return Axis(name, None)
    known = {**COMMON_AXES, **{v: v for v in COMMON_AXES.values()}, **backend.axis_switches()}
    if name in known:
        return Axis(name, known[name])
    if name.startswith(RAW_AXIS):
        variable = raw_variable(name)
        return Axis(variable, variable)
    close = difflib.get_close_matches(name, [*kinds, *known], n=3)
    others = [b.name for b in backends.registry().all() if name in b.axis_switches()]
    hint = (f"did you mean {' or '.join(close)}? " if close else "") + (
        f"{name} is a switch of BACKEND={', '.join(others)}, not of {backend.name}; "
        if others else "")
    accepted = ", ".join([*kinds, *sorted(known)])
    raise UsageError(f"AXIS={name!r} is not a switch BACKEND={backend.name} knows; {hint}"
                     f"expected one of: {accepted}, or {RAW_AXIS}NAME for any other "
                     "environment variable")


def raw_variable(axis: str) -> str:
    """The variable of AXIS=env:NAME; UsageError for a NAME that is no environment variable
    name, or one the harness sets itself (its ZL_ hand-over, a device visibility variable)."""
    variable = axis[len(RAW_AXIS):]
    own = {v for b in backends.registry().all() for v in b.visibility_vars}
    if not RAW_NAME.fullmatch(variable) or variable.startswith("ZL_") or variable in own:
        raise UsageError(f"AXIS={axis!r} is not accepted; expected {RAW_AXIS}NAME with NAME an "
                         f"environment variable name (letters, digits, '_', at most "
                         f"{RAW_NAME_MAX} characters) that the harness does not set itself "
                         f"(not ZL_*, nor {', '.join(sorted(own))})")
    return variable


@dataclass(frozen=True)
class Step:
    """One run of the campaign."""

    side: str  # "A" or "B"
    round: int
    value: str | None  # the axis value on this side

    @property
    def rel(self) -> str:
        return f"{self.side}/r{self.round}"


def replay_source(settings: Settings, step: Step, campaign: Path, tune: str = "replay"
                  ) -> Path | None:
    """The records `step` replays: REPLAY_FROM for every run when given, else A/r0's for every
    run after A/r0 (None: A/r0 tunes and records); with `tune` each, a side replays its own
    r0's, and B/r0 tunes too."""
    if settings.replay_from is not None:
        return settings.replay_from
    side = step.side if tune == "each" else "A"
    return None if step.rel == f"{side}/r0" else campaign / side / "r0"


def campaign_baseline(settings: Settings, axis: Axis) -> str:
    """BASELINE of a campaign (every, once or off). auto is once where the axis cannot change
    torch's own kernels (an A/A, or a compiler switch: Backend.is_compiler_switch): timing the
    reference again in every run would only double the timed work. Any other switch may reach
    torch (an allocator or library variable), so auto times it in every run."""
    if settings.baseline != "auto":
        return settings.baseline
    cannot_reach_torch = axis.name in (AXIS_NONE, AXIS_FLAGGEMS) or (
        axis.variable is not None and settings.backend.is_compiler_switch(axis.variable))
    return "once" if cannot_reach_torch else "every"


def side_settings(settings: Settings, step: Step, campaign: Path, axis: Axis) -> Settings:
    """A private cache for every run, each recording what it used; replays are strict. With
    BASELINE once, A/r0 times torch's reference and no other run does."""
    source = replay_source(settings, step, campaign, axis.tune)
    baseline = campaign_baseline(settings, axis)
    if baseline == "once":
        baseline = "every" if step.rel == "A/r0" else "off"
    return dataclasses.replace(
        settings, isolate_tuner_cache=True, record=True, dry_run=False,
        replay_from=source, replay_strict=source is not None and axis.name != AXIS_FLAGGEMS,
        baseline=baseline)


def compiler_mentions(python: str, variable: str) -> bool | None:
    """Whether the installed Triton (or FlagTree) mentions `variable` anywhere in its files;
    None when the interpreter has no Triton."""
    script = (
        "import importlib.util, pathlib, sys\n"
        "spec = importlib.util.find_spec('triton')\n"
        "if spec is None: print('none'); sys.exit()\n"
        "needle = sys.argv[1].encode()\n"
        "for root in spec.submodule_search_locations:\n"
        "    for p in pathlib.Path(root).rglob('*'):\n"
        "        if p.is_file() and p.suffix in ('.py', '.so', '.json') and "
        "needle in p.read_bytes(): print('yes'); sys.exit()\n"
        "print('no')\n")
    proc = subprocess.run([python, "-c", script, variable], capture_output=True, text=True,
                          timeout=600)
    answer = proc.stdout.strip()
    return None if answer in ("none", "") else answer == "yes"


def compiled_sets(identities: Mapping[str, list[Mapping]]) -> tuple[set[str], set[str]]:
    """Fingerprints of everything each side compiled, over all its rounds: (A, B)."""
    a, b = ({h for doc in identities[side] for h in doc.get("compiled_artifacts") or ()}
            for side in ("A", "B"))
    return a, b


def aa_artifact_note(identities: Mapping[str, list[Mapping]]) -> str | None:
    """An A/A campaign also tests the fingerprint that liveness relies on: side B, which only
    replays A's winners, must compile nothing that side A (which also compiled every tuning
    candidate) did not. None when nothing was compiled."""
    a, b = compiled_sets(identities)
    if not a and not b:
        return None
    if b <= a:
        extra = f"; side A's other {len(a - b)} are its tuning candidates" if a - b else ""
        return (f"A/A: side B compiled nothing that side A did not ({len(b)} artifacts, all "
                f"among side A's {len(a)}{extra}), so compiled code fingerprints can tell a "
                "live switch on this stack")
    return (f"A/A: identical sides compiled different artifacts (side B compiled {len(b - a)} "
            f"of its {len(b)} that side A never did): compiled-code liveness is unreliable on "
            "this stack")


def liveness(identities: Mapping[str, list[Mapping]], axis: Axis, python: str) -> tuple[str, str]:
    """DESIGN.md's liveness check: ("live" | "unknown" | "not_live" | "unchecked", note)."""
    a, b = compiled_sets(identities)
    if not a and not b:
        return "unchecked", "liveness not checked: this backend compiled no kernels"
    if not b <= a:
        return "live", "axis live: side B compiled artifacts side A never produced"
    found = compiler_mentions(python, axis.variable or "")
    if found:
        return "unknown", (f"liveness unknown: compiled artifacts are equal, but the compiler "
                           f"mentions {axis.variable}")
    return "not_live", (f"{NOT_LIVE_MARKER} axis={axis.name}: compiled artifacts are equal and "
                        f"the installed compiler never mentions {axis.variable}")


def done_lines(doc: abjson.AbDocument | Mapping[str, Any], md: Path,
               png: Path | None) -> list[str]:
    """The campaign's last words: AB_DONE with the geometric mean as a rounded %, and why
    there is no plot when there is none (`doc`: the document, or ab.json's data)."""
    found = abjson.as_document(doc)
    geomean = found.geomean_speedup_pct
    if geomean is not None:
        geomean = round(geomean, 1) or 0.0  # no "-0.0%" for a mean that rounds to nothing
    lines = [] if png else [f"{AB_PNG} not written: {NO_PLOT}"]
    counts = " ".join(f"{v.value}={sum(r.stats.verdict is v for r in found.rows)}"
                      for v in stats.Verdict)
    return lines + [f"AB_DONE rows={len(found.rows)} unpaired={len(found.unpaired)} {counts} "
                    f"geomean={'-' if geomean is None else f'{geomean:+.1f}%'} report={md}"
                    + (f" plot={png}" if png else "")]


def noise_model_from(path: Path) -> noisefloor.NoiseModel:
    """The noise floor by A latency of an A/A campaign (AXIS=none), fitted to its ab.json's
    rows; UsageError naming NOISE_FROM where it is no A/A campaign, measured no row, or
    measured a floor above stats.MAX_NOISE_FLOOR_PCT.

    Such a floor is refused, not capped: a floor says how far a null switch moves a row, and
    capping it would call faster or slower what that A/A showed noise can do, while same
    would read inside a band the host could not hold."""
    expected = "expected the directory of a finished A/A campaign (AXIS=none) with measured rows"
    try:
        doc = abjson.read_ab(path)
    except UsageError as exc:
        raise UsageError(f"NOISE_FROM={str(path)!r} is not an A/A campaign: {exc}; "
                         f"{expected}") from None
    if doc.caliber.measured_noise_floor_pct is None:
        raise UsageError(f"NOISE_FROM={str(path)!r} is not an A/A campaign (no "
                         f"measured_noise_floor_pct in {abjson.AB_JSON}); {expected}")
    model = noisefloor.fit((r.stats.a_ms, r.stats.round_speedups_pct) for r in doc.rows)
    if not model.bands:
        raise UsageError(f"NOISE_FROM={str(path)!r} has no measured row to set a floor from "
                         f"({len(doc.rows)} rows with a latency and a round); {expected}")
    check_floor(model, f"NOISE_FROM={str(path)!r} measured",
                "expected an A/A campaign whose floors are all at most that (more rounds, a "
                "quieter device)")
    return model


def check_floor(model: noisefloor.NoiseModel, who: str, expected: str) -> None:
    """UsageError where a floor of `model` is above stats.MAX_NOISE_FLOOR_PCT: `who` (what
    holds it) and the floor, the latency of its rows, and `expected`."""
    worst = model.bands[0] if model.bands else None  # floors fall with latency: the highest
    if worst is not None and worst.floor_pct > stats.MAX_NOISE_FLOOR_PCT:
        raise UsageError(
            f"{who} a noise floor of {worst.floor_pct:.1f}% (rows near {worst.a_ms:.3g} ms A "
            f"latency): a floor above {stats.MAX_NOISE_FLOOR_PCT:g}% cannot mean \"the same\"; "
            f"{expected}")
