"""A run's identity document: what its settings, plan, command and devices say of it."""

from __future__ import annotations

from pathlib import Path

from harness.backends import Device
from harness.contract import boundary
from harness.executors.devices import visible_devices
from harness.fsutil import take_json
from harness.run import identity
from harness.run.preflight import Plan
from harness.settings import variables
from harness.settings.spec import Settings
from harness.tuning import precompile, screen


def read_runtime(run_dir: Path) -> dict[str, object]:
    """The runtime facts the plugins left in the run directory (the file is then dropped)."""
    facts: dict[str, object] = take_json(run_dir / boundary.RUNTIME_FILE) or {}
    return facts


def visible(settings: Settings) -> list[Device]:
    """The devices of `settings`' backend that its selection leaves visible, as found now."""
    return visible_devices(settings.backend.enumerate_devices(), settings)


def identity_doc(settings: Settings, plan: Plan, command: list[str], image: str | None,
                 run_dir: Path, devices_before: list[Device], extra_env: dict[str, str] | None,
                 precompile_off: str | None) -> dict[str, object]:
    """run_identity.json less what the run's outcome adds."""
    doc = identity.build_identity(
        settings_caliber=settings.caliber(), node=plan.node.nodeid, op=plan.op,
        backend=settings.backend.name, devices_before=devices_before,
        devices_after=visible(settings),
        versions={"python": plan.python_version, **plan.versions},
        flaggems_dir=settings.flaggems_dir, runtime=read_runtime(run_dir),
        # an A/B side that is an image: its digest, as a run inside the image records it
        environ={**variables.environ(), identity.IMAGE_DIGEST_VAR: image}
        if image else None)
    compiled = precompile.read_side_file(run_dir)
    doc.update({"command": command, "extra_env": extra_env or {},
                "warmup_share": list(settings.warmup_share) if settings.warmup_share else None,
                "precompile": compiled or {"off": precompile_off or "no_report"},
                "screen": screen.read_side_file(run_dir)})
    return doc
