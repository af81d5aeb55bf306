"""Unit tests of harness.providers.flaggems and resolve: scan, layout checks, node resolution."""

from __future__ import annotations

import logging
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from harness.errors import PreflightError, UsageError
from harness.providers.flaggems import (
    Node,
    check_flaggems_dir,
    check_layout,
    op_name_for,
    pytest_pythonpath,
    scan_benchmark,
    scan_tree,
)
from harness.providers.resolve import resolve_node
from tests.fixture_nodes import load_nodes_tsv

# Every test node of FlagGems benchmark/ at commit ed2508bc, with its marks (a copy of the shared
# fixture, so that CI needs no FlagGems checkout).
NODES_TSV = Path(__file__).resolve().parents[1] / "data" / "provider" / "benchmark_nodes.tsv"


@pytest.fixture(scope="module")
def real() -> list[Node]:
    return load_nodes_tsv(NODES_TSV)


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def nodes_in(*specs: tuple[str, str, tuple[str, ...]]) -> list[Node]:
    return [Node(f"benchmark/{file}", fn, marks) for file, fn, marks in specs]


# --------------------------------------------------------------------------- Node, TSV


def test_node_properties() -> None:
    node = Node("benchmark/test_sort.py", "test_perf_sort", ("sort",))
    assert node.nodeid == "benchmark/test_sort.py::test_perf_sort"
    assert node.op_key == "perf_sort"
    assert Node("benchmark/test_unique.py", "test_unique2").op_key == "unique2"


def test_load_nodes_tsv_reads_the_real_fixture(real: list[Node]) -> None:
    assert len(real) == 1122
    assert real[0] == Node("benchmark/test_Concat.py", "test_Concat", ("concat",))
    by_id = {n.nodeid: n for n in real}
    fused = "benchmark/test_FLA/test_fused_recurrent_gated_delta_rule_perf.py"
    assert by_id[f"{fused}::test_perf_fused_recurrent_gated_delta_rule"].marks == (
        "fused_recurrent_gated_delta_rule_fwd",
        "fused_recurrent_gated_delta_rule",
    )
    assert by_id["benchmark/test_blas_perf_parallel.py::test_blas_benchmark"].marks == ()


def test_load_nodes_tsv_comments_blanks_and_missing_tab(tmp_path: Path) -> None:
    tsv = tmp_path / "n.tsv"
    tsv.write_text("# header\n\nbenchmark/test_a.py::test_a\ta,b\nbenchmark/test_b.py::test_b\n")
    assert load_nodes_tsv(tsv) == nodes_in(
        ("test_a.py", "test_a", ("a", "b")), ("test_b.py", "test_b", ())
    )


def test_load_nodes_tsv_rejects_a_line_without_function(tmp_path: Path) -> None:
    tsv = tmp_path / "n.tsv"
    tsv.write_text("# header\nbenchmark/test_a.py\ta\n")
    with pytest.raises(UsageError, match=r"n\.tsv:2: 'benchmark/test_a.py'"):
        load_nodes_tsv(tsv)


# --------------------------------------------------------------------------- scan_tree


SCAN_FILES = {
    "benchmark/base.py": "def test_not_a_test_file(): pass\n",
    "benchmark/test_a.py": """
        import pytest

        _skip_join = pytest.mark.skipif(True, reason="join bug")


        def helper():
            pass


        @pytest.mark.a_op
        @pytest.mark.skipif(False, reason="x")
        def test_a():
            pass


        @pytest.mark.second
        @pytest.mark.parametrize("n", [1, 2])
        @pytest.mark.first
        @_skip_join
        @pytest.mark.xfail
        def test_stacked(n):
            pass


        def test_unmarked():
            pass


        class TestNotCollected:
            @pytest.mark.inner
            def test_method(self):
                pass
    """,
    "benchmark/test_b.py": """
        from pytest import mark

        pytestmark = [mark.module_op, mark.filterwarnings("ignore")]


        @mark.timeout(3)
        @mark.b_op
        def test_b():
            pass
    """,
    "benchmark/test_broken.py": "def test_broken(:\n    pass\n",
    "benchmark/test_FLA/test_x.py": """
        import pytest as pt


        @pt.mark.x_op()
        def test_perf_x():
            pass
    """,
    "benchmark/helper_test.py": "def test_ignored(): pass\n",
}


