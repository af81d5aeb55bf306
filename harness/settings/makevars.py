"""The variables given on make's command line, turned into arguments of the harness subcommand."""

from __future__ import annotations

import argparse
import difflib
import os
import shlex
import textwrap
from collections.abc import MutableMapping, Sequence

from harness import backends
from harness.errors import UsageError
from harness.settings import variables

# The Makefile hands every variable given on its command line over in this one environment
# variable, as `NAME=value` items each quoted for shlex. No shell ever reads it, and make never
# expands the values (`$(value ...)`), so every value arrives as typed: spaces, quotes, `;`, `$`,
# backticks and newlines included.
MAKE_ARGS_VAR = "ZL_MAKE_ARGS"
# The directory make was typed in (its $(PWD)): `make -C CHECKOUT` runs the harness in the
# checkout, and a relative path the user typed is theirs, not the checkout's.
MAKE_CWD_VAR = "ZL_MAKE_CWD"
SUMMARY_ARGS = "SUMMARY_ARGS"
HISTORY_ARGS = "HISTORY_ARGS"
HISTORY_DEFAULT_VERB = "list"  # `make history` without HISTORY_ARGS
RUN = "RUN"
# The variables that name a file or directory of the user's (a default stays the checkout's).
USER_PATHS = frozenset({"FLAGGEMS_DIR", "OUT", "SHAPE_FILE", "REPLAY_FROM", "NOISE_FROM",
                        "OPS_FILE", "WALLS_FROM", "RESUME", RUN})
# Variables of make targets that are no setting of spec.VARS: (name, flag or None, help).
MAKE_ONLY: tuple[tuple[str, str | None, str], ...] = tuple(
    (var.make, var.flag, var.make_text()) for var in variables.TABLE
    if var.group != variables.SETTINGS)


# Names outside the table that a make command line may still set, for the run's environment:
# the legacy timer switch, and the compiler's and FlagGems' own variables (an axis by hand).
PASSED_NAMES = frozenset({"ZL_ENABLE_CUDAGRAPH"})
PASSED_PREFIXES = ("FLAGTREE_", "FLAGGEMS_", "TRITON_")


def known_names() -> frozenset[str]:
    """Every name a make command line may set: the table's Make and environment names,
    PASSED_NAMES and the backends' device visibility variables."""
    names = {var.make for var in variables.TABLE} | {var.env for var in variables.TABLE if var.env}
    for backend in backends.registry().all():
        names.update(backend.visibility_vars)
    return frozenset(names | PASSED_NAMES)


def check_name(name: str, value: str, known: frozenset[str]) -> None:
    """Refuse a variable the harness does not know, naming the closest one: make would have
    exported it and nothing would read it (DTYPE=float32 measured every dtype)."""
    if name in known or name.startswith(PASSED_PREFIXES):
        return
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise UsageError(f"{name}={value!r} is not a variable the harness knows; {hint}"
                     "`make help` lists them")


def given(environ: MutableMapping[str, str]) -> list[tuple[str, str]]:
    """The (name, value) pairs make was given, removed from `environ` so no child reads them."""
    text = environ.pop(MAKE_ARGS_VAR, "")
    try:
        items = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"{MAKE_ARGS_VAR}={text!r} is not accepted ({exc}); expected "
                         "shlex-quoted NAME=value items, as the Makefile writes them") from None
    pairs: list[tuple[str, str]] = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"{MAKE_ARGS_VAR}: {item!r} is not accepted; expected NAME=value")
        if name == MAKE_ARGS_VAR:  # set on make's command line: it would replace the rest
            raise UsageError(f"{MAKE_ARGS_VAR}={value!r} is not accepted; it is the Makefile's "
                             "own hand-over of the other variables: give them to make instead")
        pairs.append((name, value))
    return pairs


def _subcommand(parser: argparse.ArgumentParser,
                argv: Sequence[str]) -> tuple[list[str], argparse.ArgumentParser]:
    """The subcommand words at the head of `argv` (["receipt", "verify"]) and their parser."""
    words: list[str] = []
    current = parser
    for word in argv:
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            break
        words.append(word)
        current = subs[0].choices[word]
    return words, current


