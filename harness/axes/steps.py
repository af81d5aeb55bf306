"""The steps of a bisection: the ordered stacks between a good and a bad end, as a kind lists them.

A kind that can be bisected (AxisKind.steps) turns what the user gave (StepsGiven: GOOD, BAD,
FLAGGEMS_DIR, STACKS) into Steps, GOOD first and BAD last; a step's `value` is what that kind's
side variable takes (a commit for A_REF/B_REF, an interpreter, an image). Two commits are listed
from git; interpreters and images from a stack list, one entry a line.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError

GIT_TIMEOUT_S = 300


@dataclass(frozen=True)
class Step:
    """One stack of a range: its side value, a short label, and, for a commit, its subject and
    author date. `code` fingerprints the code it would run (a commit's `src/` tree): two steps
    with one fingerprint run the same code, None where that cannot be known without running."""

    value: str
    label: str
    subject: str = ""
    date: str = ""
    code: str | None = None


@dataclass(frozen=True)
class StepsGiven:
    """What a bisection was given: its ends, FlagGems' checkout and a stack list, as the user
    spelt them (None: not given)."""

    good: str | None
    bad: str | None
    flaggems_dir: Path | None
    stacks: Path | None


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          timeout=GIT_TIMEOUT_S)


def commit_of(repo: Path, name: str, ref: str | None, missing: str) -> str:
    """The full hash of the commit `ref` names in `repo`; UsageError `missing` where none is
    given, and one naming `name` for a ref that is no commit (or reads as an option)."""
    if not ref:
        raise UsageError(missing)
    proc = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if proc.returncode != 0 or ref.startswith("-"):
        raise UsageError(f"{name}={ref!r} is not accepted; expected a commit, branch or tag of "
                         f"{str(repo)!r}")
    return proc.stdout.strip()


def commit_range(given: StepsGiven, source_dir: str) -> tuple[Step, ...]:
    """GOOD, then every commit of BAD's first-parent history after it, BAD last; each step's
    `code` the tree of `source_dir` at it. UsageError, one line, for a checkout that is not git
    or has uncommitted changes, an end that is no commit, equal ends, or a GOOD that is not on
    BAD's first-parent history."""
    repo = given.flaggems_dir
    if repo is None:
        raise UsageError("bisect over FlagGems commits needs FLAGGEMS_DIR: the git checkout "
                         "whose commits GOOD and BAD name")
    if given.stacks is not None:
        raise UsageError("STACKS is a list of interpreters or images: give AXIS=python or "
                         "AXIS=image with it, or leave it out to bisect FlagGems commits")
    if git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise UsageError(f"FLAGGEMS_DIR={str(repo)!r} is not a git checkout: bisect lists "
                         "its commits")
    ends = {name: commit_of(repo, name, ref, f"bisect needs {name}: a commit of {str(repo)!r}")
            for name, ref in (("GOOD", given.good), ("BAD", given.bad))}
    good, bad = ends["GOOD"], ends["BAD"]
    if good == bad:
        raise UsageError(f"GOOD={given.good!r} and BAD={given.bad!r} are the same commit "
                         f"({good[:12]}): there is nothing between them to bisect")
    if git(repo, "status", "--porcelain", "--untracked-files=no").stdout.strip():
        raise UsageError(f"FLAGGEMS_DIR={str(repo)!r} has uncommitted changes: every step is "
                         "a commit, never the work tree; commit or discard them first")
    chain = git(repo, "rev-list", "--first-parent", bad).stdout.split()
    if good not in chain:
        why = ("is not an ancestor of" if git(repo, "merge-base", "--is-ancestor", good,
                                              bad).returncode != 0
               else "is not on the first-parent history of")
        raise UsageError(f"GOOD={given.good!r} ({good[:12]}) {why} BAD={given.bad!r} "
                         f"({bad[:12]}): bisect walks BAD's first parents back to GOOD")
    hashes = list(reversed(chain[:chain.index(good) + 1]))
    return tuple(_commit_step(repo, h, source_dir) for h in hashes)


def _commit_step(repo: Path, commit: str, source_dir: str) -> Step:
    shown = git(repo, "show", "-s", "--format=%s%x00%aI", commit).stdout.rstrip("\n")
    subject, _, date = shown.partition("\x00")
    tree = git(repo, "rev-parse", "--verify", "--quiet", f"{commit}:{source_dir}")
    return Step(commit, commit[:12], subject, date,
                tree.stdout.strip() if tree.returncode == 0 else None)


def stack_list(given: StepsGiven, kind: str, check: Callable[[str], str | None]
               ) -> tuple[Step, ...]:
    """The entries of STACKS (one a line; blank lines and # comments left out) from GOOD to BAD
    (default: the first and the last entry); `check(entry)` says why an entry is refused, or
    None. UsageError, one line, for a missing or unreadable list, a refused or repeated entry,
    fewer than two entries, or a GOOD or BAD that is no entry or not before the other."""
    path = given.stacks
    if path is None:
        raise UsageError(f"bisect with AXIS={kind} needs STACKS: a file listing its stacks "
                         "in order, one a line, the good end first")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"STACKS={str(path)!r} is not accepted; expected a text file of "
                         f"stacks, one a line ({type(exc).__name__})") from None
    entries = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    entries = [e for e in entries if e]
    for number, entry in enumerate(entries, 1):
        if (why := check(entry)) is not None:
            raise UsageError(f"STACKS={str(path)!r}, entry {number} {entry!r} is not accepted: "
                             f"{why}")
        if entries.index(entry) != number - 1:
            raise UsageError(f"STACKS={str(path)!r} lists {entry!r} twice (entries "
                             f"{entries.index(entry) + 1} and {number})")
    if len(entries) < 2:
        raise UsageError(f"STACKS={str(path)!r} lists {len(entries)} stack(s); expected at "
                         "least two: the good end first, the bad end last")
    ends = []
    for name, value, default in (("GOOD", given.good, 0), ("BAD", given.bad, len(entries) - 1)):
        if value and value not in entries:
            raise UsageError(f"{name}={value!r} is not an entry of STACKS={str(path)!r}")
        ends.append(entries.index(value) if value else default)
    if ends[0] >= ends[1]:
        raise UsageError(f"GOOD ({entries[ends[0]]!r}) must come before BAD "
                         f"({entries[ends[1]]!r}) in STACKS={str(path)!r}")
    return tuple(Step(e, e) for e in entries[ends[0]:ends[1] + 1])
