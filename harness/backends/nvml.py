"""NVIDIA's management library through ctypes: a device's clocks, temperature and power state.

No Python binding is needed: libnvidia-ml.so.1 comes with the driver. Names and constants are
nvml.h's: nvmlInit_v2, nvmlDeviceGetHandleByIndex_v2 (or ByUUID for a UUID in
CUDA_VISIBLE_DEVICES), nvmlDeviceGetClockInfo with NVML_CLOCK_SM (1) and NVML_CLOCK_MEM (2),
nvmlDeviceGetTemperature with NVML_TEMPERATURE_GPU (0), nvmlDeviceGetPerformanceState, and
nvmlDeviceGetCurrentClocksThrottleReasons (renamed ...ClocksEventReasons by newer drivers; the
old name is tried first). Every failure is soft: the opener returns the reason as a line, a
query that fails reads None.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from harness.backends import ClockReader, Clocks

LIBRARY = "libnvidia-ml.so.1"
NVML_SUCCESS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
# nvml.h's nvmlClocksThrottleReason* bits that slow a kernel down against what it would run at:
# HwSlowdown 0x8, SwThermalSlowdown 0x20, HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80.
# The rest are not kept: GpuIdle 0x1 (nothing runs), ApplicationsClocksSetting 0x2,
# SyncBoost 0x10, DisplayClockSetting 0x100, and SwPowerCap 0x4, which an H200 reports under
# a long kernel as its steady state (nvidia-smi showed it under a 4096x4096 tanh), on both
# sides.
THROTTLE_SLOWDOWNS = 0x8 | 0x20 | 0x40 | 0x80
THROTTLE_FUNCTIONS = ("nvmlDeviceGetCurrentClocksThrottleReasons",
                      "nvmlDeviceGetCurrentClocksEventReasons")


def device_entry(visible: str | None, ordinal: int) -> str | None:
    """The CUDA_VISIBLE_DEVICES entry of the process's device `ordinal` (NVML numbers every
    device of the host, not only the visible ones): an index or a UUID; None: not visible."""
    if visible is None or not visible.strip():
        return str(ordinal)
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    return entries[ordinal] if 0 <= ordinal < len(entries) else None


def _query(function: Callable[..., int], *args: Any, kind: Any = ctypes.c_uint) -> int | None:
    value = kind()
    return int(value.value) if function(*args, ctypes.byref(value)) == NVML_SUCCESS else None


def reader_for(lib: Any, handle: Any) -> ClockReader:
    """A reader of the device `handle` through the loaded library `lib`."""
    throttle_fn = next((getattr(lib, n) for n in THROTTLE_FUNCTIONS if hasattr(lib, n)), None)

    def read() -> Clocks:
        throttle = None if throttle_fn is None else _query(throttle_fn, handle,
                                                           kind=ctypes.c_ulonglong)
        return Clocks(sm_mhz=_query(lib.nvmlDeviceGetClockInfo, handle, NVML_CLOCK_SM),
                      mem_mhz=_query(lib.nvmlDeviceGetClockInfo, handle, NVML_CLOCK_MEM),
                      temp_c=_query(lib.nvmlDeviceGetTemperature, handle, NVML_TEMPERATURE_GPU),
                      pstate=_query(lib.nvmlDeviceGetPerformanceState, handle, kind=ctypes.c_int),
                      throttle=None if throttle is None else throttle & THROTTLE_SLOWDOWNS)

    return read


def open_clocks(visible: str | None, ordinal: int,
                load: Callable[[str], Any] = ctypes.CDLL) -> ClockReader | str:
    """A clock reader of the process's device `ordinal`, or why there is none."""
    try:
        lib = load(LIBRARY)
        if lib.nvmlInit_v2() != NVML_SUCCESS:
            return f"{LIBRARY}: nvmlInit_v2 failed"
    except (OSError, AttributeError) as exc:
        return f"{LIBRARY} not loaded: {exc}"
    entry = device_entry(visible, ordinal)
    if entry is None:
        return f"device {ordinal} is not among CUDA_VISIBLE_DEVICES={visible!r}"
    handle = ctypes.c_void_p()
    if entry.isdigit():
        rc = lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(int(entry)), ctypes.byref(handle))
    else:
        rc = lib.nvmlDeviceGetHandleByUUID(entry.encode(), ctypes.byref(handle))
    if rc != NVML_SUCCESS:
        return f"{LIBRARY}: no handle for device {entry!r} (NVML error {rc})"
    return reader_for(lib, handle)
