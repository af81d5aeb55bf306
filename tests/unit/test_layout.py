"""The package's structure, checked from its source: layers, no circles, sizes, environment
reads and private names. Each rule once failed in this codebase (see docs/DESIGN.md)."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.settings.spec import PACKAGE_DIR

# The folders (and flat modules) of harness/, lowest first: a module imports only from its own
# folder or from one listed before it. Folders on one line do not import each other.
LAYERS = (("stats", "errors"), ("fsutil", "backends", "providers"), ("contract",), ("axes",),
          ("settings",), ("tuning", "report"), ("plugins", "executors"), ("run",), ("history",),
          ("campaign",), ("bisect",), ("cli",))
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# Where the process environment may be read: the settings table, the host/plugin contract
# and the plugins, which read what the host handed over.
ENVIRON_READERS = ("settings/variables.py", "contract/boundary.py", "plugins/")


@functools.cache
def modules() -> tuple[tuple[str, Path, ast.Module], ...]:
    """Every harness module's dotted name, path and syntax tree, parsed once for all the
    tests here (read only: none of them changes a tree)."""
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR)
        if rel.parts[0] == "cpu_suite":
            continue
        parts = rel.with_suffix("").parts
        name = ".".join(("harness", *(parts[:-1] if parts[-1] == "__init__" else parts)))
        found.append((name, rel, ast.parse(path.read_text(encoding="utf-8"))))
    return tuple(found)


def imported(name: str, tree: ast.Module, known: set[str]) -> Iterator[tuple[str, ast.AST]]:
    """The harness modules a module imports (a name imported from a package that is itself
    a module counts as that module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("harness"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield (full if full in known else node.module), node
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("harness"):
                    yield alias.name, node


def top(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "harness"


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    found = list(modules())
    known = {name for name, _, _ in found}
    return {name: {m for m, _ in imported(name, tree, known) if m != name and m != "harness"}
            for name, _, tree in found}


def test_no_import_runs_up_a_layer(graph):
    upward = [f"{a} -> {b}" for a, targets in graph.items() for b in targets
              if top(a) in RANK and top(b) in RANK and RANK[top(b)] > RANK[top(a)]]
    assert upward == []
    unknown = sorted({top(a) for a in graph} - set(RANK) - {"harness"})
    assert unknown == [], "a new folder needs its place in LAYERS"


def test_no_module_imports_itself_back_round_a_circle(graph):
    state: dict[str, int] = {}
    circles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                circles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


def test_statistics_import_nothing_of_the_harness(graph):
    """stats/ is pure: a reader, a store or a renderer may use it, it uses none of them."""
    reach = sorted(f"{a} -> {b}" for a, targets in graph.items() if top(a) == "stats"
                   for b in targets if top(b) != "stats")
    assert reach == []
    assert any(top(a) == "stats" for a in graph)


# The only imports of the harness inside a function, each from its own folder: the history
# store's modules import SQLAlchemy, a third of `import harness.cli`, which every unit of a
# campaign pays as a process of its own without recording anything.
LAZY_IMPORTS = ("harness.history.command._store_modules", "harness.history.recording.record")


def test_no_harness_import_hides_inside_a_function():
    inside = []
    for name, _, tree in modules():
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found = [node for node in ast.walk(fn)
                         if isinstance(node, (ast.Import, ast.ImportFrom))
                         and any(a.name.startswith("harness") for a in node.names)
                         or isinstance(node, ast.ImportFrom)
                         and (node.module or "").startswith("harness")]
                inside += [f"{name}.{fn.name}" for _ in found[:1]]
                if f"{name}.{fn.name}" in LAZY_IMPORTS:  # from its own folder alone
                    folder = name.rsplit(".", 1)[0]
                    assert all(isinstance(n, ast.ImportFrom) and n.module == folder
                               for n in found), name
    assert sorted(inside) == sorted(LAZY_IMPORTS)


def test_a_units_process_imports_no_history_store():
    code = "import sys, harness.cli; print(sorted(m for m in ('sqlalchemy', 'torch') " \
           "if m in sys.modules))"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, cwd=PACKAGE_DIR.parent)
    assert found.stdout.strip() == "[]"


def test_modules_and_functions_stay_small():
    big = []
    for _, rel, tree in modules():
        lines = len((PACKAGE_DIR / rel).read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            big.append(f"{rel}: {lines} lines")
        big += [f"{rel}:{fn.lineno} {fn.name}: {fn.end_lineno - fn.lineno + 1} lines"
                for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                and (fn.end_lineno or 0) - fn.lineno + 1 > MAX_FUNCTION_LINES]
    assert big == []


def test_the_environment_is_read_in_one_place():
    readers = []
    for _, rel, tree in modules():
        if rel.as_posix().startswith(ENVIRON_READERS):
            continue
        readers += [f"{rel}:{n.lineno}" for n in ast.walk(tree)
                    if isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv")
                    and isinstance(n.value, ast.Name) and n.value.id == "os"]
    assert readers == []


def test_no_module_reaches_into_another_modules_private_names():
    found = list(modules())
    known = {name for name, _, _ in found}
    reach = []
    for _, rel, tree in found:
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness"):
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in known:
                        aliases[alias.asname or alias.name] = alias.name
                    elif alias.name.startswith("_") and alias.name != "__version__":
                        reach.append(f"{rel}:{node.lineno} imports {alias.name}")
        reach += [f"{rel}:{n.lineno} {n.value.id}.{n.attr}" for n in ast.walk(tree)
                  if isinstance(n, ast.Attribute) and n.attr.startswith("_")
                  and not n.attr.startswith("__") and isinstance(n.value, ast.Name)
                  and n.value.id in aliases]
    assert reach == []
