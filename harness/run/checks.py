"""The preflight checks, one function each: what a run needs before anything is created."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import yaml

from harness.backends import Device
from harness.contract import records
from harness.errors import PreflightError, UsageError
from harness.executors.devices import visible_devices
from harness.providers import benchmark_classes, flaggems, resolve
from harness.run.probe import probe_python
from harness.settings.spec import VARS_BY_MAKE, Settings

# A check that needs another's result: when that one failed, it is skipped, not failed again.
NEEDS = {"benchmark_file": "flaggems_dir", "test_node": "benchmark_file", "dtypes": "test_node",
         "device": "backend"}


class Facts(TypedDict, total=False):
    """What the checks established so far; each key is set by the check named beside it."""

    flaggems_dir: Path  # flaggems_dir
    node: flaggems.Node  # test_node
    op: str  # test_node
    devices: tuple[Device, ...]  # device
    python_version: str  # python_modules
    versions: dict[str, str]  # python_modules
    features: dict[str, bool]  # python_modules


@dataclass(frozen=True)
class Skip:
    """A check that does not apply to these settings, and why."""

    reason: str


@dataclass(frozen=True)
class Environment:
    """What the checks may touch outside the settings; tests replace it."""

    python: str = sys.executable
    which: Callable[[str], str | None] = shutil.which
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run


# A check raises HarnessError when it fails; else it returns the facts it established (None:
# none) or why it does not apply. It reads only the facts of the checks NEEDS puts before it.
Check = Callable[[Settings, Facts, Environment], "Facts | Skip | None"]


def _out(settings: Settings, facts: Facts, env: Environment) -> None:
    """OUT, or the directory it will be created in, must let this user create directories."""
    out = settings.out
    existing = next((p for p in (out, *out.parents) if p.is_dir()), Path("."))
    why = None if os.access(existing, os.W_OK | os.X_OK) else "not writable by this user"
    if why is None:  # access() says yes to root even where mkdir fails (/proc, /sys)
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".harness-probe-", dir=existing))
        except OSError as exc:
            why = f"no directory can be created there ({exc.strerror})"
    if why:
        where = "" if existing == out else f" (its nearest directory {str(existing)!r})"
        raise PreflightError("out", f"OUT={str(out)!r}{where}: {why}; expected a directory "
                             "this user can create run directories in")


def _flaggems_dir(settings: Settings, facts: Facts, env: Environment) -> Facts:
    """FLAGGEMS_DIR must be set (or the backend embed a suite) and hold benchmark/."""
    if settings.flaggems_dir is None:
        raise PreflightError("flaggems_dir", f"FLAGGEMS_DIR is not set (BACKEND="
                             f"{settings.backend.name} has no embedded suite)")
    flaggems.check_flaggems_dir(settings.flaggems_dir)
    return {"flaggems_dir": settings.flaggems_dir}


def _benchmark_file(settings: Settings, facts: Facts, env: Environment) -> None:
    """The checkout must have the benchmark layout the harness drives."""
    flaggems.check_layout(facts["flaggems_dir"])


def _test_node(settings: Settings, facts: Facts, env: Environment) -> Facts:
    """OP or TEST_NODE must name exactly one node of the checkout."""
    if not (settings.op or settings.test_node):
        raise PreflightError("test_node", "nothing to run: set OP or TEST_NODE")
    fg_dir = facts["flaggems_dir"]
    node = None
    if settings.test_node and (file := resolve.test_node_file(settings.test_node)):
        # Every unit of a campaign names its node: its file alone is parsed (the whole tree
        # took 0.32 s a unit on an H100 host); the whole scan words any error.
        with contextlib.suppress(PreflightError, UsageError):
            node = resolve.resolve_node(list(flaggems.scan_benchmark(fg_dir, only=file).nodes),
                                        test_node=settings.test_node, flaggems_dir=fg_dir)
    if node is None:
        node = resolve.resolve_node(flaggems.scan_tree(fg_dir), op=settings.op,
                                     op_file=settings.op_file, test_node=settings.test_node,
                                     flaggems_dir=fg_dir)
    return {"node": node, "op": settings.op or flaggems.op_name_for(node)}


def dtypes_problem(settings: Settings, flaggems_dir: Path, node: flaggems.Node) -> str | None:
    """Why DTYPES cannot run on `node`, or None: each must be among the dtypes the benchmark
    declares (FlagGems fails the node otherwise); where they are not known statically, among
    those FlagGems' --dtypes accepts."""
    selectable = benchmark_classes.SELECTABLE_DTYPES
    declared = benchmark_classes.benchmark_dtypes(flaggems_dir, node)
    accepted = [d for d in declared if d in selectable] if declared else sorted(selectable)
    outside = [d for d in settings.dtypes if d not in accepted]
    if not outside:
        return None
    whose = (f"{node.nodeid} declares (of those FlagGems' --dtypes accepts)" if declared
             else "FlagGems' --dtypes accepts")
    label = VARS_BY_MAKE["DTYPES"].label(settings.sources.get("DTYPES", "default"))
    return (f"{label}={','.join(settings.dtypes)!r} is not accepted: {', '.join(outside)} is "
            f"not measured; {whose}: {', '.join(accepted) or 'none'}")


def _dtypes(settings: Settings, facts: Facts, env: Environment) -> Skip | None:
    """DTYPES must be ones the benchmark runs (dtypes_problem)."""
    if not settings.dtypes:
        return Skip("DTYPES unset: the benchmark's own")
    problem = dtypes_problem(settings, facts["flaggems_dir"], facts["node"])
    if problem:
        raise UsageError(problem)
    return None


