"""What a FlagGems benchmark node measures, read statically: its shape key and its dtypes.

FlagGems' Benchmark.set_shapes looks a benchmark's shapes up in the shape YAML by its op_name
first, then by the class names of type(self).__mro__, nearest first; BLAS operators keep theirs
under `BlasBenchmark`. The functions below answer the same question without importing
anything: they read the test module, find the benchmark constructor call of the node's test
function and walk its class chain through the module and what it imports (benchmark/base.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.errors import UsageError
from harness.providers.flaggems import Node
from harness.providers.pysource import (
    ClassRef,
    Mro,
    SourceTree,
    assigned,
    mentions,
    short_name,
)

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
    modules = SourceTree(Path(flaggems_dir))
    found = _constructor_call(modules, node)
    if isinstance(found, str):
        return _miss(None, (), (), found)
    mro, op_name, why, dtypes = found
    chain = tuple(short_name(name) for _, name in mro)
    tried = tuple(dict.fromkeys(([op_name] if op_name else []) + list(chain)))
    custom = _custom_set_shapes(modules, mro)
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
    found = _constructor_call(SourceTree(Path(flaggems_dir)), node)
    return None if isinstance(found, str) else (found[3] or None)


def _miss(op_name: str | None, chain: tuple[str, ...], tried: tuple[str, ...], problem: str
          ) -> ShapeResolution:
    return ShapeResolution(op_name, chain, tried, None, problem=problem)


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


def _is_benchmark(modules: SourceTree, ref: ClassRef) -> bool:
    try:
        return any(short_name(name) == ROOT_CLASS for _, name in modules.mro(ref))
    except ValueError:
        return False


def _custom_set_shapes(modules: SourceTree, mro: Mro) -> str | None:
    """The nearest class whose set_shapes neither calls super().set_shapes nor is the shape
    file lookup itself (it reads a "shapes" entry); None when the file decides."""
    for cls, method in modules.methods(mro, "set_shapes"):
        calls_super = any(isinstance(n, ast.Attribute) and n.attr == "set_shapes"
                          and isinstance(n.value, ast.Call) for n in ast.walk(method))
        if calls_super:
            continue  # the file is read, then filtered: a shard's subset stays a subset
        reads_file = any(isinstance(n, ast.Constant) and n.value == SHAPES_KEY
                         for n in ast.walk(method))
        return None if reads_file else cls
    return None


def _init_op_name(modules: SourceTree, mro: Mro) -> str | None:
    """The literal op_name a class's __init__ passes up (``super().__init__("x", ...)``,
    ``op_name="x"``) or assigns (``self.op_name = "x"``), nearest class first."""
    for _, method in modules.methods(mro, "__init__"):
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


def _dtype_names(modules: SourceTree, path: Path, expr: ast.expr,
                 function: ast.FunctionDef | None = None,
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
        left, right = (_dtype_names(modules, path, e, function, bound, depth + 1)
                       for e in (expr.left, expr.right))
        return None if left is None or right is None else left + right
    value: tuple[Path, ast.expr] | None = None
    if isinstance(expr, ast.Name) and bound and expr.id in bound:
        return _dtype_names(modules, path, bound[expr.id], None, None, depth + 1)
    if isinstance(expr, ast.Name) and function is not None and (
            local := assigned(function.body, expr.id, walk=True)) is not None:
        value = (path, local)
    elif isinstance(expr, ast.Name):
        value = modules.module_value(path, expr.id)
    elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        owner = modules.binding(path, expr.value.id)
        if owner and owner[0] == "module":
            value = modules.module_value(owner[1], expr.attr)
    return _dtype_names(modules, value[0], value[1], None, None, depth + 1) if value else None


def _default_dtypes(modules: SourceTree, mro: Mro) -> tuple[str, ...] | None:
    """DEFAULT_DTYPES of the nearest class that sets it; None when a class between has an
    __init__ that handles dtypes itself (its value is then decided in Python)."""
    for path, qualname in mro:
        if path is None:
            continue
        body = modules.classes(path)[qualname].body
        if short_name(qualname) != ROOT_CLASS and any(
                isinstance(s, ast.FunctionDef) and s.name == "__init__" and mentions(s, "dtypes")
                for s in body):
            return None
        found = assigned(body, "DEFAULT_DTYPES")
        if found is not None:
            return _dtype_names(modules, path, found)
    return None


def _constructor_call(modules: SourceTree, node: Node
                      ) -> tuple[Mro, str | None, str | None, tuple[str, ...] | None] | str:
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
        names = ", ".join(f"{short_name(ref[1])}(op_name={op!r})" for ref, op, _, _ in distinct)
        return f"{node.nodeid} constructs several benchmarks: {names}"
    ref, op_name, why, dtypes = distinct[0]
    return modules.mro(ref), op_name, why, dtypes


def _bind(helper: ast.FunctionDef, call: ast.Call) -> dict[str, ast.expr]:
    """The helper's parameters the call passes, positionally or by keyword."""
    params = [a.arg for a in helper.args.posonlyargs + helper.args.args]
    bound = dict(zip(params, call.args, strict=False))  # a *args call binds what it can
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    return bound


_Call = tuple[ClassRef, str | None, str | None, tuple[str, ...] | None]


def _benchmark_calls(modules: SourceTree, path: Path, function: ast.FunctionDef,
                     bound: dict[str, ast.expr]) -> list[_Call]:
    found: list[_Call] = []
    for call in ast.walk(function):
        if not isinstance(call, ast.Call):
            continue
        ref = modules.class_of(path, call.func, function.name)
        if isinstance(ref, str) or not _is_benchmark(modules, ref):
            continue
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        dtypes = (_dtype_names(modules, path, keywords["dtypes"], function, bound)
                  if "dtypes" in keywords else _default_dtypes(modules, modules.mro(ref)))
        expr = keywords.get("op_name", call.args[0] if call.args else None)
        op_name = (_literal(expr, function, bound) if expr is not None
                   else _init_op_name(modules, modules.mro(ref)))
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
        value = assigned(function.body, expr.id, walk=True)
        if isinstance(value, ast.Constant):
            return value.value
    return None
