"""Static shape-key resolution: the shape-file entry FlagGems' set_shapes would pick, found
by reading the test module and its class chain, on the cpu suite and on synthetic trees."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.providers.benchmark_classes import resolve_shape_keys
from harness.providers.flaggems import Node, scan_tree
from harness.settings.spec import EMBEDDED_SUITE

CORE = EMBEDDED_SUITE / "benchmark" / "core_shapes.yaml"


def _is_package_module(name: str) -> bool:
    return name == "benchmark" or name.startswith("benchmark.")


@contextmanager
def imported_from(root: Path) -> Iterator[None]:
    """`benchmark.*` imported from `root`, and the session's own `benchmark` modules (another
    test's suite) put back afterwards."""
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if _is_package_module(k)}
    sys.path.insert(0, str(root))
    try:
        yield
    finally:
        sys.path.remove(str(root))
        for k in [k for k in sys.modules if _is_package_module(k)]:
            del sys.modules[k]
        sys.modules.update(saved)


# --------------------------------------------------------------------------- the cpu suite


@pytest.mark.parametrize(("op", "key", "chain", "tried"), [
    # BLAS keeps its shapes under the class name, not the op name
    ("mm", "BlasBenchmark", ("BlasBenchmark", "Benchmark"), ("mm", "BlasBenchmark")),
    ("tanh", "UnaryPointwiseBenchmark", ("UnaryPointwiseBenchmark", "Benchmark"),
     ("tanh", "UnaryPointwiseBenchmark")),
    # the op-name entry beats the class entry
    ("softmax", "softmax", ("UnaryReductionBenchmark", "Benchmark"), ("softmax",)),
    # nothing nearer: the root class's entry
    ("add", "Benchmark", ("BinaryPointwiseBenchmark", "Benchmark"),
     ("add", "BinaryPointwiseBenchmark", "Benchmark")),
])
def test_cpu_suite_keys_are_the_ones_flaggems_picks(op, key, chain, tried):
    res = resolve_shape_keys(EMBEDDED_SUITE, Node(f"benchmark/test_{op}.py", f"test_{op}"), CORE)
    assert (res.op_name, res.key, res.class_chain, res.tried) == (op, key, chain, tried)
    assert res.problem is None and len(res.shapes) == 4


def test_cpu_suite_keys_match_what_the_suite_itself_looks_up():
    """The suite's own Benchmark._shape_entry, run for real, agrees with the static walk."""
    yaml = pytest.importorskip("yaml")
    pytest.importorskip("torch")
    config = yaml.safe_load(CORE.read_text())
    with imported_from(EMBEDDED_SUITE):
        base = importlib.import_module("benchmark.base")
        for node in scan_tree(EMBEDDED_SUITE):
            res = resolve_shape_keys(EMBEDDED_SUITE, node, CORE)
            cls = getattr(base, res.class_chain[0])
            bench = cls.__new__(cls)
            bench.op_name = res.op_name
            assert bench._shape_entry(config) == config[res.key], node.nodeid
            assert tuple(c.__name__ for c in cls.__mro__[:-1]) == res.class_chain


# Calls every test function of the suite with Benchmark.run replaced, in a plain interpreter:
# under this session's --strict-markers the suite's own marks would not import.
_BUILT = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
base = importlib.import_module("benchmark.base")
built = []
base.Benchmark.run = lambda self: built.append([str(d).split(".")[-1] for d in self.dtypes])
for nodeid in sys.argv[2:]:
    path, function = nodeid.split("::")
    built.clear()
    getattr(importlib.import_module(path[:-3].replace("/", ".")), function)()
    print(json.dumps([nodeid, built]))
"""


@pytest.mark.slow  # a fresh interpreter importing torch
def test_cpu_suite_dtypes_match_what_each_benchmark_is_constructed_with():
    """The dtypes read statically are those each suite benchmark is really built with."""
    pytest.importorskip("torch")
    nodes = scan_tree(EMBEDDED_SUITE)
    proc = subprocess.run([sys.executable, "-c", _BUILT, str(EMBEDDED_SUITE),
                           *(n.nodeid for n in nodes)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    built = dict(json.loads(line) for line in proc.stdout.splitlines())
    assert len(built) == len(nodes) == 5
    for node in nodes:
        static = resolve_shape_keys(EMBEDDED_SUITE, node, CORE).dtypes
        assert built[node.nodeid] == [list(static)], node.nodeid


# --------------------------------------------------------------------------- synthetic trees

BASE = """
class Benchmark:
    def __init__(self, op_name, torch_op=None, dtypes=None, is_backward=False, **kwargs):
        self.op_name = op_name

    def set_shapes(self, shape_file_path=None):
        entry = lookup(shape_file_path)
        self.shapes = entry.get("shapes", self.DEFAULT_SHAPES)

