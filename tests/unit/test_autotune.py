"""Autotune records: libtuner database export and rebuild, text format, merge."""

from __future__ import annotations

import sqlite3

import pytest

from harness import autotune, boundary
from harness.autotune import Records, Table, Winner
from harness.errors import UsageError

TABLE = "mm_kernel_abc123-5d41402abc4b2a76b9719d911017c592"


def make_libtuner_db(path, rows):
    """A database laid out as FlagGems' SQLPersistantModel creates it (column mode)."""
    with sqlite3.connect(path) as conn:
        conn.execute(f'CREATE TABLE "{TABLE}" (key_0 BIGINT, key_1 BIGINT, key_2 VARCHAR, '
                     'BLOCK_M BIGINT, num_warps BIGINT, num_stages BIGINT, '
                     'PRIMARY KEY (key_0, key_1, key_2))')
        conn.execute('CREATE TABLE "mm_kernel_abc123_v_benchmark_v2-ff" (key_0 BIGINT, '
                     'p50 FLOAT, PRIMARY KEY (key_0))')
        conn.executemany(f'INSERT INTO "{TABLE}" VALUES (?, ?, ?, ?, ?, ?)', rows)


ROWS = [(4096, 4096, "torch.float16", 128, 8, 3), (1024, 1024, "torch.float16", 64, 4, 4)]


def test_export_reads_winners_and_skips_benchmark_tables(tmp_path):
    db = tmp_path / "TunedConfig_x_triton_3_6.db"
    make_libtuner_db(db, ROWS)
    records = autotune.export_flaggems_db(db)
    assert [t.table for t in records.tables] == [TABLE]
    assert records.tables[0].key_columns == ["key_0", "key_1", "key_2"]
    winners = {w.key: w.config for w in records.winners}
    assert winners[(4096, 4096, "torch.float16")] == {"BLOCK_M": 128, "num_warps": 8,
                                                      "num_stages": 3}


def test_export_keeps_only_the_keys_the_run_used(tmp_path):
    db = tmp_path / "t.db"
    make_libtuner_db(db, ROWS)
    used = [(TABLE.rsplit("-", 1)[0], [1024, 1024, "torch.float16"])]
    records = autotune.export_flaggems_db(db, used)
    assert [w.key for w in records.winners] == [(1024, 1024, "torch.float16")]
    assert autotune.export_flaggems_db(db, []).winners == []


def test_text_round_trip_rebuilds_an_identical_database(tmp_path):
    db = tmp_path / "a" / "TunedConfig_x_triton_3_6.db"
    db.parent.mkdir()
    make_libtuner_db(db, ROWS)
    text = autotune.to_text(autotune.export_flaggems_db(db))
    assert text.splitlines()[0].startswith('{"columns": ')  # tables first, then winners
    rebuilt = autotune.build_flaggems_db(tmp_path / "b", autotune.from_text(text))
    assert [p.name for p in rebuilt] == [db.name]
    assert autotune.to_text(autotune.export_flaggems_db(rebuilt[0])) == text


def test_text_is_sorted_so_runs_diff_line_by_line():
    a = Winner("triton", "m:k", (2,), {"B": 1})
    b = Winner("triton", "m:k", (1,), {"B": 2})
    lines = autotune.to_text(Records(winners=[a, b])).splitlines()
    assert [line.count('"key": [1]') for line in lines] == [1, 0]


def test_records_path_accepts_run_dir_records_dir_or_file(tmp_path):
    run = tmp_path / "run"
    autotune.write_records(run.mkdir() or run, Records(winners=[Winner("triton", "k", (1,), {})]))
    file = run / "autotune_records" / "winners.jsonl"
    for where in (run, run / "autotune_records", file):
        assert autotune.records_path(where) == file
    with pytest.raises(UsageError, match="holds no autotune_records"):
        autotune.records_path(tmp_path)


def test_malformed_record_names_file_and_line():
    with pytest.raises(UsageError, match="winners.jsonl:2"):
        autotune.from_text('{"kind": "winner", "source": "t", "kernel": "k", "key": [], '
                           '"config": {}}\nnot json\n', "winners.jsonl")


def test_merge_counts_keys_whose_winners_differ():
    table = Table("flaggems", "d.db", TABLE, (("key_0", "BIGINT", 1),))
    one = Records([table], [Winner("flaggems", TABLE, (1,), {"B": 64}),
                            Winner("flaggems", TABLE, (2,), {"B": 64})])
    two = Records([table], [Winner("flaggems", TABLE, (1,), {"B": 128}),
                            Winner("flaggems", TABLE, (3,), {"B": 32})])
    merged, differ = autotune.merge([one, two])
    assert differ == 1 and len(merged.tables) == 1
    assert {w.key: w.config["B"] for w in merged.winners} == {(1,): 64, (2,): 64, (3,): 32}


