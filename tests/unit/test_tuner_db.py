"""FlagGems' libtuner database: export of its winners and rebuild from records."""

from __future__ import annotations

import sqlite3

from harness.contract.records import Records, Table, Winner, from_text, to_text
from harness.contract.tuner_db import build_flaggems_db, export_flaggems_db

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
    records = export_flaggems_db(db)
    assert [t.table for t in records.tables] == [TABLE]
    assert records.tables[0].key_columns == ["key_0", "key_1", "key_2"]
    winners = {w.key: w.config for w in records.winners}
    assert winners[(4096, 4096, "torch.float16")] == {"BLOCK_M": 128, "num_warps": 8,
                                                      "num_stages": 3}



def test_export_keeps_only_the_keys_the_run_used(tmp_path):
    db = tmp_path / "t.db"
    make_libtuner_db(db, ROWS)
    used = [(TABLE.rsplit("-", 1)[0], [1024, 1024, "torch.float16"])]
    records = export_flaggems_db(db, used)
    assert [w.key for w in records.winners] == [(1024, 1024, "torch.float16")]
    assert export_flaggems_db(db, []).winners == []



def test_text_round_trip_rebuilds_an_identical_database(tmp_path):
    db = tmp_path / "a" / "TunedConfig_x_triton_3_6.db"
    db.parent.mkdir()
    make_libtuner_db(db, ROWS)
    text = to_text(export_flaggems_db(db))
    assert text.splitlines()[0].startswith('{"columns": ')  # tables first, then winners
    rebuilt = build_flaggems_db(tmp_path / "b", from_text(text))
    assert [p.name for p in rebuilt] == [db.name]
    assert to_text(export_flaggems_db(rebuilt[0])) == text



def test_a_libtuner_key_with_candidates_stays_out_of_the_rebuilt_database(tmp_path):
    table = Table("flaggems", "T.db", TABLE, (("key_0", "BIGINT", 1), ("B", "BIGINT", 0)))
    records = Records(tables=[table],
                      winners=[Winner("flaggems", TABLE, (1,), {"B": 64}),
                               Winner("flaggems", TABLE, (2,), {"B": 32})],
                      candidates=[Winner("flaggems", TABLE, (2,), {"B": 16})])
    (db,) = build_flaggems_db(tmp_path, records)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(f'SELECT key_0, B FROM "{TABLE}"').fetchall()
    assert rows == [(1, 64)]  # key 2 must miss, so that the replay times its run-off
