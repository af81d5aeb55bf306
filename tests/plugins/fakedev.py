"""A simulated accelerator for plugin tests: a fake Triton driver and device interface.

`install(pytester)` writes, next to a copy of the embedded cpu suite, a `triton` package whose
driver returns `fake_di` as the device interface, and whose `testing.do_bench_cudagraph` is a
recognisable stand-in for upstream's. Its autotuner is FAKE_AUTOTUNER, or
FAKE_COMPILING_AUTOTUNER, which compiles through a JIT function (concurrently where a test
writes FAKE_ASYNC_COMPILE as `triton.runtime._async_compile`). `fake_di` has streams, timing
events, synchronize, a `graph` context and a graph class under each vendor's name that fails
the captures chosen by environment variables:

- FAKE_CAPTURE_ERROR: the message raised when a capture ends (after the captured body ran);
- FAKE_CAPTURE_FAIL_AT: comma-separated 1-based capture numbers that fail (default: all);
- FAKE_CAPTURE_REFUSAL: a message raised inside the body first, so that the end-of-capture
  error carries it as __context__, as torch reports a refused op.
"""

from __future__ import annotations

import shutil
import textwrap

from harness.settings.spec import EMBEDDED_SUITE

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
import os

import fake_di

BRIEF = []  # (block, warmup, rep) of every do_bench call: the screen plugin's brief times


def do_bench(fn, warmup=25, rep=100, quantiles=None, return_mode="mean"):
    """A kernel_call of the fake compiling autotuner: FAKE_BRIEF_<BLOCK> ms, else its full
    time plus 0.05 ms."""
    BRIEF.append((fn.block, warmup, rep))
    fn()
    ms = float(os.environ.get(f"FAKE_BRIEF_{fn.block}", abs(fn.block - 32) / 100 + 0.05))
    return [ms, ms * 0.9, ms * 1.1] if quantiles else ms


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    fake_di.UPSTREAM_CALLS["n"] += 1
    fn()
    if grad_to_none is not None:
        # Upstream detach_()es these after its warm-up call; on an H200 every later call of
        # FlagGems' backward fn (autograd.grad on an out built before) then raised this.
        raise RuntimeError("One of the differentiated Tensors appears to not have been used "
                           "in the graph. Set allow_unused=True if this is the desired behavior.")
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

# Triton 3.6's AsyncCompileMode and FutureKernel, reduced to what JITFunction uses of them.
FAKE_ASYNC_COMPILE = '''
from concurrent.futures import as_completed
from contextvars import ContextVar

active_mode = ContextVar("async_compile_active_mode", default=None)


class FutureKernel:
    def __init__(self, finalize_compile, future):
        self.finalize_compile, self.future, self.kernel = finalize_compile, future, None

    def result(self, ignore_errors=False):
        if self.kernel is not None:
            return self.kernel
        try:
            kernel = self.future.result()
        except Exception:
            if ignore_errors:
                return None
            raise
        self.finalize_compile(kernel)
        self.kernel = kernel
        return kernel


class AsyncCompileMode:
    def __init__(self, executor, *, ignore_errors=False):
        self.executor, self.ignore_errors = executor, ignore_errors
        self.raw_futures, self.future_kernels = [], {}

    def submit(self, key, compile_fn, finalize_fn):
        if key in self.future_kernels:
            return self.future_kernels[key]
        future = self.executor.submit(compile_fn)
        future._key = key
        self.raw_futures.append(future)
        self.future_kernels[key] = FutureKernel(finalize_fn, future)
        return self.future_kernels[key]

    def __enter__(self):
        if active_mode.get() is not None:
            raise RuntimeError("Another AsyncCompileMode is already active")
        active_mode.set(self)
        return self

    def __exit__(self, *exc):
        for future in as_completed(self.raw_futures):
            self.future_kernels[future._key].result(self.ignore_errors)
        active_mode.set(None)
'''

