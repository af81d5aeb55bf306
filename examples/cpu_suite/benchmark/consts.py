"""Constants, enums and result records of the CPU benchmark suite (FlagGems' names and formats)."""

from __future__ import annotations

import itertools
import json
import math
import os
from dataclasses import asdict, dataclass, fields
from enum import Enum
from typing import Any

import torch

# The dtype universe that --dtypes accepts (FlagGems' spelling); ops declare the subset they run.
FLOAT_DTYPES = [torch.float16, torch.float32, torch.bfloat16]
INT_DTYPES = [torch.int16, torch.int32]
BOOL_DTYPES = [torch.bool]
COMPLEX_DTYPES = [torch.complex64]
# What the CPU ops of this suite run by default: float16 arithmetic on CPU is emulated and slow.
CPU_FLOAT_DTYPES = [torch.float32, torch.bfloat16]

# Milliseconds. FlagGems warms up for a second; a CPU run of the whole suite must stay short.
# CPU_SUITE_WARMUP_MS and CPU_SUITE_ITER_MS set other defaults, for runs that check what a
# harness does with the suite rather than what it measures (the harness's own tests).
DEFAULT_WARMUP_TIME = int(os.environ.get("CPU_SUITE_WARMUP_MS") or 25)
DEFAULT_ITER_TIME = int(os.environ.get("CPU_SUITE_ITER_MS") or 100)

# Shapes used when the shape file names neither the op nor any of its benchmark classes.
DEFAULT_SHAPES = [
    (1048576,),
    (64, 64),
    (1024, 1024),
    (32, 256, 256),
]


def model_shapes() -> list[tuple[int, int, int, int]]:
    """(B, M, N, K) of small transformer-like projections, sized for a CPU."""
    batch_tokens = [1, 8, 64]
    n_k = [(1024, 1024), (4096, 1024), (1024, 4096)]
    return [(4, m, n, k) for m, (n, k) in itertools.product(batch_tokens, n_k)]


@dataclass
class BenchmarkMetrics:
    """One measured shape; field names and order are FlagGems' (the record log depends on them)."""

    legacy_shape: int | None = None
    shape_detail: Any = None
    latency_base: float | None = None  # ms, torch's op
    latency: float | None = None  # ms, the "gems" op
    gbps_base: float | None = None
    gbps: float | None = None
    speedup: float | None = None  # latency_base / latency
    accuracy: float | None = None
    tflops: float | None = None
    utilization: float | None = None
    compared_speedup: float | None = None
    error_msg: str | None = None


ALL_AVAILABLE_METRICS = {f.name for f in fields(BenchmarkMetrics)} - {
    "legacy_shape",
    "shape_detail",
}

DEFAULT_METRICS = ["latency_base", "latency", "speedup"]

_METRIC_DEPENDENCIES = {
    "speedup": ["latency", "latency_base"],
    "utilization": ["latency", "tflops"],
}


def check_metric_dependencies(requested_metrics: list[str] | None) -> list[str]:
    """Return the requested metrics whose dependencies are not requested before them."""
    unsatisfied: list[str] = []
    satisfied: set[str] = set()
    for metric in requested_metrics or []:
        needs = _METRIC_DEPENDENCIES.get(metric, [])
        if all(need in satisfied for need in needs):
            satisfied.add(metric)
        else:
            unsatisfied.append(metric)
    return unsatisfied


def get_recommended_shapes(op_name: str, op_specified_shapes: list | None) -> list[tuple]:
    """The op's own shapes (or the defaults), as tuples sorted by element count."""
    shapes = op_specified_shapes or DEFAULT_SHAPES
    as_tuples = [s if isinstance(s, tuple) else (s,) for s in shapes]
    return sorted(as_tuples, key=math.prod)


class BenchMode(Enum):
    KERNEL = "kernel"
    OPERATOR = "operator"
    WRAPPER = "wrapper"
    CUDAGRAPH = "cudagraph"


class BenchLevel(Enum):
    COMPREHENSIVE = "comprehensive"
    CORE = "core"


@dataclass
class OperationAttribute:
    """What --query prints for an op: its name and recommended core shapes."""

    op_name: str
    recommended_core_shapes: list
    shape_desc: str

    def __str__(self) -> str:
        shapes_title = f"Recommended Core Shapes[{self.shape_desc}]"
        return (
            f"{'Operator name':<40} |  {self.op_name}\n"
            f"{shapes_title:<40} |  {self.recommended_core_shapes}\n"
        )

    def to_dict(self) -> dict:
        return self.__dict__


def custom_json_encoder(obj: Any) -> str:
    """json.dumps fallback: dtypes print as torch prints them."""
    if isinstance(obj, torch.dtype):
        return str(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


# Column width of every numeric column in the console table, and the gap before Size Detail.
_COL = 20
_DETAIL_GAP = 10


def _fmt(value: float | None, digits: int) -> str:
    return "N/A" if value is None else f"{value:.{digits}f}"


@dataclass
class BenchmarkResult:
    """All shapes of one op and dtype; prints FlagGems' console table, dumps its log JSON."""

    op_name: str
    dtype: str
    mode: str
    level: str
    result: list[BenchmarkMetrics]

    def __str__(self) -> str:
        first = self.result[0]
        titles = ["Torch Latency (ms)", "Gems Latency (ms)", "Gems Speedup"]
        if first.tflops:
            titles.append("TFLOPS")
        if first.gbps is not None:
            titles += ["Torch GBPS ", "Gems GBPS "]
        titles.append("Size Detail")
        columns = f"{'Status':<10} " + " ".join(f"{t:>{_COL}}" for t in titles) + "\n"
        title = (
            f"\nOperator: {self.op_name}  Performance Test (dtype={self.dtype}, "
            f"mode={self.mode},level={self.level})\n"
        )
        # FlagGems counts the newline of the column line into the rule's length: keep that.
        rule = "-" * len(columns) + "\n"
        return title + columns + rule + "".join(self._row(m) for m in self.result)

    @staticmethod
    def _row(metrics: BenchmarkMetrics) -> str:
        status = "SUCCESS" if metrics.error_msg is None else "FAILED"
        cells = [
            _fmt(metrics.latency_base, 6),
            _fmt(metrics.latency, 6),
            _fmt(metrics.speedup, 3),
        ]
        if metrics.tflops:
            cells.append(_fmt(metrics.tflops, 3))
        if metrics.gbps is not None:
            cells += [_fmt(metrics.gbps_base, 3), _fmt(metrics.gbps, 3)]
        detail = "N/A" if metrics.shape_detail is None else metrics.shape_detail
        numbers = "".join(f"{cell:>{_COL}}" for cell in cells)
        return f"{status:<10}{numbers}{' ' * _DETAIL_GAP}{detail}\n"

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=custom_json_encoder)

    def to_dict(self) -> dict:
        return self.__dict__
