"""Knowledge of FlagGems' benchmark layout: static node discovery and OP -> node resolution."""

from __future__ import annotations

import ast
import configparser
import difflib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness.errors import PreflightError, UsageError

log = logging.getLogger(__name__)

BENCHMARK_DIR = "benchmark"
#: pytest's own marks: they say how a test runs, never which operator it measures.
BUILTIN_MARKS = frozenset(
    {
        "parametrize", "skip", "skipif", "xfail", "usefixtures",
        "filterwarnings", "timeout", "tryfirst", "trylast",
    }
)  # fmt: skip
MAX_CLOSEST = 5


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


# --------------------------------------------------------------------------- static scan


def scan_benchmark(flaggems_dir: Path) -> Scan:
    """Parse ``benchmark/**/test_*.py`` with ``ast``; nothing is imported or executed.

    Module-level ``def test_*`` functions become nodes (classes are not collected: FlagGems has
    no ``Test*`` classes). Marks come from ``@pytest.mark.<name>`` decorators, plain or called,
    from module-level aliases of them (``_skip = pytest.mark.skipif(...)``) and from a
    module-level ``pytestmark`` (appended after the function's own, as pytest orders them).
    Files are visited in sorted posix-path order, functions in source order. A file that does
    not parse is left out and its path listed in ``Scan.unparsable``.
    """
    root = Path(flaggems_dir)
    files = sorted(
        (p.relative_to(root).as_posix(), p) for p in (root / BENCHMARK_DIR).rglob("test_*.py")
    )
    nodes: list[Node] = []
    unparsable: list[str] = []
    for rel, path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            unparsable.append(rel)
            continue
        nodes.extend(_module_nodes(rel, tree))
    return Scan(tuple(nodes), tuple(unparsable))


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
    pytest_names, mark_names = set(), set()
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


def load_nodes_tsv(path: Path) -> list[Node]:
    """Read ``node<TAB>mark,mark`` lines; ``#`` lines and blank lines are comments."""
    nodes: list[Node] = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        nodeid, _, marks = line.partition("\t")
        file, sep, function = nodeid.strip().partition("::")
        if not sep or not file or not function:
            raise UsageError(f"{path}:{lineno}: {nodeid!r} is not a 'path::function' node")
        nodes.append(Node(file, function, tuple(m for m in marks.strip().split(",") if m)))
    return nodes


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


def check_layout(flaggems_dir: Path) -> None:
    """Fail check ``benchmark_file`` for a pre-5.3 layout (no ``benchmark/base.py``)."""
    check_flaggems_dir(flaggems_dir)
    bench = Path(flaggems_dir) / BENCHMARK_DIR
    if (bench / "base.py").is_file():
        return
    older = "an older FlagGems layout"
    if (bench / "performance_utils.py").is_file():
        older += " (it has benchmark/performance_utils.py and grouped test_*_perf.py files)"
    raise PreflightError(
        "benchmark_file",
        f"{str(bench)!r} has no base.py: {older}; FlagGems >= 5.3 is required "
        "(benchmark/base.py, one benchmark/test_<op>.py per operator)",
    )


# --------------------------------------------------------------------------- resolution


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
    hidden = [] if op_file else [n for n in nodes if _is_parallel(n) and any(_levels(op, [n]))]
    hint = f"; {hidden[0].path} matches but is searched only as OP_FILE" if hidden else ""
    raise PreflightError("test_node", f"no benchmark node for OP={op!r}; closest: {closest}{hint}")


def _levels(op: str, pool: list[Node]) -> Iterable[list[Node]]:
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


# --------------------------------------------------------------------------- shape keys
#
# FlagGems' Benchmark.set_shapes looks a benchmark's shapes up in the shape YAML by its op_name
# first, then by the class names of type(self).__mro__, nearest first; BLAS operators keep theirs
# under `BlasBenchmark`. The functions below answer the same question without importing
# anything: they read the test module, find the benchmark constructor call of the node's test
# function and walk its class chain through the module and what it imports (benchmark/base.py).

SHAPES_KEY = "shapes"
ROOT_CLASS = "Benchmark"  # benchmark/base.py's base of every benchmark


