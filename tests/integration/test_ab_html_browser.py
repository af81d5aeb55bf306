"""ab.html of a 1,112-operator campaign in a real browser (Debian's headless Chromium through
Selenium): it opens offline with no console error, sorts, filters and expands a row."""

from __future__ import annotations

import io
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.providers import resolve
from harness.report import abjson, suite_report, synth, write
from harness.report.rerun import command as rerun_command
from tests.fixture_nodes import load_nodes_tsv

pytestmark = [pytest.mark.integration, pytest.mark.browser]
REQUIRED = os.environ.get("ZL_BROWSER_REQUIRED") == "1"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
NODES_TSV = Path(__file__).resolve().parents[1] / "data" / "provider" / "benchmark_nodes.tsv"
# No network for the page: a proxy nobody listens on and no name resolves, so any fetch fails
# loudly (a console error) as well as showing as a resource entry.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--proxy-server=http://127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--window-size=1400,1000",
         # shared memory in a temporary file, not /dev/shm: a container's is often 64 MB, which
         # a page of 1,112 operators can fill, and a renderer out of it can crash or stall
         "--disable-dev-shm-usage")


def _missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(path):
            return f"no {path} (Debian: apt-get install chromium chromium-driver)"
    return None


def _skip(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"ZL_BROWSER_REQUIRED=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, abjson.AbDocument]:
    directory = tmp_path_factory.mktemp("suite")
    ops = tuple(resolve.op_names(load_nodes_tsv(NODES_TSV)))
    doc = synth.suite_document(synth.Plan(ops, directory=str(directory)))
    abjson.write_ab(directory, doc)
    write.write_report(directory)
    return directory, doc


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    reason = _missing()
    if reason:
        _skip(reason)
    try:
        from selenium import webdriver
    except ImportError:
        _skip("selenium is not installed (requirements/cpu.txt pins it)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options,
                              service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def _page(browser: Any, directory: Path) -> float:
    started = time.perf_counter()
    browser.get((directory / suite_report.AB_HTML).as_uri())
    browser.find_element("css selector", "#rows tbody tr")
    return time.perf_counter() - started


def _count(browser: Any) -> tuple[int, int, int]:
    """(rows matching, rows in all, rows drawn) as the page says and shows them."""
    shown, _, total, _ = browser.find_element("id", "count").text.split()
    drawn = len(browser.find_elements("css selector", "#rows tbody tr.row"))
    return int(shown), int(total), drawn


def _set(browser: Any, element_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    element = browser.find_element("id", element_id)
    if element.tag_name == "select":
        Select(element).select_by_value(value)
    else:
        element.clear()
        element.send_keys(value)


def test_ab_html_is_small_and_self_contained(campaign):
    directory, _ = campaign
    text = (directory / suite_report.AB_HTML).read_text(encoding="utf-8")
    assert len(text.encode()) < 5_000_000
    assert "<script src" not in text and "<link rel=\"stylesheet\"" not in text
    assert "http://" not in text and "https://" not in text


def test_it_opens_offline_with_its_counts_and_no_console_error(campaign, browser, tmp_path):
    directory, doc = campaign
    seconds = _page(browser, directory)
    print(f"ab.html open and drawn: {seconds:.2f} s")  # the figure, not an assertion
    counts = browser.find_element("id", "counts")
    assert counts.text == suite_report.suite_line(doc.operators or {})
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    fetched = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
        ".filter(n => !n.startsWith('data:'))")
    assert fetched == []
    shot = tmp_path / "ab_html.png"
    assert browser.save_screenshot(str(shot))
    _check_shot(shot, counts.rect)


def _check_shot(shot: Path, rect: dict[str, float]) -> None:
    """An element's box lies inside the screenshot and holds dark text on white."""
    from PIL import Image

    image = Image.open(io.BytesIO(shot.read_bytes())).convert("L")
    box = (int(rect["x"]), int(rect["y"]), int(rect["x"] + rect["width"]),
           int(rect["y"] + rect["height"]))
    assert 0 <= box[0] < box[2] <= image.width and 0 <= box[1] < box[3] <= image.height
    histogram = image.crop(box).histogram()  # 256 counts of grey levels
    dark = sum(histogram[:100]) / sum(histogram)
    assert 0.02 < dark < 0.6  # text, not a blank nor a filled box


def test_filters_give_the_right_number_of_rows(campaign, browser):
    directory, doc = campaign
    _page(browser, directory)
    report_rows, operators = doc.rows, doc.operators or {}
    without = [op for op in operators if not any(r.op == op for r in report_rows)]
    shown, total, drawn = _count(browser)
    assert total == shown == len(report_rows) + len(without) and drawn == 1000
    took = browser.execute_script(  # the figure, printed: time is not asserted
        "const t = performance.now(), q = document.getElementById('q'); q.value = 'float16';"
        "q.dispatchEvent(new Event('input')); q.value = ''; q.dispatchEvent(new Event('input'));"
        "return performance.now() - t")
    print(f"two text filters of {total} rows: {took:.0f} ms")
    _set(browser, "verdict", "slower")
    slower = sum(1 for r in report_rows if r.stats.verdict.value == "slower"
                 or operators[r.op].verdict == "slower")
    assert _count(browser)[::2] == (slower, min(slower, 1000))
    _set(browser, "verdict", "")
    some = next(op for op, o in operators.items() if o.verdict == "faster")
    _set(browser, "op", some)
    assert _count(browser)[::2] == (8, 8)
    _set(browser, "dtype", "float32")
    mine = sum(1 for r in report_rows if r.op == some and r.dtype == "torch.float32")
    assert _count(browser)[::2] == (mine, mine)
    _set(browser, "op", "")
    _set(browser, "dtype", "")
    _set(browser, "q", "sigsegv")
    crashed = sum(1 for o in operators.values() if "SIGSEGV" in (o.reason or ""))
    assert crashed and _count(browser)[::2] == (crashed, crashed)


def test_a_column_sorts_both_ways_and_a_row_expands_to_its_rounds_and_rerun(campaign, browser):
    directory, doc = campaign
    _page(browser, directory)
    header = browser.find_element("css selector", "th[data-col='sp']")
    speedups = sorted(r.stats.speedup_pct for r in doc.rows)  # shown to 0.1, from 4 digits
    header.click()
    first = browser.find_element("css selector", "#rows tbody tr.row td:nth-child(7)").text
    assert float(first) == pytest.approx(speedups[0], abs=0.1)
    header.click()
    first = browser.find_element("css selector", "#rows tbody tr.row td:nth-child(7)").text
    assert float(first) == pytest.approx(speedups[-1], abs=0.1)
    row = browser.find_element("css selector", "#rows tbody tr.row")
    op = row.find_element("css selector", "td").text
    row.click()
    detail = browser.find_element("css selector", "#rows tbody tr.detail")
    rerun = detail.find_element("css selector", "code.rerun").text
    assert rerun == rerun_command(doc.caliber, op)  # the campaign's one command
    rounds = detail.find_element("css selector", ".rounds").text.split(": ")[1].split(", ")
    assert len(rounds) == 5
    assert f"{directory}/{op}/A/r0" in detail.text and f"{directory}/{op}/B/r4" in detail.text
    row.click()
    assert browser.find_elements("css selector", "#rows tbody tr.detail") == []


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """A store of 16 nightly batches (mm's first shape 20% slower from the ninth) and one
    campaign with its report, and the site `harness publish` made of it."""
    import random

    from harness.cli import main
    from harness.history import importer, queries, store
    from tests.historydata import make_batch, make_campaign

    root = tmp_path_factory.mktemp("history") / "runs"
    rng = random.Random(0)
    folders = [make_batch(root, f"202611{n + 1:02d}_010000", {
        "mm": [(1.0 if n < 8 else 1.2) * (1 + rng.gauss(0, 0.003)), 2.0],
        "add": [0.5 * (1 + rng.gauss(0, 0.003)), 0.7]}) for n in range(16)]
    campaign = make_campaign(root, "20261120_010000", {"mm": [1.2, 2.0], "add": [0.5, 0.7]})
    abjson.write_ab(campaign, synth.suite_document(synth.Plan(("mm", "add"),
                                                               directory=str(campaign))))
    write.write_report(campaign)
    db = root / "history.sqlite"
    engine = store.open_store(store.resolve(str(db), root))
    for folder in [*folders, campaign]:
        importer.import_folder(engine, folder)
    series = len(queries.series(engine, "mm"))
    engine.dispose()
    out = root.parent / "site"
    assert main(["publish", "--history", str(db), "--out", str(out)]) == 0
    return out, campaign, series


def _shown(browser: Any) -> int:
    return int(browser.find_element("id", "shown").text.split()[0])


def test_the_published_site_opens_offline_filters_and_links_trends_and_campaigns(site, browser,
                                                                                  tmp_path):
    out, campaign, series = site
    browser.get((out / "index.html").as_uri())
    assert browser.find_element("tag name", "h1").text == "history"
    assert [h.text for h in browser.find_elements("tag name", "h2")] == [
        "Records over time (17, newest first)", "Change points (1)", "Operators (2)"]
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert _shown(browser) == 17 + 1 + 2  # every record, change point and operator
    _set(browser, "q", "campaign")
    assert _shown(browser) == 1
    shot = tmp_path / "site.png"
    assert browser.save_screenshot(str(shot))
    _check_shot(shot, browser.find_element("id", "shown").rect)  # "1 shown", drawn
    link = browser.find_element("css selector", "#records tr.f:not([style*='none']) a")
    assert link.get_attribute("href") == (campaign / "ab.html").as_uri()
    _set(browser, "q", "mm")
    assert _shown(browser) == 2  # its change point and its operator line
    change = browser.find_element("css selector", "#changes tr.f td.up")
    assert change.text.startswith("+") and abs(float(change.text) - 20.0) < 3.0
    browser.find_element("link text", "mm").click()
    assert browser.find_element("tag name", "h1").text == "history of mm"
    assert len(browser.find_elements("css selector", "div.series svg")) == series
    assert len(browser.find_elements("css selector", "svg line.step")) == 1
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []
    browser.get((campaign / "ab.html").as_uri())  # where the index's campaign link leads
    assert browser.find_element("id", "counts").text.startswith("suite:")
