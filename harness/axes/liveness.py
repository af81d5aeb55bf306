"""DESIGN.md's liveness rules, which the axis kinds compose: rows, compiled code, the compiler."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from harness import stats
from harness.axes import Axis, Evidence, Found, Identities
from harness.stats import noisefloor

NOT_LIVE_MARKER = "AXIS_NOT_LIVE"
COMPILER_LOOKUP_TIMEOUT_S = 600


def compiler_mentions(python: str, variable: str) -> bool | None:
    """Whether the installed Triton (or FlagTree) mentions `variable` anywhere in its files;
    None when the interpreter has no Triton."""
    script = (
        "import importlib.util, pathlib, sys\n"
        "spec = importlib.util.find_spec('triton')\n"
        "if spec is None: print('none'); sys.exit()\n"
        "needle = sys.argv[1].encode()\n"
        "for root in spec.submodule_search_locations:\n"
        "    for p in pathlib.Path(root).rglob('*'):\n"
        "        if p.is_file() and p.suffix in ('.py', '.so', '.json') and "
        "needle in p.read_bytes(): print('yes'); sys.exit()\n"
        "print('no')\n")
    proc = subprocess.run([python, "-c", script, variable], capture_output=True, text=True,
                          timeout=COMPILER_LOOKUP_TIMEOUT_S)
    answer = proc.stdout.strip()
    return None if answer in ("none", "") else answer == "yes"


def compiled_sets(identities: Identities) -> tuple[set[str], set[str]]:
    """Fingerprints of everything each side compiled, over all its rounds: (A, B)."""
    a, b = ({h for doc in identities[side] for h in doc.get("compiled_artifacts") or ()}
            for side in ("A", "B"))
    return a, b


def aa_artifact_note(identities: Identities) -> str | None:
    """An A/A campaign also tests the fingerprint that liveness relies on: side B, which only
    replays A's winners, must compile nothing that side A (which also compiled every tuning
    candidate) did not. None when nothing was compiled."""
    a, b = compiled_sets(identities)
    if not a and not b:
        return None
    if b <= a:
        extra = f"; side A's other {len(a - b)} are its tuning candidates" if a - b else ""
        return (f"A/A: side B compiled nothing that side A did not ({len(b)} artifacts, all "
                f"among side A's {len(a)}{extra}), so compiled code fingerprints can tell a "
                "live switch on this stack")
    return (f"A/A: identical sides compiled different artifacts (side B compiled {len(b - a)} "
            f"of its {len(b)} that side A never did): compiled-code liveness is unreliable on "
            "this stack")


def aa_note(rows: Sequence[stats.RowStats], floor: float) -> str:
    """What an A/A measured, overall and by A latency, and whether NOISE_FROM takes it."""
    model = noisefloor.fit((r.a_ms, r.round_speedups_pct) for r in rows)
    use = ("pass this campaign as NOISE_FROM to later campaigns: each of their rows gets the "
           "floor of its A latency")
    if model.bands and model.bands[0].floor_pct > stats.MAX_NOISE_FLOOR_PCT:
        use = (f"NOISE_FROM refuses it: a floor above {stats.MAX_NOISE_FLOOR_PCT:g}% cannot mean "
               "the same; run it with more rounds or on a quieter device")
    return (f"A/A campaign: measured noise floor {floor:.2f}% over every row; by A latency "
            f"{model.text or '-'} ({use})")


def noise_floor(evidence: Evidence) -> Found:
    """An A/A: no liveness; the noise floor it measured, and what its artifacts showed."""
    floor = stats.noise_floor_from_aa(r.round_speedups_pct for r in evidence.rows)
    notes = [aa_note(evidence.rows, floor), aa_artifact_note(evidence.every)]
    return None, [n for n in notes if n], {"measured_noise_floor_pct": floor}


def from_rows_or_code(evidence: Evidence) -> Found | None:
    """Live where a row differs beyond the noise floor, or an operator's side B compiled what
    its side A never did; None where neither shows."""
    if any(r.verdict in (stats.Verdict.FASTER, stats.Verdict.SLOWER) for r in evidence.rows):
        return {"status": "live", "detail": "rows differ beyond the noise floor"}, [], {}
    if evidence.differ:
        return {"status": "live", "detail": "axis live: side B compiled artifacts side A never "
                f"produced (operators: {', '.join(evidence.differ)})"}, [], {}
    return None


def of_stacks(evidence: Evidence) -> Found:
    """Two stacks: no switch to look up in a compiler, so what the code shows is all."""
    return from_rows_or_code(evidence) or (
        {"status": "unknown", "detail": "liveness unknown: the two stacks compiled the same "
         "kernels for every operator and no row differs"}, [], {})


def of_switch(evidence: Evidence) -> Found:
    """A switch: rows or code, else whether the sides' whole caches differ and the compiler
    mentions the variable."""
    found = from_rows_or_code(evidence)
    if found is not None:
        return found
    status, detail = compiler_check(evidence.every, evidence.axis, evidence.python)
    if status == "unchecked":
        return None, [detail], {}
    return {"status": status, "detail": detail}, [], {}


def compiler_check(identities: Identities, axis: Axis, python: str) -> tuple[str, str]:
    """DESIGN.md's liveness check: ("live" | "unknown" | "not_live" | "unchecked", note)."""
    a, b = compiled_sets(identities)
    if not a and not b:
        return "unchecked", "liveness not checked: this backend compiled no kernels"
    if not b <= a:
        return "live", "axis live: side B compiled artifacts side A never produced"
    found = compiler_mentions(python, axis.variable or "")
    if found:
        return "unknown", (f"liveness unknown: compiled artifacts are equal, but the compiler "
                           f"mentions {axis.variable}")
    return "not_live", (f"{NOT_LIVE_MARKER} axis={axis.name}: compiled artifacts are equal and "
                        f"the installed compiler never mentions {axis.variable}")
