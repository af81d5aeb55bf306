"""A session's YAML documents, parsed once a process.

FlagGems' benchmarks parse their shapes file (core_shapes.yaml, 17 KB) with `yaml.safe_load`
each time a benchmark sets its shapes: PyYAML's pure-Python parser, 0.20-0.24 s of every warm
worker session on an H100's host, for the same text every time. For the session,
`yaml.safe_load` keeps each parse by the document's text and the loader's state (every
attribute of SafeLoader's classes, its resolvers' and constructors' entries), and answers a
later call with the same of both with a deep copy of it: a caller may change what it got. A
miss is PyYAML's own call on the text read, named as the caller's stream: what fails to parse
fails as it did, its message naming the file, and is not kept. A stream that cannot be rewound
or does not read as text is given to PyYAML as it was, and nothing is kept. The parses live in
harness.plugins.memo, which a worker keeps from one session to the next; `yaml.safe_load` is
PyYAML's own again when the session ends.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from typing import Any

import pytest

from harness.plugins import memo

_MISSING = object()
# A document longer than this (characters or bytes) is parsed each time and not kept, so that
# a worker's kept texts stay within memo.LIMIT of it (FlagGems' shapes file: 17 KB).
LARGEST = 1 << 20


def loader_state(loader: type) -> tuple[object, ...]:
    """What the documents `loader` makes depend on beside their text: every attribute of its
    classes by identity, and the entries of its registries (resolvers, constructors), which
    PyYAML's add_* functions change in place."""
    state: list[object] = []
    for cls in loader.__mro__:
        for name, value in vars(cls).items():
            state.append((name, id(value)))
            if isinstance(value, dict):
                state.extend((k, id(v), tuple(map(id, v)) if isinstance(v, list) else ())
                             for k, v in value.items())
    return tuple(state)


def _text(stream: Any) -> str | bytes | None:
    """A stream's text from where it stands; None where it is not kept (it cannot be rewound,
    is too long, or does not read: the stream is then rewound for PyYAML to read it)."""
    if isinstance(stream, (str, bytes)):
        return stream if len(stream) <= LARGEST else None
    try:
        if not stream.seekable():
            return None
        where = stream.tell()
    except (AttributeError, OSError, ValueError):
        return None
    try:
        text = stream.read(LARGEST + 1)
    except Exception:  # noqa: BLE001 - undecodable bytes: PyYAML's own read says so
        text = None
    if not isinstance(text, (str, bytes)) or len(text) > LARGEST:
        stream.seek(where)
        return None
    return text


def _named(text: str | bytes, stream: Any) -> Any:
    """What PyYAML is given for `stream`: the very text the key holds (a file changed since
    cannot slip in), named as PyYAML names the stream, so that its errors name the file."""
    if text is stream:
        return text
    read: io.StringIO | io.BytesIO = io.StringIO(text) if isinstance(text, str) \
        else io.BytesIO(text)
    read.name = getattr(stream, "name", "<file>")
    return read


def caching(original: Callable[[Any], Any], loader: type) -> Callable[[Any], Any]:
    """`original` (yaml.safe_load, which parses with `loader`) answered from memo.PARSED."""

    def safe_load(stream: Any) -> Any:
        text = _text(stream)
        if text is None:
            return original(stream)
        key = (text, loader_state(loader))
        kept = memo.PARSED.get(key, _MISSING)
        if kept is not _MISSING:
            return copy.deepcopy(kept)
        document = original(_named(text, stream))
        memo.PARSED.put(key, copy.deepcopy(document))
        return document

    safe_load.__doc__ = original.__doc__
    return safe_load


def pytest_configure(config: pytest.Config) -> None:
    try:
        import yaml
    except ImportError:
        return  # nothing of the session parses YAML through it
    patch = pytest.MonkeyPatch()
    patch.setattr(yaml, "safe_load", caching(yaml.safe_load, yaml.SafeLoader))
    config.add_cleanup(patch.undo)