def test_scan_tree_reads_marks_and_skips_what_is_not_a_node(tmp_path: Path) -> None:
    root = write_tree(tmp_path, SCAN_FILES)
    assert scan_tree(root) == nodes_in(
        ("test_FLA/test_x.py", "test_perf_x", ("x_op",)),
        ("test_a.py", "test_a", ("a_op",)),
        ("test_a.py", "test_stacked", ("second", "first")),
        ("test_a.py", "test_unmarked", ()),
        ("test_b.py", "test_b", ("b_op", "module_op")),
    )


def test_scanning_one_file_finds_exactly_the_nodes_the_whole_scan_finds_in_it(
        tmp_path: Path) -> None:
    root = write_tree(tmp_path, SCAN_FILES)
    whole = scan_tree(root)
    for file in ("benchmark/test_a.py", "benchmark/test_b.py", "benchmark/test_FLA/test_x.py"):
        alone = list(scan_benchmark(root, only=file).nodes)
        assert alone == [n for n in whole if n.path == file]
    assert scan_benchmark(root, only="benchmark/test_broken.py").unparsable == (
        "benchmark/test_broken.py",)
    # what the whole scan would never read is not read alone either
    (root / "benchmark" / "linked").symlink_to(root / "benchmark" / "test_FLA")
    assert [n.path for n in scan_tree(root)] == [n.path for n in whole]  # rglob skips the link
    for outside in ("benchmark/base.py", "benchmark/helper_test.py", "benchmark/test_none.py",
                    "benchmark/../benchmark/test_a.py", "test_a.py", "benchmark/test_FLA",
                    "benchmark/linked/test_x.py"):
        assert scan_benchmark(root, only=outside).nodes == (), outside


def test_a_folder_or_binary_named_like_a_benchmark_file_never_breaks_the_scan(
        tmp_path: Path) -> None:
    # Regression: a folder named benchmark/test_dir.py raised IsADirectoryError out of every
    # preflight of the tree, a traceback where one line was due.
    root = write_tree(tmp_path, SCAN_FILES)
    (root / "benchmark" / "test_dir.py").mkdir()
    (root / "benchmark" / "test_bin.py").write_bytes(b"\x7fELF\x00\x01\xff\xfe" * 40)
    scan = scan_benchmark(root)
    assert "benchmark/test_dir.py" not in scan.unparsable
    assert "benchmark/test_bin.py" in scan.unparsable
    assert [n.path for n in scan.nodes] == [n.path for n in scan_tree(write_tree(
        tmp_path / "clean", SCAN_FILES))]


def test_scan_reports_and_logs_unparsable_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = write_tree(tmp_path, SCAN_FILES)
    assert scan_benchmark(root).unparsable == ("benchmark/test_broken.py",)
    with caplog.at_level(logging.WARNING, logger="harness.providers.flaggems"):
        nodes = scan_tree(root)
    assert "benchmark/test_broken.py" not in {n.path for n in nodes}
    assert "skipped benchmark/test_broken.py" in caplog.text


def test_scan_tree_redefinition_keeps_position_and_takes_last_marks(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "benchmark/test_r.py": """
                import pytest

                @pytest.mark.old
                def test_r(): pass

                def test_s(): pass

                @pytest.mark.new
                def test_r(): pass
            """
        },
    )
    assert scan_tree(root) == nodes_in(
        ("test_r.py", "test_r", ("new",)), ("test_r.py", "test_s", ())
    )


def test_scan_tree_of_an_empty_benchmark_dir(tmp_path: Path) -> None:
    (tmp_path / "benchmark").mkdir()
    assert scan_tree(tmp_path) == []


# --------------------------------------------------------------------------- preflight


def test_check_flaggems_dir_missing(tmp_path: Path) -> None:
    with pytest.raises(PreflightError, match="does not exist") as info:
        check_flaggems_dir(tmp_path / "nope")
    assert info.value.check == "flaggems_dir"


def test_check_flaggems_dir_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(PreflightError, match="is not a directory") as info:
        check_flaggems_dir(tmp_path / "f")
    assert info.value.check == "flaggems_dir"


