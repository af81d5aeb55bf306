"""Tests for harness.report.receipt: build, write and verify receipts; `harness receipt verify`."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from harness import cli
from harness.contract import identity
from harness.report.receipt import (
    RECEIPT_JSON,
    SCHEMA,
    ReceiptError,
    VerifyResult,
    build_receipt,
    load_receipt,
    verify,
    verify_lines,
    write_receipt,
)

ROW = {"op": "tanh", "dtype": "torch.float16", "shape": "[[64, 64]]", "occurrence": 1,
       "a_ms": 0.002, "b_ms": 0.001, "speedup_pct": 100.0, "ci_low_pct": 90.0,
       "ci_high_pct": 110.0, "min_pct": 88.0, "max_pct": 112.0, "rounds": 3,
       "verdict": "faster", "flags": []}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A throwaway harness checkout: package files, a Makefile, an example, and a README."""
    checkout = tmp_path / "checkout"
    for rel, text in {"harness/__init__.py": "", "harness/stats.py": "X = 1\n",
                      "Makefile": "all:\n", "pyproject.toml": "[project]\n",
                      "examples/cpu_suite/bench.py": "def test(): pass\n",
                      "README.md": "not a harness file\n"}.items():
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_text(text)
    return checkout


def make_receipt(root: Path, campaign_dir: Path, **overrides: Any) -> Path:
    run_a = campaign_dir / "A" / "r1"
    run_a.mkdir(parents=True)
    (run_a / "run_identity.json").write_text(json.dumps(
        {"backend": "cpu", "image_digest": "sha256:aaa", "timer": "direct"}))
    kwargs: dict[str, Any] = {
        "campaign": {"axis": "none", "op": "tanh", "dir": campaign_dir},
        "sides": {"A": {"runs": [run_a]},
                  "B": {"runs": [{"dir": "B/r1", "identity": {"image_digest": None}},
                                 campaign_dir / "B" / "r2"],
                        "image_digests": ["sha256:bbb"]}},
        "rows": [ROW],
        "commands": [["harness", "run", "--op", Path("tanh")]],
        "caliber": {"backend": "cpu", "level": "core", "timer": "direct", "rounds": 3},
        "root": root,
    }
    kwargs.update(overrides)
    return write_receipt(campaign_dir, build_receipt(**kwargs))


def test_a_fresh_receipt_verifies(root: Path, tmp_path: Path) -> None:
    path = make_receipt(root, tmp_path / "camp")
    assert path == tmp_path / "camp" / RECEIPT_JSON
    result = verify(path, root=root)
    assert result == VerifyResult(ok=True, changed=[], missing=[], added=[], checked=5)
    assert verify_lines(result) == ["RECEIPT_OK files=5"]


def test_receipt_holds_hashes_sides_commands_caliber_and_rows(root: Path, tmp_path: Path) -> None:
    receipt = load_receipt(make_receipt(root, tmp_path / "camp"))
    assert receipt["schema"] == SCHEMA == "harness-receipt/2"
    assert receipt["files"] == identity.file_hashes(root)
    assert "README.md" not in receipt["files"] and "harness/stats.py" in receipt["files"]
    assert (receipt["commit"], receipt["dirty"]) == (None, None)  # not a git work tree
    assert receipt["harness_version"]
    a, b = receipt["sides"]["A"], receipt["sides"]["B"]
    assert a["image_digests"] == ["sha256:aaa"] and a["runs"][0]["identity"]["timer"] == "direct"
    assert b["image_digests"] == ["sha256:bbb"]
    # A run that left no run_identity.json is recorded as such, not skipped.
    assert [r["identity"] for r in b["runs"]] == [{"image_digest": None}, None]
    assert receipt["commands"] == [["harness", "run", "--op", "tanh"]]
    assert receipt["caliber"]["rounds"] == 3 and receipt["rows"] == [ROW]
    assert receipt["campaign"]["dir"] == str(tmp_path / "camp")


def test_one_changed_byte_names_exactly_that_file(root: Path, tmp_path: Path) -> None:
    path = make_receipt(root, tmp_path / "camp")
    (root / "harness" / "stats.py").write_text("X = 2\n")
    result = verify(path, root=root)
    assert not result.ok
    assert (result.changed, result.missing, result.added) == (["harness/stats.py"], [], [])
    assert verify_lines(result) == ["changed harness/stats.py",
                                    "RECEIPT_MISMATCH changed=1 missing=0 added=0"]


def test_missing_and_added_harness_files(root: Path, tmp_path: Path) -> None:
    path = make_receipt(root, tmp_path / "camp")
    (root / "examples" / "cpu_suite" / "bench.py").unlink()
    (root / "harness" / "plugins").mkdir()
    (root / "harness" / "plugins" / "new.py").write_text("")
    (root / "NOTES.md").write_text("docs do not count\n")
    result = verify(path, root=root)
    assert (result.changed, result.missing, result.added) == (
        [], ["examples/cpu_suite/bench.py"], ["harness/plugins/new.py"])
    assert verify_lines(result)[-1] == "RECEIPT_MISMATCH changed=0 missing=1 added=1"


