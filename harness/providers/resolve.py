"""OP, OP_FILE or TEST_NODE to the one FlagGems benchmark node, with close names on a miss."""

from __future__ import annotations

import ast
import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from harness.errors import PreflightError, UsageError
from harness.providers.flaggems import BENCHMARK_DIR, Node, op_name_for, parse_failure

MAX_CLOSEST = 5


def resolve_node(
    nodes: Sequence[Node],
    *,
    op: str | None = None,
    op_file: str | None = None,
    test_node: str | None = None,
    flaggems_dir: Path | None = None,
) -> Node:
    """Pick the one benchmark node that TEST_NODE, or OP (with OP_FILE), names.

    A file "exists" when some node lives in it or, with `flaggems_dir`, it is on disk.

    TEST_NODE reads ``path::function`` (the ``benchmark/`` prefix may be left out), or names a
    whole benchmark file or directory (``benchmark``, ``test_mm.py``) that exists under
    `flaggems_dir`: then the node has no function and pytest runs everything in it. Its file
    missing: PreflightError ``benchmark_file``; no such function: PreflightError ``test_node``
    listing close candidates.

    OP: the candidate files are OP_FILE when given (``test_mm.py`` or ``benchmark/test_mm.py``;
    missing: ``benchmark_file``), else ``benchmark/test_<op>.py`` when it exists, else every
    file. Nodes of parallel/aggregate files (file name containing ``parallel``) are dropped
    unless OP_FILE names the file. Priority levels, first with any match decides:

    0. OP as `qualified_name` spells a node (``test_nextafter.nextafter_``);
    1. the function ``test_<op>``;
    2. the function ``test_perf_<op>``;
    3. functions whose first mark is OP;
    4. functions having OP among their marks;
    5. when the only candidate file is ``benchmark/test_<op>.py`` and it holds exactly one
       function, that function (``unique`` -> ``test_unique.py::test_unique2``).

    One match wins; several at the deciding level raise ``test_node`` "ambiguous"; none at any
    level raises ``test_node`` naming the five closest nodes (difflib over op keys, marks and
    file stems) and any parallel file that would have matched through OP_FILE.
    """
    if test_node:
        return _resolve_test_node(nodes, test_node, flaggems_dir)
    if not op:
        raise UsageError("nothing to run: give OP (optionally with OP_FILE) or TEST_NODE")
    if op_file:
        path = _benchmark_path(op_file)
        if not _file_exists(nodes, path, flaggems_dir):
            raise PreflightError("benchmark_file", f"OP_FILE={op_file!r}: {path} does not exist")
        pool = [n for n in nodes if n.path == path]
    else:
        own = f"{BENCHMARK_DIR}/test_{op}.py"
        in_own = _file_exists(nodes, own, flaggems_dir)
        pool = [n for n in nodes if n.path == own] if in_own else list(nodes)
        pool = [n for n in pool if not _is_parallel(n)]
    for level in _levels(op, pool):
        if len(level) == 1:
            return level[0]
        if level:
            listed = ", ".join(n.nodeid for n in level)
            raise PreflightError("test_node", f"OP={op!r} is ambiguous: {listed}")
    closest = ", ".join(_closest(op, pool or list(nodes))) or "none"
    raise PreflightError("test_node", f"no benchmark node for OP={op!r}; closest: {closest}"
                         f"{_miss_hint(nodes, pool, op, op_file, flaggems_dir)}")


def _miss_hint(nodes: Sequence[Node], pool: Sequence[Node], op: str, op_file: str | None,
               flaggems_dir: Path | None) -> str:
    """What OP missed: a parallel file that matches only as OP_FILE; the file searched, where
    it holds no node because it does not parse."""
    hidden = [] if op_file else [n for n in nodes if _is_parallel(n) and any(_levels(op, [n]))]
    hint = f"; {hidden[0].path} matches but is searched only as OP_FILE" if hidden else ""
    if not pool and flaggems_dir is not None:
        hint += _parse_error(flaggems_dir, _benchmark_path(op_file) if op_file
                             else f"{BENCHMARK_DIR}/test_{op}.py")
    return hint


def _levels(op: str, pool: list[Node]) -> Iterable[list[Node]]:
    if "." in op:
        yield [n for n in pool if n.function and qualified_name(n) == op]
    yield [n for n in pool if n.function == f"test_{op}"]
    yield [n for n in pool if n.function == f"test_perf_{op}"]
    yield [n for n in pool if n.marks[:1] == (op,)]
    yield [n for n in pool if op in n.marks]
    own = f"{BENCHMARK_DIR}/test_{op}.py"
    if len(pool) == 1 and pool[0].path == own:
        yield pool


