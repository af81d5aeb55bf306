"""The backend registry, each vendor's record, its device parser on recorded output, its capture
verdicts, and the rule that no vendor is named outside harness/backends/."""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import harness
from harness import backends
from harness.backends import Backend, CaptureVerdict, Device, Registry
from harness.backends.ascend import parse_npu_smi_info
from harness.backends.cuda import parse_nvidia_smi_csv
from harness.backends.musa import parse_mthreads_gmi
from harness.backends.rocm import parse_rocm_json
from harness.errors import UsageError

SMI = Path(__file__).resolve().parents[1] / "data" / "smi"
ALIASES = {
    "cuda": ("nvidia",),
    "musa": ("mthreads", "mt"),
    "rocm": ("amd", "hip"),
    "ascend": ("npu", "huawei"),
    "cpu": (),
}
ACCELERATORS = ("cuda", "musa", "rocm", "ascend")


def sample(name: str) -> str:
    return (SMI / name).read_text(encoding="utf-8")


# --- registry ---------------------------------------------------------------------------------

@pytest.mark.parametrize("key,name", [(n, n) for n in ALIASES]
                         + [(a, n) for n, aliases in ALIASES.items() for a in aliases])
def test_every_name_and_alias_finds_its_backend(key, name):
    assert backends.get(key).name == name


@pytest.mark.parametrize("key,name", [("CUDA", "cuda"), (" Nvidia ", "cuda"), ("MT", "musa"),
                                      ("Huawei", "ascend"), ("HIP", "rocm")])
def test_lookup_ignores_case_and_surrounding_space(key, name):
    assert backends.get(key).name == name


def test_registry_holds_exactly_the_five_backends_and_their_aliases():
    reg = backends.registry()
    assert reg.names() == sorted(ALIASES)
    assert reg.accepted() == sorted([*ALIASES, *(a for v in ALIASES.values() for a in v)])


def test_unknown_name_is_a_usage_error_listing_every_accepted_name():
    with pytest.raises(UsageError) as info:
        backends.get("tpu")
    message = str(info.value)
    assert "'tpu'" in message
    for accepted in backends.registry().accepted():
        assert accepted in message


def test_registering_a_name_twice_raises():
    reg = Registry()
    reg.register(backends.get("cuda"))
    with pytest.raises(ValueError, match="'cuda'"):
        reg.register(backends.get("cuda"))


def test_an_alias_that_collides_with_a_registered_name_raises():
    reg = Registry()
    reg.register(backends.get("cuda"))
    impostor = dataclasses.replace(backends.get("rocm"), aliases=("nvidia",))
    with pytest.raises(ValueError, match="'nvidia'"):
        reg.register(impostor)
    assert reg.names() == ["cuda"]


def test_records_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        backends.get("cuda").vendor = "other"  # type: ignore[misc]


def test_importing_the_vendor_modules_probes_nothing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("hardware probed at import time")

    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(shutil, "which", refuse)
    reg = Registry()
    for name in ALIASES:
        reg.register(importlib.reload(importlib.import_module(f"harness.backends.{name}")).BACKEND)
    assert reg.names() == sorted(ALIASES)


# --- the facts of each record -----------------------------------------------------------------

@pytest.mark.parametrize("name,vendor,torch_device,graph_class", [
    ("cuda", "nvidia", "cuda", "torch.cuda.CUDAGraph"),
    ("musa", "mthreads", "musa", "torch.musa.MUSAGraph"),
    ("rocm", "amd", "cuda", "torch.cuda.CUDAGraph"),
    ("ascend", "ascend", "npu", "torch.npu.NPUGraph"),
    ("cpu", None, "cpu", None),
])
def test_vendor_torch_device_and_graph_class(name, vendor, torch_device, graph_class):
    backend = backends.get(name)
    assert (backend.vendor, backend.torch_device, backend.graph_class) == (
        vendor, torch_device, graph_class)
    assert backend.can_capture is (graph_class is not None)
    assert backend.is_accelerator is (name != "cpu")


