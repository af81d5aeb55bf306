"""A unit's runs in their sides' shared caches: what each run added, and a rerun's leftovers."""

from __future__ import annotations

import json

from harness.campaign import unit as ab_unit
from harness.campaign.plan import Unit
from harness.run import artifacts


def entry(triton, name, files):
    (triton / name).mkdir(parents=True)
    for file, data in files.items():
        (triton / name / file).write_bytes(data)


def test_a_run_is_credited_with_the_cache_entries_it_added_only(tmp_path):
    triton = tmp_path / "cache" / "A" / "triton"
    entry(triton, "old", {"k.ptx": b"old code", "__grp__k.json": b"{}"})
    before = ab_unit._entries(triton)
    entry(triton, "new", {"k.ptx": b"new code in " + str(tmp_path / "cache" / "A").encode(),
                          "k.json": b"{}", "__grp__k.json": b"{}"})
    kernels, hashes = ab_unit.added_artifacts(triton, before, tmp_path / "cache" / "A")
    assert kernels == 1
    # the side's cache root is masked as a private one is, so side B's twin hashes alike
    assert hashes == [artifacts.fingerprint(b"new code in " + artifacts.PRIVATE_ROOT_TOKEN)]
    assert ab_unit.added_artifacts(tmp_path / "missing", set(), tmp_path) == (0, [])


def test_a_rerun_unit_sets_its_interrupted_attempt_aside_instead_of_deleting_it(tmp_path):
    run = tmp_path / "mm" / "A" / "r0"
    run.mkdir(parents=True)
    (run / "run.log").write_text("partial")
    ab_unit._set_aside(run)
    run.mkdir()
    ab_unit._set_aside(run)
    assert sorted(p.name for p in run.parent.iterdir()) == ["r0.attempt1", "r0.attempt2"]
    assert (run.parent / "r0.attempt1" / "run.log").read_text() == "partial"
    ab_unit._set_aside(run)  # nothing there: nothing to do


def test_each_side_has_its_own_cache_for_both_flaggems_and_triton(tmp_path):
    a, b = ab_unit.cache_env(tmp_path, "A"), ab_unit.cache_env(tmp_path, "B")
    assert set(a) == {"FLAGGEMS_CACHE_DIR", "TRITON_CACHE_DIR"}
    assert not set(a.values()) & set(b.values())
    assert a["TRITON_CACHE_DIR"] == str((tmp_path / "cache" / "A" / "triton").resolve())


def test_a_unit_held_by_a_live_process_is_waited_for_and_never_run_beside_it(tmp_path):
    # Regression: after kill -9 of the driver, a resume ran a unit beside its orphan, which then
    # wrote into the new attempt's run directory.
    import fcntl
    import os
    import threading
    import time

    import pytest

    from harness.errors import UsageError

    lock = tmp_path / "logs" / "mm-r0.lock"
    lock.parent.mkdir()
    holder = open(lock, "a")
    fcntl.flock(holder, fcntl.LOCK_EX)
    with pytest.raises(UsageError, match="unit 'mm/r0' .* is still run by another process"):
        ab_unit.hold_unit_lock(tmp_path, "mm/r0", wait_s=0.3)
    threading.Timer(0.3, holder.close).start()  # the orphan stops: its lock goes with it
    began = time.monotonic()
    fd = ab_unit.hold_unit_lock(tmp_path, "mm/r0", wait_s=10)
    assert time.monotonic() - began >= 0.25
    # held by this descriptor alone, until it closes (the process's end, for `harness ab-unit`)
    again = open(lock, "a")
    with pytest.raises(BlockingIOError):
        fcntl.flock(again, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)
    fcntl.flock(again, fcntl.LOCK_EX | fcntl.LOCK_NB)
    again.close()


def _sides(tmp_path, states):
    unit = Unit("op", 0)
    for side, (state, reason) in states.items():
        run = tmp_path / unit.run_rel(side)
        run.mkdir(parents=True)
        (run / "run_identity.json").write_text(json.dumps({"state": state, "reason": reason}))
    return unit


def test_a_unit_whose_sides_pytest_skipped_is_skipped_and_half_skipped_is_failed(tmp_path):
    both = _sides(tmp_path / "both", {"A": ("skipped", "no vLLM"), "B": ("skipped", "no vLLM")})
    assert ab_unit.skip_reason(tmp_path / "both", both) == "no vLLM"
    assert ab_unit.unit_end(tmp_path / "both", both, [0, 0]) == (0, None)
    half = _sides(tmp_path / "half", {"A": ("skipped", "no vLLM"), "B": ("ok", None)})
    assert ab_unit.skip_reason(tmp_path / "half", half) is None
    assert ab_unit.unit_end(tmp_path / "half", half, [0, 0]) == (
        1, "op/r0: side A skipped (no vLLM) and the other did not")
