"""Check that flag_gems dispatches to the backend's vendor, pin the device, record runtime facts.

The harness passes its backend as ZL_PLUGIN_BACKEND and the run directory as ZL_PLUGIN_RUN_DIR; the
device is already narrowed by the backend's visibility variable, so the pinned device is index 0.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from harness.contract import boundary

READER = "the device_setup plugin"


def _version(module: str) -> str | None:
    try:
        return getattr(importlib.import_module(module), "__version__", None)
    except ImportError:
        return None


def vendor_mismatch(expected: str | None, actual: str | None, backend: str) -> str | None:
    """The error text when flag_gems dispatches elsewhere than the backend expects, else None."""
    if expected is None or expected == actual:
        return None
    return (f"flag_gems.vendor_name is {actual!r} but BACKEND={backend} expects {expected!r}: "
            "the installed flag_gems or triton does not match this backend")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # tryfirst: FlagGems' conftest reads flag_gems.device at import; fail before any test does.
    backend = boundary.read(boundary.BACKEND, READER, pytest.UsageError)
    import flag_gems
    import torch

    message = vendor_mismatch(backend.vendor, getattr(flag_gems, "vendor_name", None),
                              backend.name)
    if message:
        raise pytest.UsageError(message)
    device_module = getattr(torch, backend.torch_device, None)
    name = None
    if device_module is not None and hasattr(device_module, "set_device"):
        device_module.set_device(0)
        if hasattr(device_module, "get_device_name"):
            name = device_module.get_device_name(0)
    run_dir = boundary.read(boundary.RUN_DIR, READER, pytest.UsageError)
    facts = {
        "vendor_name": flag_gems.vendor_name,
        "device_name": name,
        "torch": torch.__version__,
        "triton": _version("triton"),
        "flag_gems": getattr(flag_gems, "__version__", None),
    }
    Path(run_dir, boundary.RUNTIME_FILE).write_text(json.dumps(facts, indent=2) + "\n",
                                                    encoding="utf-8")
