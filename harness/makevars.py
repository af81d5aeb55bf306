"""The variables given on make's command line, turned into arguments of the harness subcommand."""

from __future__ import annotations

import argparse
import shlex
import textwrap
from collections.abc import MutableMapping, Sequence

from harness import slurm, spec
from harness.errors import UsageError

# The Makefile hands every variable given on its command line over in this one environment
# variable, as `NAME=value` items each quoted for shlex. No shell ever reads it, and make never
# expands the values (`$(value ...)`), so every value arrives as typed: spaces, quotes, `;`, `$`,
# backticks and newlines included.
MAKE_ARGS_VAR = "ZL_MAKE_ARGS"
SUMMARY_ARGS = "SUMMARY_ARGS"
RUN = "RUN"
# Variables of make targets that are no setting of spec.VARS: (name, flag or None, help).
MAKE_ONLY: tuple[tuple[str, str | None, str], ...] = (
    ("OPS", "--ops", "batch, ab: comma-separated operators, e.g. tanh,add,mm (ab: all for "
                     "every node of the tree)"),
    ("OPS_FILE", "--ops-file", "batch, ab: a file of operators, one a line, # comments"),
    ("WALLS_FROM", "--walls-from", "ab: an earlier campaign or batch whose walls order the "
                                   "units longest first (batch: EXECUTOR=slurm DRY_RUN's "
                                   "estimate)"),
    ("RESUME", "--resume", "ab: complete the campaign in this directory (with ROUNDS: extend "
                           "it to that many rounds)"),
    ("ONLY", "--only", "ab with RESUME: add rounds only to operators with this verdict, e.g. "
                       "inconclusive"),
    (RUN, None, "summary, report, receipt: the run, batch, campaign or log to read (one path)"),
    (SUMMARY_ARGS, None, "summary: further arguments, e.g. \"--ab A B --format csv\"; split "
                         "into words as a POSIX shell would (quotes group), but no shell runs"),
    ("ALLOW_UNPINNED", None, "image: 1 builds from a base tag that has no digest yet"),
    ("PYTHON", None, "the interpreter that runs the harness and pytest (make's own; default: "
                     ".venv's when it exists, else python3)"),
    # ab and batch: where the units run (harness/slurm.py holds them, as no run reads them)
    *((v.make, v.flag, f"ab, batch: {v.help.replace('%%', '%')} [{v.env}"
       + (f"; default {v.default}]" if v.default is not None else "]")) for v in slurm.VARS),
)
_MAKE_ONLY_FLAGS = {name: flag for name, flag, _ in MAKE_ONLY if flag}


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


def _flag(name: str) -> str | None:
    var = spec.VARS_BY_MAKE.get(name)
    return var.flag if var else _MAKE_ONLY_FLAGS.get(name)


def to_argv(parser: argparse.ArgumentParser, argv: Sequence[str],
            pairs: Sequence[tuple[str, str]], environ: MutableMapping[str, str]) -> list[str]:
    """`argv` with make's variables appended, each as exactly one argument.

    A variable becomes `--flag=value` where the subcommand has its flag; RUN becomes the
    subcommand's path argument (after `--`, so a value that starts with a dash stays a path);
    SUMMARY_ARGS is split with shlex into arguments of `summary`. Any other variable goes into
    the environment, as make itself would have exported it (ALLOW_UNPINNED, ZL_ENABLE_CUDAGRAPH,
    a setting that this subcommand does not take). An empty value counts as not given.
    """
    words, sub = _subcommand(parser, argv)
    options = sub._option_string_actions
    takes_path = any(not a.option_strings for a in sub._actions)
    flags: list[str] = []
    paths: list[str] = []
    for name, value in pairs:
        flag = _flag(name)
        if value == "":
            continue
        if flag and flag in options:
            flags.append(f"{flag}={value}")
        elif name == RUN and takes_path:
            paths.append(value)
        elif name == SUMMARY_ARGS and words == ["summary"]:
            try:
                flags += shlex.split(value)
            except ValueError as exc:
                raise UsageError(f"{SUMMARY_ARGS}={value!r} is not accepted ({exc}); expected "
                                 "arguments of harness summary, quoted as in a shell") from None
        else:
            environ[name] = value
    return [*argv, *flags, *(["--", *paths] if paths else [])]


def help_lines() -> list[str]:
    """What `make help` prints of the variables, from spec.VARS and MAKE_ONLY."""
    rows = [(var.make, f"{var.help} [{var.env}"
             + (f"; default {var.default}]" if var.default is not None else "]"))
            for var in spec.VARS]
    rows += [(name, text) for name, _, text in MAKE_ONLY]
    lines = ["variables (make VAR=value; a setting is also read from its environment name):"]
    for name, text in rows:
        lines += textwrap.wrap(text, 100, initial_indent=f"  {name:<21} ",
                               subsequent_indent=" " * 24)
    return lines
