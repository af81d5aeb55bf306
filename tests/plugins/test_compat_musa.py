"""compat_musa: drops exactly the listed CUDA skip guards, and only where flag_gems is mthreads."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from harness.plugins import compat_musa
from harness.plugins.compat_musa import KEPT, OVERRIDES, Guard, find_override

PLUGIN = "harness.plugins.compat_musa"
# Copy of the fixture listing every CUDA skip guard of FlagGems' benchmark/ at ed2508bc; its header
# says where it comes from and the one row it merges.
GUARDS_TSV = Path(__file__).parents[1] / "data" / "compat" / "cuda_skip_guards.tsv"

# False, as torch.cuda.is_available() is under torch_musa; a constant, so that the suite skips
# the same way on a laptop with CUDA.
HEADER = "import pytest\n\nCUDA_AVAILABLE = False\n\n"
SUITE = {
    # Shaped like FlagGems' own: one function-level guard on its only test.
    "benchmark/test_fft.py": HEADER + """
@pytest.mark.skipif(not CUDA_AVAILABLE, reason="CUDA is not available")
@pytest.mark.fft
def test_perf_fft():
    pass
""",
    # FlagGems' module-level pytestmark: dropping it frees every test of the module.
    "benchmark/test_top_k_per_row_prefill.py": HEADER + """
pytestmark = pytest.mark.skipif(
    not CUDA_AVAILABLE,
    reason="CUDA device required",
)


def test_top_k_per_row_prefill():
    pass


@pytest.mark.parametrize("rows", [1, 64])
def test_rows(rows):
    pass
""",
    # A listed guard next to a near miss (one trailing dot) in the same file: the miss stays.
    "benchmark/test_scaled_dot_product_attention_math.py": HEADER + """
@pytest.mark.skipif(not CUDA_AVAILABLE, reason="CUDA is not available")
def test_scaled_dot_product_attention_math():
    pass


@pytest.mark.skipif(not CUDA_AVAILABLE, reason="CUDA is not available.")
def test_near_miss():
    pass
""",
    # Kept on purpose (cuDNN baseline), with the very reason that is dropped in test_fft.py.
    "benchmark/test_cudnn_attention_forward.py": HEADER + """
@pytest.mark.skipif(not CUDA_AVAILABLE, reason="CUDA is not available")
def test_perf_cudnn_attention_forward():
    pass
""",
    # In neither table: a guard nobody has decided on stays.
    "benchmark/test_new_op.py": HEADER + """
@pytest.mark.skipif(not CUDA_AVAILABLE, reason="CUDA is not available")
def test_new_op():
    pass
""",
}
# FlagGems' conftest stands in for every later hook: it must see the items without dropped guards.
CONFTEST = """
from pathlib import Path


def pytest_collection_modifyitems(config, items):
    guarded = sorted(item.name for item in items if item.get_closest_marker("skipif"))
    Path(config.rootpath, "guarded.txt").write_text(" ".join(guarded))
