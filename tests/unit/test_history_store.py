"""Writers at once and a writer killed mid-write, on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")

from sqlalchemy import func, select  # noqa: E402

from harness.history import schema, store  # noqa: E402
from tests.historydata import make_batch, make_campaign  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WRITER = ROOT / "tests" / "history_writer.py"
PG_BIN = Path("/usr/lib/postgresql")
REQUIRED = os.environ.get("ZL_POSTGRES_REQUIRED") == "1"


def _pg_tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(PG_BIN.glob(f"*/bin/{name}")) if PG_BIN.is_dir() else []
    return str(versions[-1]) if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _skip(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"ZL_POSTGRES_REQUIRED=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server of this session, in a temporary folder, as an ordinary user."""
    pytest.importorskip("psycopg")
    initdb, pg_ctl = _pg_tool("initdb"), _pg_tool("pg_ctl")
    if not initdb or not pg_ctl:
        _skip("no initdb/pg_ctl here (Debian: apt-get install postgresql)")
    prefix: list[str] = []
    # Not under pytest's own temporary root: pytest keeps that private to this user, and
    # the server may have to run as another one.
    base = Path(tempfile.mkdtemp(prefix="history-pg-"))
    if os.geteuid() == 0:  # the server refuses root: run it as nobody
        if not shutil.which("runuser"):
            _skip("running as root without runuser to start PostgreSQL as another user")
        prefix = ["runuser", "-u", "nobody", "--"]
        os.chmod(base, 0o777)
    data, port = base / "data", _free_port()
    subprocess.run([*prefix, initdb, "-D", str(data), "-U", "postgres", "--auth=trust",
                    "-E", "UTF8"], check=True, capture_output=True)
    opts = f"-p {port} -k {base} -c listen_addresses=127.0.0.1"
    subprocess.run([*prefix, pg_ctl, "-D", str(data), "-o", opts, "-l", str(base / "log"),
                    "-w", "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'h.sqlite'}"
    base = request.getfixturevalue("postgres")
    engine = store.open_store(store.Where(base, base))  # a clean store for each test
    with engine.begin() as conn:
        for table in reversed(schema.metadata.sorted_tables):
            conn.execute(table.delete())
        conn.execute(schema.meta.insert().values(key="schema_version",
                                                 value=str(schema.SCHEMA_VERSION)))
    engine.dispose()
    return base


def _writer(url: str, mode: str, ready: Path, dirs: list[Path]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    return subprocess.Popen([sys.executable, str(WRITER), url, mode, str(ready),
                             *map(str, dirs)], env=env)


def _counts(url: str) -> dict[str, int]:
    engine = store.open_store(store.Where(url, url))
    try:
        with engine.connect() as conn:
            return {t.name: conn.execute(select(func.count()).select_from(t)).scalar()
                    for t in (schema.records, schema.rows, schema.units)}
    finally:
        engine.dispose()


def _folders(root: Path) -> list[Path]:
    ops = {f"op{i}": [1.0 + i, 2.0 + i] for i in range(40)}
    return [make_campaign(root, f"2026110{d}-010000", ops) for d in range(1, 4)] + [
        make_batch(root, "20261104-010000", {"tanh": [1.0, 2.0], "add": [3.0, 4.0]})]


@pytest.mark.slow  # two writer processes
def test_two_writers_at_once_lose_nothing_and_duplicate_nothing(url, tmp_path):
    folders = _folders(tmp_path / "runs")
    ready = tmp_path / "unused"
    # both import every folder (in opposite orders, three times each), at the same time
    writers = [_writer(url, "import", ready, folders),
               _writer(url, "import", ready, folders[::-1])]
    assert [w.wait(timeout=300) for w in writers] == [0, 0]
    assert _counts(url) == {"records": 4, "rows": 3 * 40 * 2 * 2 * 3 + 4,
                            "units": 3 * 40 * 3 + 2}


@pytest.mark.slow  # a writer process, killed
def test_a_writer_killed_mid_write_leaves_the_store_as_it_was(url, tmp_path):
    folders = _folders(tmp_path / "runs")
    done = _writer(url, "import", tmp_path / "unused", folders[:1])
    assert done.wait(timeout=300) == 0
    before = _counts(url)
    ready = tmp_path / "ready"
    held = _writer(url, "hold", ready, folders[1:])
    while not ready.exists():  # it wrote every row of its folders, and has not committed
        assert held.poll() is None, "the writer ended before it was written"
        time.sleep(0.05)
    os.kill(held.pid, signal.SIGKILL)
    held.wait(timeout=60)
    assert _counts(url) == before
    again = _writer(url, "import", tmp_path / "unused", folders)  # the store still takes writes
    assert again.wait(timeout=300) == 0
    assert _counts(url)["records"] == 4
