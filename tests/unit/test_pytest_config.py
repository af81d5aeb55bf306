"""Which file configures FlagGems' pytest run, and the preflight that refuses a foreign one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import PreflightError
from harness.providers.flaggems import check_layout, pytest_config

PROJECT = "[project]\nname = 'outer'\n\n[tool.pytest.ini_options]\naddopts = ['--strict-markers']\n"
FLAGGEMS_INI = "[pytest]\nfilterwarnings =\n    ignore::pytest.PytestUnknownMarkWarning\n"
BENCH = "import pytest\n\n@pytest.mark.addr\ndef test_addr():\n    pass\n"


def checkout(root: Path, *, ini: bool) -> Path:
    """A FlagGems-like checkout at root/FlagGems inside a project whose pyproject configures
    pytest strictly; with or without FlagGems' own pytest.ini."""
    (root / "pyproject.toml").write_text(PROJECT)
    bench = root / "FlagGems" / "benchmark"
    bench.mkdir(parents=True)
    (bench / "base.py").write_text("")
    (bench / "test_addr.py").write_text(BENCH)
    if ini:
        (root / "FlagGems" / "pytest.ini").write_text(FLAGGEMS_INI)
    return root / "FlagGems"


def pytests_own(flaggems: Path) -> Path:
    """The configuration file pytest itself reports for the benchmark run, from its header."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--co", "-p", "no:cacheprovider",
                          "benchmark/test_addr.py"], cwd=flaggems, capture_output=True,
                         text=True, timeout=60).stdout
    head = dict(line.split(": ", 1) for line in out.splitlines()
                if line.startswith(("rootdir: ", "configfile: ")))
    return Path(head["rootdir"]) / head["configfile"]


def test_a_checkout_without_its_ini_inside_a_project_is_refused_naming_the_file(tmp_path):
    # Regression: FlagGems' src and benchmark copied into another project's tree without its
    # pytest.ini ran every operator of a campaign under that project's --strict-markers: each
    # unit failed "'addr' not found in `markers` configuration option".
    flaggems = checkout(tmp_path, ini=False)
    assert pytest_config(flaggems / "benchmark") == tmp_path / "pyproject.toml"
    with pytest.raises(PreflightError) as info:
        check_layout(flaggems)
    assert info.value.check == "benchmark_file"
    assert f"pytest would configure its run from {str(tmp_path / 'pyproject.toml')!r}" \
        in info.value.detail and "copy FlagGems' pytest.ini" in info.value.detail


def test_with_flaggems_own_ini_the_checkout_passes(tmp_path):
    flaggems = checkout(tmp_path, ini=True)
    assert pytest_config(flaggems / "benchmark") == flaggems / "pytest.ini"
    check_layout(flaggems)


@pytest.mark.slow
@pytest.mark.parametrize("ini", [False, True])
def test_pytest_itself_takes_the_file_found(tmp_path, ini):
    flaggems = checkout(tmp_path, ini=ini)
    assert pytests_own(flaggems) == pytest_config(flaggems / "benchmark")


@pytest.mark.parametrize(("name", "text", "counts"), [
    ("tox.ini", "[tox]\nenvlist = py\n", False),
    ("tox.ini", "[pytest]\naddopts = -q\n", True),
    ("setup.cfg", "[metadata]\nname = x\n", False),
    ("setup.cfg", "[tool:pytest]\naddopts = -q\n", True),
    ("pyproject.toml", "[project]\nname = 'x'\n", False),
    ("setup.cfg", "\x00\xff not ini at all [", True),  # pytest stops on it too
    (".pytest.ini", "", True),
    ("pytest.toml", "", True),  # pytest 9's own files, taken first
    (".pytest.toml", "[pytest]\naddopts = ['-q']\n", True),
    ("pyproject.toml", "[tool.pytest.ini_options]  # a comment\naddopts = '-q'\n", True),
    ("pyproject.toml", "[tool]\npytest.ini_options.addopts = '-q'\n", True),
    ("pyproject.toml", "[tool.\"pytest\"]\naddopts = ['-q']\n", True),
    ("pyproject.toml", "[tool.pytest]\n", False),  # no options: pytest reads nothing from it
    ("pyproject.toml", "[tool.pytest.ini_options\n", True),  # pytest stops on it
    ("setup.cfg", "[pytest]\naddopts = -q\n", True),  # pytest refuses it: it stops the run
    ("tox.ini", "[pytest]\naddopts = -q\naddopts = -x\n", True),  # a duplicate stops pytest
])
def test_only_files_pytest_would_read_count(tmp_path, name, text, counts):
    bench = tmp_path / "FlagGems" / "benchmark"
    bench.mkdir(parents=True)
    (tmp_path / "FlagGems" / name).write_text(text, encoding="latin-1")
    found = pytest_config(bench)
    assert (found == tmp_path / "FlagGems" / name) is counts


def test_a_directory_named_like_a_config_is_not_one(tmp_path):
    bench = tmp_path / "benchmark"
    bench.mkdir()
    (tmp_path / "pytest.ini").mkdir()
    (tmp_path / "tox.ini").write_text("[pytest]\n")
    assert pytest_config(bench) == tmp_path / "tox.ini"
