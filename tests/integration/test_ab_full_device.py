"""A suite campaign stopped by a full device and resumed; one finished without an operator."""

from __future__ import annotations

import errno
import json

import pytest

from harness import cli, fsutil
from harness.settings.spec import REPO_ROOT

from .test_ab_cli import harness
from .test_ab_suite_cli import suite_args, the_campaign, units

pytestmark = pytest.mark.integration


def test_a_report_refused_by_a_full_device_is_completed_by_the_resume(tmp_path, monkeypatch,
                                                                      capsys):
    # Regression: a full filesystem read as a traceback, exit 1, no interrupted marker.
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))  # the units' children import this tree
    real = fsutil.tempfile.mkstemp

    def mkstemp(**kwargs):
        if kwargs.get("prefix", "").startswith(".ab.json."):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(**kwargs)

    monkeypatch.setattr(fsutil.tempfile, "mkstemp", mkstemp)
    assert cli.main(suite_args(tmp_path, "tanh,add", 1)) == 3
    directory = the_campaign(tmp_path)
    captured = capsys.readouterr()
    assert captured.err.strip() == (f"error: no space left on device writing "
                                    f"{str(directory / 'ab.json')!r}: free space, then "
                                    f"harness ab --resume {directory}")
    assert "AB_INTERRUPTED reason=no_space" in captured.out
    doc = json.loads((directory / "campaign.json").read_text())
    assert doc["state"] == "interrupted" and not (directory / "cache").exists()
    monkeypatch.setattr(fsutil.tempfile, "mkstemp", real)  # space freed
    assert cli.main(["ab", "--resume", str(directory)]) == 0, capsys.readouterr()
    assert {u["status"] for u in units(directory).values()} == {"ok"}
    assert json.loads((directory / "ab.json").read_text())["status"] == "complete"


def test_exclude_finishes_a_campaign_without_an_operator(tmp_path):
    args = suite_args(tmp_path, "boom,tanh", 1)
    assert harness(*args[:-2], "--exclude", "boom", *args[-2:]).returncode == 2
    assert harness(*args).returncode == 1  # boom fails
    directory = the_campaign(tmp_path)
    refused = harness("ab", "--resume", str(directory), "--exclude", "bom")
    assert refused.returncode == 2 and "closest: boom" in refused.stderr
    proc = harness("ab", "--resume", str(directory), "--exclude", "boom")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 excluded of 2 operators" in proc.stdout
    doc = json.loads((directory / "ab.json").read_text())
    assert doc["operators"]["boom"]["verdict"] == "excluded"
    assert json.loads((directory / "campaign.json").read_text())["ops"]["boom"]["excluded"]