@dataclass(frozen=True)
class ShapeResolution:
    """Where a benchmark node's shapes come from, found statically.

    `key` is the shape-file entry FlagGems would use. None is a miss: then `tried` lists every
    candidate that was looked up (op_name, then the class chain) and `problem` says why. A miss
    is returned, never raised: a caller that cannot go on without the shapes decides.
    """

    op_name: str | None  # as the Benchmark sees it (is_backward=True appends "_backward")
    class_chain: tuple[str, ...]  # the constructed class's MRO names, nearest first
    tried: tuple[str, ...]  # keys looked up, in FlagGems' order, up to the one found
    key: str | None
    shapes: tuple[object, ...] = ()  # the entry's shapes, as the YAML holds them
    shape_desc: str | None = None
    problem: str | None = None  # why key is None

    def describe(self) -> str:
        """One line for logs: the key found, or the candidates a miss tried."""
        chain = ">".join(self.class_chain) or "-"
        if self.key is None:
            return (f"shape key: none (op_name={self.op_name!r} classes={chain} "
                    f"tried={','.join(self.tried) or '-'}): {self.problem}")
        return (f"shape key: {self.key} (op_name={self.op_name!r} classes={chain} "
                f"tried={','.join(self.tried)}; {len(self.shapes)} shapes)")


def resolve_shape_keys(flaggems_dir: Path, node: Node, shape_file: Path) -> ShapeResolution:
    """The shape-file entry of `node`'s benchmark, looked up as FlagGems' set_shapes does.

    The benchmark is the constructor call in the test function: ``base.X(op_name="...")``, a
    class of the test module or of the function itself, or one imported from another module
    of the checkout; or the call in a module-level helper the test calls with literal
    arguments. op_name is the call's ``op_name=`` (or first positional argument) or, when the
    call passes none, the literal a class's ``__init__`` hands to ``super().__init__``. The
    classes are linearised like ``type.__mro__`` (C3) from the bases found in the test module
    and the modules it imports. A class of the chain that overrides ``set_shapes`` without
    calling ``super().set_shapes`` sets its shapes in Python: that is a miss too.
    """
    if not node.function:
        return _miss(None, (), (), f"{node.nodeid} is a whole file or directory, not one "
                     "benchmark")
    modules = _Modules(Path(flaggems_dir))
    found = _constructor_call(modules, node)
    if isinstance(found, str):
        return _miss(None, (), (), found)
    mro, op_name, why = found
    chain = tuple(_short(name) for _, name in mro)
    tried = tuple(dict.fromkeys(([op_name] if op_name else []) + list(chain)))
    custom = modules.custom_set_shapes(mro)
    if custom:
        return _miss(op_name, chain, tried, f"{custom}.set_shapes sets the shapes in Python; "
                     "the shape file does not decide them")
    if why:
        return _miss(op_name, chain, tried, why)
    config = _load_shape_yaml(shape_file)
    for n, key in enumerate(tried, start=1):
        if key not in config:
            continue
        entry = config[key]
        if not isinstance(entry, dict) or not isinstance(entry.get(SHAPES_KEY), list):
            return _miss(op_name, chain, tried[:n], f"entry {key!r} of {shape_file} has no "
                         f"'{SHAPES_KEY}' list; FlagGems would use the class's DEFAULT_SHAPES")
        desc = entry.get("shape_desc")
        return ShapeResolution(op_name, chain, tried[:n], key, tuple(entry[SHAPES_KEY]),
                               str(desc) if desc else None)
    return _miss(op_name, chain, tried, f"no entry in {shape_file} for any of "
                 f"{', '.join(tried)}; FlagGems would use the class's DEFAULT_SHAPES")


def _miss(op_name: str | None, chain: tuple[str, ...], tried: tuple[str, ...], problem: str
          ) -> ShapeResolution:
    return ShapeResolution(op_name, chain, tried, None, problem=problem)


def _short(qualname: str) -> str:
    return qualname.rpartition(".")[2]


def _load_shape_yaml(shape_file: Path) -> dict[str, object]:
    import yaml  # here, not at the top: this section is appended to a module that needs none

    try:
        # libyaml's loader where installed: FlagGems' core_shapes.yaml takes 0.5 s in pure Python
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        config = yaml.load(Path(shape_file).read_text(encoding="utf-8"), Loader=loader)
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"shape file {str(shape_file)!r} cannot be read as YAML: {exc}") from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise UsageError(f"shape file {str(shape_file)!r} is not a mapping of op or class names")
    return config


# A class inside the checkout: (module file, qualified name), the name being "Cls" for a module's
# class and "test_fn.<locals>.Cls" for one defined in a function. Outside classes (ABC,
# torch.nn.Module) have no file: (None, name).
_ClassRef = tuple[Path, str]
_Mro = list[tuple[Path | None, str]]
_LOCALS = ".<locals>."


