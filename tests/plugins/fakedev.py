"""A simulated accelerator for plugin tests: a fake Triton driver and device interface.

`install(pytester)` writes, next to a copy of the embedded cpu suite, a `triton` package whose
driver returns `fake_di` as the device interface, and whose `testing.do_bench_cudagraph` is a
recognisable stand-in for upstream's. `fake_di` has streams, timing events, synchronize, a
`graph` context and a graph class under each vendor's name that fails the captures chosen by
environment variables:

- FAKE_CAPTURE_ERROR: the message raised when a capture ends (after the captured body ran);
- FAKE_CAPTURE_FAIL_AT: comma-separated 1-based capture numbers that fail (default: all);
- FAKE_CAPTURE_REFUSAL: a message raised inside the body first, so that the end-of-capture
  error carries it as __context__, as torch reports a refused op.
"""

from __future__ import annotations

import shutil
import textwrap

from harness.spec import EMBEDDED_SUITE

FAKE_DI = '''
import contextlib, os, time

CAPTURES = {"n": 0}
UPSTREAM_CALLS = {"n": 0}


class Stream:
    pass


@contextlib.contextmanager
def stream(s):
    yield s


def synchronize():
    pass


class Event:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return max((end.t - self.t) * 1000.0, 1e-6)


class Generator:
    def __init__(self):
        self.state = 0

    def get_state(self):
        return self.state

    def set_state(self, state):
        self.state = state


default_generators = (Generator(),)


class _Graph:
    def replay(self):
        pass


MUSAGraph = CUDAGraph = NPUGraph = _Graph


def _failing():
    wanted = os.environ.get("FAKE_CAPTURE_FAIL_AT", "")
    return not wanted or str(CAPTURES["n"]) in wanted.split(",")


@contextlib.contextmanager
def graph(g):
    CAPTURES["n"] += 1
    default_generators[0].state += 1  # capturing an RNG op advances the generator
    fail = os.environ.get("FAKE_CAPTURE_ERROR") and _failing()
    try:
        if fail and os.environ.get("FAKE_CAPTURE_REFUSAL"):
            raise RuntimeError(os.environ["FAKE_CAPTURE_REFUSAL"])
        yield g
    finally:
        if fail:
            raise RuntimeError(os.environ["FAKE_CAPTURE_ERROR"])
'''

FAKE_TESTING = '''
import fake_di


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    fake_di.UPSTREAM_CALLS["n"] += 1
    fn()
    return 0.125
'''

FAKE_DRIVER = '''
class _Active:
    def get_device_interface(self):
        import fake_di
        return fake_di


active = _Active()
'''


def install(pytester, extra_tests: dict[str, str] | None = None) -> None:
    """Copy the cpu suite into the pytester dir and add the fake triton and device interface."""
    shutil.copytree(EMBEDDED_SUITE, pytester.path, dirs_exist_ok=True)
    (pytester.path / "triton" / "runtime").mkdir(parents=True)
    (pytester.path / "triton" / "__init__.py").write_text("")
    (pytester.path / "triton" / "testing.py").write_text(FAKE_TESTING)
    (pytester.path / "triton" / "runtime" / "__init__.py").write_text("")
    (pytester.path / "triton" / "runtime" / "driver.py").write_text(FAKE_DRIVER)
    (pytester.path / "fake_di.py").write_text(FAKE_DI)
    for name, body in (extra_tests or {}).items():
        (pytester.path / "benchmark" / name).write_text(textwrap.dedent(body))