def test_caches_beside_harness_files_are_not_added(root: Path, tmp_path: Path) -> None:
    path = make_receipt(root, tmp_path / "camp")
    (root / "harness" / "__pycache__").mkdir()
    (root / "harness" / "__pycache__" / "stats.cpython-311.pyc").write_bytes(b"\0")
    assert verify(path, root=root).ok


@pytest.mark.parametrize("document, message", [
    ({"schema": "harness-receipt/3", "files": {}}, "unsupported receipt schema"),
    ({"schema": SCHEMA, "files": {}, "results": {"runs": ["../x"], "files": {}}}, "'results'"),
    ({"schema": SCHEMA, "files": {}, "results": {"runs": [], "files": {"a": "b"}}}, "'results'"),
    ({"schema": SCHEMA, "files": {}, "results": []}, "'results'"),
    ({"schema": "harness-ab/1", "rows": []}, "not a receipt"),
    ([1, 2], "not a receipt"),
    ({"schema": SCHEMA, "files": {"../etc/passwd": "0" * 64}}, "inside the checkout"),
    ({"schema": SCHEMA, "files": {"/etc/passwd": "0" * 64}}, "inside the checkout"),
    ({"schema": SCHEMA, "files": {"Makefile": "not-a-digest"}}, "sha256"),
])
def test_schema_is_checked(tmp_path: Path, document: Any, message: str) -> None:
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ReceiptError, match=message):
        load_receipt(path)


def test_not_json_and_absent_paths_are_not_receipts(tmp_path: Path) -> None:
    (tmp_path / "receipt.json").write_text("{not json")
    with pytest.raises(ReceiptError, match="not JSON"):
        load_receipt(tmp_path)
    with pytest.raises(ReceiptError, match="no receipt"):
        load_receipt(tmp_path / "elsewhere.json")


def test_a_receipt_that_is_not_a_regular_file_is_refused_not_read(tmp_path: Path) -> None:
    # Regression: receipt.json as a FIFO (or a link to /dev/zero) hung `harness receipt
    # verify` reading it forever.
    os.mkfifo(tmp_path / "receipt.json")
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("reading the FIFO blocked"))
    signal.alarm(5)
    try:
        with pytest.raises(ReceiptError, match="not a regular file"):
            load_receipt(tmp_path / "receipt.json")
    finally:
        signal.alarm(0)


def test_write_is_atomic_and_leaves_no_temporary(root: Path, tmp_path: Path) -> None:
    path = make_receipt(root, tmp_path / "camp")
    assert sorted(p.name for p in path.parent.iterdir()) == ["A", RECEIPT_JSON]


# ---------------------------------------------------------------- result files


def campaign_with_results(root: Path, tmp_path: Path) -> Path:
    """A campaign directory whose two run directories, ab.json and ab.md the receipt pins."""
    directory = tmp_path / "camp"
    for side in ("A", "B"):
        run = directory / "tanh" / side / "r0"
        (run / "autotune_records").mkdir(parents=True)
        (run / "results.csv").write_text(f"op,ms\ntanh,{side}\n")
        (run / "run_identity.json").write_text(json.dumps({"backend": "cpu"}))
        (run / "autotune_records" / "winners.jsonl").write_text("{}\n")
    for name in ("ab.json", "ab.md", "ab.png", "campaign.json"):
        (directory / name).write_text(name)
    (directory / "tanh" / "A" / "r0.attempt1").mkdir()
    (directory / "tanh" / "A" / "r0.attempt1" / "results.csv").write_text("old\n")
    (directory / "logs").mkdir()
    (directory / "logs" / "tanh-r0.log").write_text("console\n")
    write_receipt(directory, build_receipt(
        campaign={"dir": str(directory)}, rows=[ROW], commands=[], caliber={}, root=root,
        sides={"A": {"runs": [directory / "tanh" / "A" / "r0"]},
               "B": {"runs": [directory / "tanh" / "B" / "r0", tmp_path / "elsewhere"]}},
        results_dir=directory))
    return directory


def test_results_pin_every_run_file_and_the_report(root: Path, tmp_path: Path) -> None:
    directory = campaign_with_results(root, tmp_path)
    results = load_receipt(directory)["results"]
    assert results["runs"] == ["tanh/A/r0", "tanh/B/r0"]  # one outside the campaign: not pinned
    assert sorted(results["files"]) == [
        "ab.json", "ab.md",
        "tanh/A/r0/autotune_records/winners.jsonl", "tanh/A/r0/results.csv",
        "tanh/A/r0/run_identity.json",
        "tanh/B/r0/autotune_records/winners.jsonl", "tanh/B/r0/results.csv",
        "tanh/B/r0/run_identity.json"]
    assert results["files"]["tanh/B/r0/results.csv"] == identity.sha256_file(
        directory / "tanh" / "B" / "r0" / "results.csv")
    result = verify(directory, root=root)
    assert result.ok and verify_lines(result) == ["RECEIPT_OK files=5 results=8"]


