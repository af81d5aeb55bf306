"""The variables table: every flag, make help line and environment name comes from one row."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from harness.cli import build_parser
from harness.errors import UsageError
from harness.settings import cmdline, makevars, options, variables
from harness.settings.inputs import Inputs

PARSER = build_parser()
# Flags of a subcommand's own that are no variable of make's.
OWN_FLAGS = {"summary": {"--ab", "--format", "--allow-mixed", "--noise-floor"},
             "receipt verify": {"--root"}}


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = PARSER
    for word in command.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


@pytest.mark.parametrize("command", variables.COMMANDS)
def test_each_subcommand_takes_exactly_the_flags_the_table_gives_it(command):
    parser = _subparser(command)
    flags = {s for a in parser._actions for s in a.option_strings if s not in ("-h", "--help")}
    from_table = {flag for var in variables.TABLE if command in var.commands and var.flag
                  for flag in (var.flag, *var.aliases)}
    assert flags == from_table | OWN_FLAGS.get(command, set())


def test_every_row_names_known_subcommands_and_a_group():
    groups = {variables.SETTINGS, variables.OPERATORS, variables.EXECUTOR, variables.MAKE,
              variables.BISECT}
    for var in variables.TABLE:
        assert set(var.commands) <= set(variables.COMMANDS), var.make
        assert var.group in groups, var.make
        assert (var.flag is None) == (var.group == variables.MAKE), var.make


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="'NOPE' is not a variable; expected one of: A, "):
        variables.named("NOPE")
    with pytest.raises(ValueError, match="'nope' is not one of: preflight, run"):
        options.add_arguments(argparse.ArgumentParser(), "nope")


def test_inputs_take_the_flag_over_the_environment_and_skip_empty_values():
    inputs = Inputs.read({"executor": "slurm", "out": "", "detach": True, "ops": None},
                         {"ZL_EXECUTOR": "local", "ZL_OUT": "o", "OPS": "a,b",
                          "WALLS_FROM": "", "ZL_TIMER": "direct"})
    assert inputs.get("EXECUTOR") == "slurm" and inputs.source("EXECUTOR") == "flag"
    assert inputs.get("OUT") == "o" and inputs.source("OUT") == "env"
    assert inputs.get("OPS") == "a,b" and inputs.get("MODE") == "direct"
    assert inputs.get("DETACH") == "1"
    assert inputs.get("WALLS_FROM") is None and inputs.source("WALLS_FROM") == "default"
    assert inputs.get("LEVEL") is None  # a default is not something the user gave
    with pytest.raises(KeyError):
        inputs.get("ZL_OUT")  # Make names only


def test_inputs_are_a_snapshot():
    environ = {"OPS": "a"}
    inputs = Inputs.read({}, environ)
    environ["OPS"] = "b"
    assert inputs.get("OPS") == "a" and inputs.environ["OPS"] == "a"
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.values = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        inputs.environ["OPS"] = "c"  # type: ignore[index]


def test_a_switch_is_its_flag_alone_from_make_and_from_settings():
    environ = {makevars.MAKE_ARGS_VAR: "DETACH=1 OPS=a"}
    argv = makevars.to_argv(PARSER, ["batch"], makevars.given(environ), environ)
    assert argv == ["batch", "--detach", "--ops=a"] and PARSER.parse_args(argv).detach
    environ = {makevars.MAKE_ARGS_VAR: "DETACH=0"}
    assert makevars.to_argv(PARSER, ["ab"], makevars.given(environ), environ) == ["ab"]
    environ = {makevars.MAKE_ARGS_VAR: "DETACH=yes"}
    with pytest.raises(UsageError, match="DETACH='yes' is not accepted; expected one of: 0, 1"):
        makevars.to_argv(PARSER, ["ab"], makevars.given(environ), environ)
    assert cmdline.flag_args({"DETACH": True, "OPS": "a", "WALLS_FROM": "-w"}) == [
        "--detach", "--ops", "a", "--walls-from=-w"]


def test_unit_timeout_is_a_row_of_batch_and_ab_with_its_default_in_its_help():
    var = variables.named("UNIT_TIMEOUT")
    assert (var.env, var.flag, var.default) == ("ZL_UNIT_TIMEOUT", "--unit-timeout", "3600")
    assert set(var.commands) == {"ab", "batch", "bisect"} and "default 3600" in var.make_text()


@pytest.mark.parametrize(("flags", "env", "expected"), [
    ({}, {}, 3600), ({"unit_timeout": "60"}, {"ZL_UNIT_TIMEOUT": "5"}, 60),
    ({}, {"ZL_UNIT_TIMEOUT": "5"}, 5), ({}, {"ZL_UNIT_TIMEOUT": "0"}, None)])
def test_unit_timeout_is_read_flag_first_and_0_is_no_limit(flags, env, expected):
    from harness.campaign import where

    assert where.unit_timeout(flags, env) == expected


@pytest.mark.parametrize("value", ["-1", "1.5", "1h", " ", "nan", "\u00b2", "1" * 10])
def test_a_bad_unit_timeout_names_the_variable_and_what_is_accepted(value):
    from harness.campaign import where

    with pytest.raises(UsageError, match=r"ZL_UNIT_TIMEOUT='.*' is not accepted; expected "
                                         r"seconds, a whole number from 1 to 999999999, or 0"):
        where.unit_timeout({}, {"ZL_UNIT_TIMEOUT": value})


@pytest.mark.parametrize("char", ["\n", "\r", "\t", "\x00", "\x1b", "\x7f"])
@pytest.mark.parametrize("make, flags, env, label", [
    ("A", {"a": "0{c}AB_DONE rows=999"}, {}, "A (--a)"),
    ("B", {}, {"ZL_B": "1{c}x"}, "ZL_B"),
    ("OUT", {"out": "runs{c}x"}, {}, "OUT (--out)"),
    ("SLURM_ARGS", {}, {"SLURM_ARGS": "--qos=a{c}"}, "SLURM_ARGS")])
def test_a_control_character_in_any_value_is_refused_naming_the_variable(
        make, flags, env, label, char):
    # Regression: a newline in A or B forged a marker line (AB_DONE rows=999 ...) in the unit
    # log and split ab.md's caliber line; a newline in OUT broke ops_status.csv.
    flags = {k: v.format(c=char) for k, v in flags.items()}
    env = {k: v.format(c=char) for k, v in env.items()}
    for read in (lambda: Inputs.read(flags, env),
                 lambda: variables.named(make).lookup(flags, env)):
        with pytest.raises(UsageError) as exc:
            read()
        message = str(exc.value)
        assert message.startswith(f"{label}=") and "control character" in message
        assert not any(ord(c) < 0x20 or ord(c) == 0x7f for c in message)


def test_printable_values_beyond_ascii_are_read_as_given():
    assert Inputs.read({"a": "ä b;'\"$`"}, {}).get("A") == "ä b;'\"$`"


def test_an_exported_make_name_that_is_not_read_is_named_with_the_one_that_is():
    # Regression: `export BACKEND=cuda` and `export ROUNDS=5` were silently ignored (the
    # environment names are ZL_BACKEND, ZL_ROUNDS) while an exported OP was read.
    from harness.settings.inputs import unread_exports

    lines = unread_exports({"BACKEND": "cuda", "ROUNDS": "5", "OP": "mm", "ZL_OUT": "x",
                            "PYTHON": "/usr/bin/python3", "RESUME": "runs/ab", "RUN": "r",
                            "MODE": ""})
    assert lines == [
        "warning: BACKEND='cuda' is exported but not read: its environment name is ZL_BACKEND "
        "(or give BACKEND=... on make's command line)",
        "warning: ROUNDS='5' is exported but not read: its environment name is ZL_ROUNDS (or "
        "give ROUNDS=... on make's command line)",
        "warning: RESUME='runs/ab' is exported but not read: it has no environment name: give "
        "RESUME=... to make, or --resume",
        "warning: RUN='r' is exported but not read: make takes it from its command line only "
        "(RUN=...)",
    ]
    # OP is read under its own name, PYTHON by make itself, an empty MODE is no value
    assert Inputs.read({}, {"OP": "mm"}).get("OP") == "mm"
