"""The `harness` command: parse, call, print, exit with DESIGN.md's codes."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from harness import __version__, axes, backends, executors
from harness.bisect import command as bisect
from harness.campaign import batch, resume, start, watch
from harness.campaign.unit import run_unit_command
from harness.errors import (
    EXIT_OK,
    EXIT_USAGE,
    HarnessError,
    Interrupted,
    PreflightError,
    UsageError,
    bad_path,
    no_space,
    reader_gone,
)
from harness.executors import device_lock
from harness.executors.devices import select_devices
from harness.history import command as history
from harness.history import recording
from harness.report import abjson, ci, gate, receipt
from harness.report import write as report
from harness.report.summary import FORMATS, summarize, unfinished
from harness.run import container, images, runner, warmup
from harness.run.preflight import PreflightResult, collect_preflight, run_preflight
from harness.run.rundir import utc_stamp
from harness.settings import abspec, inputs, makevars, options, spec, usage, variables


def internal() -> tuple[str, ...]:
    """The subcommands the harness runs itself, kept out of every help: a unit's child and
    each executor kind's task."""
    return (*usage.INTERNAL, *(k.task_command for k in executors.registry().all()
                               if k.task_command))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 too; keep our one-line form
        for name in internal():  # a subcommand's choices: the internal ones are no choice
            message = message.replace(f", '{name}'", "")
        self.exit(EXIT_USAGE, f"error: {message}\n")


