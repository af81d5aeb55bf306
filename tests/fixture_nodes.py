"""The real FlagGems tree's benchmark nodes as the fixtures list them (node<TAB>marks lines)."""

from __future__ import annotations

from pathlib import Path

from harness.errors import UsageError
from harness.providers.flaggems import Node


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