@pytest.mark.parametrize("name,modules", [
    ("cuda", ("torch", "triton", "flag_gems")),
    ("musa", ("torch", "triton", "flag_gems", "torch_musa")),
    ("rocm", ("torch", "triton", "flag_gems")),
    ("ascend", ("torch", "triton", "flag_gems", "torch_npu")),
    ("cpu", ("torch",)),
])
def test_python_modules(name, modules):
    assert backends.get(name).python_modules == modules


def test_capture_deny_list_and_compat_plugins_are_musa_only():
    for backend in backends.registry().all():
        if backend.name == "musa":
            assert backend.capture_deny_ops == frozenset({"unique2"})
            assert backend.compat_plugins == ("harness.plugins.compat_musa",)
        else:
            assert backend.capture_deny_ops == frozenset(), backend.name
            assert backend.compat_plugins == (), backend.name


@pytest.mark.parametrize("name,expected", [
    ("cuda", {"CUDA_VISIBLE_DEVICES": "2,3"}),
    ("musa", {"MUSA_VISIBLE_DEVICES": "2,3"}),
    # HIP only: ROCR filters first and HIP indexes into what is left, so both would double-filter.
    ("rocm", {"HIP_VISIBLE_DEVICES": "2,3"}),
    ("ascend", {"ASCEND_RT_VISIBLE_DEVICES": "2,3"}),
    ("cpu", {}),
])
def test_visibility_env_sets_only_the_first_variable(name, expected):
    backend = backends.get(name)
    assert backend.visibility_env(["2", "3"]) == expected
    assert backend.visibility_env([]) == {}


def test_rocm_reads_rocr_visibility_but_never_sets_it():
    rocm = backends.get("rocm")
    assert rocm.visibility_vars == ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
    assert "ROCR_VISIBLE_DEVICES" not in rocm.visibility_env(["0"])


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_to_dict_is_json_serializable_and_complete(name):
    backend = backends.get(name)
    data = json.loads(json.dumps(backend.to_dict()))
    assert data["name"] == name
    assert data["aliases"] == list(ALIASES[name])
    assert data["smi_command"] == list(backend.smi_command)
    assert [r["verdict"] for r in data["capture_rules"]] == [
        r.verdict.value for r in backend.capture_rules]
    assert data["unknown_capture_verdict"] == "fatal"


# --- device parsers on recorded output (provenance in tests/data/smi/README.md) ---------------

def test_nvidia_smi_csv_recorded_on_an_h200():
    assert parse_nvidia_smi_csv(sample("nvidia-smi-h200.csv")) == [Device(
        index=0, name="NVIDIA H200", uuid="GPU-3d80fb82-b713-6e21-9257-45d989cbd289",
        driver="580.159.04", memory_mib=143771, sm_clock_mhz=480)]


def test_nvidia_smi_csv_several_devices_and_not_available_fields():
    text = ("0, NVIDIA H200, GPU-aaaa, 580.159.04, 143771, 1980\n"
            "1, NVIDIA H200, [N/A], 580.159.04, [N/A], [Not Supported]\n")
    first, second = parse_nvidia_smi_csv(text)
    assert (first.index, first.sm_clock_mhz) == (0, 1980)
    assert second == Device(index=1, name="NVIDIA H200", uuid=None, driver="580.159.04",
                            memory_mib=None, sm_clock_mhz=None)


def test_mthreads_gmi_one_s4000_with_the_1x_layout():
    # The tool's own numbers are kept: this sample is the FAQ's IOMMU case (total reads 32768).
    assert parse_mthreads_gmi(sample("mthreads-gmi-s4000.txt")) == [Device(
        index=0, name="MTT S4000", uuid=None, driver="1.2.0", memory_mib=32768)]


def test_mthreads_gmi_eight_s5000_with_the_2x_layout():
    devices = parse_mthreads_gmi(sample("mthreads-gmi-s5000x8.txt"))
    assert [d.index for d in devices] == list(range(8))
    assert {(d.name, d.driver, d.memory_mib, d.uuid) for d in devices} == {
        ("MTT S5000", "5.1.0-server", 81920, None)}


def test_mthreads_gmi_ignores_the_process_table():
    text = sample("mthreads-gmi-s4000.txt") + (
        "\nProcesses:\nID   PID       Process name          GPU Memory\n"
        "0    1123      /usr/lib/xorg/Xorg     134MiB\n")
    assert [d.index for d in parse_mthreads_gmi(text)] == [0]


