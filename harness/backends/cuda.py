"""NVIDIA CUDA: nvidia-smi CSV enumeration and the CUDA graph-capture failure wordings."""

from __future__ import annotations

import csv
from collections.abc import Sequence

from harness.backends import Backend, CaptureRule, Device, Verdict, nvml

QUERY_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "clocks.sm")
SMI_COMMAND = (
    "nvidia-smi",
    "--query-gpu=" + ",".join(QUERY_FIELDS),
    "--format=csv,noheader,nounits",
)
_NOT_AVAILABLE = frozenset({"", "n/a", "[n/a]", "[not supported]"})

# Shared with rocm: HIP reports the same runtime wordings through torch.cuda. Patterns are
# matched as lowercase substrings, first match wins, and FATAL comes first so that a kernel
# failure is never taken for a refusal. The full wordings recorded on an H200 (torch 2.11) are
# in tests/unit/test_backends.py.
CUDA_CAPTURE_RULES: tuple[CaptureRule, ...] = (
    # FATAL: the kernel itself failed on the device; its numbers would be garbage.
    CaptureRule("an illegal memory access was encountered", Verdict.FATAL),
    # "triggered", not "device-side assert": torch appends "Compile with `TORCH_USE_CUDA_DSA`
    # to enable device-side assertions." to every CUDA error, refusals included.
    CaptureRule("device-side assert triggered", Verdict.FATAL),
    CaptureRule("unspecified launch failure", Verdict.FATAL),
    CaptureRule("misaligned address", Verdict.FATAL),
    CaptureRule("an illegal instruction was encountered", Verdict.FATAL),
    # POISONED: the capture was invalidated. Seen on an H200 after unique2 refused capture; when
    # the refusal is in the exception chain, classify_capture_exception lets the refusal decide.
    CaptureRule("operation failed due to a previous error during capture", Verdict.POISONED),
    # RECOVERABLE: the runtime refused to record the op (host sync, legacy-stream work, event
    # query); nothing ran wrong, so the shape can be timed directly.
    CaptureRule("operation not permitted when stream is capturing", Verdict.RECOVERABLE),
    CaptureRule("operation would make the legacy stream depend on a capturing blocking stream",
                Verdict.RECOVERABLE),
    CaptureRule("operation not permitted on an event last recorded in a capturing stream",
                Verdict.RECOVERABLE),
    # torch's own refusals (assertNotCapturing, CUDAGeneratorImpl::set_current_seed), raised
    # before anything is enqueued.
    CaptureRule("if you need this call to be captured", Verdict.RECOVERABLE),
    CaptureRule("can be called during stream capture only if", Verdict.RECOVERABLE),
    # torch refuses a copy from pageable host memory while capturing (bincount, ctc_loss and
    # hadamard_transform of FlagGems ed2508bc on an H200): nothing was enqueued.
    CaptureRule("cannot copy between cpu and cuda tensors during cuda graph capture",
                Verdict.RECOVERABLE),
)


def _optional(value: str) -> str | None:
    return None if value.strip().lower() in _NOT_AVAILABLE else value.strip()


def _optional_int(value: str, field: str, line: str) -> int | None:
    text = _optional(value)
    if text is None:
        return None
    try:
        return int(float(text))
    except ValueError:
        raise ValueError(f"nvidia-smi: {field} {text!r} is not a number in {line!r}") from None


def parse_nvidia_smi_csv(text: str) -> list[Device]:
    """Parse `nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits` output.

    Blank output gives []; a line that does not have the queried fields raises ValueError, so a
    changed nvidia-smi fails loudly instead of looking like a host without GPUs. "N/A",
    "[N/A]" and "[Not Supported]" become None.
    """
    devices = []
    for line in text.splitlines():
        if not line.strip():
            continue
        row = next(csv.reader([line], skipinitialspace=True))
        if len(row) != len(QUERY_FIELDS):
            raise ValueError(f"nvidia-smi: expected {len(QUERY_FIELDS)} fields "
                             f"({', '.join(QUERY_FIELDS)}), got {len(row)} in {line!r}")
        index, name, uuid, driver, memory, clock = row
        position = _optional_int(index, "index", line)
        if position is None:
            raise ValueError(f"nvidia-smi: no device index in {line!r}")
        devices.append(Device(
            index=position,
            name=name.strip(),
            uuid=_optional(uuid),
            driver=_optional(driver),
            memory_mib=_optional_int(memory, "memory.total", line),
            sm_clock_mhz=_optional_int(clock, "clocks.sm", line),
        ))
    return devices


def gpu_container_args(engine: str, devices: Sequence[str]) -> tuple[str, ...]:
    """docker's `--gpus` (NVIDIA Container Toolkit); podman names the GPUs through CDI."""
    if engine == "podman":
        return tuple(f"--device=nvidia.com/gpu={d}" for d in (devices or ("all",)))
    # docker splits --gpus on commas unless the device list is quoted inside the value
    return ("--gpus", f'"device={",".join(devices)}"' if devices else "all")


BACKEND = Backend(
    name="cuda",
    aliases=("nvidia",),
    vendor="nvidia",
    torch_device="cuda",
    visibility_vars=("CUDA_VISIBLE_DEVICES",),
    smi_command=SMI_COMMAND,
    parse_devices=parse_nvidia_smi_csv,
    graph_class="torch.cuda.CUDAGraph",
    upstream_graph_bench="triton.testing.do_bench_cudagraph",
    capture_rules=CUDA_CAPTURE_RULES,
    unknown_capture_verdict=Verdict.FATAL,
    python_modules=("torch", "triton", "flag_gems"),
    container_device_args=gpu_container_args,
    # FlagTree's RemoveLayoutConversions switch as this stack spells it (FlagTree sources).
    switches={"RLC_ENHANCE": "FLAGTREE_RLC_ENHANCE"},
    # Triton's NVIDIA backend reads these when it compiles (triton/knobs.py, nvidia section).
    compiler_variables=("DISABLE_PTXAS_OPT", "DISABLE_LLVM_OPT"),
    slurm_unit="gpu",  # Slurm sets CUDA_VISIBLE_DEVICES for a GPU GRES task
    apptainer_flags=("--nv",),
    open_clocks=nvml.open_clocks,
)