class _Modules:
    """Parsed modules of a checkout and the names their top level binds, cached."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._trees: dict[Path, ast.Module | None] = {}
        self._classes: dict[Path, dict[str, ast.ClassDef]] = {}
        self._mros: dict[_ClassRef, _Mro] = {}

    def tree(self, path: Path) -> ast.Module | None:
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(path.read_text(encoding="utf-8"), str(path))
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                self._trees[path] = None
        return self._trees[path]

    def classes(self, path: Path) -> dict[str, ast.ClassDef]:
        """Module-level classes by name, and those of module-level functions by qualname."""
        if path not in self._classes:
            tree, found = self.tree(path), {}
            for stmt in tree.body if tree else []:
                if isinstance(stmt, ast.ClassDef):
                    found[stmt.name] = stmt
                elif isinstance(stmt, ast.FunctionDef):
                    found.update({f"{stmt.name}{_LOCALS}{s.name}": s for s in ast.walk(stmt)
                                  if isinstance(s, ast.ClassDef)})
            self._classes[path] = found
        return self._classes[path]

    def _module_file(self, path: Path, module: str | None, level: int) -> Path:
        """The path an import names: from the checkout root, or from `path`'s package."""
        base = self.root if level == 0 else path.parent
        for _ in range(max(level - 1, 0)):
            base = base.parent
        for part in (module or "").split("."):
            base = base / part if part else base
        return base

    @staticmethod
    def _as_module(target: Path) -> Path | None:
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if candidate.is_file():
                return candidate.resolve()
        return None

    def binding(self, path: Path, name: str, scope: str = "") -> tuple[str, Path, str] | None:
        """What `name` is in module `path` (inside function `scope`, when given):
        ("class", module, qualname) or ("module", module file, "")."""
        classes = self.classes(path)
        for qualname in (f"{scope}{_LOCALS}{name}" if scope else None, name):
            if qualname in classes:
                return ("class", path, qualname)
        tree = self.tree(path)
        for stmt in reversed(tree.body if tree else []):  # the last binding wins
            if isinstance(stmt, ast.ImportFrom):
                alias = next((a for a in stmt.names if (a.asname or a.name) == name), None)
                if alias is None:
                    continue
                package = self._module_file(path, stmt.module, stmt.level)
                sub = self._as_module(package / alias.name)
                if sub is not None:
                    return ("module", sub, "")
                owner = self._as_module(package)
                return self.binding(owner, alias.name) if owner not in (None, path) else None
            if isinstance(stmt, ast.Import):
                alias = next((a for a in stmt.names if a.asname == name), None)
                if alias is not None:
                    found = self._as_module(self._module_file(path, alias.name, 0))
                    return ("module", found, "") if found else None
        return None

    def class_of(self, path: Path, expr: ast.expr, scope: str = "") -> _ClassRef | str:
        """The class an expression names in module `path`; its bare name (a str) when the
        class is outside the checkout or the expression is not a class."""
        if isinstance(expr, ast.Name):
            found = self.binding(path, expr.id, scope)
            return (found[1], found[2]) if found and found[0] == "class" else expr.id
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            found = self.binding(path, expr.value.id, scope)
            if found and found[0] == "module":
                inner = self.binding(found[1], expr.attr)
                if inner and inner[0] == "class":
                    return (inner[1], inner[2])
        return expr.attr if isinstance(expr, ast.Attribute) else ast.unparse(expr)

    def mro(self, ref: _ClassRef, seen: tuple[_ClassRef, ...] = ()) -> _Mro:
        """C3 linearisation of `ref`, as type.__mro__ orders it, without `object`."""
        if ref in self._mros:
            return self._mros[ref]
        if ref in seen:
            raise ValueError(f"class {_short(ref[1])} inherits from itself")
        scope = ref[1].partition(_LOCALS)[0] if _LOCALS in ref[1] else ""
        bases = [self.class_of(ref[0], b, scope) for b in self.classes(ref[0])[ref[1]].bases]
        bases = [(None, b) if isinstance(b, str) else b for b in bases if b != "object"]
        lines = [self.mro(b, (*seen, ref)) if b[0] is not None else [b] for b in bases]
        self._mros[ref] = [ref, *_c3_merge([*lines, bases], _short(ref[1]))]
        return self._mros[ref]

    def is_benchmark(self, ref: _ClassRef) -> bool:
        try:
            return any(_short(name) == ROOT_CLASS for _, name in self.mro(ref))
        except ValueError:
            return False

    def methods(self, mro: _Mro, name: str) -> Iterable[tuple[str, ast.FunctionDef]]:
        """(class name, method) for each class of `mro` in the checkout that defines `name`."""
        for path, qualname in mro:
            if path is None:
                continue
            for stmt in self.classes(path)[qualname].body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                    yield _short(qualname), stmt

    def custom_set_shapes(self, mro: _Mro) -> str | None:
        """The nearest class whose set_shapes neither calls super().set_shapes nor is the shape
        file lookup itself (it reads a "shapes" entry); None when the file decides."""
        for cls, method in self.methods(mro, "set_shapes"):
            calls_super = any(isinstance(n, ast.Attribute) and n.attr == "set_shapes"
                              and isinstance(n.value, ast.Call) for n in ast.walk(method))
            if calls_super:
                continue  # the file is read, then filtered: a shard's subset stays a subset
            reads_file = any(isinstance(n, ast.Constant) and n.value == SHAPES_KEY
                             for n in ast.walk(method))
            return None if reads_file else cls
        return None

    def init_op_name(self, mro: _Mro) -> str | None:
        """The literal op_name a class's __init__ passes up (``super().__init__("x", ...)``,
        ``op_name="x"``) or assigns (``self.op_name = "x"``), nearest class first."""
        for _, method in self.methods(mro, "__init__"):
            for n in ast.walk(method):
                value = None
                if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "__init__":
                    keywords = {k.arg: k.value for k in n.keywords if k.arg}
                    positional = n.args if isinstance(n.func.value, ast.Call) else n.args[1:]
                    value = keywords.get("op_name", positional[0] if positional else None)
                elif isinstance(n, ast.Assign) and any(
                        isinstance(t, ast.Attribute) and t.attr == "op_name" for t in n.targets):
                    value = n.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    return value.value
        return None


