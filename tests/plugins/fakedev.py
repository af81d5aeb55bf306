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

# triton.Config as the fake autotuners use it: kwargs and the launch options.
FAKE_CONFIG = '''
class Config:
    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None,
                 pre_hook=None):
        self.kwargs, self.num_warps, self.num_stages = kwargs, num_warps, num_stages
        self.num_ctas, self.maxnreg, self.pre_hook = num_ctas, maxnreg, pre_hook

    def all_kwargs(self):
        extra = {"num_warps": self.num_warps, "num_ctas": self.num_ctas,
                 "num_stages": self.num_stages, "maxnreg": self.maxnreg}
        return {**self.kwargs, **{k: v for k, v in extra.items() if v is not None}}
'''

FAKE_AUTOTUNER = FAKE_CONFIG + '''


class Autotuner:
    """Triton's lookup structure: a miss prunes the configs, benchmarks them, caches the best."""

    BENCHED = []

    def __init__(self, fn, arg_names, configs, key):
        self.fn = self.base_fn = fn
        self.arg_names, self.configs, self.keys = arg_names, configs, key
        self.cache, self.nargs = {}, None

    def prune_configs(self, kwargs):
        return self.configs

    def _bench(self, *args, config, **meta):
        Autotuner.BENCHED.append(config.kwargs["BLOCK"])
        ms = abs(config.kwargs["BLOCK"] - 32) / 100  # 32 wins when it is a candidate
        return [ms, ms * 0.9, ms * 1.1]  # Triton's (p50, p20, p80)

    def run(self, *args, **kwargs):
        self.nargs = dict(zip(self.arg_names, args))
        named = {k: v for k, v in {**self.nargs, **kwargs}.items() if k in self.arg_names}
        key = [named[k] for k in self.keys if k in named]
        key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        key = tuple(key)
        if key not in self.cache:
            timings = {c: self._bench(*args, config=c, **kwargs)
                       for c in self.prune_configs(kwargs)}
            self.cache[key] = min(timings, key=timings.get)
            self.configs_timings = timings
        config = self.best_config = self.cache[key]
        ret = self.fn(*args, **config.all_kwargs())
        self.nargs = None  # as Triton: only after the launch returns
        return ret
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
    (pytester.path / "triton" / "runtime" / "autotuner.py").write_text(FAKE_AUTOTUNER)
    (pytester.path / "fake_di.py").write_text(FAKE_DI)
    for name, body in (extra_tests or {}).items():
        (pytester.path / "benchmark" / name).write_text(textwrap.dedent(body))
