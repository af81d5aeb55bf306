"""Options, run-wide config and record outputs of the CPU suite, with FlagGems' benchmark CLI."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from typing import Any

import pytest
import torch
import yaml

from . import consts

# FlagGems' logger name, so that anything attached to FlagGems' record log works here too.
recordLogger = logging.getLogger("flag_gems_benchmark")
recordLogger.propagate = False

BUILTIN_MARKS = (
    "parametrize",
    "skip",
    "skipif",
    "xfail",
    "usefixtures",
    "filterwarnings",
    "timeout",
    "tryfirst",
    "trylast",
)
REPORT_FILE = "benchmark_result.json"
TEST_RESULTS: dict[str, dict[str, Any]] = {}


class BenchConfig:
    """Run-wide settings read from the command line in pytest_configure."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.mode = consts.BenchMode.KERNEL
        self.bench_level = consts.BenchLevel.COMPREHENSIVE
        self.warm_up = consts.DEFAULT_WARMUP_TIME
        self.repetition = consts.DEFAULT_ITER_TIME
        self.record_log = False
        self.record_json = False
        self.user_desired_dtypes: list[torch.dtype] | None = None
        self.user_desired_metrics: list[str] | None = None
        self.shape_file = os.path.join(os.path.dirname(__file__), "core_shapes.yaml")
        self.query = False
        self.parallel = 0
        self.output = REPORT_FILE


# One object for the whole process, filled in place by pytest_configure: modules that did
# `from .conftest import Config` (base.py, timing plugins) keep seeing the current settings.
Config = BenchConfig()


def update_result(op: str, data: dict) -> None:
    if not Config.record_json:
        return
    TEST_RESULTS.setdefault(op, {}).setdefault("details", []).append(data)


def emit_record_logger(message: Any) -> None:
    """Write one `[INFO] <message>` line to the record log (with --record log only)."""
    if not Config.record_log:
        return
    for handler in recordLogger.handlers:
        # A handler closed by an earlier in-process session reopens its file on demand.
        if isinstance(handler, logging.FileHandler) and handler.stream is None:
            handler.acquire()
            try:
                handler.stream = handler._open()
            finally:
                handler.release()
    recordLogger.info(message)


def pytest_addoption(parser: pytest.Parser) -> None:
    dtype_names = [
        str(dtype).split(".")[-1]
        for dtype in consts.FLOAT_DTYPES
        + consts.INT_DTYPES
        + consts.BOOL_DTYPES
        + consts.COMPLEX_DTYPES
    ]
    parser.addoption(
        "--mode",
        default="kernel",
        choices=[mode.value for mode in consts.BenchMode],
        help="How to measure latency: kernel, operator or wrapper (all one wall-clock timer "
        "on CPU); cudagraph fails, CPU has no graph capture.",
    )
    parser.addoption(
        "--level",
        default="comprehensive",
        choices=[level.value for level in consts.BenchLevel],
        help="Benchmark level: comprehensive, or core.",
    )
    parser.addoption(
        "--warmup",
        default=consts.DEFAULT_WARMUP_TIME,
        help="Time (ms) of warmup runs before each measurement.",
    )
    parser.addoption(
        "--iter",
        default=consts.DEFAULT_ITER_TIME,
        help="Time (ms) of timed runs of each measurement.",
    )
    parser.addoption("--query", action="store_true", default=False, help="Enable query mode")
    parser.addoption(
        "--metrics",
        action="append",
        default=None,
        choices=sorted(consts.ALL_AVAILABLE_METRICS),
        help="Metrics to benchmark (default: the op's own).",
    )
    parser.addoption(
        "--dtypes",
        action="append",
        default=None,
        choices=dtype_names,
        help="Data types to benchmark (default: the op's own).",
    )
    parser.addoption(
        "--shape_file",
        default=os.path.join(os.path.dirname(__file__), "core_shapes.yaml"),
        help="Shape file (YAML) for benchmarks.",
    )
    try:
        parser.addoption(
            "--record",
            default="none",
            choices=["none", "log", "json"],
            help="Record results in a log or a JSON file.",
        )
        parser.addoption("--output", default=REPORT_FILE, help="JSON report path")
    except ValueError:
        pass  # already registered by another conftest of the same run: share it
    parser.addoption(
        "--parallel",
        type=int,
        default=0,
        help="Accepted for FlagGems compatibility; the CPU suite always runs serially.",
    )
    try:
        parser.addoption(
            "--collect-marks",
            default=None,
            help="Write the tests and their op marks to this YAML file and run nothing.",
        )
    except ValueError:
        pass