def test_finish_run_records_used_winners_and_counts_fallbacks(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "cache"
    run.mkdir()
    (cache / "config_cache").mkdir(parents=True)
    make_libtuner_db(cache / "config_cache" / "T.db", ROWS)
    (run / boundary.USED_FILE).write_text(
        f'{{"kind": "used", "table": "{TABLE.rsplit("-", 1)[0]}", '
        '"key": [4096, 4096, "torch.float16"]}\n'
        '{"kind": "winner", "source": "triton", "kernel": "m:k", "key": [8], '
        '"config": {"BLOCK": 16}}\n'
        '{"kind": "fallback", "kernel": "m:k", "key": [9]}\n')
    outcome = autotune.finish_run(run, cache, record=True)
    assert outcome.recorded == 2 and len(outcome.fallbacks) == 1
    assert not (run / boundary.USED_FILE).exists()
    sources = sorted(w.source for w in autotune.read_records(run).winners)
    assert sources == ["flaggems", "triton"]
    assert autotune.finish_run(run, cache, record=False).recorded is None


def test_finish_run_keeps_each_swept_winners_time_beside_the_records(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "cache"
    run.mkdir()
    (cache / "config_cache").mkdir(parents=True)
    make_libtuner_db(cache / "config_cache" / "T.db", ROWS)
    table = TABLE.rsplit("-", 1)[0]  # libtuner names the table without the database's suffix
    (run / boundary.USED_FILE).write_text(
        f'{{"kind": "used", "table": "{table}", "key": [4096, 4096, "torch.float16"]}}\n'
        f'{{"kind": "time", "source": "flaggems", "kernel": "{table}", '
        '"key": [4096, 4096, "torch.float16"], "ms": 0.5}\n'
        '{"kind": "winner", "source": "triton", "kernel": "m:k", "key": [8], '
        '"config": {"BLOCK": 16}}\n'
        '{"kind": "time", "source": "triton", "kernel": "m:k", "key": [8], "ms": 0.25}\n'
        '{"kind": "time", "source": "triton", "kernel": "m:k", "key": [8], "ms": 0.125}\n'
        '{"kind": "time", "source": "triton", "kernel": "m:other", "key": [8], "ms": 9.0}\n')
    autotune.finish_run(run, cache, record=True)
    records = autotune.read_records(run)
    assert records.times == {
        ("flaggems", TABLE, '[4096, 4096, "torch.float16"]'): 0.5,
        ("triton", "m:k", "[8]"): 0.125}  # the last sweep of a key chose its winner
    text = (run / autotune.RECORDS_DIR / autotune.RECORDS_FILE).read_text()
    assert '"ms"' not in text  # winners.jsonl stays diffable between runs


def test_merge_passes_over_untimed_winners_and_without_times_keeps_the_first():
    one = Records(winners=[Winner("triton", "k", (1,), {"B": 64})])
    two = Records(winners=[Winner("triton", "k", (1,), {"B": 32})],
                  times={("triton", "k", "[1]"): 0.9})
    merged, differ = autotune.merge([one, two])
    assert differ == 1 and merged.winners[0].config == {"B": 32}
    merged, _ = autotune.merge([one, Records(winners=[Winner("triton", "k", (1,), {"B": 8})])])
    assert merged.winners[0].config == {"B": 64} and merged.times == {}


@pytest.mark.parametrize("text", ["1/1", "2/2", "x/2", "0/0", "1", "-1/2"])
def test_a_bad_warmup_share_names_the_value_and_the_form(text):
    with pytest.raises(UsageError, match=f"WARMUP_SHARE={text!r} is not accepted; expected I/N"):
        autotune.parse_share(text)


def test_warmup_shares_parse():
    assert autotune.parse_share("") is None
    assert autotune.parse_share("0/1") == (0, 1) and autotune.parse_share("3/4") == (3, 4)


def test_a_merge_keeps_the_other_timed_winners_as_candidates_that_survive_the_text():
    parts = [Records(winners=[Winner("triton", "k", (1,), {"B": b})],
                     times={("triton", "k", "[1]"): ms}) for b, ms in ((64, 0.3), (32, 0.2),
                                                                       (16, 0.4), (32, 0.25))]
    merged, differ = autotune.merge(parts)
    assert differ == 1 and merged.winners[0].config == {"B": 32}
    assert sorted(c.config["B"] for c in merged.candidates) == [16, 64]  # once each
    again = autotune.from_text(autotune.to_text(merged))
    assert again.winners == merged.winners
    assert again.candidates_of() == {("triton", "k", "[1]"): [{"B": 16}, {"B": 64}]}


def test_a_libtuner_key_with_candidates_stays_out_of_the_rebuilt_database(tmp_path):
    table = Table("flaggems", "T.db", TABLE, (("key_0", "BIGINT", 1), ("B", "BIGINT", 0)))
    records = Records(tables=[table],
                      winners=[Winner("flaggems", TABLE, (1,), {"B": 64}),
                               Winner("flaggems", TABLE, (2,), {"B": 32})],
                      candidates=[Winner("flaggems", TABLE, (2,), {"B": 16})])
    (db,) = autotune.build_flaggems_db(tmp_path, records)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(f'SELECT key_0, B FROM "{TABLE}"').fetchall()
    assert rows == [(1, 64)]  # key 2 must miss, so that the replay times its run-off
