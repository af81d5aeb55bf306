"""The history store on SQLite: import, its idempotence, queries, change points, bad input."""

from __future__ import annotations

import json
import math
import random
import sqlite3

import pytest

pytest.importorskip("sqlalchemy")
pytest.importorskip("ruptures")

from harness import cli  # noqa: E402
from harness.errors import UsageError  # noqa: E402
from harness.history import changes, importer, queries, recording, store  # noqa: E402
from harness.history.changes import Point  # noqa: E402
from harness.history.folders import timer_text  # noqa: E402
from harness.stats.welch import welch  # noqa: E402
from tests.historydata import make_batch, make_campaign, make_run  # noqa: E402


@pytest.fixture
def engine(tmp_path):
    eng = store.open_store(store.resolve(str(tmp_path / "h.sqlite"), tmp_path))
    yield eng
    eng.dispose()


def _counts(path):
    with sqlite3.connect(path) as db:
        return {t: db.execute(f"select count(*) from {t}").fetchone()[0]
                for t in ("records", "rows", "verdicts", "units")}


def test_importing_a_folder_twice_adds_nothing(engine, tmp_path):
    campaign = make_campaign(tmp_path / "runs", "20261101-010000", {"mm": [1.0, 2.0]})
    first = importer.import_folder(engine, campaign)
    second = importer.import_folder(engine, campaign)
    assert (first.outcome, second.outcome) == ("added", "unchanged")
    assert _counts(tmp_path / "h.sqlite") == {"records": 1, "rows": 12, "verdicts": 2,
                                              "units": 3}


def test_a_campaign_imported_while_it_runs_is_updated_once_it_ends(engine, tmp_path):
    root = tmp_path / "runs"
    running = make_campaign(root, "20261101-010000", {"mm": [1.0, 2.0]}, state="running",
                            done_rounds=1)
    partial = importer.import_folder(engine, running)
    # Regression: it said 3 of 3 finished, counting a running and a not-run unit as finished
    assert partial.running and "still running (1 of 3 units ended)" in partial.line()
    assert partial.rows == 4
    done = make_campaign(tmp_path / "again", "20261101-010000", {"mm": [1.0, 2.0]})
    (running / "campaign.json").write_text((done / "campaign.json").read_text()
                                           .replace(str(done), str(running)))
    (running / "ab.json").write_text((done / "ab.json").read_text())
    for side in ("A", "B"):
        for r in (1, 2):
            make_run(running / "mm" / side / f"r{r}", "mm", [1.0, 2.0])
    final = importer.import_folder(engine, running)
    assert (final.outcome, final.rows, final.record_id) == ("updated", 12, partial.record_id)
    assert _counts(tmp_path / "h.sqlite")["rows"] == 12  # replaced, not added to


def test_a_batch_holds_its_operators_rows_once(engine, tmp_path):
    root = tmp_path / "runs"
    batch = make_batch(root, "20261101-010000", {"tanh": [1.0, 2.0], "add": [3.0, 4.0]})
    importer.import_folder(engine, root / "tanh" / "20261101-010000")  # it ended first
    importer.import_folder(engine, batch)
    again = importer.import_folder(engine, root / "add" / "20261101-010000")
    assert again.outcome == "unchanged"
    assert [r.kind for r in queries.list_records(engine)] == ["batch"]
    assert _counts(tmp_path / "h.sqlite")["rows"] == 4


def test_a_batch_that_named_its_runs_relative_to_where_it_ran_holds_their_rows_once(
        engine, tmp_path, monkeypatch):
    # Regression: with OUT=runs a batch wrote runs/add/<stamp> into ops_status.csv; its rows
    # then came in beside the run records' (resolved paths), each row counted twice, and a
    # steady series read steps; imported from another folder its rows were dropped silently.
    root = tmp_path / "runs"
    batch = make_batch(root, "20261101-010000", {"tanh": [1.0, 2.0], "add": [3.0, 4.0]})
    status = batch / "ops_status.csv"
    status.write_text(status.read_text().replace(str(root), "runs"))
    importer.import_folder(engine, root / "tanh" / "20261101-010000")  # it ended first
    monkeypatch.chdir(tmp_path.parent)  # an importer elsewhere: runs/ is not here
    found = importer.import_folder(engine, batch)
    assert found.rows == 4
    assert [r.kind for r in queries.list_records(engine)] == ["batch"]
    assert _counts(tmp_path / "h.sqlite")["rows"] == 4


