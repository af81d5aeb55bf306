"""`harness ab --resume DIR`: an earlier campaign run to its end, or extended by rounds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import backends, executors, stats
from harness.campaign import ab, checkout, driver, dryrun, plan, start, where
from harness.campaign.document import Campaign, load
from harness.errors import EXIT_OK, UsageError, choice_error
from harness.report import abjson
from harness.report.sources import AB_JSON
from harness.settings import abspec, spec, variables
from harness.settings.spec import Settings
from harness.stats import noisefloor

# Settings a resume may not change: they decide whether the new rounds compare with the old.
RESUME_FIXED = ("backend", "level", "mode")
# What a resume reads besides --resume, --only and the executor's flags: the fixed caliber
# (refused when it differs), where units run, how many rounds, and whether to only print.
RESUME_TAKES = ("BACKEND", "LEVEL", "MODE", "DEVICES", "ROUNDS", "DRY_RUN")


def _resume_settings(campaign: Campaign, flags: Mapping[str, Any], env: Mapping[str, str]
                     ) -> Settings:
    """The campaign's own settings; refused where BACKEND, LEVEL or MODE is given otherwise;
    DEVICES may change."""
    given = {}
    for name, key in (("BACKEND", "backend"), ("LEVEL", "level"), ("MODE", "mode")):
        if (value := spec.given(name, flags, env)) is not None:
            given[key] = backends.get(value).name if key == "backend" else value
    plan.check_caliber(campaign, given, RESUME_FIXED)
    settings, stored = start.settings_from_argv(campaign.argv)
    if (devices_value := spec.given("DEVICES", flags, env)) is not None:
        settings = spec.resolve({**stored, "devices": devices_value})
    return settings


def _check_floor(directory: Path, campaign: Campaign) -> None:
    """A campaign started before a floor above 25% was refused is refused on resume: its
    verdicts would still lean on that floor."""
    ab.check_floor(noisefloor.NoiseModel.from_json(campaign.noise_floor_bands),
                   f"RESUME={str(directory)!r} (NOISE_FROM={campaign.noise_from!r}) holds",
                   "start the campaign again with NOISE_FROM an A/A whose floors are all at "
                   "most that")


def _added_rounds(directory: Path, campaign: Campaign, flags: Mapping[str, Any],
                  env: Mapping[str, str]) -> list:
    """The units ROUNDS and ONLY add to the campaign."""
    only = flags.get("only")
    if only is not None and only not in stats.OP_VERDICTS:
        raise choice_error("ONLY", only, stats.OP_VERDICTS)
    rounds_value = spec.given("ROUNDS", flags, env)
    if rounds_value == abspec.AUTO:
        raise UsageError(f"ROUNDS={abspec.AUTO} is not accepted on resume: a ROUNDS=auto "
                         "campaign goes on adding rounds by itself; give a number to add rounds "
                         "up to it")
    rounds = (abspec.check_rounds(rounds_value, "ROUNDS", campaign.axis.name)
              if rounds_value else None)
    verdicts = _verdicts(directory, only)
    return plan.extend(campaign, rounds, only, verdicts)


def asked(flags: Mapping[str, Any]) -> bool:
    """Whether RESUME was given; UsageError for one given empty (`--resume ''`), which read as
    no resume and refused a new campaign's missing AXIS instead of naming RESUME."""
    value = flags.get("resume")
    if value is not None and not str(value).strip():
        raise UsageError(f"RESUME={value!r} names no directory; expected the folder of the "
                         "campaign or bisection to go on with, e.g. runs/ab/<axis>-<op>/<ts>")
    return value is not None


def resume(flags: Mapping[str, Any], env: Mapping[str, str],
           out: Callable[[str], None] = print) -> int:
    """`harness ab --resume DIR [--rounds N] [--only VERDICT]`: run what is left, add rounds."""
    directory = Path(str(flags["resume"]))
    refuse_unused(flags, env)
    dry_run = spec.given("DRY_RUN", flags, env) == "1"  # checked before anything is read or run
    timeout_s = where.unit_timeout(flags, env)
    campaign = load(directory)
    _check_floor(directory, campaign)
    settings = _resume_settings(campaign, flags, env)
    checkout.check_same_commit(directory, campaign, settings)
    # A campaign resumes where it ran unless EXECUTOR says otherwise.
    chosen = executors.resumed(campaign.executor, settings, flags, env,
                               task_image=not campaign.axis.kind.side_images)
    if flags.get("exclude") not in (None, ""):  # in memory: the driver writes it, under the lock
        plan.exclude(campaign, str(flags["exclude"]))
    new = _added_rounds(directory, campaign, flags, env)
    left_out = [op for op, info in campaign.ops.items() if info.excluded]
    if not dry_run:
        driver.check_no_driver(directory)
    settled = where.earlier_runs(directory, campaign, chosen)  # before anything is written
    out(f"resuming {directory}: {len(plan.units_to_run(campaign)) - len(settled)} units to run "
        f"({len(new)} added)" + (f"; excluded: {', '.join(left_out)}" if left_out else ""))
    workers = start.campaign_workers(campaign.axis, flags, env)
    executor = start.campaign_executor(settings, chosen, directory, campaign, env, out, workers)
    if dry_run:
        for line in dryrun.describe(campaign, executor, directory,
                                   "exists; nothing added to it", workers):
            out(line)
        return EXIT_OK
    where.preflight(chosen, directory, out)
    if chosen.kind.keeps:  # campaign_executor made the document its own
        campaign.executor.settings = chosen.given
    # The added rounds reach campaign.json only from the driver, which writes it once it holds
    # the campaign's lock: a resume refused because another driver runs changes nothing.
    return start.drive_recorded(directory, campaign, settings, executor, flags, env, out, workers,
                           timeout_s, settled)


def refuse_unused(flags: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
    """A resume runs the campaign's own settings: a setting given with it that it would not
    use (OP=mm, DTYPES=...), by flag or exported, is refused rather than silently dropped."""
    env = {} if env is None else env
    by_make = {var.make: var for var in variables.TABLE}
    names = [v.make for v in spec.VARS if v.make not in RESUME_TAKES]
    unused = []
    for name in [*names, "OPS", "OPS_FILE", "WALLS_FROM"]:
        value, source = by_make[name].lookup(flags, env)
        if source != "default":  # named as the user wrote it: OP, or ZL_DTYPES exported
            unused.append(name if source == "flag" else by_make[name].label(source))
    if unused:
        raise UsageError(
            f"RESUME runs the campaign with its own settings; {', '.join(unused)} cannot be "
            "given with it (a resume takes ROUNDS, ONLY, EXCLUDE, DEVICES, DRY_RUN, EXECUTOR and "
            "the SLURM_ settings, and BACKEND, LEVEL, MODE only as the campaign has them; unset "
            "an exported one)")


def _verdicts(directory: Path, only: str | None) -> dict[str, str]:
    """Each operator's verdict in the campaign's ab.json, which ONLY picks operators by (none
    before a first ab.json was written); UsageError naming the file where it is corrupt."""
    if only is None or not (directory / AB_JSON).exists():
        return {}
    try:
        return {op: o.verdict for op, o in (abjson.read_ab(directory).operators or {}).items()}
    except UsageError as exc:
        raise UsageError(f"ONLY={only!r} picks operators by their verdict in the campaign's "
                         f"{AB_JSON}, which is corrupt: {exc}; a resume without ONLY "
                         "writes it afresh") from None
