"""Huawei Ascend: `npu-smi info` table enumeration and NPU graphs through torch_npu."""

from __future__ import annotations

import re

from harness.backends import Backend, CaptureVerdict, Device

_VERSION = re.compile(r"npu-smi\s+\S+\s+Version:\s*(\S+)")
_USED_TOTAL = re.compile(r"(\d+)\s*/\s*(\d+)")


def parse_npu_smi_info(text: str) -> list[Device]:
    """Parse the device table of `npu-smi info`: one Device per chip (what torch_npu counts).

    Each chip is a pair of rows: "NPU  Name | Health | ..." then "Chip [Device|Phy-ID] | Bus-Id |
    ... used / total". The index is the chip's Device/Phy-ID column where the table has one
    (310P, A3: several chips per NPU) and the NPU id otherwise (910B: one chip per NPU); that is
    the id ASCEND_RT_VISIBLE_DEVICES takes. Memory is the last "used / total" pair of the chip
    row: HBM where the table has an HBM column, on-chip memory otherwise. The driver is the
    "Version:" of the banner. No UUID or clock is printed. Blank output gives []; text without
    the "npu-smi <v> Version: <v>" banner raises ValueError. Parsing stops at the process table.
    """
    if not text.strip():
        return []
    banner = _VERSION.search(text)
    if banner is None:
        raise ValueError(f"npu-smi: no 'npu-smi <version> Version: <version>' banner in "
                         f"{text[:120]!r}")
    devices = []
    npu: tuple[int, str] | None = None
    for line in text.splitlines():
        if "Process id" in line:
            break
        cells = line.strip().strip("|").split("|")
        first = cells[0].split()
        if len(cells) < 3 or not first or not first[0].isdigit():
            continue
        if len(first) >= 2 and not first[1].isdigit():  # "0     910B2C"
            npu = (int(first[0]), " ".join(first[1:]))
            continue
        if npu is None:
            raise ValueError(f"npu-smi: chip row before any NPU row: {line!r}")
        pairs = _USED_TOTAL.findall(cells[2])
        devices.append(Device(
            index=int(first[1]) if len(first) >= 2 else npu[0],
            name=npu[1],
            driver=banner.group(1),
            memory_mib=int(pairs[-1][1]) if pairs else None,
        ))
        npu = None
    return devices


BACKEND = Backend(
    name="ascend",
    aliases=("npu", "huawei"),
    vendor="ascend",
    torch_device="npu",
    visibility_vars=("ASCEND_RT_VISIBLE_DEVICES",),
    smi_command=("npu-smi", "info"),
    parse_devices=parse_npu_smi_info,
    graph_class="torch.npu.NPUGraph",
    # No NPU capture wording is recorded yet, so every capture failure re-raises.
    capture_rules=(),
    unknown_capture_verdict=CaptureVerdict.FATAL,
    python_modules=("torch", "triton", "flag_gems", "torch_npu"),
    # Slurm sets no ASCEND_RT_VISIBLE_DEVICES for GRES: a task takes a node and sets it itself.
    slurm_unit="node",
)