def test_check_flaggems_dir_without_benchmark(tmp_path: Path) -> None:
    with pytest.raises(PreflightError, match="has no benchmark/") as info:
        check_flaggems_dir(tmp_path)
    assert info.value.check == "flaggems_dir"
    (tmp_path / "benchmark").mkdir()
    check_flaggems_dir(tmp_path)


def test_check_layout_accepts_base_py(tmp_path: Path) -> None:
    check_layout(write_tree(tmp_path, {"benchmark/base.py": ""}))


def test_check_layout_names_performance_utils_of_an_older_tree(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"benchmark/performance_utils.py": ""})
    with pytest.raises(PreflightError) as info:
        check_layout(root)
    assert info.value.check == "benchmark_file"
    assert "performance_utils.py" in info.value.detail
    assert "FlagGems >= 5.3" in info.value.detail
    assert "base.py" in info.value.detail


def test_check_layout_without_base_or_performance_utils(tmp_path: Path) -> None:
    (tmp_path / "benchmark").mkdir()
    with pytest.raises(PreflightError, match="older FlagGems layout") as info:
        check_layout(tmp_path)
    assert "performance_utils" not in info.value.detail


# --------------------------------------------------------------------------- resolution, real tree


@pytest.mark.parametrize(
    ("op", "nodeid"),
    [
        ("tanh", "benchmark/test_tanh.py::test_tanh"),
        # test_unique.py holds one function, marked unique2: the single-function rule.
        ("unique", "benchmark/test_unique.py::test_unique2"),
        # test_mm_self_transpose_benchmark is marked mm too: the function-name rule wins.
        ("mm", "benchmark/test_mm.py::test_mm"),
        ("sort", "benchmark/test_sort.py::test_perf_sort"),
        ("unique2", "benchmark/test_unique.py::test_unique2"),
        # no test_tanh_backward.py: every file is searched.
        ("tanh_backward", "benchmark/test_tanh.py::test_tanh_backward"),
        ("fused_recurrent_gated_delta_rule_fwd",
         "benchmark/test_FLA/test_fused_recurrent_gated_delta_rule_perf.py"
         "::test_perf_fused_recurrent_gated_delta_rule"),
    ],
)  # fmt: skip
def test_resolve_op_on_the_real_tree(real: list[Node], op: str, nodeid: str) -> None:
    assert resolve_node(real, op=op).nodeid == nodeid


def test_resolve_unknown_op_lists_closest(real: list[Node]) -> None:
    with pytest.raises(PreflightError) as info:
        resolve_node(real, op="doesnotexist")
    assert info.value.check == "test_node"
    detail = info.value.detail
    assert detail.startswith("no benchmark node for OP='doesnotexist'; closest: ")
    assert len(detail.split("closest: ")[1].split(", ")) == 5
    assert "benchmark/test_dist.py::test_dist" in detail


def test_resolve_misspelt_op_suggests_it(real: list[Node]) -> None:
    with pytest.raises(PreflightError, match=r"closest: [^;]*benchmark/test_tanh.py::test_tanh"):
        resolve_node(real, op="tahn")


@pytest.mark.parametrize(
    ("op", "listed"),
    [
        # mark div_tensor: first mark of test_div.py::test_div and test_true_divide.py::
        # test_true_divide, no test_div_tensor function or file.
        ("div_tensor", ["benchmark/test_div.py::test_div",
                        "benchmark/test_true_divide.py::test_true_divide"]),
        ("fused_marlin_moe", ["benchmark/test_fused_marlin_moe_w4a16_int4.py::"
                              "test_fused_marlin_moe_w4a16_int4"]),
    ],
)  # fmt: skip
def test_resolve_ambiguous_op_on_the_real_tree(
    real: list[Node], op: str, listed: list[str]
) -> None:
    with pytest.raises(PreflightError) as info:
        resolve_node(real, op=op)
    assert info.value.check == "test_node"
    assert info.value.detail.startswith(f"OP={op!r} is ambiguous: ")
    assert all(nodeid in info.value.detail for nodeid in listed)


def test_op_file_disambiguates(real: list[Node]) -> None:
    node = resolve_node(real, op="div_tensor", op_file="test_true_divide.py")
    assert node.nodeid == "benchmark/test_true_divide.py::test_true_divide"


