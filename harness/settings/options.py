"""The argparse flags of the variables table: a subcommand's, grouped as its help lists them."""

from __future__ import annotations

import argparse

from harness.settings.variables import COMMANDS, TABLE, Var


def add_flag(group: argparse._ArgumentGroup | argparse.ArgumentParser, var: Var,
             command: str | None = None) -> None:
    """Add `var`'s flag, with its help on `command`."""
    help_text = var.help_text(command).replace("%", "%%")  # argparse formats help with %
    flag = var.flag_name
    if var.switch:
        group.add_argument(flag, dest=var.dest, action="store_true", help=help_text)
    elif var.bare is not None:
        group.add_argument(flag, *var.aliases, dest=var.dest, nargs="?", const=var.bare,
                           default=None, metavar=var.metavar or var.make, help=help_text)
    else:
        group.add_argument(flag, *var.aliases, dest=var.dest, default=None,
                           metavar=var.metavar or var.make, help=help_text)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """Add every flag that subcommand `command` (one of COMMANDS) takes, group by group."""
    if command not in COMMANDS:
        raise ValueError(f"command {command!r} is not one of: {', '.join(COMMANDS)}")
    groups: dict[str, argparse._ArgumentGroup] = {}
    for var in TABLE:
        if var.flag and command in var.commands:
            if var.group not in groups:
                groups[var.group] = parser.add_argument_group(var.group)
            add_flag(groups[var.group], var, command)
