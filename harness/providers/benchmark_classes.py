"""What a FlagGems benchmark node measures, read statically: its shape key and its dtypes.

FlagGems' Benchmark.set_shapes looks a benchmark's shapes up in the shape YAML by its op_name
first, then by the class names of type(self).__mro__, nearest first; BLAS operators keep theirs
under `BlasBenchmark`. The functions below answer the same question without importing
anything: they read the test module, find the benchmark constructor call of the node's test
function and walk its class chain through the module and what it imports (benchmark/base.py).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.errors import UsageError
from harness.providers.flaggems import Node

SHAPES_KEY = "shapes"
# What FlagGems' `--dtypes` accepts (benchmark/conftest.py: FLOAT_DTYPES + INT_DTYPES +
# BOOL_DTYPES + complex64); a run can be restricted to these and no others.
SELECTABLE_DTYPES = frozenset({"float16", "float32", "bfloat16", "int16", "int32", "bool",
                               "complex64"})
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
    dtypes: tuple[str, ...] = ()  # torch names of the benchmark's dtypes; (): not known

    def describe(self) -> str:
        """One line for logs: the key found, or the candidates a miss tried."""
        chain = ">".join(self.class_chain) or "-"
        if self.key is None:
            return (f"shape key: none (op_name={self.op_name!r} classes={chain} "
                    f"tried={','.join(self.tried) or '-'}): {self.problem}")
        return (f"shape key: {self.key} (op_name={self.op_name!r} classes={chain} "
                f"tried={','.join(self.tried)}; {len(self.shapes)} shapes; dtypes "
                f"{','.join(self.dtypes) or 'not known statically'})")


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
    mro, op_name, why, dtypes = found
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
                               str(desc) if desc else None, dtypes=dtypes or ())
    return _miss(op_name, chain, tried, f"no entry in {shape_file} for any of "
                 f"{', '.join(tried)}; FlagGems would use the class's DEFAULT_SHAPES")


def benchmark_dtypes(flaggems_dir: Path, node: Node) -> tuple[str, ...] | None:
    """The torch dtype names `node`'s benchmark measures by default, read statically as
    resolve_shape_keys reads them; None when they are not known."""
    if not node.function:
        return None
    found = _constructor_call(_Modules(Path(flaggems_dir)), node)
    return None if isinstance(found, str) else (found[3] or None)


def _miss(op_name: str | None, chain: tuple[str, ...], tried: tuple[str, ...], problem: str
          ) -> ShapeResolution:
    return ShapeResolution(op_name, chain, tried, None, problem=problem)


def _short(qualname: str) -> str:
    return qualname.rpartition(".")[2]


def _load_shape_yaml(shape_file: Path) -> dict[str, object]:
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
        found = [self.class_of(ref[0], b, scope) for b in self.classes(ref[0])[ref[1]].bases]
        bases: _Mro = [(None, b) if isinstance(b, str) else b for b in found if b != "object"]
        lines: list[_Mro] = [self.mro((where, name), (*seen, ref)) if where is not None
                             else [(where, name)] for where, name in bases]
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
                if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and n.func.attr == "__init__"):
                    keywords = {k.arg: k.value for k in n.keywords if k.arg}
                    positional = n.args if isinstance(n.func.value, ast.Call) else n.args[1:]
                    value = keywords.get("op_name", positional[0] if positional else None)
                elif isinstance(n, ast.Assign) and any(
                        isinstance(t, ast.Attribute) and t.attr == "op_name" for t in n.targets):
                    value = n.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    return value.value
        return None


    def dtype_names(self, path: Path, expr: ast.expr, function: ast.FunctionDef | None = None,
                    bound: dict[str, ast.expr] | None = None, depth: int = 0
                    ) -> tuple[str, ...] | None:
        """The torch dtype names a dtypes expression of module `path` stands for: a list of
        ``torch.X``, a name or ``consts.NAME`` bound to one at module level (here or where it is
        imported from), a local or helper parameter, or a sum of those; None otherwise."""
        if depth > 8:
            return None
        if isinstance(expr, (ast.List, ast.Tuple)):
            names = [e.attr for e in expr.elts if isinstance(e, ast.Attribute)
                     and isinstance(e.value, ast.Name) and e.value.id == "torch"]
            return tuple(names) if len(names) == len(expr.elts) else None
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            left, right = (self.dtype_names(path, e, function, bound, depth + 1)
                           for e in (expr.left, expr.right))
            return None if left is None or right is None else left + right
        value: tuple[Path, ast.expr] | None = None
        if isinstance(expr, ast.Name) and bound and expr.id in bound:
            return self.dtype_names(path, bound[expr.id], None, None, depth + 1)
        if isinstance(expr, ast.Name) and function is not None and (
                local := _assigned(function.body, expr.id, walk=True)) is not None:
            value = (path, local)
        elif isinstance(expr, ast.Name):
            value = self.module_value(path, expr.id)
        elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            owner = self.binding(path, expr.value.id)
            if owner and owner[0] == "module":
                value = self.module_value(owner[1], expr.attr)
        return self.dtype_names(value[0], value[1], None, None, depth + 1) if value else None

    def module_value(self, path: Path, name: str) -> tuple[Path, ast.expr] | None:
        """(module, expression) of the module-level assignment that binds `name` in `path`,
        following ``from x import name``."""
        tree = self.tree(path)
        found = _assigned(tree.body if tree else [], name)
        if found is not None:
            return path, found
        for stmt in reversed(tree.body if tree else []):
            if isinstance(stmt, ast.ImportFrom) and any(
                    (a.asname or a.name) == name for a in stmt.names):
                alias = next(a for a in stmt.names if (a.asname or a.name) == name)
                owner = self._as_module(self._module_file(path, stmt.module, stmt.level))
                return self.module_value(owner, alias.name) if owner not in (None, path) else None
        return None

    def default_dtypes(self, mro: _Mro) -> tuple[str, ...] | None:
        """DEFAULT_DTYPES of the nearest class that sets it; None when a class between has an
        __init__ that handles dtypes itself (its value is then decided in Python)."""
        for path, qualname in mro:
            if path is None:
                continue
            body = self.classes(path)[qualname].body
            if _short(qualname) != ROOT_CLASS and any(
                    isinstance(s, ast.FunctionDef) and s.name == "__init__" and _names(s, "dtypes")
                    for s in body):
                return None
            found = _assigned(body, "DEFAULT_DTYPES")
            if found is not None:
                return self.dtype_names(path, found)
        return None


def _names(node: ast.AST, name: str) -> bool:
    """Whether `name` appears in `node` as a variable, a keyword, a parameter or an attribute."""
    return any(name in (getattr(n, "id", None), getattr(n, "arg", None), getattr(n, "attr", None))
               for n in ast.walk(node))


def _assigned(body: list[ast.stmt], name: str, walk: bool = False) -> ast.expr | None:
    """The value of the one assignment to `name` in `body` (all of it when `walk`); None when
    there is none or more than one."""
    nodes = [n for stmt in body for n in (ast.walk(stmt) if walk else (stmt,))]
    values = [n.value for n in nodes if isinstance(n, ast.Assign)
              and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
    return values[0] if len(values) == 1 else None


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


def _constructor_call(modules: _Modules, node: Node
                      ) -> tuple[_Mro, str | None, str | None, tuple[str, ...] | None] | str:
    """(class chain, op_name, problem, dtypes) of the benchmark the test function constructs,
    or a str saying why none was found; `problem` is set when the class is known but op_name
    is not, dtypes is None when they are not known statically."""
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
        for call in (c for c in ast.walk(function) if isinstance(c, ast.Call)):
            helper = functions.get(getattr(call.func, "id", ""))
            if helper is not None and helper is not function:
                calls += _benchmark_calls(modules, path, helper, _bind(helper, call))
    distinct = list(dict.fromkeys(calls))
    if not distinct:
        return f"{node.nodeid}: no benchmark constructor call found"
    if len(distinct) > 1:
        names = ", ".join(f"{_short(ref[1])}(op_name={op!r})" for ref, op, _, _ in distinct)
        return f"{node.nodeid} constructs several benchmarks: {names}"
    ref, op_name, why, dtypes = distinct[0]
    return modules.mro(ref), op_name, why, dtypes


def _bind(helper: ast.FunctionDef, call: ast.Call) -> dict[str, ast.expr]:
    """The helper's parameters the call passes, positionally or by keyword."""
    params = [a.arg for a in helper.args.posonlyargs + helper.args.args]
    bound = dict(zip(params, call.args, strict=False))  # a *args call binds what it can
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    return bound