def _shape_file(settings: Settings, facts: Facts, env: Environment) -> Skip | None:
    """In SHAPE_MODE=file, SHAPE_FILE must be a shape file FlagGems reads."""
    if settings.shape_mode != "file":
        return Skip(f"SHAPE_MODE={settings.shape_mode}")
    _check_shape_file(settings.shape_file)
    return None


def _check_shape_file(path: Path | None) -> None:
    """SHAPE_FILE must be a YAML file that FlagGems' set_shapes reads without failing."""
    label = f"SHAPE_FILE={str(path)!r}"
    if path is None or not path.exists():
        raise PreflightError("shape_file", f"{label} does not exist")
    if not path.is_file():
        raise PreflightError("shape_file", f"{label} is not a file; expected a shape YAML file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PreflightError("shape_file", f"{label} cannot be read as UTF-8 text "
                             f"({exc.__class__.__name__}); expected a shape YAML file") from None
    except yaml.YAMLError as exc:
        raise PreflightError("shape_file", f"{label} is not valid YAML: "
                             f"{str(exc).splitlines()[0]}") from None
    problem = flaggems.shape_config_problem(data)
    if problem:
        raise PreflightError("shape_file", f"{label}: {problem}")


def _replay_from(settings: Settings, facts: Facts, env: Environment) -> Skip | None:
    """REPLAY_FROM, where set, must be a directory whose autotune records read cleanly."""
    if settings.replay_from is None:
        return Skip("REPLAY_FROM unset")
    if not settings.replay_from.is_dir():
        raise PreflightError("replay_from", f"REPLAY_FROM={str(settings.replay_from)!r} "
                             "is not a run or records directory")
    try:  # the records are read again when the run starts: corrupt ones fail here
        records.read_records(settings.replay_from)
    except UsageError as exc:
        raise PreflightError("replay_from", str(exc)) from None
    return None


def _backend(settings: Settings, facts: Facts, env: Environment) -> None:
    """The backend's device tool must be on PATH: a sign that this is one of its hosts."""
    backend = settings.backend
    tool = backend.smi_command[0] if backend.smi_command else None
    if tool and env.which(tool) is None:
        raise PreflightError("backend", f"{tool} not found on PATH: is this a "
                             f"{backend.name} host? (BACKEND={backend.name})")


def _device(settings: Settings, facts: Facts, env: Environment) -> Facts | Skip:
    """At least one device must be visible, and DEVICES name only devices the tool lists."""
    backend = settings.backend
    if not backend.is_accelerator:  # its one device is the host: DEVICES is moot
        return Skip("no accelerator on this backend" + (
            f"; DEVICES={','.join(settings.devices)} is ignored" if settings.devices else ""))
    try:
        found = backend.enumerate_devices(run=env.run)
    except ValueError as exc:  # the tool answered in a format its parser does not know
        raise PreflightError("device", str(exc)) from None
    if found:  # a tool that lists nothing leaves the check below to say so
        _check_devices_exist(settings, found)
    devices = tuple(visible_devices(found, settings))
    if not devices:
        wanted = ",".join(settings.devices) or "any"
        raise PreflightError("device", f"no visible {backend.name} device "
                             f"(DEVICES={wanted}; found {len(found)})")
    return {"devices": devices}


def _check_devices_exist(settings: Settings, found: list[Device]) -> None:
    """DEVICES may name only devices the vendor tool lists, by index or UUID."""
    known = {str(d.index) for d in found} | {d.uuid for d in found if d.uuid}
    missing = [item for item in settings.devices if item not in known]
    if missing:
        listed = ", ".join(str(d.index) + (f" ({d.uuid})" if d.uuid else "") for d in found)
        raise PreflightError("device", f"DEVICES={','.join(settings.devices)!r} names "
                             f"{', '.join(missing)}, which {settings.backend.name} does not "
                             f"have; its devices: {listed or 'none found'}")


def _python_modules(settings: Settings, facts: Facts, env: Environment) -> Facts:
    """The interpreter that runs pytest must find the backend's modules; it tells versions."""
    probe = probe_python(env.python, settings.backend.python_modules, env.run,
                         flaggems.pytest_pythonpath(settings.flaggems_dir))
    if probe["missing"]:
        raise PreflightError("python_modules", f"{env.python} cannot import "
                             f"{', '.join(probe['missing'])}"
                             + interpreter_hint(settings, env.python))
    return {"python_version": probe["python"], "versions": probe["versions"],
            "features": probe.get("features", {})}


def interpreter_hint(settings: Settings, python: str) -> str:
    """How to get the missing modules, for the interpreter that runs the harness itself (an
    A/B side's own interpreter is the user's choice already): the backend's install command,
    and how make chooses the interpreter (after `make demo`, .venv's cpu stack)."""
    if python != sys.executable:
        return ""
    backend = settings.backend
    install = f"install them: {backend.install_hint}; or " if backend.install_hint else ""
    image = "; or RUNNER=docker to run in the backend's image" if backend.is_accelerator else ""
    return (f" (the interpreter that runs the harness); {install}run the harness with one that "
            "has them: make PYTHON=/path/to/python (the Makefile's default is .venv/bin/python "
            f"where .venv exists, else python3){image}")


BY_NAME: dict[str, Check] = {
    "out": _out, "flaggems_dir": _flaggems_dir, "benchmark_file": _benchmark_file,
    "test_node": _test_node, "dtypes": _dtypes, "shape_file": _shape_file,
    "replay_from": _replay_from, "backend": _backend, "device": _device,
    "python_modules": _python_modules,
}
CHECKS = tuple(BY_NAME)  # in DESIGN.md's order
