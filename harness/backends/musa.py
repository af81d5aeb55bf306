"""Moore Threads MUSA: mthreads-gmi table enumeration, MUSA graph capture and its quirks."""

from __future__ import annotations

import re
from collections.abc import Sequence

from harness.backends import Backend, CaptureRule, CaptureVerdict, Device
from harness.backends.cuda import CUDA_CAPTURE_RULES

# mthreads-gmi prints "    mthreads-gmi:2.4.1           Driver Version:5.1.0-server".
_HEADER = re.compile(r"mthreads-gmi:\s*\S+\s+Driver Version:\s*(\S+)")
# A device block opens at column 0: "0    MTT S5000            |00000000:18:00.0    |0%    ..."
_DEVICE_ROW = re.compile(r"^(\d+)\s+(\S.*?)\s*\|")
# "used(total)", e.g. "0MiB(81920MiB)".
_MEMORY = re.compile(r"(\d+)MiB\((\d+)MiB\)")

MUSA_CAPTURE_RULES: tuple[CaptureRule, ...] = (
    # A broken capture surfaces as this generic error (seen when capturing without a dedicated
    # capture stream); the context cannot be trusted afterwards.
    CaptureRule("musa error: unknown error", CaptureVerdict.POISONED),
    # The generator refuses to report its seed while capturing; nothing was enqueued.
    CaptureRule("current_seed is not callable during capture", CaptureVerdict.RECOVERABLE),
    # MUSA's runtime uses CUDA's wordings ("MUSA error: operation not permitted when stream is
    # capturing") and torch_musa keeps torch's assertNotCapturing text.
    *CUDA_CAPTURE_RULES,
)


def parse_mthreads_gmi(text: str) -> list[Device]:
    """Parse the default table that `mthreads-gmi` prints (1.x and 2.x layouts).

    The table carries index, name, total memory and the driver version; it has no UUID or clock.
    Blank output gives []; text without the "mthreads-gmi:... Driver Version:..." header raises
    ValueError. Parsing stops at the "Processes:" section.
    """
    if not text.strip():
        return []
    header = _HEADER.search(text)
    if header is None:
        raise ValueError("mthreads-gmi: no 'mthreads-gmi:<version> Driver Version:<version>' "
                         f"header in {text[:120]!r}")
    driver = header.group(1)
    devices = []
    for line in text.splitlines():
        if line.strip().startswith("Processes:"):
            break
        row = _DEVICE_ROW.match(line)
        if row is None:
            continue
        memory = _MEMORY.search(line)
        devices.append(Device(
            index=int(row.group(1)),
            name=row.group(2),
            driver=driver,
            memory_mib=int(memory.group(2)) if memory else None,
        ))
    return devices


def mthreads_container_args(engine: str, devices: Sequence[str]) -> tuple[str, ...]:
    """The MThreads container runtime (mt-container-toolkit) and the devices it exposes."""
    return ("--runtime=mthreads", "-e", f"MTHREADS_VISIBLE_DEVICES={','.join(devices) or 'all'}")


BACKEND = Backend(
    name="musa",
    aliases=("mthreads", "mt"),
    vendor="mthreads",
    torch_device="musa",
    visibility_vars=("MUSA_VISIBLE_DEVICES",),
    smi_command=("mthreads-gmi",),
    parse_devices=parse_mthreads_gmi,
    graph_class="torch.musa.MUSAGraph",
    capture_rules=MUSA_CAPTURE_RULES,
    unknown_capture_verdict=CaptureVerdict.FATAL,
    # Attempting unique2's capture breaks the MUSA context, so it is timed directly untried.
    capture_deny_ops=frozenset({"unique2"}),
    compat_plugins=("harness.plugins.compat_musa",),
    python_modules=("torch", "triton", "flag_gems", "torch_musa"),
    container_device_args=mthreads_container_args,
    # FlagTree's RemoveLayoutConversions switch as this stack spells it (FlagTree sources).
    switches={"RLC_ENHANCE": "FLAGTREE_MUSA_RLC_ENHANCE"},
    # Slurm sets no MUSA_VISIBLE_DEVICES for GRES: a task takes a node and sets it itself.
    slurm_unit="node",
)
