"""record_log: FlagGems' record log lands in the run directory, never in the checkout."""

from __future__ import annotations

import json
import logging

from harness.contract.boundary import RECORD_LOGS_FILE
from harness.plugins.record_log import LOGGER, target

CONFTEST = f"""
    import logging
    def pytest_configure(config):
        handler = logging.FileHandler("result_same.log", mode="w")
        logging.getLogger({LOGGER!r}).addHandler(handler)
        logging.getLogger({LOGGER!r}).setLevel(logging.INFO)
"""


def test_a_foreign_record_log_of_the_same_name_is_neither_truncated_nor_removed(
        pytester, tmp_path, monkeypatch):
    # Regression: FlagGems' handler opened "w" in the checkout and truncated a user's file of
    # the same name; the old redirect then copied its content away and unlinked it.
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_x=f"""
        import logging
        def test_x():
            logging.getLogger({LOGGER!r}).info("ours")
    """)
    foreign = pytester.path / "result_same.log"
    foreign.write_text("[INFO] a user's own pytest\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(run_dir))
    pytester.runpytest_subprocess("-p", "harness.plugins.record_log").assert_outcomes(passed=1)
    assert foreign.read_text() == "[INFO] a user's own pytest\n"
    assert (run_dir / "result_same.log").read_text() == "ours\n"
    assert json.loads((run_dir / RECORD_LOGS_FILE).read_text()) == [
        str(run_dir / "result_same.log")]


def test_only_a_result_log_in_the_working_directory_is_redirected(tmp_path):
    cwd, run_dir = tmp_path / "fg", tmp_path / "run"
    assert target("result_a::b.log", cwd, run_dir) == run_dir / "result_a__b.log"
    assert target(cwd / "result_a.log", cwd, run_dir) == run_dir / "result_a.log"
    assert target("other.log", cwd, run_dir) is None
    assert target("sub/result_a.log", cwd, run_dir) is None
    assert target(tmp_path / "result_a.log", cwd, run_dir) is None


def test_a_record_log_name_past_the_file_name_limit_opens_under_one_within_it(tmp_path):
    # Regression: an absolute --shape_file under a deep OUT made FlagGems' name 261 bytes,
    # and its configure failed opening it; two such names stay two files
    long_a = "result_benchmark_test_mm::test_mm--shape_file_" + "d" * 220 + "_a.yaml.log"
    long_b = long_a.replace("_a.yaml", "_b.yaml")
    a, b = (target(name, tmp_path, tmp_path / "run") for name in (long_a, long_b))
    assert a is not None and b is not None and a != b
    assert all(len(p.name.encode()) <= 255 and p.name.startswith("result_benchmark_test_mm__")
               and p.name.endswith(".log") for p in (a, b))
    (tmp_path / "run").mkdir()
    a.write_text("opens\n")  # the system takes the name
    short = "result_" + "é" * 130 + ".log"  # 267 bytes of 137 characters: cut on a character
    cut = target(short, tmp_path, tmp_path / "run")
    assert cut is not None and len(cut.name.encode()) <= 255 and cut.name.isprintable()


def test_the_constructor_is_restored_and_isinstance_keeps_working(pytester, tmp_path,
                                                                  monkeypatch):
    pytester.makeconftest(CONFTEST + """
        def pytest_sessionstart(session):
            plain = logging.StreamHandler()
            assert not isinstance(plain, logging.FileHandler)
            assert all(isinstance(h, logging.FileHandler)
                       for h in logging.getLogger("flag_gems_benchmark").handlers)
    """)
    pytester.makepyfile(test_x="""
        import logging
        def test_x(tmp_path):
            logging.FileHandler(tmp_path / "result_late.log").close()
            assert (tmp_path / "result_late.log").exists()
    """)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(run_dir))
    before = logging.FileHandler.__init__
    pytester.runpytest("-p", "harness.plugins.record_log").assert_outcomes(passed=1)
    assert logging.FileHandler.__init__ is before
    for handler in list(logging.getLogger(LOGGER).handlers):
        handler.close()
        logging.getLogger(LOGGER).removeHandler(handler)
    assert not (pytester.path / "result_same.log").exists()
    assert (run_dir / "result_same.log").is_file()


def test_two_runs_of_one_node_from_one_checkout_keep_their_own_logs(pytester, tmp_path,
                                                                  monkeypatch):
    # Regression: both runs wrote result_<args>.log in the checkout and one took the other's.
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_x=f"""
        import logging, os
        def test_x():
            logging.getLogger({LOGGER!r}).info(os.environ["ZL_PLUGIN_RUN_DIR"])
    """)
    for name in ("a", "b"):
        run_dir = tmp_path / name
        run_dir.mkdir()
        monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(run_dir))
        pytester.runpytest_subprocess("-p", "harness.plugins.record_log").assert_outcomes(
            passed=1)
        assert (run_dir / "result_same.log").read_text() == f"{run_dir}\n"
    assert not (pytester.path / "result_same.log").exists()
