"""Which operators a batch or campaign runs: OPS, OPS_FILE, OPS=all, and each one's node."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from harness.errors import PreflightError, UsageError
from harness.providers import flaggems, resolve
from harness.run import checks
from harness.settings.kinds import OP_NAME, OP_NAME_TEXT, comma_items
from harness.settings.spec import Settings

ALL_OPS = "all"  # OPS=all: every node of the tree


def check_ops(items: Iterable[str], label: str) -> list[str]:
    """Validate operator names: non-empty, safe as a file name, each listed once."""
    ops: list[str] = []
    for item in items:
        if not OP_NAME.fullmatch(item):
            raise UsageError(f"{label}: {item!r} is not an operator name; expected "
                             f"{OP_NAME_TEXT} (one operator per item)")
        if item in ops:
            raise UsageError(f"{label}: {item!r} is listed twice")
        ops.append(item)
    if not ops:
        raise UsageError(f"{label} names no operator")
    return ops


def parse_ops(value: str, label: str = "OPS") -> list[str]:
    """Operators of --ops: comma-separated (kinds.comma_items)."""
    return check_ops(comma_items(label, value), label)


def parse_ops_file(text: str, label: str = "OPS_FILE") -> list[str]:
    """Operators of an ops file: one per line; `#` starts a comment; blank lines are skipped."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return check_ops((line for line in lines if line), label)


def given(flags: Mapping[str, object], env: Mapping[str, str]) -> bool:
    """Whether OPS or OPS_FILE was given (a campaign of several operators)."""
    return any(flags.get(k) or env.get(k.upper()) for k in ("ops", "ops_file"))


def ops_from(flags: Mapping[str, object], env: Mapping[str, str]) -> list[str]:
    """OPS or OPS_FILE from the flags, else from the environment (flags win as a pair)."""
    ops, ops_file = flags.get("ops"), flags.get("ops_file")
    if not (ops or ops_file):
        ops, ops_file = env.get("OPS"), env.get("OPS_FILE")
    if ops and ops_file:
        raise UsageError("give OPS or OPS_FILE, not both")
    if ops:
        return parse_ops(str(ops))
    if not ops_file:
        raise UsageError("nothing to run: give OPS (--ops a,b,c) or OPS_FILE (--ops-file FILE)")
    path = Path(str(ops_file))
    label = f"OPS_FILE={str(path)!r}"
    if not path.exists():
        raise UsageError(f"{label} does not exist")
    if not path.is_file():
        raise UsageError(f"{label} is not a file; expected a file with one operator per line")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{label} cannot be read as UTF-8 text ({exc.__class__.__name__}); "
                         "expected a file with one operator per line") from None
    return parse_ops_file(text, label)


def _tree(settings: Settings) -> Path:
    fg_dir = settings.flaggems_dir
    if fg_dir is None:
        raise PreflightError("flaggems_dir", f"FLAGGEMS_DIR is not set (BACKEND="
                             f"{settings.backend.name} has no embedded suite)")
    flaggems.check_layout(fg_dir)
    return fg_dir


def unparsable_ops(scan: flaggems.Scan) -> dict[str, str]:
    """{operator: its PREFLIGHT_FAILED line} for each benchmark file that does not parse: named
    after its file (``test_foo.py``: ``foo``), so that OPS=all lists it and it fails with its
    error instead of vanishing from a suite run."""
    return {PurePosixPath(rel).stem.removeprefix("test_"): str(PreflightError(
        "test_node", f"{rel} does not parse as Python ({why})")) for rel, why in scan.why.items()}


Scanned = tuple[Path, flaggems.Scan]  # FLAGGEMS_DIR and what its static scan found


def _scanned(settings: Settings) -> Scanned:
    fg_dir = _tree(settings)
    return fg_dir, flaggems.scan_benchmark(fg_dir)


def all_ops(settings: Settings, scanned: Scanned | None = None) -> dict[str, str]:
    """OPS=all: every benchmark node of the FlagGems tree outside its parallel files, by its
    stable operator name (resolve.op_names: the one OP, OPS and OPS_FILE resolve back to it),
    then each file that does not parse (unparsable_ops), unless a node has its name."""
    fg_dir, scan = scanned or _scanned(settings)
    found = {name: node.nodeid
             for name, node in resolve.op_names(scan.nodes, fg_dir).items()}
    if not found and not scan.why:
        raise PreflightError("test_node", f"OPS='all': no benchmark node under {str(fg_dir)!r}")
    return {**unparsable_ops(scan), **found}


def resolve_ops(settings: Settings, flags: Mapping[str, object], env: Mapping[str, str]
                ) -> list[str]:
    """The operators of OPS or OPS_FILE; OPS=all names every node of the tree (all_ops)."""
    ops = ops_from(flags, env)
    if ops == [ALL_OPS] and settings.planned_for_image:  # the image's FlagGems lists them
        return ops
    return list(all_ops(settings)) if ops == [ALL_OPS] else ops


def resolve_nodes(settings: Settings, ops: Sequence[str], scanned: Scanned | None = None
                  ) -> dict[str, str]:
    """Each operator's benchmark node, or the PREFLIGHT_FAILED line that says why it has none;
    a FlagGems directory that cannot hold any node raises PreflightError."""
    fg_dir, scan = scanned or _scanned(settings)
    broken, nodes = unparsable_ops(scan), list(scan.nodes)
    found = {}
    for op in ops:
        try:
            found[op] = resolve.resolve_node(nodes, op=op, flaggems_dir=fg_dir).nodeid
        except PreflightError as exc:
            found[op] = broken.get(op, str(exc))
    return found


def operators(settings: Settings, ops: Sequence[str]) -> dict[str, str]:
    """{operator: its node or why it cannot run}: OPS=all's own nodes, else resolved; with
    DTYPES, an operator whose benchmark does not run them has the line that says so (a suite
    that asks bfloat16 of an operator without it fails that operator at once, never in every
    resume's run)."""
    if settings.planned_for_image:  # a dry run's plan of a run in the image, made outside it
        return {op: ("<every node of the image's FlagGems>" if op == ALL_OPS
                     else f"<resolved in the image: {op}>") for op in ops}
    scanned = _scanned(settings)  # once: a tree of 1,100 files is parsed in seconds
    found = (all_ops(settings, scanned) if list(ops) == [ALL_OPS]
             else resolve_nodes(settings, ops, scanned))
    if not settings.dtypes:
        return found
    fg_dir, scan = scanned
    nodes = {n.nodeid: n for n in scan.nodes}
    for op, nodeid in found.items():
        problem = nodes.get(nodeid) and checks.dtypes_problem(settings, fg_dir, nodes[nodeid])
        if problem:
            found[op] = str(PreflightError("dtypes", problem))
    return found
