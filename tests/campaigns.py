"""A saved campaign of one operator, for tests of the driver that need campaign.json on disk."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.axes import Axis
from harness.campaign import plan
from harness.campaign.document import Campaign


def one_op_campaign(directory: Path) -> Campaign:
    """An A/A campaign of `add` (the cpu suite's node), two rounds, saved in `directory`."""
    doc = plan.new_campaign(
        directory=directory, axis=Axis("none", None), caliber={}, argv=[],
        ops={"add": {"node": "benchmark/test_add.py::test_add"}}, rounds=2, walls={},
        walls_from=None)
    doc.python = sys.executable
    doc.save(directory)
    return doc