def _c3_merge(lines: list[_Mro], name: str) -> _Mro:
    lines = [list(line) for line in lines if line]
    result: _Mro = []
    while lines:
        head = next((line[0] for line in lines
                     if not any(line[0] in other[1:] for other in lines)), None)
        if head is None:
            raise ValueError(f"class {name}: no consistent method resolution order")
        result.append(head)
        lines = [rest for line in lines if (rest := [c for c in line if c != head])]
    return result


def _constructor_call(modules: _Modules, node: Node) -> tuple[_Mro, str | None, str | None] | str:
    """(class chain, op_name, problem) of the benchmark the test function constructs, or a str
    saying why none was found; `problem` is set when the class is known but op_name is not."""
    path = (modules.root / node.path).resolve()
    tree = modules.tree(path)
    if tree is None:
        return f"{node.path} does not parse as Python"
    functions = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    function = functions.get(node.function)
    if function is None:
        return f"{node.nodeid}: no such module-level function"
    calls = _benchmark_calls(modules, path, function, {})
    if not calls:  # one level of helper: test_x() -> _run("x", ...) -> Bench(op_name=op_name)
        for call in ast.walk(function):
            name = getattr(call.func, "id", "") if isinstance(call, ast.Call) else ""
            helper = functions.get(name)
            if helper is not None and helper is not function:
                calls += _benchmark_calls(modules, path, helper, _bind(helper, call))
    distinct = list(dict.fromkeys(calls))
    if not distinct:
        return f"{node.nodeid}: no benchmark constructor call found"
    if len(distinct) > 1:
        names = ", ".join(f"{_short(ref[1])}(op_name={op!r})" for ref, op, _ in distinct)
        return f"{node.nodeid} constructs several benchmarks: {names}"
    ref, op_name, why = distinct[0]
    return modules.mro(ref), op_name, why


def _bind(helper: ast.FunctionDef, call: ast.Call) -> dict[str, ast.expr]:
    """The helper's parameters the call passes, positionally or by keyword."""
    params = [a.arg for a in helper.args.posonlyargs + helper.args.args]
    bound = dict(zip(params, call.args, strict=False))  # a *args call binds what it can
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    return bound


def _benchmark_calls(modules: _Modules, path: Path, function: ast.FunctionDef,
                     bound: dict[str, ast.expr]) -> list[tuple[_ClassRef, str | None, str | None]]:
    found = []
    for call in ast.walk(function):
        if not isinstance(call, ast.Call):
            continue
        ref = modules.class_of(path, call.func, function.name)
        if isinstance(ref, str) or not modules.is_benchmark(ref):
            continue
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        expr = keywords.get("op_name", call.args[0] if call.args else None)
        op_name = (_literal(expr, function, bound) if expr is not None
                   else modules.init_op_name(modules.mro(ref)))
        if not isinstance(op_name, str):
            text = "not passed" if expr is None else ast.unparse(expr)
            found.append((ref, None, f"op_name ({text}) is not a string known statically"))
            continue
        if _literal(keywords.get("is_backward"), function, bound) is True and (
                "_backward" not in op_name):
            op_name += "_backward"  # as Benchmark.__init__ does
        found.append((ref, op_name, None))
    return found


def _literal(expr: ast.expr | None, function: ast.FunctionDef, bound: dict[str, ast.expr]
             ) -> object:
    """The constant an expression stands for: a literal, a helper parameter bound to one, or a
    local name assigned exactly one literal in the function; else None."""
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Name):
        if expr.id in bound:
            return _literal(bound[expr.id], function, {})
        values = [s.value for s in ast.walk(function) if isinstance(s, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == expr.id for t in s.targets)]
        if len(values) == 1 and isinstance(values[0], ast.Constant):
            return values[0].value
    return None
