"""Benchmark classes of the CPU suite: FlagGems' class names, hooks and output, timed on CPU."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Generator
from dataclasses import asdict
from typing import Any

import pytest
import torch
import yaml

from . import consts
from .conftest import Config, emit_record_logger, update_result
from .consts import (
    BenchmarkMetrics,
    BenchmarkResult,
    OperationAttribute,
    check_metric_dependencies,
    model_shapes,
)

device = "cpu"
# Never fewer timed calls than this, however long one call takes: a median needs samples.
MIN_REPETITIONS = 5


def _median_call_ms(fn: Callable[[], Any], warmup_ms: float, rep_ms: float) -> float:
    """Call fn for warmup_ms, then time each call for rep_ms; the median call in ms."""
    clock = time.perf_counter
    deadline = clock() + warmup_ms / 1e3
    fn()
    while clock() < deadline:
        fn()
    samples: list[float] = []
    start = end = clock()
    budget = rep_ms / 1e3
    while len(samples) < MIN_REPETITIONS or end - start < budget:
        t0 = clock()
        fn()
        end = clock()
        samples.append(end - t0)
    return statistics.median(samples) * 1e3


def generate_tensor_input(shape, dtype: torch.dtype, device: str) -> torch.Tensor:
    if dtype in consts.FLOAT_DTYPES or dtype in consts.COMPLEX_DTYPES:
        return torch.randn(shape, dtype=dtype, device=device)
    if dtype in consts.INT_DTYPES:
        info = torch.iinfo(dtype)
        return torch.randint(info.min, info.max, shape, dtype=dtype, device=device)
    if dtype in consts.BOOL_DTYPES:
        return torch.randint(0, 2, size=shape, dtype=dtype, device=device)
    raise ValueError(f"no input generator for dtype {dtype}")


def size_in_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _parse_shapes(item: Any) -> Any:
    """Tensors become their torch.Size; containers are walked; anything else is dropped."""
    if isinstance(item, torch.Tensor):
        return item.size()
    if isinstance(item, (int, float, str, torch.dtype)):
        return item
    if isinstance(item, (list, tuple)):
        return [_parse_shapes(sub) for sub in item]
    if isinstance(item, dict):
        return {key: _parse_shapes(value) for key, value in item.items()}
    return None


def _graph_latency(fn, grad_to_none):
    try:
        import triton.testing
    except ImportError:
        pytest.fail(
            "--mode cudagraph: CPU has no graph capture; use --mode kernel "
            "(operator and wrapper time the same way on CPU)",
            pytrace=False,
        )
    return triton.testing.do_bench_cudagraph(
        fn, rep=Config.repetition, return_mode="median", grad_to_none=grad_to_none
    )


class Benchmark:
    """Base class: times torch's op (latency_base) against a "gems" op (latency) per shape."""

    device: str = device
    DEFAULT_METRICS = consts.DEFAULT_METRICS
    DEFAULT_DTYPES = consts.CPU_FLOAT_DTYPES
    DEFAULT_SHAPES = consts.DEFAULT_SHAPES
    DEFAULT_SHAPE_DESC = "M, N"
    DEFAULT_SHAPE_FILES = os.path.join(os.path.dirname(__file__), "core_shapes.yaml")

    def __init__(
        self, op_name, torch_op, dtypes=None, is_backward=False, is_inplace=False, **kwargs
    ):
        self.op_name = op_name
        if is_backward and "_backward" not in self.op_name:
            self.op_name += "_backward"
        self.torch_op = torch_op
        self.gems_op = kwargs.get("gems_op")
        self.is_backward = is_backward
        self.is_inplace = is_inplace
        self._input_iter = None
        self.dtypes = dtypes if dtypes is not None else self.DEFAULT_DTYPES
        # Copies: FlagGems appends to these lists, which must not leak into the class defaults.
        self.metrics = list(self.DEFAULT_METRICS)
        self.shapes = list(self.DEFAULT_SHAPES)
        self.shape_desc = self.DEFAULT_SHAPE_DESC
        self.shape_file = self.DEFAULT_SHAPE_FILES
        self.to_bench_dtypes = self.dtypes
        self.to_bench_metrics = list(self.metrics)
        for key, value in kwargs.items():
            if hasattr(self, key):
                setattr(self, key, value)

    # -- configuration ---------------------------------------------------------------------

    def set_metrics(self, user_desired_metrics: list[str] | None) -> None:
        if user_desired_metrics:
            invalid = [m for m in user_desired_metrics if m not in self.metrics]
            if invalid:
                raise ValueError(
                    f"Invalid metrics: {', '.join(invalid)} for operation: '{self.op_name}'"
                )
            unsatisfied = check_metric_dependencies(user_desired_metrics)
            if unsatisfied:
                raise ValueError(f"Unsatisfied metric dependencies: {', '.join(unsatisfied)}")
        self.to_bench_metrics = list(user_desired_metrics or self.metrics)
        if Config.bench_level == consts.BenchLevel.COMPREHENSIVE and not Config.query:
            for metric in self.set_more_metrics():
                if metric not in self.to_bench_metrics:
                    self.to_bench_metrics.append(metric)

    def set_more_metrics(self) -> list[str]:
        """Metrics added at --level comprehensive (override in subclasses)."""
        return []

    def set_dtypes(self, user_desired_dtypes: list[torch.dtype] | None) -> None:
        if user_desired_dtypes:
            invalid = [d for d in user_desired_dtypes if d not in self.dtypes]
            if invalid:
                raise ValueError(
                    f"Given dtype(s) '{', '.join(str(d) for d in invalid)}'"
                    f"can't be supported by this op '{self.op_name}'"
                )
        self.to_bench_dtypes = user_desired_dtypes or self.dtypes

    def _shape_entry(self, shape_config: dict) -> dict | None:
        """The shape file's entry for this op: its op_name, else the nearest class name."""
        if self.op_name in shape_config:
            return shape_config[self.op_name]
        for cls in type(self).__mro__:
            if cls.__name__ in shape_config:
                return shape_config[cls.__name__]
        return None

    def set_shapes(self, shape_file_path: str | None = None) -> None:
        if not shape_file_path or not os.path.isfile(shape_file_path):
            raise FileNotFoundError(f"Shape file '{shape_file_path}' does not exist.")
        try:
            with open(shape_file_path) as f:
                shape_config = yaml.safe_load(f) or {}
        except yaml.YAMLError as e:
            raise ValueError(
                f"Shape file '{shape_file_path}' is not a valid YAML file. Error: {e}"
            ) from e
        entry = self._shape_entry(shape_config)
        if entry is None:
            self.shapes = self.DEFAULT_SHAPES
        else:
            self.shapes = entry.get("shapes", self.DEFAULT_SHAPES)
            self.shape_desc = entry.get("shape_desc", self.DEFAULT_SHAPE_DESC)
        self.shapes = [tuple(shape) for shape in self.shapes]
        if Config.bench_level == consts.BenchLevel.COMPREHENSIVE and not Config.query:
            more = [tuple(shape) for shape in self.set_more_shapes() or []]
            self.shapes = list(dict.fromkeys(self.shapes + more))

    def set_more_shapes(self) -> list[tuple]:
        """Shapes added at --level comprehensive (override in subclasses)."""
        return []

    def record_shapes(self, *args, **kwargs):
        parsed_args = [_parse_shapes(arg) for arg in args]
        parsed_kwargs = {key: _parse_shapes(value) for key, value in kwargs.items()}
        if parsed_args and parsed_kwargs:
            return parsed_args, parsed_kwargs
        return parsed_args if parsed_args else parsed_kwargs

    def init_default_config(self) -> None:
        self.set_shapes(self.DEFAULT_SHAPE_FILES)

    def init_user_config(self) -> None:
        self.mode = Config.mode
        self.set_dtypes(Config.user_desired_dtypes)
        self.set_metrics(Config.user_desired_metrics)
        self.set_shapes(Config.shape_file)

    def set_gems(self, gems_op) -> None:
        self.gems_op = gems_op

    # -- measurement -----------------------------------------------------------------------

    def get_latency(self, op, *args, **kwargs):
        """Median latency of one call of op, in ms.

        kernel, operator and wrapper time with the host clock. cudagraph goes, as in FlagGems,
        through `triton.testing.do_bench_cudagraph`, which a CPU-only install does not have; a
        graph timer installed there (a simulated device in the harness's tests) is used as is.
        """
        fn = lambda: op(*args, **kwargs)  # noqa: E731
        if self.is_backward:
            out = fn()
            dout = torch.randn_like(out)
            xs = [a for a in args if torch.is_tensor(a) and a.requires_grad]
            fn = lambda: torch.autograd.grad(  # noqa: E731
                (out,), xs, grad_outputs=(dout,), retain_graph=True
            )
        if Config.mode == consts.BenchMode.CUDAGRAPH:
            return _graph_latency(fn, xs if self.is_backward else None)
        # kernel, operator and wrapper coincide on CPU: the host runs the op synchronously.
        return _median_call_ms(fn, Config.warm_up, Config.repetition)

    def get_gbps(self, args, latency=None):
        raise NotImplementedError("Each Benchmark must implement its own get_gbps.")

    def get_tflops(self, op, *args, **kwargs):
        """Floating-point operations of one call, as counted by torch's FlopCounterMode."""
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            op(*args, **kwargs)
        return counter.get_total_flops()

    def get_input_iter(self, dtype) -> Generator:
        raise NotImplementedError("Each Benchmark must implement its own input iterator.")

    def get_inputs(self, dtype):
        if self._input_iter is None:
            self._input_iter = self.get_input_iter(dtype)
        return next(self._input_iter, None)

    def unpack_to_args_kwargs(self, input_tuple: tuple[Any, ...]):
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for item in input_tuple:
            if isinstance(item, dict):
                kwargs.update(item)
            elif item is None or isinstance(
                item, (torch.Tensor, int, float, str, list, tuple, torch.dtype)
            ):
                args.append(item)
        if self.is_backward:
            args = [
                a.clone().requires_grad_()
                if torch.is_tensor(a) and torch.is_floating_point(a)
                else a
                for a in args
            ]
        return args, kwargs

    def _measure(self, metric: BenchmarkMetrics, args: list, kwargs: dict) -> None:
        metric.shape_detail = self.record_shapes(*args, **kwargs)
        wanted = self.to_bench_metrics
        if "latency_base" in wanted:
            metric.latency_base = self.get_latency(self.torch_op, *args, **kwargs)
        if "latency" in wanted:
            if self.gems_op is None:
                raise RuntimeError(
                    f"op {self.op_name!r} has no gems_op: the CPU suite has no library to "
                    "dispatch torch ops to, so each benchmark passes its alternative as gems_op"
                )
            metric.latency = self.get_latency(self.gems_op, *args, **kwargs)
        if "speedup" in wanted:
            metric.speedup = metric.latency_base / metric.latency
        if "gbps" in wanted:
            metric.gbps_base = self.get_gbps(args, latency=metric.latency_base)
            metric.gbps = self.get_gbps(args, latency=metric.latency)
        if "tflops" in wanted:
            flops = self.get_tflops(self.torch_op, *args, **kwargs)
            metric.tflops = flops / metric.latency / 1e12 * 1e3

    def _run_dtype(self, dtype: torch.dtype) -> list[BenchmarkMetrics]:
        metrics = []
        input_iter = self.get_input_iter(dtype)
        while True:
            try:
                inputs = next(input_iter)
            except StopIteration:
                return metrics
            except Exception as e:
                print(f"\033[31mFAILED\033[0m: Operator={self.op_name} dtype={dtype} err=<<<{e}>>>")
                pytest.fail(str(e))
            metric = BenchmarkMetrics()
            try:
                args, kwargs = self.unpack_to_args_kwargs(inputs)
                self._measure(metric, args, kwargs)
            except Exception as e:
                metric.error_msg = str(e)
                pytest.fail(str(e))
            finally:
                # FlagGems calls gc.collect() here to return device memory early; on CPU,
                # tensors die by refcount, and a full collection under torch costs ~0.1 s.
                metrics.append(metric)

    def run(self) -> None:
        if Config.query:
            self.init_default_config()
            attribute = OperationAttribute(
                op_name=self.op_name,
                recommended_core_shapes=self.shapes,
                shape_desc=self.shape_desc,
            )
            print(attribute)
            emit_record_logger(attribute.to_dict())
            return
        self.init_user_config()
        for dtype in self.to_bench_dtypes:
            result = BenchmarkResult(
                level=Config.bench_level.value,
                op_name=self.op_name,
                dtype=str(dtype),
                mode=Config.mode.value,
                result=self._run_dtype(dtype),
            )
            print(result)
            update_result(self.op_name, asdict(result))
            emit_record_logger(result.to_json())