def test_a_batch_names_its_runs_resolved(tmp_path, monkeypatch):
    from harness.campaign.batch import finished_status
    from harness.contract.boundary import RUN_DIR_LINE
    from harness.executors.base import Ended

    monkeypatch.chdir(tmp_path)
    log = tmp_path / "add.log"
    log.write_text(f"{RUN_DIR_LINE}runs/add/20261101-010000\n")
    ended = Ended(task="add", state="ok", rc=0, where="-", wall_s=1.0)
    assert finished_status(ended, log).run == str(tmp_path / "runs" / "add" / "20261101-010000")


def test_a_folder_that_is_no_run_is_refused_before_anything_is_written(engine, tmp_path):
    good = make_run(tmp_path / "runs" / "tanh" / "20261101-010000", "tanh", [1.0])
    (tmp_path / "empty").mkdir()
    with pytest.raises(Exception, match="is no run, batch or campaign"):
        importer.import_paths(engine, [good, tmp_path / "empty"])
    assert _counts(tmp_path / "h.sqlite")["records"] == 0


def _series(values):
    return [Point(f"2026-01-{i + 1:02d}", v, i) for i, v in enumerate(values)]


def test_a_same_stack_series_raises_no_change_and_a_step_is_found_where_it_starts():
    rng = random.Random(7)
    flat = [math.exp(rng.gauss(0.0, 0.01)) for _ in range(40)]
    assert changes.find_changes(_series(flat)) == []
    stepped = [v * (1.08 if i >= 20 else 1.0) for i, v in enumerate(flat)]
    found = changes.find_changes(_series(stepped))
    assert [c.index for c in found] == [20]
    assert found[0].low_pct < 8.0 < found[0].high_pct and found[0].step_pct > 5.0


def test_a_step_within_a_rows_own_noise_is_not_a_change():
    rng = random.Random(3)
    noisy = [math.exp(rng.gauss(0.0, 0.08)) * (1.05 if i >= 20 else 1.0) for i in range(40)]
    # the series moves 8% from night to night: a 5% step is within its noise
    assert changes.find_changes(_series(noisy)) == []
    quiet = [math.exp(rng.gauss(0.0, 0.01)) * (1.05 if i >= 20 else 1.0) for i in range(40)]
    assert [c.index for c in changes.find_changes(_series(quiet))] == [20]


def test_a_step_below_the_floor_is_not_reported_however_sure():
    series = _series([1.0 + 1e-4 * (i % 2) + (0.015 if i >= 20 else 0.0) for i in range(40)])
    assert changes.find_changes(series) == []
    assert [c.index for c in changes.find_changes(series, changes.Options(floor_pct=1.0))] == [20]


def test_welch_matches_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    a, b = [1.0, 1.2, 0.9, 1.1], [1.5, 1.7, 1.4]
    ours = welch(a, b)
    ref = scipy_stats.ttest_ind(b, a, equal_var=False)
    assert ours is not None and ours.p_value == pytest.approx(ref.pvalue, rel=1e-6)


def test_compare_calls_a_change_beyond_the_rounds_noise(engine, tmp_path):
    root = tmp_path / "runs"
    last = importer.import_folder(engine, make_campaign(root, "20261101-010000",
                                                        {"mm": [1.0, 2.0]}))
    tonight = make_campaign(root, "20261102-010000", {"mm": [1.1, 2.0]})
    now = importer.import_folder(engine, tonight)
    found = queries.compare(engine, str(last.record_id), str(now.record_id))
    by_shape = {r.shape: r for r in found.rows}
    assert found.notes == [] and all(r.flags == () for r in found.rows)
    assert by_shape["[[64, 64]]"].beyond_noise and by_shape["[[64, 64]]"].change_pct == \
        pytest.approx(10.0)
    assert not by_shape["[[1024, 1024]]"].beyond_noise


