"""What ran, where: harness files and commit, versions, device facts; run_identity.json."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from harness import __version__
from harness.backends import Device
from harness.contract.identity import SCHEMA, file_hashes, git_state
from harness.settings import variables
from harness.settings.spec import REPO_ROOT

IMAGE_DIGEST_VAR = "ZL_IMAGE_DIGEST"


def harness_identity(root: Path = REPO_ROOT) -> dict[str, object]:
    return {"version": __version__, **git_state(root), "files": file_hashes(root)}


def build_identity(*, settings_caliber: dict[str, object], node: str, op: str,
                   backend: str, devices_before: list[Device], devices_after: list[Device],
                   versions: dict[str, object], flaggems_dir: Path | None,
                   runtime: dict[str, object] | None = None,
                   environ: dict[str, str] | None = None) -> dict[str, object]:
    """The run_identity.json document."""
    environ = dict(variables.environ()) if environ is None else environ
    fg = git_state(flaggems_dir) if flaggems_dir else {"commit": None, "dirty": None}
    clocks_after = {d.index: d.sm_clock_mhz for d in devices_after}
    return {
        "schema": SCHEMA,
        "backend": backend,
        "op": op,
        "node": node,
        **settings_caliber,
        "devices": [
            {**asdict(d), "sm_clock_mhz_before": d.sm_clock_mhz,
             "sm_clock_mhz_after": clocks_after.get(d.index)}
            for d in devices_before
        ],
        "versions": {**versions, "flaggems_commit": fg["commit"],
                     "flaggems_dirty": fg["dirty"]},
        "runtime": runtime or {},
        "image_digest": environ.get(IMAGE_DIGEST_VAR) or None,
        "harness": harness_identity(),
    }