def record_log_name(args: list[str] | tuple[str, ...]) -> str:
    """result_<args>.log, built from the command line exactly as FlagGems builds it."""
    parts = [a.replace(".py", "").replace("=", "_").replace("/", "_") for a in args]
    return "result_{}.log".format("_".join(parts)).replace("_-", "-")


def _open_record_log(path: str) -> None:
    _close_record_log()
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    recordLogger.addHandler(handler)
    recordLogger.setLevel(logging.INFO)


def _close_record_log() -> None:
    for handler in list(recordLogger.handlers):
        recordLogger.removeHandler(handler)
        handler.close()


def pytest_configure(config: pytest.Config) -> None:
    global REPORT_FILE
    Config.reset()
    Config.mode = consts.BenchMode(config.getoption("--mode"))
    Config.bench_level = consts.BenchLevel(config.getoption("--level"))
    Config.query = config.getoption("--query")
    Config.warm_up = int(config.getoption("--warmup"))
    Config.repetition = int(config.getoption("--iter"))
    names = config.getoption("--dtypes")
    Config.user_desired_dtypes = [getattr(torch, n) for n in names] if names else None
    Config.user_desired_metrics = config.getoption("--metrics")
    Config.shape_file = config.getoption("--shape_file")
    Config.record_log = config.getoption("--record") == "log"
    Config.record_json = config.getoption("--record") == "json"
    Config.parallel = int(config.getoption("--parallel") or 0)
    TEST_RESULTS.clear()
    if Config.record_json:
        Config.output = REPORT_FILE = config.getoption("--output")
    if Config.record_log:
        _open_record_log(record_log_name(config.invocation_params.args))
        emit_record_logger("Benchmark record logger enabled")


def pytest_unconfigure(config: pytest.Config) -> None:
    _close_record_log()


@pytest.fixture(scope="session", autouse=True)
def setup_once(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("--query"):
        print("\nThis is query mode; all benchmark functions will be skipped.")


@pytest.fixture()
def extract_and_log_op_attributes(request: pytest.FixtureRequest):
    """Print (and log) the recommended core shapes named by the test's op marks."""
    print("")
    attributes = []
    for mark in request.node.iter_markers():
        if mark.name in BUILTIN_MARKS:
            continue
        shapes = consts.get_recommended_shapes(mark.name, mark.kwargs.get("recommended_shapes"))
        attribute = consts.OperationAttribute(
            op_name=mark.name,
            recommended_core_shapes=shapes,
            shape_desc=mark.kwargs.get("shape_desc", "M, N"),
        )
        print(attribute)
        attributes.append(attribute.to_dict())
    if request.config.getoption("--query"):
        pytest.skip("Skipping benchmark due to the query parameter.")
    yield
    if attributes:
        emit_record_logger(json.dumps(attributes, indent=2))


def op_marks(item: pytest.Item) -> list[str]:
    """The item's operator marks: every mark that is not one of pytest's own."""
    return [m.name for m in item.iter_markers() if m.name not in BUILTIN_MARKS]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    marks = op_marks(item)
    # FlagGems' convention: the first op mark is the operator's id.
    report.opid = marks[0] if marks else item.nodeid
    return report


def _reason(report: pytest.TestReport) -> str:
    if hasattr(report.longrepr, "reprcrash"):
        return report.longrepr.reprcrash.message
    if isinstance(report.longrepr, tuple):
        return report.longrepr[2]
    return str(report.longrepr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not Config.record_json or not hasattr(report, "opid"):
        return
    entry = TEST_RESULTS.setdefault(report.opid, {})
    if report.when == "setup" and report.outcome == "skipped":
        entry.update(result="skipped", reason=_reason(report), test_case=report.nodeid)
    elif report.when == "call":
        reason = _reason(report) if report.outcome in ("skipped", "failed") else None
        entry.update(result=report.outcome, reason=reason, test_case=report.nodeid)


def _write_json_atomically(path: str, data: dict) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".benchmark_result.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, default=str)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """With --record json: merge this run's results into the JSON report."""
    if not Config.record_json:
        return
    data: dict[str, Any] = {}
    if os.path.exists(REPORT_FILE):
        with open(REPORT_FILE) as f:
            data = json.load(f)
    data.update(TEST_RESULTS)
    _write_json_atomically(REPORT_FILE, data)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    path = config.getoption("--collect-marks")
    if not path:
        return
    report = []
    for item in items:
        data: dict[str, Any] = {}
        if getattr(item, "cls", None):
            data["class"] = item.cls.__name__
        data["test_case"] = item.name
        if getattr(item, "originalname", None):
            data["function"] = item.originalname
        data["file"] = item.location[0]
        data["marks"] = op_marks(item)
        report.append(data)
    with open(path, "w") as f:
        yaml.dump(report, f, indent=2)
    items.clear()
