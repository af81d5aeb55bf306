"""markers: a marker line written from inside a test reaches the run's stdout, captured or not."""

from __future__ import annotations

import pytest

from harness.plugins.markers import write_marker

TEST = '''
from harness.plugins.markers import write_marker


def test_marks(request):
    print("PRINTED by the test")
    write_marker(request.config, 'BENCHMARK_SOMETHING op=tanh reason="why"')
'''


def test_a_marker_reaches_stdout_on_its_own_line_where_pytest_captures_the_test(pytester):
    pytester.makepyfile(test_marks=TEST)
    result = pytester.runpytest()  # output captured: what the test prints is not shown
    result.assert_outcomes(passed=1)
    assert 'BENCHMARK_SOMETHING op=tanh reason="why"' in result.outlines
    result.stdout.no_fnmatch_line("*PRINTED by the test*")


def test_a_marker_is_a_line_of_its_own_after_pytests_progress_text(pytester):
    # with -s the test's own output follows pytest's "test_marks.py " on one line; a marker
    # printed there would read "test_marks.py BENCHMARK_..." and a grep for ^BENCHMARK miss it
    pytester.makepyfile(test_marks=TEST.replace('print("PRINTED by the test")', "pass"))
    result = pytester.runpytest("-s")
    result.assert_outcomes(passed=1)
    assert [line for line in result.outlines if "BENCHMARK_SOMETHING" in line] == [
        'BENCHMARK_SOMETHING op=tanh reason="why"']


def test_without_a_terminal_reporter_a_marker_is_printed(capsys):
    class Manager:
        def get_plugin(self, name: str) -> None:
            assert name == "terminalreporter"

    config = type("Config", (), {"pluginmanager": Manager()})()
    write_marker(config, "BENCHMARK_OTHER x=1")  # type: ignore[arg-type]
    assert capsys.readouterr().out == "BENCHMARK_OTHER x=1\n"


@pytest.mark.parametrize("flag", [[], ["-s"]])
def test_each_marker_is_one_line_in_the_order_written(pytester, flag):
    pytester.makepyfile(test_two='''
from harness.plugins.markers import write_marker


def test_two(request):
    write_marker(request.config, "FIRST")
    write_marker(request.config, "SECOND")
''')
    result = pytester.runpytest(*flag)
    result.assert_outcomes(passed=1)
    lines = result.outlines
    assert lines.count("FIRST") == 1 and lines.index("SECOND") == lines.index("FIRST") + 1
