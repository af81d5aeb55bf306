"""SHAPE_MODE=smoke: each FlagGems benchmark measures its first input of its first dtype only.

A pass over the whole suite to see what runs, at a fraction of its cost: the timings are real
but one shape says little, so such runs are for states, not comparisons. The benchmarks'
own input generators and dtype lists are cut, whichever class defines them.
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.contract import boundary

_PATCH = pytest.StashKey[pytest.MonkeyPatch]()


def first_input(get_input_iter: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    @functools.wraps(get_input_iter)
    def first(*args: Any, **kwargs: Any) -> Iterator[Any]:
        yield from itertools.islice(get_input_iter(*args, **kwargs), 1)
    return first


def first_dtype(set_dtypes: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(set_dtypes)
    def first(bench: Any, *args: Any, **kwargs: Any) -> Any:
        value = set_dtypes(bench, *args, **kwargs)
        bench.to_bench_dtypes = list(getattr(bench, "to_bench_dtypes", []) or [])[:1]
        return value
    return first


def _classes(root: type) -> list[type]:
    found, todo = [], [root]
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.append(cls)
            todo += cls.__subclasses__()
    return found


def cut(base: Any, patch: pytest.MonkeyPatch) -> int:
    """Cut every Benchmark class's own input generator and dtype setter; the count cut."""
    count = 0
    for cls in _classes(base.Benchmark):
        for name, wrap in (("get_input_iter", first_input), ("set_dtypes", first_dtype)):
            if name in vars(cls):
                patch.setattr(cls, name, wrap(vars(cls)[name]))
                count += 1
    return count


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # trylast: FlagGems' test modules, and so every Benchmark subclass, are imported by now.
    base = sys.modules.get(boundary.BASE_MODULE)
    if base is not None and hasattr(base, "Benchmark"):
        patch = session.config.stash[_PATCH] = pytest.MonkeyPatch()
        cut(base, patch)


def pytest_unconfigure(config: pytest.Config) -> None:
    patch = config.stash.get(_PATCH, None)
    if patch is not None:
        patch.undo()