@pytest.mark.parametrize(
    "op_file", ["test_mm.py", "benchmark/test_mm.py", "./benchmark/test_mm.py"]
)
def test_op_file_spellings(real: list[Node], op_file: str) -> None:
    assert resolve_node(real, op="mm", op_file=op_file).nodeid == "benchmark/test_mm.py::test_mm"


def test_op_file_missing(real: list[Node]) -> None:
    with pytest.raises(PreflightError, match="benchmark/test_nope.py does not exist") as info:
        resolve_node(real, op="mm", op_file="test_nope.py")
    assert info.value.check == "benchmark_file"


def test_parallel_file_only_through_op_file(real: list[Node]) -> None:
    with pytest.raises(PreflightError, match="test_blas_perf_parallel.py matches but is searched"):
        resolve_node(real, op="blas_benchmark")
    node = resolve_node(real, op="blas_benchmark", op_file="test_blas_perf_parallel.py")
    assert node.nodeid == "benchmark/test_blas_perf_parallel.py::test_blas_benchmark"


def test_every_real_node_resolves_by_test_node(real: list[Node]) -> None:
    assert [resolve_node(real, test_node=n.nodeid) for n in real] == real


def test_op_from_function_name_resolves_for_the_vast_majority(real: list[Node]) -> None:
    names = Counter(n.function for n in real)
    resolved, refused = 0, []
    for node in real:
        if names[node.function] > 1:
            continue
        op = node.op_key
        try:
            found = resolve_node(real, op=op)
        except PreflightError as exc:
            assert "ambiguous" in exc.detail or "parallel" in node.path, exc.detail
            refused.append(node.nodeid)
            continue
        assert found.path == node.path, (op, found.nodeid)
        resolved += 1
    # 1122 nodes; 3 function names occur twice (test_perf_w8a8_block_fp8_matmul,
    # test_perf_router_gemm, test_nextafter_) and are left out: 1116 candidates. None of them is
    # ambiguous. The 8 refused are the unmarked functions of test_blas_perf_parallel.py, which
    # only OP_FILE reaches; each of the other 1108 resolves to a node of its own file.
    assert resolved == 1108
    assert len(refused) == 8
    assert all(r.startswith("benchmark/test_blas_perf_parallel.py::") for r in refused)


# --------------------------------------------------------------------------- resolution, TEST_NODE


def test_test_node_without_benchmark_prefix(real: list[Node]) -> None:
    assert (
        resolve_node(real, test_node="test_mm.py::test_mm").nodeid
        == "benchmark/test_mm.py::test_mm"
    )


def test_test_node_beats_op(real: list[Node]) -> None:
    node = resolve_node(real, op="tanh", test_node="benchmark/test_mm.py::test_mm")
    assert node.nodeid == "benchmark/test_mm.py::test_mm"


def test_test_node_file_missing(real: list[Node]) -> None:
    with pytest.raises(PreflightError) as info:
        resolve_node(real, test_node="benchmark/test_nope.py::test_nope")
    assert info.value.check == "benchmark_file"


def test_test_node_function_missing_lists_candidates(real: list[Node]) -> None:
    with pytest.raises(PreflightError) as info:
        resolve_node(real, test_node="benchmark/test_mm.py::test_mmm")
    assert info.value.check == "test_node"
    assert "closest: benchmark/test_mm.py::test_mm" in info.value.detail


@pytest.mark.parametrize("bad", ["benchmark/test_mm.py", "::test_mm", "benchmark/test_mm.py::"])
def test_test_node_malformed_is_a_usage_error(real: list[Node], bad: str) -> None:
    with pytest.raises(UsageError, match="expected 'path::function'"):
        resolve_node(real, test_node=bad)


def test_test_node_file_on_disk_without_nodes(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"benchmark/test_empty.py": "x = 1\n"})
    nodes = nodes_in(("test_a.py", "test_a", ()))
    with pytest.raises(PreflightError) as info:
        resolve_node(nodes, test_node="test_empty.py::test_empty", flaggems_dir=root)
    assert info.value.check == "test_node"
    with pytest.raises(PreflightError) as info:
        resolve_node(nodes, test_node="test_empty.py::test_empty")
    assert info.value.check == "benchmark_file"


