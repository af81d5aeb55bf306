"""`harness publish`: the site over the history store, its index, operator pages and links."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")
pytest.importorskip("ruptures")

from harness.cli import main  # noqa: E402
from harness.history import importer, site, store  # noqa: E402
from tests.historydata import make_batch  # noqa: E402


@pytest.fixture()
def published(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    folders = [make_batch(root, f"202611{n + 1:02d}_010000",
                          {"mm": [1.0 if n < 6 else 1.3, 2.0], "a/b": [0.5, 0.7]})
               for n in range(12)]
    engine = store.open_store(store.resolve(str(root / "h.sqlite"), root))
    for folder in folders:
        importer.import_folder(engine, folder)
    engine.dispose()
    assert main(["publish", "--history", str(root / "h.sqlite"),
                 "--out", str(tmp_path / "site")]) == 0
    return tmp_path / "site"


def test_the_index_lists_records_change_points_and_operators(published):
    index = (published / "index.html").read_text(encoding="utf-8")
    assert "Records over time (12, newest first)" in index
    assert "Change points (1)" in index and "Operators (2)" in index
    assert '<a href="ops/a_b.html">a/b</a>' in index  # a name made safe for a path
    step = re.search(r'<td class="up">([+-][0-9.]+)</td>', index)
    assert step and abs(float(step.group(1)) - 30.0) < 1.0  # latency up 30%: slower
    assert "<script src" not in index and "http" not in index


def test_each_operator_page_draws_its_rows_and_marks_the_step(published):
    page = (published / "ops" / "mm.html").read_text(encoding="utf-8")
    assert page.count("<svg ") == 2 and page.count('class="step"') == 1
    quiet = (published / "ops" / "a_b.html").read_text(encoding="utf-8")
    assert quiet.count("<svg ") == 2 and 'class="step"' not in quiet
    assert "no change point found" in quiet


def test_a_record_links_to_its_campaign_page_or_its_folder_relative_to_the_page(tmp_path):
    from harness.history.queries import Record

    folder = tmp_path / "runs" / "ab" / "x"
    folder.mkdir(parents=True)
    record = Record(3, "campaign", "2026", "done", str(folder), *[None] * 11, 2, "{}")
    here = tmp_path / "site" / "ops"
    assert site.record_link(record, here) == '<a href="../../runs/ab/x">campaign 3</a>'
    (folder / "ab.html").write_text("<html></html>")
    assert site.record_link(record, here) == '<a href="../../runs/ab/x/ab.html">campaign 3</a>'


def test_a_step_is_marked_before_its_own_night_where_an_earlier_night_is_not_drawn():
    # Regression: a change's index counts every night of its series, the line's points only
    # those drawn (a log scale drops a zero), so the red line fell a night late
    import math
    import random

    from harness.history import changes
    from harness.history.changes import Point

    rng = random.Random(9)
    values = [0.0] + [math.exp(rng.gauss(0, 0.005)) * (1.1 if i >= 20 else 1.0)
                      for i in range(40)]
    series = [Point(f"n{i}", v, i, {"flags": ""}) for i, v in enumerate(values)]
    (step,) = changes.find_changes(series)
    assert step.index == 21  # the zero night counts in the series given
    svg = site.sparkline(series, [step])
    line_x = float(re.search(r'class="step" x1="([\d.]+)"', svg).group(1))
    xs = [float(pair.split(",")[0]) for pair in re.search(r'points="([^"]+)"', svg)
          .group(1).split()]
    assert xs[19] < line_x < xs[20]  # before the 21st drawn point, its own night