def _resolve_test_node(nodes: Sequence[Node], test_node: str, flaggems_dir: Path | None) -> Node:
    file, sep, function = test_node.strip().partition("::")
    if not sep and file and flaggems_dir is not None:
        whole = _benchmark_path(file)
        if (Path(flaggems_dir) / whole).exists():
            return Node(whole, "")
    if not sep or not file or not function:
        raise UsageError(f"TEST_NODE={test_node!r} is not accepted; expected 'path::function'")
    path = _benchmark_path(file)
    if not _file_exists(nodes, path, flaggems_dir):
        raise PreflightError("benchmark_file", f"TEST_NODE={test_node!r}: {path} does not exist")
    for node in nodes:
        if node.path == path and node.function == function:
            return node
    wanted = f"{path}::{function}"
    ids = [n.nodeid for n in nodes]
    close = difflib.get_close_matches(wanted, ids, n=MAX_CLOSEST, cutoff=0.0)
    raise PreflightError(
        "test_node", f"TEST_NODE={test_node!r} names no node; closest: {', '.join(close) or 'none'}"
    )


def test_node_file(test_node: str) -> str | None:
    """The benchmark file a ``path::function`` TEST_NODE names (``benchmark/test_mm.py``); None
    for any other form."""
    file, sep, function = test_node.strip().partition("::")
    return _benchmark_path(file) if sep and file and function else None


def _benchmark_path(name: str) -> str:
    """``test_mm.py``, ``./benchmark/test_mm.py`` -> ``benchmark/test_mm.py``."""
    path = PurePosixPath(name.replace("\\", "/"))
    parts = [p for p in path.parts if p not in (".", "")]
    if not parts or parts[0] != BENCHMARK_DIR:
        parts.insert(0, BENCHMARK_DIR)
    return "/".join(parts)


def _file_exists(nodes: Sequence[Node], path: str, flaggems_dir: Path | None) -> bool:
    if any(n.path == path for n in nodes):
        return True
    return flaggems_dir is not None and (Path(flaggems_dir) / path).is_file()


def _parse_error(flaggems_dir: Path, path: str) -> str:
    """"; <path> does not parse as Python (line N: why)" where that file is on disk and does
    not parse (the scan left it out); else ""."""
    try:
        ast.parse((Path(flaggems_dir) / path).read_text(encoding="utf-8"), filename=path)
    except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
        return f"; {path} does not parse as Python ({parse_failure(exc)})"
    except OSError:  # not on disk, or unreadable: nothing more to say than the miss
        pass
    return ""


def _is_parallel(node: Node) -> bool:
    return "parallel" in node.path.rpartition("/")[2]


def _closest(op: str, pool: Sequence[Node]) -> list[str]:
    """The five nodeids whose op key, marks or file stem most resemble `op`, best first.

    No similarity floor: even a name nothing resembles gets suggestions to choose from.
    """
    by_key: dict[str, list[str]] = {}
    for node in pool:
        stem = PurePosixPath(node.path).stem.removeprefix("test_")
        for key in (node.op_key, *node.marks, stem):
            by_key.setdefault(key, []).append(node.nodeid)
    found: list[str] = []
    for key in difflib.get_close_matches(op, list(by_key), n=len(by_key), cutoff=0.0):
        found.extend(i for i in by_key[key] if i not in found)
    return found[:MAX_CLOSEST]


def op_names(nodes: Sequence[Node], flaggems_dir: Path | None = None) -> dict[str, Node]:
    """Every function node outside the parallel files by its operator name, in `nodes` order.

    A node's name is the first of these that `resolve_node` maps back to it: its first mark
    where no other node has that first mark (``concat`` for ``test_Concat``), its function
    name without ``test_`` (``einsum_transpose``), and last the qualified name that names its
    file as well (``test_nextafter.nextafter_``). So OP, OPS and OPS_FILE accept every name,
    no two nodes share one, and a name never depends on the order in which nodes were found;
    a new node changes another's name only where OP would mean another node anyway.
    """
    pool = [n for n in nodes if n.function and not _is_parallel(n)]
    firsts = Counter(op_name_for(n) for n in pool)
    found: dict[str, Node] = {}
    for node in pool:
        first = op_name_for(node)
        candidates = [first] if firsts[first] == 1 else []
        for name in (*candidates, node.op_key):
            if _resolves_to(nodes, name, node, flaggems_dir):
                break
        else:
            name = qualified_name(node)
        found[name] = node
    return found


def qualified_name(node: Node) -> str:
    """``<file under benchmark/, dots for slashes, no .py>.<function without test_>``."""
    parts = PurePosixPath(node.path).with_suffix("").parts
    if parts[:1] == (BENCHMARK_DIR,):
        parts = parts[1:]
    return ".".join((*parts, node.op_key))


def _resolves_to(nodes: Sequence[Node], op: str, node: Node, flaggems_dir: Path | None) -> bool:
    try:
        return resolve_node(nodes, op=op, flaggems_dir=flaggems_dir) == node
    except (PreflightError, UsageError):
        return False
