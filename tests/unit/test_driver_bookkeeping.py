"""scripts/driver_bookkeeping.py: campaign.json's costs at a suite's size, on a small one."""

from __future__ import annotations

import re
import subprocess
import sys

from harness.campaign.document import load
from harness.settings.spec import REPO_ROOT

SCRIPT = [sys.executable, str(REPO_ROOT / "scripts" / "driver_bookkeeping.py")]


def test_it_measures_a_campaign_of_the_size_asked_and_leaves_it_readable(tmp_path):
    done = subprocess.run([*SCRIPT, str(tmp_path / "c"), "--ops", "7", "--rounds", "2",
                           "--repeat", "3"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"14 units, campaign.json \d+ KiB: save [\d.]+ ms, load [\d.]+ ms, "
                        r"a unit started and ended by the driver [\d.]+ ms\n", done.stdout)
    campaign = load(tmp_path / "c", "campaign")
    assert len(campaign.ops) == 7 and [u.status for u in campaign.units[:3]] == ["ok"] * 3


def test_a_folder_that_exists_is_refused_and_left_alone(tmp_path):
    (tmp_path / "kept.txt").write_text("x")
    done = subprocess.run([*SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "exists; give a new folder" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["kept.txt"]
