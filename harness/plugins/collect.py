"""A session run for named test files collects those files alone.

pytest visits every file of a package to find the one a node names: in FlagGems' benchmark/
(some 700 test files) each session made a collector for every one of them before it imported
the one it runs (a third of a later round's collection on an H100's host; on a laptop, 0.15 s
of a session against 0.06 s). Where every argument of the session names a .py file (a node, as
a run's always does), every other .py file is ignored at collection. conftest.py and
__init__.py files are left to pytest, so the fixtures and packages a test sees are those it
saw; with any other argument (a folder, an option pytest reads as a path) nothing is ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

KEPT_NAMES = frozenset({"conftest.py", "__init__.py"})
_NAMED = pytest.StashKey[frozenset[Path]]()


def named_files(args: Sequence[str], cwd: Path) -> frozenset[Path]:
    """The resolved .py files that `args` name (a file, or a node in it); empty where any
    argument names something else (a folder, even one named `x.py`), which then keeps the
    whole collection."""
    found = set()
    for arg in args:
        path = (cwd / arg.split("::", 1)[0]).resolve()
        if path.suffix != ".py" or not path.is_file():
            return frozenset()
        found.add(path)
    return frozenset(found)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_NAMED] = named_files([str(a) for a in config.args],
                                       Path(config.invocation_params.dir))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    named = config.stash.get(_NAMED, frozenset())
    if not named or collection_path.suffix != ".py" or collection_path.name in KEPT_NAMES:
        return None
    return True if collection_path.resolve() not in named else None
