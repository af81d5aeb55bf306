"""A checkout's Python modules read statically: what a name binds, a class's MRO, a value."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

# A class inside the checkout: (module file, qualified name), the name being "Cls" for a module's
# class and "test_fn.<locals>.Cls" for one defined in a function. Outside classes (ABC,
# torch.nn.Module) have no file: (None, name).
ClassRef = tuple[Path, str]
Mro = list[tuple[Path | None, str]]
LOCALS = ".<locals>."


def short_name(qualname: str) -> str:
    """A qualified class name's last part: the name type.__mro__ shows."""
    return qualname.rpartition(".")[2]


class SourceTree:
    """Parsed modules of a checkout and the names their top level binds, cached."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._trees: dict[Path, ast.Module | None] = {}
        self._classes: dict[Path, dict[str, ast.ClassDef]] = {}
        self._mros: dict[ClassRef, Mro] = {}

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
                    found.update({f"{stmt.name}{LOCALS}{s.name}": s for s in ast.walk(stmt)
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
        for qualname in (f"{scope}{LOCALS}{name}" if scope else None, name):
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

    def class_of(self, path: Path, expr: ast.expr, scope: str = "") -> ClassRef | str:
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

    def mro(self, ref: ClassRef, seen: tuple[ClassRef, ...] = ()) -> Mro:
        """C3 linearisation of `ref`, as type.__mro__ orders it, without `object`."""
        if ref in self._mros:
            return self._mros[ref]
        if ref in seen:
            raise ValueError(f"class {short_name(ref[1])} inherits from itself")
        scope = ref[1].partition(LOCALS)[0] if LOCALS in ref[1] else ""
        found = [self.class_of(ref[0], b, scope) for b in self.classes(ref[0])[ref[1]].bases]
        bases: Mro = [(None, b) if isinstance(b, str) else b for b in found if b != "object"]
        lines: list[Mro] = [self.mro((where, name), (*seen, ref)) if where is not None
                             else [(where, name)] for where, name in bases]
        self._mros[ref] = [ref, *_c3_merge([*lines, bases], short_name(ref[1]))]
        return self._mros[ref]

    def methods(self, mro: Mro, name: str) -> Iterable[tuple[str, ast.FunctionDef]]:
        """(class name, method) for each class of `mro` in the checkout that defines `name`."""
        for path, qualname in mro:
            if path is None:
                continue
            for stmt in self.classes(path)[qualname].body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                    yield short_name(qualname), stmt

    def module_value(self, path: Path, name: str) -> tuple[Path, ast.expr] | None:
        """(module, expression) of the module-level assignment that binds `name` in `path`,
        following ``from x import name``."""
        tree = self.tree(path)
        found = assigned(tree.body if tree else [], name)
        if found is not None:
            return path, found
        for stmt in reversed(tree.body if tree else []):
            if isinstance(stmt, ast.ImportFrom) and any(
                    (a.asname or a.name) == name for a in stmt.names):
                alias = next(a for a in stmt.names if (a.asname or a.name) == name)
                owner = self._as_module(self._module_file(path, stmt.module, stmt.level))
                return self.module_value(owner, alias.name) if owner not in (None, path) else None
        return None


def mentions(node: ast.AST, name: str) -> bool:
    """Whether `name` appears in `node` as a variable, a keyword, a parameter or an attribute."""
    return any(name in (getattr(n, "id", None), getattr(n, "arg", None), getattr(n, "attr", None))
               for n in ast.walk(node))


def assigned(body: list[ast.stmt], name: str, walk: bool = False) -> ast.expr | None:
    """The value of the one assignment to `name` in `body` (all of it when `walk`); None when
    there is none or more than one."""
    nodes = [n for stmt in body for n in (ast.walk(stmt) if walk else (stmt,))]
    values = [n.value for n in nodes if isinstance(n, ast.Assign)
              and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
    return values[0] if len(values) == 1 else None


def _c3_merge(lines: list[Mro], name: str) -> Mro:
    lines = [list(line) for line in lines if line]
    result: Mro = []
    while lines:
        head = next((line[0] for line in lines
                     if not any(line[0] in other[1:] for other in lines)), None)
        if head is None:
            raise ValueError(f"class {name}: no consistent method resolution order")
        result.append(head)
        lines = [rest for line in lines if (rest := [c for c in line if c != head])]
    return result