class GenericBenchmark(Benchmark):
    pass

class FilteredBenchmark(GenericBenchmark):
    def set_shapes(self, shape_file_path=None):
        super().set_shapes(shape_file_path)
        self.shapes = [s for s in self.shapes if len(s) == 2]

class BlasBenchmark(Benchmark):
    pass

class UnaryPointwiseBenchmark(Benchmark):
    pass
"""


def tree(tmp_path: Path, test: str, shapes: str, base: str = BASE) -> tuple[Path, Path]:
    """A checkout with benchmark/{__init__,base,test_x}.py and a shape file."""
    bench = tmp_path / "fg" / "benchmark"
    bench.mkdir(parents=True)
    (bench / "__init__.py").write_text("")
    (bench / "base.py").write_text(textwrap.dedent(base))
    (bench / "test_x.py").write_text(textwrap.dedent(test))
    shape_file = tmp_path / "shapes.yaml"
    shape_file.write_text(textwrap.dedent(shapes))
    return tmp_path / "fg", shape_file


def resolve(tmp_path: Path, test: str, shapes: str, function: str = "test_x", **kw):
    root, shape_file = tree(tmp_path, test, shapes, **kw)
    return resolve_shape_keys(root, Node("benchmark/test_x.py", function), shape_file)


ENTRIES = """
Benchmark:
  shapes: [[1], [2]]
BlasBenchmark:
  shapes: [[2, 64, 64, 64], [2, 128, 128, 128], [4, 256, 256, 256]]
  shape_desc: "B, M, N, K"
"""


def test_blas_op_takes_the_class_entry_with_its_shape_desc(tmp_path):
    res = resolve(tmp_path, """
        from . import base
        def test_x():
            base.BlasBenchmark(op_name="mm", input_fn=None, torch_op=None).run()
        """, ENTRIES)
    assert res.key == "BlasBenchmark" and res.tried == ("mm", "BlasBenchmark")
    assert res.shapes == ([2, 64, 64, 64], [2, 128, 128, 128], [4, 256, 256, 256])
    assert res.shape_desc == "B, M, N, K"


def test_op_name_entry_beats_every_class_entry(tmp_path):
    res = resolve(tmp_path, """
        from . import base
        def test_x():
            bench = base.BlasBenchmark(op_name="addmm", input_fn=None, torch_op=None)
        """, ENTRIES + "addmm:\n  shapes: [[1, 2, 3, 4]]\n")
    assert (res.key, res.tried, res.shapes) == ("addmm", ("addmm",), ([1, 2, 3, 4],))


def test_local_class_chain_goes_through_the_module_and_base(tmp_path):
    res = resolve(tmp_path, """
        from . import base
        class Mid(base.GenericBenchmark):
            pass
        class Mine(Mid):
            pass
        def test_x():
            Mine(op_name="thing", torch_op=None).run()
        """, "GenericBenchmark:\n  shapes: [[3, 3]]\n" + ENTRIES)
    assert res.class_chain == ("Mine", "Mid", "GenericBenchmark", "Benchmark")
    assert res.key == "GenericBenchmark"
    assert res.tried == ("thing", "Mine", "Mid", "GenericBenchmark")


def test_class_defined_inside_the_test_function(tmp_path):
    res = resolve(tmp_path, """
        from . import base
        def test_x():
            class Inner(base.UnaryPointwiseBenchmark):
                pass
            Inner(op_name="bessel", torch_op=None).run()
        """, ENTRIES)
    assert res.class_chain == ("Inner", "UnaryPointwiseBenchmark", "Benchmark")
    assert res.key == "Benchmark"


@pytest.mark.parametrize(("imports", "name"), [
    ("from .base import BlasBenchmark", "BlasBenchmark"),
    ("from benchmark.base import BlasBenchmark", "BlasBenchmark"),
    ("from .base import BlasBenchmark as Blas", "Blas"),
    ("from benchmark import base as b", "b.BlasBenchmark"),
    ("import benchmark.base as bb", "bb.BlasBenchmark"),
])
def test_classes_imported_by_name_or_through_a_module_alias(tmp_path, imports, name):
    res = resolve(tmp_path, f"""
{imports}
def test_x():
    {name}(op_name="mm", input_fn=None, torch_op=None)
