"""FlagGems' shapes file parsed by libyaml, where PyYAML was built with it.

FlagGems parses its shapes file (benchmark/core_shapes.yaml, 17 KB) with `yaml.safe_load` in
every benchmark. PyYAML's own parser, written in Python, took 0.20-0.24 s of each warm worker
session on an H100's host and 1.27-1.29 s of a worker's first (cProfile); on a laptop it
parsed that file in 0.20-0.34 s where libyaml's took 0.03-0.04 s. For the session,
`yaml.safe_load` parses with `yaml.CSafeLoader`: libyaml's parser with PyYAML's own safe
constructors and resolver, so the same document comes back. A text libyaml refuses is parsed
by PyYAML's own loader, as before, which then returns it or raises its own error. The
original is put back when the session ends.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

try:
    yaml: Any = importlib.import_module("yaml")
except ImportError:  # a suite that does not read YAML: nothing to speed up
    yaml = None

_ORIGINAL: list[Any] = []  # yaml.safe_load before this session's, while it is replaced


def safe_load(stream: Any) -> Any:
    """`yaml.safe_load` through libyaml; PyYAML's own where libyaml refuses the text."""
    assert yaml is not None and _ORIGINAL
    text = stream.read() if hasattr(stream, "read") else stream
    try:
        return yaml.load(text, Loader=yaml.CSafeLoader)  # noqa: S506 - the safe loader
    except yaml.YAMLError:
        return _ORIGINAL[0](text)


def pytest_configure(config: pytest.Config) -> None:
    if yaml is not None and getattr(yaml, "__with_libyaml__", False) and not _ORIGINAL:
        _ORIGINAL.append(yaml.safe_load)
        yaml.safe_load = safe_load


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _ORIGINAL:
        yaml.safe_load = _ORIGINAL.pop()
