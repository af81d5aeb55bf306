"""What a campaign keeps of side B's compiled code that side A never had, when its caches go."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.axes import Axis
from harness.campaign import driver, plan, result
from harness.campaign.unit import KEPT_UNMATCHED
from harness.settings import spec


def _campaign(directory: Path):
    doc = plan.new_campaign(directory=directory, axis=Axis("X", "SOME_SWITCH"), caliber={},
                            argv=[], ops={"exp": {"node": "n"}}, rounds=1, walls={},
                            walls_from=None)
    doc.save(directory)
    return doc


def _artifact(directory: Path, side: str, entry: str, name: str, code: str) -> None:
    path = directory / plan.CACHE_DIR / side / "triton" / entry / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code)


def test_side_bs_code_that_side_a_never_had_is_kept_beside_side_as_of_its_name(tmp_path):
    doc = _campaign(tmp_path)
    _artifact(tmp_path, "A", "KA", "exp_kernel.ptx", "// exp, as side A compiled it\n")
    _artifact(tmp_path, "B", "KB", "exp_kernel.ptx", "// exp, as side B compiled it\n")
    _artifact(tmp_path, "A", "KS", "sum_kernel.ptx", "// sum\n")
    _artifact(tmp_path, "B", "KS", "sum_kernel.ptx", "// sum\n")  # the same code: not kept
    _artifact(tmp_path, "B", "KB", "__grp__exp_kernel.json", "{}")  # metadata: no code
    driver.drop_side_caches(tmp_path, doc)
    kept = tmp_path / plan.UNMATCHED_DIR
    assert sorted(str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file()) == [
        "A/KB/exp_kernel.ptx", "B/KB/exp_kernel.ptx"]
    assert (kept / "B/KB/exp_kernel.ptx").read_text() == "// exp, as side B compiled it\n"
    assert (kept / "A/KB/exp_kernel.ptx").read_text() == "// exp, as side A compiled it\n"
    assert not (tmp_path / plan.CACHE_DIR).exists()  # the caches still go
    assert len(doc.side_artifacts["B"]) == 2 and len(doc.side_artifacts["A"]) == 2
    doc.python = sys.executable
    notes = result.build_document(tmp_path, doc, spec.resolve({"backend": "cpu"}, {},
                                                             which=lambda _: None)).notes
    assert any(n.startswith("side B compiled artifacts side A never did: 1 of them are kept in "
                            "unmatched/B/, each beside side A's of the same name") for n in notes)


def test_identical_sides_keep_nothing_and_say_nothing(tmp_path):
    doc = _campaign(tmp_path)
    for side in plan.SIDES:
        _artifact(tmp_path, side, "K", "k.ptx", "// the same\n")
    driver.drop_side_caches(tmp_path, doc)
    assert not (tmp_path / plan.UNMATCHED_DIR).exists()
    assert result._unmatched_note(tmp_path) == []


def test_a_few_are_kept_over_every_drop(tmp_path):
    doc = _campaign(tmp_path)
    for n in range(KEPT_UNMATCHED + 4):
        _artifact(tmp_path, "B", f"K{n:02}", "k.ptx", f"// B's kernel {n}\n")
    _artifact(tmp_path, "A", "KA", "k.ptx", "// A's kernel\n")
    driver.drop_side_caches(tmp_path, doc)
    kept = tmp_path / plan.UNMATCHED_DIR
    assert len(list((kept / "B").glob("*/*"))) == KEPT_UNMATCHED
    _artifact(tmp_path, "B", "NEW", "k.ptx", "// yet another\n")  # a resume's cache
    driver.drop_side_caches(tmp_path, doc)
    assert len(list((kept / "B").glob("*/*"))) == KEPT_UNMATCHED
    assert not (kept / "B" / "NEW").exists()


def test_code_side_a_compiled_before_a_resume_is_not_side_bs_own(tmp_path):
    doc = _campaign(tmp_path)
    _artifact(tmp_path, "A", "K1", "k.ptx", "// compiled before the resume\n")
    driver.drop_side_caches(tmp_path, doc)  # the interrupted run: A's cache recorded
    _artifact(tmp_path, "B", "K1", "k.ptx", "// compiled before the resume\n")
    driver.drop_side_caches(tmp_path, doc)  # after the resume: B compiled what A had
    assert not (tmp_path / plan.UNMATCHED_DIR).exists()


def test_a_copy_that_fails_still_records_the_fingerprints_and_drops_the_caches(tmp_path):
    doc = _campaign(tmp_path)
    _artifact(tmp_path, "A", "KA", "k.ptx", "// A's\n")
    _artifact(tmp_path, "B", "KB", "k.ptx", "// B's\n")
    (tmp_path / plan.UNMATCHED_DIR).write_text("a file where the folder goes")
    driver.drop_side_caches(tmp_path, doc)
    assert len(doc.side_artifacts["A"]) == 1 and len(doc.side_artifacts["B"]) == 1
    assert not (tmp_path / plan.CACHE_DIR).exists()
    assert result._unmatched_note(tmp_path) == []  # nothing was kept, so nothing is said