_Call = tuple[_ClassRef, str | None, str | None, tuple[str, ...] | None]


def _benchmark_calls(modules: _Modules, path: Path, function: ast.FunctionDef,
                     bound: dict[str, ast.expr]) -> list[_Call]:
    found: list[_Call] = []
    for call in ast.walk(function):
        if not isinstance(call, ast.Call):
            continue
        ref = modules.class_of(path, call.func, function.name)
        if isinstance(ref, str) or not modules.is_benchmark(ref):
            continue
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        dtypes = (modules.dtype_names(path, keywords["dtypes"], function, bound)
                  if "dtypes" in keywords else modules.default_dtypes(modules.mro(ref)))
        expr = keywords.get("op_name", call.args[0] if call.args else None)
        op_name = (_literal(expr, function, bound) if expr is not None
                   else modules.init_op_name(modules.mro(ref)))
        if not isinstance(op_name, str):
            text = "not passed" if expr is None else ast.unparse(expr)
            found.append((ref, None, f"op_name ({text}) is not a string known statically",
                          dtypes))
            continue
        if _literal(keywords.get("is_backward"), function, bound) is True and (
                "_backward" not in op_name):
            op_name += "_backward"  # as Benchmark.__init__ does
        found.append((ref, op_name, None, dtypes))
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
        value = _assigned(function.body, expr.id, walk=True)
        if isinstance(value, ast.Constant):
            return value.value
    return None
