"""A/B of two FlagGems commits (AXIS=flaggems): each side's tree, composed under the campaign.

Each side gets `<campaign>/stacks/<side>`: FlagGems' `src/` at the side's commit (A_REF or
B_REF), beside the benchmark files of one commit for both (BENCH_REF, default A_REF: the
benchmark's own top-level files and `benchmark/`), so that only the operators' implementation
differs. FlagGems' pytest.ini puts `src` first on the path, so a run in a side's tree imports
that side's flag_gems. The trees come from `git archive`: the user's checkout and its git
metadata are only read.
"""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from harness.axes.flaggems import SOURCE_DIR, STACKS_DIR
from harness.axes.steps import commit_of
from harness.errors import UsageError

PACKAGE_DIR = f"{SOURCE_DIR}/flag_gems"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Not code: docstrings and comments (a name there implements nothing). A '#' inside a string
# cuts that line short, which can only hide a name, never invent one.
_NOT_CODE = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|#[^\n]*')
BENCHMARK_DIR = "benchmark"


def _git(repo: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                          text=not binary, timeout=300)


@dataclass(frozen=True)
class Refs:
    """The commits of a two-commit campaign, resolved to full hashes."""

    a: str
    b: str
    bench: str


def resolve(repo: Path, a: str, b: str, bench: str | None) -> Refs:
    """A_REF, B_REF and BENCH_REF (default A_REF) as commits of `repo`; UsageError naming a
    ref that is not one, a repo that is not a git checkout, the same commit twice, or a ref
    that names the checked-out commit of a work tree with uncommitted changes (the user's
    edits would not be in it)."""
    if _git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise UsageError(f"AXIS=flaggems needs FLAGGEMS_DIR to be a git checkout; "
                         f"{str(repo)!r} is not one")
    found = {name: commit_of(repo, name, ref,
                             f"AXIS=flaggems needs {name}: a commit of FLAGGEMS_DIR's git")
             for name, ref in (("A_REF", a), ("B_REF", b), ("BENCH_REF", bench or a))}
    if found["A_REF"] == found["B_REF"]:
        raise UsageError(f"A_REF={a!r} and B_REF={b!r} are the same commit "
                         f"({found['A_REF'][:12]}): the campaign would compare FlagGems with "
                         "itself; AXIS=none is the A/A")
    head = _git(repo, "rev-parse", "HEAD").stdout.strip()
    dirty = _git(repo, "status", "--porcelain", "--untracked-files=no").stdout.strip()
    for name in ("A_REF", "B_REF"):
        if found[name] == head and dirty:
            raise UsageError(f"{name} names the checked-out commit of {str(repo)!r}, whose "
                             "work tree has uncommitted changes: a side runs a commit, never "
                             "the work tree; commit the changes and name that commit")
    return Refs(found["A_REF"], found["B_REF"], found["BENCH_REF"])


def _extract(repo: Path, ref: str, paths: list[str], into: Path) -> None:
    proc = _git(repo, "archive", "--format=tar", ref, "--", *paths, binary=True)
    if proc.returncode != 0:
        raise UsageError(f"git archive of {ref[:12]} ({', '.join(paths)}) failed: "
                         f"{proc.stderr.decode(errors='replace').strip()[-300:]}")
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(into, filter="data")


def _bench_paths(repo: Path, ref: str) -> list[str]:
    """The benchmark's files at `ref`: `benchmark/` and the top-level files (pytest.ini,
    conftest.py, ...), never `src/`."""
    listing = _git(repo, "ls-tree", ref).stdout.splitlines()
    files = [line.split("\t", 1)[1] for line in listing
             if "\t" in line and line.split()[1] == "blob"]
    return [BENCHMARK_DIR, *files]


def bench_tree(repo: Path, ref: str, scratch: Path, source: str | None = None) -> Path:
    """The benchmark files of `ref`, under `scratch`: where a campaign finds its operators
    before any side's tree exists; with `source`, beside FlagGems' `src/` of that commit (a
    side's tree, so that its preflight imports that side's flag_gems, not one installed)."""
    tree = scratch / "bench"
    tree.mkdir(parents=True, exist_ok=True)
    _extract(repo, ref, _bench_paths(repo, ref), tree)
    if source is not None:
        _extract(repo, source, [SOURCE_DIR], tree)
    return tree


def side_tree(directory: Path, side: str) -> Path:
    return directory / STACKS_DIR / side


def compose(repo: Path, refs: Refs, directory: Path) -> dict[str, Path]:
    """Write each side's tree under `directory` (a side whose tree exists is kept: a resume);
    {side: tree}."""
    trees = {}
    for side, ref in (("A", refs.a), ("B", refs.b)):
        tree = side_tree(directory, side)
        if not tree.is_dir():
            partial = tree.with_name(f".{side}.partial")
            partial.mkdir(parents=True, exist_ok=True)
            _extract(repo, refs.bench, _bench_paths(repo, refs.bench), partial)
            _extract(repo, ref, [SOURCE_DIR], partial)
            partial.rename(tree)  # a tree is whole or absent
        trees[side] = tree
    return trees


def _names(repo: Path, ref: str) -> set[str]:
    """Every identifier in flag_gems' Python code at `ref` (its text, not imported), less
    its comments and docstrings."""
    proc = _git(repo, "grep", "-h", "-I", "-E", "", ref, "--", f"{PACKAGE_DIR}/*.py")
    return (set(_NAME.findall(_NOT_CODE.sub("", proc.stdout))) if proc.returncode == 0
            else set())


def one_sided(repo: Path, refs: Refs, ops: list[str]) -> dict[str, str]:
    """{op: why} for the operators whose name is in flag_gems' source at one side's commit
    and nowhere in the other's: that side has no implementation to time, so the operator is
    skipped, not compared. A name found on neither side is left to run (its benchmark may
    reach it by another name)."""
    names = {"A": _names(repo, refs.a), "B": _names(repo, refs.b)}
    out = {}
    for op in ops:
        has = [side for side in ("A", "B") if op in names[side]]
        if len(has) == 1:
            other = "B" if has == ["A"] else "A"
            ref = refs.b if other == "B" else refs.a
            out[op] = (f"{op} is not in flag_gems at {other}_REF ({ref[:12]}), only at "
                       f"{has[0]}_REF: side {other} has no implementation to time")
    return out
