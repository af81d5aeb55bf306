"""smoke: each benchmark measures its first input of its first dtype, and only for the run."""

from __future__ import annotations

import ast

import pytest

from harness.plugins import smoke

# A benchmark package as FlagGems lays it out (benchmark.base holds Benchmark), with classes
# that define their inputs and dtypes at different levels, and a test that records what each
# benchmark was given.
BASE = '''
class Benchmark:
    DTYPES = ["float32", "float16", "bfloat16"]

    def set_dtypes(self):
        self.to_bench_dtypes = list(self.DTYPES)

    def get_input_iter(self, dtype):
        for n in (1, 2, 3):
            yield (dtype, n)

    def run(self):
        self.set_dtypes()
        return [i for d in self.to_bench_dtypes for i in self.get_input_iter(d)]


class Unary(Benchmark):
    def get_input_iter(self, dtype):  # its own inputs, extending its base's
        yield from super().get_input_iter(dtype)
        yield (dtype, 4)


class Inherits(Unary):
    pass


class OwnDtypes(Benchmark):
    def set_dtypes(self):
        self.to_bench_dtypes = ["int8", "int16"]
'''

TEST = '''
from benchmark import base
from tests.plugins import test_smoke


def test_given():
    for cls in (base.Benchmark, base.Unary, base.Inherits, base.OwnDtypes):
        print("GIVEN", cls.__name__, cls().run())
        test_smoke.SEEN.append(cls)
'''
SEEN: list[type] = []  # the run's classes, kept past it (the run's modules are dropped)


@pytest.fixture
def suite(pytester):
    pytester.mkpydir("benchmark")
    (pytester.path / "benchmark" / "base.py").write_text(BASE)
    pytester.makepyfile(test_given=TEST)
    pytester.syspathinsert()
    return pytester


def given(result) -> dict[str, list[tuple[str, int]]]:
    found = {}
    for line in result.outlines:
        if "GIVEN " in line:  # the first follows pytest's "test_given.py " on its line
            name, rest = line.split("GIVEN ", 1)[1].split(" ", 1)
            found[name] = ast.literal_eval(rest)
    return found


def test_every_benchmark_class_runs_its_first_input_of_its_first_dtype_only(suite):
    SEEN.clear()
    result = suite.runpytest("-s", "-p", "harness.plugins.smoke")
    result.assert_outcomes(passed=1)
    assert given(result) == {"Benchmark": [("float32", 1)], "Unary": [("float32", 1)],
                             "Inherits": [("float32", 1)], "OwnDtypes": [("int8", 1)]}
    # the cut ends with the run: each class is given its own methods back
    assert len(SEEN) == 4 and [len(cls().run()) for cls in SEEN] == [9, 12, 12, 6]


def test_without_the_plugin_every_input_and_dtype_runs(suite):
    result = suite.runpytest("-s")
    result.assert_outcomes(passed=1)
    found = given(result)
    assert len(found["Benchmark"]) == 9 and len(found["Unary"]) == 12
    assert found["OwnDtypes"][-1] == ("int16", 3)


def test_a_run_without_flaggems_base_module_is_left_alone(pytester):
    pytester.makepyfile(test_plain="def test_plain():\n    print('PLAIN ran')\n")
    result = pytester.runpytest("-s", "-p", "harness.plugins.smoke")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*PLAIN ran*"])


def test_cut_wraps_only_what_each_class_defines_and_undo_puts_it_back():
    class Benchmark:
        def set_dtypes(self):
            self.to_bench_dtypes = ["a", "b"]

        def get_input_iter(self):
            yield from range(5)

    class Child(Benchmark):
        def get_input_iter(self):
            yield from range(10, 15)

    class Grandchild(Child):
        pass

    base = type("base", (), {"Benchmark": Benchmark})
    original = Child.get_input_iter
    patch = pytest.MonkeyPatch()
    assert smoke.cut(base, patch) == 3  # Benchmark's two, Child's input; Grandchild none
    assert list(Grandchild().get_input_iter()) == [10]
    bench = Benchmark()
    bench.set_dtypes()
    assert bench.to_bench_dtypes == ["a"] and "get_input_iter" not in vars(Grandchild)
    patch.undo()
    assert Child.get_input_iter is original and list(Child().get_input_iter()) == [10, 11, 12,
                                                                                    13, 14]
