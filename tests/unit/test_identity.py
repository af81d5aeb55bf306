"""Identity: harness file hashes, git state, the run_identity document."""

from __future__ import annotations

import json
import subprocess

import pytest

from harness.backends import Device
from harness.contract.identity import (
    file_hashes,
    git_state,
    harness_files,
    read_identity,
    update_identity,
    write_identity,
)
from harness.errors import UsageError
from harness.run import identity


def test_harness_files_cover_the_package_and_skip_caches(tmp_path):
    (tmp_path / "harness" / "__pycache__").mkdir(parents=True)
    (tmp_path / "harness" / "a.py").write_text("x = 1\n")
    (tmp_path / "harness" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "Makefile").write_text("all:\n")
    (tmp_path / "README.md").write_text("docs are not code\n")
    assert [p.as_posix() for p in harness_files(tmp_path)] == ["Makefile", "harness/a.py"]


def test_hash_changes_with_one_byte(tmp_path):
    (tmp_path / "Makefile").write_text("all:\n")
    before = file_hashes(tmp_path)["Makefile"]
    (tmp_path / "Makefile").write_text("all: \n")
    assert file_hashes(tmp_path)["Makefile"] != before


def test_git_state_commit_and_dirty(tmp_path):
    assert git_state(tmp_path) == {"commit": None, "dirty": None}
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "f").write_text("1")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    state = git_state(tmp_path)
    assert len(state["commit"]) == 40 and state["dirty"] is False
    (tmp_path / "f").write_text("2")
    assert git_state(tmp_path)["dirty"] is True
    # a checkout unpacked inside this repository is not this repository's commit
    (tmp_path / "flaggems" / "src").mkdir(parents=True)
    assert git_state(tmp_path / "flaggems") == {"commit": None, "dirty": None}


def test_identity_document_records_clocks_before_and_after_and_image_digest():
    before = [Device(0, "NVIDIA H200", "GPU-1", "580.159.04", 143771, 345)]
    after = [Device(0, "NVIDIA H200", "GPU-1", "580.159.04", 143771, 1980)]
    doc = identity.build_identity(
        settings_caliber={"timer": "graph", "level": "core"}, node="n", op="tanh",
        backend="cuda", devices_before=before, devices_after=after,
        versions={"torch": "2.11.0"}, flaggems_dir=None, runtime={"vendor_name": "nvidia"},
        environ={identity.IMAGE_DIGEST_VAR: "sha256:abc"})
    dev = doc["devices"][0]
    assert (dev["name"], dev["driver"], dev["uuid"]) == ("NVIDIA H200", "580.159.04", "GPU-1")
    assert (dev["sm_clock_mhz_before"], dev["sm_clock_mhz_after"]) == (345, 1980)
    assert doc["image_digest"] == "sha256:abc" and doc["timer"] == "graph"
    assert "harness/run/identity.py" in doc["harness"]["files"]
    assert doc["versions"]["torch"] == "2.11.0" and doc["runtime"]["vendor_name"] == "nvidia"


def test_the_run_identity_is_written_and_read_by_its_one_pair(tmp_path):
    doc = {"schema": 1, "op": "tanh", "node": "n", "backend": "cpu", "timer": "direct",
           "rows": 4, "state": "ok", "reason": None, "partial": True,
           "versions": {"flaggems_commit": "abc"}}
    write_identity(tmp_path, doc)
    found = read_identity(tmp_path)
    assert found is not None and found.doc == doc
    assert (found.node, found.backend, found.timer, found.rows, found.state, found.partial,
            found.flaggems_commit) == ("n", "cpu", "direct", 4, "ok", True, "abc")
    update_identity(tmp_path, compiled_kernels=3)
    assert read_identity(tmp_path).doc == {**doc, "compiled_kernels": 3}
    assert read_identity(tmp_path / "none") is None


@pytest.mark.parametrize(("doc", "problem"), [
    ({"schema": 2}, "schema is 2; this harness reads schema 1"),
    ({"schema": 1, "rows": "4"}, "rows is '4', not an integer"),
    ({"state": 3}, "state is 3, not a string"),
    ([], "is not a JSON object"),
])
def test_a_bad_run_identity_is_one_line_naming_the_file_and_the_field(tmp_path, doc, problem):
    (tmp_path / "run_identity.json").write_text(json.dumps(doc))
    with pytest.raises(UsageError) as exc:
        read_identity(tmp_path)
    assert str(tmp_path / "run_identity.json") in str(exc.value)
    assert str(exc.value).endswith(problem)
