"""A parallel warmup's share: its one spelling, I/N."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract.warmup_share import parse_share
from harness.errors import UsageError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text", ["1/1", "2/2", "x/2", "0/0", "1", "-1/2"])
def test_a_bad_warmup_share_names_the_value_and_the_form(text):
    with pytest.raises(UsageError, match=f"WARMUP_SHARE={text!r} is not accepted; expected I/N"):
        parse_share(text)



def test_warmup_shares_parse():
    assert parse_share("") is None
    assert parse_share("0/1") == (0, 1) and parse_share("3/4") == (3, 4)


def test_spec_reads_the_share_without_loading_the_records_or_the_tuner_database():
    code = ("import sys, harness.settings.spec; "
            "print(sorted(m for m in sys.modules if m in ('harness.tuning.autotune', "
            "'harness.contract.records', 'harness.contract.tuner_db', 'sqlite3')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert out.strip() == "[]"
