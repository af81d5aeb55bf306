"""On MUSA, drop FlagGems' CUDA skip guards from benchmarks that need only flag_gems.device.

Some benchmarks are guarded by `torch.cuda.is_available()`, which is False under torch_musa
although they run on `flag_gems.device`. OVERRIDES lists those guards, each pinned to one file
(relative to the FlagGems checkout) and one exact `reason=`, decided by reading FlagGems at
ed2508bc. Nothing happens unless `flag_gems.vendor_name` is the musa backend's vendor. Every
other CUDA guard of that commit is kept on purpose (KEPT), because the benchmark truly needs:

- cuDNN or CUDA-only attention kernels in its torch baseline: test_cudnn_attention_forward.py,
  test_scaled_dot_product_cudnn_attention.py, test_flash_attention_backward.py (its five guards
  share one reason; the cuDNN and mem-efficient aten baselines have no MUSA kernel).
- FlashAttention forward: test_flash_attention_forward.py (flash_attention_forward is on
  FlagGems' mthreads op_black_list.yaml).
- vLLM's CUDA ops as baseline: test_apply_repetition_penalties.py (which also lists mthreads
  in UNSUPPORTED_VENDORS), test_cp_gather_indexer_k_quant_cache.py,
  test_indexer_k_quant_and_cache.py, and, allocating on device="cuda" besides,
  test_deepseek_v4_attention_combine_topk_swa_indices.py,
  test_deepseek_v4_attention_compute_global_topk_indices_and_lens.py,
  test_deepseek_v4_attention_dequantize_and_gather_k_cache.py,
  test_deepseek_v4_attention_fused_q_kv_rmsnorm.py.
- DeepGEMM and arch-specific FP8/FP4 paths: test_fp8_fp4_mega_moe.py (Blackwell SM100),
  test_fp8_fp4_mqa_logits.py and test_fp8_mqa_logits.py (Hopper SM90),
  test_fp8_paged_mqa_logits_perf.py (vLLM + DeepGEMM + Hopper).
- `flag_gems.device != "cuda"`, a device restriction its authors wrote on purpose:
  test_FLA/test_chunk_gated_delta_rule_perf.py, test_embedding_dense_backward.py,
  test_fused_indexer_q_rope_quant.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import backends

BACKEND = "musa"


@dataclass(frozen=True)
class Guard:
    """A skipif guard: its file (posix, relative to the FlagGems dir) and its exact reason."""

    file: str
    reason: str


OVERRIDES: tuple[Guard, ...] = (
    # torch.fft.fft has a MUSA kernel (torch_musa's _fft_c2c); flag_gems.fft is plain Triton.
    Guard("benchmark/test_fft.py", "CUDA is not available"),
    # aten._scaled_dot_product_attention_math is the device-generic math path.
    Guard("benchmark/test_scaled_dot_product_attention_math.py", "CUDA is not available"),
    # Module-level pytestmark; without vLLM the baseline is FlagGems' own non-TLE Triton kernel.
    Guard("benchmark/test_top_k_per_row_prefill.py", "CUDA device required"),
)


def _kept(reason: str, *files: str) -> tuple[Guard, ...]:
    return tuple(Guard(f"benchmark/{file}", reason) for file in files)


# Grouped as in the module docstring; a test checks that this and OVERRIDES cover every guard.
KEPT: tuple[Guard, ...] = (
    *_kept("CUDA is not available", "test_cudnn_attention_forward.py",
           "test_flash_attention_backward.py", "test_flash_attention_forward.py"),
    *_kept("_scaled_dot_product_cudnn_attention is a CUDA-only operator (cuDNN)",
           "test_scaled_dot_product_cudnn_attention.py"),
    *_kept("CUDA required", "test_apply_repetition_penalties.py",
           "test_cp_gather_indexer_k_quant_cache.py", "test_indexer_k_quant_and_cache.py"),
    *_kept("requires cuda and vllm deepseek_v4_ops.combine_topk_swa_indices",
           "test_deepseek_v4_attention_combine_topk_swa_indices.py"),
    *_kept("requires cuda and vllm deepseek_v4_ops.compute_global_topk_indices_and_lens",
           "test_deepseek_v4_attention_compute_global_topk_indices_and_lens.py"),
    *_kept("requires cuda with fp8e4nv support and vllm "
           "deepseek_v4_ops.dequantize_and_gather_k_cache",
           "test_deepseek_v4_attention_dequantize_and_gather_k_cache.py"),
    *_kept("requires cuda and vllm deepseek_v4_ops.fused_q_kv_rmsnorm",
           "test_deepseek_v4_attention_fused_q_kv_rmsnorm.py"),
    *_kept("requires CUDA with Blackwell architecture (SM100+)", "test_fp8_fp4_mega_moe.py"),
    *_kept("requires CUDA with Hopper architecture (SM90+)", "test_fp8_fp4_mqa_logits.py",
           "test_fp8_mqa_logits.py"),
    *_kept("requires CUDA + vLLM + DeepGEMM + Hopper", "test_fp8_paged_mqa_logits_perf.py"),
    *_kept("benchmark requires CUDA device", "test_FLA/test_chunk_gated_delta_rule_perf.py"),
    *_kept("CUDA backend is not available for this benchmark.",
           "test_embedding_dense_backward.py"),
    *_kept("requires CUDA", "test_fused_indexer_q_rope_quant.py"),
)

# Dropped guards and how many items each one freed, for the collection report.
dropped_key = pytest.StashKey[dict[Guard, int]]()


def find_override(file: str | None, reason: object,
                  overrides: tuple[Guard, ...] = OVERRIDES) -> Guard | None:
    """The override for a skipif with `reason` in `file`, or None: both must match exactly."""
    if file is None or not isinstance(reason, str):
        return None
    guard = Guard(file, reason)
    return guard if guard in overrides else None


def dispatches_to_backend_vendor() -> bool:
    """True when flag_gems imports and dispatches to the musa backend's vendor."""
    try:
        import flag_gems
    except ImportError:
        return False
    return getattr(flag_gems, "vendor_name", None) == backends.get(BACKEND).vendor


def _relative_file(path: Path, rootpath: Path) -> str | None:
    try:
        return path.relative_to(rootpath).as_posix()
    except ValueError:
        return None


def _drop_guards(item: pytest.Item, file: str, dropped: dict[Guard, int]) -> None:
    # iter_markers walks own_markers up the chain; only nodes of the item's own file (function,
    # class, module) are touched, so a package-level mark with the same reason stays.
    for node in item.listchain():
        if node.path != item.path:
            continue
        kept = []
        for mark in node.own_markers:
            reason = mark.kwargs.get("reason") if mark.name == "skipif" else None
            guard = find_override(file, reason)
            if guard is None:
                kept.append(mark)
            else:
                dropped[guard] = dropped.get(guard, 0) + 1
        node.own_markers[:] = kept


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: FlagGems' conftest, the harness's later plugins and pytest's own deselection
    # must see the items without the dropped guards.
    dropped: dict[Guard, int] = {}
    config.stash[dropped_key] = dropped
    if not dispatches_to_backend_vendor():
        return
    for item in items:
        file = _relative_file(item.path, config.rootpath)
        if file is not None:
            _drop_guards(item, file, dropped)


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    # The terminal reporter prints these right after "collected N items", at any verbosity,
    # so run.log records every dropped guard before the first result.
    return [f'COMPAT_SKIP_DROPPED file={guard.file} reason="{guard.reason}" marks={count}'
            for guard, count in config.stash.get(dropped_key, {}).items()]