def typed_path(name: str, value: str, typed_in: str | None) -> str:
    """`value` as the user meant it: a relative path of USER_PATHS resolved against the
    directory make was typed in (`typed_in`), where that is not this one (make -C)."""
    if name not in USER_PATHS or not typed_in or os.path.isabs(value) \
            or not os.path.isabs(typed_in) or not os.path.isdir(typed_in) \
            or os.path.samefile(typed_in, os.getcwd()):
        return value
    return os.path.join(typed_in, value)


def _flag_args(var: variables.Var, value: str) -> list[str]:
    """The arguments that give `var` its `value`: one `--flag=value`, or a switch's flag."""
    flag = var.flag_name
    if not var.switch:
        return [f"{flag}={value}"]
    if value not in ("0", "1"):
        raise UsageError(f"{var.make}={value!r} is not accepted; expected one of: 0, 1")
    return [flag] if value == "1" else []


def _split(name: str, value: str, command: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise UsageError(f"{name}={value!r} is not accepted ({exc}); expected arguments of "
                         f"harness {command}, quoted as in a shell") from None


def _history_verb(argv: Sequence[str], pairs: Sequence[tuple[str, str]]
                  ) -> tuple[list[str], list[tuple[str, str]]]:
    """`harness history` with HISTORY_ARGS's words (its verb first; `list` if none) appended,
    and the pairs without it: the verb decides which flags the other variables become."""
    if list(argv) != ["history"]:
        return list(argv), list(pairs)
    words = [w for name, value in pairs if name == HISTORY_ARGS
             for w in _split(name, value, "history")]
    return ([*argv, *(words or [HISTORY_DEFAULT_VERB])],
            [(name, value) for name, value in pairs if name != HISTORY_ARGS])


def to_argv(parser: argparse.ArgumentParser, argv: Sequence[str],
            pairs: Sequence[tuple[str, str]], environ: MutableMapping[str, str]) -> list[str]:
    """`argv` with make's variables appended, each as exactly one argument.

    A variable becomes `--flag=value` where the subcommand has its flag; RUN becomes the
    subcommand's path argument (after `--`, so a value that starts with a dash stays a path);
    SUMMARY_ARGS is split with shlex into arguments of `summary`, HISTORY_ARGS into the verb
    and arguments of `history` (before the flags, which the verb takes). Any other known
    variable goes into the environment, as make itself would have exported it (ALLOW_UNPINNED,
    ZL_ENABLE_CUDAGRAPH, a setting that this subcommand does not take); a name the harness does
    not know is refused (check_name). An empty value counts as not given, except where the
    variable refuses one (A=, B=): it reaches the flag, which says so.
    """
    argv, pairs = _history_verb(argv, pairs)
    words, sub = _subcommand(parser, argv)
    options = sub._option_string_actions
    takes_path = any(not a.option_strings for a in sub._actions)
    flags: list[str] = []
    paths: list[str] = []
    known = known_names()
    typed_in = environ.pop(MAKE_CWD_VAR, None)
    for name, value in pairs:
        check_name(name, value, known)
        var = variables.BY_MAKE.get(name)
        if value == "" and not (var and var.refuse_empty):
            continue
        value = typed_path(name, value, typed_in)
        if var and var.flag and var.flag in options:
            flags += _flag_args(var, value)
        elif name == RUN and takes_path:
            paths.append(value)
        elif name == SUMMARY_ARGS and words == ["summary"]:
            flags += _split(name, value, "summary")
        else:
            environ[name] = value
    return [*argv, *flags, *(["--", *paths] if paths else [])]


def help_lines() -> list[str]:
    """What `make help` prints of the variables: every one of the variables table."""
    lines = ["variables (make VAR=value; a setting is also read from its environment name):"]
    for var in variables.TABLE:
        lines += textwrap.wrap(var.make_text(), 100, initial_indent=f"  {var.make:<21} ",
                               subsequent_indent=" " * 24)
    return lines
