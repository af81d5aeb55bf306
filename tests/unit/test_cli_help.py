"""What a new user sees first: bare `harness`, `harness --help`, each subcommand's examples."""

from __future__ import annotations

import argparse
import os
import sys

import pytest

from harness import cli
from harness.settings import usage


def subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_bare_harness_prints_the_common_commands_not_a_missing_argument(capsys):
    # Regression: bare `harness` printed only "the following arguments are required: command".
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert "the following arguments are required" not in err
    assert "common commands:" in err and "harness <command> --help" in err
    for name in usage.COMMON:
        assert f"\n  {name} " in err
    assert f"  {usage.FIRST}" in err  # a first command that needs no accelerator


def test_help_hides_the_internal_subcommands_and_speaks_to_users(capsys):
    # Regression: `harness --help` listed ab-unit and slurm-task, and described the program
    # to its developers ("parse, call, print, exit with DESIGN.md's codes").
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for name in cli.internal():
        assert name not in out
    assert "DESIGN.md" not in out and "FlagGems' pytest benchmarks" in out
    choices = subcommands(cli.build_parser()).choices
    assert set(cli.internal()) <= set(choices)  # still there for the harness's own children


def test_every_user_subcommand_has_examples_that_it_parses(capsys):
    parser = cli.build_parser()
    users = [name for name in subcommands(parser).choices if name not in cli.internal()]
    assert sorted(users) == sorted(usage.EXAMPLES)
    for name in users:
        with pytest.raises(SystemExit):
            cli.main([name, "--help"])
        assert "example" in capsys.readouterr().out.split("\n\n")[-1]
        for line in usage.EXAMPLES[name]:
            words = line.split("#")[0].replace("<backend>", "cpu").split()[1:]
            parser.parse_args(words)  # an example that no longer parses fails here


def test_a_reader_that_goes_away_ends_a_command_quietly(monkeypatch, capsys):
    # Regression: `harness history trend OP | head -1` printed a BrokenPipeError traceback.
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    monkeypatch.setattr(sys, "stdout", os.fdopen(write_end, "w", buffering=1))
    assert cli.main(["backends"]) == 141
    sys.stdout.write("after\n")  # stdout now leads nowhere, and writing there cannot fail
    sys.stdout.flush()
    assert "Traceback" not in capsys.readouterr().err