class GenericBenchmark(Benchmark):
    """Any op, with inputs from input_fn(shape, dtype, device) (a generator of input tuples)."""

    def __init__(self, *args, input_fn, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_fn = input_fn

    def set_more_shapes(self):
        more_1d = [(2**22,)]
        more_2d = [(1000, 2**i) for i in (0, 8, 12)]
        more_3d = [(100, 2**i, 100) for i in (0, 4, 8)]
        return more_1d + more_2d + more_3d

    def get_input_iter(self, dtype) -> Generator:
        for shape in self.shapes:
            yield from self.input_fn(shape, dtype, self.device)


class UnaryReductionBenchmark(Benchmark):
    """Reductions over dim 1 (over everything for 1-D inputs): inputs are (inp, 1) or (inp,)."""

    def set_more_metrics(self):
        return ["gbps"]

    def get_gbps(self, args, latency):
        io_bytes = 2 * size_in_bytes(args[0])
        return io_bytes * 1e-9 / (latency * 1e-3)

    def set_more_shapes(self):
        more_1d = [(1025 * 1024,), (2**22,)]
        more_2d = [(1024, 2**i) for i in range(0, 13, 4)]
        more_3d = [(64, 2**i, 64) for i in range(0, 11, 4)]
        return more_1d + more_2d + more_3d

    def get_input_iter(self, cur_dtype) -> Generator:
        for shape in self.shapes:
            inp = generate_tensor_input(shape, cur_dtype, self.device)
            yield (inp, 1) if inp.ndim > 1 else (inp,)


class BlasBenchmark(Benchmark):
    """Matrix products: shapes are (B, M, N, K), inputs from input_fn(b, m, n, k, ...)."""

    DEFAULT_METRICS = consts.DEFAULT_METRICS + ["tflops"]
    DEFAULT_DTYPES = [torch.float32]

    def __init__(self, *args, input_fn, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_fn = input_fn

    def get_input_iter(self, dtype) -> Generator:
        for b, m, n, k in self.shapes:
            yield from self.input_fn(b, m, n, k, dtype, self.device, False)
        if Config.bench_level == consts.BenchLevel.COMPREHENSIVE:
            for b, m, n, k in self.shapes:
                yield from self.input_fn(b, m, n, k, dtype, self.device, True)

    def set_more_shapes(self):
        large_k = [(2, 64, 64, 16384), (2, 256, 256, 8192)]
        return large_k + model_shapes()

    def get_tflops(self, op, *args, **kwargs):
        a, b = args[0], args[1]
        if self.op_name == "mm":
            return 2 * a.shape[0] * a.shape[1] * b.shape[1]
        if self.op_name == "addmm":  # (bias, m x n, n x p)
            return a.shape[0] * b.shape[1] * (b.shape[0] * 2 + 1)
        if self.op_name == "bmm":
            return 2 * a.shape[0] * a.shape[1] * b.shape[2] * a.shape[2]
        return 0


class BinaryPointwiseBenchmark(Benchmark):
    """Elementwise ops of two same-shape tensors."""

    DEFAULT_METRICS = consts.DEFAULT_METRICS + ["tflops"]

    def set_more_shapes(self):
        more_2d = [(1024, 2**i) for i in range(0, 13, 4)]
        more_3d = [(64, 64, 2**i) for i in range(0, 9, 4)]
        return more_2d + more_3d

    def get_input_iter(self, dtype) -> Generator:
        for shape in self.shapes:
            inp1 = generate_tensor_input(shape, dtype, self.device)
            inp2 = generate_tensor_input(shape, dtype, self.device)
            yield inp1, inp2

    def get_tflops(self, op, *args, **kwargs):
        return 2 * args[0].numel()


class UnaryPointwiseBenchmark(Benchmark):
    """Elementwise ops of one tensor."""

    DEFAULT_METRICS = consts.DEFAULT_METRICS + ["tflops"]

    def set_more_shapes(self):
        more_2d = [(1024, 2**i) for i in range(0, 13, 4)]
        more_3d = [(64, 64, 2**i) for i in range(0, 9, 4)]
        return more_2d + more_3d

    def get_input_iter(self, cur_dtype) -> Generator:
        for shape in self.shapes:
            yield (generate_tensor_input(shape, cur_dtype, self.device),)

    def get_tflops(self, op, *args, **kwargs):
        return args[0].numel()


def binary_input_fn(shape, cur_dtype, device):
    yield (
        generate_tensor_input(shape, cur_dtype, device),
        generate_tensor_input(shape, cur_dtype, device),
    )


def unary_input_fn(shape, cur_dtype, device):
    yield (generate_tensor_input(shape, cur_dtype, device),)
