"""AMD ROCm: rocm-smi or amd-smi JSON enumeration; HIP graphs through torch.cuda."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.backends import Backend, CaptureRule, CaptureVerdict, Device
from harness.backends.cuda import CUDA_CAPTURE_RULES

# rocm-smi ships with every ROCm release; amd-smi (its successor) is not on older hosts. The
# parser also reads `amd-smi static --asic --vram --driver --json`, so either tool's output works.
SMI_COMMAND = ("rocm-smi", "--showproductname", "--showuniqueid", "--showmeminfo", "vram",
               "--showdriverversion", "--json")
_NOT_AVAILABLE = frozenset({"", "n/a", "none"})
_MIB_PER_UNIT = {"b": 1 / 2**20, "kb": 1 / 1024, "mb": 1, "mib": 1, "gb": 1024, "gib": 1024}

ROCM_CAPTURE_RULES: tuple[CaptureRule, ...] = (
    # HIP prints CUDA's wordings ("HIP error: operation not permitted when stream is capturing")
    # and torch adds "Search for `hipError...'": the error names catch a message that kept
    # only the name.
    *CUDA_CAPTURE_RULES,
    CaptureRule("hiperrorstreamcaptureinvalidated", CaptureVerdict.POISONED),
    CaptureRule("hiperrorstreamcaptureunsupported", CaptureVerdict.RECOVERABLE),
    CaptureRule("hiperrorstreamcaptureimplicit", CaptureVerdict.RECOVERABLE),
    CaptureRule("hiperrorcapturedevent", CaptureVerdict.RECOVERABLE),
)


def _lookup(record: Mapping[str, Any], *keys: str) -> Any:
    """The first of `keys` present in `record`, compared case-insensitively (rocm-smi changed
    "Card series" to "Card Series" between releases)."""
    folded = {str(k).lower(): v for k, v in record.items()}
    for key in keys:
        if key.lower() in folded:
            return folded[key.lower()]
    return None


def _text(value: Any) -> str | None:
    if value is None or str(value).strip().lower() in _NOT_AVAILABLE:
        return None
    return str(value).strip()


def _mib(value: Any, unit: str) -> int | None:
    """`value` in `unit` as whole MiB; amd-smi's "MB" is the library's MiB count."""
    number = _text(value)
    if number is None:
        return None
    if " " in number:  # amd-smi's human-readable form: "196592 MB"
        number, unit = number.split(None, 1)
    factor = _MIB_PER_UNIT.get(unit.strip().lower())
    if factor is None:
        raise ValueError(f"rocm: unknown memory unit {unit!r}")
    return int(float(number) * factor)


def _parse_rocm_smi(data: Mapping[str, Any]) -> list[Device]:
    system = data.get("system")
    driver = _text(_lookup(system, "Driver version")) if isinstance(system, Mapping) else None
    devices = []
    for key, card in data.items():
        if not (key.startswith("card") and key[4:].isdigit() and isinstance(card, Mapping)):
            continue
        devices.append(Device(
            index=int(key[4:]),
            name=_text(_lookup(card, "Card Series", "Device Name")) or key,
            uuid=_text(_lookup(card, "Unique ID")),
            driver=_text(_lookup(card, "Driver version")) or driver,
            memory_mib=_mib(_lookup(card, "VRAM Total Memory (B)"), "B"),
        ))
    return sorted(devices, key=lambda d: d.index)


def _parse_amd_smi(entries: list[Any]) -> list[Device]:
    devices = []
    for entry in entries:
        if not isinstance(entry, Mapping) or "gpu" not in entry:
            raise ValueError(f"amd-smi: expected an object with a 'gpu' index, got {entry!r:.80}")
        asic = entry.get("asic") or {}
        vram = entry.get("vram") or {}
        driver = entry.get("driver") or {}
        size = vram.get("size")
        if isinstance(size, Mapping):
            memory = _mib(size.get("value"), str(size.get("unit", "MB")))
        else:
            memory = _mib(size, "MB")
        devices.append(Device(
            index=int(entry["gpu"]),
            name=_text(asic.get("market_name")) or f"gpu{entry['gpu']}",
            uuid=_text(asic.get("asic_serial")),
            driver=_text(driver.get("version") or driver.get("driver_version")),
            memory_mib=memory,
        ))
    return devices


def parse_rocm_json(text: str) -> list[Device]:
    """Parse `rocm-smi ... --json` or `amd-smi static ... --json` output, whichever it is.

    rocm-smi gives {"card0": {...}, "system": {"Driver version": ...}}; amd-smi gives a list of
    {"gpu": 0, "asic": ..., "vram": ..., "driver": ...}, wrapped in {"gpu_data": [...]} by newer
    releases. The uuid is the ASIC's unique id (rocm-smi "Unique ID", amd-smi "asic_serial").
    Blank output gives []; anything that is not one of these shapes raises ValueError.
    """
    if not text.strip():
        return []
    lines = text.splitlines()
    # Skip any notice printed before the document; the JSON starts on a line of its own.
    start = next((i for i, line in enumerate(lines) if line.lstrip()[:1] in ("{", "[")), None)
    try:
        data = json.loads("\n".join(lines[start:])) if start is not None else None
    except json.JSONDecodeError as exc:
        raise ValueError(f"rocm: output is not JSON ({exc}): {text[:120]!r}") from None
    if isinstance(data, Mapping) and isinstance(data.get("gpu_data"), list):
        return _parse_amd_smi(data["gpu_data"])
    if isinstance(data, list):
        return _parse_amd_smi(data)
    if isinstance(data, Mapping) and any(str(k).startswith("card") for k in data):
        return _parse_rocm_smi(data)
    raise ValueError(f"rocm: neither rocm-smi nor amd-smi JSON: {text[:120]!r}")


BACKEND = Backend(
    name="rocm",
    aliases=("amd", "hip"),
    vendor="amd",
    torch_device="cuda",  # ROCm builds of torch expose HIP devices as torch.cuda
    # Only HIP_VISIBLE_DEVICES is set. ROCR_VISIBLE_DEVICES filters below HIP and HIP then
    # indexes into what is left, so setting both to "2,3" would leave no device 2 or 3 for HIP.
    # ROCR is still read, to see what the host already narrowed.
    visibility_vars=("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"),
    smi_command=SMI_COMMAND,
    parse_devices=parse_rocm_json,
    graph_class="torch.cuda.CUDAGraph",  # hipGraph behind torch.cuda's graph API
    upstream_graph_bench="triton.testing.do_bench_cudagraph",
    capture_rules=ROCM_CAPTURE_RULES,
    unknown_capture_verdict=CaptureVerdict.FATAL,
    python_modules=("torch", "triton", "flag_gems"),
    slurm_unit="gpu",  # Slurm sets ROCR_VISIBLE_DEVICES for a GPU GRES task
    apptainer_flags=("--rocm",),
)
