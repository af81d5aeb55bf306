"""A session's YAML documents, parsed once a process.

FlagGems' benchmarks parse their shapes file (core_shapes.yaml, 17 KB) with `yaml.safe_load`
each time a benchmark sets its shapes: PyYAML's pure-Python parser, 0.20-0.24 s of every warm
worker session on an H100's host, for the same text every time. For the session,
`yaml.safe_load` keeps a parse by its text and by what else the parse can depend on, and
answers a later call with the same of both with fresh objects (marshal's copy of it, whose
shared parts are shared as a parse's are): a caller may change what it got.

What a parse depends on beside its text: `yaml.load` and every attribute of SafeLoader's
classes, with their registries' entries, which PyYAML's add_* functions change in place; the
names of PyYAML's modules and the attributes of their classes (nodes, events, marks); each of
those functions' code and defaults; the interpreter's recursion limit and its limit on an
int's digits. The key holds their ids, and the kept parse the objects themselves, so that no id
is taken by another object while it is kept. A parse is kept only where:
- every function among them is PyYAML's own safe loading: defined in PyYAML's files, in a
  class of SafeLoader's as PyYAML defines it, and no wrapper of another's (a constructor
  another library registered for a tag may read a file, the environment or a clock); data and
  registries of exactly Python's types (a subclass's methods are code of its own);
- the document is plain data (dicts, lists, strings, numbers but NaN, booleans, None; a
  timestamp, a set or bytes is built by what no key holds) of at most MOST_OBJECTS objects,
  DEEPEST deep;
- its text is SMALLEST to LARGEST characters or bytes, given as an exact str or bytes or as a
  stream of Python's own io, in memory or over a file, that can be rewound;
- the loader's state read again after the parse is the state read before it.
Everything else is PyYAML's own call on the caller's stream as it was. A miss is PyYAML's own
call on the text read to its end, named as the caller's stream: what fails to parse fails as
it did, its message naming the file, and is not kept. Two differences remain, both
documented here rather than worth their cost: after an error the stream is at its end, where
PyYAML's own read may have stopped earlier; and a hit needs fewer frames of the stack than a
parse, so a caller within about 20 frames of the recursion limit gets a document where PyYAML
would have raised RecursionError. The parses live in harness.plugins.memo, which a worker keeps
from one session to the next; `yaml.safe_load` is PyYAML's own again when the session ends.
"""

from __future__ import annotations

import io
import marshal
import os
import re
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

from harness.plugins import memo

_MISSING = object()
SMALLEST = 1 << 10  # a shorter text is parsed each time: its key would cost about its parse
# A longer text (characters or bytes) is parsed each time and not kept, nor a document of more
# objects or deeper: a worker keeps memo.LIMIT parses at most (FlagGems' shapes file: 17 KB).
LARGEST = 1 << 18
MOST_OBJECTS = 1 << 15
DEEPEST = 64
READ = 1 << 16  # characters or bytes asked of a stream at a time
SCALARS = frozenset({str, int, float, bool, type(None)})
# What SafeLoader's classes hold beside their code, by exact type (a subclass's or a proxy's
# methods are code of its own): data, read by PyYAML's code alone, and its containers.
DATA = frozenset({str, bytes, int, float, bool, type(None), re.Pattern,
                  types.GetSetDescriptorType, types.MemberDescriptorType})
CONTAINERS = frozenset({dict, list, tuple, frozenset})
NESTED = 3  # registries nest this deep: resolvers are a dict of lists of (tag, pattern)
# Python's own streams, in memory or over a file: their reads, tell() and seek() agree (a
# GzipFile or a tar member read from a stream says it can seek and then cannot rewind).
STREAMS = frozenset({io.TextIOWrapper, io.BufferedReader, io.BufferedRandom, io.FileIO,
                     io.StringIO, io.BytesIO})


class _NotKept(Exception):
    """A document that is not plain data within the bounds."""


class _Code:
    """PyYAML's own safe loading: its files, its modules and SafeLoader's classes' names."""

    def __init__(self, module: Any) -> None:
        self.root = os.path.dirname(str(getattr(module, "__file__", "") or "")) + os.sep
        self.name = str(getattr(module, "__name__", "yaml"))
        loader = getattr(module, "SafeLoader", None)
        self.classes = frozenset(c.__name__ for c in getattr(loader, "__mro__", ())[:-1])

    def owns(self, value: object, top: str = "load") -> bool:
        """Whether `value` is a function of PyYAML's safe loading, a method of SafeLoader's
        classes or the module's function `top` (not a wrapper made with functools.wraps, which
        copies a name and a module but not code or globals)."""
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if type(value) is not types.FunctionType or "__wrapped__" in vars(value):
            return False
        module = sys.modules.get(str(value.__globals__.get("__name__")))
        qualname = value.__qualname__.split(".", 1)
        return (value.__code__.co_filename.startswith(self.root) and module is not None
                and vars(module) is value.__globals__
                and (module.__name__ == self.name or module.__name__.startswith(self.name + "."))
                and (qualname[0] in self.classes if len(qualname) > 1 else qualname[0] == top))


