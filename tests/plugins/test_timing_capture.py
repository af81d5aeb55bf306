"""Timing and capture plugins end to end on a simulated device: every verdict path, MUSA and
CUDA, through pytest against a copy of the embedded cpu suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import backends
from harness.contract.boundary import CLOCKS_UNREAD_MARKER
from harness.contract.boundary import TIMING_FILE as SIDECAR
from harness.plugins import capture
from harness.plugins.timing import op_key
from harness.run.plugin_plan import plan_plugins
from tests.fixture_nodes import load_nodes_tsv
from tests.plugins import fakedev

NODES_TSV = Path(__file__).resolve().parents[1] / "data" / "provider" / "benchmark_nodes.tsv"
UNIQUE2 = """
    import pytest
    import torch

    from . import base, cpu_ops


    @pytest.mark.unique2
    def test_unique2():
        bench = base.UnaryPointwiseBenchmark(
            op_name="unique2", torch_op=torch.tanh, gems_op=cpu_ops.tanh_via_exp,
            dtypes=[torch.float32])
        bench.run()
"""

TUNE_ONLY = """
    import torch

    from . import base

    SEEN = []


    def op(x):
        SEEN.append((base.Config.mode.name, base.Config.warm_up, base.Config.repetition))
        return torch.tanh(x)


    def test_tune_only():
        bench = base.UnaryPointwiseBenchmark(op_name="tanh", torch_op=op, gems_op=op,
                                             dtypes=[torch.float32])
        bench.run()
        print("SEEN=" + repr(sorted(set(SEEN))))
"""

TANH_BACKWARD = """
    import pytest
    import torch

    from . import base


    def tanh_input_fn(shape, dtype, device):
        yield torch.randn(shape, dtype=dtype, device=device, requires_grad=True),


    @pytest.mark.tanh_backward
    def test_tanh_backward():
        bench = base.GenericBenchmark(input_fn=tanh_input_fn, op_name="tanh_backward",
                                      torch_op=torch.tanh, gems_op=torch.tanh,
                                      dtypes=[torch.float32], is_backward=True)
        bench.run()
"""


# The cpu suite's core shapes, made small (the first holds 1024 * 1024 elements there): these
# tests check which timer times each row and what it records, not how long a row takes, and
# the suite's own shapes made each run a few seconds of tanh on two cores.
SMALL_SHAPES = """
UnaryPointwiseBenchmark:
  shapes: [[4096], [64, 64], [96, 96], [4, 32, 32]]
Benchmark:
  shapes: [[4096], [64, 64], [96, 96], [4, 32, 32]]
