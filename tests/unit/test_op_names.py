"""Operator names of OPS=all on the real FlagGems tree: unique, stable, accepted back by OP."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.campaign import ops
from harness.providers import resolve
from harness.providers.flaggems import Node
from harness.settings import spec
from tests.fixture_nodes import load_nodes_tsv

# Every test node of FlagGems benchmark/ at commit ed2508bc, with its marks.
NODES_TSV = Path(__file__).resolve().parents[1] / "data" / "provider" / "benchmark_nodes.tsv"


@pytest.fixture(scope="module")
def real() -> list[Node]:
    return load_nodes_tsv(NODES_TSV)


@pytest.fixture(scope="module")
def named(real: list[Node]) -> dict[str, Node]:
    return resolve.op_names(real)


def test_every_node_outside_the_parallel_files_has_one_name(real, named):
    wanted = [n for n in real if "parallel" not in Path(n.path).name]
    assert list(named.values()) == wanted  # each once, in the tree's order


def test_each_name_resolves_back_to_its_own_node_as_op_does(real, named):
    # Regression: OPS=all named FlagGems' ten einsum benchmarks einsum, einsum-2 ... einsum-10
    # (order of enumeration), and `make batch OPS_FILE=<those names>` failed einsum-7 and
    # einsum-10 with PREFLIGHT_FAILED.
    for name, node in named.items():
        assert resolve.resolve_node(real, op=name) == node, name
        assert resolve.resolve_node(real, test_node=node.nodeid) == node


def test_names_come_from_the_mark_or_the_test_function(named):
    einsum = {name for name, node in named.items() if node.path == "benchmark/test_einsum.py"}
    assert einsum == {"einsum_matmul", "einsum_bmm", "einsum_dot", "einsum_outer",
                      "einsum_trace", "einsum_diagonal", "einsum_transpose", "einsum_sum_all",
                      "einsum_sum_dim", "einsum_ellipsis"}
    assert named["concat"].nodeid == "benchmark/test_Concat.py::test_Concat"  # its one mark
    assert named["mm"].nodeid == "benchmark/test_mm.py::test_mm"
    assert not any("-" in name for name in named)


def test_one_function_name_in_two_files_gets_its_file_in_the_name(real, named):
    ids = {name: node.nodeid for name, node in named.items() if node.function == "test_nextafter_"}
    assert ids == {"nextafter_": "benchmark/test_nextafter_.py::test_nextafter_",
                   "test_nextafter.nextafter_": "benchmark/test_nextafter.py::test_nextafter_"}


@pytest.mark.parametrize("extra", [
    Node("benchmark/test_einsum.py", "test_einsum_new", ("einsum",)),  # one more of a group
    Node("benchmark/test_0first.py", "test_0first", ("zeros",)),  # before every other file
    Node("benchmark/test_mm_more.py", "test_mm_more", ("mm",)),  # a second node marked mm
    Node("benchmark/test_nextafter2.py", "test_nextafter_", ("nextafter_",))])
def test_adding_a_node_renames_no_other(real, named, extra):
    again = resolve.op_names([*real, extra])
    assert {name: again.get(name) for name in named} == named
    assert len(again) == len(named) + 1


def test_names_do_not_depend_on_the_order_of_enumeration(real, named):
    assert {n: v for n, v in resolve.op_names(list(reversed(real))).items()} == named


def test_every_name_is_taken_by_op_ops_and_ops_file(named):
    names = list(named)
    assert ops.parse_ops(",".join(names)) == names
    assert ops.parse_ops_file("\n".join(names)) == names
    for name in names:
        assert spec.resolve({"backend": "cpu", "op": name}, {}, which=lambda _: None).op == name
