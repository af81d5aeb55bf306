"""A FlagGems-shaped git repository of the cpu suite with a history to bisect.

Its benchmark's tanh and add call flag_gems (src/flag_gems, on the path through pytest.ini), as
FlagGems' own benchmarks do. Sixteen commits: GOOD first, then docs-only commits, commits that
change other operators' source, one that makes tanh about 30% slower (SLOW_AT), one that breaks
the import of add's module, an unrelated operator (BROKEN_AT, fixed at FIXED_AT), and one
that adds softmax's module (SOFTMAX_AT).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from harness.settings.spec import REPO_ROOT

SLOW_AT, BROKEN_AT, FIXED_AT = 9, 4, 13
SOFTMAX_AT = 5  # softmax's module first appears here
COMMITS = 16
SHAPES = "tanh:\n  shapes:\n    - [64, 64]\nadd:\n  shapes:\n    - [64, 64]\n"

TANH = '''"""tanh, then {passes} units of work on the work clock."""

import torch

from flag_gems import clock


def tanh(x):
    out = torch.tanh(x)
    clock.spend({passes})
    return out
'''
# The work clock the suite's copy times calls by (benchmark/base.py's clock): a call's time is
# its units of work, times a factor drawn once a session (the spread between rounds) and one
# drawn each call (sd BISECT_NOISE_ROUND, BISECT_NOISE_CALL), from a generator seeded by
# BISECT_NOISE_SEED and the run's directory. The
# bisection's logic is under test here, with noise of a known size, not this host's
# scheduling; the other integration tests time real calls.
CLOCK = '''"""A work clock: seconds of modelled work, with seeded noise."""

import os
import random
import zlib

UNIT_S = 1e-4
_now = [0.0]
_drawn = {}  # the run's directory: (its generator, its session factor)


def now():
    return _now[0]


def spend(units):
    env = os.environ
    run = env.get("ZL_PLUGIN_RUN_DIR", "")  # a resident worker runs many sessions
    if run not in _drawn:
        rng = random.Random(zlib.crc32((env.get("BISECT_NOISE_SEED", "0") + run).encode()))
        sd = float(env.get("BISECT_NOISE_ROUND", "0.01"))
        _drawn[run] = rng, max(0.5, 1 + rng.gauss(0, sd))
    rng, session = _drawn[run]
    call = max(0.5, 1 + rng.gauss(0, float(env.get("BISECT_NOISE_CALL", "0.01"))))
    _now[0] += units * UNIT_S * session * call
'''
PASSES, SLOW_PASSES = 10, 13
ADD = '''"""add into a freshly allocated output."""

import torch
{broken}

def add(a, b):
    out = torch.empty_like(a)
    torch.add(a, b, out=out)
    return out
'''
BROKEN = "import flag_gems_no_such_module  # noqa: F401"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c",
                           "user.email=t@t", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _benchmark(repo: Path, op: str, gems: str) -> None:
    path = repo / "benchmark" / f"test_{op}.py"
    text = path.read_text().replace(gems, f"__import__('flag_gems.{op}').{op}.{op}")
    path.write_text(text)


def _write(repo: Path, index: int) -> str:
    """The tree of commit `index`; its subject."""
    pkg = repo / "src" / "flag_gems"
    slow = index >= SLOW_AT
    broken = BROKEN_AT <= index < FIXED_AT
    (pkg / "tanh.py").write_text(TANH.format(passes=SLOW_PASSES if slow else PASSES))
    (pkg / "add.py").write_text(ADD.format(broken=BROKEN if broken else ""))
    if index == SLOW_AT:
        return "tanh: more passes"
    if index == BROKEN_AT:
        return "add: import a module that does not exist"
    if index == FIXED_AT:
        return "add: fix its import"
    if index % 2 == 0:  # docs only: the source tree is the one before
        with open(repo / "CHANGES.md", "a") as fh:
            fh.write(f"- change {index}\n")
        return f"docs: change {index}"
    (pkg / "other.py").write_text(f"VERSION = {index}\n")
    if index == SOFTMAX_AT:  # an operator that GOOD does not have
        (pkg / "softmax.py").write_text("def softmax(x, dim=None):\n    return x.softmax(dim)\n")
    return f"other: version {index}"


def build(tmp_path: Path) -> tuple[Path, list[str]]:
    """The repository and its commits, oldest (GOOD) first."""
    repo = tmp_path / "FlagGems"
    shutil.copytree(REPO_ROOT / "examples" / "cpu_suite", repo,
                    ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    ini = repo / "pytest.ini"
    ini.write_text(ini.read_text().replace("[pytest]\n", "[pytest]\npythonpath = src\n"))
    _benchmark(repo, "tanh", "cpu_ops.tanh_via_exp")
    _benchmark(repo, "add", "cpu_ops.add_into_empty")
    (repo / "src" / "flag_gems").mkdir(parents=True)
    (repo / "src" / "flag_gems" / "__init__.py").write_text(
        '"""flag_gems of the test."""\n')
    base = repo / "benchmark" / "base.py"
    base.write_text(base.read_text().replace(
        "clock = time.perf_counter", "from flag_gems import clock as _work\n    clock = _work.now"))
    (repo / "src" / "flag_gems" / "clock.py").write_text(CLOCK)
    git(repo, "init", "-q")
    commits = []
    for index in range(COMMITS):
        subject = _write(repo, index) if index else (_write(repo, index), "initial")[1]
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", subject)
        commits.append(git(repo, "rev-parse", "HEAD"))
    return repo, commits
