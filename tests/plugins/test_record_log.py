"""record_log: FlagGems' record log lands in the run directory, never in the checkout."""

from __future__ import annotations

import logging

from harness.plugins.record_log import LOGGER, redirect


def test_redirect_moves_the_file_and_keeps_what_it_held(tmp_path):
    checkout, run_dir = tmp_path / "fg", tmp_path / "run"
    checkout.mkdir()
    run_dir.mkdir()
    logger = logging.getLogger("test.record_log")
    old = logging.FileHandler(checkout / "result_benchmark_test_tanh::test_tanh.log", mode="w")
    old.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    logger.addHandler(old)
    logger.setLevel(logging.INFO)
    logger.info("enabled")
    (new,) = redirect(logger, run_dir)
    logger.info('{"op_name": "tanh"}')
    for handler in list(logger.handlers):
        handler.close()
        logger.removeHandler(handler)
    assert new.name == "result_benchmark_test_tanh__test_tanh.log"
    assert new.read_text() == '[INFO] enabled\n[INFO] {"op_name": "tanh"}\n'
    assert list(checkout.iterdir()) == []


def test_two_runs_of_one_node_from_one_checkout_keep_their_own_logs(pytester, tmp_path,
                                                                  monkeypatch):
    # Regression: both runs wrote result_<args>.log in the checkout and one took the other's.
    pytester.makeconftest(f"""
        import logging
        def pytest_configure(config):
            handler = logging.FileHandler("result_same.log", mode="w")
            logging.getLogger({LOGGER!r}).addHandler(handler)
            logging.getLogger({LOGGER!r}).setLevel(logging.INFO)
    """)
    pytester.makepyfile(test_x=f"""
        import logging, os
        def test_x():
            logging.getLogger({LOGGER!r}).info(os.environ["ZL_RUN_DIR"])
    """)
    for name in ("a", "b"):
        run_dir = tmp_path / name
        run_dir.mkdir()
        monkeypatch.setenv("ZL_RUN_DIR", str(run_dir))
        pytester.runpytest_subprocess("-p", "harness.plugins.record_log").assert_outcomes(
            passed=1)
        assert (run_dir / "result_same.log").read_text() == f"{run_dir}\n"
    assert not (pytester.path / "result_same.log").exists()
