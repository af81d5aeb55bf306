"""A synthetic suite campaign's ab.json, shaped as a real one, for the report's size and speed."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping
from typing import Any

from harness import stats
from harness.contract.boundary import DIRECT_MARKER
from harness.report import abjson, suite_report
from harness.report.abresult import AbReport, AbRow

DTYPES = ("torch.float16", "torch.bfloat16", "torch.float32")
FLOOR_PCT = 5.0
# How a suite campaign's operators end, as shares: most rows same, a few called either way,
# some undecided, some units failed, crashed, timed out or skipped by pytest.
MIX = (("same", 0.70), ("faster", 0.06), ("slower", 0.06), ("inconclusive", 0.07),
       ("flagged", 0.01), ("failed", 0.03), ("crashed", 0.02), ("timeout", 0.02),
       ("skipped", 0.03))
NO_ROWS: dict[str, tuple[str, int | None, str | None]] = {
    "failed": ("failed", 1, "pytest exited 1: 3 tests failed"),
    "crashed": ("crashed", -11, "pytest died of SIGSEGV"),
    "timeout": ("timeout", None, "unit ran past UNIT_TIMEOUT 1800 s"),
    "skipped": ("skipped", 0, "Operator not implemented for this dtype")}


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to make: operator names, rows of each, rounds per side, where its run folders lie."""

    ops: tuple[str, ...]
    rows_per_op: int = 8
    rounds: int = 5
    seed: int = 0
    directory: str = "runs/ab/synthetic"
    caliber: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def kinds(plan: Plan) -> dict[str, str]:
    """Each operator's kind, drawn from MIX."""
    rng = random.Random(plan.seed)
    names, weights = zip(*MIX, strict=True)
    return {op: rng.choices(names, weights)[0] for op in plan.ops}


def _effect(kind: str, j: int, rng: random.Random) -> tuple[float, float]:
    """(true speedup in log ratio, noise sigma) of row `j` of an operator of `kind`."""
    called = j % 3 == 0  # a third of a called operator's rows move, the rest stay the same
    if kind == "faster" and called:
        return math.log1p(rng.uniform(0.08, 0.6)), 0.01
    if kind == "slower" and called:
        return -math.log1p(rng.uniform(0.08, 0.6)), 0.01
    if kind == "inconclusive" and j % 2 == 0:
        return math.log1p(rng.uniform(-0.06, 0.06)), 0.12
    return 0.0, 0.008


def _rounds(plan: Plan, kind_of: Mapping[str, str]) -> tuple[list[dict[Any, float]], ...]:
    """Per-round latencies of each side, keyed (op, dtype, shape, 1)."""
    rng = random.Random(plan.seed + 1)
    a: list[dict[Any, float]] = [{} for _ in range(plan.rounds)]
    b: list[dict[Any, float]] = [{} for _ in range(plan.rounds)]
    for op, kind in kind_of.items():
        if kind in NO_ROWS:
            continue
        for j in range(plan.rows_per_op):
            key = (op, DTYPES[j % 3], f"[torch.Size([{2 ** (8 + j)}, 1024])]", 1)
            base = 0.005 * 2 ** (j * rng.uniform(0.3, 0.9))
            effect, sigma = _effect(kind, j, rng)
            for r in range(plan.rounds):
                a[r][key] = base * math.exp(rng.gauss(0, sigma))
                b[r][key] = base * math.exp(rng.gauss(0, sigma) - effect)
    return a, b


def _report(plan: Plan, kind_of: Mapping[str, str]) -> AbReport:
    a, b = _rounds(plan, kind_of)
    flagged = [k for k in a[0] if kind_of[k[0]] == "flagged"]
    result = stats.summarize_ab(a, b, noise_floor_pct=FLOOR_PCT, flagged=flagged,
                                group=lambda k: k[0])
    rows = tuple(AbRow(op, dtype, shape, occ, s,
                       (f"B:{DIRECT_MARKER}",) if s.flagged else ())
                 for (op, dtype, shape, occ), s in result.rows)
    mean = result.geomean or stats.GeomeanStats(math.nan, None, None, 0)
    return AbReport(a_label="0", b_label="1", rows=rows, unpaired=(),
                    geomean_speedup_pct=mean.speedup_pct if rows else None,
                    noise_floor_pct=FLOOR_PCT,
                    direct_rows=len(flagged), notes=(), method=result.method,
                    geomean_ci_low_pct=mean.ci_low_pct, geomean_ci_high_pct=mean.ci_high_pct,
                    op_geomeans=tuple((str(op), g) for op, g in result.groups))


def _units(plan: Plan, kind_of: Mapping[str, str]) -> tuple[abjson.UnitRecord, ...]:
    rng = random.Random(plan.seed + 2)
    out = []
    for i, (op, kind) in enumerate(kind_of.items()):
        for r in range(plan.rounds):
            ended: tuple[str, int | None, str | None] = ("ok", 0, None)
            if kind in NO_ROWS and (r == plan.rounds - 1 or kind == "skipped"):
                ended = NO_ROWS[kind]
            status, rc, reason = ended
            out.append(abjson.UnitRecord(f"{op}/r{r}", status, rc, round(rng.uniform(4, 90), 1),
                                         str(i % 8), 1, reason))
    return tuple(out)


def _operators(plan: Plan, doc: abjson.AbDocument, kind_of: Mapping[str, str]
               ) -> dict[str, abjson.OperatorSummary]:
    info = {}
    for op, kind in kind_of.items():
        gone = kind in NO_ROWS
        info[op] = {"rounds": 0 if gone else plan.rounds, "skipped": kind == "skipped",
                    "reason": NO_ROWS[kind][2] if gone else None,
                    "units_failed": int(gone and kind != "skipped"), "artifacts": "differ"}
    return suite_report.operator_summaries([abjson.row_json(r) for r in doc.rows], info)


def suite_document(plan: Plan) -> abjson.AbDocument:
    """The ab.json document of a finished suite campaign of `plan`."""
    kind_of = kinds(plan)
    caliber = {"axis": "RLC_ENHANCE", "axis_var": "RLC_ENHANCE", "a": "0", "b": "1",
               "op": "all", "rounds": plan.rounds, "timer": "graph", "level": "core",
               "shape_mode": "upstream", **plan.caliber}
    doc = abjson.document_of(_report(plan, kind_of), caliber)
    ran = [op for op, kind in kind_of.items() if kind not in NO_ROWS]
    runs = {side: tuple(f"{plan.directory}/{op}/{side}/r{r}" for op in ran
                        for r in range(plan.rounds)) for side in ("A", "B")}
    commands = tuple((f"RLC_ENHANCE={0 if side == 'A' else 1}", "python", "-m", "pytest",
                      f"benchmark/test_{op}.py", "--level", "core", "--mode", "kernel",
                      "--record", "log")
                     for op in ran for side in ("A", "B") for _ in range(plan.rounds))
    return dataclasses.replace(doc, operators=_operators(plan, doc, kind_of),
                               commands=commands, sides=runs, units=_units(plan, kind_of),
                               status=abjson.CampaignStatus("complete"))
