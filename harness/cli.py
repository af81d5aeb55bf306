"""The `harness` command: parse, call, print, exit with DESIGN.md's codes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from harness import __version__, backends, runner, spec
from harness.errors import EXIT_OK, EXIT_USAGE, HarnessError, PreflightError
from harness.preflight import run_preflight

RUN_VARS = ("BACKEND", "OP", "OP_FILE", "TEST_NODE", "LEVEL", "SHAPE_MODE", "SHAPE_FILE", "MODE",
            "REPEAT", "ISOLATE_TUNER_CACHE", "REPLAY_FROM", "USE_FLAGTUNE",
            "PARALLEL_WARMUP_GPUS", "DEVICES", "FLAGGEMS_DIR", "RUNNER", "OUT", "DRY_RUN")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep our one-line form
        self.exit(EXIT_USAGE, f"error: {message}\n")


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


def _cmd_preflight(args: argparse.Namespace) -> int:
    settings = spec.resolve(vars(args))
    plan = run_preflight(settings, with_accelerator=not settings.dry_run, report=_report)
    print(f"PREFLIGHT_OK node={plan.node.nodeid} backend={settings.backend.name}")
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    settings = spec.resolve(vars(args))
    if settings.runner != "host":
        raise HarnessError(f"RUNNER={settings.runner!r}: running inside the vendor image is "
                           "not available yet; set RUNNER=host to run on this host")
    plan = run_preflight(settings, with_accelerator=not settings.dry_run, report=_report)
    if settings.dry_run:
        stamp = runner.utc_stamp()
        for line in runner.describe_dry_run(settings, plan, settings.out / plan.op / stamp):
            print(line)
        return EXIT_OK
    rc, _ = runner.execute(settings, plan)
    return rc


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="harness", description=__doc__)
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("backends", help="print the backend registry")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_backends)
    p = sub.add_parser("preflight", help="run the preflight checks of a run")
    spec.add_arguments(p, RUN_VARS)
    p.set_defaults(func=_cmd_preflight)
    p = sub.add_parser("run", help="run one benchmark node in a new run directory")
    spec.add_arguments(p, RUN_VARS)
    p.set_defaults(func=_cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except PreflightError as exc:
        print(str(exc), flush=True)  # a marker line: stdout, where run logs and grep look
        return exc.exit_code
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