def _command(sub: argparse._SubParsersAction, name: str, help: str) -> argparse.ArgumentParser:
    """A user's subcommand: its line in `harness --help` and examples at the foot of its own."""
    return sub.add_parser(name, help=help, epilog=usage.epilog(name),
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _cmd_backends(args: argparse.Namespace) -> int:
    registry = backends.registry()
    if args.json:
        print(json.dumps([b.to_dict() for b in registry.all()], indent=2))
        return EXIT_OK
    for b in registry.all():
        capture = b.graph_class or "no capture"
        print(f"{b.name:<7} aliases={','.join(b.aliases) or '-'} vendor={b.vendor or '-'} "
              f"torch.{b.torch_device} visibility={','.join(b.visibility_vars) or '-'} "
              f"graph={capture} deny={','.join(sorted(b.capture_deny_ops)) or '-'} "
              f"compat={','.join(b.compat_plugins) or '-'}")
    return EXIT_OK


def _report(line: str) -> None:
    print(line, flush=True)


def _err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _error_line(line: str) -> None:
    """The error's one line on stderr; where stderr is itself a file on the full device, the
    exit code alone has to tell."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass


def _dry_run_checks(settings: spec.Settings) -> PreflightResult:
    """Every check a dry run can make here, all of them even after one fails."""
    return collect_preflight(settings, with_accelerator=False, report=_report)


def _in_image(settings: spec.Settings, args: argparse.Namespace) -> int | None:
    """With RUNNER docker or podman: the subcommand's exit code from inside the backend's image;
    None on the host, and under DRY_RUN once the container command line is printed: the plan
    follows (_plan_for_image)."""
    if settings.runner in ("host", *spec.CLUSTER_RUNNERS):  # a cluster runner: in each task
        return None
    rc = container.run_in_image(settings, args.argv)
    if settings.dry_run and rc == EXIT_OK:
        print("in the image, the plan (what its FlagGems and stack decide is checked there):")
        return None
    return rc


def _plan_for_image(settings: spec.Settings) -> spec.Settings:
    """The settings of a dry run's plan of what the image runs: as the command inside it
    gets them (RUNNER=host); `settings` itself on the host."""
    if settings.runner not in images.ENGINES or not settings.dry_run:
        return settings
    # the container exposes exactly DEVICES, numbered from 0, and the command inside gets none
    return dataclasses.replace(settings, runner="host", devices=(), planned_for_image=True)


def _cmd_preflight(args: argparse.Namespace) -> int:
    settings = spec.resolve(vars(args))
    if (rc := _in_image(settings, args)) is not None:
        return rc
    settings = _plan_for_image(settings)
    if settings.planned_for_image:  # no node is resolved here: the image's FlagGems has it
        return _dry_run_checks(settings).write_failures(_report, _err)
    plan = run_preflight(settings, with_accelerator=not settings.dry_run, report=_report)
    print(f"PREFLIGHT_OK node={plan.node.nodeid} backend={settings.backend.name}")
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    settings = spec.resolve(vars(args))
    if (rc := _in_image(settings, args)) is not None:
        return rc
    settings = _plan_for_image(settings)
    if settings.dry_run:  # the whole plan first, then every check that would fail
        result = _dry_run_checks(settings)
        plan = runner.placeholder_plan(settings, result.plan)
        stamp = utc_stamp()
        for line in [*warmup.describe_dry_run(settings, result.plan),
                     *runner.describe_dry_run(settings, plan, settings.out / plan.op / stamp)]:
            print(line)
        return result.write_failures(_report, _err)
    plan = run_preflight(settings, report=_report)
    with device_lock.holding(settings.backend, select_devices(settings) or [None], out=_report):
        settings, run_dir = warmup.prepare(settings, plan)  # PARALLEL_WARMUP_GPUS: sweep first
        rc, run_dir = runner.execute(settings, plan, run_dir=run_dir, claimed=run_dir is not None)
    recording.record(vars(args), args.inputs.environ, settings.out, run_dir, _report)
    return rc


def _cmd_ab(args: argparse.Namespace) -> int:
    gate.from_settings(vars(args), args.inputs.environ)  # a bad FAIL_ON: before anything runs
    if resume.asked(vars(args)):
        return resume.resume(vars(args), args.inputs.environ, out=_report)
    start.refuse_resume_only(vars(args))
    flags = executors.task_flags(vars(args), args.inputs.environ)
    settings = spec.resolve(flags)
    campaign = abspec.resolve_ab(flags)
    axis = axes.resolve(campaign.axis, settings.backend)
    if axis.kind.side_images:  # the driver stays here; each side's pytest runs in its image
        if settings.runner not in (*images.ENGINES, *spec.CLUSTER_RUNNERS):
            raise UsageError(f"AXIS=image runs each side's pytest in its image: it needs RUNNER "
                             f"{', '.join(images.ENGINES)} (or, with EXECUTOR=slurm, "
                             f"{' or '.join(spec.CLUSTER_RUNNERS)}), not {settings.runner!r}")
        if settings.runner in images.ENGINES:  # a cluster's nodes have theirs
            images.check_engine(settings.runner, probe=not settings.dry_run)
    elif (rc := _in_image(settings, args)) is not None:
        return rc
    else:
        settings = _plan_for_image(settings)
    return start.start(settings, flags, args.inputs.environ, axis, campaign, out=_report)


def _add_ab(sub: argparse._SubParsersAction) -> None:
    p = _command(sub, "ab", "an A/B campaign of one switch over one operator or many: "
                 "AXIS, A, B, ROUNDS, OP or OPS")
    options.add_arguments(p, "ab")
    p.set_defaults(func=_cmd_ab)
    # The child of one unit (a campaign's driver or a cluster task runs it); not for users, so
    # no help: it is listed nowhere.
    p = sub.add_parser("ab-unit")
    p.add_argument("campaign", metavar="DIR")
    p.add_argument("unit", metavar="UNIT")
    options.add_arguments(p, "ab-unit")
    p.set_defaults(func=_cmd_ab_unit)
    # One task of an executor kind that has its own (a Slurm array task: its share of a
    # plan's units, which the generated batch script runs).
    for kind in executors.registry().all():
        if kind.task_command and kind.run_task:
            p = sub.add_parser(kind.task_command)
            p.add_argument("plan", metavar="PLAN")
            p.set_defaults(func=_cmd_task, run_task=kind.run_task)


def _cmd_task(args: argparse.Namespace) -> int:
    return int(args.run_task(Path(args.plan), args.inputs.environ, _report))


def _cmd_ab_unit(args: argparse.Namespace) -> int:
    settings = spec.resolve(vars(args))
    return run_unit_command(Path(args.campaign), args.unit, settings, out=_report)


def _cmd_summary(args: argparse.Namespace) -> int:
    summarize(args.runs, ab=args.ab, fmt=args.format, allow_mixed=args.allow_mixed,
              noise_floor_pct=args.noise_floor, write_line=print)
    return EXIT_OK


def _add_summary(sub: argparse._SubParsersAction) -> None:
    p = _command(sub, "summary", "tables of runs, batches or FlagGems logs; --ab A B")
    p.add_argument("runs", nargs="*", metavar="RUN",
                   help="a run directory, a batch directory (ops_status.csv) or a FlagGems log")
    p.add_argument("--ab", nargs=2, metavar=("A", "B"), dest="ab",
                   help="compare B against A: speedup %% = (A_ms / B_ms - 1) * 100")
    p.add_argument("--format", choices=FORMATS, default="md", dest="format")
    p.add_argument("--allow-mixed", action="store_true", dest="allow_mixed",
                   help="compare runs of different calibers (level, timer, backend, shape mode)")
    p.add_argument("--noise-floor", type=float, default=1.0, dest="noise_floor", metavar="PCT",
                   help="smallest effect called faster/slower, in %% (an A/A campaign's spread)")
    p.set_defaults(func=_cmd_summary)


def _cmd_batch(args: argparse.Namespace) -> int:
    flags = executors.task_flags(vars(args), args.inputs.environ)
    settings = spec.resolve(flags)
    if (rc := _in_image(settings, args)) is not None:
        return rc
    planned = _plan_for_image(settings)
    if planned.planned_for_image:  # its children, as the command inside starts them
        flags = {**flags, "runner": planned.runner, "devices": None}
    return batch.main(planned, flags, args.inputs.environ)


def _cmd_image(args: argparse.Namespace) -> int:
    return images.build_image(spec.resolve(vars(args)))


def _cmd_shell(args: argparse.Namespace) -> int:
    return container.run_in_image(spec.resolve(vars(args)), [], shell=True)


def _cmd_pin(args: argparse.Namespace) -> int:
    name = args.inputs.get("BACKEND")
    chosen = [backends.get(name).name] if name else None
    dry = args.inputs.get("DRY_RUN") == "1"
    return images.pin(chosen, dry_run=dry)


def _add_image_commands(sub: argparse._SubParsersAction) -> None:
    p = _command(sub, "image", "build the backend's pinned image (containers/pins.yaml)")
    options.add_arguments(p, "image")
    p.set_defaults(func=_cmd_image)
    p = _command(sub, "pin", "resolve the base image tags of pins.yaml to digests")
    options.add_arguments(p, "pin")
    p.set_defaults(func=_cmd_pin)
    p = _command(sub, "shell", "an interactive shell in the backend's image")
    options.add_arguments(p, "shell")
    p.set_defaults(func=_cmd_shell)


def _cmd_receipt_verify(args: argparse.Namespace) -> int:
    if (why := unfinished(Path(args.path))) is not None:  # not "no receipt": still running
        raise why
    root = args.root or spec.checkout_root()
    if root is None:
        raise UsageError("receipt verify: this harness is installed, not run from a checkout; "
                         "give --root DIR, the harness checkout the receipt describes")
    result = receipt.verify(args.path, root=root)
    for line in receipt.verify_lines(result):
        print(line)
    return EXIT_OK if result.ok else 1  # a file differs: the receipt no longer describes this


def _cmd_report(args: argparse.Namespace) -> int:
    fail_on = gate.from_settings(vars(args), args.inputs.environ)
    if (why := unfinished(Path(args.path))) is not None:  # not "give a campaign directory"
        raise why
    md, png = report.write_report(args.path)
    print(md)
    print(png if png else f"{report.AB_PNG} not written: {report.NO_PLOT}")
    directory = Path(md).parent
    base = gate.campaign_exit(abjson.read_ab(directory)) if fail_on.words else EXIT_OK
    return ci.conclude(directory, base, fail_on, args.inputs.environ, _report)


def _add_receipt_report(sub: argparse._SubParsersAction) -> None:
    p = _command(sub, "receipt", "receipts of A/B campaigns")
    verbs = p.add_subparsers(dest="receipt_command", required=True, parser_class=_Parser)
    v = verbs.add_parser("verify", help="recompute the sha256 of every harness file it lists")
    v.add_argument("path", metavar="PATH", help="receipt.json, or the campaign directory")
    v.add_argument("--root", default=None, dest="root", metavar="DIR",
                   help="the harness checkout to check (default: the one this harness runs from)")
    v.set_defaults(func=_cmd_receipt_verify)
    p = _command(sub, "report", "ab.md and ab.png of a campaign, from its ab.json")
    p.add_argument("path", metavar="PATH", help="the campaign directory (or its ab.json)")
    options.add_arguments(p, "report")
    p.set_defaults(func=_cmd_report)
    p = _command(sub, "status", "a campaign (or batch) while it runs or after: units, driver, "
                 "ETA, verdicts so far; writes nothing")
    p.add_argument("path", metavar="DIR", help="the campaign directory (or a batch directory)")
    p.set_defaults(func=_cmd_status)


def _cmd_status(args: argparse.Namespace) -> int:
    for line in watch.status_lines(Path(args.path)):
        print(line)
    return EXIT_OK


def _cmd_vars(args: argparse.Namespace) -> int:
    for line in makevars.help_lines():
        print(line)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="harness", description=usage.DESCRIPTION, epilog=usage.TOP_EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser,
                                metavar="COMMAND")
    p = _command(sub, "backends", "print the backend registry")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_backends)
    p = _command(sub, "vars", "list every variable of the make targets (make help)")
    p.set_defaults(func=_cmd_vars)
    p = _command(sub, "preflight", "run the preflight checks of a run")
    options.add_arguments(p, "preflight")
    p.set_defaults(func=_cmd_preflight)
    p = _command(sub, "run", "run one benchmark node in a new run directory")
    options.add_arguments(p, "run")
    p.set_defaults(func=_cmd_run)
    _add_ab(sub)
    bisect.add_parser(sub, _command, _in_image, _report)
    p = _command(sub, "batch", "many operators, one run process each, over DEVICES")
    options.add_arguments(p, "batch")
    p.set_defaults(func=_cmd_batch)
    _add_summary(sub)
    _add_image_commands(sub)
    _add_receipt_report(sub)
    history.add_parser(sub, _Parser)
    history.add_publish(sub)
    return parser


def _short_usage(parser: argparse.ArgumentParser) -> int:
    """Bare `harness`: the common commands and where to read more, instead of argparse's
    "the following arguments are required"."""
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: str(a.help) for a in subs._choices_actions}
    for line in usage.short_usage(helps):
        print(line, file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv and not variables.environ().get(makevars.MAKE_ARGS_VAR):
        return _short_usage(parser)
    try:  # a make target: its command-line variables, each one argument
        environ = variables.environ()
        argv = makevars.to_argv(parser, argv, makevars.given(environ), environ)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    args = parser.parse_args(argv)
    args.argv = argv  # for the run inside an image
    if args.command not in internal():  # their environment is the harness's own
        for line in inputs.unread_exports(variables.environ()):
            _err(line)
    try:
        args.inputs = spec.Inputs.read(vars(args), variables.environ())  # read once
        device_lock.wait_limit()  # a bad ZL_DEVICE_WAIT is refused before anything is claimed
        return args.func(args)
    except PreflightError as exc:
        print(str(exc), flush=True)  # a marker line: stdout, where run logs and grep look
        return exc.exit_code
    except HarnessError as exc:
        _error_line(f"error: {exc}")
        return exc.exit_code
    except BrokenPipeError:
        return reader_gone()
    except OSError as exc:  # a full device or an impossible path anywhere: one line
        if (known := no_space(exc) or bad_path(exc)) is None:
            raise
        _error_line(f"error: {known}")
        return known.exit_code
    except Interrupted as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # Ctrl-C, or a signal that stopped a wait for a device
        print(str(exc) or "interrupted", file=sys.stderr)
        return int(getattr(exc, "exit_code", 130))


if __name__ == "__main__":
    sys.exit(main())
