"""collect: a session run for named files collects those files alone, and nothing else
changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.plugins.collect import named_files

COUNTER = """
import pytest
SEEN = []
def pytest_collect_file(file_path, parent):
    SEEN.append(file_path.name)
def pytest_collection_finish(session):
    print("visited:", ",".join(sorted(SEEN)), "items:", len(session.items))
"""


def suite(pytester: pytest.Pytester, files: int = 30) -> None:
    pytester.makepyfile(zl_counter=COUNTER)
    pytester.syspathinsert()
    package = pytester.mkpydir("benchmark")
    (package / "conftest.py").write_text(
        "import pytest\n@pytest.fixture\ndef shapes():\n    return [64]\n")
    for i in range(files):
        (package / f"test_{i}.py").write_text(
            f"def test_{i}(shapes):\n    assert shapes == [64]\n")
    (package / "test_broken.py").write_text("def test_broken(:\n")  # never imported either way


def visited(result: pytest.RunResult) -> tuple[list[str], int]:
    line = next(x for x in result.outlines if x.startswith("visited:"))
    names, _, items = line.removeprefix("visited: ").partition(" items: ")
    return names.split(","), int(items)


@pytest.mark.parametrize("node", ["benchmark/test_7.py::test_7", "benchmark/test_7.py"])
def test_a_node_or_a_file_visits_its_own_file_and_runs_as_before(pytester, node):
    suite(pytester)
    result = pytester.runpytest("-p", "zl_counter", "-p", "harness.plugins.collect", node, "-s")
    result.assert_outcomes(passed=1)  # the package's conftest fixture is there
    names, items = visited(result)
    assert names == ["__init__.py", "conftest.py", "test_7.py"] and items == 1
    unpruned = pytester.runpytest("-p", "zl_counter", node, "-s")
    every = {f"test_{i}.py" for i in range(30)} | {"test_broken.py"}
    assert every <= set(visited(unpruned)[0])  # without it: every file under the rootdir


@pytest.mark.parametrize("args", [["benchmark"], ["benchmark/test_3.py", "benchmark"],
                                  ["benchmark/test_3.py", "-k", "test_3"]])
def test_a_folder_among_the_arguments_keeps_the_whole_collection(pytester, args):
    suite(pytester, files=5)
    result = pytester.runpytest("-p", "zl_counter", "-p", "harness.plugins.collect", *args,
                                "-s")
    names, _ = visited(result)
    assert ("test_4.py" in names) == ("benchmark" in args)


def test_a_folder_named_like_a_module_keeps_the_whole_collection(pytester):
    # Regression: a folder `pkg.py/` among the arguments was taken for a file, and its tests
    # were ignored ("no tests ran" where pytest alone ran them).
    suite(pytester, files=2)
    folder = pytester.path / "pkg.py"
    folder.mkdir()
    (folder / "test_d.py").write_text("def test_d():\n    pass\n")
    for args in (["pkg.py"], ["benchmark/test_1.py", "pkg.py"]):
        result = pytester.runpytest("-p", "harness.plugins.collect", *args)
        result.assert_outcomes(passed=len(args))


def test_named_files_are_resolved_and_anything_else_names_none(tmp_path):
    (tmp_path / "a").mkdir()
    for name in ("test_x.py", "test_z.py"):
        (tmp_path / "a" / name).write_text("")
    assert named_files(["a/test_x.py::test_y[1-2]", "b/../a/test_z.py"], tmp_path) == {
        (tmp_path / "a" / "test_x.py").resolve(), (tmp_path / "a" / "test_z.py").resolve()}
    assert named_files(["a/test_x.py", "a"], tmp_path) == frozenset()
    assert named_files(["a/missing.py"], tmp_path) == frozenset()
    assert named_files([], Path("/")) == frozenset()