"""


@pytest.fixture
def device(pytester, monkeypatch, tmp_path):
    """A simulated MUSA host: fake triton, device interface, and flag_gems on mthreads."""
    fakedev.install(pytester, {"test_unique.py": UNIQUE2, "test_tune_only.py": TUNE_ONLY,
                              "test_tanh_backward.py": TANH_BACKWARD})
    (pytester.path / "benchmark" / "core_shapes.yaml").write_text(SMALL_SHAPES)
    pytester.makepyfile(flag_gems="vendor_name = 'mthreads'\n__version__ = '0'\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name, value in {"ZL_PLUGIN_BACKEND": "musa", "ZL_PLUGIN_TIMER": "graph",
                        "ZL_PLUGIN_RUN_DIR": str(run_dir), "ZL_PLUGIN_REPEAT": "1"}.items():
        monkeypatch.setenv(name, value)
    for name in ("FAKE_CAPTURE_ERROR", "FAKE_CAPTURE_FAIL_AT", "FAKE_CAPTURE_REFUSAL",
                 "ZL_PLUGIN_WARMUP_SHARE"):
        monkeypatch.delenv(name, raising=False)
    return run_dir


def run(pytester, *nodes, backend="musa", timer="graph", share=False):
    plan = plan_plugins(backends.get(backend), timer, share=share)
    plugins = [a for p in plan for a in ("-p", p)]
    return pytester.runpytest(*nodes, "--level", "core", "--mode", "kernel",
                              "--warmup", "1", "--iter", "2", "-s", *plugins)


def records(run_dir):
    path = run_dir / SIDECAR
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


TANH = "benchmark/test_tanh.py::test_tanh"


def test_musa_capture_times_every_row_by_graph(pytester, device):
    result = run(pytester, TANH)
    result.assert_outcomes(passed=1)
    rows = records(device)
    assert len(rows) == 8 and {r["timer"] for r in rows} == {"graph"}
    assert all(r["markers"] == [] and len(r["calls"]) == 2 for r in rows)
    assert {r["dtype"] for r in rows} == {"torch.float32", "torch.bfloat16"}
    result.stdout.no_fnmatch_line("*BENCHMARK_*")


@pytest.mark.parametrize("algorithm", ["steady", "adaptive"])
def test_each_graph_timer_times_every_row_by_graph(pytester, device, monkeypatch, algorithm):
    monkeypatch.setenv("ZL_PLUGIN_GRAPH_TIMER", algorithm)
    result = run(pytester, TANH)
    result.assert_outcomes(passed=1)
    rows = records(device)
    assert len(rows) == 8 and {r["timer"] for r in rows} == {"graph"}
    assert all(r["markers"] == [] for r in rows)


def test_an_unknown_graph_timer_stops_the_session_naming_it(pytester, device, monkeypatch):
    monkeypatch.setenv("ZL_PLUGIN_GRAPH_TIMER", "fast")
    result = run(pytester, TANH)
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*ZL_PLUGIN_GRAPH_TIMER='fast'*adaptive, upstream, steady*"])


def test_recoverable_failure_falls_back_for_that_shape_only(pytester, device, monkeypatch):
    monkeypatch.setenv("FAKE_CAPTURE_ERROR", "current_seed is not callable during capture")
    monkeypatch.setenv("FAKE_CAPTURE_FAIL_AT", "4")  # the second shape's FlagGems-side call
    result = run(pytester, TANH)
    result.assert_outcomes(passed=1)
    marker = 'BENCHMARK_DIRECT_NO_CUDAGRAPH op=tanh dtype=torch.float32 shape="[[64, 64]]" ' \
             'reason="current_seed is not callable during capture"'
    assert marker in result.stdout.lines
    rows = records(device)
    flagged = [r for r in rows if r["markers"]]
    assert [(r["shape"], r["timer"]) for r in flagged] == [("[[64, 64]]", "direct")]
    assert flagged[0]["markers"] == ["BENCHMARK_DIRECT_NO_CUDAGRAPH"]
    assert sum(r["timer"] == "graph" for r in rows) == 7


def test_refusal_in_the_exception_chain_decides_over_the_capture_end_error(
        pytester, device, monkeypatch):
    # torch reports a refused op as "operation failed due to a previous error during capture"
    # (poisoned on its own) with the refusal as __context__: the refusal must decide.
    monkeypatch.setenv("FAKE_CAPTURE_REFUSAL", "operation not permitted when stream is capturing")
    monkeypatch.setenv("FAKE_CAPTURE_ERROR",
                       "operation failed due to a previous error during capture")
    monkeypatch.setenv("FAKE_CAPTURE_FAIL_AT", "1")
    result = run(pytester, TANH)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["BENCHMARK_DIRECT_NO_CUDAGRAPH op=tanh *"
                                 'reason="operation not permitted when stream is capturing"'])
    result.stdout.no_fnmatch_line("*BENCHMARK_CAPTURE_POISONED*")


def test_fatal_failure_is_reraised_and_never_measured(pytester, device, monkeypatch):
    monkeypatch.setenv("FAKE_CAPTURE_ERROR", "an unknown kernel fault nobody has classified")
    monkeypatch.setenv("FAKE_CAPTURE_FAIL_AT", "3")
    result = run(pytester, TANH)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*an unknown kernel fault nobody has classified*"])
    result.stdout.no_fnmatch_line("*BENCHMARK_DIRECT_NO_CUDAGRAPH*")
    assert records(device) == []  # the float32 table was never completed, so no row


def test_poisoned_capture_stops_the_operator_and_keeps_measured_rows(
        pytester, device, monkeypatch):
    monkeypatch.setenv("FAKE_CAPTURE_ERROR", "MUSA error: unknown error")
    monkeypatch.setenv("FAKE_CAPTURE_FAIL_AT", "4")
    result = run(pytester, TANH, "benchmark/test_add.py::test_add")
    result.assert_outcomes(failed=1, skipped=1)  # add never runs in a dead context
    result.stdout.fnmatch_lines(['BENCHMARK_CAPTURE_POISONED op=tanh reason="MUSA error*'])
    rows = records(device)
    assert [(r["shape"], r["status"]) for r in rows] == [("[[4096]]", "SUCCESS"),
                                                         ("[[64, 64]]", "FAILED")]
    assert rows[0]["latency_base_ms"] > 0 and rows[0]["timer"] == "graph"
    assert rows[1]["markers"] == ["BENCHMARK_CAPTURE_POISONED"] and rows[0]["partial"]


def test_denied_op_is_timed_directly_without_an_attempt(pytester, device, monkeypatch):
    monkeypatch.setenv("FAKE_CAPTURE_ERROR", "MUSA error: unknown error")  # would poison
    result = run(pytester, "benchmark/test_unique.py::test_unique2")
    result.assert_outcomes(passed=1)
    assert result.stdout.str().count("BENCHMARK_CAPTURE_DENIED op=unique2") == 1
    rows = records(device)
    assert rows and all(r["timer"] == "direct" for r in rows)
    assert all(r["markers"] == ["BENCHMARK_CAPTURE_DENIED"] for r in rows)


def test_repeat_keeps_every_sample_and_reports_the_median(pytester, device, monkeypatch):
    monkeypatch.setenv("ZL_PLUGIN_REPEAT", "3")
    monkeypatch.setenv("ZL_PLUGIN_TIMER", "direct")
    result = run(pytester, TANH, timer="direct")
    result.assert_outcomes(passed=1)
    rows = records(device)
    assert all(len(r["samples"]) == 3 and len(r["samples_base"]) == 3 for r in rows)
    for row in rows:
        gems = row["calls"][1]
        assert gems["latency"] == sorted(gems["samples"])[1]


def test_cuda_uses_upstream_graph_bench_verbatim(pytester, device, monkeypatch):
    monkeypatch.setenv("ZL_PLUGIN_BACKEND", "cuda")
    plugins = ["-p", "harness.plugins.capture", "-p", "harness.plugins.timing"]
    result = pytester.runpytest(TANH, "--level", "core", "--mode", "kernel", "-s",
                                *plugins)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["SUCCESS *0.125000 *0.125000 *1.000*"])  # the stand-in's value


def test_a_backward_benchmark_is_graph_timed_without_the_timer_detaching_its_inputs(
        pytester, device, monkeypatch):
    # embedding_backward failed on an H200, in FlagGems' own --mode cudagraph too: upstream's
    # timer detach_()es grad_to_none, and autograd.grad on the out built before then raises.
    monkeypatch.setenv("ZL_PLUGIN_BACKEND", "cuda")
    plugins = ["-p", "harness.plugins.capture", "-p", "harness.plugins.timing"]
    result = pytester.runpytest("benchmark/test_tanh_backward.py", "--level", "core",
                                "--mode", "kernel", "-s", *plugins)
    result.assert_outcomes(passed=1)
    rows = records(device)
    assert rows and {r["timer"] for r in rows} == {"graph"}
    # no marker but the clocks a fake device cannot give: not timed directly, nothing rescued
    assert all(r["markers"] == [CLOCKS_UNREAD_MARKER] for r in rows)


def test_grads_are_reset_outside_the_timer_which_gets_none_to_detach():
    import torch

    leaf = torch.ones(3, requires_grad=True)
    leaf.grad = torch.ones(3)
    kwargs = capture.grads_reset_here({"rep": 100, "grad_to_none": [leaf]})
    assert kwargs == {"rep": 100, "grad_to_none": None}
    assert leaf.grad is None and leaf.requires_grad and leaf.is_leaf
    assert capture.grads_reset_here({"rep": 5}) == {"rep": 5}


def test_without_the_harness_plugins_cudagraph_mode_is_refused_on_cpu(pytester):
    fakedev.install(pytester)
    (pytester.path / "triton").rename(pytester.path / "not_triton")
    result = pytester.runpytest(TANH, "--level", "core", "--mode", "cudagraph", "-s")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*CPU has no graph capture*"])


def test_rng_guard_restores_generator_state_and_skips_without_generators():
    class Gen:
        state = 5

        def get_state(self):
            return self.state

        def set_state(self, s):
            self.state = s

    class Interface:
        default_generators = (Gen(),)

    with capture.rng_guard(Interface):
        Interface.default_generators[0].state = 99
    assert Interface.default_generators[0].state == 5
    with capture.rng_guard(object()):  # no default_generators: nothing to do
        pass


def test_summarize_matches_triton_return_modes():
    times = [3.0, 1.0, 2.0, 4.0]
    assert capture.summarize(times, None, "median") == 2.5
    assert capture.summarize(times, None, "min") == 1.0
    assert capture.summarize(times, None, "mean") == 2.5
    assert capture.summarize(times, [0.5], "mean") == 2.5
    assert capture.summarize(times, [0.0, 1.0], "mean") == [1.0, 4.0]


def test_deny_keys_name_real_flaggems_nodes():
    # A deny key that matches no node fails open silently: pin the key space.
    keys = {op_key(node.function) for node in load_nodes_tsv(NODES_TSV)}
    assert op_key("test_perf_sort") == "perf_sort" and "unique2" in keys
    for backend in backends.registry().all():
        assert backend.capture_deny_ops <= keys, backend.name


def test_a_warmup_share_calls_each_op_briefly_in_kernel_mode_and_times_nothing(
        pytester, device, monkeypatch):
    monkeypatch.setenv("ZL_PLUGIN_WARMUP_SHARE", "1/2")
    monkeypatch.setenv("FAKE_CAPTURE_ERROR", "an unknown kernel fault nobody has classified")
    result = run(pytester, "benchmark/test_tune_only.py", share=True)
    result.assert_outcomes(passed=1)  # no capture was attempted, so the fault never fired
    result.stdout.fnmatch_lines(["SEEN=[('KERNEL', 1, 1)]"])
    assert records(device) == []