def _cli(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_cli_imports_then_lists_trends_and_finds_changes(tmp_path, capsys):
    root = tmp_path / "runs"
    dirs = [str(make_campaign(root, f"202611{d:02d}-010000", {"mm": [1.0, 2.0]},
                              step_b=1.0)) for d in range(1, 9)]
    for d in range(9, 17):
        dirs.append(str(make_campaign(root, f"202611{d:02d}-010000", {"mm": [1.2, 2.0]})))
    hist = ["--history", str(tmp_path / "h.sqlite")]
    assert _cli(capsys, "history", "import", *dirs, *hist)[0] == 0
    rc, out, _ = _cli(capsys, "history", "list", "--format", "json", *hist)
    assert rc == 0 and len(json.loads(out)) == 16
    rc, out, _ = _cli(capsys, "history", "trend", "mm", "torch.float32", "[[64, 64]]",
                      "--format", "csv", *hist)
    assert rc == 0 and len(out.strip().splitlines()) == 1 + 16 * 2  # both sides, 16 nights
    rc, out, _ = _cli(capsys, "history", "changes", "--format", "json", *hist)
    found = json.loads(out)
    assert {(c["shape"], c["side"], c["first_after"]) for c in found} == {
        ("[[64, 64]]", s, "2026-11-09T01:00:00Z") for s in ("A", "B")}
    assert all(c["step_pct"] == pytest.approx(20.0, abs=0.5) for c in found)
    assert {c["bisect"] for c in found} == {"-"}  # one FlagGems commit on both sides of it
    # --since as a date: 2026-11-1 sorted after 2026-11-10..19 and hid the step; a month 13
    # and garbage read "nothing in the store" with exit 0, over 16 records
    for bad in ("2026-13-01", "garbage", "2026-11-1"):
        with pytest.raises(SystemExit) as info:
            cli.main(["history", "changes", "--since", bad, *hist])
        assert info.value.code == 2
        assert f"{bad!r} is not accepted; expected a UTC date or time such as 2026-11-01" in \
            capsys.readouterr().err
    rc, out, _ = _cli(capsys, "history", "changes", "--since", "2026-11-01T00:30:00+00:30",
                      "--format", "json", *hist)  # midnight UTC: every night
    assert rc == 0 and len(json.loads(out)) == 2
    rc, out, _ = _cli(capsys, "history", "changes", "--since", "2026-11-12", *hist)
    assert rc == 0 and out.strip() == "changes: no step in 4 series since 2026-11-12"
    for bad in ("-5", "nan", "inf", "x"):  # a negative or NaN floor let every step through
        with pytest.raises(SystemExit) as info:
            cli.main(["history", "changes", "--floor", bad, *hist])
        assert info.value.code == 2
        assert f"{bad!r} is not accepted; expected a step size in %" in capsys.readouterr().err


def test_trend_draws_its_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    run = make_run(tmp_path / "runs" / "tanh" / "20261101-010000", "tanh", [1.0, 2.0])
    hist = ["--history", str(tmp_path / "h.sqlite")]
    assert _cli(capsys, "history", "import", str(run), *hist)[0] == 0
    rc, out, _ = _cli(capsys, "history", "trend", "tanh", "--png", str(tmp_path / "t.png"), *hist)
    assert rc == 0 and f"trend png: {tmp_path / 't.png'}" in out
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_corrupt_sqlite_file_is_one_line_and_left_as_it_was(tmp_path, capsys):
    bad = tmp_path / "h.sqlite"
    bad.write_bytes(b"not a database at all\n" * 10)
    run = make_run(tmp_path / "runs" / "tanh" / "20261101-010000", "tanh", [1.0])
    rc, out, err = _cli(capsys, "history", "import", str(run), "--history", str(bad))
    assert rc == 2 and err.count("\n") == 1 and "is not an SQLite database" in err
    assert bad.read_bytes() == b"not a database at all\n" * 10


def test_a_store_of_a_newer_schema_is_refused(tmp_path, capsys):
    path = tmp_path / "h.sqlite"
    store.open_store(store.resolve(str(path), tmp_path)).dispose()
    with sqlite3.connect(path) as db:
        db.execute("update history_meta set value='99' where key='schema_version'")
    rc, _, err = _cli(capsys, "history", "list", "--history", str(path))
    assert rc == 2 and err.count("\n") == 1 and "schema version 99, newer" in err


def test_a_store_of_an_older_schema_is_refused_naming_the_upgrade_that_then_opens_it(
        tmp_path, capsys):
    path = tmp_path / "my h.sqlite"
    run = make_run(tmp_path / "runs" / "tanh" / "20261101-010000", "tanh", [1.0, 2.0])
    assert _cli(capsys, "history", "import", str(run), "--history", str(path))[0] == 0
    with sqlite3.connect(path) as db:
        db.execute("update history_meta set value='0' where key='schema_version'")
    before = path.read_bytes()
    rc, _, err = _cli(capsys, "history", "list", "--history", str(path))
    assert rc == 2 and err.count("\n") == 1 and "schema version 0, older" in err
    assert f"harness history upgrade --history '{path}'" in err
    assert path.read_bytes() == before  # refused before anything is written
    lines = []
    recording.record({"history": str(path)}, {}, tmp_path, run, lines.append)
    assert len(lines) == 1 and "harness history upgrade" in lines[0]
    rc, out, _ = _cli(capsys, "history", "upgrade", "--history", str(path))
    assert rc == 0 and "upgraded from schema version 0 to 1" in out
    rc, out, _ = _cli(capsys, "history", "list", "--format", "json", "--history", str(path))
    assert rc == 0 and [r["kind"] for r in json.loads(out)] == ["run"]
    rc, out, _ = _cli(capsys, "history", "upgrade", "--history", str(path))
    assert rc == 0 and "nothing to upgrade" in out


def test_an_unreachable_server_is_one_line_exit_3(tmp_path, capsys):
    pytest.importorskip("psycopg")
    rc, _, err = _cli(capsys, "history", "list", "--history",
                      "postgresql://nobody:secret@127.0.0.1:1/none")
    assert rc == 3 and err.count("\n") == 1 and "cannot be reached" in err
    assert "secret" not in err


def test_a_bad_history_value_names_what_is_accepted(tmp_path, capsys):
    rc, _, err = _cli(capsys, "history", "list", "--history", "mysql://x/y")
    assert rc == 2 and "HISTORY='mysql://x/y' is not accepted; expected one of: off" in err


def test_recording_into_a_store_that_cannot_be_written_costs_one_line(tmp_path):
    run = make_run(tmp_path / "runs" / "tanh" / "20261101-010000", "tanh", [1.0])
    blocker = tmp_path / "file"
    blocker.write_text("a file where the store's folder would be\n")
    lines: list[str] = []
    recording.record({"history": str(blocker / "h.sqlite")}, {}, tmp_path, run, lines.append)
    assert len(lines) == 1 and "not recorded" in lines[0]
    assert f"harness history import {run}" in lines[0]
    recording.record({"history": "off"}, {}, tmp_path, run, lines.append)
    recording.record({}, {}, tmp_path / "runs", run, lines.append)  # the default store
    assert len(lines) == 1 and (tmp_path / "runs" / "history.sqlite").is_file()


def test_a_synthetic_history_claims_the_machine_its_caller_names(engine, tmp_path):
    from harness.history import synth

    machine = synth.Machine("cpu", "Example CPU")
    rows = synth.suite(n_ops=3, n_rows=6)
    campaign = synth.write_campaign(tmp_path / "campaign", rows, machine, rounds=1)
    importer.import_folder(engine, campaign)
    synth.build_year(engine, rows, machine, count=2)
    with engine.connect() as conn:
        seen = set(conn.exec_driver_sql("select backend, device from records").fetchall())
    assert seen == {("cpu", "Example CPU")}


def _nights(engine, commits, latencies):
    """One batch record a night, its FlagGems commit and mm's one row at that latency."""
    from harness.history.folders import Folder, Row

    for n, (commit, ms) in enumerate(zip(commits, latencies, strict=True)):
        path = f"/nightly/batch/night{n:02d}"
        rows = tuple(Row("mm", "torch.float16", "[[64, 64]]", "", 0, "SUCCESS", ms * f, None,
                         None, None, "graph", "", f"{path}/mm/r{r}")
                     for r, f in enumerate((0.999, 1.0, 1.001)))
        record = {"kind": "batch", "path": path, "stamp": str(n), "digest": str(n),
                  "state": "complete", "started_utc": f"2026-11-{n + 1:02d}T01:00:00Z",
                  "backend": "cpu", "device": "d", "timer": "graph", "stack_a": commit,
                  "flaggems_commit": commit, "ops": 1, "verdicts": "{}"}
        with engine.begin() as conn:
            importer.write_folder(conn, Folder(record, rows))


def test_trend_by_commit_puts_each_commits_nights_together(tmp_path, capsys):
    eng = store.open_store(store.resolve(str(tmp_path / "h.sqlite"), tmp_path))
    _nights(eng, ["c1", "c2", "c1", "c2", ""], [1.0, 1.1, 1.0, 1.1, 1.05])
    eng.dispose()
    hist = ["--history", str(tmp_path / "h.sqlite")]
    orders = {}
    for by in ("time", "commit"):
        rc, out, _ = _cli(capsys, "history", "trend", "mm", "--by", by, "--format", "json",
                          *hist)
        assert rc == 0
        orders[by] = [(r["flaggems_commit"], r["when"][8:10]) for r in json.loads(out)]
    assert orders["time"] == [("c1", "01"), ("c2", "02"), ("c1", "03"), ("c2", "04"),
                              ("-", "05")]
    assert orders["commit"] == [("c1", "01"), ("c1", "03"), ("c2", "02"), ("c2", "04"),
                                ("-", "05")]


def test_a_step_between_two_commits_prints_the_bisect_command_that_would_pin_it(tmp_path,
                                                                                 capsys):
    eng = store.open_store(store.resolve(str(tmp_path / "h.sqlite"), tmp_path))
    _nights(eng, ["aaa"] * 8 + ["bbb"] * 8, [1.0] * 8 + [1.2] * 8)
    eng.dispose()
    rc, out, _ = _cli(capsys, "history", "changes", "--format", "json", "--history",
                      str(tmp_path / "h.sqlite"))
    (found,) = json.loads(out)
    assert rc == 0 and found["first_after"] == "2026-11-09T01:00:00Z"
    assert found["bisect"] == ("harness bisect --good=aaa --bad=bbb --op=mm --backend=cpu "
                               "--dtypes=float16 '--shape=[[64, 64]]'")
    rc, out, _ = _cli(capsys, "history", "changes", "--format", "md", "--history",
                      str(tmp_path / "h.sqlite"))
    assert "harness bisect --good=aaa --bad=bbb" in out


def test_each_side_of_a_flaggems_commit_campaign_is_its_own_commit(tmp_path, capsys):
    from harness.history.folders import Folder, Row

    eng = store.open_store(store.resolve(str(tmp_path / "h.sqlite"), tmp_path))
    rows = tuple(Row("mm", "torch.float16", "[[64, 64]]", side, 0, "SUCCESS", 1.0, None, None,
                     None, "graph", "", f"/c/mm/{side}/r0") for side in ("A", "B"))
    record = {"kind": "campaign", "path": "/c", "stamp": "1", "digest": "1", "state": "done",
              "started_utc": "2026-11-01T01:00:00Z", "backend": "cpu", "axis": "flaggems",
              "axis_a": "aaa", "axis_b": "bbb", "flaggems_commit": "aaa", "ops": 1,
              "verdicts": "{}"}
    with eng.begin() as conn:
        importer.write_folder(conn, Folder(record, rows))
    eng.dispose()
    rc, out, _ = _cli(capsys, "history", "trend", "mm", "--format", "json", "--history",
                      str(tmp_path / "h.sqlite"))
    assert rc == 0 and {(r["side"], r["flaggems_commit"]) for r in json.loads(out)} == {
        ("A", "aaa"), ("B", "bbb")}


@pytest.mark.parametrize("content", [b"\x89PNG\xff\xfe\n", b'{"op": "tanh", "dtype": "flo',
                                     b"[1, 2]\n"])
def test_a_corrupt_results_jsonl_is_one_line_naming_its_line_and_creates_no_store(
        tmp_path, capsys, monkeypatch, content):
    # Regression: a binary or cut-short results.jsonl was a traceback, after the store existed.
    run = make_run(tmp_path / "runs" / "tanh" / "20261101-010000", "tanh", [1.0])
    (run / "results.jsonl").write_bytes(content)
    monkeypatch.setenv("ZL_HISTORY", str(tmp_path / "h.sqlite"))
    assert cli.main(["history", "import", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{str(run / 'results.jsonl')!r} line 1 is not a result row" \
        in err, err
    assert not (tmp_path / "h.sqlite").exists()


def test_a_folder_that_is_no_run_creates_no_store(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ZL_HISTORY", str(tmp_path / "h.sqlite"))
    assert cli.main(["history", "import", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "h.sqlite").exists()


@pytest.mark.parametrize("limit", ["-1", "0", "99999999999999999999"])
def test_history_list_refuses_a_limit_out_of_range_in_one_line(tmp_path, capsys, monkeypatch,
                                                               limit):
    # Regression: --limit -1 listed everything and a huge one was an OverflowError traceback.
    monkeypatch.setenv("ZL_HISTORY", str(tmp_path / "h.sqlite"))
    store.open_store(store.resolve(str(tmp_path / "h.sqlite"), tmp_path)).dispose()
    with pytest.raises(SystemExit) as info:
        cli.main(["history", "list", "--limit", limit])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"--limit: {limit!r} is not accepted; expected a whole number from 1 to" in err
    assert "Traceback" not in err


def test_a_batch_with_an_operator_running_is_imported_as_running_with_its_progress(engine,
                                                                                  tmp_path):
    # A batch records an operator running when it begins; the import said "still running ()".
    batch = make_batch(tmp_path / "runs", "20261101-010000", {"tanh": [1.0]})
    status = batch / "ops_status.csv"
    status.write_text(status.read_text() + "add,,running,,,,,,,,,,\n")
    found = importer.import_folder(engine, batch)
    assert found.running and found.progress == "1 of 2 operators ended"


def test_a_records_timer_names_its_graph_algorithm_so_two_algorithms_are_two_series():
    # Regression: GRAPH_TIMER's default moved from upstream to adaptive; nights timed by each
    # shared one series, and the night of the upgrade could read as a step.
    assert timer_text({"timer": "graph", "graph_timer": "adaptive"}) == "graph:adaptive"
    assert timer_text({"timer": "graph"}) == "graph:upstream"  # made before GRAPH_TIMER
    assert timer_text({"timer": "direct", "graph_timer": "adaptive"}) == "direct"
    assert timer_text({}) is None


def test_a_runs_rows_are_its_operators_whatever_flaggems_record_calls_them(engine, tmp_path):
    # Regression: FlagGems names the rows of its four scatter_reduce_two benchmarks (and of ten
    # einsum ones) alike, so two operators' nights of one shape went into one series.
    for op, ms in (("scatter_reduce_two_inplace_sum", 1.0),
                   ("scatter_reduce_two_inplace_mean", 9.0)):
        importer.import_folder(engine, make_run(tmp_path / op / "20261101-010000", op,
                                                [ms, ms], record_op="scatter_reduce_"))
    with sqlite3.connect(tmp_path / "h.sqlite") as db:
        found = sorted(db.execute("select distinct op, latency_ms from rows").fetchall())
    assert found == [("scatter_reduce_two_inplace_mean", 9.0),
                     ("scatter_reduce_two_inplace_sum", 1.0)]


def test_a_run_of_a_whole_file_keeps_the_records_names(tmp_path):
    from harness.history.folders import read_folder

    run = make_run(tmp_path / "scatter_reduce_two" / "20261101-010000", "scatter_reduce_two",
                   [1.0, 2.0], record_op="scatter_reduce_",
                   node="benchmark/test_scatter_reduce_two.py")
    assert {r.op for r in read_folder(run).rows} == {"scatter_reduce_"}


def as_flaggems_names_them(root):
    """Every run under `root` as FlagGems and a TEST_NODE run name it: rows scatter_reduce_,
    the identity's op the node's first mark, scatter_reduce_two_."""
    for results in root.rglob("results.jsonl"):
        rows = [json.loads(line) for line in results.read_text().splitlines()]
        results.write_text("".join(json.dumps({**r, "op": "scatter_reduce_"}) + "\n"
                                   for r in rows))
        ident = results.parent / "run_identity.json"
        ident.write_text(json.dumps({**json.loads(ident.read_text()),
                                     "op": "scatter_reduce_two_"}))


@pytest.mark.parametrize("kind", ["batch", "campaign"])
def test_a_batch_or_campaigns_rows_are_its_operators(tmp_path, kind):
    # Regression: a campaign's units run by TEST_NODE, so their identities name the node's first
    # mark (scatter_reduce_two_, shared by four operators), and a batch's runs their records'.
    from harness.history.folders import read_folder

    ops = {"scatter_reduce_two_inplace_sum": [1.0, 2.0],
           "scatter_reduce_two_inplace_mean": [9.0, 8.0]}
    made = (make_batch(tmp_path, "20261101-010000", ops) if kind == "batch" else
            make_campaign(tmp_path, "20261101-010000", ops, rounds=2))
    as_flaggems_names_them(tmp_path)
    found = {(r.op, r.latency_ms) for r in read_folder(made).rows if r.side in ("", "A")}
    assert {op for op, _ in found} == set(ops)
    assert {ms for op, ms in found if op.endswith("_mean")} >= {9.0}
    assert all(ms < 3 for op, ms in found if op.endswith("_sum"))


def test_a_campaign_with_one_broken_side_identity_still_imports_its_rows(tmp_path):
    # Regression: naming rows by each side run's identity made one bad identity fail the
    # campaign's whole import.
    from harness.history.folders import read_folder

    made = make_campaign(tmp_path, "20261101-010000", {"mm": [1.0, 2.0]}, rounds=1)
    (made / "mm" / "B" / "r0" / "run_identity.json").write_text(json.dumps({"rows": "3"}))
    assert {r.op for r in read_folder(made).rows} == {"mm"}


def test_a_folder_imported_by_an_older_reader_is_written_again(engine, tmp_path, monkeypatch):
    # A store filled before rows were named by their operator holds them by the record's
    # name; the next import of the same folder must replace them, not call it unchanged.
    from harness.history import folders

    op = "scatter_reduce_two_inplace_sum"
    run = make_run(tmp_path / op / "20261101-010000", op, [1.0, 2.0], record_op="scatter_reduce_")
    monkeypatch.setattr(folders, "READER_VERSION", 1)
    first = importer.import_folder(engine, run)
    assert importer.import_folder(engine, run).outcome == "unchanged"
    monkeypatch.setattr(folders, "READER_VERSION", 2)
    again = importer.import_folder(engine, run)
    assert (again.outcome, again.record_id) == ("updated", first.record_id)
    assert importer.import_folder(engine, run).outcome == "unchanged"
    assert _counts(tmp_path / "h.sqlite")["records"] == 1


def test_rows_written_while_a_unit_runs_are_not_called_unchanged(engine, tmp_path):
    # Regression: the digest read campaign.json and ab.json alone, so an import while a unit's
    # side runs were being written said "unchanged (40 rows)" with 32 in the store.
    running = make_campaign(tmp_path / "runs", "20261101-010000", {"mm": [1.0, 2.0]},
                            state="running", done_rounds=1)
    first = importer.import_folder(engine, running)
    make_run(running / "mm" / "A" / "r1", "mm", [1.0, 2.0])  # round 1's side A, mid-unit
    again = importer.import_folder(engine, running)
    assert (first.rows, again.outcome, again.rows) == (4, "updated", 6)
    assert _counts(tmp_path / "h.sqlite")["rows"] == 6
    assert importer.import_folder(engine, running).outcome == "unchanged"


def test_a_store_that_cannot_be_written_is_one_line_and_holds_nothing_of_the_import(
        tmp_path, capsys, monkeypatch):
    # Regression: importing into a read-only SQLite file raised sqlite3's OperationalError as a
    # traceback, exit 1: opening a store that exists writes nothing, so its first write is here.
    import sqlalchemy.exc

    run = make_run(tmp_path / "runs" / "tanh" / "20261101-010000", "tanh", [1.0])
    hist = ["--history", str(tmp_path / "h.sqlite")]
    assert _cli(capsys, "history", "import", str(run), *hist)[0] == 0
    other = make_run(tmp_path / "runs" / "add" / "20261101-010000", "add", [1.0])

    def read_only(conn, folder):
        conn.execute(__import__("sqlalchemy").text("select 1"))
        raise sqlalchemy.exc.OperationalError("INSERT", {}, sqlite3.OperationalError(
            "attempt to write a readonly database"))

    monkeypatch.setattr(importer, "write_folder", read_only)
    rc, out, err = _cli(capsys, "history", "import", str(other), *hist)
    assert rc == 3 and "Traceback" not in err
    assert err.strip().endswith("cannot be written: attempt to write a readonly database")
    assert err.count("\n") == 1
    assert _counts(tmp_path / "h.sqlite")["records"] == 1


def test_a_switchs_sides_are_series_of_their_settings_and_compare_refuses_two_settings(
        tmp_path, capsys):
    # Regression: side A of OMP_NUM_THREADS 1 -> 2 and side A of 2 -> 1 were one series, and
    # compare read them 50% apart, "beyond noise", with no note.
    from harness.history.folders import Folder, Row

    eng = store.open_store(store.resolve(str(tmp_path / "h.sqlite"), tmp_path))
    nights = [("1", "2", 1.0)] * 4 + [("2", "1", 0.5)] * 4  # each side's value, A's latency
    for n, (a, b, ms) in enumerate(nights):
        path = f"/nightly/ab/n{n:02d}"
        rows = tuple(Row("mm", "torch.float16", "[[64, 64]]", side, 0, "SUCCESS",
                         (ms if side == "A" else 1.5 - ms) * f, None, None, None, "graph", "",
                         f"{path}/mm/{side}/r{r}")
                     for side in "AB" for r, f in enumerate((0.999, 1.0, 1.001)))
        record = {"kind": "campaign", "path": path, "stamp": str(n), "digest": str(n),
                  "state": "complete", "started_utc": f"2026-11-{n + 1:02d}T01:00:00Z",
                  "backend": "cpu", "device": "d", "timer": "graph", "axis": "OMP_NUM_THREADS",
                  "axis_a": a, "axis_b": b, "ops": 1, "verdicts": "{}"}
        with eng.begin() as conn:
            importer.write_folder(conn, Folder(record, rows))
    found = queries.series(eng)
    assert {(k.side, k.setting): len(v) for k, v in found.items()} == {
        ("A", "OMP_NUM_THREADS=1"): 4, ("A", "OMP_NUM_THREADS=2"): 4,
        ("B", "OMP_NUM_THREADS=2"): 4, ("B", "OMP_NUM_THREADS=1"): 4}
    assert all(changes.find_changes(points) == [] for points in found.values())
    assert len(set(queries.series_labels(list(found)).values())) == 4
    with pytest.raises(UsageError, match="setting: 1='OMP_NUM_THREADS=1' "
                                         "8='OMP_NUM_THREADS=2'"):
        queries.compare(eng, "1", "8")
    assert queries.compare(eng, "1", "4").rows  # one setting: compared
    eng.dispose()


def test_a_folder_copied_to_another_path_is_recorded_once(engine, tmp_path):
    # Regression: a copy of runs/ (or one filesystem mounted at two paths) made each night two
    # records; half the night-to-night differences read zero, the noise shrank, and a steady
    # series read 2 to 7 steps.
    import shutil

    run = make_run(tmp_path / "runs" / "tanh" / "20261101-010000", "tanh", [1.0, 2.0])
    batch = make_batch(tmp_path / "runs", "20261102-010000", {"add": [3.0]})
    first = [importer.import_folder(engine, p) for p in (run, batch)]
    shutil.copytree(tmp_path / "runs", tmp_path / "copy")
    copies = [importer.import_folder(engine, tmp_path / "copy" / p.relative_to(tmp_path / "runs"))
              for p in (run, batch)]
    assert [c.outcome for c in copies] == [
        f"unchanged (a copy of record {f.record_id}, at another path)" for f in first]
    assert [c.record_id for c in copies] == [f.record_id for f in first]
    assert _counts(tmp_path / "h.sqlite")["records"] == 2
