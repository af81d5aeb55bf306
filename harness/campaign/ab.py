"""A/B campaigns of one axis: interleaved rounds, same configs on both sides, their ending.

Side A runs with the switch off and records its autotune winners (round 0); every later run, A
or B, replays those winners strictly from a private cache, so both sides run the same kernel
configurations. With REPLAY_FROM every run, A/r0 included, replays that earlier run's records
instead: the campaign skips the tuning sweep and its table is pinned to known configs. Rounds
are interleaved A B, B A, A B ... so that drift cancels. AXIS=none runs an A/A campaign whose
spread is the noise floor of later campaigns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import stats
from harness.axes import Axis
from harness.errors import UsageError
from harness.report import abjson
from harness.report.plot import AB_PNG, NO_PLOT
from harness.report.sources import caliber_of
from harness.settings.spec import Settings
from harness.stats import noisefloor

INTERRUPTED_MARKER = "AB_INTERRUPTED"


@dataclass(frozen=True)
class SideRun:
    """One run of the campaign."""

    side: str  # "A" or "B"
    round: int
    value: str | None  # the axis value on this side

    @property
    def rel(self) -> str:
        return f"{self.side}/r{self.round}"


def replay_source(settings: Settings, step: SideRun, campaign: Path, tune: str = "replay"
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
    torch's own kernels (AxisKind.reaches_torch: an A/A, two FlagGems commits, a compiler
    switch): timing the reference again in every run would only double the timed work. Any
    other axis may reach torch (an allocator or library variable, another stack), so auto
    times it in every run."""
    if settings.baseline != "auto":
        return settings.baseline
    return "every" if axis.kind.reaches_torch(axis, settings.backend) else "once"


def side_settings(settings: Settings, step: SideRun, campaign: Path, axis: Axis) -> Settings:
    """A private cache for every run, each recording what it used; replays are strict. With
    BASELINE once, round 0 times torch's reference on both sides and no later run does: timed
    just before a kernel, the reference moves its reading (an H200 read max_dim's, rot90's and
    reflection_pad1d's first microsecond row 13-19% higher after it), so a side timed with it
    is paired only with a side timed with it."""
    source = replay_source(settings, step, campaign, axis.tune)
    baseline = campaign_baseline(settings, axis)
    if baseline == "once":
        baseline = "every" if step.round == 0 else "off"
    return dataclasses.replace(
        settings, isolate_tuner_cache=True, record=True, dry_run=False,
        replay_from=source, replay_strict=source is not None and axis.kind.strict_replay,
        baseline=baseline)


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


# What an A/A's floor must share with the campaign that takes it (NOISE_FROM): a floor says
# how far a null switch moves a row on that device, with that timer and budget.
NOISE_CALIBER = ("backend", "level", "timer", "graph_timer", "warmup_ms", "iter_ms")


def noise_model_from(path: Path, caliber: Mapping[str, Any] | None = None
                     ) -> noisefloor.NoiseModel:
    """The noise floor by A latency of an A/A campaign (AXIS=none), fitted to its ab.json's
    rows; UsageError naming NOISE_FROM where it is no A/A campaign, measured no row, measured
    a floor above stats.MAX_NOISE_FLOOR_PCT, or was measured at another `caliber` (the
    campaign's settings.caliber()) in a field of NOISE_CALIBER that its ab.json states.

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
    if caliber is not None:
        theirs, ours = caliber_of(doc.caliber.values), caliber_of(caliber)
        stated = doc.caliber.values  # a field it does not state is not held against it
        differ = [f"{k} {theirs.get(k)!r} (this campaign's {ours.get(k)!r})"
                  for k in NOISE_CALIBER if theirs.get(k) != ours.get(k)
                  and (k in stated or (k == "graph_timer" and "timer" in stated))]
        if differ:
            raise UsageError(f"NOISE_FROM={str(path)!r} was measured at another caliber: "
                             f"{'; '.join(differ)}; expected an A/A of this campaign's "
                             "BACKEND, LEVEL, MODE, GRAPH_TIMER, WARMUP_MS and ITER_MS")
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
