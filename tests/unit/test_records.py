"""Autotune records: text format, reading and writing, merge."""

from __future__ import annotations

import pytest

from harness.contract.records import (
    Records,
    Table,
    Winner,
    from_text,
    merge,
    records_path,
    to_text,
    write_records,
)
from harness.errors import UsageError
from tests.unit.test_tuner_db import TABLE


def test_text_is_sorted_so_runs_diff_line_by_line():
    a = Winner("triton", "m:k", (2,), {"B": 1})
    b = Winner("triton", "m:k", (1,), {"B": 2})
    lines = to_text(Records(winners=[a, b])).splitlines()
    assert [line.count('"key": [1]') for line in lines] == [1, 0]



def test_records_path_accepts_run_dir_records_dir_or_file(tmp_path):
    run = tmp_path / "run"
    write_records(run.mkdir() or run, Records(winners=[Winner("triton", "k", (1,), {})]))
    file = run / "autotune_records" / "winners.jsonl"
    for where in (run, run / "autotune_records", file):
        assert records_path(where) == file
    with pytest.raises(UsageError, match="holds no autotune_records"):
        records_path(tmp_path)



def test_malformed_record_names_file_and_line():
    with pytest.raises(UsageError, match="winners.jsonl:2"):
        from_text('{"kind": "winner", "source": "t", "kernel": "k", "key": [], '
                           '"config": {}}\nnot json\n', "winners.jsonl")



def test_merge_counts_keys_whose_winners_differ():
    table = Table("flaggems", "d.db", TABLE, (("key_0", "BIGINT", 1),))
    one = Records([table], [Winner("flaggems", TABLE, (1,), {"B": 64}),
                            Winner("flaggems", TABLE, (2,), {"B": 64})])
    two = Records([table], [Winner("flaggems", TABLE, (1,), {"B": 128}),
                            Winner("flaggems", TABLE, (3,), {"B": 32})])
    merged, differ = merge([one, two])
    assert differ == 1 and len(merged.tables) == 1
    assert {w.key: w.config["B"] for w in merged.winners} == {(1,): 64, (2,): 64, (3,): 32}



def test_merge_passes_over_untimed_winners_and_without_times_keeps_the_first():
    one = Records(winners=[Winner("triton", "k", (1,), {"B": 64})])
    two = Records(winners=[Winner("triton", "k", (1,), {"B": 32})],
                  times={("triton", "k", "[1]"): 0.9})
    merged, differ = merge([one, two])
    assert differ == 1 and merged.winners[0].config == {"B": 32}
    merged, _ = merge([one, Records(winners=[Winner("triton", "k", (1,), {"B": 8})])])
    assert merged.winners[0].config == {"B": 64} and merged.times == {}



def test_a_merge_keeps_the_other_timed_winners_as_candidates_that_survive_the_text():
    parts = [Records(winners=[Winner("triton", "k", (1,), {"B": b})],
                     times={("triton", "k", "[1]"): ms}) for b, ms in ((64, 0.3), (32, 0.2),
                                                                       (16, 0.4), (32, 0.25))]
    merged, differ = merge(parts)
    assert differ == 1 and merged.winners[0].config == {"B": 32}
    assert sorted(c.config["B"] for c in merged.candidates) == [16, 64]  # once each
    again = from_text(to_text(merged))
    assert again.winners == merged.winners
    assert again.candidates_of() == {("triton", "k", "[1]"): [{"B": 16}, {"B": 64}]}