def test_results_pin_the_run_files_of_a_campaign_named_by_a_relative_path(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression: with OUT=runs (the default) every run directory is named relative to the
    # working directory, was taken as relative to the campaign's, and none was pinned.
    campaign_with_results(root, tmp_path)
    monkeypatch.chdir(tmp_path)
    camp = Path("camp")
    write_receipt(camp, build_receipt(
        campaign={"dir": "camp"}, rows=[ROW], commands=[], caliber={}, root=root,
        sides={side: {"runs": [f"camp/tanh/{side}/r0"]} for side in ("A", "B")},
        results_dir=camp))
    results = load_receipt(camp)["results"]
    assert results["runs"] == ["tanh/A/r0", "tanh/B/r0"] and len(results["files"]) == 8
    (camp / "tanh" / "B" / "r0" / "results.csv").write_text("edited\n")
    assert verify(camp, root=root).changed == ["camp/tanh/B/r0/results.csv"]


def test_files_outside_the_results_may_change(root: Path, tmp_path: Path) -> None:
    directory = campaign_with_results(root, tmp_path)
    for rel in ("campaign.json", "ab.png", "logs/tanh-r0.log", "tanh/A/r0.attempt1/results.csv"):
        (directory / rel).write_text("rewritten later\n")
    (directory / "logs" / "tanh-r1.log").write_text("a resume's\n")
    assert verify(directory, root=root).ok


def test_a_changed_missing_or_added_result_file_fails_naming_it(root: Path,
                                                                tmp_path: Path) -> None:
    directory = campaign_with_results(root, tmp_path)
    csv = directory / "tanh" / "A" / "r0" / "results.csv"
    csv.write_bytes(csv.read_bytes().replace(b"A", b"C"))
    (directory / "ab.md").unlink()
    (directory / "tanh" / "B" / "r0" / "late.log").write_text("an orphan's write\n")
    result = verify(directory, root=root)
    assert not result.ok
    assert verify_lines(result) == [
        f"changed {csv}", f"missing {directory / 'ab.md'}",
        f"added {directory / 'tanh' / 'B' / 'r0' / 'late.log'}",
        "RECEIPT_MISMATCH changed=1 missing=1 added=1"]


def test_results_are_named_under_the_path_given(root: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    directory = campaign_with_results(root, tmp_path)
    (directory / "tanh" / "B" / "r0" / "results.csv").write_text("edited\n")
    monkeypatch.chdir(tmp_path)
    assert verify(Path("camp") / RECEIPT_JSON, root=root).changed == ["camp/tanh/B/r0/results.csv"]


def test_a_receipt_of_schema_1_pins_the_harness_files_only(root: Path, tmp_path: Path) -> None:
    directory = campaign_with_results(root, tmp_path)
    doc = load_receipt(directory)
    del doc["results"]
    doc["schema"] = "harness-receipt/1"
    write_receipt(directory, doc)
    (directory / "tanh" / "A" / "r0" / "results.csv").write_text("edited\n")
    result = verify(directory, root=root)
    assert result.ok and result.results is None
    assert verify_lines(result) == ["RECEIPT_OK files=5"]


# ---------------------------------------------------------------- CLI


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], list[str]]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err.splitlines()


def test_cli_exit_0_when_every_file_matches(root: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    make_receipt(root, tmp_path / "camp")
    rc, out, _ = run_cli(capsys, "receipt", "verify", str(tmp_path / "camp"), "--root", str(root))
    assert (rc, out) == (0, ["RECEIPT_OK files=5"])


def test_cli_exit_1_names_each_differing_file(root: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = make_receipt(root, tmp_path / "camp")
    (root / "Makefile").write_text("all: \n")
    (root / "harness" / "stats.py").unlink()
    rc, out, _ = run_cli(capsys, "receipt", "verify", str(path), "--root", str(root))
    assert rc == 1
    assert out == ["changed Makefile", "missing harness/stats.py",
                   "RECEIPT_MISMATCH changed=1 missing=1 added=0"]


def test_cli_exit_1_names_a_changed_result_file(root: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    directory = campaign_with_results(root, tmp_path)
    rc, out, _ = run_cli(capsys, "receipt", "verify", str(directory), "--root", str(root))
    assert (rc, out) == (0, ["RECEIPT_OK files=5 results=8"])
    (directory / "ab.json").write_text("{}")
    rc, out, _ = run_cli(capsys, "receipt", "verify", str(directory), "--root", str(root))
    assert rc == 1
    assert out == [f"changed {directory / 'ab.json'}",
                   "RECEIPT_MISMATCH changed=1 missing=0 added=0"]


def test_cli_exit_2_with_one_line_for_a_path_that_is_not_a_receipt(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ab.json").write_text(json.dumps({"schema": "harness-ab/1", "rows": []}))
    rc, out, err = run_cli(capsys, "receipt", "verify", str(tmp_path / "ab.json"))
    assert (rc, out, len(err)) == (2, [], 1)
    assert err[0].startswith("error: ") and "not a receipt" in err[0]


def test_cli_exit_2_for_a_root_that_does_not_exist(root: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = make_receipt(root, tmp_path / "camp")
    rc, _, err = run_cli(capsys, "receipt", "verify", str(path), "--root", str(tmp_path / "no"))
    assert rc == 2 and "--root" in err[0]
