"""bisect.json: a bisection's document, its one writer and its one reader.

It holds what the bisection was given (the variables, as a resume re-reads them), its steps,
every A/B it ran (each step's campaign directory among them: a resume takes an A/B of the same
two steps from here instead of running it again), the steps tried and, once it ends, how.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.axes.steps import Step
from harness.bisect.search import Comparison, Outcome, Row, Tried
from harness.contract.jsonfields import Fields
from harness.errors import UsageError
from harness.fsutil import atomic_write_json, read_json

SCHEMA = "harness-bisect/1"
BISECT_JSON, BISECT_MD = "bisect.json", "bisect.md"
RUNNING, INTERRUPTED, DONE = "running", "interrupted", "done"


@dataclass
class Bisection:
    """A bisection as it goes: `given` maps a flag's dest to the value the user gave."""

    op: str
    kind: str
    given: dict[str, str]
    steps: tuple[Step, ...]
    state: str = RUNNING
    comparisons: list[Comparison] = field(default_factory=list)
    tried: list[Tried] = field(default_factory=list)
    outcome: Outcome | None = None

    def known(self, a: int, b: int) -> Comparison | None:
        """An A/B of steps `a` and `b` already run to its end (a resume's)."""
        return next((c for c in self.comparisons if (c.a, c.b) == (a, b)), None)

    def save(self, directory: Path) -> Path:
        return atomic_write_json(directory / BISECT_JSON, self.to_json())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SCHEMA, "op": self.op, "kind": self.kind, "given": self.given,
            "state": self.state, "steps": [asdict(s) for s in self.steps],
            "comparisons": [asdict(c) for c in self.comparisons],
            "tried": [_tried_json(t) for t in self.tried]}
        if self.outcome is not None:
            o = self.outcome
            out["outcome"] = {
                "state": str(o.state), "direction": o.direction,
                "targets": [list(t) for t in o.targets], "lo": o.lo, "hi": o.hi,
                "candidates": list(o.candidates), "gpu_s": round(o.gpu_s, 3),
                "evidence": None if o.evidence is None else [o.evidence.a, o.evidence.b]}
        return out


def _tried_json(t: Tried) -> dict[str, Any]:
    return {"index": t.index, "verdict": str(t.verdict), "how": t.how,
            "comparisons": [[c.a, c.b] for c in t.comparisons]}


def read(directory: Path) -> Bisection:
    """The bisection in `directory`; UsageError naming the file for a missing or bad one. Its
    outcome is not read back: a resume searches again, taking each A/B it already has."""
    path, data = read_json(directory, BISECT_JSON, UsageError,
                           missing="{path} does not exist: not a bisection's folder",
                           not_json="{path} is not a bisection's document ({exc})")
    f = Fields(str(path), "", data)
    if f.value.get("schema") != SCHEMA:
        raise UsageError(f"{str(path)!r} is not a bisection's document: schema="
                         f"{f.value.get('schema')!r}, expected {SCHEMA!r}")
    given = f.opt_object("given")
    steps = tuple(Step(s.text("value"), s.text("label"), s.opt_text("subject") or "",
                       s.opt_text("date") or "", s.opt_text("code"))
                  for s in f.objects("steps"))
    comparisons = [_comparison(c) for c in f.objects("comparisons")]
    last = len(steps) - 1
    for c in comparisons:
        if not (0 <= c.a <= last and 0 <= c.b <= last):
            raise UsageError(f"{str(path)!r}: an A/B of steps {c.a} and {c.b}, but it has "
                             f"steps 0 to {last}")
    return Bisection(op=f.text("op"), kind=f.text("kind"), steps=steps, state=f.text("state"),
                     given={k: given.text(k) for k in given.value} if given else {},
                     comparisons=comparisons)


def _comparison(f: Fields) -> Comparison:
    rows = tuple(Row(r.text("dtype"), r.text("shape"), r.text("verdict"),
                     r.number("speedup_pct"), r.opt_number("ci_low_pct"),
                     r.opt_number("ci_high_pct"), r.integer("rounds"))
                 for r in f.objects("rows"))
    return Comparison(a=f.integer("a"), b=f.integer("b"), rows=rows,
                      same_code=bool(f.opt_flag("same_code")), failed=f.opt_text("failed"),
                      directory=f.opt_text("directory"), gpu_s=f.opt_number("gpu_s") or 0.0,
                      rounds=f.opt_integer("rounds") or 0, floor_pct=f.opt_number("floor_pct"))

