"""Knowledge of FlagGems' benchmark layout: static node discovery, names and shape files."""

from __future__ import annotations

import ast
import configparser
import fnmatch
import importlib
import logging
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from harness.errors import PreflightError

log = logging.getLogger(__name__)

BENCHMARK_DIR = "benchmark"
#: pytest's own marks: they say how a test runs, never which operator it measures.
BUILTIN_MARKS = frozenset(
    {
        "parametrize", "skip", "skipif", "xfail", "usefixtures",
        "filterwarnings", "timeout", "tryfirst", "trylast",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Node:
    """One benchmark test function of a FlagGems checkout (or, with no function, a whole file
    or directory of them, which pytest runs as one node)."""

    path: str  # relative to the FlagGems dir, posix: "benchmark/test_mm.py"
    function: str  # "test_mm"; "" for a whole file or directory
    marks: tuple[str, ...] = ()  # operator marks in source order, builtin marks excluded

    @property
    def nodeid(self) -> str:
        return f"{self.path}::{self.function}" if self.function else self.path

    @property
    def op_key(self) -> str:
        """The function name without its leading ``test_``: the key a deny list uses."""
        return self.function.removeprefix("test_")


@dataclass(frozen=True)
class Scan:
    """What a static scan found: the nodes, and the files it could not parse."""

    nodes: tuple[Node, ...]
    unparsable: tuple[str, ...]
    why: Mapping[str, str] = field(default_factory=dict)  # unparsable file -> its error


# --------------------------------------------------------------------------- static scan


def scan_benchmark(flaggems_dir: Path, only: str | None = None) -> Scan:
    """Parse ``benchmark/**/test_*.py`` with ``ast``; nothing is imported or executed.

    Module-level ``def test_*`` functions become nodes (classes are not collected: FlagGems has
    no ``Test*`` classes). Marks come from ``@pytest.mark.<name>`` decorators, plain or called,
    from module-level aliases of them (``_skip = pytest.mark.skipif(...)``) and from a
    module-level ``pytestmark`` (appended after the function's own, as pytest orders them).
    Files are visited in sorted posix-path order, functions in source order. A file that does
    not parse is left out and its path listed in ``Scan.unparsable``, its error in ``why``.
    `only` (``benchmark/test_mm.py``): that file alone, where it is one of them; its nodes are
    those the whole scan finds in it, since a file's marks are its own.
    """
    root = Path(flaggems_dir)
    files = sorted(
        (p.relative_to(root).as_posix(), p) for p in (root / BENCHMARK_DIR).rglob("test_*.py")
        if p.is_file()  # a folder named test_x.py is no benchmark file
    ) if only is None else [(only, root / only)] if _benchmark_file(root, only) else []
    nodes: list[Node] = []
    why: dict[str, str] = {}
    for rel, path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError) as exc:
            why[rel] = parse_failure(exc)
            continue
        nodes.extend(_module_nodes(rel, tree))
    return Scan(tuple(nodes), tuple(why), why)


def _benchmark_file(root: Path, rel: str) -> bool:
    """Whether `rel` is a ``test_*.py`` file under the tree's benchmark folder, as the whole
    scan's glob would find it."""
    path = PurePosixPath(rel)
    folders = [root.joinpath(*path.parts[:n]) for n in range(2, len(path.parts))]
    return (path.parts[:1] == (BENCHMARK_DIR,) and ".." not in path.parts
            and fnmatch.fnmatch(path.name, "test_*.py") and (root / rel).is_file()
            and not any(f.is_symlink() for f in folders))  # rglob follows no linked folder


def parse_failure(exc: SyntaxError | UnicodeDecodeError | ValueError | OSError) -> str:
    """Why a benchmark file does not parse, as every message puts it: "line N: why" for a
    syntax error, else the error's own words."""
    if isinstance(exc, SyntaxError):
        return f"line {exc.lineno}: {exc.msg}"
    return str(exc)


def scan_tree(flaggems_dir: Path) -> list[Node]:
    """The nodes of `scan_benchmark`; each unparsable file is logged as a warning and skipped."""
    scan = scan_benchmark(flaggems_dir)
    for rel in scan.unparsable:
        log.warning("skipped %s: it does not parse as Python", rel)
    return list(scan.nodes)


def _module_nodes(rel: str, tree: ast.Module) -> list[Node]:
    pytest_names, mark_names = _pytest_aliases(tree)
    aliases: dict[str, list[str]] = {}  # module-level NAME = pytest.mark.x(...)
    module_marks: list[str] = []
    by_function: dict[str, list[str]] = {}  # a redefinition replaces marks, keeps position
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            marks = _marks_of(stmt.value, pytest_names, mark_names, aliases)
            if isinstance(target, ast.Name) and marks is not None:
                if target.id == "pytestmark":
                    module_marks = marks
                else:
                    aliases[target.id] = marks
        elif isinstance(stmt, ast.FunctionDef) and stmt.name.startswith("test_"):
            found: list[str] = []
            for dec in stmt.decorator_list:
                found.extend(_marks_of(dec, pytest_names, mark_names, aliases) or [])
            by_function[stmt.name] = found
    return [
        Node(rel, name, _operator_marks(marks + module_marks))
        for name, marks in by_function.items()
    ]


def _pytest_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names bound to the pytest module and to ``pytest.mark`` by the module's imports."""
    pytest_names: set[str] = set()
    mark_names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            pytest_names.update(a.asname or a.name for a in stmt.names if a.name == "pytest")
        elif isinstance(stmt, ast.ImportFrom) and stmt.module == "pytest":
            mark_names.update(a.asname or a.name for a in stmt.names if a.name == "mark")
    return pytest_names or {"pytest"}, mark_names


def _marks_of(
    expr: ast.expr, pytest_names: set[str], mark_names: set[str], aliases: dict[str, list[str]]
) -> list[str] | None:
    """The mark names an expression stands for, or None when it is not a mark."""
    if isinstance(expr, (ast.List, ast.Tuple)):  # pytestmark = [pytest.mark.a, ...]
        found = [_marks_of(e, pytest_names, mark_names, aliases) for e in expr.elts]
        return None if any(m is None for m in found) else [n for m in found for n in m or []]
    if isinstance(expr, ast.Call):
        expr = expr.func
    if isinstance(expr, ast.Name):
        return aliases.get(expr.id)
    if not isinstance(expr, ast.Attribute):
        return None
    base = expr.value
    if isinstance(base, ast.Name) and base.id in mark_names:
        return [expr.attr]
    if (
        isinstance(base, ast.Attribute)
        and base.attr == "mark"
        and isinstance(base.value, ast.Name)
        and base.value.id in pytest_names
    ):
        return [expr.attr]
    return None


def _operator_marks(marks: Iterable[str]) -> tuple[str, ...]:
    return tuple(m for m in marks if m not in BUILTIN_MARKS)


# --------------------------------------------------------------------------- preflight


def check_flaggems_dir(flaggems_dir: Path) -> None:
    """Fail check ``flaggems_dir`` unless the path is a directory holding ``benchmark/``."""
    root = Path(flaggems_dir)
    if not root.exists():
        raise PreflightError("flaggems_dir", f"FLAGGEMS_DIR={str(root)!r} does not exist")
    if not root.is_dir():
        raise PreflightError("flaggems_dir", f"FLAGGEMS_DIR={str(root)!r} is not a directory")
    if not (root / BENCHMARK_DIR).is_dir():
        raise PreflightError(
            "flaggems_dir", f"FLAGGEMS_DIR={str(root)!r} has no {BENCHMARK_DIR}/ directory"
        )


# pytest's configuration files in the order it takes them within a directory (pytest 9's
# _pytest.config.findpaths.CONFIG_LOADERS_BY_NAME; 8 lacks the two .toml names)
PYTEST_CONFIG_NAMES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini",
                       "pyproject.toml", "tox.ini", "setup.cfg")


