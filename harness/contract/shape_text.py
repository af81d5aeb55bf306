"""Canonical shape text: one spelling of a FlagGems shape, from its record log or its console."""

from __future__ import annotations

import ast
import json
from typing import Any

NOT_AVAILABLE = "N/A"  # FlagGems' cell for a missing value, and our shape for a missing detail


def canonical_shape(detail: Any) -> str:
    """Canonical text of a FlagGems shape_detail: JSON, lists for sizes, ", " separators.

    `[[64, 64]]` -> "[[64, 64]]"; tuples (torch.Size) are lists, dtypes their text
    ("torch.float16"), as in FlagGems' record log; None -> "N/A".
    """
    if detail is None:
        return NOT_AVAILABLE
    return json.dumps(detail, separators=(", ", ": "), default=str)


_NAMED_FLOATS = {"inf": float("inf"), "nan": float("nan")}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _literal(node: ast.expr) -> Any:
    """Evaluate the repr FlagGems prints: literals, torch.Size([...]) and torch.<dtype> names."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        pairs = [(k, v) for k, v in zip(node.keys, node.values, strict=True) if k is not None]
        if len(pairs) == len(node.keys):  # a None key is a **mapping, never printed by FlagGems
            return {_literal(k): _literal(v) for k, v in pairs}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if (
        isinstance(node, ast.Call)
        and _dotted(node.func) == "torch.Size"
        and not node.keywords
        and len(node.args) <= 1
    ):
        return _literal(node.args[0]) if node.args else []
    name = _dotted(node)
    if name in _NAMED_FLOATS:
        return _NAMED_FLOATS[name]
    if name is not None and name.startswith("torch."):
        return name  # a dtype: json.dumps(..., default=str) writes it this way in the record log
    raise ValueError(f"not a shape literal: {ast.dump(node)}")


def canonical_shape_text(text: str) -> str:
    """Canonical text of a console "Size Detail" cell; the stripped raw text when unparseable."""
    raw = text.strip()
    if raw == NOT_AVAILABLE:
        return NOT_AVAILABLE
    try:
        return canonical_shape(_literal(ast.parse(raw, mode="eval").body))
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return raw