"""
ALL_GUARDED = ("test_near_miss test_new_op test_perf_cudnn_attention_forward test_perf_fft "
               "test_rows[1] test_rows[64] test_scaled_dot_product_attention_math "
               "test_top_k_per_row_prefill")


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nmarkers =\n    fft: FlagGems op marker\n")
    pytester.mkpydir("benchmark")
    pytester.makeconftest(CONFTEST)
    for name, text in SUITE.items():
        pytester.path.joinpath(name).write_text(text)
    return pytester


def fake_flag_gems(pytester: pytest.Pytester, vendor: str, device: str) -> None:
    pytester.makepyfile(flag_gems=f"vendor_name = {vendor!r}\ndevice = {device!r}\n")
    pytester.syspathinsert()


def guarded(pytester: pytest.Pytester) -> str:
    return pytester.path.joinpath("guarded.txt").read_text()


def test_regression_listed_cuda_guards_no_longer_skip_benchmarks_on_mthreads(suite):
    # test_fft.py and test_top_k_per_row_prefill.py were skipped whole on MUSA, never measured.
    fake_flag_gems(suite, "mthreads", "musa")
    result = suite.runpytest("-p", PLUGIN, "-rs")
    result.assert_outcomes(passed=5, skipped=3)
    result.stdout.fnmatch_lines([
        "*test_cudnn_attention_forward.py:*: CUDA is not available",
        "*test_new_op.py:*: CUDA is not available",
        "*test_scaled_dot_product_attention_math.py:*: CUDA is not available.",
    ], consecutive=False)
    assert guarded(suite) == "test_near_miss test_new_op test_perf_cudnn_attention_forward"


def test_each_dropped_guard_is_one_line_for_run_log(suite):
    fake_flag_gems(suite, "mthreads", "musa")
    result = suite.runpytest("-p", PLUGIN)
    result.stdout.fnmatch_lines_random([
        'COMPAT_SKIP_DROPPED file=benchmark/test_fft.py reason="CUDA is not available" marks=1',
        'COMPAT_SKIP_DROPPED file=benchmark/test_scaled_dot_product_attention_math.py '
        'reason="CUDA is not available" marks=1',
        'COMPAT_SKIP_DROPPED file=benchmark/test_top_k_per_row_prefill.py '
        'reason="CUDA device required" marks=1',
    ])
    assert len([line for line in result.outlines if "COMPAT_SKIP_DROPPED" in line]) == 3


def test_other_vendor_drops_nothing(suite):
    fake_flag_gems(suite, "nvidia", "cuda")
    result = suite.runpytest("-p", PLUGIN)
    result.assert_outcomes(skipped=8)
    result.stdout.no_fnmatch_line("*COMPAT_SKIP_DROPPED*")
    assert guarded(suite) == ALL_GUARDED


def test_without_flag_gems_nothing_is_dropped(suite, monkeypatch):
    monkeypatch.setitem(sys.modules, "flag_gems", None)  # import flag_gems raises ImportError
    result = suite.runpytest("-p", PLUGIN)
    result.assert_outcomes(skipped=8)
    result.stdout.no_fnmatch_line("*COMPAT_SKIP_DROPPED*")


def test_without_the_plugin_every_guard_skips(suite):
    fake_flag_gems(suite, "mthreads", "musa")
    result = suite.runpytest()
    result.assert_outcomes(skipped=8)
    assert guarded(suite) == ALL_GUARDED


def test_a_listed_reason_in_another_directory_is_not_touched(pytester):
    # Matching is by path relative to rootdir: lib/benchmark/test_fft.py is not benchmark/'s.
    pytester.makeini("[pytest]\n")
    pytester.mkpydir("lib")
    pytester.mkpydir("lib/benchmark")
    pytester.path.joinpath("lib/benchmark/test_fft.py").write_text(
        SUITE["benchmark/test_fft.py"])
    fake_flag_gems(pytester, "mthreads", "musa")
    pytester.runpytest("-p", PLUGIN).assert_outcomes(skipped=1)


def test_a_listed_reason_on_a_node_above_the_file_is_not_touched(pytester):
    # A plugin may mark the package; that mark is no guard of test_fft.py, whatever its reason.
    pytester.makeini("[pytest]\n")
    pytester.mkpydir("benchmark")
    pytester.makeconftest("""
import pytest


def pytest_itemcollected(item):
    package = item.getparent(pytest.Package)
    if not package.own_markers:
        package.add_marker(pytest.mark.skipif(True, reason="CUDA is not available"))
""")
    pytester.path.joinpath("benchmark/test_fft.py").write_text("def test_perf_fft():\n    pass\n")
    fake_flag_gems(pytester, "mthreads", "musa")
    pytester.runpytest("-p", PLUGIN).assert_outcomes(skipped=1)


def test_find_override_needs_the_exact_file_and_reason():
    assert find_override("benchmark/test_fft.py", "CUDA is not available") == OVERRIDES[0]
    assert find_override("benchmark/test_fft.py", "CUDA is not available.") is None
    assert find_override("benchmark/test_cudnn_attention_forward.py",
                         "CUDA is not available") is None
    assert find_override("test_fft.py", "CUDA is not available") is None
    assert find_override(None, "CUDA is not available") is None
    assert find_override("benchmark/test_fft.py", None) is None


def read_guards(path: Path = GUARDS_TSV) -> list[Guard]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#")]
    return [Guard(row[0], row[3]) for row in csv.reader(lines, delimiter="\t")]


def test_every_override_is_a_guard_of_the_recorded_tree():
    # A typo in a file or reason would never match, silently: fail here instead.
    assert sorted(set(OVERRIDES) - set(read_guards())) == []


def test_every_kept_guard_is_a_guard_of_the_recorded_tree():
    assert sorted(set(KEPT) - set(read_guards())) == []


def test_every_recorded_guard_is_decided_once():
    # A new CUDA guard in FlagGems must be added to OVERRIDES or KEPT, not to both.
    assert sorted(set(read_guards()) - set(OVERRIDES) - set(KEPT)) == []
    assert set(OVERRIDES).isdisjoint(KEPT)
    assert len(set(OVERRIDES)) == len(OVERRIDES) and len(set(KEPT)) == len(KEPT)


def test_the_docstring_names_every_kept_file():
    named = {guard.file.removeprefix("benchmark/") for guard in KEPT}
    assert sorted(name for name in named if name not in compat_musa.__doc__) == []
    assert all(guard.file.removeprefix("benchmark/") not in compat_musa.__doc__
               for guard in OVERRIDES)
