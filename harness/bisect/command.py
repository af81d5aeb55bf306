"""`harness bisect` on the command line: its parser, and its run inside the image where asked."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from harness.bisect import driver
from harness.campaign import resume
from harness.settings import options, spec

HELP = ("the first bad FlagGems commit (GOOD..BAD) or stack (STACKS) for OP, each step judged "
        "by A/B campaigns with as many rounds as decide")


def add_parser(sub: argparse._SubParsersAction,
               command: Callable[[argparse._SubParsersAction, str, str], argparse.ArgumentParser],
               in_image: Callable[[spec.Settings, argparse.Namespace], int | None],
               out: Callable[[str], None]) -> None:
    """Add `bisect` to `sub` through the CLI's `command`; with RUNNER docker or podman it
    runs in the backend's image (`in_image`), as `harness ab` does."""
    def run(args: argparse.Namespace) -> int:
        # a resume's settings are its bisection's: read in the driver
        if not resume.asked(vars(args)):
            settings = spec.resolve(vars(args), args.inputs.environ)
            if (rc := in_image(settings, args)) is not None:
                return rc
        return driver.run(vars(args), args.inputs.environ, out)

    p = command(sub, driver.COMMAND, HELP)
    options.add_arguments(p, driver.COMMAND)
    p.set_defaults(func=run)