def test_rocm_smi_json_recorded_on_an_rx_7900_xt():
    assert parse_rocm_json(sample("rocm-smi-rx7900xt.json")) == [Device(
        index=0, name="Radeon RX 7900 XT", uuid=None, driver=None, memory_mib=20464)]


def test_rocm_smi_json_takes_driver_from_system_and_unique_id_as_uuid():
    # The shape rocm_smi.py's formatJson writes: "card<N>" objects and a "system" object.
    text = json.dumps({
        "card1": {"Card series": "Instinct MI210", "Unique ID": "0x2b1c",
                  "VRAM Total Memory (B)": "68702699520"},
        "card0": {"Card Series": "Instinct MI210", "Unique ID": "N/A",
                  "VRAM Total Memory (B)": "68702699520"},
        "system": {"Driver version": "6.8.5"},
    })
    devices = parse_rocm_json("WARNING: a notice before the document\n" + text)
    assert [(d.index, d.uuid, d.driver, d.memory_mib) for d in devices] == [
        (0, None, "6.8.5", 65520), (1, "0x2b1c", "6.8.5", 65520)]


@pytest.mark.parametrize("wrap", [lambda gpus: gpus, lambda gpus: {"gpu_data": gpus}],
                         ids=["list", "gpu_data"])
def test_amd_smi_static_json_both_wrappings(wrap):
    # CONSTRUCTED, not recorded: no complete public `amd-smi static --json` capture was found.
    # Keys follow amdsmi_cli/amdsmi_commands.py (ROCm/amdsmi 0ceca28f) and the "gpu_data"
    # wrapper a real ROCm 7 output shows (nathaninline/ajean#39); see tests/data/smi/README.md.
    gpus = [{"gpu": 0,
             "asic": {"market_name": "AMD Instinct MI300X", "asic_serial": "0x6F1F0A2B3C4D5E6F"},
             "vram": {"type": "HBM3", "size": {"value": 196592, "unit": "MB"}},
             "driver": {"name": "amdgpu", "version": "6.10.5"}},
            {"gpu": 1, "asic": {"market_name": "AMD Instinct MI300X", "asic_serial": "N/A"},
             "vram": {"size": "196592 MB"}, "driver": {"driver_version": "6.10.5"}}]
    assert parse_rocm_json(json.dumps(wrap(gpus))) == [
        Device(index=0, name="AMD Instinct MI300X", uuid="0x6F1F0A2B3C4D5E6F", driver="6.10.5",
               memory_mib=196592),
        Device(index=1, name="AMD Instinct MI300X", uuid=None, driver="6.10.5",
               memory_mib=196592)]


def test_npu_smi_910b_one_chip_per_npu_indexed_by_npu_id():
    # This sample keeps the trailing space the source has on every line.
    assert parse_npu_smi_info(sample("npu-smi-910b2c.txt")) == [
        Device(index=0, name="910B2C", driver="23.0.2.1", memory_mib=65536),
        Device(index=1, name="910B2C", driver="23.0.2.1", memory_mib=65536)]


def test_npu_smi_a3_two_chips_per_npu_indexed_by_phy_id():
    devices = parse_npu_smi_info(sample("npu-smi-a3-ascend910.txt"))
    assert [(d.index, d.name, d.memory_mib) for d in devices] == [
        (0, "Ascend910", 65536), (1, "Ascend910", 65536),
        (2, "Ascend910", 65536), (3, "Ascend910", 65536)]
    assert {d.driver for d in devices} == {"25.2.0"}


def test_npu_smi_310p_memory_usage_without_hbm_column_indexed_by_device():
    devices = parse_npu_smi_info(sample("npu-smi-310p3.txt"))
    assert [(d.index, d.name, d.memory_mib) for d in devices] == [
        (0, "310P3", 44280), (1, "310P3", 43693), (2, "310P3", 44280), (3, "310P3", 43693)]


def test_npu_smi_310b_single_chip():
    assert parse_npu_smi_info(sample("npu-smi-310b4.txt")) == [
        Device(index=0, name="310B4", driver="23.0.0", memory_mib=15609)]


PARSERS = [parse_nvidia_smi_csv, parse_mthreads_gmi, parse_rocm_json, parse_npu_smi_info]


