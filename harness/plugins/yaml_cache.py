"""A session's YAML documents, parsed once a process.

FlagGems' benchmarks parse their shapes file (core_shapes.yaml, 17 KB) with `yaml.safe_load`
each time a benchmark sets its shapes: PyYAML's pure-Python parser, 0.20-0.24 s of every warm
worker session on an H100's host, for the same text every time. For the session,
`yaml.safe_load` keeps each parse by the document's text and the loader's state (`yaml.load`
and every attribute of SafeLoader's classes, their resolvers' and constructors' entries), and
answers a later call with the same of both with a deep copy of it: a caller may change what it
got. Only a parse made by PyYAML's own code alone is kept: where any of those is another
library's (a constructor registered for a tag may read a file, the environment or a clock),
every call parses. A miss is PyYAML's own call on the text read to its end, named as the
caller's stream: what fails to parse fails as it did, its message naming the file, and is not
kept. A stream that cannot be rewound or does not read as text is given to PyYAML rewound, and
nothing is kept. The parses live in harness.plugins.memo, which a worker keeps from one session
to the next; `yaml.safe_load` is PyYAML's own again when the session ends.
"""

from __future__ import annotations

import copy
import io
import re
import types
from collections.abc import Callable
from typing import Any

import pytest

from harness.plugins import memo

_MISSING = object()
# A document longer than this (characters or bytes) is parsed each time and not kept, so that
# a worker's kept texts stay within memo.LIMIT of it (FlagGems' shapes file: 17 KB).
LARGEST = 1 << 20
READ = 1 << 16  # characters or bytes asked of a stream at a time, as PyYAML's reader asks
# What PyYAML's own classes hold beside their code: data, read by its code alone.
DATA = (str, bytes, int, float, bool, type(None), re.Pattern, types.GetSetDescriptorType,
        types.MemberDescriptorType)
NESTED = 3  # registries nest this deep: resolvers are a dict of lists of (tag, pattern)


def _pyyamls(value: object) -> bool:
    """Whether a callable is PyYAML's own code (a function or class of its modules)."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    module = getattr(value, "__module__", None)
    return isinstance(module, str) and (module == "yaml" or module.startswith("yaml."))


def _visit(value: object, depth: int, seen: list[object]) -> bool:
    """Add `value` and what it holds to `seen`; False where it is not PyYAML's own data or code
    (a constructor of another library's may read a file, the environment or a clock)."""
    seen.append(value)
    if isinstance(value, DATA):
        return True
    if isinstance(value, (dict, list, tuple, frozenset)) and depth > 0:
        items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        return all(_visit(k, 0, seen) and _visit(v, depth - 1, seen) for k, v in items)
    return (callable(value) or isinstance(value, (staticmethod, classmethod))) \
        and _pyyamls(value)


def loader_state(module: Any) -> tuple[tuple[int, ...], list[object]] | None:
    """What `module.safe_load`'s documents depend on beside their text: `module.load` and every
    attribute of `module.SafeLoader`'s classes, with their registries' entries (PyYAML's add_*
    functions change those in place), as ids and the objects themselves (kept with a parse, so
    that no id is taken by another object while the parse is kept). None where any of them is
    not PyYAML's own: a parse may then depend on more than its text, and is not kept."""
    seen: list[object] = []
    loader = getattr(module, "SafeLoader", None)
    if not isinstance(loader, type) or not _visit(getattr(module, "load", None), 0, seen):
        return None
    for cls in loader.__mro__[:-1]:  # object's own cannot be changed
        for name, value in vars(cls).items():
            if not _visit(name, 0, seen) or not _visit(value, NESTED, seen):
                return None
    return tuple(map(id, seen)), seen


def _text(stream: Any) -> str | bytes | None:
    """A stream's text from where it stands to its end; None where it is not kept (it cannot
    be rewound, is too long, or does not read: the stream is then rewound for PyYAML)."""
    if isinstance(stream, (str, bytes)):
        return stream if len(stream) <= LARGEST else None
    try:
        if not stream.seekable():
            return None
        where = stream.tell()
    except (AttributeError, OSError, ValueError):
        return None
    try:
        parts: list[Any] = []
        size, part = 0, None
        while size <= LARGEST and (part := stream.read(READ)):  # to its end, as PyYAML reads
            parts.append(part)
            size += len(part)
        text = part[:0].join(parts)  # type: ignore[index]  # part: the empty read that ended it
    except Exception:  # noqa: BLE001 - undecodable bytes, a read of no text: PyYAML's says so
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


def caching(module: Any) -> Callable[[Any], Any]:
    """`module.safe_load` (PyYAML's, as `module` holds it now) answered from memo.PARSED."""
    original = module.safe_load

    def safe_load(stream: Any) -> Any:
        state = loader_state(module)
        text = _text(stream) if state is not None else None
        if state is None or text is None:
            return original(stream)
        ids, objects = state
        key = (text, ids)
        kept = memo.PARSED.get(key, _MISSING)
        if kept is not _MISSING:
            return copy.deepcopy(kept[1])
        document = original(_named(text, stream))
        memo.PARSED.put(key, (objects, copy.deepcopy(document)))
        return document

    safe_load.__doc__ = original.__doc__
    return safe_load


def pytest_configure(config: pytest.Config) -> None:
    try:
        import yaml
    except ImportError:
        return  # nothing of the session parses YAML through it
    if not _pyyamls(yaml.safe_load):
        return  # another library's already: what it reads is its own
    patch = pytest.MonkeyPatch()
    patch.setattr(yaml, "safe_load", caching(yaml))
    config.add_cleanup(patch.undo)
