"""The embedded CPU suite (examples/cpu_suite): FlagGems' output formats, shape lookup, timer,
and "gems" ops that compute what torch computes."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

SUITE = Path(__file__).resolve().parents[2] / "examples" / "cpu_suite"
OPS = ("add", "tanh", "mm", "softmax", "sum")

# Lines of FlagGems' console table on an H200 (ed2508bc, tanh, --level core --mode kernel).
FLAGGEMS_COLUMNS = (
    "Status       Torch Latency (ms)    Gems Latency (ms)         Gems Speedup"
    "               TFLOPS          Size Detail"
)
FLAGGEMS_ROW = (
    "SUCCESS               0.004928            0.043264               0.114"
    "               0.000          [torch.Size([64, 64])]"
)


def _is_suite_module(name: str) -> bool:
    return name == "benchmark" or name.startswith("benchmark.")


@pytest.fixture(scope="module")
def suite():
    """The suite's modules, imported as the package `benchmark` and removed afterwards, so that
    pytester suites named `benchmark` elsewhere in this session import their own."""
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if _is_suite_module(k)}
    sys.path.insert(0, str(SUITE))
    try:
        names = ["consts", "conftest", "base", "cpu_ops"]
        yield types.SimpleNamespace(**{n: importlib.import_module(f"benchmark.{n}") for n in names})
    finally:
        sys.path.remove(str(SUITE))
        for k in [k for k in sys.modules if _is_suite_module(k)]:
            del sys.modules[k]
        sys.modules.update(saved)


@pytest.fixture
def config(suite):
    cfg = suite.conftest.Config
    cfg.reset()
    cfg.bench_level = suite.consts.BenchLevel.CORE
    cfg.warm_up, cfg.repetition = 0, 0
    yield cfg
    cfg.reset()


# --- output formats ------------------------------------------------------------------------


def _result(suite, **metric):
    consts = suite.consts
    return consts.BenchmarkResult(
        op_name="tanh",
        dtype="torch.float32",
        mode="kernel",
        level="core",
        result=[consts.BenchmarkMetrics(**metric)],
    )


def test_console_table_has_flaggems_columns_and_row_layout(suite):
    text = str(
        _result(
            suite,
            shape_detail=[torch.Size([64, 64])],
            latency_base=0.004928,
            latency=0.043264,
            speedup=0.114,
            tflops=0.0001,
        )
    )
    lines = text.split("\n")
    assert lines[0] == ""
    assert lines[1] == (
        "Operator: tanh  Performance Test (dtype=torch.float32, mode=kernel,level=core)"
    )
    assert lines[2] == FLAGGEMS_COLUMNS
    assert lines[3] == "-" * (len(FLAGGEMS_COLUMNS) + 1)  # FlagGems counts the newline in
    assert lines[4] == FLAGGEMS_ROW
    assert text.endswith("\n")


def test_table_drops_zero_tflops_and_adds_gbps_columns(suite):
    text = str(
        _result(suite, shape_detail=[1], latency_base=1.0, latency=2.0, gbps_base=3.0, gbps=1.5)
    )
    columns, row = text.split("\n")[2], text.split("\n")[4]
    assert "TFLOPS" not in columns
    assert columns.endswith(f"{'Torch GBPS ':>20} {'Gems GBPS ':>20} {'Size Detail':>20}")
    assert row == f"{'SUCCESS':<10}{'1.000000':>20}{'2.000000':>20}{'N/A':>20}" + (
        f"{'3.000':>20}{'1.500':>20}{' ' * 10}[1]"
    )


def test_record_json_has_flaggems_fields_in_order(suite):
    data = json.loads(_result(suite, shape_detail=[torch.Size([64, 64]), 1]).to_json())
    assert list(data) == ["op_name", "dtype", "mode", "level", "result"]
    assert list(data["result"][0]) == [
        "legacy_shape", "shape_detail", "latency_base", "latency", "gbps_base", "gbps",
        "speedup", "accuracy", "tflops", "utilization", "compared_speedup", "error_msg",
    ]  # fmt: skip
    assert data["result"][0]["shape_detail"] == [[64, 64], 1]


def test_record_log_name_is_built_like_flaggems(suite):
    args = ["benchmark/test_tanh.py::test_tanh", "--level", "core", "--record", "log", "-s"]
    assert suite.conftest.record_log_name(args) == (
        "result_benchmark_test_tanh::test_tanh--level_core--record_log-s.log"
    )
    assert suite.conftest.record_log_name(["--level=core"]) == "result--level_core.log"


# --- shapes --------------------------------------------------------------------------------


def _bench(suite, cls, op_name="myop"):
    kwargs = {"input_fn": None} if cls in ("BlasBenchmark", "GenericBenchmark") else {}
    return getattr(suite.base, cls)(op_name=op_name, torch_op=torch.abs, **kwargs)


def test_shapes_come_from_the_op_name_then_the_nearest_class(suite, config, tmp_path):
    shape_file = tmp_path / "shapes.yaml"
    shape_file.write_text(
        "myop: {shapes: [[1, 2]], shape_desc: 'X, Y'}\n"
        "UnaryPointwiseBenchmark: {shapes: [[3]]}\n"
        "Benchmark: {shapes: [[4, 4]]}\n"
    )
    by_name = _bench(suite, "UnaryPointwiseBenchmark")
    by_name.set_shapes(str(shape_file))
    assert (by_name.shapes, by_name.shape_desc) == ([(1, 2)], "X, Y")
    by_class = _bench(suite, "UnaryPointwiseBenchmark", op_name="other")
    by_class.set_shapes(str(shape_file))
    assert (by_class.shapes, by_class.shape_desc) == ([(3,)], "M, N")
    by_base = _bench(suite, "BinaryPointwiseBenchmark", op_name="other")
    by_base.set_shapes(str(shape_file))
    assert by_base.shapes == [(4, 4)]


def test_more_shapes_only_at_comprehensive_level(suite, config, tmp_path):
    shape_file = tmp_path / "shapes.yaml"
    shape_file.write_text("Benchmark: {shapes: [[4, 4]]}\n")
    bench = _bench(suite, "UnaryPointwiseBenchmark")
    bench.set_shapes(str(shape_file))
    assert bench.shapes == [(4, 4)]
    config.bench_level = suite.consts.BenchLevel.COMPREHENSIVE
    bench.set_shapes(str(shape_file))
    assert bench.shapes[0] == (4, 4) and len(bench.shapes) > 1


def test_blas_shapes_live_under_blas_benchmark(suite, config):
    bench = _bench(suite, "BlasBenchmark", op_name="mm")
    bench.set_shapes(config.shape_file)
    assert bench.shape_desc == "B, M, N, K"
    assert all(len(shape) == 4 for shape in bench.shapes)


def test_class_defaults_are_not_mutated_by_comprehensive_metrics(suite, config):
    config.bench_level = suite.consts.BenchLevel.COMPREHENSIVE
    _bench(suite, "UnaryReductionBenchmark").set_metrics(None)
    assert suite.consts.DEFAULT_METRICS == ["latency_base", "latency", "speedup"]


# --- the timer -----------------------------------------------------------------------------


def test_get_latency_runs_at_least_a_few_timed_calls(suite, config):
    calls = []
    latency = _bench(suite, "UnaryPointwiseBenchmark").get_latency(calls.append, 1)
    assert latency >= 0.0
    assert len(calls) >= 1 + suite.base.MIN_REPETITIONS  # a warmup call, then the timed ones


def test_cudagraph_mode_fails_naming_the_missing_capture(suite, config):
    config.mode = suite.consts.BenchMode.CUDAGRAPH
    with pytest.raises(pytest.fail.Exception, match="CPU has no graph capture"):
        _bench(suite, "UnaryPointwiseBenchmark").get_latency(torch.abs, torch.ones(2))


# --- the "gems" ops ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1000,), (64, 64), (8, 33, 17)])
def test_gems_ops_compute_what_torch_computes(suite, dtype, shape):
    tol = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    x, y = torch.randn(shape, dtype=dtype) * 5, torch.randn(shape, dtype=dtype)
    dim = 1 if x.ndim > 1 else None
    torch.testing.assert_close(suite.cpu_ops.tanh_via_exp(x), torch.tanh(x), **tol)
    torch.testing.assert_close(suite.cpu_ops.add_into_empty(x, y), torch.add(x, y), **tol)
    softmax = suite.cpu_ops.softmax_via_exp(x, dim)
    expected_softmax = torch.nn.functional.softmax(x, 0 if dim is None else dim)
    torch.testing.assert_close(softmax, expected_softmax, **tol)
    expected = torch.sum(x, dim) if dim is not None else torch.sum(x)
    got = suite.cpu_ops.sum_via_gemv(x, dim)
    torch.testing.assert_close(got.float(), expected.float(), atol=0.5, rtol=2e-2)


def test_gems_mm_matches_for_both_layouts_of_b(suite):
    a = torch.randn(33, 17)
    for b in (torch.randn(17, 9), torch.randn(9, 17).t()):
        torch.testing.assert_close(suite.cpu_ops.mm_column_major(a, b), a.mm(b))


def test_tanh_saturates_without_nan(suite):
    x = torch.tensor([-1e4, -100.0, 0.0, 100.0, 1e4])
    assert suite.cpu_ops.tanh_via_exp(x).tolist() == [-1.0, -1.0, 0.0, 1.0, 1.0]


# --- the suite as a whole ------------------------------------------------------------------


def test_suite_imports_no_accelerator_module_at_module_level():
    # Only --mode cudagraph reaches for triton (inside the call), as FlagGems does.
    pattern = re.compile(r"^(import|from)\s+(flag_gems|triton|torch_musa|torch_npu)\b", re.M)
    offenders = [
        p.name for p in (SUITE / "benchmark").glob("*.py") if pattern.search(p.read_text())
    ]
    assert offenders == []


def test_each_test_is_named_after_its_op_and_marked_with_it():
    for op in OPS:
        source = (SUITE / "benchmark" / f"test_{op}.py").read_text()
        assert f"@pytest.mark.{op}\ndef test_{op}():" in source
        assert f'op_name="{op}"' in source


def _run_suite(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # a pytest process
def test_bare_run_prints_the_table_and_writes_only_the_record_log(suite, tmp_path):
    shape_file = tmp_path / "shapes.yaml"
    shape_file.write_text("UnaryPointwiseBenchmark: {shapes: [[64, 64], [8, 8, 8]]}\n")
    args = [
        f"{SUITE}/benchmark/test_tanh.py::test_tanh",
        "--level",
        "core",
        "--record",
        "log",
        "--warmup",
        "1",
        "--iter",
        "2",
        f"--shape_file={shape_file}",
        "-s",
    ]
    proc = _run_suite(tmp_path, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    title = "Operator: tanh  Performance Test (dtype=torch.bfloat16, mode=kernel,level=core)"
    assert title in proc.stdout
    assert FLAGGEMS_COLUMNS in proc.stdout
    log_name = suite.conftest.record_log_name(args)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([log_name, "shapes.yaml"])
    lines = (tmp_path / log_name).read_text().splitlines()
    assert lines[0] == "[INFO] Benchmark record logger enabled"
    records = [json.loads(line.removeprefix("[INFO] ")) for line in lines[1:]]
    assert [(r["op_name"], r["dtype"]) for r in records] == [
        ("tanh", "torch.float32"),
        ("tanh", "torch.bfloat16"),
    ]
    assert [m["shape_detail"] for m in records[0]["result"]] == [[[64, 64]], [[8, 8, 8]]]