@pytest.mark.parametrize("parse", PARSERS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("text", ["", "\n", "   \n\n"])
def test_blank_output_is_no_devices(parse, text):
    assert parse(text) == []


@pytest.mark.parametrize("parse", PARSERS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("text", ["command not found", "Failed to initialize: unknown error\n",
                                  "{\"unexpected\": true}"])
def test_garbage_output_raises_a_value_error_naming_the_tool(parse, text):
    # Garbage fails loudly: a changed tool must not look like a host without devices.
    with pytest.raises(ValueError, match=r"nvidia-smi|mthreads-gmi|rocm|amd-smi|npu-smi"):
        parse(text)


def test_nvidia_smi_csv_rejects_a_non_numeric_memory_field():
    with pytest.raises(ValueError, match="memory.total"):
        parse_nvidia_smi_csv("0, NVIDIA H200, GPU-a, 580.159.04, lots, 1980\n")


# --- enumeration and detection -----------------------------------------------------------------

def fake_run(stdout: str = "", returncode: int = 0, raises: Exception | None = None):
    calls: list[list[str]] = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        if raises is not None:
            raise raises
        return subprocess.CompletedProcess(cmd, returncode, stdout=stdout, stderr="")

    run.calls = calls  # type: ignore[attr-defined]
    return run


@pytest.mark.parametrize("name,filename,count", [
    ("cuda", "nvidia-smi-h200.csv", 1), ("musa", "mthreads-gmi-s5000x8.txt", 8),
    ("rocm", "rocm-smi-rx7900xt.json", 1), ("ascend", "npu-smi-a3-ascend910.txt", 4)])
def test_enumerate_devices_runs_the_smi_command_and_parses_it(name, filename, count):
    backend = backends.get(name)
    run = fake_run(sample(filename))
    assert len(backend.enumerate_devices(run=run)) == count
    assert run.calls == [list(backend.smi_command)]


@pytest.mark.parametrize("name", ACCELERATORS)
def test_enumerate_devices_is_empty_when_the_tool_fails(name):
    backend = backends.get(name)
    assert backend.enumerate_devices(run=fake_run("ignored", returncode=9)) == []
    assert backend.enumerate_devices(run=fake_run(raises=FileNotFoundError("gone"))) == []
    timeout = subprocess.TimeoutExpired(list(backend.smi_command), 30)
    assert backend.enumerate_devices(run=fake_run(raises=timeout)) == []


def test_cpu_enumerates_nothing_and_runs_nothing():
    run = fake_run("0, NVIDIA H200, GPU-a, 580.159.04, 143771, 1980\n")
    assert backends.get("cpu").enumerate_devices(run=run) == []
    assert run.calls == []


@pytest.mark.parametrize("tool,name", [("nvidia-smi", "cuda"), ("mthreads-gmi", "musa"),
                                       ("rocm-smi", "rocm"), ("npu-smi", "ascend")])
def test_detect_picks_the_backend_whose_tool_is_on_path(tool, name):
    assert backends.detect(lambda t: f"/usr/bin/{t}" if t == tool else None).name == name


def test_detect_falls_back_to_cpu_without_any_tool():
    asked: list[str] = []
    assert backends.detect(lambda t: asked.append(t)).name == "cpu"
    assert sorted(asked) == sorted(backends.get(n).smi_command[0] for n in ACCELERATORS)


# --- capture verdicts ------------------------------------------------------------------------

# Verbatim str() of the exceptions torch 2.11.0+cu130 raised on an NVIDIA H200 (driver
# 580.159.04) in this project's session, from `with torch.cuda.graph(g):` around the op.
_H200_TAIL = ("CUDA kernel errors might be asynchronously reported at some other API call, so "
              "the stacktrace below might be incorrect.\nFor debugging consider passing "
              "CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side "
              "assertions.\n")
H200_INVALIDATED = (
    "CUDA error: operation failed due to a previous error during capture\nSearch for "
    "`cudaErrorStreamCaptureInvalidated' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
    "group__CUDART__TYPES.html for more information.\n" + _H200_TAIL)
H200_REFUSED = "CUDA error: operation not permitted when stream is capturing"  # first line only
H200_DEVICE_ASSERT = (
    "CUDA error: device-side assert triggered\nSearch for `cudaErrorAssert' in "
    "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more "
    "information.\n" + _H200_TAIL)
H200_SEED = ("CUDAGeneratorImpl::set_current_seed can be called during stream capture only if "
             "new seed is the same as the original seed.")

CUDA_WORDINGS = [
    (H200_INVALIDATED, CaptureVerdict.POISONED),
    (H200_REFUSED, CaptureVerdict.RECOVERABLE),
    (H200_DEVICE_ASSERT, CaptureVerdict.FATAL),
    (H200_SEED, CaptureVerdict.RECOVERABLE),
    ("CUDA error: operation would make the legacy stream depend on a capturing blocking stream",
     CaptureVerdict.RECOVERABLE),
    ("CUDA error: operation not permitted on an event last recorded in a capturing stream",
     CaptureVerdict.RECOVERABLE),
    ("Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture. If you need this "
     "call to be captured, please file an issue. Current cudaStreamCaptureStatus: Active",
     CaptureVerdict.RECOVERABLE),
    # bincount, ctc_loss, hadamard_transform, fp8_fp4_mega_moe_torch_ref on an H200 (torch 2.11)
    ("Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor "
     "is pinned. Please use tensor.pin_memory() or allocate the tensor with pin_memory=True.",
     CaptureVerdict.RECOVERABLE),
    ("CUDA error: an illegal memory access was encountered", CaptureVerdict.FATAL),
    ("CUDA error: unspecified launch failure", CaptureVerdict.FATAL),
    ("CUDA error: misaligned address", CaptureVerdict.FATAL),
    ("CUDA error: an illegal instruction was encountered", CaptureVerdict.FATAL),
]


def hipify(message: str) -> str:
    return message.replace("CUDA error", "HIP error").replace("cudaError", "hipError")


@pytest.mark.parametrize("message,verdict", CUDA_WORDINGS)
def test_cuda_capture_wordings(message, verdict):
    assert backends.get("cuda").classify_capture_failure(message) is verdict


@pytest.mark.parametrize("message,verdict", CUDA_WORDINGS)
def test_rocm_shares_the_cuda_wordings_under_hip_spelling(message, verdict):
    assert backends.get("rocm").classify_capture_failure(hipify(message)) is verdict


@pytest.mark.parametrize("message,verdict", [
    ("hipErrorStreamCaptureUnsupported", CaptureVerdict.RECOVERABLE),
    ("hipErrorStreamCaptureImplicit", CaptureVerdict.RECOVERABLE),
    ("hipErrorCapturedEvent", CaptureVerdict.RECOVERABLE),
    ("hipErrorStreamCaptureInvalidated", CaptureVerdict.POISONED),
])
def test_rocm_error_names_alone(message, verdict):
    assert backends.get("rocm").classify_capture_failure(message) is verdict


@pytest.mark.parametrize("message,verdict", [
    ("MUSA error: unknown error", CaptureVerdict.POISONED),
    ("current_seed is not callable during capture", CaptureVerdict.RECOVERABLE),
    ("MUSA error: operation not permitted when stream is capturing", CaptureVerdict.RECOVERABLE),
    ("Cannot call MUSAGeneratorImpl::current_seed during MUSA graph capture. If you need this "
     "call to be captured, please file an issue. Current musaStreamCaptureStatus: Active",
     CaptureVerdict.RECOVERABLE),
    ("MUSA error: operation failed due to a previous error during capture",
     CaptureVerdict.POISONED),
    ("MUSA error: an illegal memory access was encountered", CaptureVerdict.FATAL),
])
def test_musa_capture_wordings(message, verdict):
    assert backends.get("musa").classify_capture_failure(message) is verdict


def test_the_device_assertions_footer_alone_is_not_fatal():
    # torch appends it to every CUDA error; only the first line tells what happened.
    cuda = backends.get("cuda")
    assert cuda.classify_capture_failure(H200_REFUSED + "\n" + _H200_TAIL) \
        is CaptureVerdict.RECOVERABLE


def test_musa_specific_wordings_do_not_leak_into_cuda():
    cuda = backends.get("cuda")
    assert cuda.classify_capture_failure("MUSA error: unknown error") is CaptureVerdict.FATAL
    assert cuda.classify_capture_failure("current_seed is not callable during capture") \
        is CaptureVerdict.FATAL


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_an_unknown_wording_is_fatal(name):
    assert backends.get(name).classify_capture_failure("something new went wrong") \
        is CaptureVerdict.FATAL


def raised_from(inner: str, outer: str) -> BaseException:
    """An exception whose __context__ is another, as `with torch.cuda.graph(g):` leaves them."""
    try:
        try:
            raise RuntimeError(inner)
        except RuntimeError:
            raise RuntimeError(outer)  # noqa: B904 - the implicit context is the point
    except RuntimeError as exc:
        return exc


def test_exception_chain_lets_the_refusal_decide_over_the_invalidated_capture():
    # Recorded on the H200: after this pair, the next eager kernel ran and gave correct results.
    exc = raised_from(H200_REFUSED, H200_INVALIDATED)
    cuda = backends.get("cuda")
    assert cuda.classify_capture_failure(str(exc)) is CaptureVerdict.POISONED
    assert cuda.classify_capture_exception(exc) is CaptureVerdict.RECOVERABLE


def test_exception_chain_fatal_anywhere_wins():
    cuda = backends.get("cuda")
    assert cuda.classify_capture_exception(
        raised_from("CUDA error: an illegal memory access was encountered", H200_REFUSED)
    ) is CaptureVerdict.FATAL
    assert cuda.classify_capture_exception(
        raised_from(H200_REFUSED, H200_DEVICE_ASSERT)) is CaptureVerdict.FATAL


def test_exception_chain_follows_explicit_cause_and_defaults_when_nothing_matches():
    cuda = backends.get("cuda")
    try:
        raise RuntimeError("wrapper") from RuntimeError(H200_REFUSED)
    except RuntimeError as exc:
        assert cuda.classify_capture_exception(exc) is CaptureVerdict.RECOVERABLE
    assert cuda.classify_capture_exception(raised_from("a", "b")) is CaptureVerdict.FATAL


# --- no vendor above harness/backends/ -------------------------------------------------------

VENDOR_WORD = re.compile(
    r"(?<![A-Za-z0-9])(nvidia|cuda|musa|mthreads|rocm|amd|hip|ascend|npu|huawei)(?![A-Za-z0-9])",
    re.IGNORECASE)


def test_the_vendor_word_pattern_catches_identifiers_and_spares_longer_words():
    assert VENDOR_WORD.search("os.environ['CUDA_VISIBLE_DEVICES']")
    assert VENDOR_WORD.search("import torch_musa")
    assert VENDOR_WORD.search('if backend == "rocm":')
    assert not VENDOR_WORD.search("relationship, chip, champion, cudagraph")


def test_no_vendor_is_named_in_harness_outside_backends():
    """A vendor difference is a field of the backend record (STYLE.md rule 2). Plugins a backend
    lists in compat_plugins are that vendor's own code and are exempt."""
    root = Path(harness.__file__).parent
    exempt = {m for b in backends.registry().all() for m in b.compat_plugins}
    offenders = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] == "backends":
            continue
        if ".".join(("harness", *relative.with_suffix("").parts)) in exempt:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if VENDOR_WORD.search(line):
                offenders.append(f"harness/{relative}:{number}: {line.strip()}")
    assert not offenders, "vendor named outside harness/backends/:\n" + "\n".join(offenders)


def test_every_backend_is_a_backend_record():
    assert all(isinstance(b, Backend) for b in backends.registry().all())


def test_explain_reports_the_deciding_message_of_the_chain():
    cuda = backends.get("cuda")
    try:
        try:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        except RuntimeError:
            raise RuntimeError("CUDA error: operation failed due to a previous error during "
                               "capture") from None
    except RuntimeError as exc:
        outer = exc
    # `from None` hides the cause from tracebacks but keeps __context__, as torch's does not.
    verdict, message = cuda.explain_capture_exception(outer)
    assert verdict is CaptureVerdict.RECOVERABLE and "not permitted" in message
    alone = RuntimeError("something nobody classified")
    assert cuda.explain_capture_exception(alone) == (CaptureVerdict.FATAL,
                                                     "something nobody classified")
