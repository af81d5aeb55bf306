"""Tests for harness.fsutil: atomic writes leave the mode a plain open() would."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.fsutil import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    json_by_line,
)


@pytest.fixture
def umask() -> Iterator[None]:
    saved = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(saved)


@pytest.mark.usefixtures("umask")
@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_writes_are_not_private_0600_but_follow_the_umask(tmp_path: Path, mask: int,
                                                                  mode: int) -> None:
    os.umask(mask)
    written = [atomic_write_text(tmp_path / "a.md", "x\n"), atomic_write_bytes(tmp_path / "b.png",
                                                                                b"\x89PNG"),
               atomic_write_json(tmp_path / "c.json", {"k": 1})]
    plain = tmp_path / "plain"
    plain.write_text("x")
    assert stat.S_IMODE(plain.stat().st_mode) == mode
    assert [stat.S_IMODE(p.stat().st_mode) for p in written] == [mode] * 3


def test_atomic_write_replaces_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    atomic_write_text(target, "old\n")
    atomic_write_text(target, "new ü\n")
    assert target.read_bytes() == "new ü\n".encode()
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_a_directory_where_the_file_goes_is_a_usage_error_and_nothing_is_left(
        tmp_path: Path) -> None:
    # Pinned: `harness report` on a campaign whose ab.png was a directory died in a traceback.
    (tmp_path / "ab.png").mkdir()
    with pytest.raises(UsageError, match=r"ab.png' is a directory; expected a file"):
        atomic_write_bytes(tmp_path / "ab.png", b"\x89PNG")
    assert [p.name for p in tmp_path.iterdir()] == ["ab.png"]
    assert list((tmp_path / "ab.png").iterdir()) == []



@pytest.mark.parametrize("doc", [
    {},
    {"units": [], "ops": {}, "n": None},
    {"units": [{"id": "a/r0", "reason": "line\nbreak }, {", "b": [1, {"c": "é"}]}, 2, "x"],
     "ops": {"z": {"looks": [3]}, "a": "plain"}, "argv": ["--out", "dir with ; and ]"]},
    # keys that are not strings are written as json writes them (a hand-made document)
    {1: "x", "walls": {True: 1.5, 2: None, "k: v": {"a": 1}}},
])
def test_json_by_line_is_the_same_document_with_an_item_a_line(doc: dict) -> None:
    text = json_by_line(doc)
    assert json.loads(text) == json.loads(json.dumps(doc)) and text.endswith("}\n")
    items = sum(len(v) for v in doc.values() if isinstance(v, list | dict))
    lines = text.splitlines()
    assert sum(line.startswith("    ") for line in lines) == items  # one line each
    assert len(lines) == 2 + len(doc) + sum(bool(v) for v in doc.values()
                                            if isinstance(v, list | dict)) + items


@pytest.mark.parametrize("doc", [{1: "x", "1": "y"}, {"walls": {True: 1.0, "true": 2.0}}])
def test_json_by_line_refuses_two_keys_that_read_alike_rather_than_lose_one(doc: dict) -> None:
    # json.dumps(sort_keys=True), which campaign.json used before, refused them too
    with pytest.raises(TypeError, match="keys that read alike"):
        json_by_line(doc)
