"""End of a run's tuning: the plugin's report folded into autotune_records/."""

from __future__ import annotations

from harness.contract.boundary import USED_FILE
from harness.contract.records import RECORDS_DIR, RECORDS_FILE, read_records
from harness.tuning.autotune import finish_run
from tests.unit.test_tuner_db import ROWS, TABLE, make_libtuner_db


def test_finish_run_records_used_winners_and_counts_fallbacks(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "cache"
    run.mkdir()
    (cache / "config_cache").mkdir(parents=True)
    make_libtuner_db(cache / "config_cache" / "T.db", ROWS)
    (run / USED_FILE).write_text(
        f'{{"kind": "used", "table": "{TABLE.rsplit("-", 1)[0]}", '
        '"key": [4096, 4096, "torch.float16"]}\n'
        '{"kind": "winner", "source": "triton", "kernel": "m:k", "key": [8], '
        '"config": {"BLOCK": 16}}\n'
        '{"kind": "fallback", "kernel": "m:k", "key": [9]}\n')
    outcome = finish_run(run, cache, record=True)
    assert outcome.recorded == 2 and len(outcome.fallbacks) == 1
    assert not (run / USED_FILE).exists()
    sources = sorted(w.source for w in read_records(run).winners)
    assert sources == ["flaggems", "triton"]
    assert finish_run(run, cache, record=False).recorded is None



def test_finish_run_keeps_each_swept_winners_time_beside_the_records(tmp_path):
    run, cache = tmp_path / "run", tmp_path / "cache"
    run.mkdir()
    (cache / "config_cache").mkdir(parents=True)
    make_libtuner_db(cache / "config_cache" / "T.db", ROWS)
    table = TABLE.rsplit("-", 1)[0]  # libtuner names the table without the database's suffix
    (run / USED_FILE).write_text(
        f'{{"kind": "used", "table": "{table}", "key": [4096, 4096, "torch.float16"]}}\n'
        f'{{"kind": "time", "source": "flaggems", "kernel": "{table}", '
        '"key": [4096, 4096, "torch.float16"], "ms": 0.5}\n'
        '{"kind": "winner", "source": "triton", "kernel": "m:k", "key": [8], '
        '"config": {"BLOCK": 16}}\n'
        '{"kind": "time", "source": "triton", "kernel": "m:k", "key": [8], "ms": 0.25}\n'
        '{"kind": "time", "source": "triton", "kernel": "m:k", "key": [8], "ms": 0.125}\n'
        '{"kind": "time", "source": "triton", "kernel": "m:other", "key": [8], "ms": 9.0}\n')
    finish_run(run, cache, record=True)
    records = read_records(run)
    assert records.times == {
        ("flaggems", TABLE, '[4096, 4096, "torch.float16"]'): 0.5,
        ("triton", "m:k", "[8]"): 0.125}  # the last sweep of a key chose its winner
    text = (run / RECORDS_DIR / RECORDS_FILE).read_text()
    assert '"ms"' not in text  # winners.jsonl stays diffable between runs