# Triton's Autotuner.run/_bench and JITFunction.run/_do_compile, with the compile and the
# launch logged: a compile of BLOCK=48 fails as Triton's OutOfResources does, and the autotuner
# times it as inf.
FAKE_COMPILING_AUTOTUNER = '''
import threading

try:
    from triton.runtime import _async_compile
except ImportError:  # a Triton older than its concurrent compile
    _async_compile = None

LOG = []  # ("compile", block, thread name) and ("time", block)


class OutOfResources(Exception):
    pass


''' + FAKE_CONFIG + '''

class JITFunction:
    def __init__(self):
        self.kernel_cache = {}

    def _compile(self, block, desc=None):
        LOG.append(("compile", block, threading.current_thread().name, desc))
        if block == 48:
            raise OutOfResources(f"BLOCK={block} needs more shared memory than there is")
        return f"kernel{block}"

    def run(self, *args, grid, warmup, **kwargs):
        # like a TMA descriptor's block shape, an argument's block is specialized on
        key = (kwargs["BLOCK"], kwargs["num_warps"], getattr(args[0], "block", None))
        kernel = self.kernel_cache.get(key)
        if kernel is None:
            mode = _async_compile.active_mode.get() if _async_compile else None
            if mode is not None:
                def finalize(k, key=key):
                    self.kernel_cache[key] = k
                kernel = mode.submit(key, lambda: self._compile(key[0], key[2]), finalize)
            else:
                kernel = self.kernel_cache[key] = self._compile(key[0], key[2])
        if not warmup:
            LOG.append(("launch", kwargs["BLOCK"]))
        return kernel


class Autotuner:
    def __init__(self, fn, arg_names, configs, key, pre_hook=None):
        self.fn = fn
        self.base_fn = _base
        self.arg_names, self.configs, self.keys = arg_names, configs, key
        self.cache, self.nargs = {}, None
        self.pre_hook = pre_hook or (lambda kwargs, reset_only=False: None)

    def prune_configs(self, kwargs):
        return self.configs

    def _bench(self, *args, config, **meta):
        current = dict(meta, **config.all_kwargs())
        if config.pre_hook:
            config.pre_hook({**self.nargs, **current})

        def kernel_call():
            self.pre_hook({**self.nargs, **current})
            self.fn.run(*args, **current)

        kernel_call.block = config.kwargs["BLOCK"]
        try:
            return self.do_bench(kernel_call, quantiles=(0.5, 0.2, 0.8))
        except OutOfResources:
            return [float("inf")] * 3

    def do_bench(self, fn, quantiles=None):
        """The tuner's own budget: logged as ("time", BLOCK)."""
        LOG.append(("time", fn.block))
        fn()
        ms = abs(fn.block - 32) / 100
        return [ms, ms * 0.9, ms * 1.1]

    def run(self, *args, **kwargs):
        self.nargs = dict(zip(self.arg_names, args))
        key = (self.nargs["n"],)
        if key not in self.cache:
            pruned = self.prune_configs(kwargs)
            if len(pruned) == 1:
                self.cache[key] = pruned[0]
            else:
                timings = {c: self._bench(*args, config=c, **kwargs) for c in pruned}
                self.cache[key] = min(timings, key=timings.get)
                self.configs_timings = timings
        config = self.best_config = self.cache[key]
        if config.pre_hook:
            config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
        ret = self.fn.run(*args, **kwargs, **config.all_kwargs())
        self.nargs = None
        return ret


def _base(x, n):
    return x
'''

FAKE_DRIVER = '''
class _Active:
    def get_device_interface(self):
        import fake_di
        return fake_di


active = _Active()
'''


def install(pytester, extra_tests: dict[str, str] | None = None,
            autotuner: str = FAKE_AUTOTUNER) -> None:
    """Copy the cpu suite into the pytester dir and add the fake triton (with `autotuner` as
    its triton.runtime.autotuner) and device interface."""
    shutil.copytree(EMBEDDED_SUITE, pytester.path, dirs_exist_ok=True)
    (pytester.path / "triton" / "runtime").mkdir(parents=True)
    (pytester.path / "triton" / "__init__.py").write_text("")
    (pytester.path / "triton" / "testing.py").write_text(FAKE_TESTING)
    (pytester.path / "triton" / "runtime" / "__init__.py").write_text("")
    (pytester.path / "triton" / "runtime" / "driver.py").write_text(FAKE_DRIVER)
    (pytester.path / "triton" / "runtime" / "autotuner.py").write_text(autotuner)
    (pytester.path / "fake_di.py").write_text(FAKE_DI)
    for name, body in (extra_tests or {}).items():
        (pytester.path / "benchmark" / name).write_text(textwrap.dedent(body))
    # an in-process run imports the fake triton and fake_di from here, as `python -m pytest`
    # run in this directory would
    pytester.syspathinsert()
