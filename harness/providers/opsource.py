"""An operator's Python source in a FlagGems package: the modules that define it and import."""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

INIT = "__init__.py"
# A line that may bind a name at a module's top level; the parse decides.
_TOP_NAME = re.compile(rb"^(?:(?:async\s+)?def|class)\s+(\w+)|^(\w+)\s*[:=]", re.MULTILINE)


class PackageSource:
    """The parsed modules of one flag_gems package directory (src/flag_gems), cached."""

    def __init__(self, package: Path, parsed: dict[bytes, ast.Module | None] | None = None
                 ) -> None:
        """`parsed`: modules already parsed, by the sha256 of their text; two trees of one
        repository share most of theirs."""
        self.package = package.resolve()
        self._parsed = {} if parsed is None else parsed
        self._trees: dict[Path, ast.Module | None] = {}
        self._digests: dict[Path, bytes] = {}
        self._index: dict[str, list[Path]] | None = None  # a name -> modules it may be defined in
        self._imports: dict[Path, list[ast.Import | ast.ImportFrom]] = {}

    def digest(self, path: Path) -> bytes:
        """sha256 of a module's text (empty for one that cannot be read)."""
        if path not in self._digests:
            try:
                self._digests[path] = hashlib.sha256(path.read_bytes()).digest()
            except OSError:
                self._digests[path] = b""
        return self._digests[path]

    def tree(self, path: Path) -> ast.Module | None:
        if path not in self._trees:
            key = self.digest(path)
            if key not in self._parsed:
                try:
                    self._parsed[key] = ast.parse(path.read_bytes(), str(path))
                except (OSError, SyntaxError, ValueError):
                    self._parsed[key] = None
            self._trees[path] = self._parsed[key]
        return self._trees[path]

    def defining(self, name: str) -> list[Path]:
        """The modules whose top level defines `name` (a function, class or assignment)."""
        if self._index is None:  # one pass over the package's text, not a parse of each module
            self._index = {}
            for path in sorted(self.package.rglob("*.py")):
                for match in _TOP_NAME.finditer(path.read_bytes()):
                    found = (match.group(1) or match.group(2)).decode()
                    self._index.setdefault(found, []).append(path)
        return [path for path in dict.fromkeys(self._index.get(name, ()))
                if (tree := self.tree(path)) is not None and name in _top_level_names(tree)]

    def _module(self, parts: list[str]) -> Path | None:
        """The file of a module inside the package, from its dotted parts below it."""
        base = self.package.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / INIT):
            if candidate.is_file():
                return candidate
        return None

    def _parts(self, path: Path, node: ast.ImportFrom) -> list[str] | None:
        """The dotted parts below the package that a `from X import` names; None outside it."""
        if node.level == 0:
            dotted = (node.module or "").split(".")
            return dotted[1:] if dotted[0] == self.package.name else None
        base = path.parent.relative_to(self.package).parts
        if node.level - 1 > len(base):
            return None
        parts = list(base[:len(base) - (node.level - 1)])
        return parts + [p for p in (node.module or "").split(".") if p]

    def imports(self, path: Path, names: frozenset[str] | None = None
                ) -> Iterator[tuple[Path, frozenset[str] | None]]:
        """The package's modules that `path` imports: (module, None) for a module taken
        whole, (a package's `__init__.py`, the names taken from it) for `from pkg import a`;
        with `names`, only the imports of `path` that bind one of them."""
        if path not in self._imports:  # walked once: a package's utilities serve every op
            tree = self.tree(path)
            self._imports[path] = [node for node in ast.walk(tree) if isinstance(
                node, (ast.Import, ast.ImportFrom))] if tree is not None else []
        for node in self._imports[path]:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    dotted = alias.name.split(".")
                    if dotted[0] == self.package.name and (
                            names is None or (alias.asname or dotted[0]) in names):
                        if (found := self._module(dotted[1:])) is not None:
                            yield found, None
            elif isinstance(node, ast.ImportFrom):
                star = any(a.name == "*" for a in node.names)
                bound = frozenset(a.name for a in node.names if a.name != "*" and (
                    names is None or (a.asname or a.name) in names))
                parts = self._parts(path, node)
                if parts is None or not (bound or star):
                    continue
                for name in bound:  # `from pkg import sub`: the submodule
                    if (sub := self._module([*parts, name])) is not None:
                        yield sub, None
                if (found := self._module(parts)) is not None and found.name != INIT:
                    yield found, None
                elif found is not None:  # `*` binds what was asked for, if anything
                    yield found, names if star else bound

    def closure(self, roots: list[Path]) -> set[Path]:
        """`roots`, every module of the package they import, transitively, and the
        `__init__.py` of each package on the way. The package's own `__init__.py` imports
        every operator, so it counts as its text and, where a module takes names from it,
        the imports that bind those names."""
        top = self.package / INIT
        files: set[Path] = set()
        seen: set[tuple[Path, frozenset[str] | None]] = set()
        todo: list[tuple[Path, frozenset[str] | None]] = [(r, None) for r in roots]
        while todo:
            path, names = todo.pop()
            if path == top and names is None and path not in roots:
                names = frozenset()  # `import flag_gems`: its text, not every operator
            if (path, names) in seen:
                continue
            seen.add((path, names))
            files.add(path)
            if names != frozenset():
                todo += self.imports(path, names)
        for path in list(files):
            for parent in path.parents:
                if (parent / INIT).is_file():
                    files.add(parent / INIT)
                if parent == self.package:
                    break
        return files


def _top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def op_source_hash(source: PackageSource, op: str) -> str | None:
    """sha256 of operator `op`'s Python source in a flag_gems package.

    Its source is every module whose top level defines the name `op` (FlagGems' `def cos(A)`
    in ops/cos.py; a vendor's override too), what those import from the package,
    transitively, and the `__init__.py` of the packages on the way, each hashed with its path.
    Two trees whose hashes are equal run the same Python for the operator. None where no
    module defines `op`: its source is not known, so nothing may be read from it.
    """
    roots = source.defining(op)
    if not roots:
        return None
    digest = hashlib.sha256()
    for path in sorted(source.closure(roots)):
        digest.update(path.relative_to(source.package).as_posix().encode() + b"\0")
        digest.update(source.digest(path))
    return digest.hexdigest()