def test_nothing_to_resolve() -> None:
    with pytest.raises(UsageError, match="give OP"):
        resolve_node([])


# --------------------------------------------------------------------------- resolution, levels


def test_perf_function_beats_marks() -> None:
    nodes = nodes_in(("test_y.py", "test_other", ("x",)), ("test_z.py", "test_perf_x", ("z",)))
    assert resolve_node(nodes, op="x").function == "test_perf_x"


def test_first_mark_beats_any_mark() -> None:
    nodes = nodes_in(("test_y.py", "test_y", ("y", "x")), ("test_z.py", "test_z", ("x",)))
    assert resolve_node(nodes, op="x").function == "test_z"


def test_any_mark_when_no_first_mark() -> None:
    nodes = nodes_in(("test_y.py", "test_y", ("y", "x")), ("test_z.py", "test_z", ("z",)))
    assert resolve_node(nodes, op="x").function == "test_y"


def test_ambiguity_at_the_deciding_level_does_not_fall_through() -> None:
    nodes = nodes_in(("test_y.py", "test_y", ("x",)), ("test_z.py", "test_z", ("x",)))
    with pytest.raises(PreflightError, match="ambiguous: benchmark/test_y.py::test_y, "):
        resolve_node(nodes, op="x")


def test_own_file_restricts_the_search() -> None:
    nodes = nodes_in(
        ("test_x.py", "test_a", ()), ("test_x.py", "test_b", ()), ("test_o.py", "test_x", ())
    )
    with pytest.raises(PreflightError, match="no benchmark node for OP='x'"):
        resolve_node(nodes, op="x")


def test_single_function_rule_needs_the_own_file() -> None:
    nodes = nodes_in(("test_x.py", "test_other", ()))
    assert resolve_node(nodes, op="x").function == "test_other"
    with pytest.raises(PreflightError, match="no benchmark node"):
        resolve_node(nodes_in(("test_y.py", "test_other", ())), op="x")


# --------------------------------------------------------------------------- op_name_for


def test_op_name_for() -> None:
    marked = Node("benchmark/test_unique.py", "test_unique2", ("unique2", "more"))
    bare = Node("benchmark/test_blas_perf_parallel.py", "test_blas_benchmark")
    assert op_name_for(marked, "unique") == "unique"
    assert op_name_for(marked) == "unique2"
    assert op_name_for(bare) == "blas_benchmark"


def test_test_node_may_name_a_whole_directory_or_file(tmp_path):
    bench = tmp_path / "benchmark"
    bench.mkdir()
    (bench / "test_mm.py").write_text(
        "import pytest\n\n@pytest.mark.mm\ndef test_mm():\n    pass\n")
    nodes = scan_tree(tmp_path)
    whole = resolve_node(nodes, test_node="benchmark", flaggems_dir=tmp_path)
    assert (whole.nodeid, op_name_for(whole)) == ("benchmark", "suite")
    one_file = resolve_node(nodes, test_node="test_mm.py", flaggems_dir=tmp_path)
    assert (one_file.nodeid, op_name_for(one_file)) == ("benchmark/test_mm.py", "mm")
    with pytest.raises(UsageError):  # without the checkout a bare path cannot be checked
        resolve_node(nodes, test_node="benchmark")


def test_pytest_pythonpath_reads_the_checkout_ini(tmp_path):
    assert pytest_pythonpath(tmp_path) == ()
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = tests\npythonpath = src lib\n")
    assert pytest_pythonpath(tmp_path) == ((tmp_path / "src").resolve(),
                                           (tmp_path / "lib").resolve())


def test_an_own_file_that_does_not_parse_is_named_as_the_reason(tmp_path: Path) -> None:
    # Regression: OP=broken with benchmark/test_broken.py holding a syntax error said only "no
    # benchmark node for OP='broken'; closest: <other operators>", hiding the real cause.
    root = write_tree(tmp_path, {"benchmark/test_broken.py": "def broken(:\n    pass\n"})
    nodes = nodes_in(("test_a.py", "test_a", ()))
    with pytest.raises(PreflightError) as info:
        resolve_node(nodes, op="broken", flaggems_dir=root)
    assert info.value.check == "test_node"
    assert "benchmark/test_broken.py does not parse as Python (line 1" in str(info.value)