""", ENTRIES)
    assert res.key == "BlasBenchmark" and res.class_chain == ("BlasBenchmark", "Benchmark")


MRO_TEST = """
from . import base
class Mixin:
    pass
class Left(base.GenericBenchmark):
    pass
class Right(base.BlasBenchmark):
    pass
class Both(Mixin, Left, Right):
    pass
def test_x():
    Both(op_name="multi", torch_op=None)
"""


def test_multiple_inheritance_is_linearised_like_type_mro(tmp_path):
    res = resolve(tmp_path, MRO_TEST, "Right:\n  shapes: [[7]]\nBlasBenchmark:\n  shapes: [[8]]\n")
    with imported_from(tmp_path / "fg"):
        both = importlib.import_module("benchmark.test_x").Both
        python_mro = tuple(c.__name__ for c in both.__mro__[:-1])  # without object
    assert res.class_chain == python_mro
    assert res.class_chain == ("Both", "Mixin", "Left", "GenericBenchmark", "Right",
                               "BlasBenchmark", "Benchmark")
    assert res.key == "Right"  # GenericBenchmark has no entry; Right comes before BlasBenchmark


def test_is_backward_appends_backward_to_op_name(tmp_path):
    res = resolve(tmp_path, """
        from . import base
        def test_x():
            base.UnaryPointwiseBenchmark(op_name="tanh", torch_op=None, is_backward=True)
        """, "tanh_backward:\n  shapes: [[5]]\ntanh:\n  shapes: [[6]]\n")
    assert (res.op_name, res.key, res.shapes) == ("tanh_backward", "tanh_backward", ([5],))


def test_op_name_through_a_helper_called_with_a_literal(tmp_path):
    res = resolve(tmp_path, """
        from . import base
        def _run(op_name, torch_op):
            base.GenericBenchmark(op_name=op_name, torch_op=torch_op).run()
        def test_x():
            _run("float_power_tt", None)
        """, "float_power_tt:\n  shapes: [[9]]\n")
    assert (res.op_name, res.key) == ("float_power_tt", "float_power_tt")


def test_op_name_passed_up_by_the_class_init(tmp_path):
    res = resolve(tmp_path, """
        from . import base
        class Fixed(base.GenericBenchmark):
            def __init__(self):
                super().__init__("fixed_op", None, ["a"])
        def test_x():
            Fixed().run()
        """, "fixed_op:\n  shapes: [[4]]\n")
    assert (res.op_name, res.key) == ("fixed_op", "fixed_op")


def test_a_filtering_set_shapes_still_reads_the_file(tmp_path):
    res = resolve(tmp_path, """
        from . import base
        def test_x():
            base.FilteredBenchmark(op_name="f", torch_op=None)
        """, "FilteredBenchmark:\n  shapes: [[1, 2], [3]]\n")
    assert res.key == "FilteredBenchmark"


# --------------------------------------------------------------------------- misses


def test_total_miss_lists_every_candidate_tried(tmp_path):
    res = resolve(tmp_path, """
        from . import base
        class Mine(base.UnaryPointwiseBenchmark):
            pass
        def test_x():
            Mine(op_name="nothing", torch_op=None)
        """, "BlasBenchmark:\n  shapes: [[1, 2, 3, 4]]\n")
    assert res.key is None and res.shapes == ()
    assert res.tried == ("nothing", "Mine", "UnaryPointwiseBenchmark", "Benchmark")
    assert "nothing, Mine, UnaryPointwiseBenchmark, Benchmark" in res.problem
    assert "tried=nothing,Mine,UnaryPointwiseBenchmark,Benchmark" in res.describe()


def test_set_shapes_in_python_is_a_miss_naming_the_class(tmp_path):
    res = resolve(tmp_path, """
        from . import base
        class Pool(base.GenericBenchmark):
            def set_shapes(self, shape_file_path=None):
                self.shapes = [(4, 3, 32, 32)]
        def test_x():
            Pool(op_name="pool", torch_op=None)
        """, "pool:\n  shapes: [[1]]\n")
    assert res.key is None and res.problem.startswith("Pool.set_shapes sets the shapes")


def test_op_name_from_parametrize_is_a_miss(tmp_path):
    res = resolve(tmp_path, """
        import pytest
        from . import base
        @pytest.mark.parametrize("op_name", ["a", "b"])
        def test_x(op_name):
            base.GenericBenchmark(op_name=op_name, torch_op=None)
        """, "a:\n  shapes: [[1]]\n")
    assert res.key is None and res.class_chain == ("GenericBenchmark", "Benchmark")
    assert "op_name (op_name) is not a string known statically" in res.problem


def test_entry_without_a_shapes_list_is_a_miss(tmp_path):
    res = resolve(tmp_path, """
        from . import base
        def test_x():
            base.BlasBenchmark(op_name="mm", torch_op=None)
        """, "mm:\n  shape_desc: M\n")
    assert res.key is None and res.tried == ("mm",) and "DEFAULT_SHAPES" in res.problem


@pytest.mark.parametrize(("test", "function", "needle"), [
    ("def test_x():\n    pass\n", "test_x", "no benchmark constructor call found"),
    ("def test_y():\n    pass\n", "test_x", "no such module-level function"),
    ("def test_x(:\n", "test_x", "does not parse"),
    ("from . import base\ndef test_x():\n    base.BlasBenchmark(op_name='a')\n"
     "    base.BlasBenchmark(op_name='b')\n", "test_x", "constructs several benchmarks"),
    ("def test_x():\n    pass\n", "", "whole file or directory"),
])
def test_structural_misses_say_why(tmp_path, test, function, needle):
    res = resolve(tmp_path, test, ENTRIES, function=function)
    assert res.key is None and needle in res.problem


def test_a_shape_file_that_is_not_a_mapping_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="not a mapping"):
        resolve(tmp_path, "from . import base\ndef test_x():\n"
                "    base.BlasBenchmark(op_name='mm')\n", "- [1, 2]\n")


CONSTS = "import torch\nFLOATS = [torch.float16, torch.float32]\nINTS = [torch.int32]\n"


@pytest.mark.parametrize(("call", "dtypes"), [
    ('base.BlasBenchmark(op_name="mm", dtypes=consts.FLOATS)', ("float16", "float32")),
    ('base.BlasBenchmark(op_name="mm", dtypes=FLOATS + consts.INTS)',
     ("float16", "float32", "int32")),
    ('base.BlasBenchmark(op_name="mm", dtypes=[torch.bfloat16])', ("bfloat16",)),
    ('base.BlasBenchmark(op_name="mm")', ("float16", "float32")),  # Benchmark.DEFAULT_DTYPES
    ('base.BlasBenchmark(op_name="mm", dtypes=pick())', ()),  # Python decides: not known
])
def test_dtypes_are_read_from_the_call_the_consts_module_or_the_class_default(
        tmp_path, call, dtypes):
    root, shape_file = tree(tmp_path, f"""
        import torch
        from . import base, consts
        from .consts import FLOATS
        def test_x():
            {call}.run()
        """, ENTRIES, base="from . import consts\n" + BASE.replace(
            "class Benchmark:\n", "class Benchmark:\n    DEFAULT_DTYPES = consts.FLOATS\n"))
    (root / "benchmark" / "consts.py").write_text(CONSTS)
    res = resolve_shape_keys(root, Node("benchmark/test_x.py", "test_x"), shape_file)
    assert res.key == "BlasBenchmark" and res.dtypes == dtypes


def test_a_class_whose_init_handles_dtypes_leaves_them_unknown(tmp_path):
    res = resolve(tmp_path, """
        import torch
        from . import base
        class Mine(base.BlasBenchmark):
            DEFAULT_DTYPES = [torch.float32]
            def __init__(self, *args, **kwargs):
                super().__init__(*args, dtypes=self.pick(), **kwargs)
        def test_x():
            Mine(op_name="mm").run()
        """, ENTRIES)
    assert res.key == "BlasBenchmark" and res.dtypes == ()