def _toml(text: str) -> dict[str, Any]:
    """A TOML document, read as pytest reads one: tomllib, or on Python 3.10 the tomli that
    pytest requires there."""
    name = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    found: dict[str, Any] = importlib.import_module(name).loads(text)
    return found


def _configures_pytest(path: Path) -> bool:
    """Whether pytest takes `path`, one of PYTEST_CONFIG_NAMES, as its configuration: its own
    files always; pyproject.toml with [tool.pytest.ini_options] or options in [tool.pytest];
    tox.ini with [pytest]; setup.cfg with [tool:pytest] or [pytest] (which pytest refuses). A
    file it would fail to parse counts too: the run would stop on it."""
    if path.name in PYTEST_CONFIG_NAMES[:4]:
        return True
    try:
        if path.name == "pyproject.toml":
            tool = _toml(path.read_text(encoding="utf-8")).get("tool", {})
            table = tool.get("pytest", {}) if isinstance(tool, dict) else {}
            return isinstance(table, dict) and (
                table.get("ini_options") is not None or any(k != "ini_options" for k in table))
        import iniconfig  # pytest's own reader of .ini and .cfg files

        sections = iniconfig.IniConfig(str(path)).sections
    except Exception:  # noqa: BLE001 (any parse failure: pytest would stop on the file)
        return True
    return "pytest" in sections or (path.name == "setup.cfg" and "tool:pytest" in sections)


def pytest_config(start: Path) -> Path | None:
    """The file pytest takes its configuration from for arguments under `start`, as it looks
    for one: in `start`, then each directory above it, the first of PYTEST_CONFIG_NAMES that
    configures pytest (_configures_pytest); None where there is none."""
    for directory in (start, *start.parents):
        for name in PYTEST_CONFIG_NAMES:
            path = directory / name
            if path.is_file() and _configures_pytest(path):
                return path
    return None


