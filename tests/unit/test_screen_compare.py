"""scripts/screen_compare.py: what the screen saved, and which rows its winners made slower, read
from two campaigns' folders as the harness writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import scripts
from tests.historydata import make_run

SCREEN = {"sweeps": 3, "candidates": 40, "kept": 9, "seconds": 0.8}


@pytest.fixture(scope="module")
def sc():
    return scripts.load("screen_compare")


def run(directory: Path, latencies, wall: float, warmup: float, reference: float,
        **extra) -> None:
    make_run(directory, "tanh", latencies, **extra)
    (directory / "time_breakdown.json").write_text(json.dumps(
        {"schema": 1, "wall_s": wall, "phases": {"warmup": warmup, "reference": reference,
                                                 "replays": 1.0}, "rows": []}))


def campaign(root: Path, a, b, wall: float, warmup: float, **extra) -> Path:
    root.mkdir()
    (root / "campaign.json").write_text("{}")
    run(root / "tanh" / "A" / "r0", a, wall, warmup, 1.0, **extra)
    run(root / "tanh" / "B" / "r0", b, wall, 0.5, 1.0)
    return root


@pytest.fixture
def pair(tmp_path):
    # Row [[64, 64]]: the screened winner reads 2.9% slower, but the same winners moved 3.8%
    # between two runs: noise, not named. Row [[1024, 1024]]: 5.7% slower where the same
    # winners moved 1%: the screen dropped its winner.
    full = campaign(tmp_path / "full", [1.0, 0.010], [1.04, 0.0101], wall=10.0, warmup=6.0)
    screened = campaign(tmp_path / "screened", [1.03, 0.0106], [1.03, 0.0106], wall=6.0,
                        warmup=2.5, screen=SCREEN)
    return screened, full


def compare(sc, pair, capsys) -> tuple[int, str, str]:
    """The script's exit code, standard output and standard error on the pair, as it is now."""
    rc = sc.main([str(pair[0]), str(pair[1])])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_it_names_the_row_the_screen_made_slower_and_what_it_saved(sc, pair, capsys):
    rc, out, _ = compare(sc, pair, capsys)
    assert rc == 0
    assert "tanh: screened wall 6.0 warmup 2.5 reference 1.0; full wall 10.0 warmup 6.0 " \
        "reference 1.0; screen {'sweeps': 3, 'candidates': 40, 'kept': 9, 'seconds': 0.8}" in out
    assert "warmup + reference saved 3.5 s" in out
    assert "slower beyond 1.5% where the same winners held: 1 (tanh torch.float32 " \
        "[[1024, 1024]])" in out
    slower = [line for line in out.splitlines() if line.endswith("<< slower")]
    assert len(slower) == 1 and "[[1024, 1024]] 10.00 us: screened winners -5.66%" in slower[0]
    assert "[[64, 64]] 1000.00 us: screened winners -2.91%, same winners -3.85%" in out


def test_an_operator_without_rows_on_a_side_is_said_and_the_rest_compared(sc, pair, capsys):
    (pair[1] / "tanh" / "B" / "r0" / "results.jsonl").unlink()
    rc, out, _ = compare(sc, pair, capsys)
    assert rc == 0
    assert "  no rows compared: " in out and "warmup + reference saved 3.5 s" in out


@pytest.mark.parametrize("which", ["screened", "full"])
def test_a_folder_that_is_no_campaign_is_named_and_exits_2(sc, pair, tmp_path, capsys, which):
    args = [str(p) for p in pair]
    args[which == "full"] = str(tmp_path)
    assert sc.main(args) == 2
    assert f"error: {str(tmp_path)!r} is not a campaign directory" in capsys.readouterr().err


def test_campaigns_of_no_common_operator_are_refused(sc, pair, capsys):
    (pair[0] / "tanh").rename(pair[0] / "cos")
    rc, _, err = compare(sc, pair, capsys)
    assert rc == 2
    assert "no operator ran side A of round 0 in both" in err


def test_a_run_without_its_breakdown_reads_as_unknown_and_saves_nothing(sc, pair, capsys):
    (pair[0] / "tanh" / "A" / "r0" / "time_breakdown.json").unlink()
    rc, out, _ = compare(sc, pair, capsys)
    assert rc == 0
    assert "tanh: screened -; full wall 10.0" in out and "saved 0.0 s" in out


@pytest.mark.parametrize("screen", [{"sweeps": 0, "candidates": 0, "kept": 0, "seconds": 0.0},
                                    {"sweeps": 2, "candidates": 50, "kept": 50, "seconds": 0.6}])
def test_a_screen_that_dropped_no_candidate_is_never_blamed(sc, tmp_path, capsys, screen):
    # Regression: on an H100 scatter_reduce_two_inplace_sum, which has no sweep, had two rows
    # named "the screen most likely dropped the winner": between-process noise, not the screen.
    full = campaign(tmp_path / "full", [1.0, 0.010], [1.04, 0.0101], wall=10.0, warmup=6.0)
    screened = campaign(tmp_path / "screened", [1.03, 0.0106], [1.03, 0.0106], wall=9.0,
                        warmup=5.5, screen=screen)
    rc, out, _ = compare(sc, (screened, full), capsys)
    assert rc == 0
    assert "where the same winners held: 0\n" in out
    assert "[[1024, 1024]] 10.00 us: screened winners -5.66%, same winners -0.99%  << slower, " \
        "though the screen dropped no candidate of this operator" in out


def test_a_run_that_recorded_no_screen_is_unknown_so_its_slower_row_is_named(sc, tmp_path,
                                                                          capsys):
    # Which candidates a run without screen facts dropped is unknown (its tuning may have run
    # in a parallel warmup's shards): its slower row is named, never cleared.
    full = campaign(tmp_path / "full", [1.0, 0.010], [1.04, 0.0101], wall=10.0, warmup=6.0)
    screened = campaign(tmp_path / "screened", [1.03, 0.0106], [1.03, 0.0106], wall=9.0,
                        warmup=5.5)
    rc, out, _ = compare(sc, (screened, full), capsys)
    assert rc == 0
    assert "where the same winners held: 1 (tanh torch.float32 [[1024, 1024]])" in out
    assert "same winners -0.99%  << slower (the run recorded no screen)" in out
