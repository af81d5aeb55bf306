"""The axis kinds' registry, and that no module outside harness/axes/ tells one kind from
another by its name: each asks the kind's record (harness/axes/)."""

from __future__ import annotations

import ast
import re

import pytest

from harness import axes, backends
from harness.axes import Axis, AxisKind
from harness.errors import UsageError
from harness.settings import abspec
from harness.settings.spec import PACKAGE_DIR

KIND_NAMES = set(axes.registry().by_name)  # the names AXIS selects a kind by
# Names that held a kind's name before the kinds had records (AXIS_NONE, PYTHON_AXIS ...).
KIND_CONSTANT = re.compile(r"^(AXIS_[A-Z]+|[A-Z]+_AXIS)$")
AXIS_WORDS = ("axis", "kind")


def _strings(node: ast.AST) -> list[str]:
    """The string constants `node` is or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def kind_tests(tree: ast.Module) -> list[tuple[int, str]]:
    """Where a module tells a kind by its name: a comparison of something named axis or kind
    with a kind's name, a table keyed by two kinds' names or listing them, or a name that
    holds one (AXIS_IMAGE, FLAGGEMS_AXIS)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = [s for o in operands for s in _strings(o) if s in KIND_NAMES]
            about = any(w in ast.unparse(o).lower() for o in operands for w in AXIS_WORDS
                        if not _strings(o))
            if named and about:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
            keys = node.keys if isinstance(node, ast.Dict) else node.elts
            named = {s for k in keys if k is not None for s in _strings(k) if s in KIND_NAMES}
            if len(named) >= 2:
                found.append((node.lineno, ast.unparse(node)[:80]))
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if KIND_CONSTANT.match(name):
                found.append((node.lineno, name))
    return found


def test_no_module_outside_the_axis_kinds_tells_a_kind_by_its_name():
    found = [f"{path.relative_to(PACKAGE_DIR)}:{line} {text}"
             for path in sorted(PACKAGE_DIR.rglob("*.py"))
             if path.relative_to(PACKAGE_DIR).parts[0] not in ("axes", "cpu_suite")
             for line, text in kind_tests(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []


@pytest.mark.parametrize("source", [
    'if axis.name == "flaggems": pass',
    'x = "each" if campaign.axis.name in ("python", "image") else "replay"',
    'least = 1 if axis == "none" else 2',
    'WHAT = {"python": "two stacks", "image": "two images"}',
    'if axis.name == ab.AXIS_IMAGE: pass',
    'if kind != "image": pass',
])
def test_the_check_finds_each_way_a_kind_was_told_by_its_name(source):
    assert kind_tests(ast.parse(source)) != []


@pytest.mark.parametrize("source", [
    'if source == "flaggems": pass',  # a tuner's source, not an axis
    'if answer in ("none", ""): pass',
    'if axis.kind.side_images: pass',
])
def test_the_check_leaves_what_is_no_kind_alone(source):
    assert kind_tests(ast.parse(source)) == []


def test_get_names_every_kind_it_knows_for_an_unknown_one():
    assert axes.get("python").side_pythons and axes.get("flaggems").side_commits
    with pytest.raises(UsageError) as err:
        axes.get("bisect")
    assert "'bisect'" in str(err.value)
    assert all(name in str(err.value) for name in ("none", "python", "flaggems", "image",
                                                   "switch", "env"))


def test_a_kind_registered_twice_is_refused():
    reg = axes.Registry()
    reg.register(axes.get("none"))
    with pytest.raises(ValueError, match="'none' is registered twice"):
        reg.register(axes.get("none"))


def test_a_stored_axis_is_of_its_named_kind_or_else_a_switch():
    assert axes.kind_of("none").aa and not axes.kind_of("OMP_NUM_THREADS").aa
    assert axes.kind_of("OMP_NUM_THREADS") is axes.get("switch")
    assert Axis("image", None, "a", "b").image("B") == "b"
    assert Axis("OMP_NUM_THREADS", "OMP_NUM_THREADS").image("B") is None


def test_env_resolves_to_a_switch_of_its_variable():
    axis = axes.resolve("env:MY_KNOB", backends.get("cpu"))
    assert axis == Axis("MY_KNOB", "MY_KNOB") and axis.kind is axes.get("switch")
    assert axis.side_env("B") == {"MY_KNOB": "1"}


def test_a_new_kind_needs_only_its_record_and_its_line(monkeypatch):
    """A range-of-commits kind, as bisection would add it: its record (here flaggems' with
    another name) registered beside the others is resolved, validated, planned and judged
    through the registry alone."""
    flaggems = axes.get("flaggems")
    bisect = AxisKind(**{**{f: getattr(flaggems, f) for f in AxisKind.__dataclass_fields__},
                         "name": "bisect", "match": axes.named("bisect")})
    reg = axes.Registry()
    for kind in (*axes.registry().all(), bisect):
        reg.register(kind)
    monkeypatch.setattr(axes, "_REGISTRY", reg)
    cpu = backends.get("cpu")
    axis = axes.resolve("bisect", cpu)
    assert axis == Axis("bisect", None) and axis.kind is bisect and axis.stacks
    assert axis.side_env("B") == {} and axis.python("B") is None
    with pytest.raises(UsageError, match="did you mean bisect.*expected one of: none, python, "
                                         "flaggems, image, bisect, FLAGGEMS_MXFP4"):
        axes.resolve("bisectt", cpu)
    assert abspec.resolve_ab({"axis": "bisect", "a_ref": "v1", "b_ref": "v2"}, {}).a == "v1"