def check_config(flaggems_dir: Path) -> None:
    """Fail check ``benchmark_file`` where pytest would configure FlagGems' run from a file
    outside the checkout: a checkout copied without its pytest.ini, inside another project,
    gets that project's options (its --strict-markers failed every operator of a campaign on
    FlagGems' marks)."""
    root = Path(flaggems_dir).resolve()
    found = pytest_config(root / BENCHMARK_DIR)
    if found is not None and not found.is_relative_to(root):
        raise PreflightError(
            "benchmark_file",
            f"FLAGGEMS_DIR={str(flaggems_dir)!r} has no pytest configuration of its own, so "
            f"pytest would configure its run from {str(found)!r}; copy FlagGems' pytest.ini "
            "into it (a checkout has one)",
        )


def check_layout(flaggems_dir: Path) -> None:
    """Fail check ``benchmark_file`` for a pre-5.3 layout (no ``benchmark/base.py``) or a
    configuration pytest would take from outside the checkout (check_config)."""
    check_flaggems_dir(flaggems_dir)
    bench = Path(flaggems_dir) / BENCHMARK_DIR
    if (bench / "base.py").is_file():
        check_config(flaggems_dir)
        return
    older = "an older FlagGems layout"
    if (bench / "performance_utils.py").is_file():
        older += " (it has benchmark/performance_utils.py and grouped test_*_perf.py files)"
    raise PreflightError(
        "benchmark_file",
        f"{str(bench)!r} has no base.py: {older}; FlagGems >= 5.3 is required "
        "(benchmark/base.py, one benchmark/test_<op>.py per operator)",
    )


def op_name_for(node: Node, op: str | None = None) -> str:
    """The run directory's ``<op>``: OP when known, else the node's first mark, else its op key;
    for a whole file its stem without ``test_``, for a directory ``suite``."""
    if op:
        return op
    if not node.function:
        stem = PurePosixPath(node.path)
        return stem.stem.removeprefix("test_") if stem.suffix == ".py" else "suite"
    return node.marks[0] if node.marks else node.op_key


def pytest_pythonpath(flaggems_dir: Path | None) -> tuple[Path, ...]:
    """The `pythonpath` entries of the checkout's pytest.ini (FlagGems sets ``src``), resolved.

    pytest puts them on sys.path when it runs from the checkout, so a preflight import check
    must see them too; a checkout without pytest.ini (or without the key) gives ().
    """
    if flaggems_dir is None:
        return ()
    ini = Path(flaggems_dir) / "pytest.ini"
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(ini, encoding="utf-8")
    except configparser.Error:
        return ()
    value = parser.get("pytest", "pythonpath", fallback="")
    return tuple((Path(flaggems_dir) / entry).resolve() for entry in value.split())


# --------------------------------------------------------------------------- shape files

SHAPE_ENTRY_KEYS = ("shapes", "shape_desc")  # all that Benchmark.set_shapes reads of an entry


def shape_config_problem(config: object) -> str | None:
    """Why a loaded shape YAML would break FlagGems' Benchmark.set_shapes, or None.

    set_shapes looks an entry up by op name or class name in a top-level mapping, reads its
    ``shapes`` (a list; each shape becomes ``tuple(shape)``) and ``shape_desc`` (a string);
    a shape's items are sizes, or lists of sizes, or flags (``[[32, 384], 1, False]``).
    A key it does not read (``shape:``) would leave the class's default shapes in place.
    """
    if not isinstance(config, dict) or not config:
        return "expected a mapping of op or class names to {shapes: [...], shape_desc: ...}"
    for key, entry in config.items():
        where = f"entry {key!r}"
        if not isinstance(entry, dict):
            return f"{where} is {type(entry).__name__}; expected a mapping with 'shapes'"
        unknown = sorted(str(k) for k in entry if k not in SHAPE_ENTRY_KEYS)
        if unknown:
            return (f"{where} has {', '.join(map(repr, unknown))}; expected only "
                    f"{', '.join(SHAPE_ENTRY_KEYS)}")
        if "shape_desc" in entry and not isinstance(entry["shape_desc"], str):
            return f"{where}: shape_desc={entry['shape_desc']!r}; expected a string"
        shapes = entry.get("shapes")
        if not isinstance(shapes, list) or not shapes:
            return f"{where}: shapes={shapes!r}; expected a non-empty list of shapes"
        bad = [s for s in shapes if not (isinstance(s, list) and s and _shape_item(s))]
        if bad:
            return (f"{where}: shape {bad[0]!r} is not accepted; expected a non-empty list of "
                    "integers (or of lists of integers), e.g. [1024, 1024]")
    return None


def _shape_item(item: object) -> bool:
    if isinstance(item, list):
        return all(_shape_item(i) for i in item)
    return isinstance(item, int)  # bool is an int: FlagGems passes flags among the sizes
