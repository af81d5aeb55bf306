"""junit.xml: one test case per operator of a campaign, as CI test reports read it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from xml.etree import ElementTree as ET

from harness.contract.states import CRASHED, ERROR, FAILED, TIMEOUT
from harness.report.abjson import AbDocument, OperatorSummary
from harness.report.abresult import AbRow
from harness.report.gate import CALLS, FailOn, operators_of
from harness.report.render import pct

JUNIT_XML = "junit.xml"
BAD_UNITS = (FAILED, ERROR, CRASHED, TIMEOUT)  # a unit that ended without measuring
LISTED_ROWS = 5  # rows a failure's message names; the case's system-out has them all


# What XML 1.0 refuses in any text, escaped or not (ElementTree writes it as it comes, and
# every reader then refuses the whole file): control characters but tab, newline and return,
# lone surrogates, and the two non-characters.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """`text` with each character XML 1.0 refuses written as its escape (\\x1b)."""
    return _NOT_XML.sub(lambda m: m.group().encode("unicode_escape", "backslashreplace")
                        .decode("ascii"), text)


def suite_name(doc: AbDocument) -> str:
    """The campaign as CI lists it: its axis and sides, e.g. `ab OMP_NUM_THREADS 1 vs 2`."""
    c = doc.caliber
    return f"ab {c.axis or 'none'} {c.text('a') or '-'} vs {c.text('b') or '-'}"


def _row_text(row: AbRow) -> str:
    s = row.stats
    return (f"{row.dtype} {row.shape}: {s.verdict.value} {pct(s.speedup_pct)}% "
            f"[{pct(s.ci_low_pct)}, {pct(s.ci_high_pct)}] A {s.a_ms:.4g} ms B {s.b_ms:.4g} ms")


def failure_message(op: str, info: OperatorSummary, words: tuple[str, ...],
                    rows: list[AbRow]) -> str:
    """One line: the verdict, the FAIL_ON words it trips, its rows and speedups (the worst
    LISTED_ROWS of those that made the verdict first)."""
    made = sorted((r for r in rows if r.stats.verdict.value == info.verdict),
                  key=lambda r: r.stats.speedup_pct) or sorted(rows,
                                                               key=lambda r: r.stats.speedup_pct)
    shown = "; ".join(_row_text(r) for r in made[:LISTED_ROWS])
    more = f"; and {len(made) - LISTED_ROWS} more" if len(made) > LISTED_ROWS else ""
    return (f"{op}: {info.verdict} (FAIL_ON {','.join(words)}), {info.rows} rows, geomean "
            f"{pct(info.geomean_speedup_pct)}%: {shown or 'no paired row'}{more}")


def _case(doc: AbDocument, op: str, info: OperatorSummary, words: tuple[str, ...],
          classname: str) -> ET.Element:
    units = [u for u in doc.units or () if u.id.rpartition("/r")[0] == op]
    wall = sum(u.wall_s or 0.0 for u in units)
    case = ET.Element("testcase", name=op, classname=classname, time=f"{wall:.3f}")
    rows = [r for r in doc.rows if r.op == op]
    if info.verdict in ("skipped", "excluded") or (info.verdict == "pending" and not words):
        ET.SubElement(case, "skipped", message=f"{info.verdict}: {info.reason or '-'}")
        return case
    bad = [u for u in units if u.status in BAD_UNITS]
    for u in bad:
        ET.SubElement(case, "error", type=u.status,
                      message=f"{u.id} {u.status}: {u.reason or f'rc={u.rc}'}")
    if not bad and (info.verdict in ("failed", "pending")):
        ET.SubElement(case, "error", type=info.verdict,
                      message=f"{op}: {info.verdict}: {info.reason or 'no paired row'}")
    called = [w for w in words if w in CALLS]  # `failed` is said by the errors above
    if called:
        ET.SubElement(case, "failure", type=info.verdict,
                      message=failure_message(op, info, tuple(called), rows))
    if rows:
        ET.SubElement(case, "system-out").text = "\n".join(_row_text(r) for r in rows)
    return case


def junit_xml(doc: AbDocument, trips: Mapping[str, tuple[str, ...]], fail_on: FailOn,
              timestamp: str | None = None) -> bytes:
    """The document as JUnit XML: a testsuite of the campaign, a testcase per operator. A
    case fails (<failure>) only where FAIL_ON names its verdict (`trips`); a unit that
    failed, crashed or timed out is an <error> always; skipped and excluded are <skipped>."""
    name = suite_name(doc)
    classname = f"ab.{doc.caliber.axis or 'none'}"
    cases = [_case(doc, op, info, trips.get(op, ()), classname)
             for op, info in operators_of(doc).items()]
    counts = {tag: sum(1 for c in cases if c.find(tag) is not None)
              for tag in ("failure", "error", "skipped")}
    time = f"{sum(float(c.get('time') or 0) for c in cases):.3f}"
    root = ET.Element("testsuites", name=name, tests=str(len(cases)),
                      failures=str(counts["failure"]), errors=str(counts["error"]), time=time)
    suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(cases)),
                          failures=str(counts["failure"]), errors=str(counts["error"]),
                          skipped=str(counts["skipped"]), time=time)
    if timestamp:
        suite.set("timestamp", timestamp)
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="FAIL_ON", value=fail_on.text or "none")
    if doc.geomean_speedup_pct is not None:
        ET.SubElement(props, "property", name="geomean_speedup_pct",
                      value=f"{doc.geomean_speedup_pct:.3f}")
    suite.extend(cases)
    for element in root.iter():  # a unit's reason is an exception's text: ANSI colours too
        element.attrib = {k: xml_text(v) for k, v in element.attrib.items()}
        element.text = None if element.text is None else xml_text(element.text)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
