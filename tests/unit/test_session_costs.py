"""scripts/session_costs.py: a session's shapes-file parse and state comparison, measured."""

from __future__ import annotations

import re
import subprocess
import sys

from harness.errors import EXIT_BROKEN_PIPE
from harness.settings.spec import REPO_ROOT

SCRIPT = [sys.executable, str(REPO_ROOT / "scripts" / "session_costs.py")]
TIMES = r"min [\d.]+ median [\d.]+ ms"


def test_it_times_the_parse_own_and_kept_and_the_comparison(tmp_path):
    shapes = tmp_path / "core shapes; x.yaml"
    shapes.write_text("add:\n  shapes:\n" + "    - [64, 64]\n" * 200)
    done = subprocess.run([*SCRIPT, "--shapes", str(shapes), "--import", "yaml, json",
                           "--repeat", "2"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    parse, compare = done.stdout.splitlines()
    assert re.fullmatch(rf"shapes file core shapes; x\.yaml \(\d+\.\d KiB\): parse {TIMES}; "
                        rf"kept {TIMES}", parse)
    assert re.fullmatch(rf"fingerprint of \d+ modules, \d+ classes, \d+ functions: take "
                        rf"[\d.]+ ms; compare {TIMES}", compare)


def test_what_it_cannot_read_or_import_is_named_with_exit_2(tmp_path):
    for args, said in ((["--shapes", str(tmp_path)], f"--shapes {str(tmp_path)!r} is not a "
                        "file"), (["--import", "no_such_module_x"], "--import "
                                  "'no_such_module_x': No module named 'no_such_module_x'")):
        done = subprocess.run([*SCRIPT, *args], capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout) == (2, "") and said in done.stderr


def test_piped_into_head_it_stops_without_a_traceback_as_a_shell_tool_does():
    proc = subprocess.Popen([*SCRIPT, "--repeat", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before the first line: its write fails
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and proc.returncode == EXIT_BROKEN_PIPE, err