def _visit(value: Any, depth: int, seen: list[object], code: _Code) -> bool:
    """Add `value` and what it holds to `seen`; False where it is neither data nor PyYAML's
    own code."""
    seen.append(value)
    if type(value) in DATA:
        return True
    if type(value) in CONTAINERS and depth > 0:
        items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        return all(_visit(k, 0, seen, code) and _visit(v, depth - 1, seen, code)
                   for k, v in items)
    if not code.owns(value):
        return False
    _code_of(value.__func__ if isinstance(value, (staticmethod, classmethod)) else value, seen)
    return True


def _code_of(function: Any, seen: list[object]) -> None:
    """Add what a function's id does not change with: its code and defaults, set in place."""
    seen += [function.__code__, function.__defaults__, function.__kwdefaults__]


def loader_state(module: Any, code: _Code) -> tuple[tuple[object, ...], list[object]] | None:
    """What `module.safe_load`'s documents depend on beside their text (see the module), as a
    key and the objects its ids name; None where a parse is not to be kept."""
    seen: list[object] = []
    loader = getattr(module, "SafeLoader", None)
    try:
        if not isinstance(loader, type) or not _visit(getattr(module, "load", None), 0, seen,
                                                      code):
            return None
        for cls in loader.__mro__[:-1]:  # object's own cannot be changed
            for name, value in list(vars(cls).items()):
                if not _visit(name, 0, seen, code) or not _visit(value, NESTED, seen, code):
                    return None
        for name, held in list(sys.modules.items()):
            if name == code.name or name.startswith(code.name + "."):
                # safe_load itself is set aside: it is this session's wrapper, each its own
                values = [v for k, v in vars(held).items()
                          if k != "safe_load" or name != code.name]
                seen += [held, *values]
                for cls in values:  # its classes (nodes, events, marks): changed in place
                    if type(cls) is type and cls.__module__ == name:
                        for value in list(vars(cls).values()):
                            seen.append(value)
                            if type(value) is types.FunctionType:
                                _code_of(value, seen)
    except Exception:  # noqa: BLE001 - a registry another thread changed meanwhile (RuntimeError),
        return None  # or an object that fails to be read: the call parses and keeps nothing
    limits = (sys.getrecursionlimit(), getattr(sys, "get_int_max_str_digits", lambda: 0)())
    return (*limits, *map(id, seen)), seen


def check_plain(value: Any, seen: set[int] | None = None, depth: int = 0,
                budget: list[int] | None = None) -> None:
    """Raise _NotKept unless `value` is plain data of at most MOST_OBJECTS objects, nested no
    deeper than DEEPEST, with no NaN (a parse's NaN is its own object, unequal to another's)."""
    seen = set() if seen is None else seen
    budget = [MOST_OBJECTS] if budget is None else budget
    budget[0] -= 1
    kind = type(value)
    if budget[0] < 0 or depth > DEEPEST or (kind is float and value != value):
        raise _NotKept
    if kind in SCALARS or id(value) in seen:
        return
    seen.add(id(value))
    if kind is list:
        for item in value:
            check_plain(item, seen, depth + 1, budget)
    elif kind is dict:
        for key, item in value.items():
            if type(key) not in SCALARS:
                raise _NotKept
            check_plain(item, seen, depth + 1, budget)
    else:
        raise _NotKept


def _text(stream: Any) -> str | bytes | None:
    """A stream's text from where it stands to its end; None where it is not kept (it is not
    Python's io, cannot be rewound, is too short or too long, or does not read: the stream is
    then rewound for PyYAML)."""
    if type(stream) in (str, bytes):
        return stream if SMALLEST <= len(stream) <= LARGEST else None
    raw = stream
    while type(raw) in (io.TextIOWrapper, io.BufferedReader, io.BufferedRandom):
        raw = raw.buffer if type(raw) is io.TextIOWrapper else raw.raw
    if type(stream) not in STREAMS or type(raw) not in STREAMS:
        return None  # its tell() and seek() may not be where its reads stand
    try:
        if not stream.seekable():
            return None
        where = stream.tell()
    except Exception:  # noqa: BLE001 - PyYAML's own read never asks: the stream goes to it
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
    if not isinstance(text, (str, bytes)) or not SMALLEST <= len(text) <= LARGEST:
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
    code = _Code(module)

    def safe_load(stream: Any) -> Any:
        state = loader_state(module, code)
        text = _text(stream) if state is not None else None
        if state is None or text is None:
            return original(stream)
        ids, objects = state
        key = (text, ids)
        kept = memo.PARSED.get(key, _MISSING)
        if kept is not _MISSING:
            return marshal.loads(kept[1])  # fresh objects, shared parts shared, no recursion
        document = original(_named(text, stream))
        try:
            check_plain(document)
            after = loader_state(module, code)  # the loader unchanged while it parsed: the
            if after is not None and after[0] == ids:  # same ids of objects `objects` holds
                memo.PARSED.put(key, (objects, marshal.dumps(document)))
        except (_NotKept, RecursionError):
            pass  # not plain data, or too large: PyYAML's answer alone, kept nowhere
        return document

    safe_load.__doc__ = original.__doc__
    return safe_load


def pytest_configure(config: pytest.Config) -> None:
    try:
        import yaml
    except ImportError:
        return  # nothing of the session parses YAML through it
    if not _Code(yaml).owns(yaml.safe_load, top="safe_load"):
        return  # another library's already: what it reads is its own
    patch = pytest.MonkeyPatch()
    patch.setattr(yaml, "safe_load", caching(yaml))
    config.add_cleanup(patch.undo)
