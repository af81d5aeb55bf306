"""Ask the interpreter that will run pytest what it has, without importing any of it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from harness.errors import PreflightError
from harness.tuning.precompile import ASYNC_MODULE

# Runs in the interpreter that will run pytest: finds each module without importing it (an
# import of torch or flag_gems costs seconds) and reads the installed distribution versions.
_PROBE = r"""
import importlib.metadata as md, importlib.util as iu, json, os, platform, sys
mods = sys.argv[1].split(",")
dists = sys.argv[2].split(",")
sys.path[:0] = [p for p in sys.argv[3].split("\n") if p]
out = {"python": platform.python_version(), "missing": [], "versions": {}, "features": {}}
for m in mods:
    try:
        found = iu.find_spec(m) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        out["missing"].append(m)
for d in dists:
    try:
        out["versions"][d] = md.version(d)
    except md.PackageNotFoundError:
        pass
for f in filter(None, sys.argv[4].split(",")):
    top, _, rest = f.partition(".")
    try:
        spec = iu.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    roots = (spec.submodule_search_locations if spec else None) or []
    bases = [os.path.join(r, *rest.split(".")) for r in roots]
    out["features"][f] = any(os.path.isfile(b + ".py") or
                             os.path.isfile(os.path.join(b, "__init__.py")) for b in bases)
print(json.dumps(out))
"""
# Submodules whose presence decides a plugin (feature detection, not version checks).
FEATURE_MODULES = (ASYNC_MODULE,)
# Distributions whose versions every run records, beside the backend's own python_modules.
VERSION_DISTS = ("torch", "triton", "flagtree", "flag_gems", "pytest", "numpy", "pyyaml")


class _ProbeFacts(TypedDict):
    python: str
    missing: list[str]
    versions: dict[str, str]


class Probe(_ProbeFacts, total=False):
    """What probe_python found in an interpreter."""

    features: dict[str, bool]


def probe_python(python: str, modules: tuple[str, ...],
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
                 extra_paths: tuple[Path, ...] = ()) -> Probe:
    """Ask `python` which of `modules` it cannot find, which versions it has installed and
    which FEATURE_MODULES exist (looked up as files beside their package, never imported).

    `extra_paths` go first on its sys.path, as pytest's `pythonpath` setting puts them there.
    """
    try:
        dists = dict.fromkeys((*VERSION_DISTS, *modules))
        paths = "\n".join(str(p) for p in extra_paths)
        proc = run([python, "-c", _PROBE, ",".join(modules), ",".join(dists), paths,
                    ",".join(FEATURE_MODULES)],
                   capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise PreflightError("python_modules", f"cannot start {python}: {exc}") from None
    if proc.returncode != 0:
        said = (proc.stderr.strip() or proc.stdout.strip())[-300:] or "no output"
        raise PreflightError("python_modules", f"{python} failed (exit {proc.returncode}): "
                                               f"{said}")
    try:  # the answer is the last line: a wrapper may print before it runs python
        probe: Probe = json.loads((proc.stdout.strip().splitlines() or [""])[-1])
    except ValueError:
        raise PreflightError("python_modules", f"{python} did not answer as a Python "
                             f"interpreter: {proc.stdout.strip()[-200:] or 'no output'}"
                             ) from None
    return probe


# Runs in a side's interpreter: a digest of each distribution's RECORD, which lists every file
# it installed with that file's hash, so two builds of one version (a FlagTree from two
# commits) differ here while two installs of one wheel do not.
_BUILDS = r"""
import hashlib, importlib.metadata as md, json, sys
out = {}
for d in filter(None, sys.argv[1].split(",")):
    try:
        text = md.distribution(d).read_text("RECORD")
    except md.PackageNotFoundError:
        continue
    if text:
        out[d] = hashlib.sha256(text.encode()).hexdigest()[:12]
print(json.dumps(out))
"""


def build_digests(python: str, dists: tuple[str, ...],
                  run: Callable[..., subprocess.CompletedProcess] = subprocess.run
                  ) -> dict[str, str]:
    """{distribution: digest of its installed files' list} of `dists` installed in `python`
    (those without a RECORD left out); PreflightError when it cannot tell."""
    try:
        proc = run([python, "-c", _BUILDS, ",".join(dists)], capture_output=True, text=True,
                   timeout=60)
        found = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise PreflightError("python_modules", f"cannot read {python}'s builds: {exc}") from None
    if not isinstance(found, dict):
        raise PreflightError("python_modules", f"cannot read {python}'s builds: exit "
                             f"{proc.returncode}")
    return {str(k): str(v) for k, v in found.items()}
