"""The tracked shape sets under runs/shape/ are valid SHAPE_FILEs in FlagGems' BLAS layout."""

from __future__ import annotations

import pytest
import yaml

from harness.run.checks import _check_shape_file
from harness.settings.spec import REPO_ROOT

SHAPE_SETS = sorted((REPO_ROOT / "runs" / "shape").glob("*.yaml"))


def test_there_are_shape_sets():
    assert len(SHAPE_SETS) >= 2


@pytest.mark.parametrize("path", SHAPE_SETS, ids=lambda p: p.name)
def test_shape_set_passes_preflight_and_cites_its_source(path):
    _check_shape_file(path)  # raises PreflightError on a bad file
    text = path.read_text()
    assert "config.json" in text.split("\nmm:")[0]  # the cited public configuration
    for entry in yaml.safe_load(text).values():
        assert entry["shape_desc"] == "B, M, N, K"
        assert all(len(s) == 4 and all(isinstance(d, int) and d > 0 for d in s)
                   for s in entry["shapes"])
